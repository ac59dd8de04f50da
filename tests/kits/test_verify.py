"""fmcluster.kits.verify: the parsers of the acceptance kit's outputs, on real outputs of nccl-tests,
dcgmi diag and fio (tests/data/verify/, each with its provenance in PROVENANCE.md), on variants
cut from them here (truncated, broken), and the judging core. No network, no GPU."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from fmcluster.kits import common, verify
from fmcluster.kits.verify import Verdict
from fmcluster.model.expected import Expected
from tests.support import paths

DATA = paths.DATA / "verify"
P4D = "nccl-all_reduce-2x-p4d-eks-efa.txt"
A3 = "nccl-all_reduce-2x-a3-mega-h100.txt"
P5_TABLE = "nccl-all_reduce-2x-p5-slurm-srun-label-table-only.txt"
P5_BATCH = "nccl-all_reduce-p5-aws-batch-mpirun-tag-output.txt"
DCGM_FAIL = "dcgm-diag-r3-8x-h100-fail.txt"
DCGM_R2 = "dcgm-diag-r2-virtualclient.json"
DCGM_R3 = "dcgm-diag-r3-virtualclient.json"
FIO_WRITE = "fio-write-virtualclient-fio-3.26.json"
FIO_RW = "fio-readwrite-virtualclient-fio-3.26.json"
FIO_PKB = "fio-randrw-pkb-gce-pd-fio-2.17.json"
NCCL = (P4D, A3, P5_TABLE, P5_BATCH)
DCGM = (DCGM_FAIL, DCGM_R2, DCGM_R3)
FIO = (FIO_WRITE, FIO_RW, FIO_PKB)


def read(name: str) -> str:
    return (DATA / name).read_text()


def cut(text: str, fraction: float) -> str:
    """The first part of a text, as a job killed mid-output leaves it."""
    return text[: int(len(text) * fraction)]


def smoke_log(losses, *, final="fmcluster-smoke ok world_size=16 steps={n}", prefix=""):
    lines = [f"{prefix}fmcluster-smoke step={i} loss={loss} tokens_per_s={1000.0 + i:.1f} host=gpu-1 rank=0"
             for i, loss in enumerate(losses, 1)]
    if final:
        lines.append(prefix + final.format(n=len(losses)))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# the fixtures are what PROVENANCE.md says


def test_every_fixture_has_its_provenance():
    provenance = read("PROVENANCE.md")
    fixtures = sorted(p.name for p in DATA.iterdir() if p.name != "PROVENANCE.md")
    assert fixtures == sorted(NCCL + DCGM + FIO)
    for name in fixtures:
        assert f"`{name}`" in provenance, f"{name} has no line in PROVENANCE.md"


# ---------------------------------------------------------------------------------------------
# nccl-tests


def test_nccl_multi_node_efa_p4d():
    result = verify.parse_nccl_tests(read(P4D))
    assert result.complete and result.errors == ()
    assert result.operation == "all_reduce" and result.operation_from == "table"  # old output: no name in it
    assert len(result.ranks) == 16
    assert result.hosts == ("nccl-tests-efa-16-worker-0", "nccl-tests-efa-16-worker-1")
    assert result.ranks[8] == verify.NcclRank(8, "nccl-tests-efa-16-worker-1", 0, "0x10", "A100-SXM4-40GB", None, 25)
    assert result.network == "AWS Libfabric" and result.ofi_provider == "efa"
    assert result.nccl_version == "2.9.9+cuda11.2"
    assert len(result.rows) == 30 and result.rows[0].size == 8 and result.largest.size == 4294967296
    assert result.rows[0].root is None and result.rows[0].out_of_place.error == 2e-07
    assert (result.busbw_out_of_place, result.busbw_in_place, result.busbw) == (43.81, 43.72, 43.81)
    assert result.avg_busbw == 11.2432 and result.out_of_bounds == 0 and result.wrong == 0


def test_nccl_new_layout_with_groups_and_wrong_columns():
    result = verify.parse_nccl_tests(read(A3))
    assert result.complete and result.errors == ()
    assert result.operation == "all_reduce"
    assert [r.rank for r in result.ranks] == list(range(16))
    assert result.ranks[0] == verify.NcclRank(0, "ztan-mig-235z", 0, "0000:04:00", "NVIDIA H100 80GB HBM3", 0, 6899)
    assert result.hosts == ("ztan-mig-235z", "ztan-mig-gq73")
    assert result.largest == verify.NcclRow(8589934592, 2147483648, "float", "sum", -1,
                                            verify.NcclTiming(47535.0, 180.71, 338.82, 0),
                                            verify.NcclTiming(47743.0, 179.92, 337.35, 0))
    assert result.avg_busbw == 70.742 and result.wrong == 0
    assert result.network is None  # NCCL_DEBUG was off


@pytest.mark.parametrize("name, busbw, avg", [(P5_BATCH, 483.35, 156.742), (P5_TABLE, 487.26, None)])
def test_nccl_launcher_prefixes_are_read_through(name, busbw, avg):
    """mpirun --tag-output ([1,0]<stdout>:) and srun --label (0: ): the table is read either way."""
    result = verify.parse_nccl_tests(read(name))
    assert len(result.rows) == 32 and result.largest.size == 17179869184
    assert result.busbw == busbw and result.avg_busbw == avg
    assert result.operation == "all_reduce"


def test_nccl_table_without_summary_is_truncated():
    """The awsome-distributed-ai README shows the p5 table without its summary lines."""
    result = verify.parse_nccl_tests(read(P5_TABLE))
    assert not result.complete
    assert any("truncated" in e for e in result.errors)
    assert result.busbw_out_of_place == 487.09  # what there is, is still read


@pytest.mark.parametrize("name", NCCL)
@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.5, 0.9, 0.99])
def test_nccl_cut_anywhere_is_incomplete_and_never_raises(name, fraction):
    text = cut(read(name), fraction)
    result = verify.parse_nccl_tests(text)
    assert not result.complete
    assert result.errors


def test_nccl_cut_in_the_table_keeps_the_rows_before():
    text = read(A3)
    head = text[: text.index("   268435456")]
    result = verify.parse_nccl_tests(head)
    assert not result.complete and result.largest.size == 134217728 and result.busbw == 153.76


def test_nccl_operation_from_the_header_and_from_the_binary_name():
    """nccl-tests 2.17+ prints `# Collective test starting: NAME`; otherwise the `*_perf` name of a
    command line the job echoed; the table is the last resort."""
    table = read(A3)
    headed = "# nccl-tests version 2.17.9 nccl-headers=22902 nccl-library=22902\n" \
             "# Collective test starting: reduce_scatter_perf\n" + table
    result = verify.parse_nccl_tests(headed)
    assert (result.operation, result.operation_from, result.version, result.nccl_version) == \
        ("reduce_scatter", "header", "2.17.9", "2.29.2")
    echoed = "+ srun --mpi=pmix /opt/nccl-tests/build/all_gather_perf -b 8 -e 16G -f 2\n" + table
    assert (verify.parse_nccl_tests(echoed).operation, verify.parse_nccl_tests(echoed).operation_from) == \
        ("all_gather", "binary")


def test_nccl_wrong_values_are_counted():
    """Data corruption shows as #wrong in the table and a FAILED summary: made from the real table
    by setting #wrong of the largest size and the summary as nccl-tests prints them."""
    lines = read(A3).splitlines()
    last = next(i for i, line in enumerate(lines) if line.lstrip().startswith("8589934592"))
    fields = lines[last].split()
    fields[8], fields[12] = "763876", "530181"
    lines[last] = "  " + "  ".join(fields)
    lines = [line.replace("# Out of bounds values : 0 OK", "# Out of bounds values : 2 FAILED") for line in lines]
    result = verify.parse_nccl_tests("\n".join(lines))
    assert result.largest.out_of_place.wrong == 763876 and result.largest.in_place.wrong == 530181
    assert result.out_of_bounds == 2 and result.wrong == 763876 + 530181 + 2
    assert any("wrong values" in e for e in result.errors) and any("FAILED" in e for e in result.errors)


