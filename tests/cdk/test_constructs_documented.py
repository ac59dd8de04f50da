"""Every construct of fmcluster_cdk.constructs takes typed props and documents them (issue 14), read with
`inspect` from the classes themselves, so that a new undocumented prop fails here:

- every construct class (a subclass of `constructs.Construct` defined in a fmcluster_cdk.constructs module)
  takes its props as keyword-only parameters after `scope` and `construct_id`, each with a type
  annotation, and no `*args` / `**kwargs` pass-through;
- every dataclass of props defined there is frozen and annotates each field;
- the class docstring has a `Props:` section with one entry per prop (``    name: what it is``),
  each with a ``@default`` line (a value, or ``required``), and no entry for a prop that does
  not exist;
- a construct's `Attributes:` section names every public attribute it adds: its own properties
  and what its `__init__` assigns to `self` (inherited ones are checked on the class that adds them).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
import re
import textwrap

import pytest
from constructs import Construct

import fmcluster_cdk.constructs

SECTION = re.compile(r"^(Props|Attributes):")
ENTRY = re.compile(r"^    ([A-Za-z_]\w*):(?: |$)")
# The constructs that issue 14 names, which the walk below must find (it finds any other too).
NAMED = {"ClusterVpc", "VpcFlowLog", "EfaSecurityGroup", "NodeSecurityGroup", "ClusterPlacementGroups",
         "LustreFileSystem", "OpenZfsFileSystem", "SecureBucket", "RetainedKey", "NodeLaunchTemplate", "NodeRole",
         "SlurmCluster",
         "ComputeNodeGroup", "SlurmQueue", "ClusterAddon", "ManagedNodeGroup", "EksNodeRole", "PodIdentityRole",
         "HyperPodCluster", "InstanceGroup", "HyperPodExecutionRole", "LifecycleScripts", "HyperPodDependencies",
         "AlertTopic", "PrometheusWorkspace", "ClusterAlarms", "GrafanaWorkspace", "GrafanaProvisioner",
         "ManagedScraper"}


def modules():
    package = fmcluster_cdk.constructs
    return [importlib.import_module(info.name)
            for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}.") if not info.ispkg]


def documented_classes() -> dict[str, type]:
    """Construct classes and dataclasses defined in fmcluster_cdk.constructs, by qualified name."""
    found = {}
    for module in modules():
        for cls in vars(module).values():
            if (inspect.isclass(cls) and cls.__module__ == module.__name__
                    and (issubclass(cls, Construct) or dataclasses.is_dataclass(cls))):
                found[f"{module.__name__}.{cls.__qualname__}"] = cls
    return found


def sections(doc: str) -> dict[str, dict[str, list[str]]]:
    """{section: {entry name: its lines}} of a docstring's `Props:` and `Attributes:` sections."""
    found: dict[str, dict[str, list[str]]] = {}
    current = entry = None
    for line in doc.splitlines():
        if SECTION.match(line):
            current, entry = found.setdefault(SECTION.match(line).group(1), {}), None
        elif current is None:
            continue
        elif line and not line.startswith(" "):
            current = entry = None
        elif ENTRY.match(line):
            entry = current.setdefault(ENTRY.match(line).group(1), [])
            entry.append(line)
        elif entry is not None:
            entry.append(line)
    return found


def props(cls: type) -> list[inspect.Parameter]:
    """The props: a dataclass's fields, or a construct's parameters after scope and construct_id."""
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]  # self
    return parameters if dataclasses.is_dataclass(cls) else parameters[2:]


def own_attributes(cls: type) -> set[str]:
    """Public properties the class defines, and public names its own __init__ assigns to self."""
    names = {name for name, value in vars(cls).items() if isinstance(value, property) and not name.startswith("_")}
    if "__init__" in vars(cls):
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls.__init__)))
        names |= {node.attr for node in ast.walk(tree)  # self.x = ..., self.a, self.b = ..., self.x: T = ...
                  if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                  and isinstance(node.value, ast.Name) and node.value.id == "self" and not node.attr.startswith("_")}
    return names


def problems(cls: type) -> list[str]:
    found = []
    doc = sections(inspect.getdoc(cls) or "")
    entries = doc.get("Props", {})
    params = props(cls)
    if not dataclasses.is_dataclass(cls):
        scope = list(inspect.signature(cls.__init__).parameters)[1:3]
        if scope != ["scope", "construct_id"]:
            found.append(f"__init__ takes {scope} first, not scope and construct_id")
    elif not cls.__dataclass_params__.frozen:
        found.append("a dataclass of props is frozen")
    for param in params:
        if param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
            found.append(f"{param}: no pass-through of props; every prop is an explicit parameter")
            continue
        if not dataclasses.is_dataclass(cls) and param.kind != param.KEYWORD_ONLY:
            found.append(f"{param.name}: props are keyword-only")
        if param.annotation is param.empty:
            found.append(f"{param.name}: no type annotation")
        if param.name not in entries:
            found.append(f"{param.name}: not documented under Props:")
        elif not any(line.strip().startswith("@default") for line in entries[param.name]):
            found.append(f"{param.name}: its Props: entry has no @default line")
    names = {param.name for param in params}
    found += [f"{name}: documented under Props: but not a prop" for name in sorted(set(entries) - names)]
    if not dataclasses.is_dataclass(cls):
        attributes = doc.get("Attributes", {})
        found += [f"attribute {name}: not documented under Attributes:"
                  for name in sorted(own_attributes(cls) - set(attributes))]
    return found


CLASSES = documented_classes()


def test_the_walk_finds_every_construct():
    names = {cls.__name__ for cls in CLASSES.values()}
    assert NAMED <= names, f"not found in fmcluster_cdk.constructs: {sorted(NAMED - names)}"


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_props_are_typed_and_documented(name):
    assert problems(CLASSES[name]) == []


def test_the_check_catches_an_undocumented_prop():
    class Undocumented(Construct):
        """Something.

        Props:
            size: how big, in GiB.
            gone: a prop that was removed.
                @default 1
        """

        def __init__(self, scope, construct_id, *, size: int, name, **extra) -> None:
            super().__init__(scope, construct_id)
            self.thing = size

    assert problems(Undocumented) == [
        "size: its Props: entry has no @default line",
        "name: no type annotation",
        "name: not documented under Props:",
        "**extra: no pass-through of props; every prop is an explicit parameter",
        "gone: documented under Props: but not a prop",
        "attribute thing: not documented under Attributes:",
    ]


def test_the_check_reads_dataclasses_of_props():
    @dataclasses.dataclass
    class Loose:
        """Something.

        Props:
            count: how many.
                @default required
        """

        count: int
        label: str = ""

    assert problems(Loose) == ["a dataclass of props is frozen", "label: not documented under Props:"]
