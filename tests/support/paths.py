"""Where things are in the repository, for every test module: the one definition of its root. Not a
test module."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = ROOT / "examples"
EXAMPLES = sorted(p.relative_to(ROOT).as_posix() for p in EXAMPLES_DIR.glob("*.yaml"))  # "examples/NAME.yaml"
DATA = ROOT / "tests" / "data"  # vendored schemas, tool outputs and metric lists, each with its provenance
SUPPORT = ROOT / "tests" / "support"
