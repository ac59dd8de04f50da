"""A Kueue ResourceFlavor per node group: its quota (CPU, memory, GPUs, EFA interfaces, IMEX
channels at the group's maximum size), the labels and tolerations that pick its nodes, and the
Topology that places its pods."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from fmcluster.facts.kubernetes import GPU_TOLERATION, NODE_GROUP_LABEL
from fmcluster.kubernetes.capacity_end import kubernetes_end
from fmcluster.kubernetes.kueue.config import IMEX_CHANNEL_RESOURCE, KUEUE_API
from fmcluster.kubernetes.kueue.topology import group_topology
from fmcluster.model.cluster import ClusterModel, NodeGroup

GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
COVERED_RESOURCES = ("cpu", "memory", GPU_RESOURCE, EFA_RESOURCE)
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"  # a job's WorkloadPriorityClass (pkg/controller/constants)


@dataclass(frozen=True)
class FlavorQuota:
    """One node group as a Kueue ResourceFlavor: its nodes' label, the toleration Kueue adds to
    pods it admits there, and the group's capacity at its maximum size."""

    name: str
    cpu: int
    memory_gib: int
    gpus: int
    efa: int
    node_labels: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, str], ...] = ()
    topology: Optional[str] = None  # the Kueue Topology of its nodes (group_topology)
    # IMEX_CHANNEL_RESOURCE: None where the ClusterQueue does not cover it (no UltraServer group in the
    # cluster); else one a node of an UltraServer group, 0 elsewhere (channel_quota)
    imex_channels: Optional[int] = None
    # the group's capacity ends and fmcluster closes the flavor then (spec.nodeTaints: capacity_end)
    closable: bool = False

    def covered(self) -> tuple[str, ...]:
        return COVERED_RESOURCES + ((IMEX_CHANNEL_RESOURCE,) if self.imex_channels is not None else ())

    def quantities(self) -> dict[str, int]:
        """The flavor's capacity by covered resource (memory in GiB)."""
        quota = {"cpu": self.cpu, "memory": self.memory_gib, GPU_RESOURCE: self.gpus, EFA_RESOURCE: self.efa,
                 IMEX_CHANNEL_RESOURCE: self.imex_channels or 0}  # covered only where not None
        return {name: quota[name] for name in self.covered()}

    def resources(self) -> list[dict[str, Any]]:
        return [{"name": name, "nominalQuota": quantity(name, value)} for name, value in self.quantities().items()]


def quantity(resource: str, value: int) -> int | str:
    """A quota as Kueue takes it: memory in Gi, the rest as counts."""
    return f"{value}Gi" if resource == "memory" else value


def channel_quota(model: ClusterModel, group: NodeGroup) -> Optional[int]:
    """The IMEX channels a group's flavor offers (FlavorQuota.imex_channels): one a node on an
    UltraServer group. The DRA driver (v25.8.0) offers each node one device of
    COMPUTE_DOMAIN_CHANNEL_CLASS (its DeviceClass selects channel id 0), and allocates it to one
    claim at a time (cmd/compute-domain-kubelet-plugin/device_state.go assertImexChannelNotAllocated;
    a DRA device without shared allocation): one pod a node holds a channel, so Kueue admits no
    more claims than the scheduler could place."""
    if not model.ultraserver_groups:
        return None
    return group.max_count if group.ultraserver else 0


def flavor_quotas(model: ClusterModel) -> list[FlavorQuota]:
    """A flavor per spec node group of the model (fmcluster.model.cluster; not the system nodes), CPU
    groups first: Kueue tries flavors in order, so a job without GPUs lands on CPU nodes, and a
    GPU job, finding no GPU quota there, moves on to the GPU groups."""
    quotas: list[FlavorQuota] = []
    for group in model.node_groups:
        nodes, instance = group.max_count, group.instance
        quotas.append(FlavorQuota(
            name=group.name, cpu=instance.vcpus * nodes, memory_gib=instance.memory_gib * nodes,
            gpus=instance.gpu_count * nodes, efa=group.efa_interfaces * nodes,
            node_labels=flavor_labels(group), tolerations=flavor_tolerations(group),
            topology=group_topology(group), imex_channels=channel_quota(model, group),
            closable=kubernetes_end(model, group) is not None))
    return sorted(quotas, key=lambda q: q.gpus > 0)


def flavor_labels(group: NodeGroup) -> dict[str, str]:
    """The node labels of a group's ResourceFlavor: its own group label."""
    return {NODE_GROUP_LABEL: group.name}


def flavor_tolerations(group: NodeGroup) -> tuple[dict[str, str], ...]:
    """The tolerations of a group's ResourceFlavor: the GPU taint's, on GPU groups."""
    return (GPU_TOLERATION,) if group.instance.is_gpu else ()


def flavor_placement(group: NodeGroup) -> dict[str, Any]:
    """A pod spec's nodeSelector and tolerations for the nodes of `group`, as its ResourceFlavor
    has them (so Kueue assigns the pod set that flavor and no other)."""
    return {"nodeSelector": flavor_labels(group), "tolerations": [dict(t) for t in flavor_tolerations(group)]}


def total_gpus(model: ClusterModel) -> int:
    """GPUs of every node group at its maximum size: the ClusterQueue's nvidia.com/gpu quota."""
    return sum(q.gpus for q in flavor_quotas(model))


def flavor_manifests(quotas: list[FlavorQuota]) -> list[dict[str, Any]]:
    """A ResourceFlavor per flavor quota. A closable flavor says `nodeTaints: []` (open): the
    function that closes it at the end of the group's capacity adds its taint there, and kubectl
    apply's three-way merge clears it again whenever the manifest is applied, or when the field
    leaves the manifest (a group no longer on such capacity), rather than keep it for good."""
    flavors: list[dict[str, Any]] = []
    for q in quotas:
        flavor_spec: dict[str, Any] = {"nodeLabels": dict(q.node_labels)}
        if q.tolerations:
            flavor_spec["tolerations"] = [dict(t) for t in q.tolerations]
        if q.topology:
            flavor_spec["topologyName"] = q.topology
        if q.closable:
            flavor_spec["nodeTaints"] = []
        flavors.append({"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": q.name},
                        "spec": flavor_spec})
    return flavors
