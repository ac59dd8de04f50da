"""The GPUs each team is guaranteed in each GPU node group, worked out once from the spec: what
the teams rules check (that the guarantees fit) and the model resolves (its Team objects).

A node group dedicated to a team (`node_groups[].team`) is all that team's and nobody else's.
The other GPU node groups are shared: a team's `gpus` names its GPUs in some of them, its `share`
is a fraction of each (rounded down to whole GPUs), and a team with neither is guaranteed none
(it runs on what others leave idle, if it may borrow).
"""

from __future__ import annotations

import math

from fmcluster.spec.models import ClusterSpec, TeamSpec


def group_gpus(spec: ClusterSpec) -> dict[str, int]:
    """GPU node group -> its GPUs at its largest size, in the spec's order."""
    return {g.name: g.max_nodes * g.instance.gpu_count for g in spec.node_groups if g.instance.is_gpu}


def dedicated(spec: ClusterSpec) -> dict[str, str]:
    """GPU node group -> the team it is dedicated to (only the groups that name a team of the spec)."""
    names = {t.name for t in spec.teams}
    return {g.name: g.team for g in spec.node_groups if g.team in names and g.instance.is_gpu}


def team_guarantee(spec: ClusterSpec, team: TeamSpec) -> dict[str, int]:
    """GPU node group -> the GPUs `team` is guaranteed there, for every GPU node group (0 where
    none). Names of groups that do not exist or have no GPUs are left out (a rule reports them)."""
    sizes, owners = group_gpus(spec), dedicated(spec)
    guaranteed = {}
    for group, gpus in sizes.items():
        owner = owners.get(group)
        if owner is not None:
            guaranteed[group] = gpus if owner == team.name else 0
        elif group in team.gpus:
            guaranteed[group] = team.gpus[group]
        elif team.share is not None:
            guaranteed[group] = math.floor(team.share * gpus)
        else:
            guaranteed[group] = 0
    return guaranteed


def guarantees(spec: ClusterSpec) -> dict[str, dict[str, int]]:
    """Team -> GPU node group -> guaranteed GPUs, for every team, in the spec's order."""
    return {team.name: team_guarantee(spec, team) for team in spec.teams}