def test_nccl_two_runs_in_one_text_are_each_read_and_the_worst_returned():
    """Each run of a text is a result of its own (parse_nccl_runs); parse_nccl_tests returns the
    worst, here the slower, whichever comes last."""
    for text in (read(A3) + read(P4D), read(P4D) + read(A3)):
        assert [run.busbw for run in verify.parse_nccl_runs(text)] in ([338.82, 43.81], [43.81, 338.82])
        result = verify.parse_nccl_tests(text)
        assert result.busbw == 43.81 and result.runs == 2 and any("2 runs" in e for e in result.errors)


@pytest.mark.parametrize("garbage", ["", "\n\n", "Segmentation fault (core dumped)\n", "\x00\xff" * 50,
                                     "#       size         count      type\n 8 2 float sum x y z\n",
                                     "test: Test CUDA failure common.cu:941 'system not yet initialized'\n"])
def test_nccl_garbage_gives_errors(garbage):
    result = verify.parse_nccl_tests(garbage)
    assert not result.complete and result.errors and result.busbw is None


def test_nccl_failure_lines_are_errors():
    text = read(A3).split("#       size")[0] + "test: Test CUDA failure common.cu:941 'system not yet initialized'\n"
    result = verify.parse_nccl_tests(text)
    assert any("Test CUDA failure" in e for e in result.errors) and not result.complete


