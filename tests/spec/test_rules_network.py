"""fmcluster.spec.rules.network: AZ IDs in the region, distinct AZ IDs, subnet layout and sizes."""


import pytest
import yaml

from fmcluster.facts import network as network_plan
from fmcluster.facts import regions
from fmcluster.spec import addresses
from fmcluster.spec.rules import network
from tests.support.paths import EXAMPLES_DIR
from tests.support.specs import base_spec, findings, messages, paths, validated, with_

EXAMPLES = sorted(EXAMPLES_DIR.glob("*.yaml"))


def eks(spec):
    spec = with_(spec, "orchestrator.type", "eks")
    return with_(spec, "network.extra_availability_zone_ids", ["use1-az1"])


# ---- az_ids_in_region -----------------------------------------------------------------

def test_az_ids_of_the_region_pass():
    spec = with_(base_spec(), "network.extra_availability_zone_ids", ["use1-az1", "use1-az6"])
    assert findings(network.az_ids_in_region, spec) == []
    assert paths(spec) == set()


def test_az_id_of_another_region_points_at_availability_zone_id():
    spec = base_spec(region="us-west-2")
    assert "availability_zone_id" in paths(spec)
    (message,) = messages(spec, "availability_zone_id")
    assert "us-east-1" in message and "us-west-2" in message
    assert "usw2-" in message  # the hint shows the region's prefix


def test_extra_az_id_of_another_region_points_at_its_index():
    spec = with_(base_spec(), "network.extra_availability_zone_ids", ["usw2-az1"])
    assert "network.extra_availability_zone_ids[0]" in paths(spec)
    assert "availability_zone_id" not in paths(spec)
    assert "us-west-2" in messages(spec, "network.extra_availability_zone_ids[0]")[0]


def test_az_id_of_an_unknown_region():
    spec = base_spec(availability_zone_id="xyz9-az1")
    assert "availability_zone_id" in paths(spec)
    assert "no known region" in messages(spec, "availability_zone_id")[0]


# ---- az_ids_distinct ------------------------------------------------------------------

def test_distinct_az_ids_pass():
    spec = with_(base_spec(), "network.extra_availability_zone_ids", ["use1-az1"])
    assert findings(network.az_ids_distinct, spec) == []


def test_extra_az_id_repeating_the_gpu_az_id():
    spec = with_(base_spec(), "network.extra_availability_zone_ids", ["use1-az4"])
    assert "network.extra_availability_zone_ids[0]" in paths(spec)
    assert "twice" in messages(spec, "network.extra_availability_zone_ids[0]")[0]


def test_repeated_extra_az_id_points_at_the_second():
    spec = with_(base_spec(), "network.extra_availability_zone_ids", ["use1-az1", "use1-az2", "use1-az1"])
    assert "network.extra_availability_zone_ids[2]" in paths(spec)
    assert "network.extra_availability_zone_ids[0]" not in paths(spec)


# ---- vpc_holds_subnets ----------------------------------------------------------------

SIX_AZ_IDS = ["use1-az1", "use1-az2", "use1-az3", "use1-az5", "use1-az6"]


def small_cpu_cluster(**overrides):
    """Few addresses needed, so only the layout itself can fail."""
    return with_(base_spec(**overrides), "node_groups[0]",
                 {"name": "cpu", "instance_type": "c7i.8xlarge", "count": 2})


@pytest.mark.parametrize("cidr, extra", [("10.0.0.0/24", []), ("10.0.0.0/24", SIX_AZ_IDS[:2]),
                                         ("10.0.0.0/16", SIX_AZ_IDS)])
def test_vpc_that_holds_its_subnets_passes(cidr, extra):
    spec = small_cpu_cluster(network={"vpc_cidr": cidr, "extra_availability_zone_ids": extra})
    assert findings(network.vpc_holds_subnets, spec) == []
    assert paths(spec) == set()


def test_vpc_too_small_for_six_az_ids():
    spec = small_cpu_cluster(network={"vpc_cidr": "10.0.0.0/24", "extra_availability_zone_ids": SIX_AZ_IDS})
    assert "network.vpc_cidr" in paths(spec)
    (message,) = messages(spec, "network.vpc_cidr")
    assert "too small for 6 AZ IDs" in message


# ---- gpu_subnet_holds_cluster ---------------------------------------------------------

def test_32_p5_under_pcs_do_not_fit_a_24():
    spec = with_(base_spec(network={"vpc_cidr": "10.0.0.0/24"}), "node_groups[0].count", 32)
    assert "network.vpc_cidr" in paths(spec)
    (message,) = messages(spec, "network.vpc_cidr")
    assert "usable addresses" in message
    assert "10.0.0.0/25 has 123 usable" in message


def test_32_p5_under_pcs_fit_a_16():
    spec = with_(base_spec(network={"vpc_cidr": "10.0.0.0/16"}), "node_groups[0].count", 32)
    assert findings(network.gpu_subnet_holds_cluster, spec) == []
    assert "network.vpc_cidr" not in paths(spec)


def test_the_default_vpc_is_a_16():
    spec = with_(base_spec(), "node_groups[0].count", 32)
    assert validated(spec).network.vpc_cidr == "10.0.0.0/16"
    assert findings(network.gpu_subnet_holds_cluster, spec) == []


def test_a_group_that_exactly_fills_the_subnet_fits():
    # /20: the GPU subnet is a /21 with 2043 usable; 1 login + Lustre 2+4 + headroom 16 = 23
    spec = base_spec(network={"vpc_cidr": "10.0.0.0/20"})
    spec = with_(spec, "node_groups[0]", {"name": "cpu", "instance_type": "c7i.8xlarge", "count": 2043 - 23})
    assert findings(network.gpu_subnet_holds_cluster, spec) == []
    one_more = with_(spec, "node_groups[0].count", 2043 - 22)
    assert "network.vpc_cidr" in paths(one_more)


