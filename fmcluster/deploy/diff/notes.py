"""What a change of the spec does that the templates do not show: a new cluster (its identity
changes), the teams' shares, a shared home added on HyperPod, the nodes' health settings. Which
fields do what is the update policy's (fmcluster.spec.update_policy); the words are these."""

from __future__ import annotations

from fmcluster.deploy import node_roll
from fmcluster.deploy.diff.changes import TeamChange
from fmcluster.model.teams import Team
from fmcluster.spec import update_policy
from fmcluster.spec.models import ClusterSpec


def _changed(old: ClusterSpec, new: ClusterSpec, path: str) -> bool:
    return bool(update_policy.value(old, path) != update_policy.value(new, path))


def _change(old: ClusterSpec, new: ClusterSpec, path: str) -> str:
    return f"{path} {update_policy.value(old, path)} -> {update_policy.value(new, path)}"


def identity_changes(old: ClusterSpec, new: ClusterSpec) -> list[str]:
    """What changes of the cluster's identity: the fields whose change is a new cluster
    (fmcluster.spec.update_policy): its name, which every stack name derives from, its region, its
    account where both specs name one (a spec without one deploys to the account of the
    credentials, which the specs do not say)."""
    return [_change(old, new, path) for path in update_policy.fields(update_policy.NEW_CLUSTER)
            if _changed(old, new, path) and update_policy.policy(path).effect(old, new) == update_policy.NEW_CLUSTER]


HOME_ON_HYPERPOD = (
    "the shared home (storage.home) is {what} on SageMaker HyperPod: HyperPod mounts an instance group's "
    "FSx file system when it provisions a node, and the image's home directories are copied in and the home "
    "checked only at a node's first boot, so the nodes the cluster has now {keep} until they are replaced: "
    "replace them after the update (scale each instance group to 0 and back, or replace its nodes)")
HOME_NOTES = {"hyperpod-slurm": HOME_ON_HYPERPOD}  # the control planes where the nodes keep the home they had


def home_notes(old: ClusterSpec, new: ClusterSpec) -> list[str]:
    """A note where the update adds or changes the shared home and the update policy says the
    running nodes keep the old one (or none), which the templates do not show: on a HyperPod Slurm
    cluster, until they are replaced."""
    case = update_policy.policy("storage.home").case(old, new)
    text = HOME_NOTES.get(new.orchestrator.type)
    if case is None or not case.unseen or text is None:
        return []
    added = old.storage.home is None
    return [text.format(what="added" if added else "changed",
                        keep="have no /home of it" if added else "keep the home they mounted")]


# Where each control plane's node scripts carry the node health settings (fmcluster.facts.health),
# and what a change of them does to the nodes (fmcluster.deploy.node_roll, which finds the groups
# and their node counts in the templates). Which settings reach the running nodes, and when, is
# the update policy's (fmcluster.spec.update_policy): on AWS PCS the check's period, replacement
# and the deep check; on HyperPod's Slurm the period and replacement (its deep health checks are
# its own, an update in place); on EKS the period, in the GPU groups' user data where the nodes run
# the check (observability on).
HEALTH_ON_NODES = {
    "pcs": ("the GPU groups' lifecycle scripts change", node_roll.effect_note("pcs", node_roll.REPLACED)),
    "hyperpod-slurm": ("the GPU groups' lifecycle scripts change",
                       node_roll.effect_note("hyperpod", node_roll.NEW_ONLY)),
    "eks": ("the GPU node groups' launch templates change", node_roll.effect_note("eks", node_roll.REPLACED)),
}
HEALTH = tuple(path for path in update_policy.POLICIES if path.startswith("health."))


def health_notes(old: ClusterSpec, new: ClusterSpec) -> list[str]:
    """A note where the update changes a node health setting that the nodes' scripts carry (the
    update policy says it reaches the running nodes): what that does to the nodes of the control
    plane. The limits of the replacer and of EKS node repair change in place."""
    plane = new.orchestrator.type
    if plane not in HEALTH_ON_NODES or old.orchestrator.type != plane:
        return []
    where, what = HEALTH_ON_NODES[plane]
    changed = [_change(old, new, path) for path in HEALTH
               if _changed(old, new, path) and update_policy.policy(path).reaches_nodes(old, new)]
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
