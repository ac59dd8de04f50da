"""CloudWatch alarms for what Prometheus cannot see, and a CloudWatch dashboard of the cluster.

- FSx for Lustre: free capacity below `FREE_CAPACITY_FRACTION` of the file system, and
  throughput saturation: read + write bytes per second above `THROUGHPUT_SATURATION` of the
  file system's aggregate throughput (capacity in TiB x throughput per TiB) for 15 minutes.
- NAT gateway: port allocation errors (ErrorPortAllocation: the gateway ran out of source ports
  to one destination; pulls of images, datasets or packages fail) and dropped packets.

Every alarm notifies `topic_arn` (and again when it recovers).

Plain `CfnResource`s (constructs_lib/cfn.py) at the paths `cloudwatch.Alarm` and
`cloudwatch.Dashboard` give theirs, written as those constructs write them: a metric is a dict
(`metric()`), rendered into an alarm's properties (`alarm_metrics`) or a graph's lines
(`graph_lines`); the dashboard body is JSON with the alarms' ARNs and the stack's region as
tokens (`Stack.to_json_string`), widgets laid out in rows as `cloudwatch.Dashboard` lays them.
`aws_cdk.aws_cloudwatch` is not loaded for three alarms and a dashboard.
"""

from __future__ import annotations

from typing import Mapping, Optional

import aws_cdk as cdk
from constructs import Construct

from constructs_lib import cfn

FREE_CAPACITY_FRACTION = 0.10
THROUGHPUT_SATURATION = 0.90
PERIOD_S = 300
GIB = 1024 ** 3
# The dashboard's grid: 24 units wide; an alarm status row 3 high, graphs 6 high.
ALARM_ROW = {"width": 24, "height": 3}
GRAPH_HEIGHT = 6


def metric(namespace: str, name: str, dimension: tuple[str, str], statistic: str,
           label: Optional[str] = None) -> dict:
    """One metric over `PERIOD_S`, of one dimension (name, value)."""
    return {"namespace": namespace, "name": name, "dimension": dimension, "statistic": statistic,
            "label": label}


def _metric_stat(m: dict) -> dict:
    name, value = m["dimension"]
    return {"Metric": {"Namespace": m["namespace"], "MetricName": m["name"],
                       "Dimensions": [{"Name": name, "Value": value}]},
            "Period": PERIOD_S, "Stat": m["statistic"]}


def alarm_metrics(m: dict, expression: Optional[tuple[str, str]] = None,
                  using: Optional[Mapping[str, dict]] = None) -> dict:
    """The metric properties of an alarm on one metric, or on a math `expression` (label, text)
    over the metrics `using` ({id: metric}). A metric with a label goes in `Metrics`."""
    if expression is not None:
        label, text = expression
        return {"Metrics": [{"Id": "expr_1", "Label": label, "Expression": text, "ReturnData": True}] + [
            {"Id": key, "Label": used["label"], "MetricStat": _metric_stat(used), "ReturnData": False}
            for key, used in (using or {}).items()]}
    if m["label"] is not None:
        return {"Metrics": [{"Id": "m1", "Label": m["label"], "MetricStat": _metric_stat(m), "ReturnData": True}]}
    name, value = m["dimension"]
    return {"Namespace": m["namespace"], "MetricName": m["name"], "Dimensions": [{"Name": name, "Value": value}],
            "Period": PERIOD_S, "Statistic": m["statistic"]}


def _graph_line(m: dict, key: Optional[str] = None) -> list:
    name, value = m["dimension"]
    options = {"label": m["label"]} if m["label"] is not None else {}
    if key is not None:  # a metric an expression uses: named, and not drawn itself
        options |= {"id": key, "visible": False}
    return [m["namespace"], m["name"], name, value, options | {"stat": m["statistic"]}]


def graph_lines(m: dict, expression: Optional[tuple[str, str]] = None,
                using: Optional[Mapping[str, dict]] = None) -> list:
    """The `metrics` of a graph widget of what `alarm_metrics` alarms on (or of several metrics
    without expression: one line each)."""
    if expression is not None:
        label, text = expression
        return [[{"label": label, "expression": text}]] + [_graph_line(used, key) for key, used in using.items()]
    return [_graph_line(m)]


