"""The acceptance kit's expected figures (fmcluster.model.expected) from the catalog's EC2 figures."""

from __future__ import annotations

import pytest

from fmcluster.model import expected
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from tests.support.paths import EXAMPLES_DIR
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


# ---- the physical limits a figure is held to, above which it is impossible ----------------------


def group(instance_type: str, count: int = 2):
    model = resolve(validated(base_spec(node_groups=[{"name": "g", "instance_type": instance_type, "count": count}])))
    return model, expected.gpu_groups(model)[0]


@pytest.mark.parametrize("instance_type, node_reduce, node_gather, nodes_reduce", [
    # NVLink 4, 450 GB/s a GPU and direction: all_reduce 2 x 7/8 x 450, all_gather 450; EFA 400 GB/s
    # a node on 2 nodes of 16 ranks: 400 x 2/1 x 15/16
    ("p5.48xlarge", 787.5, 450, 750),
    ("p6-b300.48xlarge", 1575, 900, 1500),  # NVLink 5; 6,400 Gbps of EFA
    ("g6e.48xlarge", 56, 32, 93.75)])  # no NVLink: PCIe Gen4 x16, 32 GB/s each way; 400 Gbps a node
def test_nccl_limits(instance_type, node_reduce, node_gather, nodes_reduce):
    _, g = group(instance_type)
    assert expected.nccl_ceiling(g, "nccl-all_reduce-node", 1, 8).value == node_reduce
    assert expected.nccl_ceiling(g, "nccl-all_gather-node", 1, 8).value == node_gather
    assert expected.nccl_ceiling(g, "nccl-reduce_scatter-nodes", 2, 16).value == nodes_reduce
    assert expected.nccl_ceiling(g, "nccl-all_reduce-nodes", 2, 16).value == nodes_reduce


def test_what_aws_measured_is_within_the_limits():
    """AWS's own runs (expected.AWS_MEASURED): 2 x p5 about 480 GB/s, 2 x p6-b300 751, 4 x p6-b200
    377; and without the ranks known, the bound for any count (twice EFA's figure) holds too."""
    for instance_type, nodes, measured in (("p5.48xlarge", 2, 483.35), ("p6-b300.48xlarge", 2, 751),
                                           ("p6-b200.48xlarge", 4, 377)):
        _, g = group(instance_type, nodes)
        ceiling = expected.nccl_ceiling(g, "nccl-all_reduce-nodes", nodes, 8 * nodes)
        assert not ceiling.exceeded_by(measured) and measured < ceiling.value
        assert expected.nccl_ceiling(g, "nccl-all_reduce-nodes", 0, 0).value == g.instance.efa_gbps / 8 * 2


def test_a_limit_is_exceeded_only_beyond_the_margin():
    _, g = group("p5.48xlarge")
    ceiling = expected.nccl_ceiling(g, "nccl-all_gather-node", 1, 8)
    assert expected.MEASUREMENT_MARGIN == 0.10 and ceiling.above == 495
    assert not ceiling.exceeded_by(495) and ceiling.exceeded_by(495.01) and not ceiling.exceeded_by(None)


def test_one_gpu_has_no_link_limit_and_an_ultraserver_domain_is_nvlink():
    _, one = group("p5.4xlarge")
    assert expected.nccl_ceiling(one, "nccl-all_reduce-node", 1, 1) is None
    model = resolve(loader.load(EXAMPLES_DIR / "p6e-gb200-pcs.yaml").spec)
    gb200 = expected.gpu_groups(model)[0]
    assert gb200.one_nvlink_domain
    across = expected.nccl_ceiling(gb200, "nccl-all_gather-nodes", 18, 72)
    assert (across.path, across.value) == ("NVLink", 900)


def test_ena_is_what_the_layout_puts_it_on():
    """efa-only EFA (HyperPod, EKS): ENA on card 0 only, 100 Gbps on a p5; PCS's `efa` interfaces
    carry ENA on every EFA card: the instance's 3,200 Gbps."""
    _, pcs = group("p5.48xlarge")
    assert expected.ena_cards(pcs) == tuple(range(32)) and expected.ena_gbps(pcs) == 3200
    hyperpod = expected.gpu_groups(resolve(loader.load(EXAMPLES_DIR / "p5-hyperpod-eks.yaml").spec))[0]
    assert expected.ena_cards(hyperpod) == (0,) and expected.ena_gbps(hyperpod) == 100
    assert expected.ena_ceiling(hyperpod, 2, 16).value == 12.5 * 2 * 15 / 16


@pytest.mark.parametrize("lustre, mbps", [
    ({"storage_capacity_gib": 4800}, 4800 / 1024 * 1300),  # 250 MB/s/TiB: 640 baseline, 1,300 burst
    ({"storage_capacity_gib": 4800, "throughput_per_tib": 1000}, 4800 / 1024 * 2600),
    ({"storage_capacity_gib": 2400, "deployment_type": "SCRATCH_2"}, 2400 / 1024 * 1300)])
def test_the_file_systems_limit_is_its_servers_network(lustre, mbps):
    spec = base_spec()
    spec["storage"]["lustre"].update(lustre)
    model = resolve(validated(spec))
    assert expected.lustre_ceiling(model).value == pytest.approx(mbps)
    assert expected.lustre_ceiling(model).value > expected.lustre(model).peak
    assert expected.node_network_ceiling(expected.gpu_groups(model)[0]).value == 3200 * 125
