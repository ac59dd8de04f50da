"""Node-group sizing, capacity and placement rules."""

from __future__ import annotations

import re
from typing import Iterator

from fmcluster.spec.diagnostics import Path, Problem, error, warning
from fmcluster.spec.models import ClusterSpec, NodeGroupSpec
from fmcluster.spec.rules.registry import rule

NEEDS_RESERVATION = ("reservation", "capacity-block")


def _groups(spec: ClusterSpec) -> Iterator[tuple[Path, NodeGroupSpec]]:
    for i, group in enumerate(spec.node_groups):
        yield ("node_groups", i), group


@rule
def count_or_range(spec: ClusterSpec) -> Iterator[Problem]:
    for path, g in _groups(spec):
        if g.count is not None and (g.min_count is not None or g.max_count is not None):
            yield error(path + ("count",), "give either count or min_count/max_count, not both",
                        "count fixes the size; min_count/max_count make the group elastic")
        elif g.count is None and g.max_count is None:
            yield error(path, "the group has no size: set count, or min_count and max_count",
                        "such as count: 16")


@rule
def min_not_above_max(spec: ClusterSpec) -> Iterator[Problem]:
    for path, g in _groups(spec):
        if g.min_count is not None and g.max_count is not None and g.min_count > g.max_count:
            yield error(path + ("min_count",), f"min_count {g.min_count} is above max_count {g.max_count}")


@rule
def group_not_empty(spec: ClusterSpec) -> Iterator[Problem]:
    for path, g in _groups(spec):
        if g.count == 0 or (g.count is None and g.max_count == 0):
            yield error(path + ("count" if g.count is not None else "max_count",),
                        "the group can never have a node", "give it at least one node")


@rule
def reservation_given(spec: ClusterSpec) -> Iterator[Problem]:
    if spec.orchestrator.control_plane.hyperpod:
        return  # HyperPod takes reserved capacity through a training plan: training_plan_given
    for path, g in _groups(spec):
        cap = g.capacity
        if cap.type in NEEDS_RESERVATION and not (cap.reservation_id or cap.reservation_resource_group_arn):
            yield error(path + ("capacity", "reservation_id"), f"capacity type {cap.type} needs a reservation_id",
                        "the id of the reservation, such as cr-0123456789abcdef0 "
                        "(aws ec2 describe-capacity-reservations)")


@rule
def training_plan_given(spec: ClusterSpec) -> Iterator[Problem]:
    if not spec.orchestrator.control_plane.hyperpod:
        return
    for path, g in _groups(spec):
        cap = g.capacity
        if cap.type in NEEDS_RESERVATION and not cap.training_plan_arn:
            yield error(path + ("capacity", "training_plan_arn"),
                        f"SageMaker HyperPod takes {cap.type} capacity through a training plan",
                        "set capacity.training_plan_arn (aws sagemaker list-training-plans)")
        for field in ("reservation_id", "reservation_resource_group_arn"):
            if getattr(cap, field):
                yield error(path + ("capacity", field), "SageMaker HyperPod cannot target an EC2 reservation directly",
                            "buy the capacity as a training plan and set capacity.training_plan_arn")


@rule
def reservation_only_where_used(spec: ClusterSpec) -> Iterator[Problem]:
    for path, g in _groups(spec):
        cap = g.capacity
        for field in ("reservation_id", "reservation_resource_group_arn", "training_plan_arn"):
            if cap.type not in NEEDS_RESERVATION and getattr(cap, field):
                yield error(path + ("capacity", field), f"a reservation is given, but the capacity type is {cap.type}",
                            "set capacity.type: reservation (or capacity-block), or remove the reservation")


@rule
def one_reservation_target(spec: ClusterSpec) -> Iterator[Problem]:
    for path, g in _groups(spec):
        cap = g.capacity
        if cap.reservation_id and cap.reservation_resource_group_arn:
            yield error(path + ("capacity", "reservation_resource_group_arn"),
                        "give a reservation_id or a reservation_resource_group_arn, not both")


