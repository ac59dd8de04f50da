"""`fmcluster verify`: results of the acceptance kit (real tool outputs from tests/data/verify and
the nccl-tests outputs of tests/data/verify-plain, under the kit's node markers) judged against the
cluster's figures and the physical limits of their paths, per group and node."""

from __future__ import annotations

import json
import re

import pytest

from fmcluster.cli import main as cli
from fmcluster.facts import catalog
from fmcluster.kits import jobs, verify
from fmcluster.kits.verify import Verdict
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from tests.support.paths import DATA, ROOT

PLAIN = DATA / "verify-plain"
DATA = DATA / "verify"
SPEC = "examples/p5-pcs.yaml"  # group gpu: 16 x p5.48xlarge, 4,800 GiB of Lustre; PCS: ENA on every EFA card
EKS_SPEC = "examples/p5-hyperpod-eks.yaml"  # group train: 8 x p5.48xlarge; efa-only EFA, ENA on card 0 only
# 2 x p5 on AWS Batch: 483.35 GB/s at 16 GiB; the README shows no '# Rank' lines
P5_NCCL = (DATA / "nccl-all_reduce-p5-aws-batch-mpirun-tag-output.txt").read_text()
# 2 x p5 (16 x NVIDIA H100 80GB HBM3, its '# Rank' lines), 479.71 GB/s at 16 GiB, NCCL_DEBUG=INFO naming EFA
HEALTHY = (PLAIN / "nccl-all_reduce-2x-p5-healthy.txt").read_text()
# the same nodes' kind without NCCL_DEBUG=INFO: 362.10 GB/s at 16 GiB
NO_DEBUG = (PLAIN / "nccl-all_reduce-2x-p5-no-nccl-debug.txt").read_text()
# one p5 node, 8 x H100 on ip-10-1-0-11: 478.97 GB/s at 16 GiB
ONE_NODE = (PLAIN / "nccl-all_reduce-1x-p5-one-node.txt").read_text()
P5_TRUNCATED = (DATA / "nccl-all_reduce-2x-p5-slurm-srun-label-table-only.txt").read_text()
P4D_SOCKET = (DATA / "nccl-all_reduce-2x-p4d-eks-efa.txt").read_text()
DCGM_FAIL = (DATA / "dcgm-diag-r3-8x-h100-fail.txt").read_text()
DCGM_PASS = (DATA / "dcgm-diag-r2-virtualclient.json").read_text()
# the failing table with every result a Pass, as a passing run prints it (the dcgmi stand-in of
# tests/support/gpu_standins does the same): 8 x H100, "GPU Device IDs Detected | 2330,..."
DCGM_PASS_TEXT = re.sub(r"\| (Fail|Skip) - All( *)\|", r"| Pass      \2|", DCGM_FAIL)
FIO = (DATA / "fio-write-virtualclient-fio-3.26.json").read_text()
# the p5 run as NCCL_DEBUG=INFO shows it, with the p4d fixture's real lines naming EFA before it
EFA_LINES = "".join(line + "\n" for line in P4D_SOCKET.splitlines()[:60]
                    if "NET/OFI Selected Provider is efa" in line or "Using network AWS Libfabric" in line)
P5_NCCL_INFO = EFA_LINES + P5_NCCL


def marked(*parts: tuple[str, str, str], group: str = "gpu") -> str:
    """(host, test, text) parts as one kit output file of `group`."""
    return "".join(jobs.MARKER.format(node=host, group=group, test=test) + "\n" + text.rstrip("\n") + "\n"
                   for host, test, text in parts)


def one_node(host: str, busbw: float = 478.97) -> str:
    """ONE_NODE as node `host` ran it, `busbw` its out-of-place figure at 16 GiB (in place 0.53 less,
    as in the file)."""
    return ONE_NODE.replace("ip-10-1-0-11", host).replace("478.97", f"{busbw:.2f}").replace(
        "478.44", f"{busbw - 0.53:.2f}")


