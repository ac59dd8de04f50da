"""`fmcluster verify`: results of the acceptance kit (real tool outputs from tests/data/verify,
under the kit's node markers) judged against the cluster's figures, per group and node."""

from __future__ import annotations

import json

import pytest

from fmcluster.cli import main as cli
from fmcluster.kits import jobs, verdicts
from fmcluster.kits.verify import Verdict
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from tests.support.paths import DATA, ROOT

DATA = DATA / "verify"
SPEC = "examples/p5-pcs.yaml"  # group gpu: 16 x p5.48xlarge, 4,800 GiB of Lustre
# 2 x p5 on AWS Batch: 483.35 GB/s at 16 GiB
P5_NCCL = (DATA / "nccl-all_reduce-p5-aws-batch-mpirun-tag-output.txt").read_text()
P5_TRUNCATED = (DATA / "nccl-all_reduce-2x-p5-slurm-srun-label-table-only.txt").read_text()
P4D_SOCKET = (DATA / "nccl-all_reduce-2x-p4d-eks-efa.txt").read_text()
DCGM_FAIL = (DATA / "dcgm-diag-r3-8x-h100-fail.txt").read_text()
DCGM_PASS = (DATA / "dcgm-diag-r2-virtualclient.json").read_text()
FIO = (DATA / "fio-write-virtualclient-fio-3.26.json").read_text()
# the p5 run as NCCL_DEBUG=INFO shows it, with the p4d fixture's real lines naming EFA before it
EFA_LINES = "".join(line + "\n" for line in P4D_SOCKET.splitlines()[:60]
                    if "NET/OFI Selected Provider is efa" in line or "Using network AWS Libfabric" in line)
P5_NCCL_INFO = EFA_LINES + P5_NCCL


def marked(*parts: tuple[str, str, str]) -> str:
    """(host, test, text) parts as one kit output file of group gpu."""
    return "".join(jobs.MARKER.format(node=host, group="gpu", test=test) + "\n" + text.rstrip("\n") + "\n"
                   for host, test, text in parts)


def smoke(world=128, losses=(1.5, 1.2, 0.9), outcome="ok"):
    lines = [f"fmcluster-smoke step={i} loss={loss} tokens_per_s=1000.0 host=ip-10-0-0-1 rank=0"
             for i, loss in enumerate(losses, 1)]
    return "\n".join([*lines, f"fmcluster-smoke {outcome} world_size={world} steps={len(losses)}", ""])


@pytest.fixture(scope="module")
def model():
    return resolve(loader.load(ROOT / SPEC).spec)


def rows(report, test, node=None):
    return [r for r in report.rows if r.test == test and (node is None or r.node == node)]


def test_a_fast_run_across_nodes_passes_against_the_efa_figure(model):
    assert EFA_LINES
    report = verdicts.judge_results(model, {"nccl.out": marked(("all", "nccl-all_reduce-nodes", P5_NCCL_INFO))})
    (row,) = rows(report, "nccl-all_reduce-nodes")
    assert row.verdict is Verdict.PASS and row.measured == pytest.approx(483.35)
    assert (row.pass_at, row.warn_at, row.unit) == (340, 240, "GB/s")


def test_a_run_that_does_not_say_it_used_efa_is_at_best_a_warning(model):
    report = verdicts.judge_results(model, {"nccl.out": marked(("all", "nccl-all_reduce-nodes", P5_NCCL))})
    (row,) = rows(report, "nccl-all_reduce-nodes")
    assert row.verdict is Verdict.WARN and "NCCL_DEBUG=INFO" in row.note


def test_a_truncated_run_fails(model):
    report = verdicts.judge_results(model, {"nccl.out": marked(("ip-10-0-0-2", "nccl-all_reduce-node", P5_TRUNCATED))})
    (row,) = rows(report, "nccl-all_reduce-node", "ip-10-0-0-2")
    assert row.verdict is Verdict.FAIL and "truncated" in row.note


def test_slow_nodes_are_named(model):
    slow = P5_NCCL.replace("483.05", "183.05").replace("483.35", "183.35")
    report = verdicts.judge_results(model, {"nccl.out": marked(
        ("ip-10-0-0-1", "nccl-all_reduce-node", P5_NCCL), ("ip-10-0-0-9", "nccl-all_reduce-node", slow))})
    assert rows(report, "nccl-all_reduce-node", "ip-10-0-0-1")[0].verdict is Verdict.PASS
    assert rows(report, "nccl-all_reduce-node", "ip-10-0-0-9")[0].verdict is Verdict.FAIL
    (named,) = rows(report, "nccl-all_reduce-node", "slow")
    assert named.verdict is Verdict.FAIL and named.note.endswith("ip-10-0-0-9")


