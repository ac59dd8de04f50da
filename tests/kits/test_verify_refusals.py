"""`fmcluster verify`'s parsers refuse what they do not understand, and read what they do as the
tools print it (NVIDIA/nccl-tests src/util.cu, dcgmi's Diag.cpp, fio's stat.c): a focused test per
defect issue 42 and its follow-up found, on the real outputs of tests/data/verify* and lines
written here in the tools' formats."""

from __future__ import annotations

import json
import math
import re

import pytest

from fmcluster.kits import jobs, verify
from fmcluster.kits.verify import Verdict, command, files
from fmcluster.kits.verify.reading import json_documents, json_documents_at, number, whole
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from tests.support.paths import DATA, ROOT

PLAIN, REAL = DATA / "verify-plain", DATA / "verify"
SPEC = "examples/p5-pcs.yaml"  # group gpu: 16 x p5.48xlarge (8 x H100 each), /fsx of 4,800 GiB
HEALTHY = (PLAIN / "nccl-all_reduce-2x-p5-healthy.txt").read_text()  # 479.71 GB/s at 16 GiB
ONE_NODE = (PLAIN / "nccl-all_reduce-1x-p5-one-node.txt").read_text()
A3 = (REAL / "nccl-all_reduce-2x-a3-mega-h100.txt").read_text()
DCGM_FAIL = (REAL / "dcgm-diag-r3-8x-h100-fail.txt").read_text()
DCGM_PASS = re.sub(r"\| (Fail|Skip) - All( *)\|", r"| Pass      \2|", DCGM_FAIL)
DCGM_R2 = (REAL / "dcgm-diag-r2-virtualclient.json").read_text()
FIO = (REAL / "fio-write-virtualclient-fio-3.26.json").read_text()
FIO_TEXT = (PLAIN / "fio-write-fsx-8-jobs.txt").read_text()
LAST_ROW = (" 17179869184    4294967296     float     sum      -1    67149  255.85  479.71      0    67216  255.59  "
            "479.23      0")


@pytest.fixture(scope="module")
def model():
    return resolve(loader.load(ROOT / SPEC).spec)


def at_line(text: str, needle: str) -> int:
    """The 1-based line of the first line holding `needle`."""
    return text[:text.index(needle)].count("\n") + 1


def marked(host: str, test: str, text: str) -> str:
    return jobs.MARKER.format(node=host, group="gpu", test=test) + "\n" + text


# ---- numbers -------------------------------------------------------------------------------------


@pytest.mark.parametrize("token, value", [("479.71", 479.71), ("1.67772e+07", 16777200.0), ("-0", 0.0),
                                          ("5e-07", 5e-07), ("inf", math.inf), ("N/A", None), ("479.71GB", None),
                                          ("1_000", None), (" 1", None), ("9" * 41, None), ("0x10", None)])
def test_a_number_is_what_printf_writes(token, value):
    assert number(token) == value


@pytest.mark.parametrize("token, value", [("16", 16), ("-1", -1), ("9" * 19, int("9" * 19)), ("9" * 20, None),
                                          ("9" * 5000, None), ("1.0", None)])
def test_a_whole_number_has_at_most_19_digits(token, value):
    """More than 4,300 digits is a ValueError of int(): no tool prints a counter of more than 19."""
    assert whole(token) == value


