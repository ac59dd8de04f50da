"""What the benchmark scripts share: timing commands in fresh processes, and reporting.

Commands that are compared with each other are timed round-robin (a, b, c, a, b, c, ...) so that
a change in the machine's load during the run falls on all of them alike; the ratios are of
medians.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
# The environment the Makefile gives CDK runs: the project's Node.js (package.json's, in
# node_modules/.bin) first on PATH, no metadata-service probe, no version check.
ENV = dict(os.environ, AWS_EC2_METADATA_DISABLED="true", CDK_DISABLE_VERSION_CHECK="true",
           PATH=os.pathsep.join([str(ROOT / "node_modules" / ".bin"), os.environ.get("PATH", "")]))


def run_once(cmd: list[str], *, env: dict | None, outdir: bool) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one run of `cmd`; with `outdir`, a fresh
    directory is appended to the command."""
    with tempfile.TemporaryDirectory() as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd + [out] if outdir else cmd, cwd=ROOT, env=env or ENV, check=True, capture_output=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def medians(commands: dict[str, list[str]], runs: int, *, env: dict | None = None, outdir: bool = False,
            warmup: bool = True) -> dict[str, dict[str, float]]:
    """Median wall and CPU seconds of each command over `runs` round-robin runs (after one
    unmeasured warm-up round that fills the OS file cache and writes bytecode)."""
    if warmup:
        for cmd in commands.values():
            run_once(cmd, env=env, outdir=outdir)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, cmd in commands.items():
            samples[name].append(run_once(cmd, env=env, outdir=outdir))
    return {name: {"wall_s": round(statistics.median(s[0] for s in runs_), 4),
                   "cpu_s": round(statistics.median(s[1] for s in runs_), 4)}
            for name, runs_ in samples.items()}


def target(measured: float, limit: float, what: str) -> dict:
    """One target: the measured ratio (or seconds), its limit and whether it is met."""
    return {"what": what, "measured": round(measured, 2), "limit": limit, "met": measured <= limit}


def report(figures: dict, name: str) -> None:
    """Print the figures and write them to bench/results/NAME.json."""
    print(json.dumps(figures, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(figures, indent=2) + "\n")


def exit_code(targets: list[dict]) -> int:
    """A benchmark script's exit code: 0 when every target is met, else 1."""
    return 0 if all(t["met"] for t in targets) else 1
