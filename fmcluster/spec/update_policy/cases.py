"""The words of the update policy: the effects of a change, the control planes, the types of
resources the cases name, a case and a field's policy (its cases, in order)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from fmcluster.spec.models import ClusterSpec

NOTHING, IN_PLACE, ROLL = "nothing to deploy", "update in place", "roll a group's nodes"
REPLACE, DATA_LOSS, NEW_CLUSTER, REFUSED = "replace a resource", "lose data", "new cluster", "refused"
EFFECTS = (NOTHING, IN_PLACE, ROLL, REPLACE, DATA_LOSS, NEW_CLUSTER, REFUSED)  # mildest first
MEANINGS = {
    NOTHING: "the stacks' templates stay as they are (validate, the plan or the kit read it)",
    IN_PLACE: "CloudFormation updates resources in place, adds them, or removes ones that hold no data",
    ROLL: "a node group's running nodes are replaced, or only its new nodes take the change",
    REPLACE: "CloudFormation replaces a resource that holds no data (a new one, a new id)",
    DATA_LOSS: "a resource that holds users' data is replaced or removed: `fmcluster diff` and the change-set "
               "guard refuse it unless allowed (--allow-data-loss)",
    NEW_CLUSTER: "new stacks beside the old ones, with new, empty storage; the old ones keep the data",
    REFUSED: "the service refuses the update and the stack rolls back, whatever is allowed",
}

PCS, HYPERPOD_SLURM, EKS, HYPERPOD_EKS = "pcs", "hyperpod-slurm", "eks", "hyperpod-eks"
PLANES = (PCS, HYPERPOD_SLURM, EKS, HYPERPOD_EKS)
SLURM, KUBERNETES, HYPERPOD = (PCS, HYPERPOD_SLURM), (EKS, HYPERPOD_EKS), (HYPERPOD_SLURM, HYPERPOD_EKS)

FILE_SYSTEM, VOLUME, BUCKET = "AWS::FSx::FileSystem", "AWS::FSx::Volume", "AWS::S3::Bucket"
LINK, SECURITY_GROUP, KEY = "AWS::FSx::DataRepositoryAssociation", "AWS::EC2::SecurityGroup", "AWS::KMS::Key"
DATABASE, SECRET = "AWS::RDS::DBInstance", "AWS::SecretsManager::Secret"
PLACEMENT_GROUP, NODEGROUP = "AWS::EC2::PlacementGroup", "AWS::EKS::Nodegroup"

Check = Callable[[ClusterSpec, ClusterSpec], bool]  # (OLD, NEW) -> whether a case holds


@dataclass(frozen=True)
class Case:
    effect: str  # one of EFFECTS
    note: str = ""  # what the change does, in words
    planes: tuple[str, ...] = ()  # the control planes it holds on (NEW's); () for every one
    when: str = ""  # the condition, in words; `check` decides it
    check: Check | None = None
    nodes: tuple[str, ...] = ()  # the planes where the running nodes of a node group are reached too
    resources: tuple[str, ...] = ()  # CloudFormation types it replaces or removes (those it names)
    unseen: bool = False  # the templates do not show it: `fmcluster diff` says it in a note

    def holds(self, old: ClusterSpec, new: ClusterSpec) -> bool:
        plane = new.orchestrator.type
        return (not self.planes or plane in self.planes) and (self.check is None or self.check(old, new))

    def text(self) -> str:
        where = f" on {', '.join(self.planes)}" if self.planes else ""
        when = f" when {self.when}" if self.when else ""
        return f"{self.effect}{where}{when}" + (f": {self.note}" if self.note else "")


@dataclass(frozen=True)
class Policy:
    """A field's cases, in order (none for a section that is always there: its fields say it)."""

    cases: tuple[Case, ...] = ()

    def case(self, old: ClusterSpec, new: ClusterSpec) -> Case | None:
        """The first case that holds for OLD and NEW, on NEW's control plane."""
        return next((c for c in self.cases if c.holds(old, new)), None)

    def effect(self, old: ClusterSpec, new: ClusterSpec) -> str:
        found = self.case(old, new)
        return found.effect if found else NOTHING

    def reaches_nodes(self, old: ClusterSpec, new: ClusterSpec) -> bool:
        found = self.case(old, new)
        return found is not None and new.orchestrator.type in found.nodes

    def text(self) -> str:
        return "; ".join(c.text() for c in self.cases) if self.cases else "as its fields"
