"""Kueue where teams share the cluster: a Cohort, a ClusterQueue per team with its guarantee as
nominal quota and its borrowing and lending limits, the WorkloadPriorityClasses, and per team a
Namespace, its LocalQueue and RoleBinding, and the policy that keeps GPU pods in the queues."""

from __future__ import annotations

from typing import Any, Optional

from fmcluster.facts import teams as team_facts
from fmcluster.facts.kubernetes import LABEL_PREFIX
from fmcluster.kubernetes.kueue.config import KUEUE_API
from fmcluster.kubernetes.kueue.flavors import (
    COVERED_RESOURCES,
    GPU_RESOURCE,
    QUEUE_NAME_LABEL,
    FlavorQuota,
    flavor_quotas,
    quantity,
)
from fmcluster.model.cluster import ClusterModel
from fmcluster.model.teams import Team
from fmcluster.spec.models import ClusterSpec

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