def nccl_job(nodes: int = 16) -> str:
    """The whole output of the kit's nccl job on the p5 group (16 nodes): each operation inside each
    node (ONE_NODE as node ip-10-0-0-N ran it), then across the nodes (HEALTHY)."""
    parts = []
    for operation in ("all_reduce", "all_gather", "reduce_scatter"):
        parts += [(f"ip-10-0-0-{i}", f"nccl-{operation}-node", one_node(f"ip-10-0-0-{i}")) for i in range(1, nodes + 1)]
        parts.append(("all", f"nccl-{operation}-nodes", HEALTHY))
    return marked(*parts)


def smoke(world=128, losses=(1.5, 1.2, 0.9), outcome="ok"):
    lines = [f"fmcluster-smoke step={i} loss={loss} tokens_per_s=1000.0 host=ip-10-0-0-1 rank=0"
             for i, loss in enumerate(losses, 1)]
    return "\n".join([*lines, f"fmcluster-smoke {outcome} world_size={world} steps={len(losses)}", ""])


@pytest.fixture(scope="module")
def model():
    return resolve(loader.load(ROOT / SPEC).spec)


def rows(report, test, node=None, group="gpu"):
    return [r for r in report.rows if r.test == test and (node is None or r.node == node) and r.group == group]


def test_a_fast_run_across_nodes_passes_against_the_efa_figure(model):
    report = verify.judge_results(model, {"nccl.out": marked(("all", "nccl-all_reduce-nodes", HEALTHY))})
    (row,) = rows(report, "nccl-all_reduce-nodes")
    assert row.verdict is Verdict.PASS and row.measured == pytest.approx(479.71) and row.note == ""
    assert (row.pass_at, row.warn_at, row.unit, row.source) == (340, 240, "GB/s", "nccl.out")
    # 2 nodes of 8 ranks over 400 GB/s of EFA a node: busbw at most 400 x 2/1 x 15/16 = 750, +10%
    assert row.impossible_above == 825


def test_a_run_that_does_not_say_it_used_efa_is_at_best_a_warning(model):
    """The README's p5 run names neither its network nor its GPUs, and on PCS, whose `efa`
    interfaces carry ENA on all 32 cards, no figure tells EFA from ENA."""
    assert EFA_LINES and "NCCL INFO" not in NO_DEBUG
    report = verify.judge_results(model, {"nccl.out": marked(("all", "nccl-all_reduce-nodes", P5_NCCL))})
    (row,) = rows(report, "nccl-all_reduce-nodes")
    assert row.verdict is Verdict.WARN and "NCCL_DEBUG=INFO" in row.note and "names no GPU" in row.note
    with_info = verify.judge_results(model, {"nccl.out": marked(("all", "nccl-all_reduce-nodes", P5_NCCL_INFO))})
    assert rows(with_info, "nccl-all_reduce-nodes")[0].note.startswith("the output names no GPU")
    (pcs,) = rows(verify.judge_results(model, {"n.out": marked(("all", "nccl-all_reduce-nodes", NO_DEBUG))}),
                  "nccl-all_reduce-nodes")
    assert pcs.verdict is Verdict.WARN and pcs.measured == 362.1
    assert "nor does its 362.1 GB/s: it is within 750.0 GB/s, the most ENA can carry" in pcs.note
    assert "ENA on 32 cards 3,200 Gbps" in pcs.note


