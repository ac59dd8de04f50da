"""What the benchmark scripts share: timing commands in fresh processes, and reporting."""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def median_seconds(cmd: list[str], runs: int, *, env: dict | None = None, outdir: bool = False) -> float:
    """Median wall time of `cmd` over `runs` runs; with `outdir`, a fresh directory is appended."""
    samples = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            subprocess.run(cmd + [out] if outdir else cmd, cwd=ROOT, env=env, check=True, capture_output=True)
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def report(figures: dict, name: str) -> None:
    """Print the figures and write them to bench/results/NAME.json."""
    for key, value in figures.items():
        print(f"{key:28} {value}")
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(figures, indent=2) + "\n")
