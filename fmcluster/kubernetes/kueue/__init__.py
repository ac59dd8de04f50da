"""Kueue on a Kubernetes cluster: its controller Configuration and chart values (`config`), a
ResourceFlavor per node group with its quota (`flavors`), the ClusterQueue and LocalQueue
(`queues`), and the Topologies that place the flavors (`topology`: the NVLink domains of
UltraServer groups, the EC2 network's layers of every other multi-node EFA GPU group). Where teams
share the cluster (`teams`): a Cohort, a ClusterQueue per team with its guarantee as nominal quota,
the WorkloadPriorityClasses, and per team a Namespace, its LocalQueue and RoleBinding.

The package imports the model and the layers below it; its modules import one another directly.
This module re-exports their public names, for `from fmcluster.kubernetes import kueue`.

Sources and details: docs/research-notes.md, "fmcluster/kubernetes/kueue/"."""

from fmcluster.kubernetes.kueue.config import (
    COMPUTE_DOMAIN_CHANNEL_CLASS,
    FAIR_SHARING_STRATEGIES,
    IMEX_CHANNEL_RESOURCE,
    KUEUE_API,
    KUEUE_CHART_FRAMEWORKS,
    KUEUE_CONFIG_API,
    kueue_chart_configuration,
    kueue_configuration,
    kueue_values,
)
from fmcluster.kubernetes.kueue.flavors import (
    COVERED_RESOURCES,
    EFA_RESOURCE,
    GPU_RESOURCE,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    FlavorQuota,
    channel_quota,
    flavor_labels,
    flavor_manifests,
    flavor_placement,
    flavor_quotas,
    flavor_tolerations,
    quantity,
    total_gpus,
)
from fmcluster.kubernetes.kueue.queues import job_queue, kueue_manifests, queue_names
from fmcluster.kubernetes.kueue.teams import (
    GPU_POD_POLICY,
    GPU_POD_RULE,
    JOB_KINDS_ROLE,
    NAMESPACE_NAME_LABEL,
    TEAM_CLUSTER_ROLE,
    TEAM_LABEL,
    TEAM_LOCAL_QUEUE,
    TEAM_ROLE_BINDING,
    cohort_name,
    dedicated_owners,
    gpu_pod_policy_manifests,
    job_kinds_role,
    pool_quantities,
    priority_class_manifests,
    team_flavor,
    team_group,
    team_limits,
    team_manifests,
    team_namespace_manifests,
    team_namespaces,
    team_quantities,
    team_queue,
)
from fmcluster.kubernetes.kueue.topology import (
    HOSTNAME_LABEL,
    NETWORK_LAYER_LABEL,
    NETWORK_TOPOLOGY,
    NVLINK_CLIQUE_LABEL,
    NVLINK_TOPOLOGY,
    NVLINK_TOPOLOGY_LEVELS,
    PREFERRED_TOPOLOGY_ANNOTATION,
    REQUIRED_TOPOLOGY_ANNOTATION,
    group_placement,
    group_topology,
    network_layer_label,
    network_placed,
    network_topology_name,
    topology_levels,
    topology_manifest,
    topology_manifests,
    topology_request,
)

__all__ = [
    "COMPUTE_DOMAIN_CHANNEL_CLASS", "COVERED_RESOURCES", "EFA_RESOURCE", "FAIR_SHARING_STRATEGIES",
    "GPU_POD_POLICY", "GPU_POD_RULE", "GPU_RESOURCE", "HOSTNAME_LABEL", "IMEX_CHANNEL_RESOURCE", "JOB_KINDS_ROLE",
    "KUEUE_API", "KUEUE_CHART_FRAMEWORKS", "KUEUE_CONFIG_API", "NAMESPACE_NAME_LABEL", "NETWORK_LAYER_LABEL",
    "NETWORK_TOPOLOGY", "NVLINK_CLIQUE_LABEL", "NVLINK_TOPOLOGY", "NVLINK_TOPOLOGY_LEVELS",
    "PREFERRED_TOPOLOGY_ANNOTATION", "PRIORITY_CLASS_LABEL", "QUEUE_NAME_LABEL", "REQUIRED_TOPOLOGY_ANNOTATION",
    "TEAM_CLUSTER_ROLE", "TEAM_LABEL", "TEAM_LOCAL_QUEUE", "TEAM_ROLE_BINDING", "FlavorQuota", "channel_quota",
    "cohort_name", "dedicated_owners", "flavor_labels", "flavor_manifests", "flavor_placement", "flavor_quotas",
    "flavor_tolerations", "gpu_pod_policy_manifests", "group_placement", "group_topology", "job_kinds_role",
    "job_queue", "kueue_chart_configuration", "kueue_configuration", "kueue_manifests", "kueue_values",
    "network_layer_label", "network_placed", "network_topology_name", "pool_quantities",
    "priority_class_manifests", "quantity", "queue_names", "team_flavor", "team_group", "team_limits",
    "team_manifests", "team_namespace_manifests", "team_namespaces", "team_quantities", "team_queue",
    "topology_levels", "topology_manifest", "topology_manifests", "topology_request", "total_gpus"
]
