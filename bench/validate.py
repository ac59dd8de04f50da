"""How long `fmcluster validate` takes, and the floor of importing pydantic and yaml.

    python bench/validate.py [--runs N]

Target (issue 14, replacing issue 9's "at most 2x `python -c "import pydantic, yaml"`"): validate
stays well under the time of a human keystroke, in ordinary Python (argparse for every command,
pydantic as it comes, no work skipped at exit). The limit, LIMIT_S, is on the wall-time median of
`fmcluster validate` of one example in fresh processes. Why 0.5 s: keystrokes come 0.2 to 0.3 s
apart at 40 to 60 words a minute, and importing pydantic and yaml alone takes 0.1 to 0.2 s on
the machines measured here, so the floor already spends most of one keystroke; half a second is
still well inside the one second within which a response keeps a person's flow (Nielsen's limits:
0.1 s feels instant, 1 s keeps the flow), and leaves room for a loaded machine. Issue 36 adds
the ratio to the import floor as a target again: at most RATIO_LIMIT. Also shows validating every
example in one process, and the in-process cost per spec once the imports are paid. Writes bench/results/validate.json.
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

LIMIT_S = 0.5
RATIO_LIMIT = 2.5  # issue 36: validate at most 2.5x its import floor
RUNS = 21


def measure(runs: int) -> dict:
    examples = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*.yaml"))
    py = sys.executable
    times = medians({"floor": [py, "-c", "import pydantic, yaml"],
                     "one": [py, "-m", "fmcluster", "validate", examples[0]],
                     "every": [py, "-m", "fmcluster", "validate", *examples]}, runs)
    from fmcluster.spec import loader  # in-process: the cost per spec once imports are paid

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
        "over_import_floor": round(times["one"]["wall_s"] / times["floor"]["wall_s"], 2),
        "targets": [target(times["one"]["wall_s"], LIMIT_S, "fmcluster validate of an example (seconds, wall median)"),
                    target(round(times["one"]["wall_s"] / times["floor"]["wall_s"], 2), RATIO_LIMIT,
                           "fmcluster validate / import pydantic, yaml (wall)")],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=RUNS)
    figures = measure(parser.parse_args().runs)
    report(figures, "validate")
    return exit_code(figures["targets"])


if __name__ == "__main__":
    raise SystemExit(main())