def _node_addresses(spec):
    """Addresses the node group takes in the GPU subnet, by addresses.address_needs."""
    model = validated(spec)
    need = addresses.address_needs(model)[0]
    assert need.what.startswith("node group gpu")
    return need.addresses


def test_efa_only_interfaces_take_fewer_addresses_than_efa_interfaces():
    pcs = base_spec()  # InterfaceMode.EFA: one address per EFA card (32 on p5.48xlarge)
    k8s = eks(base_spec())  # InterfaceMode.EFA_ONLY: only the primary ENA takes one
    pcs_model, eks_model = validated(pcs), validated(k8s)
    nodes = pcs_model.node_groups[0].max_nodes
    assert _node_addresses(pcs) == nodes * 32
    pods = eks_model.orchestrator.control_plane.pod_addresses_per_node
    assert _node_addresses(k8s) == nodes * (1 + pods)
    # the interfaces alone: efa-only takes 1 address per node, efa takes 32
    assert _node_addresses(k8s) - nodes * pods < _node_addresses(pcs)


def test_address_needs_list_every_consumer():
    needs = addresses.address_needs(validated(base_spec()))
    whats = [n.what for n in needs]
    assert whats[0].startswith("node group gpu: 2 x 32")
    assert any(w.startswith("login nodes: 1") for w in whats)  # a Slurm cluster's
    kubernetes = [n.what for n in addresses.address_needs(validated(eks(base_spec())))]
    assert any(w.startswith("system nodes: ") for w in kubernetes) and not any("login" in w for w in kubernetes)
    assert "FSx for Lustre" in whats and "control plane and endpoints" in whats


# ---- the examples' AZ IDs (tests/facts/test_regions.py: the AZ ID prefixes) ------------------

@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_examples_az_ids_resolve_to_their_region(example):
    doc = yaml.safe_load(example.read_text())
    for az in [doc["availability_zone_id"], *doc.get("network", {}).get("extra_availability_zone_ids", [])]:
        assert regions.region_of_az_id(az) == doc["region"], az


def test_examples_exist():
    assert len(EXAMPLES) >= 3


def test_layout_slots_do_not_move_when_an_az_is_added():
    two = network_plan.layout("10.0.0.0/16", ["use1-az1", "use1-az2"])
    three = network_plan.layout("10.0.0.0/16", ["use1-az1", "use1-az2", "use1-az3"])
    assert set(two) <= set(three)


# ---- where a subnet-size error is reported, and what its hint asks for --------------------

def test_a_count_no_vpc_holds_is_reported_on_the_count():
    """The default VPC is the largest AWS allows (/16): a cluster it cannot hold is too large,
    and the error is on the count that makes it so, with a hint that does not ask for a VPC."""
    spec = with_(base_spec(), "node_groups[0].count", 9000)
    assert "network.vpc_cidr" not in paths(spec)
    # (the PCS size limit is on that count too: only the addresses' message here)
    (message,) = [m for m in messages(spec, "node_groups[0].count") if "vpc_cidr" in m]
    assert "default vpc_cidr 10.0.0.0/16" in message and "has 32763" in message
    assert "9000 x 32" in message and "larger vpc_cidr" not in message
    assert "lower node_groups[0].count (gpu) or split the cluster" in message


def test_a_written_vpc_cidr_keeps_the_error():
    spec = with_(base_spec(network={"vpc_cidr": "10.0.0.0/20"}), "node_groups[0].count", 100)
    assert paths(spec) == {"network.vpc_cidr"}
    (message,) = messages(spec, "network.vpc_cidr")
    assert "use a vpc_cidr of /19 or larger (to /16), such as 10.0.0.0/19" in message  # 3223 of a /20: 4091
    too_many = with_(spec, "node_groups[0].count", 9000)
    (message,) = messages(too_many, "network.vpc_cidr")
    assert "no VPC holds that" in message and "use a vpc_cidr" not in message


def test_the_group_that_takes_the_most_addresses_is_blamed():
    spec = with_(base_spec(), "node_groups", [
        {"name": "cpu", "instance_type": "c7i.8xlarge", "count": 2000},
        {"name": "gpu", "instance_type": "p5.48xlarge", "min_count": 0, "max_count": 1500}])
    (message,) = [m for m in messages(spec, "node_groups[1].max_count") if "vpc_cidr" in m]
    assert "lower node_groups[1].max_count (gpu)" in message


@pytest.mark.parametrize("prefix", range(16, 24))
def test_the_suggested_vpc_holds_the_need_and_one_smaller_does_not(prefix):
    need = network_plan.gpu_subnet_usable(prefix)
    assert network_plan.vpc_prefix_for(need) == prefix
    assert network_plan.vpc_prefix_for(need + 1) == (prefix - 1 if prefix > 16 else None)
    assert network_plan.gpu_subnet_usable(prefix) == network_plan.layout(f"10.0.0.0/{prefix}", ["use1-az1"])[0].usable


def test_more_az_ids_than_any_vpc_holds_are_reported_on_them():
    nine = small_cpu_cluster(network={"extra_availability_zone_ids": [*SIX_AZ_IDS, "use1-az7", "use1-az8", "use1-az9"]})
    assert "network.vpc_cidr" not in paths(nine)
    (message,) = messages(nine, "network.extra_availability_zone_ids")
    assert "too small for 9 AZ IDs" in message and "list fewer extra AZ IDs" in message
    assert "larger VPC" not in message
