"""Where things are in the repository, for every test module: the one definition of its root. Not a
test module."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = ROOT / "examples"
EXAMPLES = sorted(p.relative_to(ROOT).as_posix() for p in EXAMPLES_DIR.glob("*.yaml"))  # "examples/NAME.yaml"
DATA = ROOT / "tests" / "data"  # vendored schemas, tool outputs and metric lists, each with its provenance
SUPPORT = ROOT / "tests" / "support"


def copy_checkout(into: Path) -> Path:
    """A copy of the checkout as a fresh clone with this change would have it (its tracked and new,
    not ignored, files) at `into`: what a build of the project sees. Returns `into`."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    for name in files:
        if (ROOT / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, into / name)
    return into
