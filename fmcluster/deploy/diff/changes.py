"""What `fmcluster diff` finds, as data: the actions a resource change takes, one resource's
change, the image and node-group rolls, a new cluster, the teams' changes, and the comparison of
every stack; with the two facts of a resource every other module reads (its resources, whether it
holds data and is retained)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from fmcluster.deploy import cfn_schemas, node_roll

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


LABELS = {ADD: "add", REMOVE: "remove", UPDATE: "update", REPLACE: "REPLACE", MAY_REPLACE: "MAY REPLACE",
          FAILS: "UPDATE FAILS"}



def resources_of(template: TemplateBody | None) -> dict[str, dict[str, Any]]:
    return {lid: r for lid, r in (template or {}).get("Resources", {}).items() if r.get("Type") not in IGNORED_TYPES}



def stateful_and_retained(resource: Mapping[str, Any]) -> tuple[bool, bool]:
    """Whether it holds users' data (cfn_schemas.DATA_TYPES: a retained log group or security
    group does not), and whether CloudFormation keeps it when it leaves the stack."""
    retained = resource.get("DeletionPolicy") in RETAINED or resource.get("UpdateReplacePolicy") in RETAINED
    return cfn_schemas.holds_data(resource["Type"]), retained