_DROPPED = ("srun: error: eio_message_socket_accept: slurm_receive_msg[10.1.2.3:41234]: "
            "Zero Bytes were transmitted or received\n")


@pytest.mark.parametrize("where", ["before", "inside", "after"])
def test_a_connection_srun_dropped_is_not_a_failure_of_the_run(where):
    """Slurm's eio_message_socket_accept logs a connection that brought no message and serves the next
    (its senders retry): a busy node leaves one anywhere in a job's output, the table included."""
    text = read(A3)
    head, table = text.split("#       size", 1)
    rows = table.split("\n")
    inside = head + "#       size" + "\n".join(rows[:6] + [_DROPPED.strip()] + rows[6:])
    texts = {"before": _DROPPED + text, "inside": inside, "after": text + _DROPPED}
    result = verify.parse_nccl_tests(texts[where])
    assert result.complete and not result.errors and result.busbw == verify.parse_nccl_tests(text).busbw


@pytest.mark.parametrize("line", [
    "srun: error: p5-st-1-1: task 3: Exited with exit code 1",
    "srun: error: p5-st-1-[1-2]: tasks 0-15: Killed",
    "srun: error: p5-st-1-2: task 9: Segmentation fault (core dumped)",
    "srun: error: Timed out waiting for job step to complete",
    "srun: error: Error on msg accept socket: Too many open files",
    "slurmstepd: error: *** STEP 12.0 ON p5-st-1-1 CANCELLED AT 2026-01-01T00:00:00 DUE TO TIME LIMIT ***",
    "srun: error: eio_message_socket_accept: something else: Zero Bytes were transmitted or received",
])
def test_srun_errors_other_than_a_dropped_connection_fail_the_run(line):
    result = verify.parse_nccl_tests(read(A3) + line + "\n")
    assert any(line[:40] in e for e in result.errors)


# ---------------------------------------------------------------------------------------------
# DCGM


def test_dcgm_text_failure_with_its_messages():
    result = verify.parse_dcgm_diag(read(DCGM_FAIL))
    assert result.format == "text" and result.complete and result.errors == ()
    assert (result.version, result.driver) == ("3.3.8", "560.35.03")
    by_name = {t.name: t for t in result.tests}
    assert len(result.tests) == 13
    assert by_name["Denylist"] == verify.DcgmTest("Denylist", "Deployment", "pass", "", ())
    assert by_name["PCIe"].status == "skip" and by_name["PCIe"].where == "All"
    memory = by_name["GPU Memory"]
    assert memory.status == "fail" and memory.category == "Hardware" and len(memory.messages) == 8
    # the wrapped message is joined back as dcgmi cut it, mid-word included
    assert memory.messages[0] == (
        "Warning: GPU 0 Error using CUDA API cuInit Check DCGM and system logs for errors. Reset GPU. Restart "
        "DCGM. Rerun diagnostics. Unable to initialize CUDA library: 'system not yet initialized'. . Please "
        "check if a CUDA sample program can be run successfully on this host. Refer to "
        "https://github.com/nvidia/cuda-samples")
    assert by_name["Persistence Mode"].messages == ()  # the Info row under it is informational
    assert result.verdict is Verdict.FAIL and result.failed == (memory,)


