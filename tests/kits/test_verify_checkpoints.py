"""`fmcluster verify` on a smoke job stopped by a signal (issue 41): the checkpoint line the run
that stopped prints and the resumed line of the run that goes on from it (fmcluster.kits.common.SMOKE_PY)
are parsed, a malformed one refused as any line the kit does not print; a resumed run must go on
from the checkpoint saved before it (its step, path and figures), else the smoke test FAILs; the
checkpoint's write time and size are reported (a smoke-checkpoint row, the JSON's checkpoints), not
judged. The requeued job's output (its marker again, its next run after the first:
--open-mode=append) is read as one."""

from __future__ import annotations

import json

import pytest

from fmcluster.kits import common, jobs, verify
from fmcluster.kits.verify import Verdict, command
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from tests.support.paths import ROOT

SPEC = "examples/p5-pcs.yaml"  # group gpu: 16 x p5.48xlarge, 128 GPUs
STEP = "fmcluster-smoke step={} loss={:.6f} tokens_per_s=50000.0 host=gpu-1 rank=0"
PATH = "/fsx/acceptance/checkpoints/42/step-000003"
SAVED = f"fmcluster-smoke checkpoint step=3 seconds=2.500 bytes=1210000000 path={PATH}"
RESUMED = f"fmcluster-smoke resumed step=3 seconds=2.500 bytes=1210000000 path={PATH}"
OK = "fmcluster-smoke ok world_size=128 steps=5"
MARKER = jobs.MARKER.format(node="all", group="gpu", test="smoke")


def steps(first: int, last: int) -> list[str]:
    return [STEP.format(i, 2.0 - i / 10) for i in range(first, last + 1)]


def text(*lines: str) -> str:
    return "\n".join(lines) + "\n"


REQUEUED = text(MARKER, *steps(1, 3), SAVED, "fmcluster: smoke stopped on a signal, its checkpoint saved: job 42 "
                "requeued", MARKER, RESUMED, *steps(4, 5), OK)


@pytest.fixture(scope="module")
def model():
    return resolve(loader.load(ROOT / SPEC).spec)


def test_a_run_resumed_from_its_checkpoint_passes():
    (result,) = verify.parse_smoke_runs(text(*steps(1, 3), SAVED, RESUMED, *steps(4, 5), OK))
    assert result.verdict is Verdict.PASS and result.complete and result.errors == ()
    assert [s.step for s in result.steps] == [1, 2, 3, 4, 5] and result.resumed_from == 0
    (saved,) = result.checkpoints
    assert (saved.step, saved.seconds, saved.bytes, saved.path, saved.resumed, saved.saved_here) == (
        3, 2.5, 1210000000, PATH, True, True)
    assert saved.bytes_per_s == 484e6


def test_the_lines_smoke_py_prints_parse_back():
    """SMOKE_PY's checkpoint and resumed lines, rendered with values, are what the parser reads."""
    printed = 'f"fmcluster-smoke checkpoint step={step} seconds={seconds:.3f} bytes={size} path={final}"'
    assert printed in common.SMOKE_PY
    assert ('f"fmcluster-smoke resumed step={state[\'step\']} seconds={saved[\'seconds\']:.3f} '
            "bytes={saved['bytes']} \"\n              f\"path={found[1]}\"") in common.SMOKE_PY
    step, seconds, size, final = 3, 2.5, 1210000000, PATH
    line = f"fmcluster-smoke checkpoint step={step} seconds={seconds:.3f} bytes={size} path={final}"
    assert line == SAVED and line.replace("checkpoint", "resumed", 1) == RESUMED


def test_a_run_stopped_that_nothing_resumed_fails():
    """The job's output ends at its checkpoint: it has not run again (requeued, waiting for nodes)."""
    (result,) = verify.parse_smoke_runs(text(*steps(1, 3), SAVED))
    assert result.verdict is Verdict.FAIL and result.outcome == "stopped" and not result.complete
    assert "stopped at step 3 with its checkpoint saved: no run resumed from it" in result.errors[-1]
    assert not result.checkpoints[0].resumed


