"""The change of one resource present in both templates: update in place, replace (a type
change, a create-only property of its CloudFormation resource schema, a property of a file
system that FSx's UpdateFileSystem does not take), may replace (no schema, a nested property of a
legacy schema), or fail (what the service refuses whatever the schema says)."""

from __future__ import annotations

from typing import Any, Mapping

from fmcluster.deploy import cfn_schemas
from fmcluster.deploy.diff.changes import (
    COMPARED_KEYS,
    FAILS,
    FILE_SYSTEM,
    MAY_REPLACE,
    REPLACE,
    UPDATE,
    Change,
    stateful_and_retained,
)
from fmcluster.facts import fsx, openzfs
from fmcluster.spec.update_policy.checks import kubernetes_update_refused


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


def direct_change(stack: str, lid: str, old: Mapping[str, Any], new: Mapping[str, Any], region: str) -> Change | None:
    """The change of one resource present in both templates, before references are followed
    (cross-stack references in both already `canonical`)."""
    paths = _shown([p for key in COMPARED_KEYS for p in changed_paths(old.get(key), new.get(key), key)])
    if not paths and old["Type"] == new["Type"]:
        return None
    stateful, retained = stateful_and_retained(new)
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
    elif new["Type"] == EKS_CLUSTER:
        _eks_cluster(change, props_old, props_new)
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


EKS_CLUSTER = "AWS::EKS::Cluster"


def _eks_cluster(change: Change, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """An Amazon EKS cluster whose Kubernetes version goes down, or up by more than one minor
    version: its resource schema takes Version in place, but EKS refuses the update
    (fmcluster.spec.update_policy.checks.kubernetes_update_refused)."""
    before, after = old.get("Version"), new.get("Version")
    if not (isinstance(before, str) and isinstance(after, str)):
        return
    why = kubernetes_update_refused(before, after)
    if why:
        change.action, change.reasons = FAILS, [f"{why}, so the update fails; go through each minor version in "
                                                "turn (a lower one needs a new cluster)"]


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
