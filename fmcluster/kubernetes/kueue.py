"""Kueue on a Kubernetes cluster: its controller Configuration and chart values, a
ResourceFlavor per node group with its quota, the ClusterQueue and LocalQueue, and the NVLink
Topology of UltraServer groups. Where teams share the cluster: a Cohort, a ClusterQueue per team
with its guarantee as nominal quota, the WorkloadPriorityClasses, and per team a Namespace, its
LocalQueue and RoleBinding (team_manifests). Every other multi-node EFA GPU group's flavor is
placed by the EC2 network's layers (group_topology).

Sources and details: docs/research-notes.md, "fmcluster/kubernetes/kueue.py"."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import yaml

from fmcluster.facts import teams as team_facts
from fmcluster.facts.kubernetes import GPU_TOLERATION, LABEL_PREFIX, NODE_GROUP_LABEL, system_node_selector
from fmcluster.model.cluster import ClusterModel, NodeGroup
from fmcluster.model.teams import Team
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


# Fair sharing (config.kueue.x-k8s.io/v1beta2 Configuration.fairSharing, at 0.18.3): on when the
# field is set (cmd/kueue/main.go), which needs preemptionStrategies, one of the sets
# pkg/config/validation.go accepts. Both strategies, as the Kueue documentation's example has
# them (site/content/en/docs/concepts/preemption.md, "Fair Sharing"): first preempt only where
# the preempting team ends no further above its share than the preempted one, then where it is
# below the other's share at the start.
FAIR_SHARING_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


def kueue_configuration(model: ClusterModel) -> Optional[dict[str, Any]]:
    """Kueue's Configuration where fmcluster needs more than the chart's default, else None: with an
    UltraServer node group, the chart's default and the ComputeDomain channel class mapped to
    IMEX_CHANNEL_RESOURCE (the quota of kueue_manifests); with teams, fair sharing between their
    ClusterQueues."""
    if not model.ultraserver_groups and not model.teams:
        return None
    configuration = kueue_chart_configuration()
    if model.ultraserver_groups:
        configuration["resources"] = {"deviceClassMappings": [
            {"name": IMEX_CHANNEL_RESOURCE, "deviceClassNames": [COMPUTE_DOMAIN_CHANNEL_CLASS]}]}
    if model.teams:
        configuration["fairSharing"] = {"preemptionStrategies": list(FAIR_SHARING_STRATEGIES)}
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
            topology=group_topology(group), imex_channels=channel_quota(model, group)))
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
    """(ClusterQueue, LocalQueue) of a cluster without teams: both named after the cluster."""
    return spec.name, spec.name


# With teams: the LocalQueue of a team's namespace is named `default`, which Kueue 0.18.3 makes the
# namespace's default queue (LocalQueueDefaulting, GA and locked on since 0.17;
# site/content/en/docs/tasks/manage/enforce_job_management/setup_default_local_queue.md): a job
# there without the queue-name label is given it, so no team's job runs outside its quota.
TEAM_LOCAL_QUEUE = "default"


def team_queue(team: Team) -> tuple[str, str, str]:
    """(namespace, LocalQueue, ClusterQueue) of a team: its namespace and ClusterQueue take its name."""
    return team.name, TEAM_LOCAL_QUEUE, team.name


def team_namespaces(model: ClusterModel) -> tuple[str, ...]:
    """The teams' namespaces (team_queue), each once, in the spec's order."""
    return tuple(dict.fromkeys(team_queue(t)[0] for t in model.teams))


def job_queue(model: ClusterModel, team: Optional[Team] = None) -> tuple[str, str, Optional[str]]:
    """(namespace, LocalQueue, priority class or None) a job of the kits goes to: the team's
    namespace, queue and own priority class; without teams orchestrator.namespace and the cluster's
    LocalQueue, no priority class. A model with teams and no team given: its first team."""
    if team is None and model.teams:
        team = model.teams[0]
    if team is None:
        return model.spec.orchestrator.namespace, queue_names(model.spec)[1], None
    namespace, local_queue, _ = team_queue(team)
    return namespace, local_queue, team.priority


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


def kueue_manifests(model: ClusterModel) -> list[dict[str, Any]]:
    """ResourceFlavors (one per node group of the model), the ClusterQueue over all of them, and
    the LocalQueue in orchestrator.namespace that jobs name with the kueue.x-k8s.io/queue-name label;
    the Topologies the flavors name first (topology_manifests); with an UltraServer node group,
    IMEX_CHANNEL_RESOURCE covered (the ComputeDomain channels its jobs claim: channel_quota). With
    teams, the teams' objects (team_manifests) in place of the one ClusterQueue and LocalQueue."""
    spec = model.spec
    cluster_queue, local_queue = queue_names(spec)
    quotas = flavor_quotas(model)
    topologies = topology_manifests(model)
    flavors = flavor_manifests(quotas)
    if model.teams:
        return [*topologies, *flavors, *team_manifests(model, quotas)]
    queue = {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": cluster_queue},
             "spec": {"namespaceSelector": {}, "resourceGroups": [{
                 "coveredResources": list(quotas[0].covered() if quotas else COVERED_RESOURCES),
                 "flavors": [{"name": q.name, "resources": q.resources()} for q in quotas]}]}}
    local = {"apiVersion": KUEUE_API, "kind": "LocalQueue",
             "metadata": {"name": local_queue, "namespace": spec.orchestrator.namespace},
             "spec": {"clusterQueue": cluster_queue}}
    return [*topologies, *flavors, queue, local]


