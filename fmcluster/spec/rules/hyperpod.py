"""What a SageMaker HyperPod cluster (hyperpod-slurm, hyperpod-eks) can take from a spec.

Instance types and capacity types are checked with the other control planes
(orchestrator.hyperpod_instance_types, capacity.capacity_supported_by_control_plane,
capacity.training_plan_given); the rules here are HyperPod's own.
"""

from __future__ import annotations

import re
from typing import Iterator

from fmcluster.facts import catalog, controlplanes, images
from fmcluster.facts.controlplanes import HYPERPOD_MAX_INSTANCE_COUNT, HYPERPOD_MAX_INSTANCE_GROUPS
from fmcluster.facts.placement import AUTO, NONE
from fmcluster.spec.diagnostics import Problem, error
from fmcluster.spec.models import ClusterSpec
from fmcluster.spec.rules.registry import rule


def _hyperpod(spec: ClusterSpec) -> bool:
    return spec.orchestrator.control_plane.hyperpod


@rule
def hyperpod_fixed_size(spec: ClusterSpec) -> Iterator[Problem]:
    """HyperPod instance groups run InstanceCount instances; they do not scale between bounds."""
    if not _hyperpod(spec):
        return
    for i, group in enumerate(spec.node_groups):
        if group.count is None and group.min_count != group.max_count:  # min_count = max_count = N is count: N
            field = "min_count" if group.min_count is not None else "max_count"
            yield error(("node_groups", i, field), "a SageMaker HyperPod instance group has a fixed size: use count",
                        f"count: {group.max_nodes} (HyperPod keeps InstanceCount instances running)")


@rule
def hyperpod_instance_count(spec: ClusterSpec) -> Iterator[Problem]:
    if not _hyperpod(spec):
        return
    for i, group in enumerate(spec.node_groups):
        if group.max_nodes > HYPERPOD_MAX_INSTANCE_COUNT:
            yield error(("node_groups", i, "count" if group.count is not None else "max_count"),
                        f"a SageMaker HyperPod instance group holds at most {HYPERPOD_MAX_INSTANCE_COUNT} instances",
                        "split the group in two")


@rule
def hyperpod_instance_group_limit(spec: ClusterSpec) -> Iterator[Problem]:
    if not _hyperpod(spec):
        return
    # hyperpod-slurm adds a controller group and a login group; the system nodes of hyperpod-eks
    # are an EKS node group, not an instance group.
    own = 1 + bool(spec.orchestrator.login.count) if spec.orchestrator.control_plane.scheduler == "slurm" else 0
    groups = len(spec.node_groups) + own
    if groups > HYPERPOD_MAX_INSTANCE_GROUPS:
        yield error(("node_groups",),
                    f"{groups} instance groups exceed SageMaker HyperPod's {HYPERPOD_MAX_INSTANCE_GROUPS}",
                    "merge node groups of the same instance type")


@rule
def hyperpod_names(spec: ClusterSpec) -> Iterator[Problem]:
    """ClusterName and InstanceGroupName (and Slurm partition names): [a-zA-Z0-9](-*[a-zA-Z0-9])*,
    so no trailing '-'."""
    if not _hyperpod(spec):
        return
    if not re.fullmatch(controlplanes.HYPERPOD_NAME_PATTERN, spec.name):
        yield error(("name",), f"'{spec.name}' is not a valid SageMaker HyperPod cluster name",
                    "letters and digits, with '-' only between them (no trailing '-')")
    for i, group in enumerate(spec.node_groups):
        if not re.fullmatch(controlplanes.HYPERPOD_NAME_PATTERN, group.name):
            yield error(("node_groups", i, "name"),
                        f"'{group.name}' is not a valid SageMaker HyperPod instance group name",
                        "letters and digits, with '-' only between them (no trailing '-')")


@rule
def hyperpod_placement_group(spec: ClusterSpec) -> Iterator[Problem]:
    """HyperPod places its instances itself: an existing placement group cannot be named."""
    if not _hyperpod(spec):
        return
    for i, group in enumerate(spec.node_groups):
        if group.placement_group not in (AUTO, NONE):
            yield error(("node_groups", i, "placement_group"),
                        "SageMaker HyperPod places instances itself and takes no placement group",
                        "use placement_group: auto (or none)")


@rule
def hyperpod_slurm_image_base(spec: ClusterSpec) -> Iterator[Problem]:
    """fmcluster bakes a HyperPod Slurm node's software into an image built from HyperPod's
    published Slurm base image, which exists for x86_64 only (fmcluster.facts.images): an arm64
    group must bring its own image (`ami_id`)."""
    cp = spec.orchestrator.control_plane
    if cp.type != images.HYPERPOD_SLURM:
        return
    for i, group in enumerate(spec.node_groups):
        if not group.ami_id and not images.has_base(cp.type, group.instance.architecture):
            yield error(("node_groups", i, "instance_type"),
                        f"SageMaker HyperPod publishes no {group.instance.architecture} Slurm base image to bake "
                        f"fmcluster's node image ({group.instance_type}) from",
                        "set ami_id to a HyperPod custom AMI of your own with Enroot, Pyxis (built against "
                        "/opt/slurm) and the exporters installed, or use an x86_64 instance type")
    login = spec.orchestrator.login
    if login.count:
        instance = catalog.get(login.instance_type)
        architecture = instance.architecture if instance else ""
        if instance and not images.has_base(cp.type, architecture):
            yield error(("orchestrator", "login", "instance_type"),
                        f"SageMaker HyperPod publishes no {architecture} Slurm base image for the login nodes' image",
                        "use an x86_64 instance type for the login nodes")