def test_dcgm_names_the_gpus_it_ran_on():
    """The text's "GPU Device IDs Detected" (one PCI device ID a GPU); DCGM 3's JSON lists none; a
    value longer than its cell wraps onto the next row, as dcgmi wraps its messages."""
    text = read(DCGM_FAIL)
    assert verify.parse_dcgm_diag(text).device_ids == ("2330",) * 8
    assert verify.parse_dcgm_diag(read(DCGM_R2)).device_ids == ()
    sixteen = text.replace("| 2330,2330,2330,2330,2330,2330,2330,2330        |",
                           "| 2330,2330,2330,2330,2330,2330,2330,2330,2330,2  |\n"
                           "|                           | 330,2330,2330,2330,2330,2330,2330              |")
    assert sixteen != text and verify.parse_dcgm_diag(sixteen).device_ids == ("2330",) * 16


@pytest.mark.parametrize("given, read_as", [(["2330"], ("2330",)), (["0x2335"], ("2335",)),
                                            (["233010DE", "20b2"], ("2330", "20B2")), (["", None, "n/a"], ())])
def test_dcgm_device_ids_in_json(given, read_as):
    """DCGM 4 lists the GPUs in entity_groups (NVIDIA/DCGM testing/python3/dcgm_diag_schema.json);
    an ID may come with 0x or NVIDIA's vendor ID (10DE) after it."""
    document = json.loads(read(DCGM_R3))
    document["entity_groups"] = [{"entity_group": "GPU", "entity_group_id": 1,
                                  "entities": [{"entity_id": i, "device_id": d} for i, d in enumerate(given)]},
                                 {"entity_group": "CPU", "entity_group_id": 7, "entities": [{"entity_id": 0,
                                                                                             "device_id": "1234"}]}]
    assert verify.parse_dcgm_diag(json.dumps(document)).device_ids == read_as


@pytest.mark.parametrize("name, count", [(DCGM_R2, 11), (DCGM_R3, 16)])
def test_dcgm_json_pass(name, count):
    result = verify.parse_dcgm_diag(read(name))
    assert result.format == "json" and result.complete and result.errors == ()
    assert len(result.tests) == count and result.verdict is Verdict.PASS
    assert {t.category for t in result.tests} >= {"Deployment", "Integration", "Hardware"}


def test_dcgm_json_skip_is_not_a_failure():
    result = verify.parse_dcgm_diag(read(DCGM_R3))
    eud = next(t for t in result.tests if t.name == "EUD Test")
    assert eud.status == "skip" and eud.where == "GPU 0" and result.verdict is Verdict.PASS


def test_dcgm_json_with_lines_around_it():
    """dcgmi may print a line before its JSON (DCGM's own test reads one); the kit adds markers."""
    text = "WARNING: THIS SHOULD NOT HAPPEN\n" + read(DCGM_R2) + "\nsrun: error: node exited\n"
    result = verify.parse_dcgm_diag(text)
    assert result.complete and result.verdict is Verdict.PASS and len(result.tests) == 11


def test_dcgm_json_failure_made_from_the_real_document():
    document = json.loads(read(DCGM_R3))
    memory = document["DCGM GPU Diagnostic"]["test_categories"][2]["tests"][0]
    memory["results"][0]["status"] = "Fail"
    memory["results"][0]["warnings"] = [{"warning": "GPU 0 has uncorrectable memory errors", "error_id": 95}]
    result = verify.parse_dcgm_diag(json.dumps(document, indent=2))
    failed = result.failed
    assert result.verdict is Verdict.FAIL and [t.name for t in failed] == ["GPU Memory"]
    assert failed[0].messages == ("GPU 0 has uncorrectable memory errors",) and failed[0].where == "GPU 0"


def test_dcgm_4_json_shape():
    """DCGM 4's document (`"DCGM Diagnostic"`, one result per entity, `test_summary`), in the shape of
    NVIDIA/DCGM testing/python3/dcgm_diag_schema.json: written here, no complete real one was found
    (PROVENANCE.md)."""
    document = {
        "DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{
            "name": "memory",
            "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"},
                        {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 1, "status": "Fail",
                         "warnings": [{"error_category": 1, "error_id": 95, "error_severity": 2,
                                       "warning": "GPU 1 has uncorrectable memory errors"}]}],
            "test_summary": {"status": "Fail"}}]}]},
        "entity_groups": [], "metadata": {"version": "4.2.3", "Driver Version Detected": "580.82.09"}}
    result = verify.parse_dcgm_diag("Successfully ran diagnostic for group.\n" + json.dumps(document, indent=1))
    assert (result.version, result.driver) == ("4.2.3", "580.82.09")
    (memory,) = result.tests
    assert memory.status == "fail" and memory.where == "GPU 1"
    assert memory.messages == ("GPU 1 has uncorrectable memory errors",) and result.verdict is Verdict.FAIL


