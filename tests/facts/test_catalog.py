"""The instance catalog, held against EC2 DescribeInstanceTypes data (as moto ships it)."""

from dataclasses import astuple

import boto3
import pytest

from fmcluster.facts import catalog
from tests.support.moto_aws import mocked_aws

GPU_TYPES = ["p5.4xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "p6-b300.48xlarge"]

# Types moto's DescribeInstanceTypes data lacks (its describe_instance_types refuses them): held to
# the EC2 documentation's figures below until moto has them, then to moto's like every other
# (the fixture asks moto for each; test_documented_types_still_missing_from_moto says when).
DOCUMENTED = {
    # EC2 instance-type specifications (accelerated computing,
    # https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html) and the EC2 User Guide's "EFA
    # configuration for P6e-GB200 instances": vCPUs, GiB, cards, GPUs, GiB per GPU, NVMe disks x GB,
    # network bandwidth
    "p6e-gb200.36xlarge": {"vcpus": 144, "memory_gib": 960, "cards": 17, "gpus": 4, "gpu_gib": 185,
                           "disks": (3, 7500), "architecture": "arm64", "capacity_block": True,
                           "network": "3200 Gigabit"},
}


@pytest.fixture(scope="module")
def ec2_types():
    with mocked_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        names = sorted(set(catalog.catalog()) - set(DOCUMENTED))
        found = {}
        for i in range(0, len(names), 100):
            for page in ec2.get_paginator("describe_instance_types").paginate(InstanceTypes=names[i:i + 100]):
                found.update({t["InstanceType"]: t for t in page["InstanceTypes"]})
        for name in DOCUMENTED:
            try:
                found.update({t["InstanceType"]: t for t in ec2.describe_instance_types(
                    InstanceTypes=[name])["InstanceTypes"]})
            except Exception:  # moto: InvalidInstanceType, not in its data yet
                pass
        return found


def test_every_catalog_entry_is_a_real_instance_type(ec2_types):
    """Every entry is in moto's data, or documented and in botocore's EC2 InstanceType enum."""
    import botocore.session

    enum = set(botocore.session.get_session().get_service_model("ec2").shape_for("InstanceType").enum)
    assert set(catalog.catalog()) <= enum
    assert sorted(set(ec2_types) | set(DOCUMENTED)) == sorted(catalog.catalog())


def test_documented_types_still_missing_from_moto(ec2_types):
    """Once moto has a documented type, it is held to moto's data: move it out of DOCUMENTED."""
    assert not set(DOCUMENTED) & set(ec2_types), "moto has these now: remove them from DOCUMENTED"


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_documented_entry_matches_the_documentation(name):
    entry, doc = catalog.get(name), DOCUMENTED[name]
    assert (entry.vcpus, entry.memory_gib, len(entry.network_cards)) == (doc["vcpus"], doc["memory_gib"], doc["cards"])
    assert (entry.gpu_count, entry.gpu.memory_gib) == (doc["gpus"], doc["gpu_gib"])
    assert (entry.nvme_disks, entry.nvme_disk_gb) == doc["disks"]
    assert (entry.architecture, entry.capacity_block) == (doc["architecture"], doc["capacity_block"])
    assert entry.network_performance == doc["network"]


def test_p6e_gb200_network_as_the_ec2_user_guide_lays_it_out():
    """Card 0 ENA only at 100 Gbps; odd cards EFA-only at 400, even cards ENA or EFA at 200; AWS's
    recommended layout: one EFA-only interface per GPU on cards 1, 5, 9, 13 (1,600 Gbps)."""
    from fmcluster.facts.efa import InterfaceMode, efa_layout

    entry = catalog.get("p6e-gb200.36xlarge")
    assert [(c.index, c.bandwidth_gbps, c.efa) for c in entry.network_cards[:4]] == [
        (0, 100, False), (1, 400, True), (2, 200, True), (3, 400, True)]
    assert not entry.card0_efa
    assert [c.index for c in entry.efa_layout_cards] == [1, 5, 9, 13]
    # odd cards EFA-only with one interface slot, even cards (card 0 too) two: aws-parallelcluster #6930
    assert [(c.index, c.efa_only, c.max_interfaces) for c in entry.network_cards] == [
        (i, i % 2 == 1, 1 if i % 2 else 2) for i in range(17)]
    assert all(c.efa_only for c in entry.efa_layout_cards)
    assert entry.efa_gbps == 1600
    assert tuple(map(astuple, efa_layout(entry))) == (
        (0, 0, "interface"), (1, 0, "efa-only"), (5, 0, "efa-only"), (9, 0, "efa-only"), (13, 0, "efa-only"))
    # no efa interface (EFA with ENA) fits an EFA-only card: PCS's nodes get EC2's form too
    assert efa_layout(entry, InterfaceMode.EFA) == efa_layout(entry)
    assert tuple(catalog.ULTRASERVERS[u].name for u in entry.ultraservers) == entry.ultraservers == (
        "u-p6e-gb200x36", "u-p6e-gb200x72")
    assert [catalog.ULTRASERVERS[u].gpus for u in entry.ultraservers] == [36, 72]


def test_nvlink_per_gpu():
    """NVIDIA's NVLink figures per GPU; the L40S has none."""
    assert {n: catalog.get(n).gpu.nvlink_gbps for n in ("p4d.24xlarge", "p5.48xlarge", "p6-b200.48xlarge",
                                                         "p6e-gb200.36xlarge", "g6e.48xlarge")} == {
        "p4d.24xlarge": 600, "p5.48xlarge": 900, "p6-b200.48xlarge": 1800, "p6e-gb200.36xlarge": 1800,
        "g6e.48xlarge": None}


IN_MOTO = sorted(set(catalog.catalog()) - set(DOCUMENTED))


@pytest.mark.parametrize("name", IN_MOTO)
def test_entry_matches_describe_instance_types(name, ec2_types):
    """Every figure EC2 publishes for the type, as DescribeInstanceTypes gives it."""
    entry, data = catalog.get(name), ec2_types[name]
    net = data["NetworkInfo"]
    assert entry.vcpus == data["VCpuInfo"]["DefaultVCpus"]
    assert entry.memory_gib * 1024 == data["MemoryInfo"]["SizeInMiB"]
    assert entry.architecture in data["ProcessorInfo"]["SupportedArchitectures"]
    assert len(entry.network_cards) == net["MaximumNetworkCards"]
    assert entry.efa_supported == net["EfaSupported"]
    assert entry.max_efa_interfaces == net.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0)
    assert entry.network_performance == net["NetworkPerformance"]
    assert [(c.index, c.bandwidth_gbps, c.peak, c.max_interfaces) for c in entry.network_cards] == [
        (raw["NetworkCardIndex"], raw["BaselineBandwidthInGbps"], raw["PeakBandwidthInGbps"],
         raw["MaximumNetworkInterfaces"]) for raw in net["NetworkCards"]]
    gpus = data.get("GpuInfo", {}).get("Gpus", [])
    assert entry.gpu_count == sum(g["Count"] for g in gpus)
    if gpus:
        assert entry.gpu.name == gpus[0]["Name"]
        assert entry.gpu.memory_gib == pytest.approx(gpus[0]["MemoryInfo"]["SizeInMiB"] / 1024, abs=0.05)
    disks = data.get("InstanceStorageInfo", {}).get("Disks", [])
    assert entry.nvme_disks == sum(d["Count"] for d in disks)
    assert entry.nvme_disk_gb == (disks[0]["SizeInGB"] if disks else 0)
    assert not disks or data["InstanceStorageInfo"]["NvmeSupport"] == "required"
    assert entry.capacity_block == ("capacity-block" in data["SupportedUsageClasses"])