@rule
def capacity_block_by_id(spec: ClusterSpec) -> Iterator[Problem]:
    for path, g in _groups(spec):
        # UltraServer Capacity Blocks may be targeted by a resource group of their reservations
        # (EC2 User Guide, "Use Capacity Blocks with a resource group"); HyperPod: training_plan_given
        cp = spec.orchestrator.control_plane
        if g.capacity.type != "capacity-block" or not g.capacity.reservation_resource_group_arn or cp.hyperpod:
            continue
        if not g.capacity.ultraserver_type:
            yield error(path + ("capacity", "reservation_resource_group_arn"),
                        "a Capacity Block is targeted by its reservation_id, not a resource group",
                        "only UltraServer Capacity Blocks (capacity.ultraserver_type) take a resource group")
        elif cp.type == "eks":  # the node group follows its block's state, read by reservation id
            yield error(path + ("capacity", "reservation_resource_group_arn"),
                        "on EKS a Capacity Block node group follows its block by the block's reservation_id",
                        "give the UltraServer block's reservation_id (aws ec2 describe-capacity-blocks)")


@rule
def capacity_block_fixed_size(spec: ClusterSpec) -> Iterator[Problem]:
    """A Capacity Block runs a fixed number of instances: `count: N`, or `min_count` and
    `max_count` both N, which says the same."""
    for path, g in _groups(spec):
        if g.capacity.type == "capacity-block" and g.count is None and g.min_count != g.max_count:
            field = "min_count" if g.min_count is not None else "max_count"
            yield error(path + (field,), "a Capacity Block group has a fixed size: use count",
                        "count: the number of instances in the block (or fewer); or min_count equal to max_count")


@rule
def capacity_block_offered(spec: ClusterSpec) -> Iterator[Problem]:
    for path, g in _groups(spec):
        if g.capacity.type == "capacity-block" and not g.instance.capacity_block:
            yield error(path + ("instance_type",), f"{g.instance_type} is not offered as a Capacity Block for ML")


@rule(warns=True)
def capacity_block_not_placed(spec: ClusterSpec) -> Iterator[Problem]:
    """EC2 launches into a Capacity Block with a placement group (legal), but the block is placed
    already: a cluster placement group adds nothing and can cause insufficient-capacity errors
    (EC2 User Guide, Capacity Blocks). A warning, not an error."""
    for path, g in _groups(spec):
        if g.capacity.type == "capacity-block" and g.placement_group not in ("auto", "none"):
            yield warning(path + ("placement_group",),
                          f"a Capacity Block is placed already: placement group '{g.placement_group}' adds nothing "
                          "and can cause insufficient-capacity errors at launch",
                          "use placement_group: auto (no group for a Capacity Block), or accept this warning")


@rule
def placement_group_name(spec: ClusterSpec) -> Iterator[Problem]:
    for path, g in _groups(spec):
        pg = g.placement_group
        if pg not in ("auto", "none") and not re.fullmatch(r"[A-Za-z0-9._-]{1,255}", pg):
            yield error(path + ("placement_group",), f"'{pg}' is not auto, none or a placement group name")


@rule
def efa_supported(spec: ClusterSpec) -> Iterator[Problem]:
    for path, g in _groups(spec):
        if g.efa and not g.instance.efa_supported:
            yield error(path + ("efa",), f"{g.instance_type} does not support EFA",
                        "remove efa: true, or choose an EFA instance type such as p5.48xlarge")


@rule
def capacity_supported_by_control_plane(spec: ClusterSpec) -> Iterator[Problem]:
    cp = spec.orchestrator.control_plane
    for path, g in _groups(spec):
        if g.capacity.type not in cp.capacity_types:
            yield error(path + ("capacity", "type"), f"{cp.type} does not support {g.capacity.type} capacity",
                        "supported: " + ", ".join(cp.capacity_types))
