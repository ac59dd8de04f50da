"""How long `fmcluster validate` takes, against the floor of importing pydantic and yaml.

    python bench/validate.py [--runs N]

Target (issue 9): validating an example takes at most 2x `python -c "import pydantic, yaml"`.
Also shows validating every example in one process, and the in-process cost per spec once the
imports are paid. Writes bench/results/validate.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import exit_code, medians, report, target  # noqa: E402

LIMIT = 2.0
RUNS = 21


def measure(runs: int) -> dict:
    examples = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*.yaml"))
    py = sys.executable
    times = medians({"floor": [py, "-c", "import pydantic, yaml"],
                     "one": [py, "-m", "fmcluster", "validate", examples[0]],
                     "every": [py, "-m", "fmcluster", "validate", *examples]}, runs)
    from fmcluster import loader  # in-process: the cost per spec once imports are paid

    loader.load(ROOT / examples[0])
    start = time.perf_counter()
    for _ in range(20):
        for example in examples:
            loader.load(ROOT / example)
    per_spec = (time.perf_counter() - start) / (20 * len(examples))
    return {
        "runs": runs,
        "import_pydantic_yaml": times["floor"],
        "validate_one_example": times["one"] | {"spec": examples[0]},
        "validate_every_example": times["every"] | {"specs": len(examples)},
        "in_process_per_spec_ms": round(per_spec * 1000, 3),
        "targets": [target(times["one"]["wall_s"] / times["floor"]["wall_s"], LIMIT,
                           "fmcluster validate / import pydantic, yaml (wall, medians)")],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=RUNS)
    figures = measure(parser.parse_args().runs)
    report(figures, "validate")
    return exit_code(figures["targets"])


if __name__ == "__main__":
    raise SystemExit(main())
