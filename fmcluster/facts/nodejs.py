"""The Node.js the CDK app runs on. aws-cdk-lib is JavaScript under its Python binding: jsii starts
`node` when aws_cdk is imported, so `fmcluster synth`, `fmcluster diff` and `cdk synth` need a
Node.js of a line jsii supports. `problem` says, in one line and before anything starts, when the
one jsii would run is missing or of another line: jsii would print a long traceback for a missing
one, and its end-of-life banner (as `b'!!...'` lines through its stderr reader) for Node 20.

The lines: jsii's runtime (jsii 1.142, jsii/_embedded/jsii/bin__jsii-runtime.js, NodeRelease
.ALL_RELEASES) lists the even LTS lines 18 (its support ended 2025-11-30), 20 (end of life
2026-04-30; jsii warns until six months later, then calls it unsupported), 22 (end of life
2027-04-30) and 24 (2028-04-30); the odd lines are untested. The AWS CDK supports 22 and 24
(docs/install.md), and the project pins 24: package.json's `node` and its engines
(`^22 || ^24`), and .nvmrc. tests/facts/test_nodejs.py holds SUPPORTED_MAJORS to all three.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Mapping, MutableMapping

SUPPORTED_MAJORS = (22, 24)
# The AWS CDK CLI this version of fmcluster is built and tested with: package.json's aws-cdk (which
# tests/facts/test_nodejs.py holds equal), for what runs without a clone of fmcluster: the GitOps
# pipeline of a project of one's own installs it.
CDK_CLI_VERSION = "2.1148.1"
JSII_NODE = "JSII_NODE"  # the variable jsii reads the Node.js program from (else `node` on PATH)
ACCEPTED = " or ".join(str(m) for m in SUPPORTED_MAJORS)


def venv_node(executable: str | None = None) -> Path:
    """The Node.js beside the interpreter: `make install` links the project's pinned Node.js LTS
    (package.json) as .venv/bin/node. An installed package has none."""
    return Path(executable or sys.executable).parent / "node"


def jsii_node(environ: Mapping[str, str] | None = None, executable: str | None = None) -> tuple[str, str]:
    """(program, how it was chosen) of the Node.js jsii runs: JSII_NODE where it is set, else the
    venv's (`venv_node`: `fmcluster synth` and the CDK app set JSII_NODE to it), else `node` on
    PATH."""
    env = os.environ if environ is None else environ
    if env.get(JSII_NODE):
        return env[JSII_NODE], f"{JSII_NODE}={env[JSII_NODE]}"
    beside = venv_node(executable)
    if beside.exists():
        return str(beside), str(beside)
    return "node", "node on PATH"


def pin(environ: MutableMapping[str, str], executable: str | None = None) -> None:
    """Point jsii at the Node.js `jsii_node` chooses, in `environ` (JSII_NODE), where it is a
    program of its own (the venv's, or JSII_NODE's): what the CDK app and `fmcluster synth`, which
    runs it, both do."""
    program, _ = jsii_node(environ, executable)
    if os.sep in program:
        environ[JSII_NODE] = program


def version(program: str, environ: Mapping[str, str] | None = None) -> str | None:
    """`node --version` of `program` (v24.21.0), or None when it cannot be run."""
    env = dict(os.environ if environ is None else environ)
    found = shutil.which(program, path=env.get("PATH")) if os.sep not in program else program
    if found is None:
        return None
    try:
        result = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=30, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    out = result.stdout.strip()
    return out if result.returncode == 0 and re.fullmatch(r"v[0-9]+\.[0-9]+\.[0-9]+.*", out) else None


def problem(environ: Mapping[str, str] | None = None, executable: str | None = None) -> str | None:
    """Why the Node.js jsii would run cannot run the CDK app, in one line; None when it can."""
    program, chosen = jsii_node(environ, executable)
    found = version(program, environ)
    remedy = (f"install Node.js {SUPPORTED_MAJORS[-1]} LTS (nvm install {SUPPORTED_MAJORS[-1]}) and put it on PATH, "
              f"or set {JSII_NODE} to one")
    if found is None:
        where = "no `node` on PATH" if program == "node" else f"{chosen} does not run"
        return f"Node.js not found ({where}): the CDK app runs on Node.js {ACCEPTED} (LTS); {remedy}"
    major = int(found[1:].split(".")[0])
    if major not in SUPPORTED_MAJORS:
        return (f"Node.js {found} ({chosen}) cannot run the CDK app: it runs on Node.js {ACCEPTED} (LTS), "
                f"the lines jsii supports; {remedy}")
    return None
