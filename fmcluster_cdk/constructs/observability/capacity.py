"""A countdown to the end of each Capacity Block and training plan of a cluster: a scheduled
function that puts the hours left as a metric (the handler: handlers/capacity_countdown), an
alarm pair per capacity and the dashboard's widgets of it.

Sources and details: docs/research-notes.md, "fmcluster_cdk/constructs/observability/capacity.py"."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from fmcluster_cdk.constructs.lambda_code import handler_code
from fmcluster_cdk.errors import ConstructError

HANDLER = Path(__file__).with_name("handlers") / "capacity_countdown"
CLUSTER_DIMENSION, CAPACITY_DIMENSION = "Cluster", "Capacity"  # as the handler puts them


@dataclass(frozen=True)
class CountdownAlarm:
    """One alarm of a counted capacity: in ALARM while fewer than `hours` are left.

    Props:
        name: the alarm's name (CloudWatch: at most 255 characters).
            @default required
        hours: the threshold, in hours left.
            @default required
        description: what it means and what to do (CloudWatch: at most 1024 characters).
            @default required
    """

    name: str
    hours: float
    description: str


@dataclass(frozen=True)
class CountedCapacity:
    """A Capacity Block or a training plan whose end is counted down to: exactly one of
    `reservation_id` and `training_plan_arn`.

    Props:
        capacity: the metric's `Capacity` dimension (``cr-...``, or the training plan's name).
            @default required
        label: how the dashboard names it.
            @default required
        alarms: its alarms.
            @default required
        reservation_id: the Capacity Block (``cr-...``): its EndDate is read.
            @default None
        training_plan_arn: the training plan: the end of its reserved capacity of each of
            `instance_types` is read, the first to end counted (the function may describe it only).
            @default None
        instance_types: the training plan's instance types that node groups run on (``ml.TYPE``).
            @default ()
    """

    capacity: str
    label: str
    alarms: tuple[CountdownAlarm, ...]
    reservation_id: Optional[str] = None
    training_plan_arn: Optional[str] = None
    instance_types: tuple[str, ...] = ()


class CapacityCountdown(Construct):
    """Counts down to the end of each of `capacities`: EC2 and SageMaker publish no metric of it.
    A function (Python 3.14, 1 minute, 128 MB, logs kept one month), run every `every_minutes`,
    reads each end (DescribeCapacityReservations, DescribeTrainingPlan) and puts the hours left as
    `metric_name` in `namespace` (dimensions ``Cluster`` and ``Capacity``); each capacity's alarms
    take the minimum over `period_minutes`. The function may read reservations (no resource-level
    permission exists), describe the named training plans only, and put metrics in `namespace`
    only (condition ``cloudwatch:namespace``).

    Props:
        cluster: the cluster's name, the metric's ``Cluster`` dimension.
            @default required
        capacities: what is counted down to; at least one.
            @default required
        namespace: the metric's namespace.
            @default required
        metric_name: the metric's name.
            @default required
        every_minutes: how often the function reads the ends (1 or more).
            @default 5
        period_minutes: the alarms' and widgets' period, at least `every_minutes`.
            @default 15

    Attributes:
        function: the handler (`lambda_.Function`).
        rule: the EventBridge rule that runs it (`events.Rule`).
        metrics: each capacity's metric (`cw.Metric`), by its `capacity`.
        alarms: every capacity's alarms (`cw.Alarm`), in order; they have no action here.
        widgets: the dashboard's widgets of the countdown.
    """

    def __init__(self, scope: Construct, construct_id: str, *, cluster: str, capacities: Sequence[CountedCapacity],
                 namespace: str, metric_name: str, every_minutes: int = 5, period_minutes: int = 15) -> None:
        super().__init__(scope, construct_id)
        if not capacities or every_minutes < 1 or period_minutes < every_minutes:
            raise ConstructError(self, "a capacity or more, read every minute or more, over a period of at least "
                                       "one reading")
        if any((c.reservation_id is None) == (c.training_plan_arn is None) for c in capacities):
            raise ConstructError(self, "each capacity names exactly one of reservation_id and training_plan_arn")
        reservations = [c.reservation_id for c in capacities if c.reservation_id]
        plans = sorted({c.training_plan_arn for c in capacities if c.training_plan_arn})
        log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_MONTH,
                                  removal_policy=cdk.RemovalPolicy.DESTROY)
        read = [{"capacity": c.capacity, **({"reservation_id": c.reservation_id} if c.reservation_id else
                                            {"training_plan": str(c.training_plan_arn).rsplit("/", 1)[-1],
                                             "instance_types": sorted(set(c.instance_types))})}
                for c in capacities]
        self.function = lambda_.Function(
            self, "Handler", runtime=lambda_.Runtime.PYTHON_3_14, handler="index.handler",
            code=handler_code(HANDLER), timeout=cdk.Duration.minutes(1), memory_size=128, log_group=log_group,
            description=f"fmcluster {cluster}: hours to the end of each Capacity Block and training plan",
            environment={"CLUSTER": cluster, "NAMESPACE": namespace, "METRIC": metric_name,
                         "CAPACITIES": json.dumps(read, sort_keys=True)})
        if reservations:
            self.function.add_to_role_policy(iam.PolicyStatement(
                sid="ReadCapacityBlocks", actions=["ec2:DescribeCapacityReservations"], resources=["*"]))
        if plans:
            self.function.add_to_role_policy(iam.PolicyStatement(
                sid="ReadTrainingPlans", actions=["sagemaker:DescribeTrainingPlan"], resources=plans))
        self.function.add_to_role_policy(iam.PolicyStatement(
            sid="PutTheCountdown", actions=["cloudwatch:PutMetricData"], resources=["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": namespace}}))
        self.rule = events.Rule(self, "Schedule", description=f"fmcluster {cluster}: count down to capacity ends",
                                schedule=events.Schedule.rate(cdk.Duration.minutes(every_minutes)),
                                targets=[targets.LambdaFunction(self.function, retry_attempts=2)])
        period = cdk.Duration.minutes(period_minutes)
        self.metrics: dict[str, cw.Metric] = {}
        self.alarms: list[cw.Alarm] = []
        for c in capacities:
            metric = cw.Metric(namespace=namespace, metric_name=metric_name, statistic="Minimum", period=period,
                               dimensions_map={CLUSTER_DIMENSION: cluster, CAPACITY_DIMENSION: c.capacity},
                               label=c.label)
            self.metrics[c.capacity] = metric
            for i, alarm in enumerate(c.alarms):
                self.alarms.append(cw.Alarm(
                    self, f"Alarm-{c.capacity}-{i}", metric=metric, alarm_name=alarm.name,
                    alarm_description=alarm.description, threshold=alarm.hours, evaluation_periods=1,
                    comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
                    treat_missing_data=cw.TreatMissingData.MISSING))
        day = max((a.hours for c in capacities for a in c.alarms), default=None)  # the longest threshold
        metrics = list(self.metrics.values())
        self.widgets: list[cw.IWidget] = [
            cw.SingleValueWidget(title="Hours to capacity end", metrics=metrics, width=8),
            cw.GraphWidget(title="Hours to capacity end", left=metrics, width=16,
                           left_y_axis=cw.YAxisProps(min=0),
                           left_annotations=[cw.HorizontalAnnotation(value=day, label=f"{day:g} h")] if day else None),
        ]