def flavor_manifests(quotas: list[FlavorQuota]) -> list[dict[str, Any]]:
    """A ResourceFlavor per flavor quota."""
    flavors: list[dict[str, Any]] = []
    for q in quotas:
        flavor_spec: dict[str, Any] = {"nodeLabels": dict(q.node_labels)}
        if q.tolerations:
            flavor_spec["tolerations"] = [dict(t) for t in q.tolerations]
        if q.topology:
            flavor_spec["topologyName"] = q.topology
        flavors.append({"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": q.name},
                        "spec": flavor_spec})
    return flavors


# --- teams ---------------------------------------------------------------------------------------
#
# Where teams share the cluster, Kueue's quotas are theirs (kubernetes-sigs/kueue v0.18.3,
# apis/kueue/v1beta2 clusterqueue_types.go and cohort_types.go): a ClusterQueue per team in one
# cohort, named after the cluster. A team's nominal quota in a flavor is its guaranteed GPUs
# there, and of the flavor's other resources (CPU, memory, EFA interfaces, IMEX channels) the same
# fraction, rounded down: a job within its guarantee then fits in every resource it asks for. The
# rest of each shared flavor (the GPUs nobody is guaranteed, CPU node groups whole) is the
# Cohort's own nominal quota, a pool every team may borrow from. A team's `borrow` is the
# borrowingLimit of its GPUs in each flavor, its `lend` their lendingLimit (at most its nominal
# quota, as Kueue's webhook requires; LendingLimit is GA at 0.18), and of the flavor's other
# resources the same fraction (team_limits): a limit on GPUs alone would let a team borrow the
# CPU, memory and EFA interfaces of GPU nodes beyond it; unset where unlimited. A node
# group dedicated to a team is a flavor in its ClusterQueue only, whole, lent to nobody.
#
# Preemption: within a team's queue a job preempts lower-priority jobs (withinClusterQueue
# LowerPriority); a team reclaims its guarantee from teams that borrowed it whatever their
# priority (reclaimWithinCohort Any). With fair sharing on (FAIR_SHARING_STRATEGIES), Kueue shares
# what is idle between the teams that borrow and preempts borrowers by share; borrowWithinCohort
# is left unset: Kueue reads it only in classical preemption, never with fair sharing (its field
# documentation; site/content/en/docs/concepts/preemption.md, "Fair Sharing").

TEAM_LABEL = LABEL_PREFIX + "team"  # on a team's Namespace
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by Kubernetes on every Namespace
TEAM_ROLE_BINDING = "fmcluster-team-edit"
TEAM_CLUSTER_ROLE = "edit"  # the built-in user-facing role: read and write most namespaced objects
JOB_KINDS_ROLE = "fmcluster-job-kinds-edit"


def team_group(team: Team) -> str:
    """The Kubernetes group of a team's IAM members (their EKS access entries name it)."""
    return f"fmcluster:team:{team.name}"


def cohort_name(spec: ClusterSpec) -> str:
    return spec.name


def dedicated_owners(model: ClusterModel) -> dict[str, str]:
    """Node group -> the team it is dedicated to."""
    return {group: team.name for team in model.teams for group in team.dedicated}


def team_quantities(quota: FlavorQuota, team: Team) -> dict[str, int]:
    """A team's nominal quota in a flavor by resource: its guaranteed GPUs there, and that fraction
    of the flavor's other resources, rounded down (0 on a flavor without GPUs)."""
    guaranteed = team.guaranteed.get(quota.name, 0)
    if not quota.gpus:
        return {name: 0 for name in quota.covered()}
    return {name: guaranteed if name == GPU_RESOURCE else value * guaranteed // quota.gpus
            for name, value in quota.quantities().items()}


