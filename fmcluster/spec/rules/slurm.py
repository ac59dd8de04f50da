"""Slurm control planes: AWS PCS's hard limits and names, and Slurm's own partition names.

(The PCS cluster size ceiling is `orchestrator.pcs_size_limit`; HyperPod's limits are in
`fmcluster.spec.rules.hyperpod`.)
"""

from __future__ import annotations

from typing import Iterator

from fmcluster.facts import controlplanes
from fmcluster.facts.controlplanes import PCS_MAX_COMPUTE_NODE_GROUPS, PCS_NAME_MIN
from fmcluster.spec.diagnostics import Problem, error
from fmcluster.spec.models import ClusterSpec
from fmcluster.spec.rules.registry import rule


def _pcs(spec: ClusterSpec) -> bool:
    return spec.orchestrator.type == "pcs"


@rule
def pcs_node_group_limit(spec: ClusterSpec) -> Iterator[Problem]:
    """Every spec node group is a PCS compute node group and a queue; the login nodes are one
    more compute node group (without a queue). So the queue limit (as many) is never the one
    that is reached first."""
    if not _pcs(spec):
        return
    login = 1 if spec.orchestrator.login.count else 0
    groups = len(spec.node_groups) + login
    if groups > PCS_MAX_COMPUTE_NODE_GROUPS:
        first_over = PCS_MAX_COMPUTE_NODE_GROUPS - login
        made = f"{len(spec.node_groups)} node groups" + (" and the login group" if login else "")
        yield error(("node_groups", first_over),
                    f"AWS PCS allows at most {PCS_MAX_COMPUTE_NODE_GROUPS} compute node groups per cluster "
                    f"(not adjustable); this spec makes {groups} ({made})",
                    "merge node groups of one instance type, or split the cluster in two")


@rule
def pcs_names(spec: ClusterSpec) -> Iterator[Problem]:
    """PCS names: the cluster (`ClusterName`), each compute node group and queue (the node
    group's name): at least 3 characters."""
    if not _pcs(spec):
        return
    if len(spec.name) < PCS_NAME_MIN:
        yield error(("name",), f"AWS PCS cluster names are at least {PCS_NAME_MIN} characters; '{spec.name}' "
                    f"has {len(spec.name)}")
    for i, group in enumerate(spec.node_groups):
        if len(group.name) < PCS_NAME_MIN:
            yield error(("node_groups", i, "name"),
                        f"the group's name is its PCS compute node group's and queue's: at least {PCS_NAME_MIN} "
                        f"characters, not {len(group.name)}", "such as gpu or p5")


@rule
def slurm_partition_names(spec: ClusterSpec) -> Iterator[Problem]:
    """A node group's name is its Slurm partition's (PCS queue, HyperPod partition)."""
    if spec.orchestrator.control_plane.scheduler != "slurm":
        return
    for i, group in enumerate(spec.node_groups):
        if group.name.lower() in controlplanes.SLURM_RESERVED_PARTITION_NAMES:
            yield error(("node_groups", i, "name"),
                        f"'{group.name}' names Slurm's defaults record (PartitionName=DEFAULT), not a partition",
                        "choose another name, such as gpu")
