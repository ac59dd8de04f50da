"""The end of a node group's reserved capacity on the Kubernetes planes: which groups fmcluster handles
it for, when their pods get the signal, and what the function that does it may do in the cluster
(fmcluster_cdk/constructs/compute/capacity_end.py, its handler handlers/capacity_end).

The model is the Slurm side's (fmcluster/node/scripts/boot/programs/capacity-end.sh): the nodes
leave at a known time before the end (`leave_minutes`), and `capacity.end_signal_minutes` before
that (`signal_minutes` before the end) the running pods get their signal with time to checkpoint,
nothing new starts there, and the work is requeued; an extension moves it all back.

- `eks`, a group on a Capacity Block (NodeGroup.follows_block): the CapacityBlockScaler scales the
  managed node group to 0 `drain_minutes` before the end (45; 75 for an UltraServer block), before EC2
  terminates the instances (30; 60). The scale-in drains each node itself, but waits at most 5
  minutes for it before the instance is terminated (Amazon EKS User Guide, "Delete a managed node
  group": SIGTERM, terminationGracePeriodSeconds, "If the node hasn't been drained after 5 minutes,
  Amazon EKS lets Auto Scaling continue the forced termination"), and does not touch Kueue: the
  signal comes first, `end_signal_minutes` before the scale-in.
- `hyperpod-eks`, a group on a SageMaker training plan: SageMaker terminates its instances
  from termination_minutes (fmcluster.facts.controlplanes: 30, 60 for UltraServers) before the end of
  the plan's reserved capacity of their type
  (the end the Slurm nodes read too); fmcluster does not scale them.

Sources and details: docs/research-notes.md, "fmcluster/kubernetes/capacity_end.py"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from fmcluster.facts.controlplanes import (
    CAPACITY_BLOCK,
    termination_minutes,
)
from fmcluster.facts.kubernetes import CAPACITY_END_TAINT, NODE_GROUP_LABEL
from fmcluster.model.cluster import ClusterModel, NodeGroup

KUBERNETES_GROUP = "fmcluster:capacity-end"  # the functions' access entries put their roles in it
CLUSTER_ROLE = "fmcluster-capacity-end"
RBAC_API = "rbac.authorization.k8s.io/v1"
# Kueue's label of a job's declared run time, in seconds (v0.18.3 pkg/controller/constants/constants.go:59):
# its workload's spec.maximumExecutionTimeSeconds, after which Kueue deactivates it; a job that declares
# it is held back from a group whose capacity's end signal comes sooner (handlers/capacity_end)
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"


@dataclass(frozen=True)
class KubernetesEnd:
    """The end of one group's capacity, handled in the cluster: the Capacity Block
    (`reservation_id`) or training plan (`training_plan_arn`) it ends with; its nodes leave
    `leave_minutes` before the end, and the signal comes `end_signal_minutes` before that."""

    group: str  # the node group: its nodes' NODE_GROUP_LABEL, its Kueue ResourceFlavor, the taint's value
    reservation_id: str  # cr-...; "" for a training plan
    training_plan_arn: str  # "" for a Capacity Block
    leave_minutes: int
    end_signal_minutes: int
    plan_instance_type: str = ""  # a training plan's: the group's instance type as the plan names it

    @property
    def signal_minutes(self) -> int:
        """How long before the end the signal comes."""
        return self.leave_minutes + self.end_signal_minutes

    @property
    def flavor(self) -> str:
        return self.group  # fmcluster.kubernetes.kueue.flavors: a flavor per group, of its name


def kubernetes_end(model: ClusterModel, group: NodeGroup) -> Optional[KubernetesEnd]:
    """How the end of a group's capacity is handled in its Kubernetes cluster; None where it is not:
    a Slurm plane (its nodes do it), or no Capacity Block or training plan."""
    cp, capacity = model.control_plane, group.capacity
    if cp.scheduler != "kubernetes":
        return None
    if cp.hyperpod and capacity.training_plan_arn:
        return KubernetesEnd(group.name, "", capacity.training_plan_arn,
                             termination_minutes(True, bool(capacity.ultraserver_type)),
                             capacity.end_signal_minutes, group.sagemaker_instance_type)
    if not cp.hyperpod and group.follows_block and capacity.type == CAPACITY_BLOCK:
        return KubernetesEnd(group.name, str(capacity.reservation_id), "", group.drain_minutes,
                             capacity.end_signal_minutes)
    return None


def kubernetes_ends(model: ClusterModel) -> list[KubernetesEnd]:
    """The groups of the model whose end is handled in the cluster, in the spec's order."""
    return [end for end in (kubernetes_end(model, g) for g in model.node_groups) if end is not None]


