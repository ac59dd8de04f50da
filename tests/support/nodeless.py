"""fmcluster as a user without a usable Node.js runs it: an interpreter with this checkout's
packages but no Node.js beside it (an installed package has none; `make install` links one into
.venv/bin), and a PATH of the test's choosing. Not a test module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT


def venv_without_node(at: Path) -> Path:
    """The interpreter of a virtual environment at `at` that holds this checkout's packages (its
    lib is the venv's) and no `node` beside it. Returns its `bin/python`."""
    venv = Path(sys.prefix)
    (at / "bin").mkdir(parents=True)
    (at / "pyvenv.cfg").write_text((venv / "pyvenv.cfg").read_text())
    (at / "lib").symlink_to(venv / "lib")
    (at / "bin" / "python").symlink_to(Path(sys.executable).resolve())
    return at / "bin" / "python"


def stand_in_node(at: Path, version: str) -> Path:
    """A directory holding a `node` that says it is `version` (v20.20.2) and does nothing else:
    for a line of Node.js the machine may not have. Returns the directory, for PATH."""
    at.mkdir(parents=True)
    node = at / "node"
    node.write_text(f"#!/bin/sh\necho {version}\n")
    node.chmod(0o755)
    return at


def fmcluster(python: Path, *args: str, path: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m fmcluster ARGS` in the repository, with PATH `path` and no JSII_NODE or
    CDK_DEFAULT_ACCOUNT of the caller's."""
    base = {k: v for k, v in os.environ.items() if k not in ("JSII_NODE", "CDK_DEFAULT_ACCOUNT", "VIRTUAL_ENV")}
    return subprocess.run([str(python), "-m", "fmcluster", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**base, "PATH": path, "AWS_EC2_METADATA_DISABLED": "true", **env}, timeout=300)
