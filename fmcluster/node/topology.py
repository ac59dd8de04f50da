"""How the nodes of a Slurm node group are placed in EC2's network, and where a node publishes its
place as Slurm node features (programs/network-features.sh) for the kit's placement.sh. Pure.

EC2's instance topology (DescribeInstanceTopology; EC2 User Guide, "Amazon EC2 instance topology"
and its prerequisites page): each supported instance sits under a chain of network nodes, listed
top-down (layer 1 the broadest, the last the one the instance is connected to), 3 on most
supported types and 4 on p6-b200 and p6-b300.

- AWS PCS owns slurm.conf and accepts no TopologyPlugin custom setting; it configures Slurm's
  topology/block itself only for UltraServer node groups (PCS User Guide, "Capacity Blocks with
  NVIDIA IMEX", "Automatic topology selection": Slurm 25.05 or later). Every other multi-node EFA
  GPU group publishes its network nodes as node features (nn1-ID, nn2-ID, nn3-ID[, nn4-ID]) and
  jobs ask for all their nodes under one network node with Slurm's matching OR,
  `--constraint="[nn3-A|nn3-B]"`.
- SageMaker HyperPod configures Slurm's topology itself (the lead's design; see the plan): the
  kit asks for nothing.
"""

from __future__ import annotations

from typing import Optional

from fmcluster.facts import images as image_facts
from fmcluster.model.cluster import COMPUTE, ClusterModel, NodeGroup

FEATURE_PREFIX = "nn"  # features nn1-ID .. nn4-ID (network-features.sh; placement.sh)

PCS_FEATURES = "network features from EC2 instance topology; jobs ask for one layer-{layer} network node"
HYPERPOD_TOPOLOGY = "HyperPod's automatic Slurm topology"
PCS_BLOCK = "PCS block topology: one UltraServer"


def multi_node_efa_gpu(group: NodeGroup) -> bool:
    """A compute group whose jobs span nodes over EFA: GPUs, EFA, more than one node."""
    return group.role == COMPUTE and group.instance.is_gpu and group.efa and group.max_count > 1


def publishes_network_features(model: ClusterModel, group: NodeGroup) -> bool:
    """The group's nodes run network-features (the model's setup of the group, which
    fmcluster.node.pcs.node_program follows): on AWS PCS, a multi-node EFA GPU group of a type
    EC2's topology covers, not UltraServers (PCS's block topology places them)."""
    return model.node(group).network_features


def slurm_group_placement(model: ClusterModel, group: NodeGroup) -> Optional[str]:
    """How the Slurm jobs of `group` are placed in the network, as the plan shows it; None where
    nothing places them (one node, no EFA, no GPU, a type EC2's topology does not cover, or not a
    Slurm plane)."""
    plane = model.control_plane.type
    if plane not in (image_facts.PCS, image_facts.HYPERPOD_SLURM) or not multi_node_efa_gpu(group):
        return None
    if plane == image_facts.HYPERPOD_SLURM:
        return HYPERPOD_TOPOLOGY
    if group.ultraserver:
        return PCS_BLOCK
    return PCS_FEATURES.format(layer=group.instance.network_layers) if group.network_placed else None


def placement_plane(model: ClusterModel) -> str:
    """What the kit's placement.sh does on this cluster: "features" (AWS PCS: ask for one network
    node by node features), or "none" (HyperPod, which configures Slurm's topology itself)."""
    return "features" if model.control_plane.type == image_facts.PCS else "none"