@pytest.mark.parametrize("name", DCGM)
@pytest.mark.parametrize("fraction", [0.05, 0.3, 0.6, 0.95])
def test_dcgm_cut_anywhere_is_incomplete_and_fails(name, fraction):
    result = verify.parse_dcgm_diag(cut(read(name), fraction))
    assert not result.complete and result.errors and result.verdict is Verdict.FAIL


def test_dcgm_text_cut_in_the_table_keeps_the_tests_before():
    text = read(DCGM_FAIL)
    result = verify.parse_dcgm_diag(text[: text.index("| Memory Bandwidth")])
    assert not result.complete and "GPU Memory" in [t.name for t in result.tests]
    assert result.errors == ("truncated: the table is not closed",)


@pytest.mark.parametrize("garbage", ["", "Error: unable to establish a connection to the specified host: localhost\n",
                                     "{", "{\"DCGM GPU Diagnostic\": ", "| a | b |\n", "\x00" * 10])
def test_dcgm_garbage_gives_errors(garbage):
    result = verify.parse_dcgm_diag(garbage)
    assert not result.complete and result.errors and result.verdict is Verdict.FAIL


# ---------------------------------------------------------------------------------------------
# fio


def test_fio_write_document():
    result = verify.parse_fio(read(FIO_WRITE))
    assert result.complete and result.errors == () and result.documents == 1
    assert result.version == "fio-3.26-19-ge7e53"
    assert result.write_bw == 192599430.0 and result.read_bw == 0.0
    (job,) = result.jobs
    assert (job.name, job.jobs, job.write_bw, job.error) == ("disk_fill", 1, 192599430.0, 0)
    assert [d.name for d in result.disks] == ["sdd", "sdc"] and result.disks[0].util == 85.060371


def test_fio_2_has_bw_in_kib_and_groups_run_one_after_the_other():
    result = verify.parse_fio(read(FIO_PKB))
    assert result.version == "fio-2.17" and len(result.jobs) == 2
    assert result.read_bw == 129386 * 1024 and result.write_bw == 39312 * 1024
    assert result.job("rand_16k_read_100%-io-depth-1-num-jobs-2").read_iops == 8086.673998


def test_fio_the_kits_write_then_read_with_fio_lines_around():
    """The kit runs fio twice a node (write, then read) into one part; fio's own lines and the
    normal report (json,normal) around the documents are skipped."""
    text = ("fio: this platform does not support process shared mutexes, forcing use of threads\n"
            + read(FIO_WRITE)
            + "\nRun status group 0 (all jobs):\n  WRITE: bw=184MiB/s (193MB/s)\n"
            + "Starting 1 process\n" + read(FIO_RW))
    result = verify.parse_fio(text)
    assert result.complete and result.documents == 2 and result.errors == ()
    assert result.write_bw == pytest.approx((192599430 + 67267937) / 2) and result.read_bw == 149343283
    assert result.job("disk_fill").jobs == 2


def test_fio_jobs_of_one_group_add_up():
    document = json.loads(read(FIO_WRITE))
    document["jobs"] = document["jobs"] * 4  # numjobs=4 without group_reporting: four jobs of the name
    result = verify.parse_fio(json.dumps(document))
    assert result.write_bw == 4 * 192599430 and result.job("disk_fill").jobs == 4


def test_fio_job_error_is_reported():
    document = json.loads(read(FIO_WRITE))
    document["jobs"][0]["error"] = 5
    result = verify.parse_fio(json.dumps(document))
    assert result.errors == ("fio job disk_fill: error 5",) and result.job("disk_fill").error == 5


@pytest.mark.parametrize("name", FIO)
@pytest.mark.parametrize("fraction", [0.02, 0.4, 0.8, 0.999])
def test_fio_cut_anywhere_is_incomplete(name, fraction):
    result = verify.parse_fio(cut(read(name), fraction))
    assert not result.complete and result.errors and result.read_bw == 0 and result.write_bw == 0


def test_fio_a_cut_document_does_not_hide_a_whole_one_after_it():
    text = cut(read(FIO_RW), 0.5) + "\n" + read(FIO_WRITE)
    result = verify.parse_fio(text)
    assert not result.complete and result.documents == 1 and result.write_bw == 192599430


