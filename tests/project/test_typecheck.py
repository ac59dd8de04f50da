"""The type checker: `python -m mypy`, configured in pyproject.toml ([tool.mypy]: the core fmcluster/
and the CDK side fmcluster_cdk/ and app.py in strict mode, with the pydantic plugin), finds no issue.
mypy keeps its cache in .mypy_cache, so a run after the first checks only what changed."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import aws_cdk

from tests.support.paths import ROOT

# The imports jsii writes into each aws-cdk-lib module, once its docstring (whose examples import
# freely) is behind it: `import aws_cdk.aws_ec2 as _aws_ec2_0123abcd` (the types a module names),
# `import aws_cdk.cx_api._jsii` (the assemblies it loads) and `from .._jsii import *`.
GENERATED_IMPORT = re.compile(r"^(?:\s*import (aws_cdk[\w.]*) as _\w+_[0-9a-f]{8}|import (aws_cdk[\w.]*)"
                              r"|from (\.+)(\w*) import \*)$", re.M)


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    """mypy as the README runs it: from the repository root, so it reads pyproject.toml."""
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=ROOT, capture_output=True, text=True)


def test_the_core_and_the_cdk_side_are_checked_in_strict_mode():
    """Both packages and the CDK app's entry point; strict everywhere but the flags the Lambda
    handlers' override relaxes (it names why), and nothing else overridden but which of
    aws-cdk-lib's modules mypy reads (the next test)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["strict"] is True
    assert set(config["files"]) == {"fmcluster", "fmcluster_cdk", "app.py"}
    handlers, unread, read = config["overrides"]
    assert handlers["module"] == ["fmcluster_cdk.constructs.*.handlers.*"]
    assert not {k for k, v in handlers.items() if k != "module" and v is not False}
    assert unread == {"module": ["aws_cdk.*"], "follow_imports": "skip"}
    assert set(read) == {"module", "follow_imports"} and read["follow_imports"] == "normal"


def aws_cdk_imports(path: Path) -> set[str]:
    """What a file of fmcluster's imports from aws-cdk-lib: modules, and names in them."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return {m for m in found if m.split(".")[0] == "aws_cdk"}


def reached(roots: set[str]) -> set[str]:
    """Every aws-cdk-lib module the `roots` import, and those import, in the installed release,
    followed through the imports jsii generates (a module's parents come with it). The root
    module's own type-checking block, which names every module for `aws_cdk.NAME` access, is not
    followed: it is what the override leaves unread."""
    site = Path(aws_cdk.__file__).parent.parent
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        source = site.joinpath(*parts, "__init__.py")
        if not source.exists():  # a class imported by name (`from aws_cdk import Duration`)
            continue
        for aliased, bare, dots, relative in GENERATED_IMPORT.findall(source.read_text()):
            if aliased or bare:
                todo.append(aliased or bare)
            else:
                todo.append(".".join(parts[:len(parts) - len(dots) + 1] + ([relative] if relative else [])))
    return {name for name in seen if (site.joinpath(*name.split(".")) / "__init__.py").exists()}


def test_mypy_reads_every_aws_cdk_module_the_code_can_reach():
    """The modules mypy reads (pyproject.toml: `aws_cdk` and `aws_cdk.NAME.*`) are the aws-cdk-lib
    modules fmcluster_cdk/ and app.py import and those import in turn: none left out (its types
    would be Any, and a wrong call would pass), none more (a cold run would read it for nothing)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    listed = set(config["overrides"][2]["module"])
    code = [*(ROOT / "fmcluster_cdk").rglob("*.py"), ROOT / "app.py"]
    roots = set().union(*(aws_cdk_imports(path) for path in code))
    modules = reached(roots)
    assert {"aws_cdk.aws_ec2", "aws_cdk.aws_lambda", "aws_cdk.aws_ecr", "aws_cdk.interfaces"} <= modules
    assert "aws_cdk.aws_lightsail" not in modules
    tops = {"aws_cdk"} | {".".join(name.split(".")[:2]) + ".*" for name in modules if name != "aws_cdk"}
    assert listed == tops, f"read, not listed: {sorted(tops - listed)}; listed, not read: {sorted(listed - tops)}"
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
