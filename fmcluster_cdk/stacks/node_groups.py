"""What the node-group stacks of NAME-cluster share (fmcluster_cdk/stacks/pcs.py, fmcluster_cdk/stacks/eks.py).

Sources and details: docs/research-notes.md, "fmcluster_cdk/stacks/node_groups.py"."""

from __future__ import annotations

from typing import Optional

import aws_cdk as cdk
from constructs import Construct

from fmcluster.facts.controlplanes import CAPACITY_BLOCK, RESERVATION
from fmcluster.model.cluster import OPENZFS, ClusterModel, NodeGroup
from fmcluster.node.refs import ClusterDetails, NodeRefs
from fmcluster.spec.models import CapacitySpec
from fmcluster_cdk.constructs.compute.launch_template import CAPACITY_BLOCK_MARKET, CapacityTarget
from fmcluster_cdk.constructs.compute.node_replacer import queue_name
from fmcluster_cdk.constructs.network import ClusterPlacementGroups
from fmcluster_cdk.errors import ConstructError
from fmcluster_cdk.stacks.refs import ObservabilityRefs, StorageRefs


def capacity_target(capacity: CapacitySpec) -> CapacityTarget:
    """The launch template's capacity settings for a node group's `capacity` (on-demand and spot:
    none; spot is the node group's purchase or capacity type)."""
    if capacity.type == CAPACITY_BLOCK:
        return CapacityTarget(market_type=CAPACITY_BLOCK_MARKET, reservation_id=capacity.reservation_id)
    if capacity.type == RESERVATION:
        return CapacityTarget(reservation_id=capacity.reservation_id,
                              reservation_resource_group_arn=capacity.reservation_resource_group_arn)
    return CapacityTarget()


def node_group_id(name: str) -> str:
    """The construct id of a spec node group: of its nested stack, and of the construct inside
    it that holds its resources."""
    return f"NodeGroup-{name}"


def node_group_stack(scope: Construct, name: str, *, cluster_name: str) -> Construct:
    """The nested stack of spec node group `name`, and the construct inside it for its resources."""
    nested = cdk.NestedStack(scope, node_group_id(name), description=f"fmcluster {cluster_name}: node group {name}")
    return Construct(nested, node_group_id(name))


def placement_group_name(scope: Construct, group: NodeGroup, *, cluster_name: str) -> Optional[str]:
    """The placement group of a node group's launch template (its model's `placement`): a new
    cluster placement group in `scope`, an existing group's name, or None."""
    if group.placement.create:
        return ClusterPlacementGroups(scope, "PlacementGroup", keys=[group.name],
                                      name_prefix=cluster_name).group_names[group.name]
    return group.placement.name


def node_refs(scope: Construct, model: ClusterModel, storage: StorageRefs,
              observability: Optional[ObservabilityRefs] = None, *,
              eks_cluster: Optional[ClusterDetails] = None) -> NodeRefs:
    """What the node renderers take from the other stacks (fmcluster.node.refs): the file
    system's and the shared home's names (NAME-storage's outputs; an error where the spec has one
    and `storage` gives none), the workspace's remote-write URL (with NAME-observability), the node
    replacer's queue (health.replace) and `eks_cluster`."""
    lustre = model.spec.storage.lustre
    if lustre is not None and not (storage.file_system_dns_name and storage.file_system_mount_name):
        raise ConstructError(scope, "the spec has a Lustre file system, but the storage stack gives no DNS or "
                                    "mount name")
    if model.home is not None and model.home.kind == OPENZFS and not storage.home_dns_name:
        raise ConstructError(scope, "the spec has a shared home, but the storage stack gives no DNS name for it")
    return NodeRefs(lustre_dns_name=storage.file_system_dns_name or "",
                    lustre_mount_name=storage.file_system_mount_name or "", home_dns_name=storage.home_dns_name or "",
                    remote_write_url=observability.remote_write_url if observability is not None else None,
                    replacement_queue=queue_name(model.name) if model.health.replace else "", eks_cluster=eks_cluster)
