"""The scaler of an EKS managed node group on a Capacity Block (the handler:
handlers/capacity_block_scaler).

Sources and details: docs/research-notes.md, "fmcluster_cdk/constructs/compute/capacity_blocks.py"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from fmcluster_cdk.constructs.eks.cluster import NodeRepair
from fmcluster_cdk.constructs.lambda_code import handler_code
from fmcluster_cdk.constructs.observability.workspace import CAPACITY_BLOCK_EVENTS
from fmcluster_cdk.errors import ConstructError

HANDLER = Path(__file__).with_name("handlers") / "capacity_block_scaler"


class CapacityBlockScaler(Construct):
    """Keeps one EKS managed node group at its Capacity Block's size while the block is active and
    ends more than `drain_minutes` from now, and at 0 otherwise; nothing changes while the hold
    parameter exists. With `node_repair`, it also turns the group's EKS node auto repair off from
    `block_guard_minutes` before the block's end (and while the block is not active), and back on
    while the block is active with more time left: a node replaced in the block's last hour would
    not be ready before EC2 ends the block. The function (Python 3.14, 1 minute, 128 MB, logs kept
    one month) may read Capacity Blocks, describe and update that one node group (its scaling, its
    node repair), and read that one parameter.

    Props:
        cluster_name: the EKS cluster's name.
            @default required
        nodegroup_name: the managed node group's name (its `NodegroupName` attribute).
            @default required
        nodegroup_arn: the node group's ARN (the function may describe and scale it only).
            @default required
        reservation_id: the Capacity Block (``cr-...``).
            @default required
        size: the node group's size while the block is active (at most the block's instances).
            @default required
        hold_parameter: the SSM parameter (``/fmcluster/...``) whose existence holds the scaling.
            @default required
        drain_minutes: how long before the block's end the group goes to 0: more than EC2's 30,
            at least its 40-minute warning, so that pods are drained before EC2 terminates.
            @default 45
        every_minutes: how often the function reconciles besides the block's events.
            @default 5
        node_repair: the group's node auto repair while the block has more than
            `block_guard_minutes` left (`NodeRepair.api()`, limits kept when turned off).
            @default None: repair is not wanted; the function leaves it alone
        block_guard_minutes: no node repair from this long before the block's end (1 or more).
            @default 60

    Attributes:
        function: the handler (`lambda_.Function`).
        rules: the EventBridge rules that run it (`events.Rule`: the block's events, the schedule).
    """

    def __init__(self, scope: Construct, construct_id: str, *, cluster_name: str, nodegroup_name: str,
                 nodegroup_arn: str, reservation_id: str, size: int, hold_parameter: str,
                 drain_minutes: int = 45, every_minutes: int = 5, node_repair: Optional[NodeRepair] = None,
                 block_guard_minutes: int = 60) -> None:
        super().__init__(scope, construct_id)
        if drain_minutes < 40 or size < 1 or every_minutes < 1:
            raise ConstructError(self, "drain at least 40 minutes before the end (EC2's warning), a size of 1 or more, "
                             "and a schedule of a minute or more")
        if block_guard_minutes < 1 or (node_repair is not None and not node_repair.enabled):
            raise ConstructError(self, "a repair guard of a minute or more, and node repair (when given) enabled")
        stack = cdk.Stack.of(self)
        log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_MONTH,
                                  removal_policy=cdk.RemovalPolicy.DESTROY)
        self.function = lambda_.Function(
            self, "Handler", runtime=lambda_.Runtime.PYTHON_3_14, handler="index.handler",
            code=handler_code(HANDLER), timeout=cdk.Duration.minutes(1), memory_size=128, log_group=log_group,
            description=f"keeps an EKS node group at the size of Capacity Block {reservation_id} while it is active",
            environment={"CLUSTER": cluster_name, "NODEGROUP": nodegroup_name, "RESERVATION": reservation_id,
                         "SIZE": str(size), "HOLD_PARAMETER": hold_parameter, "DRAIN_MINUTES": str(drain_minutes),
                         "REPAIR": json.dumps(node_repair.api(), sort_keys=True) if node_repair else "",
                         "BLOCK_GUARD_MINUTES": str(block_guard_minutes)})
        self.function.add_to_role_policy(iam.PolicyStatement(
            sid="ReadCapacityBlocks", actions=["ec2:DescribeCapacityReservations"], resources=["*"]))
        self.function.add_to_role_policy(iam.PolicyStatement(
            sid="ScaleTheNodeGroup", actions=["eks:DescribeNodegroup", "eks:UpdateNodegroupConfig"],
            resources=[nodegroup_arn]))
        self.function.add_to_role_policy(iam.PolicyStatement(
            sid="ReadTheHold", actions=["ssm:GetParameter"],
            resources=[stack.format_arn(service="ssm", resource="parameter",
                                        resource_name=hold_parameter.lstrip("/"))]))
        target = targets.LambdaFunction(self.function, retry_attempts=2)
        self.rules = [
            events.Rule(self, "BlockEvents", description=f"{reservation_id}: delivered, or ending: rescale",
                        event_pattern=events.EventPattern(
                            source=["aws.ec2"], detail_type=list(CAPACITY_BLOCK_EVENTS),
                            detail={"capacity-reservation-id": [reservation_id]}),
                        targets=[target]),
            events.Rule(self, "Schedule", description=f"{reservation_id}: reconcile the node group's size",
                        schedule=events.Schedule.rate(cdk.Duration.minutes(every_minutes)), targets=[target]),
        ]
