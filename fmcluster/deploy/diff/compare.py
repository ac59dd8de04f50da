"""`compare`: every stack of two sets of templates, resource by resource (fmcluster.deploy.diff.rules),
then what the changes reach through references: a create-only property that names a replaced
resource, an export in use that changes, the KMS keys that hold data, the node groups whose nodes
the change reaches, and the EKS node groups on a Capacity Block that it updates."""

from __future__ import annotations

from typing import Mapping

from fmcluster.deploy import cfn_schemas
from fmcluster.deploy.diff.changes import (
    ADD,
    FAILS,
    KEY,
    MAY_REPLACE,
    NODEGROUP,
    REMOVE,
    REPLACE,
    UPDATE,
    Change,
    Comparison,
    StackDiff,
    Templates,
    resources_of,
    stateful_and_retained,
)
from fmcluster.deploy.diff.references import Resolver, canonical, exports, imports
from fmcluster.deploy.diff.rolls import mark_node_rolls
from fmcluster.deploy.diff.rules import direct_change
from fmcluster.facts import naming


def compare(old: Templates, new: Templates, region: str) -> Comparison:
    stacks: list[StackDiff] = []
    produced_old, produced_new = exports(old), exports(new)
    changes: dict[tuple[str, str], Change] = {}
    for name in sorted(set(old) | set(new)):
        before = resources_of(old.get(name))
        after = resources_of(new.get(name))
        found: list[Change] = []
        for lid in sorted(set(before) | set(after)):
            if lid not in before:
                found.append(Change(name, lid, after[lid]["Type"], ADD, stateful=stateful_and_retained(after[lid])[0],
                                    retained=stateful_and_retained(after[lid])[1]))
            elif lid not in after:
                stateful, retained = stateful_and_retained(before[lid])
                found.append(Change(name, lid, before[lid]["Type"], REMOVE, stateful=stateful, retained=retained))
            else:
                change = direct_change(name, lid, canonical(before[lid], old, produced_old),
                                 canonical(after[lid], new, produced_new), region)
                if change:
                    found.append(change)
        changes.update({(c.stack, c.logical_id): c for c in found})
        status = "added" if name not in old else "removed" if name not in new else "changed" if found else "unchanged"
        stacks.append(StackDiff(name, status, found))
    resolver = Resolver(new, produced_new)
    _follow_references(old, new, changes, region, stacks, resolver)
    _exports_in_use(old, new, changes, stacks, resolver, produced_old)
    keys = data_keys(old, produced_old) | data_keys(new, produced_new)
    for c in changes.values():
        if c.type == KEY:
            c.stateful = (c.stack, c.logical_id) in keys
    return Comparison(stacks, _block_updates(new, stacks),
                      node_rolls=mark_node_rolls(old, new, changes, stacks, resolver))


def data_keys(templates: Templates, produced: Mapping[str, tuple[str, str]] | None = None) -> set[tuple[str, str]]:
    """The KMS keys (stack, logical id) that encrypt a resource holding data (a bucket's
    encryption, a file system's KmsKeyId), in its stack or through cross-stack references: "their
    keys", which hold the data as much as they do. Another key (the alerts' topic's) holds none."""
    resolver = Resolver(templates, produced)
    found: set[tuple[str, str]] = set()
    for stack, template in templates.items():
        for resource in resources_of(template).values():
            if resource["Type"] != KEY and cfn_schemas.holds_data(resource["Type"]):
                found |= {t for t in resolver.targets(stack, resource.get("Properties", {}))
                          if resources_of(templates.get(t[0])).get(t[1], {}).get("Type") == KEY}
    return found


def _block_updates(new: Templates, stacks: list[StackDiff]) -> list[str]:
    """A note for each EKS managed node group on a Capacity Block that the change updates (its
    launch template version, AMI release, labels...): EKS asks for such a group to be at desired
    size 0 while it is updated, since a rolling update needs capacity the block does not have."""
    notes = []
    for s in stacks:
        resources = resources_of(new.get(s.name))
        for c in s.changes:
            props = resources.get(c.logical_id, {}).get("Properties", {})
            if (c.type == NODEGROUP and c.action in (UPDATE, REPLACE) and props.get("CapacityType") == "CAPACITY_BLOCK"
                    and any(not p.startswith("ScalingConfig") for p in c.paths)):
                tags = props.get("Tags") or {}
                group, cluster = tags.get(naming.NODE_GROUP_TAG, c.logical_id), tags.get(naming.CLUSTER_TAG, "NAME")
                notes.append(f"node group {group} is on a Capacity Block and this change updates it ({s.name} "
                             f"{c.logical_id}): EKS wants it at desired size 0 for the update, so hold its scaler "
                             f"({naming.hold_parameter(cluster, group)}) and scale it to 0 before deploying, and "
                             "delete the hold after (README, Capacity Blocks)")
    return notes