def with_kubernetes_ends(model: ClusterModel) -> bool:
    return bool(kubernetes_ends(model))


def rbac_manifests(model: ClusterModel) -> list[dict[str, Any]]:
    """The ClusterRole of KUBERNETES_GROUP and its binding: list and taint nodes (by name: the
    group's are found by label), list pods and evict them (the Eviction subresource), list Kueue
    workloads and patch them (spec.active, the label), and read and patch the groups' own
    ResourceFlavors (spec.nodeTaints) and no other. Nothing may be deleted, created (but an
    Eviction) or read in full beyond those."""
    flavors = [end.flavor for end in kubernetes_ends(model)]
    if not flavors:
        return []
    rules = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]},
             {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
             {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
             {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list", "patch"]},
             {"apiGroups": ["kueue.x-k8s.io"], "resources": ["resourceflavors"], "resourceNames": flavors,
              "verbs": ["get", "patch"]}]
    return [{"apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": {"name": CLUSTER_ROLE}, "rules": rules},
            {"apiVersion": RBAC_API, "kind": "ClusterRoleBinding", "metadata": {"name": CLUSTER_ROLE},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLE},
             "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": KUBERNETES_GROUP}]}]


def at_end(model: ClusterModel, group: NodeGroup) -> Optional[str]:
    """What happens in the cluster at the end of a group's capacity, where fmcluster handles it (the
    plan's "at its end"); None elsewhere."""
    end = kubernetes_end(model, group)
    if end is None:
        return None
    done = ("the group's nodes are tainted so that nothing new lands there, Kueue admits nothing more onto its "
            "flavor, the workloads admitted there are requeued and the other pods evicted, each pod getting "
            "SIGTERM and its terminationGracePeriodSeconds to checkpoint; before that, a job Kueue admits there "
            f"whose declared run time (label {MAX_EXEC_TIME_LABEL}) would reach past that time is held back until "
            "then or an extension")
    if end.training_plan_arn:
        return (f"SageMaker terminates the training plan's instances from {end.leave_minutes} minutes before the end "
                f"of its reserved capacity; {end.end_signal_minutes} minutes before that ({end.signal_minutes} "
                f"minutes before the end) {done}. An extension undoes it; fmcluster does not scale the instance "
                "group")
    terminated = termination_minutes(False, bool(group.capacity.ultraserver_type))
    return (f"the CapacityBlockScaler scales the node group to 0 from {end.leave_minutes} minutes before the end, "
            f"and {end.end_signal_minutes} minutes before that ({end.signal_minutes} minutes before the end) {done}; "
            f"EKS drains what is left as the group scales in, and EC2 terminates the instances from {terminated} "
            "minutes before the end. An extension undoes it")


def handler_settings(end: KubernetesEnd) -> dict[str, Any]:
    """The KubernetesCapacityEnd construct's props that the end itself gives (the stacks add the
    cluster's)."""
    return {"group": end.group, "flavor": end.flavor, "node_label": NODE_GROUP_LABEL,
            "taint_key": CAPACITY_END_TAINT, "signal_minutes": end.signal_minutes,
            "kubernetes_group": KUBERNETES_GROUP, "reservation_id": end.reservation_id or None,
            "training_plan_arn": end.training_plan_arn or None, "plan_instance_type": end.plan_instance_type or None}
