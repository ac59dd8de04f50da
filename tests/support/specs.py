"""Helpers for the rule tests: a small valid spec as a dict, edits on copies (`on`: under another
control plane), and the loader's diagnostics for a dict. Not a test module."""

from __future__ import annotations

import copy
import itertools
import re
from typing import Any, Iterator

import yaml

from fmcluster.facts import controlplanes
from fmcluster.spec import loader
from fmcluster.spec.diagnostics import Diagnostic, dotted
from fmcluster.spec.models import ClusterSpec

_MISSING = object()


def base_spec(**overrides: Any) -> dict:
    """A small valid spec: AWS PCS in use1-az4, 2 x p5.48xlarge on-demand, two buckets and a
    4800 GiB PERSISTENT_2 file system linked to both. Keyword arguments replace top-level keys."""
    spec = {
        "name": "test-cluster",
        "region": "us-east-1",
        "availability_zone_id": "use1-az4",
        "storage": {
            "buckets": [{"name": "datasets"}, {"name": "checkpoints", "versioned": True}],
            "lustre": {
                "storage_capacity_gib": 4800,
                "deployment_type": "PERSISTENT_2",
                "links": [
                    {"bucket": "datasets", "path": "/datasets", "import": ["NEW", "CHANGED", "DELETED"]},
                    {"bucket": "checkpoints", "path": "/checkpoints", "export": ["NEW", "CHANGED"]},
                ],
            },
        },
        "orchestrator": {"type": "pcs"},
        "node_groups": [
            {"name": "gpu", "instance_type": "p5.48xlarge", "count": 2, "capacity": {"type": "on-demand"}},
        ],
    }
    spec.update(copy.deepcopy(overrides))
    return spec


_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _parts(path: str) -> list[str | int]:
    """'node_groups[0].capacity.type' -> ['node_groups', 0, 'capacity', 'type']."""
    parts: list[str | int] = []
    for name, index in _PART.findall(path):
        parts.append(int(index) if index else name)
    if dotted(tuple(parts)) != path:
        raise ValueError(f"cannot parse path {path!r}")
    return parts


def _parent(root: Any, parts: list[str | int], create: bool) -> Any:
    node = root
    for part, following in itertools.pairwise(parts):
        if isinstance(part, str) and part not in node:
            if not create:
                raise KeyError(part)
            node[part] = [] if isinstance(following, int) else {}
        node = node[part]
    return node


def with_(spec: dict, path: str, value: Any) -> dict:
    """A deep copy of `spec` with the value at a dotted path (list indices allowed) set;
    missing mappings on the way are created, and index len(list) appends."""
    out = copy.deepcopy(spec)
    parts = _parts(path)
    parent = _parent(out, parts, create=True)
    last = parts[-1]
    value = copy.deepcopy(value)
    if isinstance(last, int) and last == len(parent):
        parent.append(value)
    else:
        parent[last] = value
    return out


def on(type_, spec=None):
    """The spec under another control plane (with the second AZ ID Kubernetes ones need)."""
    spec = with_(spec or base_spec(), "orchestrator.type", type_)
    if controlplanes.get(type_).min_availability_zones > 1:
        spec = with_(spec, "network.extra_availability_zone_ids", ["use1-az1"])
    return spec


def without(spec: dict, path: str) -> dict:
    """A deep copy of `spec` with the key (or list item) at a dotted path removed."""
    out = copy.deepcopy(spec)
    parts = _parts(path)
    del _parent(out, parts, create=False)[parts[-1]]
    return out


# libyaml's emitter and parser (PyYAML's C extension, which its wheels carry) where there: the
# same YAML as the pure-Python ones, several times faster; the tests write and read thousands of specs
SAFE_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def to_yaml(spec: dict) -> str:
    return yaml.dump(spec, Dumper=SAFE_DUMPER, sort_keys=False)


def problems(spec: dict) -> list[Diagnostic]:
    """Every diagnostic the loader reports for the spec (types, formats and rules)."""
    return loader.load_text(to_yaml(spec), "spec.yaml").diagnostics


def paths(spec: dict, severity: str = "error") -> set[str]:
    """Dotted paths of the diagnostics of one severity."""
    return {dotted(d.path) for d in problems(spec) if d.severity == severity}


def messages(spec: dict, path: str, severity: str = "error") -> list[str]:
    """Messages (with hints, after ' | ') reported at one dotted path."""
    return [d.message + (f" | {d.hint}" if d.hint else "")
            for d in problems(spec) if d.severity == severity and dotted(d.path) == path]


def validated(spec: dict) -> ClusterSpec:
    """The spec as a ClusterSpec (type-valid specs only), to call a rule function directly."""
    return ClusterSpec.model_validate(yaml.load(to_yaml(spec), Loader=SAFE_LOADER))


def findings(rule, spec: dict) -> list:
    """What one rule function yields for a spec (a list of Problems)."""
    return list(rule(validated(spec)))


def leaves(data: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path of a loaded spec, deepest first: each value, and each mapping and list as a whole."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from leaves(value, path + (key,))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from leaves(value, path + (i,))
    if path:
        yield path


def replaced(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A deep copy of `data` with the value at `path` (from `leaves`) replaced."""
    out = copy.deepcopy(data)
    node = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return out
