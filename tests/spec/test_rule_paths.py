"""Every rule's finding lies on a field the user's file holds: the field that causes it, or, for
a field the rule asks for, the key it belongs under. A finding on a defaulted field (one the file
leaves out, under a section it leaves out) would be shown at the file's first line, far from
what the user can change. Checked over the examples, mutated by values the rules judge."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
import yaml

from fmcluster.spec import loader
from fmcluster.spec.diagnostics import error
from fmcluster.spec.rules import RULES, network
from tests.support.paths import EXAMPLES_DIR
from tests.support.specs import base_spec, leaves, replaced, to_yaml, with_

PLANES = ("pcs", "hyperpod-slurm", "eks", "hyperpod-eks")
CAPACITY = ("on-demand", "reservation", "capacity-block", "spot")


def mutations(data: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Values of the right type the rules judge: booleans flipped, whole numbers at 0, 1, doubled
    and a thousandfold, every control plane and capacity type."""
    for path in leaves(data):
        node = data
        for part in path:
            node = node[part]
        if isinstance(node, bool):
            yield replaced(data, path, not node)
        elif isinstance(node, int):
            for value in (0, 1, node * 2, node * 1000):
                yield replaced(data, path, value)
        elif path[-1] == "type" and path[:1] == ("orchestrator",):
            yield from (replaced(data, path, plane) for plane in PLANES)
        elif path[-1] == "type" and "capacity" in path:
            yield from (replaced(data, path, capacity) for capacity in CAPACITY)


def in_file(data: Any, path: tuple[Any, ...]) -> bool:
    for part in path:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return False
    return True


def off_the_file(data: dict[str, Any]) -> list[str]:
    """The rule findings of a spec that lie neither on a field of the file nor under a mapping of it."""
    result = loader.load_text(to_yaml(data), "spec.yaml")
    return [f"{'.'.join(map(str, d.path))} [{d.rule}]" for d in result.diagnostics
            if d.rule not in loader.SCHEMA_IDS and not in_file(data, d.path)
            and not (len(d.path) > 1 and isinstance(_at(data, d.path[:-1]), dict))]


def _at(data: Any, path: tuple[Any, ...]) -> Any:
    return _at(data[path[0]], path[1:]) if path and in_file(data, path[:1]) else (data if not path else None)


@pytest.mark.parametrize("example", sorted(EXAMPLES_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_every_finding_lies_on_a_field_of_the_file(example):
    data = yaml.safe_load(example.read_text())
    found = {finding for mutated in mutations(data) for finding in off_the_file(mutated)}
    assert not found


def test_a_finding_on_a_section_the_file_leaves_out_is_caught():
    """The check itself: a rule reporting on network.vpc_cidr of a file without `network` (as
    the subnet check once did) is caught; on the count that causes it, it is not."""
    huge = with_(base_spec(), "node_groups[0].count", 9000)
    assert "network" not in huge and off_the_file(huge) == []

    def on_the_default(spec):
        yield error(("network", "vpc_cidr"), "the cluster needs more addresses")

    on_the_default.__name__ = "gpu_subnet_holds_cluster"
    index = RULES.index(network.gpu_subnet_holds_cluster)
    RULES[index] = on_the_default
    try:
        assert off_the_file(huge) == ["network.vpc_cidr [gpu-subnet-holds-cluster]"]
    finally:
        RULES[index] = network.gpu_subnet_holds_cluster