def pool_quantities(quota: FlavorQuota, teams: tuple[Team, ...]) -> dict[str, int]:
    """What of a shared flavor no team is guaranteed: the Cohort's own quota."""
    taken = [team_quantities(quota, team) for team in teams]
    return {name: value - sum(t[name] for t in taken) for name, value in quota.quantities().items()}


def team_limits(quota: FlavorQuota, team: Team) -> dict[str, dict[str, int]]:
    """A team's borrowingLimit and lendingLimit in a shared GPU flavor by resource (absent where
    unlimited, and on a flavor without GPUs): of its GPUs, its `borrow` and `lend`; of every other
    covered resource (CPU, memory, EFA interfaces, IMEX channels) the same fraction, rounded as its
    nominal quota is (team_quantities: value x GPUs // flavor GPUs). Borrowing: what that rounding
    gives its guarantee plus borrow, less its nominal quota; lending: its nominal quota less what
    it gives the GPUs it keeps, so never above the nominal quota (Kueue's webhook refuses that)."""
    if not quota.gpus:
        return {}
    guaranteed = team.guaranteed.get(quota.name, 0)
    limits: dict[str, dict[str, int]] = {}
    for name, value in quota.quantities().items():
        def share(gpus: int, value: int = value) -> int:
            return value * gpus // quota.gpus
        limit: dict[str, int] = {}
        if team.borrow_limit is not None:
            limit["borrowingLimit"] = share(guaranteed + team.borrow_limit) - share(guaranteed)
        if team.lend_limit is not None:
            limit["lendingLimit"] = share(guaranteed) - share(guaranteed - team.lendable(quota.name))
        if limit:
            limits[name] = limit
    return limits


def team_flavor(quota: FlavorQuota, team: Team, dedicated: bool) -> dict[str, Any]:
    """A flavor of a team's ClusterQueue with its quota and limits (team_limits)."""
    resources = []
    limits = {} if dedicated else team_limits(quota, team)
    for name, value in team_quantities(quota, team).items():
        resource: dict[str, Any] = {"name": name, "nominalQuota": quantity(name, value)}
        if dedicated:
            resource["lendingLimit"] = quantity(name, 0)
        for field_name, limit in limits.get(name, {}).items():
            resource[field_name] = quantity(name, limit)
        resources.append(resource)
    return {"name": quota.name, "resources": resources}


def priority_class_manifests() -> list[dict[str, Any]]:
    """A WorkloadPriorityClass per priority class of fmcluster.facts.teams (cluster-scoped; a job
    names one with PRIORITY_CLASS_LABEL)."""
    return [{"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": {"name": p.name},
             "value": p.value, "description": p.description} for p in team_facts.PRIORITY_CLASSES]


def job_kinds_role() -> dict[str, Any]:
    """A ClusterRole aggregated into `edit` (rbac.authorization.k8s.io/aggregate-to-edit): the job
    kinds the kits submit besides Kubernetes' own (MPIJob, PyTorchJob, LeaderWorkerSet, ComputeDomain),
    which `edit` does not cover by itself; and read access to Kueue's LocalQueues and Workloads."""
    write = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": JOB_KINDS_ROLE, "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
            "rules": [{"apiGroups": ["kubeflow.org"], "resources": ["mpijobs", "pytorchjobs"], "verbs": write},
                      {"apiGroups": ["leaderworkerset.x-k8s.io"], "resources": ["leaderworkersets"], "verbs": write},
                      {"apiGroups": ["resource.nvidia.com"], "resources": ["computedomains"], "verbs": write},
                      {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues", "workloads"],
                       "verbs": ["get", "list", "watch"]}]}


def team_namespace_manifests(team: Team) -> list[dict[str, Any]]:
    """A team's Namespace and the RoleBinding of its groups (and its IAM members' group) to `edit` there."""
    namespace = team.name
    subjects = [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": group}
                for group in (*team.groups, *((team_group(team),) if team.members else ()))]
    documents: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": {TEAM_LABEL: team.name}}}]
    if subjects:
        documents.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                          "metadata": {"name": TEAM_ROLE_BINDING, "namespace": namespace},
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                      "name": TEAM_CLUSTER_ROLE},
                          "subjects": subjects})
    return documents


