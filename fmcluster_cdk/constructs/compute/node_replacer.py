"""The node replacer of a Slurm cluster (the handler: handlers/node_replacer; the nodes' sender:
fmcluster/node/scripts/boot/programs/request-replacement.sh): nodes drained for a hardware fault ask
on a queue, one function decides and replaces them, a few at a time, never in a Capacity Block's
last hour, with a record of each decision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Optional

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from fmcluster_cdk.constructs.lambda_code import handler_code
from fmcluster_cdk.errors import ConstructError

HANDLER = Path(__file__).with_name("handlers") / "node_replacer"
PLANES = ("pcs", "hyperpod-slurm")
NAMESPACE = "fmcluster"  # the handler's metric namespace (NodesReplaced)
RETENTION = cdk.Duration.days(4)  # a request not decided in four days is dropped (SQS's default retention)
MAX_RECEIVES = 100  # a message received this often without a decision goes to the dead-letter queue


def queue_name(cluster_name: str) -> str:
    return f"{cluster_name}-node-replacements"


def ledger_parameter(cluster_name: str) -> str:
    """The SSM parameter holding the replacements under way (JSON), which the function keeps."""
    return f"/fmcluster/{cluster_name}/node-replacements"


class NodeReplacer(Construct):
    """Replaces the nodes of one Slurm cluster that its node health check drained for a hardware
    fault. Nodes send requests to the queue (``grant_send``); the function, every `every_minutes`
    (its runs never overlap: a minute at most, never retried), checks each request's instance is the
    cluster's, keeps a node whose Capacity Block (HyperPod: training plan) ends within
    `block_guard_minutes`, defers while `max_replacing` replacements started within
    `window_minutes` (a ledger in an SSM parameter), and otherwise replaces it: SageMaker HyperPod
    by BatchReplaceClusterNodes. On AWS PCS only static nodes ask (a dynamic node is powered down
    through Slurm by the node itself), and PCS documents no replacement of a static node's
    instance: the function keeps it drained and logs why (it never terminates an instance). Each
    decision is a JSON line in the function's log group, kept one year, and each replacement the
    metric NodesReplaced (namespace fmcluster). The function (Python 3.14, 1 minute, 128 MB) may
    only: take and delete the queue's messages, describe EC2 instances and Capacity Reservations,
    list and replace the HyperPod cluster's nodes, read the groups' training plans, keep the ledger
    and put metrics in the fmcluster namespace.

    Props:
        cluster_name: the cluster's name (the instances' fmcluster:cluster tag; HyperPod's cluster name).
            @default required
        plane: ``pcs`` or ``hyperpod-slurm``.
            @default required
        max_replacing: replacements under way at once, at most.
            @default required
        window_minutes: how long a replacement counts as under way.
            @default required
        block_guard_minutes: a node whose Capacity Block ends within this many minutes is kept.
            @default required
        hyperpod_cluster_arn: the HyperPod cluster's ARN (required on hyperpod-slurm).
            @default None
        training_plan_arns: HyperPod instance group name -> its training plan's ARN.
            @default {}
        kms_key_arn: the key the queue is encrypted with (None: SQS-managed keys).
            @default None
        every_minutes: how often the function reads the queue.
            @default 5

    Attributes:
        queue: the requests' queue (`sqs.Queue`, NAME-node-replacements).
        dead_letters: the queue's dead-letter queue (`sqs.Queue`).
        ledger: the SSM parameter of the replacements under way (`ssm.StringParameter`).
        log_group: the function's log group, the record of every decision (`logs.LogGroup`).
        function: the handler (`lambda_.Function`).
        rule: the EventBridge schedule that runs it (`events.Rule`).
    """

    def __init__(self, scope: Construct, construct_id: str, *, cluster_name: str, plane: str, max_replacing: int,
                 window_minutes: int, block_guard_minutes: int, hyperpod_cluster_arn: Optional[str] = None,
                 training_plan_arns: Optional[Mapping[str, str]] = None, kms_key_arn: Optional[str] = None,
                 every_minutes: int = 5) -> None:
        super().__init__(scope, construct_id)
        if plane not in PLANES:
            raise ConstructError(self, f"plane {plane!r}: the node replacer serves {', '.join(PLANES)}")
        if plane == "hyperpod-slurm" and not hyperpod_cluster_arn:
            raise ConstructError(self, "a HyperPod cluster's replacer needs the cluster's ARN")
        if max_replacing < 1 or window_minutes < 1 or block_guard_minutes < 0 or every_minutes < 1:
            raise ConstructError(self, "at least one replacement at a time, a window and a schedule of a minute "
                                       "or more, and no negative guard")
        plans = dict(training_plan_arns or {})
        key = kms.Key.from_key_arn(self, "Key", kms_key_arn) if kms_key_arn else None
        encryption = dict(encryption=sqs.QueueEncryption.KMS, encryption_master_key=key) if key else \
            dict(encryption=sqs.QueueEncryption.SQS_MANAGED)
        self.dead_letters = sqs.Queue(self, "DeadLetters", retention_period=cdk.Duration.days(14),
                                      enforce_ssl=True, **encryption)
        self.queue = sqs.Queue(
            self, "Queue", queue_name=queue_name(cluster_name), retention_period=RETENTION, enforce_ssl=True,
            visibility_timeout=cdk.Duration.minutes(5),
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dead_letters, max_receive_count=MAX_RECEIVES),
            **encryption)
        self.ledger = ssm.StringParameter(
            self, "Ledger", parameter_name=ledger_parameter(cluster_name), string_value='{"replacing":[]}',
            description=f"node replacements under way in {cluster_name} (kept by its node replacer)")
        self.log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_YEAR,
                                       removal_policy=cdk.RemovalPolicy.RETAIN)
        self.function = lambda_.Function(
            self, "Handler", runtime=lambda_.Runtime.PYTHON_3_14, handler="index.handler",
            code=handler_code(HANDLER), timeout=cdk.Duration.minutes(1), memory_size=128, log_group=self.log_group,
            description=f"replaces the nodes of {cluster_name} drained for a hardware fault",
            environment={"CLUSTER": cluster_name, "PLANE": plane, "QUEUE_URL": self.queue.queue_url,
                         "LEDGER_PARAMETER": ledger_parameter(cluster_name), "MAX_REPLACING": str(max_replacing),
                         "WINDOW_MINUTES": str(window_minutes), "BLOCK_GUARD_MINUTES": str(block_guard_minutes),
                         "BATCH": "50", "TRAINING_PLANS": json.dumps(plans, sort_keys=True)})
        policy = self.function.add_to_role_policy
        policy(iam.PolicyStatement(sid="TakeRequests", resources=[self.queue.queue_arn], actions=[
            "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"]))
        if key is not None:
            policy(iam.PolicyStatement(sid="ReadRequests", actions=["kms:Decrypt"], resources=[key.key_arn]))
        policy(iam.PolicyStatement(sid="KeepTheLedger", actions=["ssm:GetParameter", "ssm:PutParameter"],
                                   resources=[self.ledger.parameter_arn]))
        policy(iam.PolicyStatement(sid="CountReplacements", actions=["cloudwatch:PutMetricData"], resources=["*"],
                                   conditions={"StringEquals": {"cloudwatch:namespace": NAMESPACE}}))
        if plane == "pcs":
            policy(iam.PolicyStatement(sid="ReadInstances", resources=["*"], actions=[
                "ec2:DescribeInstances", "ec2:DescribeCapacityReservations"]))
        else:
            assert hyperpod_cluster_arn is not None
            policy(iam.PolicyStatement(sid="ReplaceTheClustersNodes", resources=[hyperpod_cluster_arn], actions=[
                "sagemaker:ListClusterNodes", "sagemaker:BatchReplaceClusterNodes"]))
            if plans:
                policy(iam.PolicyStatement(sid="ReadTrainingPlans", actions=["sagemaker:DescribeTrainingPlan"],
                                           resources=sorted(set(plans.values()))))
        self.rule = events.Rule(
            self, "Schedule", description=f"{cluster_name}: decide the nodes' replacement requests",
            schedule=events.Schedule.rate(cdk.Duration.minutes(every_minutes)),
            targets=[targets.LambdaFunction(self.function, retry_attempts=0)])

    def grant_send(self, role: iam.IRole) -> iam.Grant:
        """Let `role` (the nodes') send requests to the queue."""
        return self.queue.grant_send_messages(role)
