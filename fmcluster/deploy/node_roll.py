"""What a change does to the running nodes of each node group: which groups' nodes are drained and
replaced, which keep running as they are while only nodes launched later take the change, and how
many nodes each group has. `fmcluster diff` classifies resource changes in fmcluster.deploy.diff;
this module adds, to the changes of node groups, what the control plane does to their nodes.

What each control plane does (sources: docs/commands.md, "fmcluster diff"):

- AWS PCS: a change of a compute node group's node lifecycle actions (a script's checksum and
  location, its arguments, its policies) drains and replaces the group's existing nodes ("Configuration
  changes drain and replace existing nodes": PCS User Guide, "Run custom scripts with node lifecycle
  actions"). Every fmcluster lifecycle script carries the whole node program, so a change of any boot
  fragment changes every script of every group, the login nodes' included. A new launch template
  version or AMI takes effect for instances launched after the update ("New instances launch with
  the updated properties": "Updating an AWS PCS compute node group").
- Amazon EKS managed node groups: a new launch template version (or AMI release, or Kubernetes
  version) is an update that replaces every node, each drained first (EKS API Reference,
  UpdateNodegroupVersion; EKS User Guide, "Understand each phase of node updates").
- SageMaker HyperPod: UpdateCluster (what CloudFormation calls) runs the lifecycle scripts only on
  nodes it creates; running nodes keep theirs until UpdateClusterSoftware, which re-runs them on the
  whole instance group (SageMaker Developer Guide, "Updating a cluster with new or updated lifecycle
  scripts"); an instance group's ImageId likewise (fmcluster.deploy.diff.rolls.HYPERPOD_ROLL).

No plane reboots running nodes for a template change: a roll here is always a replacement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from fmcluster.facts import naming

REPLACED, NEW_ONLY = "replaced", "new-only"  # what happens to a group's running nodes
PCS_GROUP, EKS_GROUP, HYPERPOD_CLUSTER = "AWS::PCS::ComputeNodeGroup", "AWS::EKS::Nodegroup", "AWS::SageMaker::Cluster"
LAUNCH_TEMPLATE = "AWS::EC2::LaunchTemplate"
Key = tuple[str, str]  # (stack, logical id)
Targets = Callable[[str, Any], set[Key]]  # the resources a template value refers to (diff.references.Resolver.targets)

# plane -> (its name in the text, what it does to the nodes of a group whose change replaces them,
# what it does where only new nodes take the change)
PLANES = {
    "pcs": ("AWS PCS",
            "AWS PCS drains and replaces every node of the group (a new instance once its jobs end): a "
            "changed lifecycle script is a new checksum",
            "on AWS PCS instances launched after the update (new dynamic nodes, replaced static ones) take it; "
            "running nodes keep theirs until replaced"),
    "eks": ("Amazon EKS",
            "EKS rolls the managed node group: new nodes from the new launch template version, each old one "
            "cordoned, drained (within its pod disruption budgets) and terminated",
            ""),
    "hyperpod": ("SageMaker HyperPod",
                 "",
                 "HyperPod runs the new lifecycle scripts (and boots the new image) only on nodes it creates from "
                 "now on; running nodes keep theirs until UpdateClusterSoftware re-runs them on the whole "
                 "instance group (it may affect the cluster's availability: plan it around jobs)"),
}


@dataclass
class NodeRoll:
    """One node group whose running nodes a change replaces (effect "replaced"), or whose nodes
    launched later take a change that running ones do not ("new-only")."""

    group: str
    plane: str  # pcs | eks | hyperpod (PLANES)
    effect: str  # replaced | new-only
    stack: str
    logical_id: str
    min_nodes: int
    max_nodes: int
    causes: list[str] = field(default_factory=list)
    note: str = ""  # what the plane does to the nodes
    implied: list[str] = field(default_factory=list)  # what changes at deploy while the group's text is the same

    @property
    def nodes(self) -> str:
        if self.min_nodes == self.max_nodes:
            return _plural(self.max_nodes, "node")
        return f"{self.min_nodes} to {self.max_nodes} nodes"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _number(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _under(paths: Iterable[str], *names: str) -> list[str]:
    """The paths inside one of the top-level properties `names`."""
    return [p for p in paths if p.split("[")[0].split(".")[0] in names]


def _launch_template(stack: str, value: Any, changes: Mapping[Key, Any], replaced: set[Key],
                     targets: Targets, resources: Mapping[Key, Mapping[str, Any]]) -> list[str]:
    """Why the launch template a group names (its id and version) gives the group a new version: the
    template is replaced, or its data changes (CloudFormation makes a new version)."""
    causes = []
    for target in sorted(targets(stack, value)):
        if resources.get(target, {}).get("Type") != LAUNCH_TEMPLATE:
            continue
        if target in replaced:
            causes.append(f"its launch template {target[1]} is replaced")
            continue
        change = changes.get(target)
        data = _under(getattr(change, "paths", []), "LaunchTemplateData") if change is not None else []
        if data:
            shown = ", ".join(p.removeprefix("LaunchTemplateData.") for p in data[:3])
            more = f" ... {len(data) - 3} more" if len(data) > 3 else ""
            causes.append(f"its launch template {target[1]} gets a new version ({shown}{more})")
    return causes


def _scripts(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The names of the lifecycle scripts that differ (added, removed or changed), in the new order."""
    def entries(props: Mapping[str, Any]) -> dict[str, Any]:
        stages = (props.get("NodeLifecycleActions") or {}).get("Stages") or {}
        return {str(a.get("Name")): a for stage in stages.values() if isinstance(stage, list)
                for a in stage if isinstance(a, Mapping)}
    before, after = entries(old), entries(new)
    return [n for n in after if before.get(n) != after[n]] + [f"{n} (removed)" for n in before if n not in after]


