"""Kubernetes rules: names and labels valid in Kubernetes, system nodes and cluster access on EKS.

(The AZ count and the Kubernetes version are checked for every control plane by
`fmcluster.spec.rules.orchestrator`.)
"""

from __future__ import annotations

from typing import Iterator

from fmcluster.facts import kubernetes
from fmcluster.facts.controlplanes import KUEUE_MAX_FLAVORS
from fmcluster.spec.diagnostics import Problem, error, warning
from fmcluster.spec.models import ClusterSpec, is_everyone
from fmcluster.spec.rules.registry import rule


def _on_kubernetes(spec: ClusterSpec) -> bool:
    return spec.orchestrator.control_plane.scheduler == "kubernetes"


@rule
def node_group_names_are_label_values(spec: ClusterSpec) -> Iterator[Problem]:
    """A node group's name is the value of its nodes' node-group label and names its Kueue flavor.
    (On HyperPod EKS the stricter instance-group name rule reports it.)"""
    if not _on_kubernetes(spec) or spec.orchestrator.control_plane.hyperpod:
        return
    for i, group in enumerate(spec.node_groups):
        if not kubernetes.label_value_valid(group.name):
            yield error(("node_groups", i, "name"), f"'{group.name}' is not a valid Kubernetes label value",
                        "end the name with a letter or digit")


@rule
def node_labels_valid(spec: ClusterSpec) -> Iterator[Problem]:
    if not any(group.labels for group in spec.node_groups):
        return
    for i, group in enumerate(spec.node_groups):
        for key, value in group.labels.items():
            path = ("node_groups", i, "labels", key)
            problem = kubernetes.label_key_problem(key)
            if problem:
                yield error(path, f"'{key}' is not a valid Kubernetes label key: {problem}", at_key=True)
            elif kubernetes.label_reserved(key):
                yield error(path, f"label '{key}' is reserved", "kubelet may not set kubernetes.io and k8s.io "
                            "labels, and fmcluster sets fmcluster.dev/ and the GPU and EFA labels itself", at_key=True)
            if not kubernetes.label_value_valid(value):
                yield error(path, f"'{value}' is not a valid Kubernetes label value",
                            "at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit")


EKS_LABEL_KEY_MAX = 63  # the EKS API's labelKey: 1 to 63 characters, its prefix included (botocore's model)


@rule
def eks_label_keys_fit(spec: ClusterSpec) -> Iterator[Problem]:
    """An EKS managed node group takes label keys of at most 63 characters with the prefix,
    where Kubernetes allows a 253-character prefix."""
    if spec.orchestrator.type != "eks":
        return
    for i, group in enumerate(spec.node_groups):
        for key in group.labels:
            if len(key) > EKS_LABEL_KEY_MAX:
                yield error(("node_groups", i, "labels", key),
                            f"EKS takes label keys of at most {EKS_LABEL_KEY_MAX} characters, prefix included; "
                            f"this one has {len(key)}", "shorten the prefix or the name", at_key=True)


@rule(warns=True)
def node_labels_only_on_kubernetes(spec: ClusterSpec) -> Iterator[Problem]:
    if _on_kubernetes(spec):
        return
    for i, group in enumerate(spec.node_groups):
        if group.labels:
            yield warning(("node_groups", i, "labels"),
                          f"labels are used only by Kubernetes control planes, not {spec.orchestrator.type}")


@rule
def eks_has_system_nodes(spec: ClusterSpec) -> Iterator[Problem]:
    """CoreDNS, Kueue and the add-on controllers run on the system nodes (GPU nodes are tainted),
    on EKS and on HyperPod EKS alike (its system nodes are an EKS managed node group)."""
    if _on_kubernetes(spec) and spec.orchestrator.login.count < 1:
        what = "a HyperPod EKS" if spec.orchestrator.control_plane.hyperpod else "an EKS"
        yield error(("orchestrator", "login", "count"), f"{what} cluster needs at least one system node",
                    "CoreDNS, Kueue and the add-on controllers run there; 2 keep them available during a node repair")


@rule(warns=True)
def eks_admin_role(spec: ClusterSpec) -> Iterator[Problem]:
    if spec.orchestrator.type == "eks" and not spec.orchestrator.admin_role_arn:
        yield warning(("orchestrator",), "no admin_role_arn: nobody can reach the Kubernetes API of this cluster "
                      "(the deploying role gets no access)",
                      "set orchestrator.admin_role_arn to the IAM role your team assumes, such as "
                      "arn:aws:iam::111122223333:role/MlPlatformAdmin")


@rule(warns=True)
def api_endpoint_open(spec: ClusterSpec) -> Iterator[Problem]:
    """The EKS API endpoint (eks and hyperpod-eks) public to every address: anyone on the internet
    can knock on the API server (it still authenticates every request)."""
    orch = spec.orchestrator
    if not _on_kubernetes(spec) or orch.endpoint_access == "private":
        return
    for i, cidr in enumerate(orch.public_access_cidrs):
        if is_everyone(cidr):
            where = ("orchestrator", "public_access_cidrs", i) if "public_access_cidrs" in orch.model_fields_set \
                else ("orchestrator",)
            yield warning(where, "the Kubernetes API endpoint is public to the whole internet (0.0.0.0/0)",
                          "list the addresses that need it in orchestrator.public_access_cidrs (your office's or "
                          "VPN's, such as 203.0.113.0/24), or set orchestrator.endpoint_access: private")
            return


@rule
def kueue_flavor_limit(spec: ClusterSpec) -> Iterator[Problem]:
    """Each node group is a Kueue ResourceFlavor in the cluster queue's one resource group."""
    if _on_kubernetes(spec) and len(spec.node_groups) > KUEUE_MAX_FLAVORS:
        yield error(("node_groups", KUEUE_MAX_FLAVORS),
                    f"{len(spec.node_groups)} node groups; Kueue takes at most {KUEUE_MAX_FLAVORS} flavors in a "
                    "cluster queue's resource group, and each node group is one",
                    "merge node groups of one instance type")
