"""The type checker: `python -m mypy`, configured in pyproject.toml ([tool.mypy]: the core fmcluster/
and the CDK side fmcluster_cdk/ and app.py in strict mode, with the pydantic plugin), finds no issue.
mypy keeps its cache in .mypy_cache, so a run after the first checks only what changed."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from tests.support.paths import ROOT


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    """mypy as the README runs it: from the repository root, so it reads pyproject.toml."""
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=ROOT, capture_output=True, text=True)


def test_the_core_and_the_cdk_side_are_checked_in_strict_mode():
    """Both packages and the CDK app's entry point; strict everywhere but the flags the Lambda
    handlers' override relaxes (it names why), and nothing else overridden."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["strict"] is True
    assert set(config["files"]) == {"fmcluster", "fmcluster_cdk", "app.py"}
    (handlers,) = config["overrides"]
    assert handlers["module"] == ["fmcluster_cdk.constructs.*.handlers.*"]
    assert not {k for k, v in handlers.items() if k != "module" and v is not False}
    # nor a file's own settings (`# mypy: ignore-errors` and the like)
    code = [p for folder in ("fmcluster", "fmcluster_cdk") for p in (ROOT / folder).rglob("*.py")]
    assert not [str(p) for p in code if "# mypy:" in p.read_text()]


def test_the_code_is_clean_under_strict_mypy():
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