@pytest.mark.parametrize("resumed, why", [
    (RESUMED.replace("step=3", "step=2"), "resumed from step 2, the checkpoint before it is of step 3"),
    (RESUMED.replace("step-000003", "step-000002"), "resumed from another checkpoint than the one saved at line 4"),
    (RESUMED.replace("seconds=2.500", "seconds=2.600"), "another checkpoint"),
    (RESUMED.replace("bytes=1210000000", "bytes=121000000"), "another checkpoint"),
])
def test_a_run_that_resumed_from_another_checkpoint_fails(resumed, why):
    (result,) = verify.parse_smoke_runs(text(*steps(1, 3), SAVED, resumed, *steps(4, 5), OK))
    assert result.verdict is Verdict.FAIL and any(why in b for b in result.broken), result.broken


def test_a_checkpoint_of_another_step_than_the_last_fails():
    (result,) = verify.parse_smoke_runs(text(*steps(1, 4), SAVED, RESUMED, *steps(4, 5), OK))
    assert result.verdict is Verdict.FAIL
    assert "a checkpoint of step 3 after step 4: smoke.py saves the step it finished" in result.errors


def test_a_run_resumed_without_the_output_of_the_one_that_saved_passes():
    """On Kubernetes the pod that saved is gone with its logs: the resumed run tells the checkpoint,
    and its steps go on from it."""
    (result,) = verify.parse_smoke_runs(text(RESUMED, *steps(4, 5), OK))
    assert result.verdict is Verdict.PASS and result.resumed_from == 3
    (read,) = result.checkpoints
    assert read.resumed and not read.saved_here and read.seconds == 2.5
    (gap,) = verify.parse_smoke_runs(text(RESUMED, *steps(5, 5), OK))
    assert gap.verdict is Verdict.FAIL and "1 step lines of the 2 steps it ran: lines are missing" in gap.errors


def test_a_run_killed_after_resuming_is_a_truncated_run():
    first, second = verify.parse_smoke_runs(text(*steps(1, 3), SAVED, RESUMED, *steps(4, 4), RESUMED,
                                                 *steps(4, 5), OK))
    assert first.verdict is Verdict.FAIL and "truncated" in first.errors[-1]
    assert second.verdict is Verdict.PASS and second.resumed_from == 3


LINE = "fmcluster-smoke checkpoint step=3 seconds=2.500 bytes=1210000000 path=/fsx/c"


@pytest.mark.parametrize("line, why", [
    (LINE.replace("seconds=2.500", "seconds=-2.5"), "a smoke checkpoint line the kit does not print"),
    (LINE.replace("seconds=2.500", "seconds=nan"), "a smoke checkpoint line the kit does not print"),
    (LINE.replace("seconds=2.500", "seconds=inf"), "a smoke checkpoint line the kit does not print"),
    (LINE.replace("seconds=2.500", "seconds=2.5s"), "a smoke checkpoint line the kit does not print"),
    (LINE.replace("seconds=2.500", "seconds=1e-320"), "a smoke checkpoint line the kit does not print"),
    (LINE.replace("seconds=2.500", "seconds=2.5"), "a smoke checkpoint line the kit does not print"),
    (LINE.replace("bytes=1210000000", "bytes=-1"), "a smoke checkpoint line the kit does not print"),
    (LINE.replace("bytes=1210000000", "bytes=1.2e9"), "a smoke checkpoint line the kit does not print"),
    (LINE.replace("step=3", "step=0"), "a smoke checkpoint line the kit does not print"),
    (LINE.replace(" path=/fsx/c", ""), "a smoke checkpoint line the kit does not print"),
    (LINE.replace("path=/fsx/c", "path="), "a smoke checkpoint line the kit does not print"),
    (LINE.replace("/fsx/c", "/" + "c" * 5000), "a smoke checkpoint line the kit does not print"),
    (LINE + " color=red", "a smoke checkpoint line the kit does not print"),
    (LINE.replace("checkpoint", "checkpoint saved", 1), "a smoke checkpoint line the kit does not print"),
    (LINE.replace("checkpoint", "resumed", 1).replace("step=3", "step=x"),
     "a smoke resumed line the kit does not print"),
    (LINE + " seconds=1.0", "with seconds= twice"),
])
def test_a_malformed_checkpoint_or_resumed_line_is_refused(line, why):
    results = verify.parse_smoke_runs(text(*steps(1, 3), line))
    refused = [r for result in results for r in result.refused]
    assert refused and why in refused[0].why and refused[0].line == 4, refused
    assert all(result.verdict is Verdict.FAIL for result in results if result.refused)


