"""The scaler of an EKS managed node group on a Capacity Block (the handler:
handlers/capacity_block_scaler).

Sources and details: docs/research-notes.md, "fmcluster_cdk/constructs/compute/capacity_blocks.py"."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from fmcluster_cdk.constructs.lambda_code import handler_code
from fmcluster_cdk.constructs.observability.workspace import CAPACITY_BLOCK_EVENTS
from fmcluster_cdk.errors import ConstructError

HANDLER = Path(__file__).with_name("handlers") / "capacity_block_scaler"


class CapacityBlockScaler(Construct):
    """Keeps one EKS managed node group at its Capacity Block's size while the block is active and
    ends more than `drain_minutes` from now, and at 0 otherwise; nothing changes while the hold
    parameter exists. The function (Python 3.14, 1 minute, 128 MB, logs kept one month) may read
    Capacity Blocks, describe and scale that one node group, and read that one parameter.

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

    Attributes:
        function: the handler (`lambda_.Function`).
        rules: the EventBridge rules that run it (`events.Rule`: the block's events, the schedule).
    """

    def __init__(self, scope: Construct, construct_id: str, *, cluster_name: str, nodegroup_name: str,
                 nodegroup_arn: str, reservation_id: str, size: int, hold_parameter: str,
                 drain_minutes: int = 45, every_minutes: int = 5) -> None:
        super().__init__(scope, construct_id)
        if drain_minutes < 40 or size < 1 or every_minutes < 1:
            raise ConstructError(self, "drain at least 40 minutes before the end (EC2's warning), a size of 1 or more, "
                             "and a schedule of a minute or more")
        stack = cdk.Stack.of(self)
        log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_MONTH,
                                  removal_policy=cdk.RemovalPolicy.DESTROY)
        self.function = lambda_.Function(
            self, "Handler", runtime=lambda_.Runtime.PYTHON_3_14, handler="index.handler",
            code=handler_code(HANDLER), timeout=cdk.Duration.minutes(1), memory_size=128, log_group=log_group,
            description=f"keeps an EKS node group at the size of Capacity Block {reservation_id} while it is active",
            environment={"CLUSTER": cluster_name, "NODEGROUP": nodegroup_name, "RESERVATION": reservation_id,
                         "SIZE": str(size), "HOLD_PARAMETER": hold_parameter, "DRAIN_MINUTES": str(drain_minutes)})
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
