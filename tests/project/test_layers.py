"""The layers hold (docs/design.md, "The packages"): every import of every module of
fmcluster/ and fmcluster_cdk/ (at module level, inside a function, under `if TYPE_CHECKING:`)
goes down the table LAYERS, and no imports form a cycle, between packages or between modules.

The table, bottom up: facts (static data) -> spec (the pydantic spec and its rules) -> model
(the resolved ClusterModel) -> node | kubernetes | observability (what runs on a node, inside a
Kubernetes cluster, the alerts and dashboards) -> plan | deploy | kits (the commands) -> cli; text
(the tables of the commands' reports) sits at the bottom beside facts, and only the commands name it.
A layer imports the layers it names below it and theirs, never a peer of its row nor a layer
above. The CDK side sits above the core, which never imports it: constructs see only facts and
the CDK libraries (typed props: no spec, no model, no stacks), the stacks map the model onto
constructs (never importing the commands: plan, deploy, kits), and synthesis is the CDK app
program with its configuration (feature_flags).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterable, Mapping

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("fmcluster", "fmcluster_cdk")

# layer -> (the modules it holds, by prefix; the layers right below it). A root package
# (`fmcluster`, `fmcluster_cdk`) holds only its own __init__, not its subpackages.
LAYERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "cdk libraries": (("aws_cdk", "constructs", "cdk_nag"), ()),
    "facts": (("fmcluster", "fmcluster.facts"), ()),
    "text": (("fmcluster.text",), ()),
    "spec": (("fmcluster.spec",), ("facts",)),
    "model": (("fmcluster.model",), ("spec",)),
    "node": (("fmcluster.node",), ("model",)),
    "kubernetes": (("fmcluster.kubernetes",), ("model",)),
    "observability": (("fmcluster.observability",), ("model",)),
    "plan": (("fmcluster.plan",), ("node", "kubernetes", "observability", "text")),
    "deploy": (("fmcluster.deploy",), ("node", "kubernetes", "observability", "text")),
    "kits": (("fmcluster.kits",), ("node", "kubernetes", "observability", "text")),
    "cli": (("fmcluster.cli", "fmcluster.terminal", "fmcluster.__main__"), ("plan", "deploy", "kits")),
    "constructs": (("fmcluster_cdk", "fmcluster_cdk.constructs", "fmcluster_cdk.errors"), ("cdk libraries", "facts")),
    "stacks": (("fmcluster_cdk.stacks", "fmcluster_cdk.nag"), ("constructs", "node", "kubernetes", "observability")),
    "synthesis": (("fmcluster_cdk.synthesis", "fmcluster_cdk.feature_flags"), ("stacks",)),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources(package: str) -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / package).rglob("*.py"))}


MODULES = {name: path for package in PACKAGES for name, path in sources(package).items()}


def imports(path: Path, module: str = "") -> set[str]:
    """Every name an import statement of the file imports, at any depth of the tree (module
    level, functions, `if TYPE_CHECKING:`): `import a.b` gives a.b, `from a import b` gives a.b,
    a relative import is made absolute against `module` (the file's own dotted name); a module
    found at run time by a constant name (`importlib.import_module("a.b")`) gives a.b."""
    tree = ast.parse(path.read_text(), str(path))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            source = ".".join([*base, *([node.module] if node.module else [])])
            found |= {f"{source}.{alias.name}" for alias in node.names}
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
              in ("find_spec", "import_module") and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            found.add(node.args[0].value)
    return found


def resolve(name: str, modules: Iterable[str]) -> str | None:
    """The module an imported name lies in (the longest module that is a prefix of it), or None
    for a name outside the project."""
    known = set(modules)
    parts = name.split(".")
    return next((".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in known), None)


def within(name: str, prefix: str) -> bool:
    if prefix in PACKAGES:
        return name == prefix  # a root package holds only itself
    return name == prefix or name.startswith(prefix + ".")


def unit_of(name: str, table: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = LAYERS) -> tuple[str, str] | None:
    """(layer, prefix) of a module or an imported name: the longest prefix of the table it lies in."""
    matches = [(len(prefix), layer, prefix) for layer, (prefixes, _) in table.items()
               for prefix in prefixes if within(name, prefix)]
    return max(matches)[1:] if matches else None


def below(layer: str, table: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = LAYERS) -> set[str]:
    """Every layer `layer` may import: those it names, and theirs."""
    found: set[str] = set()
    todo = list(table[layer][1])
    while todo:
        lower = todo.pop()
        if lower not in found:
            found.add(lower)
            todo += table[lower][1]
    return found


def violations(module: str, imported: Iterable[str],
               table: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = LAYERS) -> list[str]:
    """The imported names that go up or sideways in the table from `module`."""
    own = unit_of(module, table)
    assert own, f"{module} is in no layer of the table"
    allowed = below(own[0], table) | {own[0]}
    out = []
    for name in sorted(imported):
        target = unit_of(name, table)
        if target and target[0] not in allowed:
            out.append(f"{name} ({target[0]})")
    return out


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def module_graph() -> dict[str, set[str]]:
    """Module -> the project's modules it imports, at every depth."""
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        targets = {resolve(n, MODULES) for n in imports(path, name)}
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def test_there_is_something_to_check():
    assert len(sources("fmcluster")) > 30 and len(sources("fmcluster_cdk")) > 20


def test_the_table_is_a_stack_of_layers():
    """The table itself goes one way, and names only its own layers."""
    assert all(lower in LAYERS for _, lowers in LAYERS.values() for lower in lowers)
    assert not cycles({layer: lowers for layer, (_, lowers) in LAYERS.items()})
    assert "cdk libraries" not in below("cli") and "constructs" not in below("cli")
    assert not {"spec", "model", "stacks"} & below("constructs")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_import_goes_down_the_table(module):
    assert unit_of(module), f"{module} is in no layer of LAYERS: place it"
    wrong = violations(module, imports(MODULES[module], module))
    assert not wrong, f"{module} ({unit_of(module)[0]}) imports {wrong}: against the table LAYERS"


def test_no_import_cycles_between_modules():
    found = cycles(module_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_import_cycles_between_packages():
    """Packages as the table names them (fmcluster.spec with its rules, fmcluster.kits, ...)."""
    graph: dict[str, set[str]] = {}
    for module, targets in module_graph().items():
        own = unit_of(module)
        graph.setdefault(own[1], set()).update(u[1] for t in targets if (u := unit_of(t)) and u[1] != own[1])
    found = cycles(graph)
    assert not found, "import cycles between packages: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_reader_sees_every_import(tmp_path):
    """Imports at module level, inside functions and classes, under TYPE_CHECKING, relative, and
    modules imported at run time by a constant name (a computed name cannot be read)."""
    package = tmp_path / "pkg"
    package.mkdir()
    source = package / "mod.py"
    source.write_text(
        "from __future__ import annotations\n"
        "import os.path\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from fmcluster.model.cluster import ClusterModel\n"
        "def f():\n"
        "    from aws_cdk import aws_ec2\n"
        "    import fmcluster_cdk.stacks.pcs\n"
        "class C:\n"
        "    def g(self):\n"
        "        if True:\n"
        "            from . import sibling\n"
        "            from ..other import thing\n"
        "STACKS = {'pcs': 'fmcluster_cdk.stacks.hyperpod'}\n"
        "def h(name):\n"
        "    importlib.import_module('fmcluster_cdk.stacks.eks')\n"
        "    importlib.util.find_spec('cfnlint')\n"
        "    return import_module(STACKS[name])\n")
    assert imports(source, "pkg.mod") == {
        "os.path", "typing.TYPE_CHECKING", "__future__.annotations", "fmcluster.model.cluster.ClusterModel",
        "aws_cdk.aws_ec2", "fmcluster_cdk.stacks.pcs", "pkg.sibling", "other.thing", "fmcluster_cdk.stacks.eks",
        "cfnlint"}
    assert resolve("fmcluster.model.cluster.ClusterModel", MODULES) == "fmcluster.model.cluster"
    assert resolve("fmcluster.spec.rules.capacity", MODULES) == "fmcluster.spec.rules.capacity"
    assert resolve("os.path", MODULES) is None


def test_the_checks_catch_a_violation_and_a_cycle():
    """A synthetic table and graph: an upward import, a sideways one, a CDK import in the core,
    and cycles are reported; downward imports are not."""
    table = {"low": (("p.low",), ()), "mid": (("p.mid", "p.side"), ("low",)), "peer": (("p.peer",), ("low",)),
             "top": (("p.top",), ("mid", "peer"))}
    assert violations("p.top.x", ["p.mid.y.Name", "p.low.z", "os.path"], table) == []
    assert violations("p.low.z", ["p.top.x.f"], table) == ["p.top.x.f (top)"]
    assert violations("p.mid.y", ["p.peer.q"], table) == ["p.peer.q (peer)"]
    assert violations("fmcluster.model.cluster", ["aws_cdk.aws_ec2"]) == ["aws_cdk.aws_ec2 (cdk libraries)"]
    assert violations("fmcluster_cdk.constructs.network", ["fmcluster.spec.models.ClusterSpec"])
    assert violations("fmcluster.facts.catalog", ["fmcluster_cdk.stacks.app"])
    assert unit_of("fmcluster.newpackage.module") is None  # the root holds only its own __init__
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"f"}, "f": {"e"}, "g": set()}
    assert cycles(graph) == [["a", "b", "c"], ["e", "f"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
