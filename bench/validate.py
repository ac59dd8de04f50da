"""How long `fmcluster validate` takes on the examples, against the floor of importing
pydantic and yaml. Prints medians (and writes bench/results/validate.json).

    python bench/validate.py [--runs N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import median_seconds, report  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    examples = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*.yaml"))
    py = sys.executable
    floor = median_seconds([py, "-c", "import pydantic, yaml"], args.runs)
    one = median_seconds([py, "-m", "fmcluster", "validate", examples[0]], args.runs)
    every = median_seconds([py, "-m", "fmcluster", "validate", *examples], args.runs)
    start = time.perf_counter()
    from fmcluster import loader  # in-process: the cost per spec once imports are paid

    loader.load(examples[0])
    warm_start = time.perf_counter()
    for _ in range(50):
        for example in examples:
            loader.load(ROOT / example)
    per_spec = (time.perf_counter() - warm_start) / (50 * len(examples))
    figures = {
        "import_pydantic_yaml_s": round(floor, 4),
        "validate_one_example_s": round(one, 4),
        "validate_all_examples_s": round(every, 4),
        "examples": len(examples),
        "ratio_one_to_floor": round(one / floor, 2),
        "in_process_first_load_s": round(warm_start - start, 4),
        "in_process_per_spec_ms": round(per_spec * 1000, 3),
    }
    report(figures, "validate")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
