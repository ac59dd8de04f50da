"""What a change of the spec does that the templates do not show: a new cluster (its identity
changes), the teams' shares, a shared home added on HyperPod, the nodes' health settings."""

from __future__ import annotations

from fmcluster.deploy import node_roll
from fmcluster.deploy.diff.changes import TeamChange
from fmcluster.model.teams import Team
from fmcluster.spec.models import ClusterSpec


def identity_changes(old: ClusterSpec, new: ClusterSpec) -> list[str]:
    """What changes of the cluster's identity: its name (which every stack name derives from), its
    region, its account (where both specs name one: a spec without one deploys to the account of
    the credentials, which the specs do not say)."""
    found = [f"{what} {a} -> {b}" for what, a, b in (("name", old.name, new.name), ("region", old.region, new.region))
             if a != b]
    if old.account and new.account and old.account != new.account:
        found.append(f"account {old.account} -> {new.account}")
    return found


HOME_ON_HYPERPOD = (
    "the shared home (storage.home) is {what} on SageMaker HyperPod: HyperPod mounts an instance group's "
    "FSx file system when it provisions a node, and the image's home directories are copied in and the home "
    "checked only at a node's first boot, so the nodes the cluster has now {keep} until they are replaced: "
    "replace them after the update (scale each instance group to 0 and back, or replace its nodes)")


def home_notes(old: ClusterSpec, new: ClusterSpec) -> list[str]:
    """A note where the update adds or changes the shared home of a HyperPod Slurm cluster: its
    nodes have the old home (or none) until they are replaced."""
    if new.orchestrator.type != "hyperpod-slurm" or old.storage.home == new.storage.home or new.storage.home is None:
        return []
    added = old.storage.home is None
    return [HOME_ON_HYPERPOD.format(what="added" if added else "changed",
                                    keep="have no /home of it" if added else "keep the home they mounted")]


# The node health settings (fmcluster.facts.health) that each control plane's node scripts carry,
# where they are, and what a change of them does to the nodes (fmcluster.deploy.node_roll, which
# finds the groups and their node counts in the templates).
HEALTH_ON_NODES = {
    "pcs": (("check_minutes", "replace", "deep_check"), "the GPU groups' lifecycle scripts change",
            node_roll.effect_note("pcs", node_roll.REPLACED)),
    # the deep check is HyperPod's own there (OnStartDeepHealthChecks): an update of the cluster
    # in place, for the nodes it creates, not a lifecycle script
    "hyperpod-slurm": (("check_minutes", "replace"), "the GPU groups' lifecycle scripts change",
                       node_roll.effect_note("hyperpod", node_roll.NEW_ONLY)),
    # the check's period is in the GPU groups' user data where the nodes run it (observability on)
    "eks": (("check_minutes",), "the GPU node groups' launch templates change",
            node_roll.effect_note("eks", node_roll.REPLACED)),
}


def health_notes(old: ClusterSpec, new: ClusterSpec) -> list[str]:
    """A note where the update changes what the nodes' scripts carry for their health (the check's
    period, replacement, the deep check): what that does to the nodes of the control plane. The
    limits of the replacer and of EKS node repair change in place."""
    plane = new.orchestrator.type
    if plane not in HEALTH_ON_NODES or old.orchestrator.type != plane:
        return []
    fields, where, what = HEALTH_ON_NODES[plane]
    if plane == "eks" and not (new.observability.prometheus or new.observability.grafana):
        return []
    changed = [f"health.{name} {getattr(old.health, name)} -> {getattr(new.health, name)}"
               for name in fields if getattr(old.health, name) != getattr(new.health, name)]
    return [f"{', '.join(changed)}: {where}: {what}"] if changed else []


def _gpus(team: Team, group: str) -> str:
    return f"{team.guaranteed[group]} guaranteed, at most {team.burst(group)}"


def team_changes(old: tuple[Team, ...], new: tuple[Team, ...]) -> list[TeamChange]:
    """Each team added, removed or changed between two specs: its GPUs per node group (guaranteed
    and at most), what it lends, its priority, its members and groups. What it means for running
    work is said once, in the text (TEAM_NOTES)."""
    before = {t.name: t for t in old}
    after = {t.name: t for t in new}
    changes = []
    for team in new:
        was = before.get(team.name)
        if was is None:
            changes.append(TeamChange(team.name, "added", [
                f"{team.guaranteed_gpus} GPUs guaranteed, at most {team.burst_gpus}, priority {team.priority}"]))
            continue
        details = []
        for group in sorted(set(was.group_gpus) | set(team.group_gpus)):
            if group not in team.group_gpus:
                details.append(f"{group}: {_gpus(was, group)} -> the group is gone")
            elif group not in was.group_gpus:
                details.append(f"{group}: new group, {_gpus(team, group)}")
            elif (was.guaranteed[group], was.burst(group)) != (team.guaranteed[group], team.burst(group)):
                details.append(f"{group}: {_gpus(was, group)} -> {_gpus(team, group)}")
            if group in was.group_gpus and group in team.group_gpus and was.lendable(group) != team.lendable(group):
                details.append(f"{group}: lends {was.lendable(group)} -> {team.lendable(group)}")
        if was.priority != team.priority:
            details.append(f"priority {was.priority} -> {team.priority}")
        for what, a, b in (("members", was.members, team.members), ("groups", was.groups, team.groups)):
            plus, minus = [m for m in b if m not in a], [m for m in a if m not in b]
            if plus or minus:
                details.append(f"{what} " + " ".join([*(f"+{m}" for m in plus), *(f"-{m}" for m in minus)]))
        if details:
            changes.append(TeamChange(team.name, "changed", details))
    changes += [TeamChange(t.name, "removed", [f"{t.guaranteed_gpus} GPUs guaranteed"]) for t in old
                if t.name not in after]
    return changes