def test_json_that_python_cannot_hold_is_read_or_an_error_never_a_traceback():
    """An integer of 5,000 digits (int() refuses more than 4,300) is read as a float, infinite as
    1e999 is, for the parsers to refuse; nesting 100,000 deep (a RecursionError) is an error."""
    assert json_documents('{"a": ' + "1" * 5000 + ', "b": 1e999, "c": 10}\n') == ([{"a": math.inf, "b": math.inf,
                                                                                    "c": 10}], [], False)
    documents, errors, broken = json_documents('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    assert documents == [] and broken and errors == ["the JSON from line 1 is nested deeper than it can be read"]


def test_json_documents_that_do_not_parse_are_tried_a_bounded_number_of_times():
    """Each try of a broken document may read to the end of the text: after 100, the rest is left
    unread, said so (and the documents still count their lines right)."""
    text = '{"a":\n' * 150 + '{"b": 1}\n'
    documents, errors, broken = json_documents(text)
    assert broken and len(errors) == 101 and errors[-1] == "more JSON that does not parse from line 101: not read"
    found, _, _ = json_documents_at('\n{"a": 1}\n\n\n{"b": [\n2]}\n{"c": \n{"d": 3}\n')
    assert [document.line for document in found] == [2, 5, 8]


# ---- nccl-tests ----------------------------------------------------------------------------------


def test_wrong_printed_with_g_is_its_count_not_zero():
    """nccl-tests prints #wrong with %6g: 16,777,216 wrong elements are `1.67772e+07`."""
    text = HEALTHY.replace(LAST_ROW, LAST_ROW[:-1] + "1.67772e+07")
    result = verify.parse_nccl_tests(text)
    assert result.largest.in_place.wrong == 16777200.0 and result.wrong == 16777200.0
    assert result.wrong_rows == (result.largest,) and result.complete


def test_wrong_values_of_opposite_signs_do_not_cancel():
    lines = HEALTHY.replace(LAST_ROW, LAST_ROW[:-1] + "5").splitlines()
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("8589934592"))
    lines[at] = lines[at][:-2] + "-5"
    result = verify.parse_nccl_tests("\n".join(lines) + "\n")
    assert result.wrong == 10 and len(result.wrong_rows) == 2


def test_a_run_cut_mid_table_and_its_rerun_are_both_judged(model):
    cut = HEALTHY[:HEALTHY.index(" 4294967296")]
    for text, first_complete in ((cut + HEALTHY, False), (HEALTHY + cut, True)):
        runs = verify.parse_nccl_runs(text)
        assert [r.complete for r in runs] == [first_complete, not first_complete]
        assert not verify.parse_nccl_tests(text).complete  # the worst is read
        report = verify.judge_results(model, {"n.log": text})
        assert sorted(r.verdict for r in report.rows if r.source) == [Verdict.FAIL, Verdict.PASS]


def test_of_several_complete_runs_the_slowest_is_read():
    for text in (A3 + HEALTHY, HEALTHY + A3):
        result = verify.parse_nccl_tests(text)
        assert result.busbw == 338.82 and result.runs == 2 and any("2 runs" in e for e in result.errors)


@pytest.mark.parametrize("line, why", [
    ("garbage", "not a row of the table: 1 columns where the table's header has 13"),
    (" 4294967296 1073741824 float sum -1 16817 255.39 478.86 0 16834 255.14", "11 columns"),
    (" 4294967296 1073741824 float sum -1 16817 255.39 fast 0 16834 255.14 478.38 0", "busbw 'fast' is not a number"),
    (" 4294967296 1073741824 float sum -1 16817 255.39 -478.86 0 16834 255.14 478.38 0", "busbw -478.86 is negative"),
    (" 4294967296 1073741824 float sum x 16817 255.39 478.86 0 16834 255.14 478.38 0", "root 'x'"),
    (" 99999999999999999999999 1 float sum -1 1 1 1 0 1 1 1 0", "its size and count are not whole numbers"),
    (" 17179869184 4294967296 float sum -1 67149 255.85 479.71 0 67216 255.59 479.23 0", "size 17179869184 after"),
    (" 1048576 262144 float sum -1 44.1 23.78 44.59 0 44.1 23.76 44.54 0", "size 1048576 after"),
    ("# Reducing maxBytes to 1 due to memory limitation", "a comment nccl-tests does not print in its table"),
])
def test_a_line_of_the_table_not_understood_is_refused_with_its_line(line, why):
    """Every line between a table's header and its summary is a row of the header's columns
    (sizes rising), NCCL's own log line, or nccl-tests' comment; else the run is not judged."""
    text = HEALTHY.replace(LAST_ROW, LAST_ROW + "\n" + line)
    (run,) = verify.parse_nccl_runs(text)
    assert not run.complete and run.refused
    assert run.refused[0].line == at_line(text, LAST_ROW) + 1 and why in run.refused[0].why, run.refused