def _pcs(key: Key, old: Mapping[str, Any], new: Mapping[str, Any], paths: list[str], lt_causes: list[str],
         replaced_refs: list[Key]) -> tuple[str, list[str]] | None:
    causes = []
    if _under(paths, "NodeLifecycleActions"):
        names = _scripts(old, new)
        causes.append(f"its lifecycle scripts change ({', '.join(names)})" if names
                      else "its lifecycle actions change")
    causes += [f"its lifecycle scripts' arguments name {t[1]}" + (f" in {t[0]}" if t[0] != key[0] else "")
               + ", which is replaced (a new value at deploy)" for t in replaced_refs]
    if causes:
        return REPLACED, causes
    later = lt_causes + (["its AMI changes"] if _under(paths, "AmiId") else [])
    if _under(paths, "CustomLaunchTemplate") and not lt_causes:
        later.append("its launch template changes")
    return (NEW_ONLY, later) if later else None


def _eks(paths: list[str], lt_causes: list[str]) -> tuple[str, list[str]] | None:
    causes = list(lt_causes)
    if _under(paths, "LaunchTemplate") and not lt_causes:
        causes.append("its launch template changes")
    causes += [f"its {p} changes" for p in _under(paths, "ReleaseVersion", "Version")]
    return (REPLACED, causes) if causes else None


def _group_name(resource: Mapping[str, Any], lid: str) -> str:
    props = resource.get("Properties", {})
    tags = props.get("Tags")
    tagged = tags.get(naming.NODE_GROUP_TAG) if isinstance(tags, Mapping) else None
    for name in (props.get("Name"), tagged, props.get("NodegroupName")):
        if isinstance(name, str):
            return name
    return lid


def _counts(resource: Mapping[str, Any]) -> tuple[int, int]:
    props = resource.get("Properties", {})
    if resource.get("Type") == PCS_GROUP:
        scaling = props.get("ScalingConfiguration") or {}
        return _number(scaling.get("MinInstanceCount")), _number(scaling.get("MaxInstanceCount"))
    scaling = props.get("ScalingConfig") or {}
    return _number(scaling.get("MinSize")), _number(scaling.get("MaxSize"))


def _instance_groups(props: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(g.get("InstanceGroupName")): g for g in props.get("InstanceGroups") or [] if isinstance(g, Mapping)}


