"""The linter: `ruff check`, configured in pyproject.toml ([tool.ruff]: pycodestyle, pyflakes,
import order and bugbear, lines of at most 120 characters), finds nothing in any Python file of
the repository."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import ROOT


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    """ruff as the README runs it: from the repository root, so it reads pyproject.toml."""
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", *args],
                          cwd=ROOT, capture_output=True, text=True)


def test_the_repository_is_clean_under_ruff():
    result = ruff()
    assert result.returncode == 0, f"ruff found issues:\n{result.stdout}{result.stderr}"


def test_the_same_settings_reject_unordered_imports_unused_names_and_long_lines(tmp_path):
    """The check can fail: pyproject.toml's settings on a file with imports out of order, an
    unused import, a zip() that does not say whether lengths must agree and a long line."""
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nimport json\n\n\ndef pairs(a, b):\n    return list(zip(a, b))\n\n\n"
                   f"LONG = '{'x' * 120}'\n")
    result = ruff("--config", str(ROOT / "pyproject.toml"), str(bad))
    codes = {line.split(" ")[1] for line in result.stdout.splitlines() if line.startswith(str(bad))}
    assert result.returncode == 1, result.stdout + result.stderr
    assert {"I001", "F401", "B905", "E501"} <= codes, result.stdout