def test_a_figure_only_efa_carries_is_evidence_of_efa():
    """2 x p5 at 362 GB/s without NCCL_DEBUG=INFO, on nodes whose only ENA interface is on card 0
    (100 Gbps: busbw at most 12.5 x 2 x 15/16 = 23.4 GB/s over TCP): EFA carried it."""
    eks = resolve(loader.load(ROOT / EKS_SPEC).spec)
    report = verify.judge_results(eks, {"n.out": marked(("all", "nccl-all_reduce-nodes", NO_DEBUG), group="train")})
    (row,) = rows(report, "nccl-all_reduce-nodes", group="train")
    assert row.verdict is Verdict.PASS and row.measured == 362.1
    assert row.note.startswith("EFA inferred, the output has no NCCL INFO lines: 362.1 GB/s is above 23.4 GB/s, "
                               "the most ENA can carry (p5.48xlarge: ENA on card 0 100 Gbps")
    # with NCCL's INFO lines, what they say decides, whatever the figure
    sockets = "ip-10-1-0-21:52107:52107 [0] NCCL INFO Using network Socket\n" + NO_DEBUG
    (tcp,) = rows(verify.judge_results(eks, {"n.out": marked(("all", "nccl-all_reduce-nodes", sockets),
                                                               group="train")}), "nccl-all_reduce-nodes", group="train")
    assert tcp.verdict is Verdict.FAIL and tcp.note.startswith("NCCL did not use EFA (network Socket")


def test_a_truncated_run_fails(model):
    report = verify.judge_results(model, {"nccl.out": marked(("ip-10-0-0-2", "nccl-all_reduce-node", P5_TRUNCATED))})
    (row,) = rows(report, "nccl-all_reduce-node", "ip-10-0-0-2")
    assert row.verdict is Verdict.FAIL and "truncated" in row.note


def test_slow_nodes_are_named(model):
    report = verify.judge_results(model, {"nccl.out": marked(
        ("ip-10-0-0-1", "nccl-all_reduce-node", one_node("ip-10-0-0-1")),
        ("ip-10-0-0-9", "nccl-all_reduce-node", one_node("ip-10-0-0-9", 178.97)))})
    assert rows(report, "nccl-all_reduce-node", "ip-10-0-0-1")[0].verdict is Verdict.PASS
    assert rows(report, "nccl-all_reduce-node", "ip-10-0-0-9")[0].verdict is Verdict.FAIL
    (named,) = rows(report, "nccl-all_reduce-node", "slow")
    assert named.verdict is Verdict.FAIL and named.note.endswith("ip-10-0-0-9")


def test_wrong_values_fail(model):
    wrong = P5_NCCL.replace("483.05      0", "483.05      3")
    report = verify.judge_results(model, {"nccl.out": marked(("all", "nccl-all_reduce-nodes", wrong))})
    (row,) = rows(report, "nccl-all_reduce-nodes")
    assert row.verdict is Verdict.FAIL and "wrong values" in row.note


def test_dcgm_failures_are_named_and_passes_pass(model):
    """The text names the node's GPUs (8 x PCI device 2330: H100), DCGM 3's JSON none."""
    report = verify.judge_results(model, {"dcgm.out": marked(("ip-10-0-0-1", "dcgm", DCGM_FAIL),
                                                               ("ip-10-0-0-2", "dcgm", DCGM_PASS_TEXT),
                                                               ("ip-10-0-0-3", "dcgm", DCGM_PASS))})
    failed, passed = rows(report, "dcgm", "ip-10-0-0-1")[0], rows(report, "dcgm", "ip-10-0-0-2")[0]
    assert failed.verdict is Verdict.FAIL and failed.note.startswith("GPU Memory: Warning: GPU 0 Error using CUDA")
    assert passed.verdict is Verdict.PASS and passed.note == "every test passed"
    unnamed = rows(report, "dcgm", "ip-10-0-0-3")[0]
    assert unnamed.verdict is Verdict.WARN and unnamed.note == (
        "the output names no GPU (DCGM 3's JSON lists no device IDs): its GPU model and count are not checked; "
        "every test passed")


@pytest.mark.parametrize("ids, ran_on", [
    ("20B2," * 7 + "20B2", "8 x NVIDIA A100-SXM4-80GB (PCI device 20B2)"),
    ("2330," * 3 + "2330", "4 x NVIDIA H100 80GB HBM3 (PCI device 2330)"),
    ("2330," * 7 + "2324", "7 x NVIDIA H100 80GB HBM3 (PCI device 2330) and 1 x PCI device 2324")])
