"""What destroy finds and does: each stack's part in the plan, the plan, a failure and the report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from fmcluster.deploy import retained
from fmcluster.deploy.nodes import Node
from fmcluster.deploy.retained import Resource
from fmcluster.facts import prices

Clients = Callable[[str], Any]
Sleep = Callable[[float], None]
Say = Callable[[str], None]

DELETE, KEEP, ABSENT, DELETED = "delete", "keep", "absent", "deleted"  # a stack's part in the plan
RETAINED = ("Retain", "RetainExceptOnCreate")
DELETE_COMPLETE, DELETE_FAILED = "DELETE_COMPLETE", "DELETE_FAILED"
DELETABLE_WHILE = ("DELETE_IN_PROGRESS", "REVIEW_IN_PROGRESS")  # in progress, yet deleting is what it takes
# What a deleted stack may leave in the VPC of the stacks before it (their network interfaces, or
# the VPC itself): while one stays, the network cannot be deleted
IN_THE_VPC = ("AWS::FSx::FileSystem", "AWS::EC2::SecurityGroup", "AWS::RDS::DBInstance", "AWS::RDS::DBSubnetGroup")
HOW_TO_GO_ON = "fix the cause, then run fmcluster destroy again: it goes on from where it stopped"


@dataclass(frozen=True)
class Stack:
    """One stack of the cluster, as the account has it."""

    name: str
    key: str  # the model's (network, storage, ...)
    action: str  # DELETE, KEEP, ABSENT (never deployed) or DELETED (deleted before this run)
    why: str = ""  # why it is kept, or what deleting it involves
    status: str = ""  # CloudFormation's
    stack_id: str = ""
    protected: bool = False  # termination protection on
    data: tuple[Resource, ...] = ()  # what holds data in it
    left: tuple[Resource, ...] = ()  # what CloudFormation leaves (or left) in the account when it is deleted
    costs: tuple[Resource, ...] = ()  # what bills while the stack is kept


@dataclass(frozen=True)
class Plan:
    cluster: str
    region: str
    account: str
    with_data: bool
    stacks: tuple[Stack, ...]  # in the order they are deleted: the reverse of the deploy order
    nodes: tuple[Node, ...]  # up, compute groups' first (read when NAME-cluster is to be deleted)
    table: prices.PriceTable
    nodes_unread: str = ""  # why the nodes could not be read ("" where they were, or need not be)

    @property
    def deleting(self) -> tuple[Stack, ...]:
        return tuple(s for s in self.stacks if s.action == DELETE)

    @property
    def removed(self) -> tuple[Resource, ...]:
        """What is deleted after its stack, in order: what it left behind with `with_data`, else
        only what holds no data (its node images)."""
        return tuple(r for s in self.stacks if s.action in (DELETE, DELETED) for r in self.removed_after(s))

    def removed_after(self, stack: Stack) -> list[Resource]:
        return [r for r in retained.deletion_order(list(stack.left)) if self.with_data or r.swept]

    @property
    def kept(self) -> tuple[Resource, ...]:
        """What stays in the account and bills: the kept stacks' resources that cost, and what
        CloudFormation leaves behind."""
        out: list[Resource] = []
        for stack in self.stacks:
            if stack.action == KEEP:
                out += stack.costs
            elif not self.with_data:
                out += [r for r in stack.left if r.goes_with is None and not r.swept]
        return tuple(out)

    @property
    def compute_nodes(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.compute)

    @property
    def busy(self) -> tuple[Stack, ...]:
        """Stacks being created, updated or rolled back: not deleted under CloudFormation's feet."""
        return tuple(s for s in self.stacks if s.status.endswith("_IN_PROGRESS") and s.status not in DELETABLE_WHILE)


@dataclass(frozen=True)
class Failure:
    where: str  # a stack, or a resource and its stack
    reason: str
    hint: str


@dataclass(frozen=True)
class DestroyReport:
    path: str  # the spec's file, as the command line named it
    plan: Optional[Plan]
    dry_run: bool = False
    refused: Optional[Failure] = None  # nothing was deleted: a guard, or the account could not be read
    failed: Optional[Failure] = None  # a step failed, after those in `done`
    done: tuple[str, ...] = ()  # what was deleted, in order
    plan_shown: bool = False  # the plan was printed before anything was done (render leaves it out)