@pytest.mark.parametrize("garbage", ["", "fio: failed to open /fsx/x: No such file\n", "{}", "[1, 2]", "{\"jobs\": 3}"])
def test_fio_garbage_gives_errors(garbage):
    result = verify.parse_fio(garbage)
    assert not result.complete and result.errors


# ---------------------------------------------------------------------------------------------
# the smoke test


def test_smoke_pass():
    result = verify.parse_smoke(smoke_log([10.5, 9.0, 8.25]))
    assert result.verdict is Verdict.PASS and result.complete and result.errors == ()
    assert result.losses == (10.5, 9.0, 8.25) and result.world_size == 16 and result.steps_declared == 3
    assert result.hosts == ("gpu-1",) and result.tokens_per_s == 1002.0


def test_smoke_prefixed_lines():
    """torchrun and srun may put a prefix before rank 0's lines."""
    result = verify.parse_smoke(smoke_log([2.0, 1.0], prefix="[default0]:"))
    assert result.verdict is Verdict.PASS and len(result.steps) == 2


@pytest.mark.parametrize("losses, final, why", [
    ([1.0, 2.0], "fmcluster-smoke ok world_size=16 steps={n}", "loss rose"),
    ([1.0, float("nan")], "fmcluster-smoke failed reason=loss-not-finite", "failed: loss-not-finite"),
    ([1.0, float("inf"), 0.5], "fmcluster-smoke ok world_size=16 steps={n}", "not finite"),
    ([1.0, 0.9], "", "truncated"),
    ([], "fmcluster-smoke ok world_size=16 steps=20", "no fmcluster-smoke step"),
])
def test_smoke_failures(losses, final, why):
    result = verify.parse_smoke(smoke_log(losses, final=final))
    assert result.verdict is Verdict.FAIL
    assert any(why in e for e in result.errors), result.errors


def test_smoke_fewer_steps_than_declared_fails():
    """The smoke test prints a line for every step: one missing is a line lost (or a run that
    stopped early and said ok), not a pass."""
    text = smoke_log([3.0, 2.0], final="fmcluster-smoke ok world_size=16 steps=20")
    result = verify.parse_smoke(text)
    assert result.verdict is Verdict.FAIL
    assert "2 step lines of the 20 steps it ran: lines are missing" in result.errors


def test_smoke_cut_mid_line_and_traceback():
    text = smoke_log([3.0, 2.0, 1.0], final="")
    text = text[:-10] + "\nTraceback (most recent call last):\nRuntimeError: NCCL error\n"
    result = verify.parse_smoke(text)
    assert result.verdict is Verdict.FAIL and not result.complete
    assert any("RuntimeError" in e for e in result.errors)


def test_the_smoke_script_of_the_kit_prints_what_parse_smoke_reads():
    """fmcluster.kits.common.SMOKE_PY's print statements, rendered with values, parse back."""
    assert "fmcluster-smoke step={step} loss={value:.6f} tokens_per_s={rate:.1f} host={host} rank=0" in common.SMOKE_PY
    assert "fmcluster-smoke ok world_size={world} steps={args.steps}" in common.SMOKE_PY
    step, value, rate, host, world = 1, 1.25, 1234.5, "gpu-st-p5-1", 16
    line = f"fmcluster-smoke step={step} loss={value:.6f} tokens_per_s={rate:.1f} host={host} rank=0"
    result = verify.parse_smoke(line + f"\nfmcluster-smoke ok world_size={world} steps=1\n")
    assert result.steps == (verify.SmokeStep(1, 1.25, 1234.5, "gpu-st-p5-1", 0),) and result.verdict is Verdict.PASS


# ---------------------------------------------------------------------------------------------
# markers and detection


def marked(host, group, test, text):
    from fmcluster.kits import jobs

    return jobs.MARKER.format(node=host, group=group, test=test) + "\n" + text


def test_split_by_node_on_a_combined_file():
    text = ("slurmstepd: info: job started\n" + marked("gpu-1", "gpu", "dcgm", read(DCGM_R2))
            + marked("gpu-2", "gpu", "dcgm", read(DCGM_FAIL)) + marked("all", "gpu", "nccl-all_reduce-nodes", read(A3)))
    parts = verify.split_by_node(text)
    assert [(p.host, p.group, p.test) for p in parts] == [
        (None, None, None), ("gpu-1", "gpu", "dcgm"), ("gpu-2", "gpu", "dcgm"), ("all", "gpu", "nccl-all_reduce-nodes")]
    assert parts[1].text == read(DCGM_R2) and parts[3].text == read(A3)
    assert [verify.detect(p.text) for p in parts[1:]] == ["dcgm", "dcgm", "nccl"]
    assert [verify.parse(p.text).verdict for p in parts[1:3]] == [Verdict.PASS, Verdict.FAIL]


