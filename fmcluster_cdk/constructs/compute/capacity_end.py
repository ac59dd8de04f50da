"""The end of a node group's reserved capacity handled on Kubernetes (the handler:
handlers/capacity_end): the group's nodes tainted and their pods evicted with their grace period,
its Kueue flavor closed and the workloads that ran there requeued, from `signal_minutes` before
the end of its Capacity Block or training plan.

Sources and details: docs/research-notes.md, "fmcluster_cdk/constructs/compute/capacity_end.py"."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from fmcluster_cdk.constructs.eks.cluster import GroupAccessEntry
from fmcluster_cdk.constructs.lambda_code import handler_code
from fmcluster_cdk.constructs.observability.workspace import CAPACITY_BLOCK_EVENTS
from fmcluster_cdk.errors import ConstructError

HANDLER = Path(__file__).with_name("handlers") / "capacity_end"


class KubernetesCapacityEnd(Construct):
    """A function that handles the end of one node group's Capacity Block (`reservation_id`) or
    SageMaker training plan (`training_plan_arn`) inside the Kubernetes cluster: from
    `signal_minutes` before the end it taints the group's nodes NoSchedule, evicts their pods
    through the Eviction API, adds the taint to the group's Kueue ResourceFlavor and deactivates,
    then reactivates, the Kueue workloads admitted there; an end that moves later (an extension)
    undoes the taints. The function (Python 3.14, 2 minutes, 256 MB, logs kept one month) runs in
    the cluster's VPC (the API server's private endpoint: the public one may admit only
    `public_access_cidrs`), every `every_minutes` and on the block's EventBridge events. Its role
    may describe that cluster, read that capacity's end, and nothing else in AWS; in Kubernetes,
    its EKS access entry (no access policy) puts it in `kubernetes_group`, whose ClusterRole says
    what it may do there.

    Props:
        cluster_name: the EKS cluster's name (in the stack's account and region; eks:DescribeCluster
            gives its endpoint and CA).
            @default required
        group: the node group's name: its nodes' label value and the taint's value.
            @default required
        flavor: the group's Kueue ResourceFlavor.
            @default required
        node_label: the label key whose value is `group` on the group's nodes.
            @default required
        taint_key: the key of the taint on the nodes and the flavor, and of the label on the workloads
            the function deactivated.
            @default required
        signal_minutes: how long before the capacity's end the pods get their signal (1 or more).
            @default required
        kubernetes_group: the Kubernetes group of the function's access entry (not ``system:...``).
            @default required
        vpc: the cluster's VPC.
            @default required
        subnets: the subnets the function runs in (they reach the API server and, through NAT, AWS).
            @default required
        security_groups: the function's security groups (the cluster security group: the API
            server's private endpoint admits it).
            @default required
        reservation_id: the Capacity Block (``cr-...``).
            @default None: `training_plan_arn` is required
        training_plan_arn: the SageMaker training plan.
            @default None: `reservation_id` is required
        plan_instance_type: the group's instance type as the training plan names it (``ml.TYPE``): the
            end is that of the plan's reserved capacity of this type.
            @default None: required with `training_plan_arn`
        every_minutes: how often the function runs (the signal comes at most this late).
            @default 2

    Attributes:
        function: the handler (`lambda_.Function`).
        access_entry: the function role's `GroupAccessEntry`.
        rules: the EventBridge rules that run it (`events.Rule`: the schedule, and a block's events).
    """

    def __init__(self, scope: Construct, construct_id: str, *, cluster_name: str, group: str,
                 flavor: str, node_label: str, taint_key: str, signal_minutes: int, kubernetes_group: str,
                 vpc: ec2.IVpc, subnets: Sequence[ec2.ISubnet], security_groups: Sequence[ec2.ISecurityGroup],
                 reservation_id: Optional[str] = None, training_plan_arn: Optional[str] = None,
                 plan_instance_type: Optional[str] = None, every_minutes: int = 2) -> None:
        super().__init__(scope, construct_id)
        if (reservation_id is None) == (training_plan_arn is None) or (
                (training_plan_arn is None) != (plan_instance_type is None)):
            raise ConstructError(self, "give the Capacity Block (reservation_id) or the training plan "
                                       "(training_plan_arn, with plan_instance_type), not both")
        if signal_minutes < 1 or every_minutes < 1 or not subnets:
            raise ConstructError(self, "a signal a minute or more before the end, a schedule of a minute or more, "
                                       "and subnets to run in")
        capacity = reservation_id or str(training_plan_arn)
        log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_MONTH,
                                  removal_policy=cdk.RemovalPolicy.DESTROY)
        source = ({"RESERVATION": reservation_id} if reservation_id else
                  {"TRAINING_PLAN": str(training_plan_arn), "PLAN_INSTANCE_TYPE": str(plan_instance_type)})
        self.function = lambda_.Function(
            self, "Handler", runtime=lambda_.Runtime.PYTHON_3_14, handler="index.handler",
            code=handler_code(HANDLER), timeout=cdk.Duration.minutes(2), memory_size=256, log_group=log_group,
            description=f"handles the end of {capacity} on the Kubernetes nodes of {group}",
            vpc=vpc, vpc_subnets=ec2.SubnetSelection(subnets=list(subnets)), security_groups=list(security_groups),
            environment={"CLUSTER": cluster_name, "GROUP": group, "FLAVOR": flavor, "NODE_LABEL": node_label,
                         "TAINT_KEY": taint_key, "SIGNAL_MINUTES": str(signal_minutes), **source})
        self.function.add_to_role_policy(iam.PolicyStatement(
            sid="FindTheApiServer", actions=["eks:DescribeCluster"],
            resources=[cdk.Stack.of(self).format_arn(service="eks", resource="cluster", resource_name=cluster_name)]))
        if reservation_id:
            self.function.add_to_role_policy(iam.PolicyStatement(
                sid="ReadCapacityBlocks", actions=["ec2:DescribeCapacityReservations"], resources=["*"]))
        else:
            self.function.add_to_role_policy(iam.PolicyStatement(
                sid="ReadTheTrainingPlan", actions=["sagemaker:DescribeTrainingPlan"],
                resources=[str(training_plan_arn)]))
        role = self.function.role
        assert role is not None  # the function's own
        self.access_entry = GroupAccessEntry(self, "AccessEntry", cluster_name=cluster_name,
                                             principal_arn=role.role_arn, kubernetes_groups=[kubernetes_group])
        target = targets.LambdaFunction(self.function, retry_attempts=2)
        self.rules = [events.Rule(
            self, "Schedule", description=f"{capacity}: handle its end on the nodes of {group}",
            schedule=events.Schedule.rate(cdk.Duration.minutes(every_minutes)), targets=[target])]
        if reservation_id:
            self.rules.append(events.Rule(
                self, "BlockEvents", description=f"{reservation_id}: delivered, or ending: handle its end",
                event_pattern=events.EventPattern(source=["aws.ec2"], detail_type=list(CAPACITY_BLOCK_EVENTS),
                                                  detail={"capacity-reservation-id": [reservation_id]}),
                targets=[target]))
