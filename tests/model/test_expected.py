"""The acceptance kit's expected figures (fmcluster.model.expected) from the catalog's EC2 figures."""

from __future__ import annotations

import pytest

from fmcluster.model import expected
from fmcluster.model.cluster import resolve
from tests.support.specs import base_spec, validated


def figures(instance_type: str, count: int = 2) -> dict[str, expected.Expected]:
    model = resolve(validated(base_spec(node_groups=[{"name": "g", "instance_type": instance_type, "count": count}])))
    return expected.expectations(model)["g"]


@pytest.mark.parametrize("instance_type,gb_per_s", [
    ("g6e.48xlarge", 50), ("g6e.24xlarge", 25), ("p6-b200.48xlarge", 400), ("p6-b300.48xlarge", 800)])
def test_nccl_across_nodes_asks_for_the_instances_bandwidth(instance_type, gb_per_s):
    """EC2's NetworkPerformance, not the cards added up: a g6e.48xlarge node has 400 Gbps (50 GB/s),
    though it has 4 cards of 400 (the kit asked for 200 GB/s); p6-b200's 8 cards of 200 Gbps
    carry 3,200 Gbps (400 GB/s; AWS measured 377 GB/s on 4 nodes)."""
    across = figures(instance_type)["nccl-all_reduce-nodes"]
    assert across.peak == gb_per_s
    assert across.pass_at == round(gb_per_s * expected.ACROSS_NODES_RATIOS[0], 3)
    assert f"({gb_per_s * 8:g} Gbps per node)" in across.basis


def test_a_one_gpu_node_has_no_nvlink_figure():
    """p5.4xlarge: one H100, no NVLink peer; across nodes it is held to its 100 Gbps of EFA."""
    found = figures("p5.4xlarge")
    assert found["nccl-all_reduce-node"].peak is None
    assert "no NVLink figure" in found["nccl-all_reduce-node"].basis
    assert found["nccl-all_reduce-nodes"].peak == 12.5
