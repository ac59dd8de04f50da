"""The layers hold (docs/design.md, "The packages"), read from the source (every import
statement, at module level or inside a function):

- `fmcluster/` is pure: it never imports aws_cdk, constructs, cdk_nag, nor the CDK side
  (`fmcluster_cdk/`). It runs the CDK app as a program (fmcluster.deploy.synth) instead.
- `fmcluster_cdk/constructs/` knows nothing of the spec or of the stacks: no `stacks`, no
  `fmcluster.spec.models` / `fmcluster.spec.loader` / `fmcluster.model.cluster` (constructs take typed props).
- No import cycles among the project's modules (module-level imports: what runs at import).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("fmcluster", "fmcluster_cdk")
CDK_SIDE = ("aws_cdk", "constructs", "cdk_nag", "fmcluster_cdk")
SPEC_SIDE = ("fmcluster_cdk.stacks", "fmcluster.spec", "fmcluster.model")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources(package: str) -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / package).rglob("*.py")) if "handlers" not in p.parts}


def imports(path: Path, *, module_level_only: bool = False) -> set[str]:
    """Every module an import statement of the file names (`from a import b` names a and a.b)."""
    tree = ast.parse(path.read_text(), str(path))
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_there_is_something_to_check():
    assert len(sources("fmcluster")) > 30 and sources("fmcluster_cdk")


@pytest.mark.parametrize("module, path", sorted(sources("fmcluster").items()))
def test_fmcluster_is_pure(module, path):
    forbidden = sorted(n for n in imports(path) if within(n, CDK_SIDE))
    assert not forbidden, f"{module} imports {forbidden}: fmcluster/ never imports the CDK side"


@pytest.mark.parametrize("module, path", sorted(sources("fmcluster_cdk/constructs").items()))
def test_constructs_know_nothing_of_the_spec(module, path):
    forbidden = sorted(n for n in imports(path) if within(n, SPEC_SIDE))
    assert not forbidden, f"{module} imports {forbidden}: constructs take typed props, not the spec"


def test_no_import_cycles():
    modules = {name: path for package in PACKAGES for name, path in sources(package).items()}
    graph = {name: {m for m in imports(path, module_level_only=True) if m in modules and m != name}
             for name, path in modules.items()}
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(name: str, trail: list[str]) -> None:
        state[name] = 1
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                cycle = trail[trail.index(target):] + [target] if target in trail else [name, target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target, trail + [target])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def test_the_checks_catch_a_violation(tmp_path):
    """The import reader sees imports at any depth (a CDK import inside a function too)."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from aws_cdk import aws_ec2\n    import fmcluster_cdk.stacks.pcs\n")
    assert {"aws_cdk", "aws_cdk.aws_ec2", "fmcluster_cdk.stacks.pcs"} <= imports(bad)
    assert within("aws_cdk.aws_ec2", CDK_SIDE) and not within("aws_cdkx", CDK_SIDE)
