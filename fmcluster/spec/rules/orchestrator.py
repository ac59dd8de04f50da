"""Control-plane rules: versions, AZ count, hard size limits, what HyperPod supports."""

from __future__ import annotations

import re
from typing import Iterator

from fmcluster.facts import catalog, controlplanes, regions
from fmcluster.spec.diagnostics import Problem, error, warning
from fmcluster.spec.models import ClusterSpec, written
from fmcluster.spec.rules.registry import rule

ORCH = ("orchestrator",)


@rule
def version_supported(spec: ClusterSpec) -> Iterator[Problem]:
    cp = spec.orchestrator.control_plane
    retired = controlplanes.RETIRED_VERSIONS.get(cp.type, {}).get(spec.orchestrator.version or "")
    if retired is not None:
        yield error(ORCH + ("version",), retired,
                    "supported: " + ", ".join(cp.versions) + f" (default {cp.default_version}); a running "
                    "cluster keeps its Slurm until it is replaced, so plan the move with `fmcluster diff`")
    elif spec.orchestrator.version not in cp.versions:
        yield error(ORCH + ("version",),
                    f"{cp.version_label} {spec.orchestrator.version} is not supported by {cp.type}",
                    "supported: " + ", ".join(cp.versions) + f" (default {cp.default_version})")
    elif cp.type == "pcs" and spec.orchestrator.version not in controlplanes.PCS_BASE_IMAGE_SLURM_VERSIONS:
        yield warning(ORCH + ("version",),
                      f"the PCS-ready DLAMI, the base of the node images, carries Slurm "
                      f"{', '.join(controlplanes.PCS_BASE_IMAGE_SLURM_VERSIONS)}, not "
                      f"{spec.orchestrator.version}: NAME-images cannot build Pyxis against it and fails",
                      f"use version: \"{cp.default_version}\", or run `fmcluster preflight` to read the "
                      "region's image: it passes once the image carries this version")


@rule
def enough_availability_zones(spec: ClusterSpec) -> Iterator[Problem]:
    """The control plane's subnets are in Availability Zones of the region: a Local Zone does not
    count (PCS and EKS refuse Local Zone subnets for the cluster itself). The error is on the
    extra AZ IDs where the file lists them, else on the control plane that needs more."""
    cp = spec.orchestrator.control_plane
    have = len(spec.region_zone_ids)
    if have < cp.min_availability_zones:
        where = " (the Local Zone of the GPU nodes does not count)" if spec.local_zone else ""
        listed = written(spec, "network", "extra_availability_zone_ids")
        yield error(("network", "extra_availability_zone_ids") if listed else ("orchestrator", "type"),
                    f"{cp.type} needs subnets in at least {cp.min_availability_zones} Availability Zones of "
                    f"{spec.region}; the spec has {have}{where}",
                    f"add an AZ ID of {spec.region}, such as network.extra_availability_zone_ids: "
                    f"[{_other_az(spec)}]")


def _other_az(spec: ClusterSpec) -> str:
    taken = set(spec.availability_zone_ids)
    prefix = regions.az_id_prefix(spec.region)
    return next(az for n in range(1, 8) if (az := f"{prefix}-az{n}") not in taken)


@rule
def pcs_size_limit(spec: ClusterSpec) -> Iterator[Problem]:
    if spec.orchestrator.type != "pcs":
        return
    nodes = spec.managed_nodes
    largest = controlplanes.PCS_SIZES[-1]
    if controlplanes.pcs_size_for(nodes) is None:
        login = spec.orchestrator.login.count
        counted = f" ({nodes - login} in node groups at their maximum, {login} login)" if login else ""
        yield error(_over_the_limit(spec, largest.max_nodes),
                    f"{nodes} nodes{counted} exceed the largest PCS cluster ({largest.max_nodes} instances)",
                    "split the capacity into two clusters")


def _over_the_limit(spec: ClusterSpec, limit: int) -> tuple[str | int, ...]:
    """The size field of the node group that takes the cluster past `limit` nodes (the login
    nodes counted first): its count, or max_count of an elastic group."""
    total = spec.orchestrator.login.count
    for i, group in enumerate(spec.node_groups):
        total += group.max_nodes
        if total > limit:
            size = "count" if group.count is not None else "max_count" if group.max_count is not None else "min_count"
            return "node_groups", i, size
    return ("orchestrator", "login", "count")


@rule
def hyperpod_instance_types(spec: ClusterSpec) -> Iterator[Problem]:
    if not spec.orchestrator.control_plane.hyperpod:
        return
    for i, group in enumerate(spec.node_groups):
        if not group.instance.hyperpod:
            yield error(("node_groups", i, "instance_type"),
                        f"SageMaker HyperPod does not offer ml.{group.instance_type}",
                        "choose an instance type HyperPod supports, such as p5.48xlarge")
    login = spec.orchestrator.login
    # hyperpod-slurm runs the login nodes as an instance group; on hyperpod-eks they are the
    # system nodes, an EKS managed node group.
    if spec.orchestrator.type == "hyperpod-slurm" and login.count and not _hyperpod_type(login.instance_type):
        yield error(ORCH + ("login", "instance_type"), f"SageMaker HyperPod does not offer ml.{login.instance_type}")


def _hyperpod_type(name: str) -> bool:
    entry = catalog.get(name)
    return bool(entry and entry.hyperpod)


@rule
def training_plan_only_on_hyperpod(spec: ClusterSpec) -> Iterator[Problem]:
    if spec.orchestrator.control_plane.hyperpod:
        return
    for i, group in enumerate(spec.node_groups):
        if group.capacity.training_plan_arn and group.capacity.type in ("reservation", "capacity-block"):
            yield error(("node_groups", i, "capacity", "training_plan_arn"),
                        "training plans are a SageMaker HyperPod feature",
                        "use reservation_id with capacity type capacity-block instead")


@rule(warns=True)
def kubernetes_only_fields(spec: ClusterSpec) -> Iterator[Problem]:
    orch = spec.orchestrator
    cidrs = "public_access_cidrs" in orch.model_fields_set
    if orch.control_plane.scheduler == "kubernetes":
        if cidrs and orch.endpoint_access == "private":
            yield warning(ORCH + ("public_access_cidrs",),
                          "public_access_cidrs is used only with endpoint_access public-and-private: a private "
                          "endpoint is reached from the VPC only", "remove it, or make the endpoint public-and-private")
        return
    if orch.admin_role_arn:
        yield warning(ORCH + ("admin_role_arn",),
                      f"admin_role_arn is used only by Kubernetes control planes, not {orch.type}")
    if cidrs:
        yield warning(ORCH + ("public_access_cidrs",),
                      f"public_access_cidrs is used only by Kubernetes control planes, not {orch.type}")


@rule
def namespace_valid(spec: ClusterSpec) -> Iterator[Problem]:
    ns = spec.orchestrator.namespace
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", ns):
        yield error(ORCH + ("namespace",), f"'{ns}' is not a valid Kubernetes namespace",
                    "lower-case letters, digits and '-', at most 63")
