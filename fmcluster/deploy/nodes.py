"""The nodes of a deployed cluster that are up, found through the APIs each control plane has:
what `fmcluster destroy` will not delete NAME-cluster under unless told (`--force`), since deleting
it ends whatever runs on them. Read-only.

- Every plane: the EC2 instances tagged `fmcluster:cluster=NAME`, pending or running (the launch
  templates tag every instance they launch, the group in `fmcluster:node-group`).
- AWS PCS: the cluster named NAME (ListClusters), its compute node groups (ListComputeNodeGroups),
  and the EC2 instances PCS tagged with one of their ids (`aws:pcs:compute-node-group-id`, the
  tag docs/guides/pcs.md finds the login node by).
- Amazon EKS (`eks`, `hyperpod-eks`): the cluster named NAME (ListClusters), its managed node
  groups (ListNodegroups, DescribeNodegroup: the group's `fmcluster:node-group` tag), and the
  EC2 instances EKS tagged `eks:cluster-name=NAME` (their group in `eks:nodegroup-name`).
- SageMaker HyperPod: the nodes of the cluster named NAME (ListClusterNodes); its instances live
  in an account of the service's, not in EC2's answers.

The control plane's own nodes (login, system, the HyperPod Slurm controller) are always up while
the cluster is: they are named, never a reason to refuse. Jobs are not visible through these APIs;
a compute node that is up is what may be running one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from fmcluster.facts import naming
from fmcluster.model import cluster as model

Clients = Callable[[str], Any]
UP = ["pending", "running"]  # EC2 instance states of a node that is up
PCS_GROUP_TAG = "aws:pcs:compute-node-group-id"
EKS_CLUSTER_TAG, EKS_GROUP_TAG = "eks:cluster-name", "eks:nodegroup-name"
HYPERPOD_GONE = ("ShuttingDown",)  # a HyperPod node's InstanceStatus.Status on its way out


@dataclass(frozen=True)
class Node:
    group: str  # the node group's name (as the spec names it), or "?" where no tag says
    instance_id: str
    state: str
    compute: bool  # a compute group's (jobs run there); False: the control plane's own


def _instances(clients: Clients, filters: list[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    pages = clients("ec2").get_paginator("describe_instances").paginate(
        Filters=[*filters, {"Name": "instance-state-name", "Values": UP}])
    for page in pages:
        for reservation in page.get("Reservations", []):
            yield from reservation.get("Instances", [])


def _tags(instance: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags", [])}


def _pages(client: Any, call: str, key: str, token: str, **kwargs: Any) -> Iterable[Any]:
    """Every item of a list call paged by `token` (nextToken, NextToken)."""
    while True:
        page = getattr(client, call)(**kwargs)
        yield from page.get(key, [])
        if not page.get(token):
            return
        kwargs[token] = page[token]


def _tagged(clients: Clients, name: str) -> dict[str, tuple[str, str]]:
    return {i["InstanceId"]: (_tags(i).get(naming.NODE_GROUP_TAG, "?"), i["State"]["Name"])
            for i in _instances(clients, [{"Name": f"tag:{naming.CLUSTER_TAG}", "Values": [name]}])}


def _pcs(clients: Clients, name: str) -> dict[str, tuple[str, str]]:
    pcs = clients("pcs")
    cluster = next((c for c in _pages(pcs, "list_clusters", "clusters", "nextToken") if c.get("name") == name), None)
    if cluster is None:
        return {}
    groups = {g["id"]: g.get("name", "?") for g in _pages(pcs, "list_compute_node_groups", "computeNodeGroups",
                                                           "nextToken", clusterIdentifier=cluster["id"])}
    if not groups:
        return {}
    return {i["InstanceId"]: (groups.get(_tags(i).get(PCS_GROUP_TAG, ""), "?"), i["State"]["Name"])
            for i in _instances(clients, [{"Name": f"tag:{PCS_GROUP_TAG}", "Values": sorted(groups)}])}


def _eks(clients: Clients, name: str) -> dict[str, tuple[str, str]]:
    eks = clients("eks")
    if not any(found == name for found in _pages(eks, "list_clusters", "clusters", "nextToken")):
        return {}
    groups = {}
    for group in _pages(eks, "list_nodegroups", "nodegroups", "nextToken", clusterName=name):
        tags = eks.describe_nodegroup(clusterName=name, nodegroupName=group)["nodegroup"].get("tags") or {}
        groups[group] = tags.get(naming.NODE_GROUP_TAG, group)
    return {i["InstanceId"]: (groups.get(_tags(i).get(EKS_GROUP_TAG, ""), "?"), i["State"]["Name"])
            for i in _instances(clients, [{"Name": f"tag:{EKS_CLUSTER_TAG}", "Values": [name]}])}


def _hyperpod(clients: Clients, name: str) -> dict[str, tuple[str, str]]:
    sagemaker = clients("sagemaker")
    summaries = _pages(sagemaker, "list_clusters", "ClusterSummaries", "NextToken", NameContains=name)
    if not any(c.get("ClusterName") == name for c in summaries):
        return {}
    found = {}
    for node in _pages(sagemaker, "list_cluster_nodes", "ClusterNodeSummaries", "NextToken", ClusterName=name):
        state = node.get("InstanceStatus", {}).get("Status", "?")
        if state not in HYPERPOD_GONE:
            found[node["InstanceId"]] = (node.get("InstanceGroupName", "?"), state)
    return found


PLANES: dict[str, tuple[Callable[[Clients, str], dict[str, tuple[str, str]]], ...]] = {
    "pcs": (_pcs,),
    "eks": (_eks,),
    "hyperpod-slurm": (_hyperpod,),
    "hyperpod-eks": (_hyperpod, _eks),
}


def up(m: model.ClusterModel, clients: Clients) -> tuple[Node, ...]:
    """The cluster's nodes that are up, compute groups' first (botocore's errors when a plane
    cannot be read)."""
    found = _tagged(clients, m.name)
    for finder in PLANES.get(m.control_plane.type, ()):
        for instance, seen in finder(clients, m.name).items():
            if found.get(instance, ("?",))[0] == "?":
                found[instance] = seen
    own = {g.name for g in m.all_groups if g.role != model.COMPUTE}
    nodes = [Node(group, instance, state, group not in own) for instance, (group, state) in found.items()]
    return tuple(sorted(nodes, key=lambda n: (not n.compute, n.group, n.instance_id)))