def _hyperpod(stack: str, lid: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[NodeRoll]:
    """The instance groups of a HyperPod cluster whose lifecycle scripts or image change: new nodes only."""
    before, after = _instance_groups(old.get("Properties", {})), _instance_groups(new.get("Properties", {}))
    rolls = []
    for name, group in after.items():
        was = before.get(name)
        if was is None:
            continue
        causes = [what for key, what in (("LifeCycleConfig", "its lifecycle scripts change"),
                                         ("ImageId", "its image changes")) if was.get(key) != group.get(key)]
        if causes:
            count = _number(group.get("InstanceCount"))
            rolls.append(NodeRoll(name, "hyperpod", NEW_ONLY, stack, lid, count, count, causes,
                                  effect_note("hyperpod", NEW_ONLY)))
    return rolls


def find(old: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]], changes: Mapping[Key, Any],
         replaced: set[Key], targets: Targets) -> list[NodeRoll]:
    """Every node group (in both `old` and `new`, stack name -> template) whose running nodes the
    change replaces, or whose new nodes only take it. `changes` are diff's resource changes by
    (stack, logical id) (with .paths and .fails), `replaced` the keys replaced or maybe replaced,
    `targets` diff's reference resolver on the new templates."""
    resources = {(s, lid): r for s, t in new.items() for lid, r in (t.get("Resources") or {}).items()}
    rolls: list[NodeRoll] = []
    for stack in sorted(set(old) & set(new)):
        before = old[stack].get("Resources") or {}
        for lid, resource in sorted((new[stack].get("Resources") or {}).items()):
            kind, was = resource.get("Type"), before.get(lid)
            if kind not in (PCS_GROUP, EKS_GROUP, HYPERPOD_CLUSTER) or was is None or was.get("Type") != kind:
                continue
            key, change = (stack, lid), changes.get((stack, lid))
            if change is not None and getattr(change, "fails", False):
                continue  # the update does not happen
            if kind == HYPERPOD_CLUSTER:
                rolls += _hyperpod(stack, lid, was, resource)
                continue
            plane = "pcs" if kind == PCS_GROUP else "eks"
            low, high = _counts(resource)
            name = _group_name(resource, lid)
            if key in replaced:
                rolls.append(NodeRoll(name, plane, REPLACED, stack, lid, low, high,
                                      ["the node group itself is replaced: its nodes go with it, and the new group "
                                       "launches new ones"]))
                continue
            props, paths = resource.get("Properties", {}), list(getattr(change, "paths", []) or [])
            template = props.get("CustomLaunchTemplate" if plane == "pcs" else "LaunchTemplate")
            lt_causes = _launch_template(stack, template, changes, replaced, targets, resources)
            implied = [f"{'CustomLaunchTemplate' if plane == 'pcs' else 'LaunchTemplate'}.Version"] if lt_causes else []
            if plane == "pcs":
                refs = sorted(t for t in targets(stack, props.get("NodeLifecycleActions")) if t in replaced)
                implied += ["NodeLifecycleActions.Stages[*].Arguments"] if refs else []
                found = _pcs(key, was.get("Properties", {}), props, paths, lt_causes, refs)
            else:
                found = _eks(paths, lt_causes)
            if found is not None:
                effect, causes = found
                rolls.append(NodeRoll(name, plane, effect, stack, lid, low, high, causes, effect_note(plane, effect),
                                      [p for p in implied if p not in paths]))
    return rolls


HEADINGS = {REPLACED: "nodes drained and replaced", NEW_ONLY: "nodes launched from now on take the change "
                                                                "(running nodes keep what they have)"}


def lines(rolls: list[NodeRoll]) -> list[str]:
    """The text of `fmcluster diff` for the node rolls: the groups whose nodes are replaced (with the
    total), then those whose new nodes only take the change; what each plane does, once."""
    out: list[str] = []
    for effect, heading in HEADINGS.items():
        mine = [r for r in rolls if r.effect == effect]
        if not mine:
            continue
        low, high = sum(r.min_nodes for r in mine), sum(r.max_nodes for r in mine)
        total = _plural(high, "node") if low == high else f"{low} to {high} nodes"
        out.append(f"{heading}: {total} in {_plural(len(mine), 'node group')}")
        for r in mine:
            where = f"{PLANES[r.plane][0]}, {r.stack} {r.logical_id}"
            out.append(f"  {r.group}: {r.nodes} ({where}): {'; '.join(r.causes)}")
        out += [f"  ({note})" for note in dict.fromkeys(r.note for r in mine if r.note)]
    return out


def effect_note(plane: str, effect: str) -> str:
    """What `plane` (pcs, eks, hyperpod) does to the nodes of a group for `effect`."""
    return PLANES[plane][1 if effect == REPLACED else 2]