@pytest.mark.parametrize("name", IN_MOTO)
def test_efa_cards_match_interface_types(name, ec2_types):
    """A card carries EFA exactly when EC2 lists efa interfaces for it."""
    entry, data = catalog.get(name), ec2_types[name]
    if not entry.efa_supported:
        assert not any(c.efa for c in entry.network_cards)
        return
    for card, raw in zip(entry.network_cards, data["NetworkInfo"]["NetworkCards"], strict=True):
        assert card.index == raw["NetworkCardIndex"]
        assert card.efa == ("efa" in raw["InterfaceTypes"])


def test_card0_efa_follows_from_counts():
    assert all(catalog.get(n).card0_efa for n in GPU_TYPES if n != "p6-b300.48xlarge")
    assert not catalog.get("p6-b300.48xlarge").card0_efa


@pytest.mark.parametrize("name,efa_gbps,total_gbps", [
    ("p5.48xlarge", 3200, 3200), ("p5e.48xlarge", 3200, 3200), ("p5en.48xlarge", 3200, 3200),
    ("p6-b200.48xlarge", 3200, 3200), ("p6-b300.48xlarge", 6400, 6400), ("p6e-gb200.36xlarge", 1600, 3200)])
def test_network_bandwidth(name, efa_gbps, total_gbps):
    """The instance's bandwidth is EC2's NetworkPerformance, and EFA carries all of it (p6-b300's
    6,400 is its 16 EFA cards); p6e-gb200's recommended layout uses 4 cards of 400 Gbps."""
    entry = catalog.get(name)
    assert entry.efa_gbps == efa_gbps
    assert entry.network_gbps == total_gbps


