"""The NAME-observability stack: Amazon Managed Service for Prometheus with the alert rules of
the repository, alerts and alarms to an SNS topic, optional Amazon Managed Grafana with the
repository's dashboards, CloudWatch alarms and a dashboard for FSx and the NAT gateway, and the
countdown to each Capacity Block's and training plan's end (a metric, its alarms, its widgets).

Sources and details: docs/research-notes.md, "fmcluster_cdk/stacks/observability.py"."""

from __future__ import annotations

from typing import Any, Optional

import aws_cdk as cdk
from constructs import Construct

from fmcluster import observability
from fmcluster.facts.controlplanes import CAPACITY_BLOCK
from fmcluster.model.cluster import ClusterModel
from fmcluster.observability import capacity as capacity_end
from fmcluster_cdk.constructs.observability.capacity import CapacityCountdown, CountdownAlarm, CountedCapacity
from fmcluster_cdk.constructs.observability.cloudwatch import AlarmedFileSystem, ClusterAlarms
from fmcluster_cdk.constructs.observability.workspace import AlertTopic, CapacityBlockEvents, PrometheusWorkspace
from fmcluster_cdk.stacks.refs import NetworkRefs, StorageRefs

SLURM_PLANES = ("pcs", "hyperpod-slurm")
SLURM_TEAMS_DASHBOARD = "slurm-teams"  # fmcluster/observability/dashboards/slurm-teams.json


def rule_namespaces(cluster: str) -> dict[str, str]:
    """{NAME-FILE: rule file text} for every rule file of the repository."""
    return {f"{cluster}-{path.stem}": observability.rule_file_text(path) for path in observability.rule_files()}


class ObservabilityStack(cdk.Stack):
    """Attributes: workspace_arn, workspace_id, remote_write_url, alert_topic_arn, grafana_url
    (None without Grafana), countdown (the countdown to the ends of the Capacity Blocks and
    training plans; None without one)."""

    def __init__(self, scope: Construct, construct_id: str, *, model: ClusterModel, network: NetworkRefs,
                 storage: StorageRefs, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        spec = model.spec
        obs = spec.observability
        self.topic = AlertTopic(self, "Alerts", name=spec.name, email=obs.alert_email)
        self.prometheus = PrometheusWorkspace(self, "Prometheus", alias=spec.name, rules=rule_namespaces(spec.name),
                                              topic=self.topic, tags=dict(model.tags))
        self.workspace_arn: str = self.prometheus.workspace_arn
        self.workspace_id: str = self.prometheus.workspace_id
        self.remote_write_url: str = self.prometheus.remote_write_url
        self.alert_topic_arn: str = self.topic.topic_arn
        self.grafana_url: Optional[str] = None
        if obs.grafana:
            self._grafana(spec.name, slurm_teams=bool(model.teams) and model.control_plane.type in SLURM_PLANES)

        lustre = spec.storage.lustre
        file_system = None
        if lustre is not None and storage.file_system_id:
            file_system = AlarmedFileSystem(storage.file_system_id, lustre.storage_capacity_gib, lustre.throughput_mbps)
        self.countdown = self._countdown(model)
        self.alarms = ClusterAlarms(self, "Alarms", name=spec.name, topic=self.topic.topic, file_system=file_system,
                                    nat_gateway_id=getattr(network, "nat_gateway_id", None), countdown=self.countdown)
        blocks = [g.capacity.reservation_id for g in model.node_groups
                  if g.capacity.type == CAPACITY_BLOCK and g.capacity.reservation_id]
        if blocks:  # EC2 says when each block starts and when its instances are about to go
            CapacityBlockEvents(self, "CapacityBlocks", name=spec.name, reservation_ids=blocks, topic=self.topic)

        for output_id, value, what in (
                ("PrometheusWorkspaceId", self.workspace_id, "Amazon Managed Service for Prometheus workspace"),
                ("PrometheusEndpoint", self.prometheus.endpoint, "Prometheus query endpoint (SigV4)"),
                ("RemoteWriteUrl", self.remote_write_url, "remote-write URL of the collectors"),
                ("AlertTopicArn", self.alert_topic_arn, "SNS topic of alerts and alarms"),
                ("CloudWatchDashboard", f"https://{self.region}.console.aws.amazon.com/cloudwatch/home?region="
                 f"{self.region}#dashboards/dashboard/fmcluster-{spec.name}", "CloudWatch dashboard")):
            cdk.CfnOutput(self, output_id, value=value, description=f"{spec.name}: {what}")

    def _countdown(self, model: ClusterModel) -> Optional[CapacityCountdown]:
        """The countdown to each Capacity Block's and training plan's end
        (fmcluster.observability.capacity); None where there is none to count down to."""
        counted = capacity_end.counted(model)
        if not counted:
            return None
        name = model.spec.name
        capacities = [CountedCapacity(
            capacity=c.capacity, label=c.label, reservation_id=c.reservation_id, training_plan_arn=c.training_plan_arn,
            instance_types=c.instance_types,
            alarms=tuple(CountdownAlarm(name=capacity_end.alarm_name(name, c.capacity, t.suffix), hours=t.hours,
                                        description=t.meaning) for t in c.thresholds()))
            for c in counted]
        return CapacityCountdown(self, "CapacityCountdown", cluster=name, capacities=capacities,
                                 namespace=capacity_end.NAMESPACE, metric_name=capacity_end.METRIC,
                                 every_minutes=capacity_end.EVERY_MINUTES, period_minutes=capacity_end.PERIOD_MINUTES)

    def _grafana(self, name: str, slurm_teams: bool = False) -> None:
        from fmcluster_cdk.constructs.observability.grafana import GrafanaProvisioner, GrafanaWorkspace

        self.grafana = GrafanaWorkspace(self, "Grafana", name=name, prometheus_workspace_arn=self.workspace_arn)
        # the teams' dashboard only where Slurm's accounting has teams to show
        dashboards = {path.stem: path.read_text(encoding="utf-8") for path in observability.dashboard_files()
                      if path.stem != SLURM_TEAMS_DASHBOARD or slurm_teams}
        self.provisioner = GrafanaProvisioner(self, "GrafanaProvisioner", workspace=self.grafana,
                                              prometheus_endpoint=self.prometheus.endpoint, dashboards=dashboards)
        self.grafana_url = self.grafana.url
        cdk.CfnOutput(self, "GrafanaUrl", value=self.grafana_url,
                      description=f"{name}: Amazon Managed Grafana (sign in with IAM Identity Center)")