@pytest.mark.parametrize("old, new, why", [
    ("# Out of bounds values : 0 OK", "# Out of bounds values : 3 OK",
     "an out-of-bounds line nccl-tests does not print"),
    ("# Out of bounds values : 0 OK", "# Out of bounds values : 0 OK\n# Out of bounds values : 0 OK",
     "does not end a table"),
    ("# Avg bus bandwidth    : 355.4650 ", "# Avg bus bandwidth    : 355.4650 \n# Avg bus bandwidth    : 355.4650 ",
     "not right after # Out of bounds values"),
    ("# Avg bus bandwidth    : 355.4650 ", "# Avg bus bandwidth    : lots",
     "an average line nccl-tests does not print"),
    ("#  Rank 15 Group  0 Pid  38824", "#  Rank 14 Group  0 Pid  38824", "rank 14 is named twice"),
    ("#  Rank 15", "#  Rank " + "1" * 5000, "a '# Rank' line fmcluster does not read"),
    ("# nThread 1", "# nccl-tests version 2.17.9 nccl-headers=22902 nccl-library=" + "2" * 5000 + "\n# nThread 1",
     "an nccl-tests version line fmcluster does not read"),
    ("type   redop    root", "type   redop    rooted", "a table header fmcluster does not know"),
])
def test_what_nccl_tests_does_not_print_is_refused(old, new, why):
    assert old in HEALTHY
    (run,) = verify.parse_nccl_runs(HEALTHY.replace(old, new, 1))
    assert run.refused and why in run.refused[0].why, run.refused


def test_the_layouts_nccl_tests_prints_are_read():
    """util.cu: per-iteration columns (-I 1), a timestamp (two words), `cputime`, `N/A` without
    checking (-c 0), and the copybw column of 2024's layout."""
    head = "#       size         count      type   redop    root"
    cases = {
        "     time   algbw   busbw #wrong    i_min    i_max    i_p99    i_cv%     time   algbw   busbw #wrong    i_min"
        "    i_max    i_p99    i_cv% timestamp":
            "   8 2 float sum -1 12.9 0.00 0.00 0 12.1 13.2 13.0 1.5 12.8 0.00 0.00 0 12.0 13.1 13.0 1.4 "
            "2026-01-02 03:04:05",
        "  cputime   algbw   busbw #wrong  cputime   algbw   busbw #wrong":
            "   8 2 float sum -1 12.9 0.00 0.00 N/A 12.8 0.00 0.00 N/A",
        "     time   algbw   busbw copybw #wrong     time   algbw   busbw copybw #wrong":
            "   8 2 float sum -1 1.2e+05 0.00 0.00 0.00 0 12.8 0.00 0.00 0.00 0",
    }
    for columns, row in cases.items():
        text = f"{head}{columns}\n{row}\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0 \n"
        (run,) = verify.parse_nccl_runs(text)
        assert run.complete and not run.refused and len(run.rows) == 1, (columns, run.errors)
    assert verify.parse_nccl_runs(text)[0].rows[0].out_of_place.time_us == 1.2e5


def test_a_failure_after_a_whole_table_fails(model):
    text = HEALTHY + "ip-10-1-0-11: Test NCCL failure common.cu:1104 'unhandled system error'\n"
    (run,) = verify.parse_nccl_runs(text)
    assert run.complete and run.failures
    (row,) = [r for r in verify.judge_results(model, {"n.log": text}).rows if r.source]
    assert row.verdict is Verdict.FAIL and row.note.startswith("failed: ip-10-1-0-11: Test NCCL failure")


def test_a_busbw_above_the_ceiling_at_any_size_is_impossible(model):
    """Every row measures the same path: 1,000 GB/s at 1 MiB is as impossible as at 16 GiB."""
    text = HEALTHY.replace("   23.78   44.59", "   23.78 1000.00")
    (row,) = [r for r in verify.judge_results(model, {"n.log": text}).rows if r.source]
    assert row.verdict is Verdict.FAIL and row.measured == 479.71
    assert row.note.startswith("impossible: a row's 1,000 GB/s is above 750.0 GB/s, the most EFA can carry")
    assert row.ceiling.startswith("750.0 GB/s, the most EFA can carry (p5.48xlarge: EFA 3,200 Gbps")


def test_a_busbw_that_is_not_finite_fails_and_the_json_stays_strict(model):
    text = HEALTHY.replace("479.71", "nan")
    report = verify.judge_results(model, {"n.log": text})
    (row,) = [r for r in report.rows if r.source]
    assert row.verdict is Verdict.FAIL and row.measured is None and "not a finite number" in row.note
    out = json.loads(verify.render(report, "json")[0], parse_constant=lambda c: pytest.fail(c))
    (entry,) = [r for r in out["groups"]["gpu"]["results"] if r["source"]]
    assert entry["measured"] is None and entry["unmeasured"] == "a busbw that is not a finite number"