@pytest.mark.parametrize("name,efa_gbps,total_gbps", [
    ("p4d.24xlarge", 400, 400), ("p4de.24xlarge", 400, 400), ("g6e.48xlarge", 400, 400),
    ("g6e.24xlarge", 200, 200), ("g6e.12xlarge", 100, 100), ("g6e.8xlarge", 25, 25), ("g6e.xlarge", 0, 20),
    ("c7i.48xlarge", 50, 50), ("m7i.large", 0, 12.5)])
def test_network_bandwidth_of_a100_l40s_and_cpu_types(name, efa_gbps, total_gbps, ec2_types):
    """EC2's NetworkPerformance ("4x 100 Gigabit", "Up to 20 Gigabit": the burst figure)."""
    entry = catalog.get(name)
    assert (entry.efa_gbps, entry.network_gbps) == (efa_gbps, total_gbps)
    assert entry.network_performance == ec2_types[name]["NetworkInfo"]["NetworkPerformance"]


def test_nvlink_only_where_a_gpu_has_an_nvlink_peer():
    """p5.4xlarge's one H100 has NVLink but no GPU to reach with it: no NVLink figure; L40S none."""
    nvlink = {n: catalog.get(n).nvlink_gbps for n in ("p5.4xlarge", "p5.48xlarge", "g6e.48xlarge",
                                                       "p6e-gb200.36xlarge", "m7i.2xlarge")}
    assert nvlink == {"p5.4xlarge": None, "p5.48xlarge": 900, "g6e.48xlarge": None, "p6e-gb200.36xlarge": 1800,
                      "m7i.2xlarge": None}
    assert catalog.get("p5.4xlarge").gpu.nvlink_gbps == 900  # the GPU has it; the instance uses none


@pytest.mark.parametrize("name,cards,instance", [
    ("g6e.48xlarge", [400.0] * 4, 400), ("g6e.24xlarge", [200.0] * 2, 200),
    ("p6-b200.48xlarge", [200.0] * 8, 3200), ("p6-b300.48xlarge", [350.0] + [400.0] * 16, 6400)])
def test_the_instance_bandwidth_is_not_its_cards_added_up(name, cards, instance, ec2_types):
    """EC2's per-card figures do not sum to the instance's, either way: g6e.48xlarge has 4 cards of
    400 Gbps and 400 Gbps in all (summing them showed 1.6 Tbps and asked NCCL for 4 times what a
    node can do); p6-b200 has 8 cards of 200 Gbps and 3,200 Gbps in all."""
    entry = catalog.get(name)
    assert [c.bandwidth_gbps for c in entry.network_cards] == cards
    assert entry.network_gbps == entry.efa_gbps == instance != sum(cards)
    assert ec2_types[name]["NetworkInfo"]["NetworkPerformance"] == f"{instance} Gigabit"


def test_every_entry_has_an_instance_bandwidth_and_efa_within_it():
    for entry in catalog.catalog().values():
        assert entry.network_gbps > 0, entry.name  # NetworkPerformance is set and readable
        assert entry.efa_gbps <= entry.network_gbps, entry.name
        assert (entry.efa_gbps > 0) == entry.efa_supported, entry.name


def test_gpudirect_rdma_where_the_efa_has_it():
    """FI_EFA_USE_DEVICE_RDMA=1 on p4d/p4de (EFA generation 1 with RDMA read) and the P5 and P6
    types; not on the L40S types, whose EFA carries NCCL without it."""
    rdma = {n for n in catalog.known_names(gpu_only=True) if catalog.get(n).device_rdma}
    assert rdma == set(GPU_TYPES) | {"p4d.24xlarge", "p4de.24xlarge", "p6e-gb200.36xlarge"}
    assert all(catalog.get(n).efa_supported for n in rdma)