def test_dcgm_on_other_gpus_fails_naming_both(model, ids, ran_on):
    text = DCGM_PASS_TEXT.replace("2330," * 7 + "2330", ids.ljust(39))
    (row,) = rows(verify.judge_results(model, {"dcgm.out": marked(("ip-10-0-0-1", "dcgm", text))}), "dcgm")
    assert row.verdict is Verdict.FAIL
    assert row.note == (f"dcgmi diag ran on {ran_on}; group gpu is p5.48xlarge: 8 x NVIDIA H100 80GB HBM3; "
                        "every test passed")


def test_dcgm_4_names_its_gpus_in_its_entity_groups(model):
    """DCGM 4's JSON (NVIDIA/DCGM testing/python3/dcgm_diag_schema.json: entity_groups[].entities[]
    with device_id), written here as that schema has it."""
    def document(device_id: str) -> str:
        return json.dumps({
            "DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{
                "name": "memory", "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": i,
                                               "status": "Pass"} for i in range(8)],
                "test_summary": {"status": "Pass"}}]}]},
            "entity_groups": [{"entity_group": "GPU", "entity_group_id": 1, "entities": [
                {"entity_id": i, "device_id": device_id, "serial_num": f"165232{i:07d}"} for i in range(8)]}],
            "metadata": {"version": "4.4.1", "Driver Version Detected": "580.95.05"}}, indent=2)

    h100 = verify.judge_results(model, {"d.out": marked(("ip-10-0-0-1", "dcgm", document("2330")))})
    assert rows(h100, "dcgm")[0].verdict is Verdict.PASS
    b200 = verify.judge_results(model, {"d.out": marked(("ip-10-0-0-1", "dcgm", document("2901")))})
    assert rows(b200, "dcgm")[0].note.startswith("dcgmi diag ran on 8 x NVIDIA B200 (PCI device 2901); group gpu")


def test_fio_on_the_file_system_is_summed_over_the_nodes(model):
    report = verify.judge_results(model, {"fio.out": marked(*[(f"ip-10-0-0-{i}", "fio-fsx", FIO) for i in range(4)])})
    (write,) = rows(report, "fio-fsx-write")
    assert write.node == "all" and "4 nodes together" in write.note
    assert write.pass_at == pytest.approx(937.5) and write.measured is not None


def test_the_smoke_test_needs_every_gpu_and_a_falling_loss(model):
    ok = verify.judge_results(model, {"smoke.out": marked(("all", "smoke", smoke()))})
    assert rows(ok, "smoke")[0].verdict is Verdict.PASS
    short = verify.judge_results(model, {"smoke.out": marked(("all", "smoke", smoke(world=64)))})
    assert rows(short, "smoke")[0].verdict is Verdict.FAIL and "world size 64" in rows(short, "smoke")[0].note
    rising = verify.judge_results(model, {"smoke.out": marked(("all", "smoke", smoke(losses=(1.0, 2.0))))})
    assert rows(rising, "smoke")[0].verdict is Verdict.FAIL


def test_tests_not_run_and_foreign_files_are_warnings(model):
    report = verify.judge_results(model, {"notes.txt": "hello\n"})
    assert rows(report, "dcgm")[0].verdict is Verdict.WARN and rows(report, "dcgm")[0].note == "no result: not run"
    assert not any(r.source == "notes.txt" for r in report.rows)
    assert report.not_judged == (("notes.txt", "not an output of nccl-tests (*_perf), dcgmi diag, fio (JSON or "
                                               "text) or the kit's smoke test"),)
    assert report.verdict is Verdict.WARN and report.judged == 0
    # a part under a marker of another cluster's kit: listed, not a row
    foreign = verify.judge_results(model, {"x.out": jobs.MARKER.format(node="n1", group="cpu", test="dcgm")
                                             + "\n" + DCGM_PASS})
    assert foreign.not_judged == (("x.out", "the kit's marker names node n1, group cpu, test dcgm: not a group "
                                            "and test of this cluster's kit"),)
    assert [r.note for r in foreign.rows if r.test == "dcgm"] == ["no result: not run"]


