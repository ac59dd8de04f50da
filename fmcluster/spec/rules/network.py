"""Network rules: AZ IDs in the spec's region, distinct, and subnets large enough."""

from __future__ import annotations

from typing import Iterator

from fmcluster.facts import network as network_plan
from fmcluster.facts import regions
from fmcluster.spec import addresses
from fmcluster.spec.diagnostics import Path, Problem, error
from fmcluster.spec.models import ClusterSpec, written
from fmcluster.spec.rules.registry import rule


def _az_paths(spec: ClusterSpec) -> Iterator[tuple[Path, str]]:
    yield ("availability_zone_id",), spec.availability_zone_id
    for i, az in enumerate(spec.network.extra_availability_zone_ids):
        yield ("network", "extra_availability_zone_ids", i), az


@rule
def az_ids_in_region(spec: ClusterSpec) -> Iterator[Problem]:
    prefix = regions.az_id_prefix(spec.region)
    for path, az in _az_paths(spec):
        region = regions.region_of_az_id(az)
        if region != spec.region:
            where = f"is in {region}" if region else "belongs to no known region"
            yield error(path, f"{'Local Zone' if regions.is_local_zone(az) else 'AZ'} ID '{az}' {where}, "
                              f"but the cluster's region is {spec.region}",
                        f"AZ IDs of {spec.region} start with {prefix}-, such as {prefix}-az1")


@rule
def extra_zones_in_region(spec: ClusterSpec) -> Iterator[Problem]:
    """Only the GPU nodes may sit in a Local Zone: the extra AZ IDs hold the control plane, the
    NAT gateway and the public subnets, which need Availability Zones of the region."""
    for i, az in enumerate(spec.network.extra_availability_zone_ids):
        if regions.is_local_zone(az):
            yield error(("network", "extra_availability_zone_ids", i),
                        f"'{az}' is a Local Zone: extra AZ IDs are Availability Zones of {spec.region}",
                        "a Local Zone goes in availability_zone_id, where the GPU nodes are")


@rule
def local_zone_control_plane(spec: ClusterSpec) -> Iterator[Problem]:
    """AWS PCS and Amazon EKS keep their control plane in the region and launch nodes into a
    Local Zone subnet; SageMaker HyperPod documents no Local Zone support (AWS's Local Zone samples
    for it are drafts), so fmcluster does not build one there."""
    if spec.local_zone and spec.orchestrator.control_plane.hyperpod:
        yield error(("availability_zone_id",),
                    f"fmcluster builds {spec.orchestrator.type} clusters in Availability Zones only, not in the "
                    f"Local Zone {spec.availability_zone_id}",
                    "use orchestrator type pcs or eks for GPU nodes in a Local Zone, or the AZ ID of the "
                    "training plan's Availability Zone")


@rule
def az_ids_distinct(spec: ClusterSpec) -> Iterator[Problem]:
    seen = set()
    for path, az in _az_paths(spec):
        if az in seen:
            yield error(path, f"AZ ID '{az}' is listed twice", "each AZ ID gets its own subnet")
        seen.add(az)


@rule
def vpc_holds_subnets(spec: ClusterSpec) -> Iterator[Problem]:
    """A VPC too small for a subnet per AZ ID. Where even the largest VPC cannot hold them, the
    cause is the number of AZ IDs, and the error is on them."""
    try:
        network_plan.layout(spec.network.vpc_cidr, spec.availability_zone_ids)
    except network_plan.LayoutError as exc:
        message = f"the VPC is too small for {len(spec.availability_zone_ids)} AZ IDs: {exc}"
        try:
            network_plan.layout(f"10.0.0.0/{network_plan.LARGEST_VPC_PREFIX}", spec.availability_zone_ids)
        except network_plan.LayoutError:
            yield error(("network", "extra_availability_zone_ids"), message,
                        f"list fewer extra AZ IDs: not even a /{network_plan.LARGEST_VPC_PREFIX}, the largest VPC "
                        "AWS allows, holds a subnet for each")
            return
        yield error(("network", "vpc_cidr"), message, "use a larger VPC, such as a /16")


@rule
def gpu_subnet_holds_cluster(spec: ClusterSpec) -> Iterator[Problem]:
    """A GPU subnet without an address for everything that takes one. The error is on vpc_cidr
    where the file gives it; else on the count of the node group that takes the most addresses,
    as the default VPC is the largest already. The hint asks for a larger VPC only where one
    holds the cluster."""
    try:
        subnets = network_plan.layout(spec.network.vpc_cidr, spec.availability_zone_ids)
    except network_plan.LayoutError:
        return  # reported by vpc_holds_subnets
    needs = addresses.address_needs(spec)
    need, have = network_plan.total(needs), subnets[0].usable
    if need <= have:
        return
    detail = "; ".join(n.what for n in needs)
    groups = spec.node_groups  # address_needs lists them first, in order
    largest = max(range(len(groups)), key=lambda i: needs[i].addresses)
    group = groups[largest]
    count = "count" if group.count is not None else "max_count" if group.max_count is not None else "min_count"
    prefix = network_plan.vpc_prefix_for(need)
    if prefix is None:
        most = network_plan.gpu_subnet_usable(network_plan.LARGEST_VPC_PREFIX)
        hint = (f"no VPC holds that: the largest, a /{network_plan.LARGEST_VPC_PREFIX}, gives the GPU AZ's subnet "
                f"{most} addresses; lower node_groups[{largest}].{count} ({group.name}) or split the cluster in two")
    else:
        largest_vpc = network_plan.LARGEST_VPC_PREFIX
        larger = f" or larger (to /{largest_vpc})" if prefix > largest_vpc else ""
        hint = f"use a vpc_cidr of /{prefix}{larger}, such as 10.0.0.0/{prefix}; the GPU AZ's subnet is half of the VPC"
    if written(spec, "network", "vpc_cidr"):
        yield error(("network", "vpc_cidr"),
                    f"the private subnet {subnets[0].cidr} has {have} usable addresses, "
                    f"the cluster needs {need} ({detail})", hint)
    else:
        yield error(("node_groups", largest, count),
                    f"the cluster needs {need} addresses in the GPU AZ's private subnet, {subnets[0].cidr} of the "
                    f"default vpc_cidr {spec.network.vpc_cidr}, which has {have} ({detail})", hint)
