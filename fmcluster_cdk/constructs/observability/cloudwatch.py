"""CloudWatch alarms for what Prometheus cannot see, and a CloudWatch dashboard of the cluster.

Sources and details: docs/research-notes.md, "fmcluster_cdk/constructs/observability/cloudwatch.py"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from fmcluster_cdk.constructs.observability.capacity import CapacityCountdown

FREE_CAPACITY_FRACTION = 0.10
THROUGHPUT_SATURATION = 0.90
PERIOD = cdk.Duration.minutes(5)
GIB = 1024 ** 3


@dataclass(frozen=True)
class AlarmedFileSystem:
    """The FSx for Lustre file system whose capacity and throughput `ClusterAlarms` watches.

    Props:
        file_system_id: the file system's id (``fs-...``), the `FileSystemId` dimension of its
            AWS/FSx metrics.
            @default required
        capacity_gib: its storage capacity, in GiB (the free-capacity threshold is
            `FREE_CAPACITY_FRACTION` of it).
            @default required
        throughput_mbps: its aggregate throughput, in MB/s (capacity in TiB x throughput per
            TiB; the saturation threshold is `THROUGHPUT_SATURATION` of it).
            @default required
    """

    file_system_id: str
    capacity_gib: int
    throughput_mbps: float


class ClusterAlarms(Construct):
    """The cluster's CloudWatch alarms (docs/research-notes.md) and a dashboard of them.

    Props:
        name: the cluster's name, in the alarm names (``fmcluster-NAME-fsx-free-capacity``, ...;
            CloudWatch: at most 255 characters) and the dashboard name (``fmcluster-NAME``,
            1 to 255 characters).
            @default required
        topic: the SNS topic every alarm notifies, in ALARM and again in OK.
            @default required
        file_system: the FSx for Lustre file system to watch; None adds no FSx alarms.
            @default required
        nat_gateway_id: the NAT gateway to watch (``nat-...``, the `NatGatewayId` dimension);
            None adds no NAT alarms.
            @default required
        countdown: the countdown to the ends of the cluster's Capacity Blocks and training plans:
            its alarms notify the topic too and are on the dashboard, its widgets in a row of their own.
            @default None: no countdown

    Attributes:
        alarms: the alarms (`cw.Alarm`), FSx first, the countdown's last.
        widgets: the dashboard's metric graphs.
        dashboard: the CloudWatch dashboard: the alarms' states, then the graphs, then the countdown's.
    """

    def __init__(self, scope: Construct, construct_id: str, *, name: str, topic: sns.ITopic,
                 file_system: Optional[AlarmedFileSystem], nat_gateway_id: Optional[str],
                 countdown: Optional[CapacityCountdown] = None) -> None:
        super().__init__(scope, construct_id)
        self.alarms: list[cw.Alarm] = []
        self.widgets: list[cw.IWidget] = []
        action = cw_actions.SnsAction(topic)
        if file_system is not None:
            self._fsx(name, file_system.file_system_id, file_system.capacity_gib, file_system.throughput_mbps)
        if nat_gateway_id is not None:
            self._nat(name, nat_gateway_id)
        if countdown is not None:
            self.alarms += countdown.alarms
        for alarm in self.alarms:
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
        rows: list[list[cw.IWidget]] = [[cw.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=24)],
                                        self.widgets]
        if countdown is not None:
            rows.append(countdown.widgets)
        self.dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=f"fmcluster-{name}", widgets=rows)

    def _fsx(self, name: str, file_system_id: str, capacity_gib: int, throughput_mbps: float) -> None:
        def metric(metric_name: str, statistic: str, label: str) -> cw.Metric:
            return cw.Metric(namespace="AWS/FSx", metric_name=metric_name, statistic=statistic, period=PERIOD,
                             dimensions_map={"FileSystemId": file_system_id}, label=label)

        free = metric("FreeDataStorageCapacity", "Minimum", "free bytes")
        self.alarms.append(cw.Alarm(
            self, "FsxFreeCapacity", metric=free, alarm_name=f"fmcluster-{name}-fsx-free-capacity",
            alarm_description=f"FSx for Lustre of {name}: less than {FREE_CAPACITY_FRACTION:.0%} free. "
                              "Delete scratch data, export and release files, or grow the file system.",
            threshold=capacity_gib * GIB * FREE_CAPACITY_FRACTION, evaluation_periods=1,
            comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING))
        throughput = cw.MathExpression(
            expression="(read + write) / PERIOD(read) / 1000000", label="MB/s",
            using_metrics={"read": metric("DataReadBytes", "Sum", "read"),
                           "write": metric("DataWriteBytes", "Sum", "write")}, period=PERIOD)
        self.alarms.append(cw.Alarm(
            self, "FsxThroughputSaturation", metric=throughput, alarm_name=f"fmcluster-{name}-fsx-throughput",
            alarm_description=f"FSx for Lustre of {name}: above {THROUGHPUT_SATURATION:.0%} of its "
                              f"{throughput_mbps:.0f} MB/s for 15 minutes. Jobs wait on I/O: raise throughput "
                              "per TiB or capacity, or stagger checkpoints.",
            threshold=round(throughput_mbps * THROUGHPUT_SATURATION, 1), evaluation_periods=3,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING))
        self.widgets += [
            cw.GraphWidget(title="FSx free capacity (bytes)", left=[free], width=8),
            cw.GraphWidget(title=f"FSx throughput (MB/s, of {throughput_mbps:.0f})", left=[throughput], width=8)]

    def _nat(self, name: str, nat_gateway_id: str) -> None:
        def metric(metric_name: str) -> cw.Metric:
            return cw.Metric(namespace="AWS/NATGateway", metric_name=metric_name, statistic="Sum", period=PERIOD,
                             dimensions_map={"NatGatewayId": nat_gateway_id})

        ports = metric("ErrorPortAllocation")
        self.alarms.append(cw.Alarm(
            self, "NatPortAllocation", metric=ports, alarm_name=f"fmcluster-{name}-nat-port-allocation",
            alarm_description=f"NAT gateway of {name} could not allocate source ports: connections to the "
                              "internet fail. Use VPC endpoints (S3, ECR) or spread destinations.",
            threshold=0, evaluation_periods=1, comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING))
        self.widgets.append(cw.GraphWidget(title="NAT gateway errors", width=8,
                                           left=[ports, metric("PacketsDropCount")]))