def test_the_command_exits_1_on_a_fail_and_prints_json(tmp_path, capsys):
    passing = tmp_path / "gpu-nccl-1.out"
    passing.write_text(nccl_job())
    assert cli(["verify", SPEC, str(passing)]) == 0
    text = capsys.readouterr().out
    assert "PASS     gpu    nccl-all_reduce-nodes" in text and text.rstrip().endswith("fail)")
    failing = tmp_path / "gpu-dcgm-2.out"
    failing.write_text(marked(("ip-10-0-0-1", "dcgm", DCGM_FAIL)))
    assert cli(["verify", SPEC, str(passing), str(failing), "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "FAIL" and report["groups"]["gpu"]["verdict"] == "FAIL"
    assert {r["test"] for r in report["groups"]["gpu"]["results"]} >= {"dcgm", "nccl-all_reduce-nodes", "smoke"}


def test_a_missing_results_file_is_an_error(capsys):
    assert cli(["verify", SPEC, "/nonexistent/results.out"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_a_run_across_nodes_without_efa_fails(model):
    """The healthy p5 run's NCCL uses EFA (NET/OFI efa, network AWS Libfabric); the same run over
    NCCL's sockets measured TCP, whatever its figure."""
    assert verify.parse_nccl_tests(HEALTHY).ofi_provider == "efa"
    sockets = HEALTHY.replace("Using network AWS Libfabric", "Using network Socket")
    sockets = "\n".join(line for line in sockets.splitlines() if "NET/OFI" not in line) + "\n"
    report = verify.judge_results(model, {"nccl.out": marked(("all", "nccl-all_reduce-nodes", sockets))})
    (row,) = rows(report, "nccl-all_reduce-nodes")
    assert row.verdict is Verdict.FAIL and "did not use EFA" in row.note


# ---- evidence: what the path can carry, and which GPUs ran -------------------------------------


def test_a_node_local_figure_above_what_nvlink_carries_is_impossible(model):
    """1,992 GB/s of all_reduce busbw on one p5 node: an H100's NVLink carries 900 GB/s, 450 each
    way, and an all_reduce's busbw is at most 2(n-1)/n of that (787.5 GB/s for 8 GPUs)."""
    report = verify.judge_results(model, {"nccl.out": marked(
        ("ip-10-0-0-1", "nccl-all_reduce-node", one_node("ip-10-0-0-1", 1992.4)),
        ("ip-10-0-0-2", "nccl-all_reduce-node", one_node("ip-10-0-0-2")))})
    impossible, healthy = rows(report, "nccl-all_reduce-node", "ip-10-0-0-1")[0], \
        rows(report, "nccl-all_reduce-node", "ip-10-0-0-2")[0]
    assert impossible.verdict is Verdict.FAIL and impossible.measured == 1992.4
    assert impossible.note == (
        "impossible: 1,992.4 GB/s is above 787.5 GB/s, the most NVLink can carry (p5.48xlarge: H100 at 900 GB/s "
        "NVLink per GPU, 450 each way (NVIDIA's datasheet); all_reduce busbw at most 2(n-1)/n of it, n = 8; 866.2 "
        "with the 10% margin for measurement)")
    assert healthy.verdict is Verdict.PASS and healthy.impossible_above == impossible.impossible_above == 866.25
    # all_gather: busbw at most NVLink's 450 GB/s a direction
    gather = one_node("ip-10-0-0-1", 498.97).replace("     float     sum", "     float    none")
    (row,) = rows(verify.judge_results(model, {"n.out": marked(("ip-10-0-0-1", "nccl-all_gather-node", gather))}),
                  "nccl-all_gather-node")
    assert row.verdict is Verdict.FAIL and row.note.startswith("impossible: 499 GB/s is above 450.0 GB/s")


def test_a_cross_node_figure_above_what_efa_carries_is_impossible(model):
    """2 x p5 at 912 GB/s: 400 GB/s of EFA a node carries at most 750 GB/s of busbw for 16 ranks."""
    fast = HEALTHY.replace("479.71", "912.40")
    (row,) = rows(verify.judge_results(model, {"n.out": marked(("all", "nccl-all_reduce-nodes", fast))}),
                  "nccl-all_reduce-nodes")
    assert row.verdict is Verdict.FAIL
    assert row.note.startswith("impossible: 912.4 GB/s is above 750.0 GB/s, the most EFA can carry (p5.48xlarge: "
                               "EFA 3,200 Gbps (EC2's NetworkPerformance), 400 GB/s a node each way; busbw at most "
                               "N/(N-1) x (n-1)/n of it, N = 2 nodes, n = 16 ranks")


def test_a_log_of_other_gpus_fails_naming_both(model):
    a100 = one_node("ip-10-0-0-1").replace("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB")
    (row,) = rows(verify.judge_results(model, {"n.out": marked(("ip-10-0-0-1", "nccl-all_reduce-node", a100))}),
                  "nccl-all_reduce-node")
    assert row.verdict is Verdict.FAIL and row.measured == 478.97
    assert row.note == "log ran on 8 x NVIDIA A100-SXM4-80GB; group gpu is p5.48xlarge: 8 x NVIDIA H100 80GB HBM3"
    # the real p4d run: its A100s are not the group's, whatever it measured
    (p4d,) = rows(verify.judge_results(model, {"n.out": marked(("all", "nccl-all_reduce-nodes", P4D_SOCKET))}),
                  "nccl-all_reduce-nodes")
    assert p4d.verdict is Verdict.FAIL
    assert p4d.note == ("log ran on 8 x A100-SXM4-40GB a node, 2 nodes; group gpu is p5.48xlarge: 8 x NVIDIA H100 "
                        "80GB HBM3")


def test_a_log_of_fewer_gpus_than_the_node_has_fails(model):
    four = "".join(line for line in one_node("ip-10-0-0-1").splitlines(keepends=True)
                   if not re.match(r"#  Rank  [4-7] ", line))
    (row,) = rows(verify.judge_results(model, {"n.out": marked(("ip-10-0-0-1", "nccl-all_reduce-node", four))}),
                  "nccl-all_reduce-node")
    assert row.verdict is Verdict.FAIL
    assert row.note == "log ran on 4 x NVIDIA H100 80GB HBM3; group gpu is p5.48xlarge: 8 x NVIDIA H100 80GB HBM3"


def test_a_log_that_names_no_gpu_is_a_warning_not_a_pass(model):
    """The kit's runs print their '# Rank' lines; the README's p5 table has none: it may be
    any GPU's."""
    no_ranks = "".join(line for line in one_node("ip-10-0-0-1").splitlines(keepends=True)
                       if not re.match(r"#\s+Rank ", line))
    (row,) = rows(verify.judge_results(model, {"n.out": marked(("ip-10-0-0-1", "nccl-all_reduce-node",
                                                                  no_ranks))}), "nccl-all_reduce-node")
    assert row.verdict is Verdict.WARN and row.measured == 478.97
    assert row.note == "the output names no GPU (no '# Rank' lines): its GPU model and count are not checked"


@pytest.mark.parametrize("gpu", catalog.GPUS, ids=lambda g: g.product_name)
def test_every_catalog_gpu_is_known_by_its_own_name_only(gpu):
    """The names NVIDIA's driver gives the GPUs (nccl-tests prints them): each is its own GPU's
    and no other's, though B200 is in GB200, H200 in GH200 and A100 in both A100s."""
    assert [other.product_name for other in catalog.GPUS if verify.gpu_named(other, gpu.product_name)] == \
        [gpu.product_name]


@pytest.mark.parametrize("gpu, name, same", [
    (catalog.H100, "H100 80GB HBM3", True),  # older drivers: no "NVIDIA "
    (catalog.H100, "NVIDIA H100 PCIe", False), (catalog.H100, "NVIDIA H100 NVL", False),
    (catalog.H100, "NVIDIA H800", False), (catalog.H100, "NVIDIA H100 94GB", False),
    (catalog.H200, "NVIDIA H200 141GB HBM3e", True), (catalog.H200, "NVIDIA GH200 480GB", False),
    (catalog.H200, "NVIDIA H200 NVL", False), (catalog.B200, "NVIDIA B200", True),
    (catalog.B200, "NVIDIA GB200", False), (catalog.GB200, "NVIDIA GB200", True),
    (catalog.B300, "NVIDIA B300", True), (catalog.B300, "NVIDIA GB300", False),
    (catalog.A100_40, "A100-SXM4-40GB", True), (catalog.A100_40, "NVIDIA A100-SXM4-80GB", False),
    (catalog.A100_80, "NVIDIA A100 80GB PCIe", False), (catalog.L40S, "NVIDIA L40S", True),
    (catalog.L40S, "NVIDIA L40", False)])
def test_gpu_names_as_tools_print_them(gpu, name, same):
    assert verify.gpu_named(gpu, name) is same


def test_fio_above_what_the_file_system_or_a_node_carries_is_impossible(model):
    """4,800 GiB of PERSISTENT_2 at 250 MB/s/TiB: its servers' network carries at most 1,300 MB/s
    a TiB (burst), 6,094 MB/s; a p5 node's network 3,200 Gbps, 400,000 MB/s."""
    document = json.loads(FIO)
    side = document["jobs"][0]["write"]  # fio's bw_bytes is its io_bytes over its runtime (ms)
    side["bw_bytes"], side["io_bytes"] = 500_000_000, 500_000 * side["runtime"]  # 500 MB/s a node: 8,000 on 16
    fast = json.dumps(document)
    report = verify.judge_results(model, {"fio.out": marked(*[(f"ip-10-0-0-{i}", "fio-fsx", fast)
                                                                for i in range(16)])})
    (write,) = rows(report, "fio-fsx-write")
    assert write.verdict is Verdict.FAIL and write.measured == 8000
    assert write.note.startswith("impossible: 8,000 MB/s is above 6,093.8 MB/s, the most the file system's servers "
                                 "can carry (4,800 GiB of PERSISTENT_2 at 1,300 MB/s/TiB of network throughput")
    assert write.impossible_above == 6703.125
    side["bw_bytes"], side["io_bytes"] = 450e9, 450e6 * side["runtime"]  # one node's 450 GB/s
    nodes = [("ip-10-0-0-1", "fio-fsx", json.dumps(document)), ("ip-10-0-0-2", "fio-fsx", FIO)]
    (one,) = rows(verify.judge_results(model, {"fio.out": marked(*nodes)}), "fio-fsx-write")
    assert one.verdict is Verdict.FAIL
    assert one.note.startswith("impossible: node ip-10-0-0-1's 450,000 MB/s is above 400,000.0 MB/s, the most a "
                               "p5.48xlarge node's network can carry (3,200 Gbps, EC2's NetworkPerformance")
    # what a file system of that size can serve passes: 16 nodes at 192.6 MB/s, 3,082 MB/s
    healthy = verify.judge_results(model, {"fio.out": marked(*[(f"ip-10-0-0-{i}", "fio-fsx", FIO)
                                                                 for i in range(16)])})
    assert rows(healthy, "fio-fsx-write")[0].verdict is Verdict.PASS