def test_a_figure_that_is_not_finite_is_null_in_the_json_with_why():
    """Whatever a row holds, the JSON is strict: json.dumps(..., allow_nan=False) holds it."""
    report = verify.VerifyReport("c", (verify.Row("g", "t", "n", Verdict.FAIL, math.inf, math.nan, None, "GB/s",
                                                  impossible_above=math.inf),), judged=1)
    (entry,) = json.loads(verify.render(report, "json")[0])["groups"]["g"]["results"]
    assert (entry["measured"], entry["pass_at"], entry["impossible_above"]) == (None, None, None)
    assert entry["unmeasured"] == "not a finite figure (inf)"
    json.dumps(report.as_dict(), allow_nan=False)


def test_every_row_explains_its_figures(model):
    report = verify.judge_results(model, {"n.log": HEALTHY})
    row = next(r for r in report.rows if r.source)
    assert row.basis == "EFA bandwidth of p5.48xlarge (3200 Gbps per node)" and row.unmeasured == ""
    assert row.ceiling.startswith("750.0 GB/s, the most EFA can carry") and row.impossible_above == 825
    not_run = next(r for r in report.rows if r.test == "dcgm")
    assert not_run.unmeasured == "no result: not run" and not_run.basis == "DCGM's own verdict per test"


# ---- dcgmi diag ----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["Failed - All", "FAIL - All", "Fail - Some", "Passed", "", "Pass - GPU: x"])
def test_a_dcgm_status_dcgmi_does_not_print_is_refused(model, status):
    """dcgmi prints Pass, Skip, Warn, Fail or Not Run (Diag.cpp, HelperDisplayDiagResult): `Failed`
    was dropped and the node passed."""
    text = DCGM_FAIL.replace("| Fail - All                                     |", f"| {status:<47}|")
    (result,) = verify.parse_dcgm_runs(text)
    assert result.refused and result.refused[0].line == at_line(text, "| GPU Memory ")
    assert f"status {status!r} is none of dcgmi's" in result.refused[0].why and result.verdict is Verdict.FAIL
    report = verify.judge_results(model, {"d.txt": marked("ip-10-0-0-1", "dcgm", text)})
    assert verify.exit_code(report) == 2 and not [r for r in report.rows if r.source == "d.txt" and r.test == "dcgm"]
    assert report.refused[0][1].startswith(f"line {at_line(text, '| GPU Memory ') + 1}: test 'GPU Memory'")


def test_dcgm_4_text_rows_per_entity():
    """DCGM 4 prints a test's status, then one row per entity (`GPU0: Pass`) and its warnings."""
    rows = ("| memory                    | Fail                                           |\n"
            "|                           | GPU0: Pass                                     |\n"
            "|                           | GPU1: Fail                                     |\n"
            "| Warning: GPU1             | GPU 1 has uncorrectable memory errors          |\n")
    text = DCGM_PASS.replace("| Memory Bandwidth          | Pass", rows + "| Memory Bandwidth          | Pass")
    (result,) = verify.parse_dcgm_runs(text)
    memory = next(t for t in result.tests if t.name == "memory")
    assert (memory.status, memory.where) == ("fail", "GPU1") and not result.refused
    assert memory.messages == ("Warning: GPU1: GPU 1 has uncorrectable memory errors",)
    (refused,) = verify.parse_dcgm_runs(text.replace("GPU1: Fail ", "GPU1: Bad  "))
    assert "a row that is none of dcgmi's results" in refused.refused[0].why


def test_two_dcgm_documents_are_both_judged(model):
    """A failed node's document before a passing one: the failure is not hidden."""
    failing = json.loads(DCGM_R2)
    failing["DCGM GPU Diagnostic"]["test_categories"][0]["tests"][0]["results"][0]["status"] = "Fail"
    text = json.dumps(failing, indent=1) + "\n" + DCGM_R2
    assert [r.verdict for r in verify.parse_dcgm_runs(text)] == [Verdict.FAIL, Verdict.PASS]
    assert verify.parse_dcgm_diag(text).verdict is Verdict.FAIL
    report = verify.judge_results(model, {"d.out": marked("ip-10-0-0-1", "dcgm", text)})
    assert [r.verdict for r in report.rows if r.test == "dcgm" and r.node == "ip-10-0-0-1"] == [Verdict.FAIL,
                                                                                                Verdict.WARN]
    two_tables = verify.parse_dcgm_runs(DCGM_FAIL + DCGM_PASS)
    assert [r.verdict for r in two_tables] == [Verdict.FAIL, Verdict.PASS]


