"""Kueue on a Kubernetes cluster: its controller Configuration and chart values, a
ResourceFlavor per node group with its quota, the ClusterQueue and LocalQueue, and the NVLink
Topology of UltraServer groups."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import yaml

from fmcluster.facts.kubernetes import GPU_TOLERATION, LABEL_PREFIX, NODE_GROUP_LABEL, system_node_selector
from fmcluster.model.cluster import ClusterModel, NodeGroup
from fmcluster.spec.models import ClusterSpec

KUEUE_API = "kueue.x-k8s.io/v1beta2"

# Kueue's controller configuration (config.kueue.x-k8s.io/v1beta2 Configuration): the chart takes
# it whole, as the YAML string managerConfig.controllerManagerConfigYaml (charts/kueue/values.yaml
# at kubernetes-sigs/kueue v0.18.3; templates/manager/manager-config.yaml parses it, adds
# internalCertManagement when absent, and the Deployment's config-checksum annotation restarts the
# controller when it changes). Kueue decodes it strictly (pkg/config/config.go: EnableStrict): an
# unknown field stops the controller. tests/kubernetes/test_kueue_config.py checks it against a schema made
# from apis/config/v1beta2/configuration_types.go at that tag.
KUEUE_CONFIG_API = "config.kueue.x-k8s.io/v1beta2"

# The chart's default Configuration at 0.18.3 (values.yaml, managerConfig.controllerManagerConfigYaml),
# as data: fmcluster's replaces it only where it adds to it (kueue_configuration).
KUEUE_CHART_FRAMEWORKS = (
    "batch/job", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/rayservice", "ray.io/raycluster",
    "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob", "kubeflow.org/paddlejob", "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob", "kubeflow.org/xgboostjob", "kubeflow.org/jaxjob", "workload.codeflare.dev/appwrapper",
    "pod", "deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset")

# Dynamic Resource Allocation in Kueue 0.18.3: the feature gate KueueDRAIntegration is Beta and on by
# default (pkg/features/kube_features.go), and a workload whose pods use a ResourceClaimTemplate is
# Inadmissible ("DeviceClass ... is not mapped in DRA configuration") unless each DeviceClass of the
# template is mapped to a logical resource in resources.deviceClassMappings
# (site/content/en/docs/tasks/manage/setup_dra.md; pkg/dra/claims.go), which the ClusterQueue then
# covers with a quota. A ComputeDomain's ResourceClaimTemplate (NVIDIA/k8s-dra-driver-gpu v25.8.0
# templates/compute-domain-workload-claim-template.tmpl.yaml) requests one device, `exactly`, of the
# class below, without a count (ExactCount, 1): Kueue counts 1 a pod (pkg/dra/claims.go
# countDevicesPerClass; pkg/workload/workload.go multiplies by the pod set's count).
COMPUTE_DOMAIN_CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
IMEX_CHANNEL_RESOURCE = LABEL_PREFIX + "imex-channel"  # the logical resource Kueue charges for it


def kueue_chart_configuration() -> dict[str, Any]:
    """The Kueue chart's own default Configuration (KUEUE, values.yaml), a fresh copy."""
    return {"apiVersion": KUEUE_CONFIG_API, "kind": "Configuration",
            "health": {"healthProbeBindAddress": ":8081"}, "metrics": {"bindAddress": ":8443"},
            "webhook": {"port": 9443},
            "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
            "controller": {"groupKindConcurrency": {
                "Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 5, "LocalQueue.kueue.x-k8s.io": 1,
                "ClusterQueue.kueue.x-k8s.io": 1, "ResourceFlavor.kueue.x-k8s.io": 1}},
            "clientConnection": {"qps": 50, "burst": 100},
            "integrations": {"frameworks": list(KUEUE_CHART_FRAMEWORKS)}}


def kueue_configuration(model: ClusterModel) -> Optional[dict[str, Any]]:
    """Kueue's Configuration where fmcluster needs more than the chart's default, else None: with an
    UltraServer node group, the chart's default and the ComputeDomain channel class mapped to
    IMEX_CHANNEL_RESOURCE (the quota of kueue_manifests)."""
    if not model.ultraserver_groups:
        return None
    configuration = kueue_chart_configuration()
    configuration["resources"] = {"deviceClassMappings": [
        {"name": IMEX_CHANNEL_RESOURCE, "deviceClassNames": [COMPUTE_DOMAIN_CHANNEL_CLASS]}]}
    return configuration


