"""The kit's smoke.py (fmcluster.kits.common.SMOKE_PY) stopped by a signal, run for real under the
torchrun and torch stand-ins (tests/support/gpu_standins: torchrun's own signal handling, collectives
that combine the ranks' values over a connection, DCP's layout and in-place load), as the kit runs it:
torchrun with the end signal ignored (its workers inherit that and smoke.py catches it), the workers
signalled as Slurm signals a step's processes. A stopped run saves a checkpoint under a temporary
name, renamed once whole, and leaves `stopped`; the next run resumes from the newest complete one,
its loss going on as an unstopped run's; one completed removes its checkpoints. The same job on a
real Slurm: tests/kits/test_slurm_kits.py."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from fmcluster.kits import verify
from fmcluster.kits.common import SMOKE_PY
from tests.support.paths import SUPPORT

TORCHRUN = SUPPORT / "gpu_standins" / "torchrun"
LOSS = re.compile(r"^fmcluster-smoke step=(\d+) loss=(\S+) ", re.MULTILINE)
CHECKPOINT = re.compile(r"^fmcluster-smoke checkpoint step=(\d+) seconds=(\S+) bytes=(\d+) path=(\S+)$", re.MULTILINE)


class Run:
    """smoke.py under torchrun: NPROC ranks, its output in a file, torchrun with SIGUSR1 ignored
    as the kit's sbatch starts it (`ignore`: the signal; None: as it is)."""

    def __init__(self, tmp_path: Path, name: str, *, steps: int = 30, nproc: int = 2, checkpoints: bool = True,
                 step_seconds: float = 0.0, ignore: str | None = "USR1") -> None:
        script = tmp_path / "smoke.py"
        script.write_text(SMOKE_PY)
        self.directory = tmp_path / "checkpoints" / "job"
        self.output = tmp_path / f"{name}.out"
        argv = [str(TORCHRUN), "--nnodes=1", f"--nproc-per-node={nproc}", f"--rdzv-id={name}", str(script),
                "--steps", str(steps), *(["--checkpoint-dir", str(self.directory), "--signal", "USR1"]
                                         if checkpoints else [])]
        if ignore is not None:
            argv = ["bash", "-c", f'trap "" {ignore}; exec "$@"', "torchrun", *argv]
        env = {**os.environ, "STANDIN_TORCH_DIR": str(tmp_path / "rendezvous"),
               "STANDIN_STEP_SECONDS": str(step_seconds), "PYTHONDONTWRITEBYTECODE": "1"}
        with self.output.open("w") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)

    def text(self) -> str:
        return self.output.read_text()

    def wait_for_step(self, step: int) -> None:
        deadline = time.monotonic() + 60
        while f"fmcluster-smoke step={step} " not in self.text():
            assert self.process.poll() is None and time.monotonic() < deadline, self.text()
            time.sleep(0.05)

    def workers(self) -> list[int]:
        """The ranks' processes (torchrun's children), rank order."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        return sorted(map(int, children), key=lambda pid: int(
            dict(entry.split("=", 1) for entry in Path(f"/proc/{pid}/environ").read_text().split("\0")
                 if "=" in entry)["RANK"]))

    def finish(self) -> int:
        return self.process.wait(timeout=120)


def losses(text: str) -> dict[int, str]:
    return {int(step): loss for step, loss in LOSS.findall(text)}


@pytest.fixture(scope="module")
def unstopped(tmp_path_factory) -> dict[int, str]:
    """The losses of a run that nothing stops."""
    run = Run(tmp_path_factory.mktemp("unstopped"), "unstopped", checkpoints=False)
    assert run.finish() == 0, run.text()
    assert "fmcluster-smoke ok world_size=2 steps=30" in run.text()
    return losses(run.text())


def test_a_signal_saves_a_checkpoint_and_the_next_run_resumes_from_it(tmp_path, unstopped):
    first = Run(tmp_path, "first", step_seconds=0.1)
    first.wait_for_step(3)
    for worker in first.workers():  # as Slurm signals a step: every process of it (torchrun ignores it)
        os.kill(worker, signal.SIGUSR1)
    assert first.finish() == 0, first.text()
    (step, seconds, size, path), = CHECKPOINT.findall(first.text())
    checkpoint = Path(path)
    assert checkpoint == first.directory / f"step-{int(step):06d}" and int(step) >= 3
    assert sorted(p.name for p in checkpoint.iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp",
                                                            "fmcluster.json"]
    assert int(size) == sum(p.stat().st_size for p in checkpoint.iterdir() if p.name != "fmcluster.json")
    assert json.loads((checkpoint / "fmcluster.json").read_text()) == {"step": int(step), "seconds": float(seconds),
                                                                       "bytes": int(size)}
    assert (first.directory / "stopped").read_text() == f"{step}\n"
    assert sorted(losses(first.text())) == list(range(1, int(step) + 1)) and "fmcluster-smoke ok" not in first.text()

    second = Run(tmp_path, "second")
    assert second.finish() == 0, second.text()
    assert second.text().startswith(f"fmcluster-smoke resumed step={step} seconds={seconds} bytes={size} "
                                    f"path={path}\n")
    assert losses(second.text()) == {s: loss for s, loss in unstopped.items() if s > int(step)}  # it goes on
    assert not first.directory.exists()  # the completed run removed its checkpoints
    (result,) = verify.parse_smoke_runs(first.text() + second.text())
    assert result.verdict is verify.Verdict.PASS and result.checkpoints[0].resumed


def test_one_ranks_signal_stops_every_rank_at_the_same_step(tmp_path):
    run = Run(tmp_path, "one", step_seconds=0.1)
    run.wait_for_step(2)
    os.kill(run.workers()[1], signal.SIGUSR1)  # rank 1 only
    assert run.finish() == 0, run.text()
    (step, *_), = CHECKPOINT.findall(run.text())
    saved = run.directory / f"step-{int(step):06d}"
    assert {json.loads(p.read_text())["dict"]["step"]["value"] for p in saved.glob("__*_0.distcp")} == {int(step)}


def test_torchrun_passes_sigterm_on_and_its_workers_save(tmp_path):
    """SIGTERM to torchrun alone (Kubernetes signals a container's first process): it passes it on to
    its workers, which save before it ends them."""
    run = Run(tmp_path, "term", step_seconds=0.1, ignore=None)
    run.wait_for_step(2)
    run.process.send_signal(signal.SIGTERM)
    assert run.finish() == 1  # torchrun fails on the signal it got (SignalException)
    (step, *_), = CHECKPOINT.findall(run.text())
    assert (run.directory / f"step-{int(step):06d}" / ".metadata").exists()


def test_a_checkpoint_cut_short_is_never_read(tmp_path, unstopped):
    """A .partial directory (the end came mid-write) is removed and the newest whole one read."""
    first = Run(tmp_path, "first", step_seconds=0.1)
    first.wait_for_step(2)
    for worker in first.workers():
        os.kill(worker, signal.SIGUSR1)
    assert first.finish() == 0, first.text()
    (step, *_), = CHECKPOINT.findall(first.text())
    cut = first.directory / f".step-{int(step) + 5:06d}.partial"
    cut.mkdir()
    (cut / "__0_0.distcp").write_text("{")
    second = Run(tmp_path, "second", steps=int(step) + 1)
    assert second.finish() == 0, second.text()
    assert second.text().startswith(f"fmcluster-smoke resumed step={step} ")
    assert losses(second.text()) == {int(step) + 1: unstopped[int(step) + 1]}


def test_a_world_of_one_gpu_saves_and_resumes(tmp_path, unstopped):
    first = Run(tmp_path, "first", nproc=1, step_seconds=0.1)
    first.wait_for_step(2)
    os.kill(first.workers()[0], signal.SIGUSR1)
    assert first.finish() == 0, first.text()
    (step, *_), = CHECKPOINT.findall(first.text())
    assert sorted(p.name for p in (first.directory / f"step-{int(step):06d}").iterdir()) == [
        ".metadata", "__0_0.distcp", "fmcluster.json"]
    second = Run(tmp_path, "second", nproc=1)
    assert second.finish() == 0 and "fmcluster-smoke ok world_size=1 steps=30" in second.text()


def test_without_a_checkpoint_directory_it_saves_nothing(tmp_path):
    run = Run(tmp_path, "plain", steps=3, checkpoints=False)
    assert run.finish() == 0 and "fmcluster-smoke ok world_size=2 steps=3" in run.text()
    assert not (tmp_path / "checkpoints").exists() and "checkpoint" not in run.text()