def test_split_by_node_without_markers_and_empty_parts():
    assert verify.split_by_node(read(P4D)) == (verify.NodePart(None, None, None, read(P4D)),)
    assert verify.split_by_node("") == (verify.NodePart(None, None, None, ""),)
    parts = verify.split_by_node(marked("gpu-1", "gpu", "fio-fsx", "") + marked("gpu-2", "gpu", "fio-fsx", "x\n"))
    assert [(p.host, p.text) for p in parts] == [("gpu-1", ""), ("gpu-2", "x\n")]


def test_the_kits_regroup_output_splits():
    """The awk regroup of fmcluster.kits.jobs writes the marker then the node's lines, the same way."""
    from fmcluster.kits import jobs

    assert 'printf "==> fmcluster node=%s group=%s test=%s <==\\n%s"' in jobs._REGROUP
    assert jobs.MARKER == "==> fmcluster node={node} group={group} test={test} <=="


@pytest.mark.parametrize("name, kind", [(n, "nccl") for n in NCCL] + [(n, "dcgm") for n in DCGM]
                         + [(n, "fio") for n in FIO])
def test_detect_real_outputs(name, kind):
    assert verify.detect(read(name)) == kind
    assert verify.detect(cut(read(name), 0.6)) == kind  # a truncated one is still recognised


def test_detect_smoke_and_nothing():
    assert verify.detect(smoke_log([1.0])) == "smoke"
    assert verify.detect("") is None and verify.detect("hello\n") is None and verify.parse("hello") is None


# ---------------------------------------------------------------------------------------------
# judging


@pytest.mark.parametrize("measured, verdict", [(100.0, Verdict.PASS), (85.0, Verdict.PASS), (84.99, Verdict.WARN),
                                               (60.0, Verdict.WARN), (59.9, Verdict.FAIL), (0.0, Verdict.FAIL),
                                               (None, Verdict.FAIL), (math.nan, Verdict.FAIL), (500.0, Verdict.PASS)])
def test_judge(measured, verdict):
    judgement = verify.judge(measured, 100.0, 0.85, 0.6)
    assert judgement.verdict is verdict
    assert (judgement.warn_below, judgement.fail_below, judgement.expected) == (85.0, 60.0, 100.0)
    if verdict is not Verdict.FAIL:
        assert judgement.ratio == round(measured / 100.0, 4)


@pytest.mark.parametrize("expected, warn, fail", [(0.0, 0.8, 0.5), (-1.0, 0.8, 0.5), (math.inf, 0.8, 0.5),
                                                  (100.0, 0.5, 0.8), (100.0, 0.8, -0.1)])
def test_judge_refuses_wrong_figures(expected, warn, fail):
    with pytest.raises(ValueError):
        verify.judge(50.0, expected, warn, fail)


def test_judge_expected_maps_the_ratios_of_fmcluster_expected():
    figure = Expected("nccl-all_reduce-nodes", "busbw", "GB/s", 400.0, "EFA of p5.48xlarge", 0.85, 0.6)
    assert verify.judge_expected(480.0, figure).verdict is Verdict.PASS
    assert verify.judge_expected(300.0, figure).verdict is Verdict.WARN  # 0.75 of the peak
    assert verify.judge_expected(200.0, figure).verdict is Verdict.FAIL
    assert verify.judge_expected(1.0, dataclasses.replace(figure, peak=None)) is None


def test_judge_a_real_run_against_its_efa_figure():
    """2 x p5.48xlarge: 3200 Gbps of EFA, 400 GB/s; the README's run reaches 487 GB/s."""
    result = verify.parse_nccl_tests(read(P5_BATCH))
    assert verify.judge(result.busbw, 400.0, 0.85, 0.6).verdict is Verdict.PASS