def kueue_values(model: ClusterModel) -> dict[str, Any]:
    """The Kueue controller on the system nodes; its Configuration (kueue_configuration) where
    fmcluster sets one."""
    values: dict[str, Any] = {"controllerManager": {"nodeSelector": system_node_selector()}}
    configuration = kueue_configuration(model)
    if configuration is not None:
        values["managerConfig"] = {"controllerManagerConfigYaml": yaml.safe_dump(configuration, sort_keys=False)}
    return values


GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
COVERED_RESOURCES = ("cpu", "memory", GPU_RESOURCE, EFA_RESOURCE)
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"


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
    topology: Optional[str] = None  # the Kueue Topology of its nodes (UltraServer groups: NVLINK_TOPOLOGY)
    # IMEX_CHANNEL_RESOURCE: None where the ClusterQueue does not cover it (no UltraServer group in the
    # cluster); else one a node of an UltraServer group, 0 elsewhere (channel_quota)
    imex_channels: Optional[int] = None

    def covered(self) -> tuple[str, ...]:
        return COVERED_RESOURCES + ((IMEX_CHANNEL_RESOURCE,) if self.imex_channels is not None else ())

    def resources(self) -> list[dict[str, Any]]:
        quota = {"cpu": self.cpu, "memory": f"{self.memory_gib}Gi", GPU_RESOURCE: self.gpus, EFA_RESOURCE: self.efa,
                 IMEX_CHANNEL_RESOURCE: self.imex_channels}
        return [{"name": name, "nominalQuota": quota[name]} for name in self.covered()]


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
            topology=NVLINK_TOPOLOGY if group.ultraserver else None, imex_channels=channel_quota(model, group)))
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


def queue_names(spec: ClusterSpec) -> tuple[str, str]:
    """(ClusterQueue, LocalQueue): both named after the cluster."""
    return spec.name, spec.name


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


def topology_manifest() -> dict[str, Any]:
    """The Kueue Topology NVLINK_TOPOLOGY (cluster-scoped)."""
    return {"apiVersion": KUEUE_API, "kind": "Topology", "metadata": {"name": NVLINK_TOPOLOGY},
            "spec": {"levels": [{"nodeLabel": label} for label in NVLINK_TOPOLOGY_LEVELS]}}


def kueue_manifests(model: ClusterModel) -> list[dict[str, Any]]:
    """ResourceFlavors (one per node group of the model), the ClusterQueue over all of them, and
    the LocalQueue in orchestrator.namespace that jobs name with the kueue.x-k8s.io/queue-name label;
    with an UltraServer node group, the Topology of its flavor first, and IMEX_CHANNEL_RESOURCE covered
    (the ComputeDomain channels its jobs claim: channel_quota)."""
    spec = model.spec
    cluster_queue, local_queue = queue_names(spec)
    quotas = flavor_quotas(model)
    topologies = [topology_manifest()] if model.ultraserver_groups else []
    flavors: list[dict[str, Any]] = []
    for q in quotas:
        flavor_spec: dict[str, Any] = {"nodeLabels": dict(q.node_labels)}
        if q.tolerations:
            flavor_spec["tolerations"] = [dict(t) for t in q.tolerations]
        if q.topology:
            flavor_spec["topologyName"] = q.topology
        flavors.append({"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": q.name},
                        "spec": flavor_spec})
    queue = {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": cluster_queue},
             "spec": {"namespaceSelector": {}, "resourceGroups": [{
                 "coveredResources": list(quotas[0].covered() if quotas else COVERED_RESOURCES),
                 "flavors": [{"name": q.name, "resources": q.resources()} for q in quotas]}]}}
    local = {"apiVersion": KUEUE_API, "kind": "LocalQueue",
             "metadata": {"name": local_queue, "namespace": spec.orchestrator.namespace},
             "spec": {"clusterQueue": cluster_queue}}
    return [*topologies, *flavors, queue, local]