@pytest.mark.parametrize("status", ["Failed", "PASS", None, 3, ""])
def test_a_dcgm_json_status_dcgmi_does_not_write_is_refused(status):
    document = json.loads(DCGM_R2)
    document["DCGM GPU Diagnostic"]["test_categories"][1]["tests"][0]["results"][0]["status"] = status
    (result,) = verify.parse_dcgm_runs(json.dumps(document, indent=1))
    assert result.refused and result.verdict is Verdict.FAIL and "is none of dcgmi's" in result.refused[0].why


def test_a_dcgm_runtime_error_fails_and_deep_nesting_is_refused():
    (error,) = verify.parse_dcgm_runs('{"DCGM GPU Diagnostic": {"runtime_error": "Unable to load CUDA"}}\n')
    assert error.verdict is Verdict.FAIL and not error.refused and error.messages
    deep = DCGM_R2.replace('"name" : "Denylist"', '"name" : "Denylist", "x": ' + "[" * 200 + "]" * 200, 1)
    (result,) = verify.parse_dcgm_runs(deep)
    assert result.refused and "nests deeper than dcgmi writes" in result.refused[0].why
    (broken,) = verify.parse_dcgm_runs(DCGM_R2.replace('"Pass"', "[" * 100_000 + "]" * 100_000, 1))
    assert not broken.complete and "nested deeper than it can be read" in broken.errors[0]


# ---- fio -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["fast", -1, None, 10 ** 400, [1]])
def test_a_fio_bandwidth_that_cannot_be_read_is_not_judged(model, tmp_path, value):
    """Not read as 0, its row lost and the command at 0: refused, exit 2."""
    document = json.loads(FIO)
    document["jobs"][0]["write"]["bw_bytes"] = value
    result = verify.parse_fio(json.dumps(document))
    assert result.refused and not result.complete and "write bw_bytes" in result.refused[0].why
    (tmp_path / "scratch").mkdir()
    (tmp_path / "scratch" / "fio.json").write_text(json.dumps(document))
    report = verify.run(model, [str(tmp_path / "scratch" / "fio.json")])
    assert verify.exit_code(report) == 2 and report.refused


def test_a_fio_bandwidth_must_be_its_bytes_over_its_time():
    """fio computes bw_bytes as 1000 x io_bytes / runtime (ms): one changed alone is refused."""
    document = json.loads(FIO)
    document["jobs"][0]["write"]["bw_bytes"] *= 10
    (refusal,) = verify.parse_fio(json.dumps(document)).refused
    assert "is not its io_bytes over its runtime (192,599,430)" in refusal.why
    document["jobs"][0]["write"]["io_bytes"] *= 10
    assert verify.parse_fio(json.dumps(document)).write_bw == 1925994300


def test_a_fio_runtime_out_of_range_is_refused_not_an_overflow():
    for old, new in (('"runtime" : 5575', '"runtime" : 1e999'), ('"job_runtime" : 5574', '"job_runtime" : 1e999'),
                     ('"error" : 0', '"error" : ' + "9" * 400)):
        assert old in FIO
        result = verify.parse_fio(FIO.replace(old, new))
        assert result.refused and not result.complete, new[:30]


@pytest.mark.parametrize("old, new, why", [
    ("  WRITE: bw=2950MiB/s (3093MB/s)", "  WRITE: bw=29500MiB/s (3093MB/s)", "its WRITE bw= figures disagree"),
    ("io=32.0GiB (34.4GB)", "io=3.20GiB (3.44GB)", "its WRITE bw= is not its io= over its run="),
    ("  WRITE: bw=2950MiB/s", "  WRITE: bw=-2950MiB/s", "not a line of fio's group report"),
    ("run=11107-11107msec", "run=11107-11107msec\n  WRITE: bw=2950MiB/s (3093MB/s), 2950MiB/s-2950MiB/s "
                            "(3093MB/s-3093MB/s), io=32.0GiB (34.4GB), run=11107-11107msec",
     "group 0's WRITE line twice"),
    ("(groupid=0, jobs=8)", "(groupid=0, jobs=" + "8" * 5000 + ")", "a line fio prints otherwise"),
])
def test_fio_s_normal_report_is_read_as_fio_prints_it(old, new, why):
    assert old in FIO_TEXT
    result = verify.parse_fio_text(FIO_TEXT.replace(old, new))
    assert result.refused and why in result.refused[0].why and not result.complete


