"""What changing each field of the spec does to a deployed cluster: one update policy per field.

POLICIES holds every field of the spec's models (ClusterSpec and each section below it), by
dotted path with `[]` for the items of a list (`node_groups[].instance_type`), a section too
(adding or removing it). A field's policy is its cases, in order: what a change does (an
effect), on which control planes, when (in words, and as a check of the OLD and NEW specs), what
it replaces, and whether the running nodes of a node group are reached. The first case that
holds for OLD and NEW, on NEW's control plane, is what the change does. The effects, mildest
first (EFFECTS): nothing to deploy, update in place (a resource removed that holds no data
too), roll a group's nodes (its running nodes are replaced, or only its new nodes take the
change), replace a resource (one that holds no data), lose data (a resource that holds users'
data is replaced or removed), new cluster (new stacks beside the old ones), refused (the service
refuses the update, whatever is allowed).

It says what fmcluster's stacks do today, as `fmcluster diff` sees in their templates; what a
change does to each resource is still judged from the templates (fmcluster.deploy.diff.rules),
and tests/deploy/test_update_claims.py holds each case against them. A case marked `unseen` is
one the templates do not show (`fmcluster diff` says it in a note). Read by `fmcluster diff`
(fmcluster.deploy.diff.notes: the fields that make a new cluster, those whose change reaches
running nodes), the stack policy of NAME-storage (fmcluster.deploy.stack_policy: what a storage
change replaces or removes with the data) and the spec reference (docs/gen_reference.py).

Its modules, bottom up: cases (the effects, the control planes, Case and Policy), checks (whether
a case holds for two specs), table (POLICIES, and how to read it). They import one another
directly, never this package; the package imports only fmcluster.spec.models and fmcluster.facts.
Here are the names other code uses."""

from __future__ import annotations

from fmcluster.spec.update_policy.cases import (
    DATA_LOSS,
    EFFECTS,
    EKS,
    HYPERPOD_EKS,
    HYPERPOD_SLURM,
    IN_PLACE,
    KUBERNETES,
    MEANINGS,
    NEW_CLUSTER,
    NOTHING,
    PCS,
    PLANES,
    REFUSED,
    REPLACE,
    ROLL,
    SLURM,
    Case,
    Policy,
)
from fmcluster.spec.update_policy.table import POLICIES, field_paths, fields, lost_with_data, policy, value

__all__ = [
    "DATA_LOSS", "EFFECTS", "EKS", "HYPERPOD_EKS", "HYPERPOD_SLURM", "IN_PLACE", "KUBERNETES", "MEANINGS",
    "NEW_CLUSTER", "NOTHING", "PCS", "PLANES", "POLICIES", "REFUSED", "REPLACE", "ROLL", "SLURM", "Case", "Policy",
    "field_paths", "fields", "lost_with_data", "policy", "value",
]
