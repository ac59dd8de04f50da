"""What the node-group stacks of NAME-cluster share (stacks/pcs.py, stacks/eks.py).

Layout: every spec node group lives in a CloudFormation nested stack of its own inside
NAME-cluster (`node_group_stack`), whose construct id is `NodeGroup-<name>`. Inside it, the
group's resources sit under a construct of that same id, so their logical IDs are the ones they
had in the parent stack before the split, and derive from the group's name only. Adding,
removing or reordering a group adds or removes one nested stack and touches no other group's
template. The parent template keeps the control plane and one `AWS::CloudFormation::Stack` per
group, so no template grows past CloudFormation's limits (1 MB, 500 resources, 200 outputs, 200
parameters) with many node groups: one p5.48xlarge launch template alone is about 12 KB.

Placement groups belong to their node group (`placement_group_name`): a new cluster placement
group is created inside the group's nested stack, so removing a group, or changing its capacity
so that it needs none, deletes it with the group; no stack exports a name per group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import aws_cdk as cdk
from constructs import Construct

from constructs_lib.launch_template import CAPACITY_BLOCK_MARKET, CapacityTarget
from constructs_lib.network import ClusterPlacementGroups
from fmcluster import catalog
from fmcluster.controlplanes import CAPACITY_BLOCK, RESERVATION
from fmcluster.placement import Placement, placement_for

NO_PLACEMENT = Placement(create=False)


def capacity_target(capacity) -> CapacityTarget:
    """The launch template's capacity settings for a spec `capacity` (on-demand and spot: none;
    spot is the node group's purchase or capacity type)."""
    if capacity.type == CAPACITY_BLOCK:
        return CapacityTarget(market_type=CAPACITY_BLOCK_MARKET, reservation_id=capacity.reservation_id)
    if capacity.type == RESERVATION:
        return CapacityTarget(reservation_id=capacity.reservation_id,
                              reservation_resource_group_arn=capacity.reservation_resource_group_arn)
    return CapacityTarget()


@dataclass(frozen=True, kw_only=True)
class NodeGroupProps:
    """What every control plane's node group is made of; each plane adds its own fields."""

    name: str
    instance_type: str
    min_count: int
    max_count: int
    efa: bool
    root_volume_gib: int
    capacity: CapacityTarget = CapacityTarget()
    placement: Placement = NO_PLACEMENT
    ami_id: Optional[str] = None

    @staticmethod
    def spec_fields(group) -> dict:
        """The shared fields of a spec node group."""
        return dict(name=group.name, instance_type=group.instance_type, min_count=group.min_nodes,
                    max_count=group.max_nodes, efa=bool(group.efa), root_volume_gib=group.root_volume_gib,
                    capacity=capacity_target(group.capacity), placement=placement_for(group), ami_id=group.ami_id)

    @property
    def instance(self) -> catalog.InstanceType:
        return catalog.catalog()[self.instance_type]


def node_group_id(name: str) -> str:
    """The construct id of a spec node group: of its nested stack, and of the construct inside
    it that holds its resources."""
    return f"NodeGroup-{name}"


def node_group_stack(scope: Construct, name: str, *, cluster_name: str) -> Construct:
    """The nested stack of spec node group `name`, and the construct inside it for its resources."""
    nested = cdk.NestedStack(scope, node_group_id(name), description=f"fmcluster {cluster_name}: node group {name}")
    return Construct(nested, node_group_id(name))


def placement_group_name(scope: Construct, props: NodeGroupProps, *, cluster_name: str) -> Optional[str]:
    """The placement group of a node group's launch template: a new cluster placement group in
    `scope`, an existing group's name, or None."""
    if props.placement.create:
        return ClusterPlacementGroups(scope, "PlacementGroup", keys=[props.name],
                                      name_prefix=cluster_name).group_names[props.name]
    return props.placement.name