def test_a_fio_report_cut_after_its_group_heading_is_not_complete():
    text = FIO_TEXT[:FIO_TEXT.index("  WRITE: bw=")]
    result = verify.parse_fio_text(text)
    assert not result.complete and "has no READ or WRITE line" in result.errors[-1]


def test_a_plain_fio_output_that_cannot_be_read_fails_not_vanishes(model):
    deep = '{"fio version": "fio-3.36", "jobs": [{"jobname": "a", "read": ' + "[" * 100_000 + "]" * 100_000 + "}]}\n"
    rows = [r for r in verify.judge_results(model, {"scratch/f.json": deep}).rows if r.source]
    assert [(r.test, r.verdict) for r in rows] == [("fio-scratch-read", Verdict.FAIL),
                                                   ("fio-scratch-write", Verdict.FAIL)]


def test_scratch_has_no_ceiling_and_says_why(model):
    """EC2 publishes no instance-store throughput, nor has the catalog one: /scratch is held to
    its peers, and its rows say there is no limit."""
    rows = [r for r in verify.judge_results(model, {"scratch/f.json": FIO}).rows if r.source]
    assert rows and all(r.impossible_above is None and r.ceiling ==
                        "none: EC2 publishes no instance-store throughput per type" for r in rows)


# ---- the smoke test ------------------------------------------------------------------------------


def smoke(*lines: str) -> str:
    return "\n".join(lines) + "\n"


STEP = "fmcluster-smoke step={} loss={} tokens_per_s=1000.0 host=ip-10-1-0-11 rank=0"


@pytest.mark.parametrize("line, why", [
    ("fmcluster-smoke step=x loss=1.0", "a smoke step line the kit does not print"),
    ("fmcluster-smoke step=3 loss=1.0 color=red", "a smoke step line the kit does not print"),
    ("fmcluster-smoke step=1 loss=1.0", "step 1 after step 2: the smoke test counts up"),
    ("fmcluster-smoke done", "a smoke line the kit does not print"),
    ("fmcluster-smoke ok world_size=-16 steps=3", "a smoke ok line the kit does not print"),
    ("fmcluster-smoke step=3 step=4 loss=1.0", "with step= twice"),
])
def test_a_smoke_line_the_kit_does_not_print_is_refused(line, why):
    (run,) = verify.parse_smoke_runs(smoke(STEP.format(1, 2.0), STEP.format(2, 1.5), line))
    assert run.refused and why in run.refused[0].why and run.refused[0].line == 3 and run.verdict is Verdict.FAIL


def test_a_smoke_rerun_after_a_failure_does_not_hide_it():
    text = smoke(STEP.format(1, 2.0), "fmcluster-smoke failed reason=loss-not-finite", STEP.format(1, 2.0),
                 STEP.format(2, 1.0), "fmcluster-smoke ok world_size=128 steps=2")
    assert [r.verdict for r in verify.parse_smoke_runs(text)] == [Verdict.FAIL, Verdict.PASS]
    assert verify.parse_smoke(text).outcome == "failed"


# ---- files, the report, the command --------------------------------------------------------------


def test_a_deeply_nested_expected_json_names_no_group():
    assert files.kit_groups({"results/expected.json": "[" * 100_000 + "]" * 100_000}) is None
    assert files.kit_groups({"results/expected.json": '{"gpu": {}, "' + "1" * 5000 + '": 1}'}) == {"gpu", "1" * 5000}


def test_a_line_that_starts_as_a_marker_and_is_not_one_is_refused(model):
    text = marked("ip-10-0-0-1", "dcgm", DCGM_PASS) + "==> fmcluster node=ip-10-0-0-2 group=gpu te\x00st=dcgm <==\n"
    report = verify.judge_results(model, {"d.out": text + DCGM_PASS})
    assert verify.exit_code(report) == 2 and not [r for r in report.rows if r.source]
    assert report.refused[0] == ("d.out", f"line {at_line(text, 'te' + chr(0))}: a line that starts as the kit's "
                                          "marker and is not one: '==> fmcluster node=ip-10-0-0-2 group=gpu "
                                          "te\\x00st=dcgm <==' (the file is not judged)")