def test_slow_nodes():
    per_node = {"a": 480.0, "b": 470.0, "c": 200.0, "d": None, "e": 100.0, "f": math.nan}
    assert verify.slow_nodes(per_node, 400.0, 0.6) == ("d", "f", "e", "c")
    assert verify.slow_nodes({"a": 480.0}, 400.0, 0.6) == ()
    # against the group's own median (no catalog figure): 470 x 0.6 = 282
    assert verify.slow_nodes(per_node, None, 0.6) == ("d", "f", "e", "c")
    assert verify.slow_nodes({"a": None}, None, 0.6) == ("a",)
    assert verify.slow_nodes({}, None, 0.6) == ()


def test_worst_and_json():
    assert verify.worst([Verdict.PASS, Verdict.WARN]) is Verdict.WARN
    assert verify.worst([Verdict.WARN, Verdict.FAIL, Verdict.PASS]) is Verdict.FAIL and verify.worst([]) is Verdict.PASS
    judgement = verify.judge(90.0, 100.0, 0.85, 0.6)
    assert json.loads(json.dumps(dataclasses.asdict(judgement)))["verdict"] == "PASS"
    assert json.dumps(dataclasses.asdict(verify.parse_nccl_tests(read(A3))))  # every result serializes


def test_results_are_frozen():
    result = verify.parse_fio(read(FIO_WRITE))
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.read_bw = 1.0  # type: ignore[misc]


def test_pyxis_progress_lines_are_not_parts():
    """Pyxis' own lines (NVIDIA/pyxis pyxis_slurmstepd.c, slurm_spank_log), unlabelled or with
    srun --label's prefix, before a marker or inside a part, are left out; its failures stay."""
    image = "docker://111122223333.dkr.ecr.us-east-1.amazonaws.com#fmcluster/acceptance:1"
    pyxis = f"pyxis: importing docker image: {image}\npyxis: imported docker image: {image}\n"
    labelled = " 0: pyxis: imported docker image: nvcr.io#nvidia/pytorch:25.01-py3\n"
    text = (pyxis + marked("gpu-1", "gpu", "dcgm", "a\n" + labelled + "b\n")
            + pyxis + marked("gpu-2", "gpu", "dcgm", "pyxis: failed to import docker image: x\n"))
    parts = verify.split_by_node(text)
    assert [(p.host, p.text) for p in parts] == [("gpu-1", "a\nb\n"),
                                                 ("gpu-2", "pyxis: failed to import docker image: x\n")]


def test_a_healthy_fio_job_with_pyxis_lines_passes(tmp_path):
    """fio.sbatch of the p5 kit, run with stand-ins for srun (printing Pyxis' lines as slurmstepd
    does) and fio (a fast report): every row PASS, none 'not a result'."""
    from fmcluster.kits import jobs
    from fmcluster.model import expected
    from fmcluster.model.cluster import resolve
    from fmcluster.spec import loader
    from tests.support import fake_slurm
    from tests.support.fake_slurm import relocated

    model = resolve(loader.load(paths.EXAMPLES_DIR / "p5-pcs.yaml").spec)
    group = expected.gpu_groups(model)[0]
    # 120 MB/s a node, 1,920 MB/s on the 16 nodes: above the file system's 1,172 MB/s baseline (4,800
    # GiB at 250 MB/s/TiB), within the 2,344 MB/s its disks burst to (500 MB/s/TiB)
    fio = ('#!/bin/bash\necho \'{"fio version": "fio-3.33", "jobs": [{"jobname": "fmcluster", "groupid": 0, '
           '"error": 0, "read": {"bw_bytes": 1.2e8}, "write": {"bw_bytes": 1.2e8}}]}\'\n')
    hosts = [f"gpu-{i}" for i in range(1, group.max_count + 1)]
    result = fake_slurm.run_batch(relocated(jobs.fio_sbatch(model, group), model, group, tmp_path), tmp_path, hosts,
                                  extra={"fio": fio}, env={"IMAGE": "docker://x#fmcluster/acceptance:1",
                                                           "FAKE_PYXIS": "1"})
    assert result.returncode == 0 and "pyxis: imported docker image: docker://x" in result.stdout
    rows = [r for r in verify.judge_results(model, {"results/gpu-fio-4242.out": result.stdout}).rows
            if r.note != "no result: not run"]  # the other jobs
    assert rows and all(r.verdict is Verdict.PASS for r in rows), [r for r in rows if r.verdict is not Verdict.PASS]
    assert {r.test for r in rows} == {"fio-fsx-write", "fio-fsx-read", "fio-scratch-write", "fio-scratch-read"}
