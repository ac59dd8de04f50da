"""`fmcluster diff OLD NEW`: what changing a spec does to deployed resources.

Sources and details: docs/research-notes.md, "fmcluster/deploy/diff.py"."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Literal, Mapping

from fmcluster.deploy import assembly, cfn_schemas, node_roll
from fmcluster.deploy.deployed import NotReadable
from fmcluster.deploy.synth import SynthesisFailed
from fmcluster.facts import fsx, naming, openzfs
from fmcluster.facts import images as image_facts
from fmcluster.model import cluster as model
from fmcluster.model.teams import Team
from fmcluster.spec.models import ClusterSpec

ADD, UPDATE, REPLACE, MAY_REPLACE, REMOVE = "add", "update", "replace", "may-replace", "remove"
FAILS = "fails"  # an update CloudFormation attempts and the service refuses: the stack rolls back
FILE_SYSTEM = "AWS::FSx::FileSystem"
KEY = "AWS::KMS::Key"
NODEGROUP = "AWS::EKS::Nodegroup"
RETAINED = ("Retain", "RetainExceptOnCreate", "Snapshot")
IGNORED_TYPES = ("AWS::CDK::Metadata",)
COMPARED_KEYS = ("Properties", "DeletionPolicy", "UpdateReplacePolicy", "Condition")
SHOWN_PATHS = 6
TemplateBody = Mapping[str, Any]  # a CloudFormation template, as parsed JSON
Templates = Mapping[str, TemplateBody]  # stack name (PARENT/ID for a nested stack) -> template
# ("res", logical id) in its own stack, ("out", stack, output) in another, ("export", name)
Reference = tuple[Literal["res"], str] | tuple[Literal["out"], Any, Any] | tuple[Literal["export"], str]


@dataclass
class Change:
    stack: str
    logical_id: str
    type: str
    action: str
    paths: list[str] = field(default_factory=list)  # changed properties
    reasons: list[str] = field(default_factory=list)  # why it is (or may be) replaced
    stateful: bool = False  # it holds users' data (cfn_schemas.DATA_TYPES)
    retained: bool = False
    nodes: str = ""  # a node group's running nodes: node_roll.REPLACED, node_roll.NEW_ONLY, or "" (untouched)

    @property
    def data_loss(self) -> bool:
        return self.stateful and self.action in (REPLACE, MAY_REPLACE, REMOVE)

    @property
    def fails(self) -> bool:
        return self.action == FAILS


@dataclass
class Roll:
    """Node groups that move to a new build of their node image (NAME-images)."""

    image: str  # fmcluster.model.cluster.NodeImage.key
    plane: str
    groups: list[str]
    changes: list[str]  # the image's resources in NAME-images that change, as "TYPE LOGICAL-ID (ACTION)"
    first: bool = False  # the image is new to the deployed cluster: its groups leave the plain base image
    note: str = ""  # what happens to the groups' nodes


@dataclass
class NewCluster:
    """A change of the cluster's identity (its name, region or account): NEW is a new set of
    stacks beside OLD's, which deploying NEW leaves as they are, with their data."""

    changes: list[str]  # "name llm-pretrain -> llm-pretrain2", "region ...", "account ..."
    where: str  # where OLD's stacks are: "us-east-1, account of the credentials"
    old_stacks: list[str]  # OLD's stacks (not nested ones), left as deployed
    left: list[Change] = field(default_factory=list)  # OLD's stateful resources, left in them (action "keep")


@dataclass
class TeamChange:
    """What a change of the spec does to one team's share of the cluster."""

    team: str
    change: str  # added | removed | changed
    details: list[str]  # "gpu guaranteed 96 -> 64", "priority high -> normal", "members +carol -alice"


@dataclass
class StackDiff:
    name: str
    status: str  # added | removed | changed | unchanged
    changes: list[Change]


@dataclass
class Comparison:
    """What `compare` finds, stack by stack (built up as references are followed)."""

    stacks: list[StackDiff]
    notes: list[str] = field(default_factory=list)
    rolls: list[Roll] = field(default_factory=list)  # node groups moving to new node images
    new_cluster: NewCluster | None = None  # the cluster's identity changes
    teams: list[TeamChange] = field(default_factory=list)  # what changes for the teams that share it
    node_rolls: list[node_roll.NodeRoll] = field(default_factory=list)  # groups whose nodes the change reaches

    @property
    def data_loss(self) -> list[Change]:
        return [c for s in self.stacks for c in s.changes if c.data_loss]

    @property
    def failing(self) -> list[Change]:
        return [c for s in self.stacks for c in s.changes if c.fails]


# ---- references ----------------------------------------------------------------------------