def test_wrong_values_fail(model):
    wrong = P5_NCCL.replace("483.05      0", "483.05      3")
    report = verdicts.judge_results(model, {"nccl.out": marked(("all", "nccl-all_reduce-nodes", wrong))})
    (row,) = rows(report, "nccl-all_reduce-nodes")
    assert row.verdict is Verdict.FAIL and "wrong values" in row.note


def test_dcgm_failures_are_named_and_passes_pass(model):
    report = verdicts.judge_results(model, {"dcgm.out": marked(("ip-10-0-0-1", "dcgm", DCGM_FAIL),
                                                               ("ip-10-0-0-2", "dcgm", DCGM_PASS))})
    failed, passed = rows(report, "dcgm", "ip-10-0-0-1")[0], rows(report, "dcgm", "ip-10-0-0-2")[0]
    assert failed.verdict is Verdict.FAIL and failed.note
    assert passed.verdict is Verdict.PASS


def test_fio_on_the_file_system_is_summed_over_the_nodes(model):
    report = verdicts.judge_results(model, {"fio.out": marked(*[(f"ip-10-0-0-{i}", "fio-fsx", FIO) for i in range(4)])})
    (write,) = rows(report, "fio-fsx-write")
    assert write.node == "all" and "4 nodes together" in write.note
    assert write.pass_at == pytest.approx(937.5) and write.measured is not None


def test_the_smoke_test_needs_every_gpu_and_a_falling_loss(model):
    ok = verdicts.judge_results(model, {"smoke.out": marked(("all", "smoke", smoke()))})
    assert rows(ok, "smoke")[0].verdict is Verdict.PASS
    short = verdicts.judge_results(model, {"smoke.out": marked(("all", "smoke", smoke(world=64)))})
    assert rows(short, "smoke")[0].verdict is Verdict.FAIL and "world size 64" in rows(short, "smoke")[0].note
    rising = verdicts.judge_results(model, {"smoke.out": marked(("all", "smoke", smoke(losses=(1.0, 2.0))))})
    assert rows(rising, "smoke")[0].verdict is Verdict.FAIL


def test_tests_not_run_and_foreign_files_are_warnings(model):
    report = verdicts.judge_results(model, {"notes.txt": "hello\n"})
    assert rows(report, "dcgm")[0].verdict is Verdict.WARN and rows(report, "dcgm")[0].note == "no result: not run"
    assert not any(r.source == "notes.txt" for r in report.rows)
    assert report.not_judged == (("notes.txt", "not an output of nccl-tests (*_perf), dcgmi diag, fio (JSON or "
                                               "text) or the kit's smoke test"),)
    assert report.verdict is Verdict.WARN and report.judged == 0
    # a part under a marker of another cluster's kit: listed, not a row
    foreign = verdicts.judge_results(model, {"x.out": jobs.MARKER.format(node="n1", group="cpu", test="dcgm")
                                             + "\n" + DCGM_PASS})
    assert foreign.not_judged == (("x.out", "the kit's marker names node n1, group cpu, test dcgm: not a group "
                                            "and test of this cluster's kit"),)
    assert [r.note for r in foreign.rows if r.test == "dcgm"] == ["no result: not run"]


def test_the_command_exits_1_on_a_fail_and_prints_json(tmp_path, capsys):
    passing = tmp_path / "gpu-nccl-1.out"
    passing.write_text(marked(("all", "nccl-all_reduce-nodes", P5_NCCL_INFO)))
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
    """The p4d fixture's NCCL uses EFA (NET/OFI efa, network AWS Libfabric); the same run over
    NCCL's sockets measured TCP, whatever its figure."""
    from fmcluster.kits import verify

    assert verify.parse_nccl_tests(P4D_SOCKET).ofi_provider == "efa"
    sockets = P4D_SOCKET.replace("Using network AWS Libfabric", "Using network Socket")
    sockets = "\n".join(line for line in sockets.splitlines() if "NET/OFI" not in line) + "\n"
    report = verdicts.judge_results(model, {"nccl.out": marked(("all", "nccl-all_reduce-nodes", sockets))})
    (row,) = rows(report, "nccl-all_reduce-nodes")
    assert row.verdict is Verdict.FAIL and "did not use EFA" in row.note