def test_a_kit_job_s_output_without_a_node_s_part_was_cut_short(model):
    """The kit's jobs run on every node of the group (16): a file naming fewer, or lacking a test
    of its job, is a FAIL, however healthy its parts."""
    text = "".join(marked(f"ip-10-0-0-{i}", "dcgm", DCGM_PASS) for i in range(15))
    (row,) = [r for r in verify.judge_results(model, {"gpu-dcgm-1.out": text}).rows if r.test == "dcgm-job"]
    assert row.verdict is Verdict.FAIL and row.note == ("the kit's dcgm job's output is cut short or a node did not "
                                                        "answer: dcgm from 15 of the group's 16 nodes")
    text += marked("ip-10-0-0-15", "dcgm", DCGM_PASS)
    report = verify.judge_results(model, {"gpu-dcgm-1.out": text})
    assert not [r for r in report.rows if r.test == "dcgm-job"] and verify.exit_code(report) == 0


@pytest.mark.parametrize("host, shown", [("\x1b[31mevil\x1b[0m", "\\x1b[31mevil\\x1b[0m"), ("a\x9bb", "a\\x9bb"),
                                         ("a\u202eb", "a\\u202eb"), ("a\x07b", "a\\x07b")])
def test_untrusted_text_is_escaped_in_the_text_report(model, host, shown):
    """A host name holding an escape sequence (or a C1 CSI, a bidirectional override, a bell) is
    shown escaped, as fmcluster's spec errors show a value: it never reaches the
    terminal."""
    text = smoke(*[STEP.format(i, 2.0 - i / 10).replace("ip-10-1-0-11", host) for i in (1, 2)],
                 "fmcluster-smoke ok world_size=128 steps=2")
    report = verify.judge_results(model, {f"smoke-{host}.log": text})
    out, _ = verify.render(report, "text")
    assert shown in out and host not in out
    assert f"  smoke-{shown}.log" not in out  # judged: it has a row, and its file line is escaped too
    assert f"    file: smoke-{shown}.log" in out


def test_a_refused_result_exits_2_even_beside_a_failure(model, tmp_path):
    (tmp_path / "slow.log").write_text((PLAIN / "nccl-all_reduce-2x-p5-slow.txt").read_text())
    (tmp_path / "broken.log").write_text(HEALTHY.replace(LAST_ROW, LAST_ROW + "\ngarbage"))
    report = verify.run(model, [str(tmp_path)])
    assert report.verdict is Verdict.FAIL and verify.exit_code(report) == 2
    out, err = verify.render(report, "text")
    assert f"fmcluster verify: {tmp_path / 'broken.log'}: not judged: line 42: not a row of the table" in err
    assert "NOT JUDGED: 1 result cannot be read or understood" in out.splitlines()[-1]
    assert json.loads(verify.render(report, "json")[0])["refused"][0]["file"] == str(tmp_path / "broken.log")


def test_files_of_odd_encodings_and_a_missing_path(model, tmp_path):
    """A Latin-1 byte or NULs are text as any other; a path that does not exist is listed as not
    judged (exit 2) and the rest is judged all the same."""
    latin1 = HEALTHY.replace("# Using devices", "# Using devices caf\xe9").encode("latin-1")
    (tmp_path / "latin1.log").write_bytes(latin1)
    (tmp_path / "nul.log").write_bytes(b"\x00" * 100 + HEALTHY.encode())
    report = verify.run(model, [str(tmp_path / "latin1.log"), str(tmp_path / "nul.log"), str(tmp_path / "gone.log")])
    assert [r.verdict for r in report.rows if r.source] == [Verdict.PASS, Verdict.PASS]
    assert report.refused == ((str(tmp_path / "gone.log"), "cannot read it: No such file or directory"),)
    assert verify.exit_code(report) == 2 and report.error.startswith(f"cannot read {tmp_path / 'gone.log'}")
    assert command.MAX_RESULT_BYTES == 64 * 1024 * 1024
