"""Kueue's Topologies: the NVLink domains of UltraServer groups and the EC2 network's layers of
every other multi-node EFA GPU group; what a group's flavor names, what its jobs' pod templates ask
for, and how the plan says it."""

from __future__ import annotations

from typing import Any, Optional

from fmcluster.kubernetes.kueue.config import KUEUE_API
from fmcluster.model.cluster import ClusterModel, NodeGroup

NVLINK_CLIQUE_LABEL = "nvidia.com/gpu.clique"  # one value per NVLink domain (GFD: GPU_FEATURE_DISCOVERY)
HOSTNAME_LABEL = "kubernetes.io/hostname"

# The Kueue Topology of the UltraServer flavors: NVLink domain, then node. Kueue 0.18 serves
# Topology as v1beta1 and v1beta2 (KUEUE_API; kubernetes-sigs/kueue v0.18.3
# config/components/crd/bases/kueue.x-k8s.io_topologies.yaml: levels 1 to 16 nodeLabels, unique,
# kubernetes.io/hostname only last); topology-aware scheduling is on by default (beta since 0.14).
# A job asks for one domain with the pod template annotation
# kueue.x-k8s.io/podset-required-topology: nvidia.com/gpu.clique.
NVLINK_TOPOLOGY = "nvlink-domain"
REQUIRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"  # on a pod template
NVLINK_TOPOLOGY_LEVELS = (NVLINK_CLIQUE_LABEL, HOSTNAME_LABEL)


def topology_manifest(name: str = NVLINK_TOPOLOGY) -> dict[str, Any]:
    """The Kueue Topology `name` (cluster-scoped): NVLINK_TOPOLOGY, or a network topology
    (network_topology_name)."""
    return {"apiVersion": KUEUE_API, "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": label} for label in topology_levels(name)]}}


# The network topology of every other multi-node EFA GPU group (network_placed): Amazon EKS labels
# each node of a supported instance type with its place in the EC2 network (the EKS User Guide,
# "Place distributed AI/ML workloads with network topology labels"):
# topology.k8s.aws/network-node-layer-1 the top (the broadest), -2, -3 the bottom on most types,
# -4 "present only on instance types whose topology has four layers" (p6-b200, p6-b300: the
# catalog's network_layers); SageMaker HyperPod labels its EKS nodes the same
# (docs/research-notes.md, "Using topology-aware scheduling in Amazon SageMaker HyperPod"). A
# Topology's levels go from the highest (coarsest) to the lowest, kubernetes.io/hostname only last
# (kubernetes-sigs/kueue v0.18.3 apis/kueue/v1beta2/topology_types.go: 1 to 16 levels, unique;
# site/content/en/docs/concepts/topology.md). One Topology per layer count in use, named after it
# (levels are immutable: a group that changes to a type with other layers names another one).
# Kueue counts a node for a TAS flavor only where it has every level's label
# (pkg/util/tas/node.go NodeMatchesFlavor), so only types with network layers get one.
NETWORK_LAYER_LABEL = "topology.k8s.aws/network-node-layer-{layer}"
NETWORK_TOPOLOGY = "network-{layers}"
# A pod set asks for the tightest domain that fits with this annotation on its pod template: Kueue
# tries the level named, then each level up, and admits it spread over several domains where none
# holds it (topology_types.go, PodSetPreferredTopologyAnnotation).
PREFERRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"  # on a pod template


def network_layer_label(layer: int) -> str:
    return NETWORK_LAYER_LABEL.format(layer=layer)


def network_topology_name(layers: int) -> str:
    """The Kueue Topology of nodes with `layers` network layers (network-3, network-4)."""
    return NETWORK_TOPOLOGY.format(layers=layers)


def topology_levels(name: str) -> tuple[str, ...]:
    """The node labels of a Topology of fmcluster's, highest level first, the node last."""
    if name == NVLINK_TOPOLOGY:
        return NVLINK_TOPOLOGY_LEVELS
    layers = int(name.removeprefix(NETWORK_TOPOLOGY.format(layers="")))
    return (*(network_layer_label(layer) for layer in range(1, layers + 1)), HOSTNAME_LABEL)


def network_placed(group: NodeGroup) -> bool:
    """The group's flavor is placed by network topology: a GPU group of more than one node with
    EFA interfaces, on a type with network layers, not an UltraServer group (NVLINK_TOPOLOGY)."""
    return group.network_placed


def group_topology(group: NodeGroup) -> Optional[str]:
    """The Kueue Topology of a group's ResourceFlavor: NVLINK_TOPOLOGY on UltraServer groups, the
    network topology of its layers where network_placed, else None (a flavor without topology)."""
    if group.ultraserver:
        return NVLINK_TOPOLOGY
    if network_placed(group):
        return network_topology_name(group.instance.network_layers)
    return None


def topology_request(group: NodeGroup) -> dict[str, str]:
    """The annotations of a pod template whose pods run on the group's nodes: the tightest placement
    that fits. An UltraServer group that one NVLink domain holds: that domain, required (its jobs
    need the IMEX channel of one domain); a larger one: one domain, preferred. A network-placed
    group: one network node of the lowest layer (layer 3, or 4 on four-layer types), preferred, so
    that a job larger than one still runs. Else none.

    Every pod set on a TAS flavor asks explicitly: in a ClusterQueue that also has flavors without
    topology, Kueue 0.18.3 gives a pod set that does not ask no TAS flavor ("supports only
    TopologyAwareScheduling", pkg/scheduler/flavorassigner/tas_flavorassigner.go
    checkPodSetAndFlavorMatchForTAS); only a ClusterQueue of TAS flavors alone implies it."""
    if group.ultraserver:
        annotation = REQUIRED_TOPOLOGY_ANNOTATION if group.one_nvlink_domain else PREFERRED_TOPOLOGY_ANNOTATION
        return {annotation: NVLINK_CLIQUE_LABEL}
    if network_placed(group):
        return {PREFERRED_TOPOLOGY_ANNOTATION: network_layer_label(group.instance.network_layers)}
    return {}


def group_placement(model: ClusterModel, group: NodeGroup) -> Optional[str]:
    """How Kueue places a group's jobs, in a phrase for the plan; None where it does not by topology
    (not a Kubernetes cluster, or a flavor without topology)."""
    if model.control_plane.scheduler != "kubernetes":
        return None
    topology = group_topology(group)
    if topology is None:
        return None
    request = topology_request(group)
    if topology == NVLINK_TOPOLOGY:
        how = "require" if REQUIRED_TOPOLOGY_ANNOTATION in request else "prefer"
        return f"Kueue topology {topology}: jobs {how} one NVLink domain ({NVLINK_CLIQUE_LABEL})"
    layers = group.instance.network_layers
    return f"Kueue topology {topology}: jobs prefer one layer-{layers} network node ({network_layer_label(layers)})"


def topology_manifests(model: ClusterModel) -> list[dict[str, Any]]:
    """The Topologies the flavors name (group_topology), each once: NVLINK_TOPOLOGY first, then the
    network topologies by layer count."""
    names = {name for name in map(group_topology, model.node_groups) if name is not None}
    ordered = sorted(names, key=lambda name: (name != NVLINK_TOPOLOGY, name))
    return [topology_manifest(name) for name in ordered]