def _exports_in_use(old: Templates, new: Templates, changes: dict[tuple[str, str], Change],
                    stacks: list[StackDiff], resolver: Resolver, produced_old: Mapping[str, tuple[str, str]]) -> None:
    """An export that another stack imports (as deployed: `old`) cannot change or go while it does:
    CloudFormation fails the producer's update ("cannot update export ... as it is in use") and
    rolls it back. The producer's resource that would change it is marked FAILS."""
    produced_new = resolver.exports
    by_stack = {s.name: s for s in stacks}
    replaced = {key for key, c in changes.items() if c.action in (REPLACE, MAY_REPLACE)}
    for name, consumers in sorted(imports(old).items()):
        if name not in produced_old:
            continue
        stack, output = produced_old[name]
        consumers = [c for c in consumers if c != stack]
        if not consumers or stack not in new:
            continue  # a stack that goes away is destroyed after its consumers (cdk destroy)
        before = old[stack]["Outputs"][output].get("Value")
        where = produced_new.get(name)
        culprits: list[tuple[str, str]] = []
        if where is None:
            why = f"the export {name} goes away"
        else:
            after = new[where[0]]["Outputs"][where[1]].get("Value")
            culprits = sorted(t for t in resolver.targets(where[0], after) if t in replaced)
            if culprits:
                why = f"the export {name} names {culprits[0][1]}, which is replaced (a new id)"
            elif canonical(before, old, produced_old) != canonical(after, new, produced_new):
                why = f"the value of the export {name} changes"
            else:
                continue
        reason = (f"{why}, and {', '.join(consumers)} import{'s' if len(consumers) == 1 else ''} it: "
                  "CloudFormation refuses to change an export in use, and the update rolls back (to make "
                  "the change on purpose, back up the data and destroy the importing stacks first)")
        for target in culprits or [(stack, output)]:
            change = changes.get(target)
            if change is None:  # the output itself changes, no resource of it: the stack's update fails
                change = Change(stack, f"Outputs.{output}", "AWS::CloudFormation::Output", FAILS)
                changes[target] = change
                by_stack[stack].changes.append(change)
                by_stack[stack].status = "changed"
            change.action = FAILS
            if reason not in change.reasons:
                change.reasons.append(reason)
    for s in stacks:
        s.changes.sort(key=lambda c: c.logical_id)


def _follow_references(old: Templates, new: Templates, changes: dict[tuple[str, str], Change], region: str,
                       stacks: list[StackDiff], resolver: Resolver) -> None:
    """Replace what a create-only property ties to a replaced resource, until nothing more changes
    (`resolver` follows references through the new templates)."""
    by_stack = {s.name: s for s in stacks}
    grew = True
    while grew:
        grew = False
        replaced = {key for key, c in changes.items() if c.action in (REPLACE, MAY_REPLACE)}
        for stack in set(old) & set(new):
            before, after = resources_of(old[stack]), resources_of(new[stack])
            for lid in set(before) & set(after):
                current = changes.get((stack, lid))
                if current and current.action in (REPLACE, MAY_REPLACE):
                    continue
                schema = cfn_schemas.schema(after[lid]["Type"], region)
                if schema is None:
                    continue
                props = after[lid].get("Properties", {})
                hits = [(p, t) for p in schema.create_only
                        for t in resolver.targets(stack, cfn_schemas.values_at(props, p)) if t in replaced]
                if not hits:
                    continue
                if current is None:
                    stateful, retained = stateful_and_retained(after[lid])
                    current = Change(stack, lid, after[lid]["Type"], REPLACE, stateful=stateful, retained=retained)
                    changes[(stack, lid)] = current
                    by_stack[stack].changes.append(current)
                    by_stack[stack].status = "changed"
                current.action = REPLACE
                current.reasons += [f"{cfn_schemas.dotted(p)} refers to {t[1]}"
                                    + (f" in {t[0]}" if t[0] != stack else "") + ", which is replaced"
                                    for p, t in sorted(set(hits))]
                grew = True
    for s in stacks:
        s.changes.sort(key=lambda c: c.logical_id)