class ClusterAlarms(Construct):
    """`file_system`: (id, capacity GiB, aggregate throughput MB/s) or None; `nat_gateway_id`.
    `tags`: the cluster's tags, on the alarms and the dashboard."""

    def __init__(self, scope: Construct, construct_id: str, *, name: str, topic_arn: str,
                 file_system: Optional[tuple[str, int, float]], nat_gateway_id: Optional[str],
                 tags: Mapping[str, str]) -> None:
        super().__init__(scope, construct_id)
        self.topic_arn, self.tags = topic_arn, tags
        self.alarms: list[cdk.CfnResource] = []
        self.graphs: list[tuple[str, list]] = []  # (title, metrics) of each graph widget
        if file_system is not None:
            self._fsx(name, *file_system)
        if nat_gateway_id is not None:
            self._nat(name, nat_gateway_id)
        self.dashboard = cfn.l2_resource(self, "Dashboard", "AWS::CloudWatch::Dashboard", {
            "DashboardName": f"fmcluster-{name}", "DashboardBody": self._dashboard_body(),
            "Tags": cfn.tags(tags)})

    def _alarm(self, construct_id: str, metrics: dict, *, alarm_name: str, description: str, threshold: float,
               evaluation_periods: int, comparison: str) -> None:
        """An alarm that notifies the topic when it fires and when it recovers; missing data is
        not breaching."""
        self.alarms.append(cfn.l2_resource(self, construct_id, "AWS::CloudWatch::Alarm", {
            **metrics, "AlarmName": alarm_name, "AlarmDescription": description, "Threshold": threshold,
            "EvaluationPeriods": evaluation_periods, "ComparisonOperator": comparison,
            "TreatMissingData": "notBreaching", "AlarmActions": [self.topic_arn], "OKActions": [self.topic_arn],
            "Tags": cfn.tags(self.tags)}))

    def _fsx(self, name: str, file_system_id: str, capacity_gib: int, throughput_mbps: float) -> None:
        def fsx_metric(metric_name: str, statistic: str, label: str) -> dict:
            return metric("AWS/FSx", metric_name, ("FileSystemId", file_system_id), statistic, label)

        free = fsx_metric("FreeDataStorageCapacity", "Minimum", "free bytes")
        self._alarm("FsxFreeCapacity", alarm_metrics(free), alarm_name=f"fmcluster-{name}-fsx-free-capacity",
                    description=f"FSx for Lustre of {name}: less than {FREE_CAPACITY_FRACTION:.0%} free. "
                                "Delete scratch data, export and release files, or grow the file system.",
                    threshold=capacity_gib * GIB * FREE_CAPACITY_FRACTION, evaluation_periods=1,
                    comparison="LessThanThreshold")
        throughput = {"expression": ("MB/s", "(read + write) / PERIOD(read) / 1000000"),
                      "using": {"read": fsx_metric("DataReadBytes", "Sum", "read"),
                                "write": fsx_metric("DataWriteBytes", "Sum", "write")}}
        self._alarm("FsxThroughputSaturation", alarm_metrics(None, **throughput),
                    alarm_name=f"fmcluster-{name}-fsx-throughput",
                    description=f"FSx for Lustre of {name}: above {THROUGHPUT_SATURATION:.0%} of its "
                                f"{throughput_mbps:.0f} MB/s for 15 minutes. Jobs wait on I/O: raise throughput "
                                "per TiB or capacity, or stagger checkpoints.",
                    threshold=round(throughput_mbps * THROUGHPUT_SATURATION, 1), evaluation_periods=3,
                    comparison="GreaterThanThreshold")
        self.graphs += [("FSx free capacity (bytes)", graph_lines(free)),
                        (f"FSx throughput (MB/s, of {throughput_mbps:.0f})", graph_lines(None, **throughput))]

    def _nat(self, name: str, nat_gateway_id: str) -> None:
        def nat_metric(metric_name: str) -> dict:
            return metric("AWS/NATGateway", metric_name, ("NatGatewayId", nat_gateway_id), "Sum")

        ports = nat_metric("ErrorPortAllocation")
        self._alarm("NatPortAllocation", alarm_metrics(ports), alarm_name=f"fmcluster-{name}-nat-port-allocation",
                    description=f"NAT gateway of {name} could not allocate source ports: connections to the "
                                "internet fail. Use VPC endpoints (S3, ECR) or spread destinations.",
                    threshold=0, evaluation_periods=1, comparison="GreaterThanThreshold")
        self.graphs.append(("NAT gateway errors",
                            graph_lines(ports) + graph_lines(nat_metric("PacketsDropCount"))))

    def _dashboard_body(self) -> str:
        """An alarm status row of every alarm, then the graphs side by side, 8 wide each (three
        to a row, as `cloudwatch.Row` lays them), as `cloudwatch.Dashboard` writes the JSON."""
        widgets = [{"type": "alarm", **ALARM_ROW, "x": 0, "y": 0,
                    "properties": {"title": "Alarms", "alarms": [cfn.attribute(a, "Arn") for a in self.alarms]}}]
        for index, (title, lines) in enumerate(self.graphs):
            widgets.append({"type": "metric", "width": 8, "height": GRAPH_HEIGHT, "x": 8 * (index % 3),
                            "y": ALARM_ROW["height"] + GRAPH_HEIGHT * (index // 3),
                            "properties": {"view": "timeSeries", "title": title, "region": cdk.Aws.REGION,
                                           "metrics": lines, "yAxis": {}}})
        return cdk.Stack.of(self).to_json_string({"widgets": widgets})