def test_the_requeued_jobs_output_is_one_run_with_its_checkpoint_reported(model, tmp_path):
    source = tmp_path / "results" / "gpu-smoke-42.out"
    source.parent.mkdir()
    source.write_text(REQUEUED)
    report = command.run(model, [str(source)])
    rows = {r.test: r for r in report.rows if r.source}
    assert rows["smoke"].verdict is Verdict.PASS and "resumed from its checkpoint of step 3" in rows["smoke"].note
    row = rows["smoke-checkpoint"]
    assert (row.verdict, row.measured, row.unit, row.node) == (Verdict.PASS, 2.5, "s", "all")
    assert row.note == f"1,210,000,000 bytes in 2.5 s (484.0 MB/s) at step 3, {PATH}; the next run resumed from it"
    assert row.basis.startswith("the checkpoint's write time and size, reported, not judged")
    assert verify.exit_code(report) == 0
    out, _ = command.render(report, "json")
    assert json.loads(out)["checkpoints"] == [{
        "group": "gpu", "node": "all", "source": str(source), "step": 3, "seconds": 2.5, "bytes": 1210000000,
        "bytes_per_s": 484e6, "path": PATH, "resumed": True, "line": "checkpoint"}]
    table, _ = command.render(report, "text")
    assert "smoke-checkpoint" in table and "2.5 s" in table and "484.0 MB/s" in table


def test_a_job_stopped_and_not_yet_run_again_fails_and_reports_its_checkpoint(model, tmp_path):
    source = tmp_path / "gpu-smoke-42.out"
    source.write_text(REQUEUED[:REQUEUED.index(MARKER, 1)])
    report = command.run(model, [str(source)])
    rows = {r.test: r for r in report.rows if r.source}
    assert rows["smoke"].verdict is Verdict.FAIL and "no run resumed from it" in rows["smoke"].note
    checkpoint = rows["smoke-checkpoint"]
    assert checkpoint.verdict is Verdict.PASS and "no run resumed from it" in checkpoint.note
    assert verify.exit_code(report) == 1
    assert [c.resumed for c in report.checkpoints] == [False]


def test_a_refused_checkpoint_line_is_not_judged(model, tmp_path):
    source = tmp_path / "gpu-smoke-42.out"
    source.write_text(REQUEUED.replace("seconds=2.500 bytes=1210000000 path", "seconds=-1 bytes=1210000000 path", 1))
    report = command.run(model, [str(source)])
    assert verify.exit_code(report) == 2 and not report.checkpoints
    assert not [r for r in report.rows if r.test.startswith("smoke") and r.source]
    assert "line 5: a smoke checkpoint line the kit does not print" in report.refused[0][1]


def test_a_checkpoint_of_no_time_to_speak_of_leaves_the_json_strict(model, tmp_path):
    """seconds=1e-320 is no figure smoke.py prints ({:.3f}); read as one, the throughput of the
    checkpoint was infinite and `--format json` ended in a traceback (strict JSON has no Infinity)."""
    source = tmp_path / "gpu-smoke-42.out"
    source.write_text(REQUEUED.replace("seconds=2.500", "seconds=1e-320"))
    report = command.run(model, [str(source)])
    assert verify.exit_code(report) == 2 and not report.checkpoints
    out, _ = command.render(report, "json")
    assert json.loads(out, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))["checkpoints"] == []