def references(value: Any) -> set[Reference]:
    """What a template value refers to: ("res", logical id) in its own stack, ("out", stack,
    output) in another one (CDK's Fn::GetStackOutput) and ("export", name) (Fn::ImportValue)."""
    found: set[Reference] = set()
    if isinstance(value, list):
        for item in value:
            found |= references(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key == "Ref" and isinstance(item, str) and not item.startswith("AWS::"):
                found.add(("res", item))
            elif key == "Fn::GetAtt":
                target = item[0] if isinstance(item, list) else str(item).split(".", 1)[0]
                found.add(("res", target))
            elif key == "Fn::Sub":
                text = item[0] if isinstance(item, list) else item
                found |= {("res", name.split(".", 1)[0]) for name in _sub_names(text) if not name.startswith("AWS::")}
                if isinstance(item, list) and len(item) > 1:
                    found |= references(item[1])
            elif key == "Fn::GetStackOutput" and isinstance(item, dict):
                found.add(("out", item.get("StackName"), item.get("OutputName")))
            elif key == "Fn::ImportValue" and isinstance(item, str):
                found.add(("export", item))
            else:
                found |= references(item)
    return found


def _sub_names(text: str) -> list[str]:
    names: list[str] = []
    rest = text
    while "${" in rest:
        start = rest.index("${") + 2
        end = rest.find("}", start)
        if end < 0:
            break
        if not rest[start:].startswith("!"):
            names.append(rest[start:end])
        rest = rest[end + 1:]
    return names


def exports(templates: Templates) -> dict[str, tuple[str, str]]:
    """Export name -> (producer stack, output name), for exports named by a plain string."""
    return {out["Export"]["Name"]: (stack, name) for stack, t in templates.items()
            for name, out in t.get("Outputs", {}).items()
            if isinstance(out.get("Export", {}).get("Name"), str)}


def imports(templates: Templates) -> dict[str, list[str]]:
    """Export name -> the stacks that import it (Fn::ImportValue of a plain string)."""
    found: dict[str, list[str]] = {}
    for stack, template in templates.items():
        for ref in references(template.get("Resources", {})) | references(template.get("Outputs", {})):
            if ref[0] == "export":
                found.setdefault(ref[1], []).append(stack)
    return {name: sorted(set(stacks)) for name, stacks in found.items()}


def canonical(value: Any, templates: Templates, produced: Mapping[str, tuple[str, str]] | None = None) -> Any:
    """`value` with each cross-stack reference (Fn::GetStackOutput, Fn::ImportValue) replaced by
    what it names: {"fmcluster:output": [producer stack, the output's Value there]}. Two ways of
    referring to the same producer value compare equal; one the templates cannot resolve stays."""
    produced = exports(templates) if produced is None else produced
    if isinstance(value, list):
        return [canonical(v, templates, produced) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (key, arg), = value.items()
        target: tuple[Any, Any] | None = None
        if key == "Fn::GetStackOutput" and isinstance(arg, dict):
            target = (arg.get("StackName"), arg.get("OutputName"))
        elif key == "Fn::ImportValue" and isinstance(arg, str):
            target = produced.get(arg)
        if target is not None:
            output = templates.get(str(target[0]), {}).get("Outputs", {}).get(target[1])
            if output is not None:
                return {"fmcluster:output": [target[0], output.get("Value")]}
    return {k: canonical(v, templates, produced) for k, v in value.items()}


class _Resolver:
    """Which (stack, logical id) resources a reference ends at, through cross-stack outputs."""

    def __init__(self, templates: Templates, produced: Mapping[str, tuple[str, str]] | None = None) -> None:
        self.templates = templates
        self.exports = exports(templates) if produced is None else produced

    def targets(self, stack: str, value: Any, depth: int = 0) -> set[tuple[str, str]]:
        out: set[tuple[str, str]] = set()
        parameters = self.templates.get(stack, {}).get("Parameters", {})
        for ref in references(value):
            if ref[0] == "res" and ref[1] in parameters and "/" in stack:  # a nested stack's parameter
                passed = assembly.parameter_value(self.templates, stack, ref[1])
                if passed is not None and depth < 5:
                    out |= self.targets(stack.rsplit("/", 1)[0], passed, depth + 1)
                continue
            if ref[0] == "res":
                out.add((stack, ref[1]))
                continue
            other, name = (ref[1], ref[2]) if ref[0] == "out" else self.exports.get(ref[1], (None, None))
            output = self.templates.get(other or "", {}).get("Outputs", {}).get(name)
            if output is not None and other is not None and depth < 5:
                out |= self.targets(other, output.get("Value"), depth + 1)
        return out


# ---- comparing templates -------------------------------------------------------------------

def changed_paths(old: Any, new: Any, path: str = "") -> list[str]:
    """Leaf paths where two JSON values differ ('LustreConfiguration.DeploymentType', 'Tags[1].Value')."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [p for key in sorted(set(old) | set(new))
                for p in changed_paths(old.get(key), new.get(key), f"{path}.{key}" if path else key)]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [p for i, (a, b) in enumerate(zip(old, new, strict=True)) for p in changed_paths(a, b, f"{path}[{i}]")]
    return [] if old == new else [path or "(whole resource)"]


def _shown(paths: list[str]) -> list[str]:
    """Paths as a reader knows them: a change inside a cross-stack value ('SubnetIds[0]', not
    'SubnetIds[0].fmcluster:output[1].Ref'), each once, in order."""
    return list(dict.fromkeys(p.split(".fmcluster:output", 1)[0] for p in paths))


def _stateful(resource: Mapping[str, Any]) -> tuple[bool, bool]:
    """Whether it holds users' data (cfn_schemas.DATA_TYPES: a retained log group or security
    group does not), and whether CloudFormation keeps it when it leaves the stack."""
    retained = resource.get("DeletionPolicy") in RETAINED or resource.get("UpdateReplacePolicy") in RETAINED
    return cfn_schemas.holds_data(resource["Type"]), retained


def _direct(stack: str, lid: str, old: Mapping[str, Any], new: Mapping[str, Any], region: str) -> Change | None:
    """The change of one resource present in both templates, before references are followed
    (cross-stack references in both already `canonical`)."""
    paths = _shown([p for key in COMPARED_KEYS for p in changed_paths(old.get(key), new.get(key), key)])
    if not paths and old["Type"] == new["Type"]:
        return None
    stateful, retained = _stateful(new)
    change = Change(stack, lid, new["Type"], UPDATE, [p.removeprefix("Properties.") for p in paths],
                    stateful=stateful, retained=retained)
    if old["Type"] != new["Type"]:
        change.action, change.reasons = REPLACE, [f"type changes from {old['Type']}"]
        return change
    schema = cfn_schemas.schema(new["Type"], region)
    if schema is None:
        change.action, change.reasons = MAY_REPLACE, ["no CloudFormation resource schema for this type"]
        return change
    props_old, props_new = old.get("Properties", {}), new.get("Properties", {})
    create_only = [p for p in schema.create_only
                   if cfn_schemas.values_at(props_old, p) != cfn_schemas.values_at(props_new, p)]
    if create_only:
        change.action = REPLACE
        change.reasons = [f"{cfn_schemas.dotted(p)} is create-only" for p in create_only]
    elif new["Type"] == FILE_SYSTEM:
        _file_system(change, props_old, props_new)
    elif schema.legacy:
        nested = [p for p in change.paths if not p.startswith(("DeletionPolicy", "UpdateReplacePolicy", "Condition"))
                  and ("." in p or "[" in p) and not p.startswith("Tags")]
        if nested:
            change.action = MAY_REPLACE
            change.reasons = [f"the {new['Type']} schema does not say whether {p} can change in place" for p in nested]
    # what the service refuses whatever the schema says: accounting that cannot be turned off
    if new["Type"] == PCS_CLUSTER:
        _pcs_cluster(change, props_old, props_new)
    elif new["Type"] == HYPERPOD_CLUSTER:
        _hyperpod_cluster(change, props_old, props_new)
    return change


PCS_CLUSTER = "AWS::PCS::Cluster"


def _accounting(props: Mapping[str, Any]) -> str:
    found = props.get("SlurmConfiguration", {}).get("Accounting", {}) if isinstance(props, Mapping) else {}
    return str(found.get("Mode", "NONE")) if isinstance(found, Mapping) else "NONE"


def _pcs_cluster(change: Change, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """An AWS PCS cluster whose Slurm accounting goes off (the teams removed): PCS refuses it. Its
    resource schema does not list Accounting as create-only, but "Slurm accounting in AWS PCS" (PCS
    User Guide) says accounting cannot be disabled on a cluster that has it."""
    if _accounting(old) == "STANDARD" and _accounting(new) != "STANDARD":
        change.action = FAILS
        change.reasons = ["Slurm accounting goes off (the spec has no teams any more): AWS PCS cannot turn "
                          "accounting off on a cluster that has it, so the update fails; keep a team, or "
                          "deploy a new cluster"]


HYPERPOD_CLUSTER = "AWS::SageMaker::Cluster"


def _slurm_accounting_database(props: Mapping[str, Any]) -> bool:
    slurm = props.get("Orchestrator", {}).get("Slurm", {}) if isinstance(props, Mapping) else {}
    return isinstance(slurm, Mapping) and bool(slurm.get("AccountingDatabase"))


def _hyperpod_cluster(change: Change, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """A HyperPod Slurm cluster whose accounting database goes away, or whose node provisioning
    leaves Continuous (the teams removed): the update fails. SageMaker HyperPod's documentation
    says an external accounting database, once attached, cannot be detached, and takes it only in
    continuous provisioning."""
    reasons = []
    if _slurm_accounting_database(old) and not _slurm_accounting_database(new):
        reasons.append("the Slurm accounting database goes away (the spec has no teams any more): HyperPod "
                       "cannot detach an accounting database from a cluster, so the update fails; keep a "
                       "team, or deploy a new cluster")
    before, after = old.get("NodeProvisioningMode"), new.get("NodeProvisioningMode")
    if before == "Continuous" and after != "Continuous":
        reasons.append(f"NodeProvisioningMode goes from Continuous to {after or 'the default'}: a cluster with an "
                       "accounting database stays in continuous provisioning, so the update fails; keep a "
                       "team (or the storage key), or deploy a new cluster")
    if reasons:
        change.action, change.reasons = FAILS, reasons


def _file_system(change: Change, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """An FSx for Lustre or OpenZFS (the shared home) file system: in place, replaced, or an update
    that fails (docs/research-notes.md)."""
    for key, updatable in (("LustreConfiguration", fsx.lustre_updatable), ("OpenZFSConfiguration",
                                                                         openzfs.openzfs_updatable)):
        paths = [p for p in change.paths if p.startswith(key + ".")]
        fixed = sorted({p.split(".")[1].split("[")[0] for p in paths} - updatable()) if paths else []
        if fixed:
            change.action = REPLACE
            change.reasons = [f"{key}.{name} is set at creation (FSx's UpdateFileSystem does not take it)"
                              for name in fixed]
            return
    before, after = old.get("StorageCapacity"), new.get("StorageCapacity")
    if isinstance(before, int) and isinstance(after, int) and after < before:
        kind = "OpenZFS" if new.get("FileSystemType") == "OPENZFS" else "Lustre"
        change.action = FAILS
        change.reasons = [f"StorageCapacity goes down from {before} to {after} GiB: FSx for {kind} storage only "
                          "grows, so FSx refuses the update and CloudFormation rolls the stack back"]


def compare(old: Templates, new: Templates, region: str) -> Comparison:
    stacks: list[StackDiff] = []
    produced_old, produced_new = exports(old), exports(new)
    changes: dict[tuple[str, str], Change] = {}
    for name in sorted(set(old) | set(new)):
        before = _resources(old.get(name))
        after = _resources(new.get(name))
        found: list[Change] = []
        for lid in sorted(set(before) | set(after)):
            if lid not in before:
                found.append(Change(name, lid, after[lid]["Type"], ADD, stateful=_stateful(after[lid])[0],
                                    retained=_stateful(after[lid])[1]))
            elif lid not in after:
                stateful, retained = _stateful(before[lid])
                found.append(Change(name, lid, before[lid]["Type"], REMOVE, stateful=stateful, retained=retained))
            else:
                change = _direct(name, lid, canonical(before[lid], old, produced_old),
                                 canonical(after[lid], new, produced_new), region)
                if change:
                    found.append(change)
        changes.update({(c.stack, c.logical_id): c for c in found})
        status = "added" if name not in old else "removed" if name not in new else "changed" if found else "unchanged"
        stacks.append(StackDiff(name, status, found))
    resolver = _Resolver(new, produced_new)
    _follow_references(old, new, changes, region, stacks, resolver)
    _exports_in_use(old, new, changes, stacks, resolver, produced_old)
    keys = data_keys(old, produced_old) | data_keys(new, produced_new)
    for c in changes.values():
        if c.type == KEY:
            c.stateful = (c.stack, c.logical_id) in keys
    return Comparison(stacks, _block_updates(new, stacks), node_rolls=_node_rolls(old, new, changes, stacks, resolver))


def _node_rolls(old: Templates, new: Templates, changes: dict[tuple[str, str], Change], stacks: list[StackDiff],
                resolver: _Resolver) -> list[node_roll.NodeRoll]:
    """The node groups whose running nodes the change replaces, or whose new nodes only take it
    (fmcluster.deploy.node_roll), each marked on its change. A group whose own text is the same
    but whose launch template gets a new version (CloudFormation's LatestVersionNumber), or whose
    scripts' arguments name a replaced resource, is an update of the group too: it is added, with
    what changes at deploy among its paths."""
    replaced = {key for key, c in changes.items() if c.action in (REPLACE, MAY_REPLACE)}
    rolls = node_roll.find(old, new, changes, replaced, resolver.targets)
    by_stack = {s.name: s for s in stacks}
    for roll in rolls:
        change = changes.get((roll.stack, roll.logical_id))
        if change is None:
            resource = _resources(new[roll.stack])[roll.logical_id]
            change = Change(roll.stack, roll.logical_id, resource["Type"], UPDATE)
            changes[(roll.stack, roll.logical_id)] = change
            by_stack[roll.stack].changes.append(change)
            by_stack[roll.stack].changes.sort(key=lambda c: c.logical_id)
            by_stack[roll.stack].status = "changed"
        change.paths += [p for p in roll.implied if p not in change.paths]
        if change.nodes != node_roll.REPLACED:  # a HyperPod cluster holds several groups: the strongest
            change.nodes = roll.effect
    return rolls


def data_keys(templates: Templates, produced: Mapping[str, tuple[str, str]] | None = None) -> set[tuple[str, str]]:
    """The KMS keys (stack, logical id) that encrypt a resource holding data (a bucket's
    encryption, a file system's KmsKeyId), in its stack or through cross-stack references: "their
    keys", which hold the data as much as they do. Another key (the alerts' topic's) holds none."""
    resolver = _Resolver(templates, produced)
    found: set[tuple[str, str]] = set()
    for stack, template in templates.items():
        for resource in _resources(template).values():
            if resource["Type"] != KEY and cfn_schemas.holds_data(resource["Type"]):
                found |= {t for t in resolver.targets(stack, resource.get("Properties", {}))
                          if _resources(templates.get(t[0])).get(t[1], {}).get("Type") == KEY}
    return found


def _block_updates(new: Templates, stacks: list[StackDiff]) -> list[str]:
    """A note for each EKS managed node group on a Capacity Block that the change updates (its
    launch template version, AMI release, labels...): EKS asks for such a group to be at desired
    size 0 while it is updated, since a rolling update needs capacity the block does not have."""
    notes = []
    for s in stacks:
        resources = _resources(new.get(s.name))
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
                    stacks: list[StackDiff], resolver: _Resolver, produced_old: Mapping[str, tuple[str, str]]) -> None:
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


def _resources(template: TemplateBody | None) -> dict[str, dict[str, Any]]:
    return {lid: r for lid, r in (template or {}).get("Resources", {}).items() if r.get("Type") not in IGNORED_TYPES}


def _follow_references(old: Templates, new: Templates, changes: dict[tuple[str, str], Change], region: str,
                       stacks: list[StackDiff], resolver: _Resolver) -> None:
    """Replace what a create-only property ties to a replaced resource, until nothing more changes
    (`resolver` follows references through the new templates)."""
    by_stack = {s.name: s for s in stacks}
    grew = True
    while grew:
        grew = False
        replaced = {key for key, c in changes.items() if c.action in (REPLACE, MAY_REPLACE)}
        for stack in set(old) & set(new):
            before, after = _resources(old[stack]), _resources(new[stack])
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
                    stateful, retained = _stateful(after[lid])
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


# ---- node images ---------------------------------------------------------------------------

IMAGE = "AWS::ImageBuilder::Image"
CDK_PATH = "aws:cdk:path"


def _construct_token(key: str) -> str:
    """How a construct id appears in CDK's logical ids: its letters and digits ('pcs-x86_64' ->
    'pcsx8664')."""
    return re.sub(r"[^A-Za-z0-9]", "", key)


def _of_image(key: str, lid: str, resource: Mapping[str, Any]) -> bool:
    """Whether a resource of NAME-images belongs to the node image `key`: it sits under the construct
    of that key (its construct path where the template keeps it, else its logical id)."""
    path = str(resource.get("Metadata", {}).get(CDK_PATH, ""))
    if path:
        return f"/{key}/" in path
    return _construct_token(key) in lid


PCS_ROLL = ("AWS PCS takes the new AMI as the compute node groups' AMI ({images} hands it to {cluster} by "
            "a cross-stack reference; the groups carry the image's identity, so {cluster} changes with it and "
            "its deploy reads the new AMI); instances launched after the "
            "update (new dynamic nodes, replaced static ones) boot from it, running instances keep the image they "
            "booted from until they are replaced")
HYPERPOD_ROLL = ("SageMaker HyperPod takes the new AMI as the instance groups' ImageId ({images} hands it to "
                 "{cluster} by a cross-stack reference; the cluster carries the image's identity, so {cluster} "
                 "changes with it and its deploy reads the new AMI); running "
                 "nodes keep their image until UpdateClusterSoftware moves them to it: aws sagemaker "
                 "update-cluster-software --cluster-name {name} --image-id AMI (every instance group unless "
                 "--instance-groups names them; it may affect the cluster's availability: plan it around jobs)")
FIRST_ROLL = "the image is new to the deployed cluster: the groups leave the plain base image for the baked one; "
# A weak cross-stack reference is resolved when the consuming stack is created or updated, and a
# later change of the output does not update the consumer (AWS CloudFormation Template Reference,
# "Fn::GetStackOutput"); `cdk deploy` also skips a stack whose template is unchanged.
STILL = ("; caution: {cluster} itself does not change, and CloudFormation reads {images}' AMI only when "
         "{cluster} is updated, so the groups keep the old AMI until then")


def image_rolls(m: model.ClusterModel, comparison: Comparison, old: Templates, new: Templates) -> list[Roll]:
    """The node groups of `m` (the NEW spec's model) that roll to a new build of their node image: the
    image's resources in NAME-images are replaced or new while NAME-cluster is deployed already.
    Derived from NAME-images' changes and the model, as NAME-cluster reads the AMI through a
    cross-stack reference whose text does not change."""
    stacks = {s.key: s.name for s in m.stacks}
    images, cluster = stacks.get(model.IMAGES), stacks.get(model.CLUSTER)
    if images is None or images not in new or cluster not in old:
        return []  # no images, the images stack not synthesized, or nothing deployed to roll
    diff = next(s for s in comparison.stacks if s.name == images)
    consumer_changes = any(s.changes for s in comparison.stacks
                           if s.name == cluster or s.name.startswith(f"{cluster}/"))
    resources = {**_resources(old.get(images)), **_resources(new.get(images))}
    rolls = []
    for image in m.images:
        mine = [c for c in diff.changes if c.logical_id in resources
                and _of_image(image.key, c.logical_id, resources[c.logical_id])]
        built = [c for c in mine if c.type == IMAGE and c.action in (ADD, REPLACE, MAY_REPLACE)]
        if not built:
            continue
        first = not any(r["Type"] == IMAGE and _of_image(image.key, lid, r)
                        for lid, r in _resources(old.get(images)).items())
        note = (PCS_ROLL if image.plane == image_facts.PCS else HYPERPOD_ROLL)
        if not consumer_changes:
            note += STILL
        note = note.format(images=images, cluster=cluster, name=m.name)
        rolls.append(Roll(image.key, image.plane, list(image.groups),
                          [f"{c.type} {c.logical_id} ({LABELS[c.action].lower()})" for c in mine],
                          first=first, note=(FIRST_ROLL if first else "") + note))
    return rolls


# ---- output --------------------------------------------------------------------------------

SYMBOLS = {ADD: "+", REMOVE: "-", UPDATE: "~", REPLACE: "!", MAY_REPLACE: "?", FAILS: "x"}
NODE_FLAGS = {node_roll.REPLACED: " [its nodes are replaced]", node_roll.NEW_ONLY: " [new nodes only]"}
LABELS = {ADD: "add", REMOVE: "remove", UPDATE: "update", REPLACE: "REPLACE", MAY_REPLACE: "MAY REPLACE",
          FAILS: "UPDATE FAILS"}


def _loss_text(c: Change) -> str:
    what = {REMOVE: "removed", REPLACE: "replaced by a new one (the data does not move)",
            MAY_REPLACE: "may be replaced by a new one (the data does not move)"}[c.action]
    if c.retained:
        kept = ("; retained: kept in the account, outside the stack, no longer used by the cluster"
                if c.action == REMOVE else "; the old one is retained outside the stack, no longer used by the cluster")
    else:
        kept = ""
    return f"{c.stack} {c.logical_id} ({c.type}): {what}{kept}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


# How to move the data to the new cluster: the buckets are linked to the file system (data
# repository associations), so the data goes through them. FSx for Lustre exports a linked path's
# files to its bucket with a data repository task (EXPORT_TO_REPOSITORY) and imports what is in
# the bucket (IMPORT_METADATA_FROM_REPOSITORY, or automatically where the link imports); CDK's
# `destroy` deletes a stack, and CloudFormation keeps its retained resources (Amazon FSx for
# Lustre User Guide, "Data repository tasks"; AWS CDK CLI reference, "cdk destroy").
MOVE_HINT = ("to move the data: export the old file system's linked paths to their buckets (aws fsx "
             "create-data-repository-task --type EXPORT_TO_REPOSITORY), deploy NEW, copy each old bucket into "
             "its new one (aws s3 sync s3://OLD-BUCKET s3://NEW-BUCKET), and let the new file system import "
             "it through its links (automatic where a link imports, else a task of type "
             "IMPORT_METADATA_FROM_REPOSITORY); then, after checking them, destroy the old stacks (npx cdk "
             "destroy -c spec=OLD --all): the retained file system, buckets and keys stay in the account "
             "until deleted by hand, the rest goes with the stacks")


@dataclass(frozen=True)
class Verdict:
    """What the comparison comes to, in one line: the last line of the text, the `verdict` of the JSON."""

    kind: str  # ok | data-loss | new-cluster | fails
    refused: bool  # the command exits 1
    line: str


def verdict(report: Comparison, allowed: bool, fmt: str = "text") -> Verdict:
    """An update the service refuses (whatever is allowed) first; then a new cluster (the
    identity changes) or data loss, refused unless allowed; else ok. How to move the data is
    said before the verdict in the text, in new_cluster.hint in the JSON (`fmt`)."""
    failing, loss, moved = report.failing, report.data_loss, report.new_cluster
    if failing:
        also = f" (and {_plural(len(loss), 'stateful resource')} it would replace or remove)" if loss else ""
        return Verdict("fails", True, f"UPDATE FAILS: {_plural(len(failing), 'change')} that the service "
                                      f"refuses{also}; refusing (exit 1): no switch allows it, undo the change")
    allowance = "allowed by --allow-data-loss"
    if moved is not None:
        text = (f"NEW CLUSTER: {', '.join(moved.changes)}: new stacks beside the old ones, which keep "
                f"{_plural(len(moved.left), 'stateful resource')} with the data; the new cluster starts with "
                "empty storage; ")
        return Verdict("new-cluster", not allowed, text + (allowance if allowed else (
            f"refusing (exit 1): move the data ({'above' if fmt == 'text' else 'new_cluster.hint'}), then pass "
            "--allow-data-loss")))
    if loss:
        text = f"DATA LOSS: {_plural(len(loss), 'stateful resource')} replaced or removed; "
        return Verdict("data-loss", not allowed, text + (allowance if allowed else (
            "refusing (exit 1): copy or back up the data first, then pass --allow-data-loss")))
    return Verdict("ok", False, "ok: no stateful resource is replaced or removed")


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


TEAM_NOTES = {
    "removed": "its Slurm account and associations are removed (Slurm refuses while it has jobs), or its "
               "Kubernetes namespace with its queue and every workload in it",
    "changed": "quotas apply to jobs admitted from then on: running jobs keep their GPUs, and a lower "
               "guarantee is reclaimed by preemption only when another team needs the GPUs",
}


def _team_lines(changes: list[TeamChange]) -> list[str]:
    lines = ["teams:"]
    for change in changes:
        lines.append(f"  {change.team} ({change.change}): {'; '.join(change.details)}")
    for kind, note in TEAM_NOTES.items():
        if any(c.change == kind for c in changes):
            lines.append(f"  ({kind}: {note})")
    return lines


def _new_cluster_lines(moved: NewCluster) -> list[str]:
    lines = [f"new cluster: {', '.join(moved.changes)}: deploying NEW creates the stacks above, with new, empty "
             "file systems and buckets, and does not touch the old ones",
             f"  the old stacks stay as deployed ({moved.where}), and keep costing, until destroyed: "
             f"{', '.join(moved.old_stacks) or 'none'}"]
    if moved.left:
        lines.append("  the old cluster's data stays in them:")
        lines += [f"    {c.stack} {c.logical_id} ({c.type})" for c in moved.left]
    lines.append(f"  {MOVE_HINT}")
    return lines


def render_text(report: Comparison, old_name: str, new_name: str, allowed: bool) -> str:
    lines = [f"fmcluster diff: {old_name} -> {new_name}", *[f"note: {n}" for n in report.notes]]
    for s in report.stacks:
        counts = {a: sum(c.action == a for c in s.changes) for a in (ADD, UPDATE, REPLACE, MAY_REPLACE, REMOVE, FAILS)}
        summary = ", ".join(f"{n} {LABELS[a].lower()}" for a, n in counts.items() if n) or "no changes"
        note = {"added": " (new stack)", "removed": " (no longer produced: destroy it to remove its resources)"}
        if "/" in s.name:  # a nested stack comes and goes with its parent's AWS::CloudFormation::Stack
            note = {"added": " (new nested stack)", "removed": " (nested stack: deleted with its resources)"}
        lines.append(f"stack {s.name}{note.get(s.status, '')}: {summary}")
        whole = s.status in ("added", "removed")
        for c in s.changes:
            if whole and not c.data_loss:
                continue
            flag = " [stateful]" if c.stateful and c.action != ADD else ""
            flag += NODE_FLAGS.get(c.nodes, "")
            lines.append(f"  {SYMBOLS[c.action]} {LABELS[c.action]} {c.type} {c.logical_id}{flag}")
            more = [f"... {len(c.paths) - SHOWN_PATHS} more"] if len(c.paths) > SHOWN_PATHS else []
            shown = c.paths[:SHOWN_PATHS] + more
            if shown and c.action != ADD:
                lines.append(f"      changes: {', '.join(shown)}")
            for reason in c.reasons:
                lines.append(f"      because {reason}")
    for roll in report.rolls:
        lines.append(f"node image {roll.image}: node groups {', '.join(roll.groups)} roll to a new image")
        lines += [f"  {change}" for change in roll.changes[:SHOWN_PATHS]]
        if len(roll.changes) > SHOWN_PATHS:
            lines.append(f"  ... {len(roll.changes) - SHOWN_PATHS} more")
        lines.append(f"  {roll.note}")
    lines += node_roll.lines(report.node_rolls)
    if report.teams:
        lines += _team_lines(report.teams)
    if report.new_cluster is not None:
        lines += _new_cluster_lines(report.new_cluster)
    failing = report.failing
    if failing:
        lines.append(f"the service refuses {_plural(len(failing), 'change')}:")
        lines += [f"  {c.stack} {c.logical_id} ({c.type}): {'; '.join(c.reasons)}" for c in failing]
    loss = report.data_loss
    if loss:
        lines.append("replaced or removed, with their data:")
        lines += [f"  {_loss_text(c)}" for c in loss]
    lines.append(verdict(report, allowed).line)
    return "\n".join(lines) + "\n"


def render_json(report: Comparison, old_name: str, new_name: str, allowed: bool) -> str:
    def change(c: Change) -> dict[str, Any]:
        return {**asdict(c), "data_loss": c.data_loss, "fails": c.fails}

    moved = report.new_cluster
    return json.dumps({"old": old_name, "new": new_name, "allow_data_loss": allowed,
                       "verdict": asdict(verdict(report, allowed, "json")),
                       "data_loss": [change(c) for c in report.data_loss],
                       "fails": [change(c) for c in report.failing], "notes": report.notes,
                       "new_cluster": None if moved is None else {
                           "changes": moved.changes, "where": moved.where, "old_stacks": moved.old_stacks,
                           "left": [change(c) for c in moved.left], "hint": MOVE_HINT},
                       "rolls": [asdict(r) for r in report.rolls],
                       "node_rolls": [{**asdict(r), "nodes": r.nodes} for r in report.node_rolls],
                       "teams": [asdict(t) for t in report.teams],
                       "stacks": [{"name": s.name, "status": s.status, "changes": [change(c) for c in s.changes]}
                                  for s in report.stacks]}, indent=2) + "\n"


def refused(report: Comparison, allowed: bool) -> bool:
    """An update the service refuses (whatever is allowed), or a new cluster or data loss not allowed."""
    return verdict(report, allowed).refused


# ---- the command ---------------------------------------------------------------------------

FORMATS = ("text", "json")
Synthesizer = Callable[[ClusterSpec], Templates]  # spec -> stack name -> template
Reader = Callable[[Iterable[str], str], Templates]  # stack names, region -> deployed templates


@dataclass(frozen=True)
class DiffReport:
    old: str  # what is compared: the OLD spec file, or "deployed NAME (REGION)"
    new: str
    allow_data_loss: bool
    comparison: Comparison | None = None  # None when nothing could be compared
    error: str | None = None
    hint: str | None = None
    synthesis_failed: int = 0  # the CDK app's exit code when it failed (it said why on stderr)


NO_SCHEMAS = DiffReport("", "", False, error="fmcluster diff needs the CloudFormation resource schemas that "
                        "cfn-lint ships", hint="pip install cfn-lint (make install does)")


def _where(spec: ClusterSpec) -> str:
    return f"{spec.region}, account {spec.account or 'of the credentials'}"


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
    "hyperpod-slurm": (("check_minutes", "replace", "deep_check"), "the GPU groups' lifecycle scripts change",
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


def new_cluster(changes: list[str], old: ClusterSpec, old_templates: Templates) -> NewCluster:
    """The old cluster that a change of identity leaves behind: its stacks and what holds data in them."""
    keys = data_keys(old_templates)
    left = [Change(stack, lid, r["Type"], "keep", stateful=True, retained=_stateful(r)[1])
            for stack in sorted(old_templates) for lid, r in sorted(_resources(old_templates[stack]).items())
            if cfn_schemas.holds_data(r["Type"]) and (r["Type"] != KEY or (stack, lid) in keys)]
    return NewCluster(changes, _where(old), sorted(n for n in old_templates if "/" not in n), left)


def run_deployed(spec: ClusterSpec, allow_data_loss: bool = False, name: str = "SPEC", *,
                 synthesize: Synthesizer, read: Reader) -> DiffReport:
    """`fmcluster diff --deployed SPEC`: the deployed stacks of the spec's cluster (read by `read`,
    fmcluster.deploy.deployed.read on the command line) against the spec as this code synthesizes it."""
    if not cfn_schemas.available():
        return NO_SCHEMAS
    old_name = f"deployed {spec.name} ({spec.region})"
    try:
        new_templates = synthesize(spec)
    except SynthesisFailed as exc:
        return DiffReport(old_name, name, allow_data_loss, synthesis_failed=exc.code)
    try:
        deployed = read(list(new_templates), spec.region)
    except NotReadable as exc:
        return DiffReport(old_name, name, allow_data_loss,
                          error=f"cannot read the deployed stacks of {spec.name} in {spec.region}: {exc}",
                          hint="it reads the account with the default credentials (cloudformation:GetTemplate and "
                               "DescribeStackResource); set AWS_PROFILE, or compare two specs instead: "
                               "fmcluster diff OLD NEW")
    report = compare(deployed, new_templates, region=spec.region)
    report.rolls = image_rolls(model.resolve(spec), report, deployed, new_templates)
    if not deployed:
        report.notes.append(f"no stack of {spec.name} is deployed in {spec.region}: everything is new")
    return DiffReport(old_name, name, allow_data_loss, report)


def run(old: ClusterSpec, new: ClusterSpec, allow_data_loss: bool = False, names: Iterable[str] = ("OLD", "NEW"),
        *, synthesize: Synthesizer) -> DiffReport:
    """`fmcluster diff OLD NEW`. `synthesize` gives a spec's templates (the command line's runs the
    CDK app: fmcluster.deploy.synth.templates); it is handed in, so that nothing here imports the CDK side."""
    old_name, new_name = names
    if not cfn_schemas.available():
        return NO_SCHEMAS
    try:
        old_templates, new_templates = synthesize(old), synthesize(new)
    except SynthesisFailed as exc:  # the app said why on stderr
        return DiffReport(old_name, new_name, allow_data_loss, synthesis_failed=exc.code)
    changes = identity_changes(old, new)
    # another name, region or account is a new set of stacks, not an update of these: nothing of
    # the old deployment is compared with (or replaced by) the new one, which starts empty
    report = compare({} if changes else old_templates, new_templates, region=new.region)
    if changes:
        report.new_cluster = new_cluster(changes, old, old_templates)
    else:
        resolved = model.resolve(new)
        report.rolls = image_rolls(resolved, report, old_templates, new_templates)
        report.teams = team_changes(model.resolve(old).teams, resolved.teams)
        report.notes.extend(home_notes(old, new))
        report.notes.extend(health_notes(old, new))
    if bool(old.account) != bool(new.account) and not changes:
        given, spec = (old, "OLD") if old.account else (new, "NEW")
        report.notes.append(f"only {spec} names an account ({given.account}); the other deploys to the account of "
                            "the credentials: compared as the same account (if they differ, NEW is a new cluster "
                            "there, with empty storage)")
    return DiffReport(old_name, new_name, allow_data_loss, report)


def render(report: DiffReport, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr): the changes (text or JSON), or on stderr why nothing was compared."""
    if report.comparison is None:
        return "", (f"error: {report.error}\n  hint: {report.hint}\n" if report.error else "")
    render_as = render_json if fmt == "json" else render_text
    return render_as(report.comparison, report.old, report.new, report.allow_data_loss), ""


def exit_code(report: DiffReport) -> int:
    """1 for an update the service refuses (whatever is allowed), for data loss not allowed, or
    when nothing could be compared; the CDK app's own code when it failed."""
    if report.comparison is None:
        return report.synthesis_failed or 1
    return 1 if refused(report.comparison, report.allow_data_loss) else 0
