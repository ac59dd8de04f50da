"""Kubernetes names fmcluster gives its nodes: node labels and taints, the tolerations of
them, and the rules of label keys and values. Facts the spec's rules, the model, the node
scripts and the charts share."""

from __future__ import annotations

import re
from typing import Optional

LABEL_PREFIX = "fmcluster.dev/"
NODE_GROUP_LABEL = LABEL_PREFIX + "node-group"  # every node: the name of its node group
GPU_LABEL = "nvidia.com/gpu.present"  # GPU nodes; the AL2023 NVIDIA AMI sets it too
EFA_LABEL = "vpc.amazonaws.com/efa.present"  # nodes with EFA interfaces
TRUE = "true"
GPU_TAINT_KEY = "nvidia.com/gpu"  # GPU nodes are tainted NoSchedule: only pods that ask may land
GPU_TAINT_EFFECT = "NoSchedule"

# Label domains a node group's own labels may not use: kubelet may not set labels of the
# kubernetes.io and k8s.io domains (NodeRestriction), and fmcluster.dev labels and the GPU and
# EFA labels fmcluster sets itself.
RESERVED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io", LABEL_PREFIX.rstrip("/"))
RESERVED_LABELS = (GPU_LABEL, EFA_LABEL)
SYSTEM_NODE_GROUP = "system"  # the node group of orchestrator.login: CoreDNS, Kueue, add-on controllers
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def label_value_valid(value: str) -> bool:
    """A Kubernetes label value: empty, or up to 63 alphanumerics, '-', '_', '.', starting and
    ending with an alphanumeric."""
    return value == "" or bool(_LABEL_NAME.fullmatch(value))


def label_key_problem(key: str) -> Optional[str]:
    """Why `key` is not a valid Kubernetes label key (optional DNS-subdomain prefix, '/', name),
    or None."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return f"the prefix '{prefix}' is not a DNS subdomain"
    if not _LABEL_NAME.fullmatch(name):
        return f"the name '{name}' is not 1 to 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric"
    return None


def object_name_valid(value: str) -> bool:
    """A Kubernetes object name: a DNS subdomain of at most 253 characters."""
    return len(value) <= 253 and bool(_DNS_SUBDOMAIN.fullmatch(value))


def label_reserved(key: str) -> bool:
    """A label key fmcluster or Kubernetes reserves (its domain, or a subdomain of it)."""
    prefix = key.rpartition("/")[0]
    return key in RESERVED_LABELS or any(prefix == d or prefix.endswith("." + d) for d in RESERVED_LABEL_DOMAINS)


# The labels and taints of each node group are derived once, in fmcluster.model.cluster (NodeGroup.labels
# and .taints), from the names above.


GPU_TOLERATION = {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": GPU_TAINT_EFFECT}

# A node whose readiness check fails at boot (GPUs missing, LNet without EFA) registers with this
# taint (bootstrap/gate-kubelet.sh): no job lands there; the exporters tolerate it.
NOT_READY_TAINT = LABEL_PREFIX + "not-ready"
NOT_READY_TOLERATION = {"key": NOT_READY_TAINT, "operator": "Exists", "effect": "NoSchedule"}

# The end of a group's Capacity Block or training plan (fmcluster/kubernetes/capacity_end.py): its nodes
# and its Kueue ResourceFlavor get this taint (value: the group, NoSchedule), and the Kueue workloads
# requeued from there this label (value: the group) until they are reactivated.
CAPACITY_END_TAINT = LABEL_PREFIX + "capacity-end"


def system_node_selector() -> dict[str, str]:
    """A nodeSelector for the system nodes (the `system` node group's NODE_GROUP_LABEL)."""
    return {NODE_GROUP_LABEL: SYSTEM_NODE_GROUP}