# Kueue's default LocalQueue (a job without a queue-name label in a namespace with a LocalQueue
# named `default` goes to it) covers the job kinds' webhooks (Job, MPIJob, Deployment,
# StatefulSet, LeaderWorkerSet, JobSet, Ray; kubernetes-sigs/kueue v0.18.3, "Setup default
# LocalQueue"), not plain Pods: a bare Pod without the label runs outside every quota. In a team's
# namespace a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA since Kubernetes 1.30,
# below every version fmcluster.facts.controlplanes offers) refuses a Pod that asks for GPUs
# (limits or requests of any container or init container) with neither the queue-name label (the
# pod integration then queues it) nor an owner (a Job, a JobSet's, an MPIJob's pods: their owner
# went through Kueue). Pods without GPUs are left alone: only the GPUs' quota is at stake.
GPU_POD_POLICY = "fmcluster-team-gpu-pods-queued"
_GPU_ASKED = (f"(has(c.resources.limits) && '{GPU_RESOURCE}' in c.resources.limits) || "
              f"(has(c.resources.requests) && '{GPU_RESOURCE}' in c.resources.requests)")
GPU_POD_RULE = (
    "(has(object.metadata.ownerReferences) && size(object.metadata.ownerReferences) > 0) || "
    f"(has(object.metadata.labels) && '{QUEUE_NAME_LABEL}' in object.metadata.labels) || "
    "!(object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : []))"
    f".exists(c, has(c.resources) && ({_GPU_ASKED}))")


def gpu_pod_policy_manifests() -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy and its Binding (GPU_POD_POLICY) over the namespaces labelled
    TEAM_LABEL: a Pod asking for GPUs there is queued by Kueue or owned by what was."""
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": GPU_POD_POLICY},
              "spec": {"failurePolicy": "Fail",
                       "matchConstraints": {
                           "namespaceSelector": {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]},
                           "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                              "resources": ["pods"]}]},
                       "validations": [{
                           "expression": GPU_POD_RULE,
                           "message": (f"a Pod asking for {GPU_RESOURCE} in a team's namespace goes through its "
                                       f"Kueue queue: label it {QUEUE_NAME_LABEL}: {TEAM_LOCAL_QUEUE}, or "
                                       "create it through a Job (or another kind Kueue queues)"),
                           "reason": "Forbidden"}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": GPU_POD_POLICY},
               "spec": {"policyName": GPU_POD_POLICY, "validationActions": ["Deny"]}}
    return [policy, binding]


def team_manifests(model: ClusterModel, quotas: Optional[list[FlavorQuota]] = None) -> list[dict[str, Any]]:
    """The teams' Kueue objects: the WorkloadPriorityClasses, the Cohort (with the pool of what no
    team is guaranteed), a ClusterQueue per team (cohort_name; only its namespace may use it), and in
    each team's namespace its LocalQueue TEAM_LOCAL_QUEUE. The namespaces themselves are
    team_namespace_manifests'."""
    if quotas is None:
        quotas = flavor_quotas(model)
    owners = dedicated_owners(model)
    cohort = cohort_name(model.spec)
    covered = list(quotas[0].covered() if quotas else COVERED_RESOURCES)
    shared = [q for q in quotas if q.name not in owners]
    cohort_spec: dict[str, Any] = {}
    if shared:
        cohort_spec["resourceGroups"] = [{"coveredResources": covered, "flavors": [
            {"name": q.name, "resources": [{"name": name, "nominalQuota": quantity(name, value)}
                                           for name, value in pool_quantities(q, model.teams).items()]}
            for q in shared]}]
    documents = [*priority_class_manifests(),
                 {"apiVersion": KUEUE_API, "kind": "Cohort", "metadata": {"name": cohort}, "spec": cohort_spec}]
    for team in model.teams:
        namespace, local_queue, cluster_queue = team_queue(team)
        flavors = [team_flavor(q, team, q.name in owners) for q in quotas
                   if q.name not in owners or owners[q.name] == team.name]
        documents.append({"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": cluster_queue},
                          "spec": {"cohortName": cohort,
                                   "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
                                   "preemption": {"withinClusterQueue": "LowerPriority",
                                                  "reclaimWithinCohort": "Any"},
                                   "resourceGroups": [{"coveredResources": covered, "flavors": flavors}]}})
        documents.append({"apiVersion": KUEUE_API, "kind": "LocalQueue",
                          "metadata": {"name": local_queue, "namespace": namespace},
                          "spec": {"clusterQueue": cluster_queue}})
    return documents
