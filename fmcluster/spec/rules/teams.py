"""Teams rules: the `teams` section fits the cluster. Names each scheduler accepts and no two
alike, guarantees in GPU node groups that exist, guarantees that fit each group, dedicated node
groups of a team that exists, members and groups in the form the control plane takes them."""

from __future__ import annotations

import re
from typing import Iterator

from fmcluster.facts import controlplanes
from fmcluster.facts import teams as team_facts
from fmcluster.spec import shares
from fmcluster.spec.diagnostics import Problem, error, warning
from fmcluster.spec.models import ClusterSpec
from fmcluster.spec.rules.registry import rule

TEAMS = ("teams",)
IAM_PRINCIPAL = re.compile(r"arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/[A-Za-z0-9+=,.@_/-]+")


def _on_kubernetes(spec: ClusterSpec) -> bool:
    return spec.orchestrator.control_plane.scheduler == "kubernetes"


@rule
def team_names(spec: ClusterSpec) -> Iterator[Problem]:
    """Each team's name is its own and none the cluster's software uses already."""
    seen: set[str] = set()
    for i, team in enumerate(spec.teams):
        if team.name in seen:
            yield error(TEAMS + (i, "name"), f"a second team named '{team.name}'", "give each team a name of its own")
        seen.add(team.name)
        if team.name in team_facts.RESERVED_TEAM_NAMES:
            yield error(TEAMS + (i, "name"), f"'{team.name}' is a name the scheduler or the cluster's software "
                        "uses already (a Slurm account or QOS, a Kubernetes namespace)",
                        "name the team after the people in it, such as pretrain or research")
        if _on_kubernetes(spec) and team.name == spec.orchestrator.namespace:
            yield error(TEAMS + (i, "name"), f"'{team.name}' is orchestrator.namespace, the namespace of the "
                        "cluster's shared queue and file-system claim", "a team gets a namespace of its own name")


@rule
def team_gpus_or_share(spec: ClusterSpec) -> Iterator[Problem]:
    """A team's guarantee is given one way: `gpus` per node group, or a `share` of every group."""
    for i, team in enumerate(spec.teams):
        if team.gpus and team.share is not None:
            yield error(TEAMS + (i, "share"), "a team has `gpus` per node group or a `share` of every group, "
                        "not both", "keep one: gpus: {GROUP: N} or share: 0.25")


@rule
def team_gpus_node_groups(spec: ClusterSpec) -> Iterator[Problem]:
    """`gpus` names shared GPU node groups of the cluster."""
    sizes, owners = shares.group_gpus(spec), shares.dedicated(spec)
    names = {g.name for g in spec.node_groups}
    shared = [g for g in sizes if g not in owners]
    for i, team in enumerate(spec.teams):
        for group in team.gpus:
            path = TEAMS + (i, "gpus", group)
            if group not in names:
                yield error(path, f"there is no node group '{group}'",
                            "a shared GPU node group of node_groups: " + (", ".join(shared) or "there is none"))
            elif group not in sizes:
                yield error(path, f"node group '{group}' has no GPUs", "guarantee GPUs in a GPU node group")
            elif group in owners and owners[group] != team.name:
                yield error(path, f"node group '{group}' is team '{owners[group]}''s alone (its `team`)",
                            "guarantee GPUs in a shared node group, or share the group")


@rule
def team_guarantees_fit(spec: ClusterSpec) -> Iterator[Problem]:
    """The guarantees in a shared GPU node group add up to at most its GPUs at its largest size:
    a guarantee the group cannot hold would be a promise broken on the first busy day."""
    sizes, owners = shares.group_gpus(spec), shares.dedicated(spec)
    promised = shares.guarantees(spec)
    for group, gpus in sizes.items():
        if group in owners:
            continue
        total = 0
        for i, team in enumerate(spec.teams):
            wanted = promised[team.name].get(group, 0)
            total += wanted
            if wanted and total > gpus:
                path = TEAMS + (i, "gpus", group) if group in team.gpus else TEAMS + (i, "share")
                others = total - wanted
                yield error(path, f"node group '{group}' has {gpus} GPUs at its largest size, and the teams up "
                            f"to '{team.name}' are guaranteed {total} of them ({others} before it, {wanted} here)",
                            "lower the guarantees, or grow the group: a team may still use more by borrowing")
                break


