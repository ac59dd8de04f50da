"""`make bench`: every speed target (issues 9 and 14), measured in one run on this machine.

    python bench/run.py [--quick]

Runs bench/validate.py, bench/synth.py and (unless --quick) bench/make_test.py, prints each
target with its measured value and whether it is met, writes bench/results/summary.json and
puts the table of figures in docs/development.md (after --quick, with the last full run's `make test`).
Exits 1 when a target is missed: the benchmark is the speed gate (the tests assert no timings).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import make_test  # noqa: E402
import synth  # noqa: E402
import table  # noqa: E402
import validate  # noqa: E402
from common import RESULTS, ROOT, exit_code, report  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="skip the fresh-clone make test (minutes)")
    parser.add_argument("--runs", type=int, default=None, help="runs per figure (default: each script's)")
    args = parser.parse_args()
    parts = {"validate": validate.measure(args.runs or validate.RUNS), "synth": synth.measure(args.runs or synth.RUNS)}
    if not args.quick:
        parts["make_test"] = make_test.measure()
    for name, figures in parts.items():
        report(figures, name)
    targets = [t for figures in parts.values() for t in figures["targets"]]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    summary = {"when": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%MZ"), "commit": commit,
               "machine": platform.machine(),
               "cpus": os.cpu_count(), "python": platform.python_version(), "targets": targets,
               "all_targets_met": exit_code(targets) == 0}
    (RESULTS / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    table.write()  # docs/development.md quotes these figures (after --quick, make test's are the last full run's)
    print()
    for t in targets:
        print(f"{'met ' if t['met'] else 'MISS'}  {t['measured']:>7} <= {t['limit']:<5} {t['what']}")
    print("all targets met" if summary["all_targets_met"] else "targets missed")
    return exit_code(targets)


if __name__ == "__main__":
    raise SystemExit(main())
