"""Kueue's queues: the ClusterQueue and LocalQueue of a cluster without teams, the queue a kit's job
goes to, and every Kueue object of a cluster (kueue_manifests)."""

from __future__ import annotations

from typing import Any, Optional

from fmcluster.kubernetes.kueue.config import KUEUE_API
from fmcluster.kubernetes.kueue.flavors import COVERED_RESOURCES, flavor_manifests, flavor_quotas
from fmcluster.kubernetes.kueue.teams import team_manifests, team_queue
from fmcluster.kubernetes.kueue.topology import topology_manifests
from fmcluster.model.cluster import ClusterModel
from fmcluster.model.teams import Team
from fmcluster.spec.models import ClusterSpec


def queue_names(spec: ClusterSpec) -> tuple[str, str]:
    """(ClusterQueue, LocalQueue) of a cluster without teams: both named after the cluster."""
    return spec.name, spec.name


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