@pytest.mark.parametrize("name,bf16,fp8,fp4", [
    ("p5.48xlarge", 0.9895, 1.979, None), ("p5en.48xlarge", 0.9895, 1.979, None),
    ("p6-b200.48xlarge", 2.25, 4.5, 9.0), ("p6-b300.48xlarge", 2.25, 4.5, 13.5),
    ("p4d.24xlarge", 0.312, None, None), ("p4de.24xlarge", 0.312, None, None),
    ("g6e.48xlarge", 0.36205, 0.733, None), ("p6e-gb200.36xlarge", 2.5, 5.0, 10.0)])
def test_peak_throughput_per_gpu(name, bf16, fp8, fp4):
    gpu = catalog.get(name).gpu
    assert (gpu.bf16_pflops, gpu.fp8_pflops, gpu.fp4_pflops) == (bf16, fp8, fp4)


def test_cpu_families_cover_login_and_cpu_groups():
    for family in ("m7i", "c7i", "r7i"):
        assert catalog.get(f"{family}.2xlarge") and catalog.get(f"{family}.48xlarge")
    assert not catalog.get("m7i.2xlarge").is_gpu


def test_closest_name_and_known_list():
    assert catalog.closest("p5.48xlarg") == "p5.48xlarge"
    assert catalog.closest("zz") is None
    assert "p6-b300.48xlarge" in catalog.describe_known()


def test_every_architecture_has_its_amis_on_pcs_and_eks():
    """The PCS-ready DLAMI and the EKS AL2023 AMI types per architecture (UltraServers' Grace CPUs
    are arm64): each catalog entry's architecture is one the control planes have AMIs for."""
    from fmcluster.facts import controlplanes

    assert {t.architecture for t in catalog.catalog().values()} <= set(controlplanes.ARCHITECTURES)
    assert controlplanes.pcs_ami_parameter("arm64") == "/aws/service/pcs/ami/dlami-base-ubuntu2404/arm64/latest/ami-id"
    assert controlplanes.EKS_AMI_TYPES[("arm64", True)] == "AL2023_ARM_64_NVIDIA"
    import botocore.session

    ami_types = botocore.session.get_session().get_service_model("eks").shape_for("AMITypes").enum
    assert set(controlplanes.EKS_AMI_TYPES.values()) <= set(ami_types)
    with pytest.raises(ValueError):
        controlplanes.pcs_ami_parameter("riscv64")


def test_a_node_groups_ami_follows_its_architecture():
    import dataclasses

    from fmcluster.model import cluster as model
    from fmcluster_cdk.stacks.eks import ami_type
    from fmcluster_cdk.stacks.pcs import default_ami
    from tests.support.specs import base_spec, validated

    group = model.resolve(validated(base_spec())).node_groups[0]
    arm = dataclasses.replace(group, instance=dataclasses.replace(group.instance, architecture="arm64"))
    assert ami_type(group) == "AL2023_x86_64_NVIDIA" and ami_type(arm) == "AL2023_ARM_64_NVIDIA"
    assert default_ami("arm64") == "{{resolve:ssm:/aws/service/pcs/ami/dlami-base-ubuntu2404/arm64/latest/ami-id}}"


# The EC2 User Guide, "Prerequisites for Amazon EC2 topology", Instance types: the types whose
# DescribeInstanceTopology answer has 4 network nodes, and those (among the catalog's) with 3.
FOUR_NETWORK_LAYERS = {"p6-b200.48xlarge", "p6-b300.48xlarge"}
THREE_NETWORK_LAYERS = {"p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
                        "p6e-gb200.36xlarge", *(f"g6e.{size[0]}" for size in catalog._G6E)}


def test_network_layers_as_ec2_instance_topology_lists_them():
    layers = {name: t.network_layers for name, t in catalog.catalog().items()}
    assert {n for n, count in layers.items() if count == 4} == FOUR_NETWORK_LAYERS
    assert {n for n, count in layers.items() if count == 3} == THREE_NETWORK_LAYERS
    assert set(layers.values()) == {0, 3, 4}
    assert layers["p5.4xlarge"] == 0  # not a supported type: no topology
    assert all(layers[n] == 0 for n, t in catalog.catalog().items() if not t.is_gpu)
