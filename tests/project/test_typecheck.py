"""The type checker: `python -m mypy`, configured in pyproject.toml ([tool.mypy]: the package
fmcluster/ in strict mode, with the pydantic plugin), finds no issue. mypy keeps its cache in
.mypy_cache, so a run after the first checks only what changed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    """mypy as the README runs it: from the repository root, so it reads pyproject.toml."""
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=ROOT, capture_output=True, text=True)


def test_fmcluster_is_clean_under_strict_mypy():
    result = mypy()
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "Success: no issues found" in result.stdout, f"mypy found issues:\n{output}"


def test_the_same_settings_reject_untyped_and_wrongly_typed_code(tmp_path):
    """The check can fail: pyproject.toml's settings (strict) on a file with a function without
    annotations and a return of the wrong type give an error for each."""
    bad = tmp_path / "bad.py"
    bad.write_text("def untyped(x):\n    return x\n\n\ndef wrong() -> int:\n    return 'one'\n")
    result = mypy("--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"), str(bad))
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "[no-untyped-def]" in output and "[return-value]" in output, output
    assert "Found 2 errors in 1 file" in output, output