@rule
def node_group_team(spec: ClusterSpec) -> Iterator[Problem]:
    """A node group dedicated to a team names a team of `teams`, and has GPUs to dedicate."""
    names = [t.name for t in spec.teams]
    for i, group in enumerate(spec.node_groups):
        if group.team is None:
            continue
        if group.team not in names:
            yield error(("node_groups", i, "team"), f"there is no team '{group.team}'",
                        "a team of teams: " + (", ".join(names) or "the spec has none; add a teams section"))
        elif not group.instance.is_gpu:
            yield error(("node_groups", i, "team"), f"node group '{group.name}' ({group.instance_type}) has no "
                        "GPUs to dedicate to a team", "leave its `team` out")


@rule
def team_members_form(spec: ClusterSpec) -> Iterator[Problem]:
    """Members and groups as the control plane takes them: Linux user and group names on Slurm
    (the names its accounting associates); on Kubernetes IAM role or user ARNs (EKS access entries)
    and Kubernetes group names, which may not be Kubernetes' own system: groups."""
    kubernetes = _on_kubernetes(spec)
    for i, team in enumerate(spec.teams):
        for j, member in enumerate(team.members):
            path = TEAMS + (i, "members", j)
            if kubernetes and not IAM_PRINCIPAL.fullmatch(member):
                yield error(path, f"'{member}' is not an IAM role or user ARN, which is how a Kubernetes cluster "
                            "on EKS knows its users", "such as arn:aws:iam::111122223333:role/pretrain-engineers")
            elif not kubernetes and not re.fullmatch(team_facts.LINUX_NAME, member):
                yield error(path, f"'{member}' is not a Linux user name, which is how Slurm's accounting knows "
                            "users", "lower-case letters, digits, '_' and '-', such as alice")
        for j, group in enumerate(team.groups):
            path = TEAMS + (i, "groups", j)
            if kubernetes and group.startswith("system:"):
                yield error(path, f"'{group}' is one of Kubernetes' own groups", "name a group of your own")
            elif not kubernetes and not re.fullmatch(team_facts.LINUX_NAME, group):
                yield error(path, f"'{group}' is not a Linux group name", "such as ml-research")


@rule(warns=True)
def team_without_people(spec: ClusterSpec) -> Iterator[Problem]:
    """A team with neither members nor groups has no one who can submit to it."""
    for i, team in enumerate(spec.teams):
        if not team.members and not team.groups:
            yield warning(TEAMS + (i, "name"), f"team '{team.name}' has no members and no groups: no one can "
                          "run jobs as it", "list its members or the groups they come from")


@rule
def team_accounting_runs_somewhere(spec: ClusterSpec) -> Iterator[Problem]:
    """Teams on Slurm are Slurm accounting, which needs what it runs on: on AWS PCS, Slurm 24.11
    or later (PCS's managed accounting) and a login node (which applies the teams); on SageMaker
    HyperPod, a second Availability Zone (the accounting database's subnets span two)."""
    if not spec.teams:
        return
    plane, orchestrator = spec.orchestrator.type, spec.orchestrator
    if plane == "pcs":
        version = orchestrator.version
        since = controlplanes.PCS_SLURM_SINCE["accounting"]
        if version is not None and not controlplanes.pcs_offers("accounting", version):
            yield error(("orchestrator", "version"), f"teams need Slurm accounting, which AWS PCS offers from "
                        f"Slurm {since}, not {version}", f"version: \"{controlplanes.get('pcs').default_version}\"")
        if orchestrator.login.count == 0:
            yield error(("orchestrator", "login", "count"), "teams are applied to Slurm's accounting from a login "
                        "node, and the cluster has none", "count: 1")
    elif plane == "hyperpod-slurm" and not spec.network.extra_availability_zone_ids:
        yield error(TEAMS, "on SageMaker HyperPod the teams' Slurm accounting database (Amazon RDS) needs "
                    "private subnets in two Availability Zones, and the cluster has one",
                    "network: {extra_availability_zone_ids: [AZ-ID]}, another AZ ID of the region")
