"""Teams rules: the `teams` section fits the cluster. Names each scheduler accepts and no two
alike, guarantees in GPU node groups that exist, guarantees that fit each group, borrowing and
lending that fit a shared group, numbers Slurm's accounting holds, dedicated node groups of a team
that exists, members and groups in the form the control plane takes them."""

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
    """The guarantees in a shared GPU node group add up to at most its GPUs at its largest size,
    and a team's `gpus` in a group dedicated to it are at most the group's: a guarantee the group
    cannot hold would be a promise broken on the first busy day (in a dedicated group, one the plan
    would cut to the group's GPUs without a word)."""
    sizes, owners = shares.group_gpus(spec), shares.dedicated(spec)
    promised = shares.guarantees(spec)
    for group, gpus in sizes.items():
        if group in owners:
            for i, team in enumerate(spec.teams):
                if team.name == owners[group] and team.gpus.get(group, 0) > gpus:
                    yield error(TEAMS + (i, "gpus", group), f"node group '{group}' is team '{team.name}''s alone "
                                f"and has {gpus} GPUs at its largest size: all of them are its guarantee, not "
                                f"{team.gpus[group]}", f"leave '{group}' out of `gpus` (a dedicated group's GPUs are "
                                "all its team's), or grow the group")
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


def _shared_extreme(sizes: dict[str, int], owners: dict[str, str], guaranteed: dict[str, int],
                    measure: str) -> tuple[int, str]:
    """Over the shared GPU node groups, the most GPUs a team could borrow beyond its guarantee in
    one (`measure` "borrow": the group's GPUs less its guarantee) or lend of one ("lend": its
    guarantee), and the group that gives it, in words; (0, "") where no group is shared."""
    best, where = 0, ""
    for group, gpus in sizes.items():
        if group in owners:
            continue
        mine = guaranteed.get(group, 0)
        figure = gpus - mine if measure == "borrow" else mine
        if not where or figure > best:
            best, where = figure, f"node group '{group}': {gpus} GPUs at its largest size, {mine} guaranteed to it"
    return best, where


@rule
def team_borrow_lend_fit(spec: ClusterSpec) -> Iterator[Problem]:
    """A number of GPUs a team may `borrow` or `lend` per node group fits a shared node group: at
    most a group's GPUs beyond its guarantee there, at most its guarantee there. A larger number
    says no more than `true`, and the schedulers would be handed it (Kueue's borrowingLimit) or
    cut it to the group without a word."""
    sizes, owners = shares.group_gpus(spec), shares.dedicated(spec)
    for i, team in enumerate(spec.teams):
        guaranteed = shares.team_guarantee(spec, team)
        if not isinstance(team.borrow, bool):
            room, where = _shared_extreme(sizes, owners, guaranteed, "borrow")
            if team.borrow > room and not where:
                yield error(TEAMS + (i, "borrow"), f"team '{team.name}' cannot borrow {team.borrow} GPUs: every GPU "
                            "node group is dedicated to a team, none is shared to borrow in", "leave borrow out")
            elif team.borrow > room:
                yield error(TEAMS + (i, "borrow"), f"team '{team.name}' can borrow at most {room} GPUs beyond its "
                            f"guarantee in a node group ({where}), not {team.borrow}",
                            f"borrow: true for as many as are idle, or a number up to {room}" if room else
                            "borrow: false: it is guaranteed every GPU of the shared node groups")
        if not isinstance(team.lend, bool):
            most, where = _shared_extreme(sizes, owners, guaranteed, "lend")
            if team.lend > most and not where:
                yield error(TEAMS + (i, "lend"), f"team '{team.name}' cannot lend {team.lend} GPUs: every GPU node "
                            "group is dedicated to a team, and a dedicated group's GPUs are never lent",
                            "leave lend out")
            elif team.lend > most:
                yield error(TEAMS + (i, "lend"), f"team '{team.name}' is guaranteed at most {most} GPUs in a shared "
                            f"node group ({where}), so it cannot lend {team.lend}",
                            f"lend: true lends all of its idle guarantee; or a number up to {most}" if most else
                            "lend: false: it is guaranteed no GPUs of a shared node group to lend")


@rule
def team_slurm_limits_fit(spec: ClusterSpec) -> Iterator[Problem]:
    """On Slurm, the numbers a team's account is given fit Slurm's accounting: its fair share
    (its guaranteed GPUs) Slurm's Fairshare, a uint32 below the value that means "the parent's";
    the GPUs it may hold when it may borrow only so far (GrpTRES=gres/gpu, summed over the node
    groups it may use) a TRES count below Slurm's sentinels, where a larger number reads as no
    limit."""
    if spec.orchestrator.control_plane.scheduler != "slurm":
        return
    sizes, owners = shares.group_gpus(spec), shares.dedicated(spec)
    for i, team in enumerate(spec.teams):
        guaranteed = shares.team_guarantee(spec, team)
        if sum(guaranteed.values()) > team_facts.SLURM_MAX_FAIRSHARE:
            field = "gpus" if team.gpus else "share" if team.share is not None else "name"
            yield error(TEAMS + (i, field), f"team '{team.name}' is guaranteed {sum(guaranteed.values())} GPUs, its "
                        f"account's Fairshare, and Slurm's Fairshare holds at most {team_facts.SLURM_MAX_FAIRSHARE}",
                        "guarantee it fewer GPUs, or make its node groups smaller")
        if isinstance(team.borrow, bool):
            continue
        held = sum(gpus if owners.get(group) == team.name else min(gpus, guaranteed[group] + team.borrow)
                   for group, gpus in sizes.items() if owners.get(group) in (None, team.name))
        if held > team_facts.SLURM_MAX_TRES_COUNT:
            yield error(TEAMS + (i, "borrow"), f"team '{team.name}' may hold {held} GPUs (GrpTRES=gres/gpu, summed "
                        f"over the node groups it may use), more than a Slurm TRES count holds "
                        f"({team_facts.SLURM_MAX_TRES_COUNT}): Slurm would read it as no limit",
                        "borrow: true, or make its node groups smaller")


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
