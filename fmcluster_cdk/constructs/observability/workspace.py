"""Amazon Managed Service for Prometheus: the workspace, its alert rules and alert manager, and
the SNS topic alerts go to.

Sources and details: docs/research-notes.md, "fmcluster_cdk/constructs/observability/workspace.py"."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Protocol

import aws_cdk as cdk
import yaml
from aws_cdk import aws_aps as aps
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from fmcluster_cdk.errors import ConstructError

REMOTE_WRITE_ACTIONS = ["aps:RemoteWrite"]
QUERY_ACTIONS = ["aps:QueryMetrics", "aps:GetSeries", "aps:GetLabels", "aps:GetMetricMetadata"]
ALERT_GROUP_BY = ["cluster", "alertname", "node"]
TOPIC_KEY_PENDING_DAYS = 7


class _Block(str):
    """A string YAML writes as a literal block (`|`), as AMP's envelope shows it."""


class _EnvelopeDumper(yaml.SafeDumper):
    pass


_EnvelopeDumper.add_representer(
    _Block, lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", str(text), style="|"))


def alertmanager_config(topic_arn: str, region: str) -> dict[str, Any]:
    """Alertmanager's configuration: every alert to the SNS topic (SigV4 in the workspace's region),
    grouped by cluster, alert and node."""
    return {
        "route": {"receiver": "sns", "group_by": ALERT_GROUP_BY, "group_wait": "30s",
                  "group_interval": "5m", "repeat_interval": "4h"},
        "receivers": [{"name": "sns", "sns_configs": [{
            "topic_arn": topic_arn,
            "sigv4": {"region": region},
            "subject": "[{{ .CommonLabels.severity }}] {{ .CommonLabels.alertname }} ({{ .CommonLabels.cluster }})",
            "attributes": {"severity": "{{ .CommonLabels.severity }}"},
        }]}],
    }


def alertmanager_definition(topic_arn: str, region: str) -> str:
    """The alert manager definition AMP takes: its YAML envelope (`alertmanager_config: |`) around
    `alertmanager_config`'s YAML."""
    config = yaml.safe_dump(alertmanager_config(topic_arn, region), sort_keys=False, width=1 << 16)
    return yaml.dump({"alertmanager_config": _Block(config)}, Dumper=_EnvelopeDumper, sort_keys=False,
                     width=1 << 16)


class AlertDestination(Protocol):
    """Where a workspace's alert manager sends alerts (`AlertTopic` is one).

    Members: `topic_arn` (the SNS topic's ARN) and `allow_alert_manager(workspace_arn)` (lets
    that workspace's alert manager, and no other, publish to it).
    """

    @property
    def topic_arn(self) -> str: ...

    def allow_alert_manager(self, workspace_arn: str) -> None: ...


class AlertTopic(Construct):
    """SNS topic (KMS-encrypted) for alarms and alerts; `email` subscribed when given.

    The topic requires TLS (`enforce_ssl`); its key rotates yearly and is deleted with the stack,
    after a pending window of `TOPIC_KEY_PENDING_DAYS` days (KMS: 7 to 30).

    Props:
        name: the cluster's name, in the topic's display name (``fmcluster NAME alerts``: SNS
            allows at most 100 characters) and the key's description.
            @default required
        email: an address subscribed to the topic (SNS protocol ``email``).
            @default None: no subscription

    Attributes:
        key: the topic's KMS key (`kms.Key`), usable by CloudWatch and Amazon Managed Service for
            Prometheus of this account.
        topic: the `sns.Topic`.
        topic_arn: the topic's ARN.
    """

    def __init__(self, scope: Construct, construct_id: str, *, name: str, email: Optional[str] = None) -> None:
        super().__init__(scope, construct_id)
        account = cdk.Stack.of(self).account
        # Notifications only: nothing is stored under this key beyond SNS's delivery retries, so
        # it goes with the stack (after the pending window) instead of being retained.
        self.key = kms.Key(self, "Key", description=f"fmcluster {name}: alert notifications (SNS)",
                           enable_key_rotation=True, removal_policy=cdk.RemovalPolicy.DESTROY,
                           pending_window=cdk.Duration.days(TOPIC_KEY_PENDING_DAYS))
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid="AlarmsAndAlertManagerPublish", actions=["kms:Decrypt", "kms:GenerateDataKey*"], resources=["*"],
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com"), iam.ServicePrincipal("aps.amazonaws.com")],
            conditions={"StringEquals": {"aws:SourceAccount": account}}))
        self.topic = sns.Topic(self, "Topic", display_name=f"fmcluster {name} alerts", master_key=self.key,
                               enforce_ssl=True)
        self.topic.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsPublish", actions=["sns:Publish"], resources=[self.topic.topic_arn],
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            conditions={"StringEquals": {"aws:SourceAccount": account}}))
        if email:
            sns.Subscription(self, "Email", topic=self.topic, protocol=sns.SubscriptionProtocol.EMAIL, endpoint=email)

    @property
    def topic_arn(self) -> str:
        return self.topic.topic_arn

    def allow_events(self, rule_arn: str) -> None:
        """Let one EventBridge rule (and no other) publish, through the topic's key."""
        account = cdk.Stack.of(self).account
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid="EventsPublish", actions=["kms:Decrypt", "kms:GenerateDataKey*"], resources=["*"],
            principals=[iam.ServicePrincipal("events.amazonaws.com")],
            conditions={"StringEquals": {"aws:SourceAccount": account}, "ArnEquals": {"aws:SourceArn": rule_arn}}))
        self.topic.add_to_resource_policy(iam.PolicyStatement(
            sid="EventsPublish", actions=["sns:Publish"], resources=[self.topic.topic_arn],
            principals=[iam.ServicePrincipal("events.amazonaws.com")],
            conditions={"StringEquals": {"aws:SourceAccount": account}, "ArnEquals": {"aws:SourceArn": rule_arn}}))

    def allow_alert_manager(self, workspace_arn: str) -> None:
        """Let the alert manager of one workspace (and no other) publish."""
        self.topic.add_to_resource_policy(iam.PolicyStatement(
            sid="AlertManagerPublish", actions=["sns:Publish", "sns:GetTopicAttributes"],
            resources=[self.topic.topic_arn], principals=[iam.ServicePrincipal("aps.amazonaws.com")],
            conditions={"StringEquals": {"aws:SourceAccount": cdk.Stack.of(self).account},
                        "ArnEquals": {"aws:SourceArn": workspace_arn}}))


class PrometheusWorkspace(Construct):
    """An Amazon Managed Service for Prometheus workspace with its alert rules and alert manager.

    Props:
        alias: the workspace's alias (`Alias`: at most 100 characters).
            @default required
        rules: rule groups namespace name (1 to 64 characters) -> the text of a Prometheus rule
            file, one `AWS::APS::RuleGroupsNamespace` each.
            @default required
        topic: where the alert manager sends every alert.
            @default None: no alert manager definition
        tags: tags of the workspace, key -> value.
            @default None: no tags

    Attributes:
        workspace: the `aps.CfnWorkspace`.
        rule_namespaces: namespace name -> its `aps.CfnRuleGroupsNamespace`.
        workspace_arn: the workspace's ARN.
        workspace_id: the workspace's id.
        endpoint: the workspace's Prometheus endpoint (ends with a slash).
        remote_write_url: the endpoint's ``api/v1/remote_write`` URL.
    """

    def __init__(self, scope: Construct, construct_id: str, *, alias: str, rules: Mapping[str, str],
                 topic: Optional[AlertDestination] = None, tags: Optional[Mapping[str, str]] = None) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        alert_manager = None
        if topic is not None:
            alert_manager = alertmanager_definition(topic.topic_arn, stack.region)
        self.workspace = aps.CfnWorkspace(
            self, "Workspace", alias=alias, alert_manager_definition=alert_manager,
            tags=[cdk.CfnTag(key=k, value=v) for k, v in sorted((tags or {}).items())] or None)
        if topic is not None:
            topic.allow_alert_manager(self.workspace_arn)
        self.rule_namespaces = {
            name: aps.CfnRuleGroupsNamespace(self, f"Rules-{name}", name=name, data=text,
                                             workspace=self.workspace_arn)
            for name, text in sorted(rules.items())}

    @property
    def workspace_arn(self) -> str:
        return self.workspace.attr_arn

    @property
    def workspace_id(self) -> str:
        return self.workspace.attr_workspace_id

    @property
    def endpoint(self) -> str:
        """The workspace's Prometheus endpoint (ends with a slash)."""
        return self.workspace.attr_prometheus_endpoint

    @property
    def remote_write_url(self) -> str:
        return f"{self.endpoint}api/v1/remote_write"


def remote_write_statement(workspace_arn: str) -> iam.PolicyStatement:
    return iam.PolicyStatement(sid="PrometheusRemoteWrite", actions=REMOTE_WRITE_ACTIONS, resources=[workspace_arn])


def query_statement(workspace_arn: str) -> iam.PolicyStatement:
    return iam.PolicyStatement(sid="PrometheusQuery", actions=QUERY_ACTIONS, resources=[workspace_arn])


# EC2's events of a Capacity Block (EC2 User Guide, "Monitor Capacity Blocks using EventBridge"): when
# it starts, and 40 minutes before it ends (its instances are terminated from 30 minutes before the
# end). The guide writes the detail types both with and without "Reservation".
CAPACITY_BLOCK_EVENTS = ("Capacity Block Delivered", "Capacity Block Reservation Delivered",
                         "Capacity Block Expiration Warning", "Capacity Block Reservation Expiration Warning")


class CapacityBlockEvents(Construct):
    """An EventBridge rule that sends EC2's events of the cluster's Capacity Blocks (started; 40
    minutes to the end) to the alert topic, as one readable line each.

    Props:
        name: the cluster's name, in the rule's description and the message.
            @default required
        reservation_ids: the Capacity Blocks (``cr-...``) whose events are sent; at least one.
            @default required
        topic: the alert topic (`AlertTopic`): it is let publish for this rule only.
            @default required

    Attributes:
        rule: the `events.CfnRule`, named ``fmcluster-NAME-capacity-blocks`` (at most 64
            characters): the topic's policies name its ARN as a string, since a reference to the
            rule would make the key, the topic and the rule depend on each other.
    """

    def __init__(self, scope: Construct, construct_id: str, *, name: str, reservation_ids: list[str],
                 topic: AlertTopic) -> None:
        super().__init__(scope, construct_id)
        from aws_cdk import aws_events as events

        if not reservation_ids:
            raise ConstructError(self, "CapacityBlockEvents needs at least one Capacity Block")
        message = (f'"fmcluster {name}: <type> for Capacity Block <id> (ends <end>). Its instances are '
                   'terminated from 30 minutes before its end: checkpoint and drain before."')
        rule_name = f"fmcluster-{name}-capacity-blocks"
        self.rule = events.CfnRule(
            self, "Rule", name=rule_name,
            description=f"fmcluster {name}: Capacity Block start and expiration warnings to the alerts",
            event_pattern={"source": ["aws.ec2"], "detail-type": list(CAPACITY_BLOCK_EVENTS),
                           "detail": {"capacity-reservation-id": sorted(set(reservation_ids))}},
            state="ENABLED",
            targets=[events.CfnRule.TargetProperty(
                id="AlertTopic", arn=topic.topic_arn,
                input_transformer=events.CfnRule.InputTransformerProperty(
                    input_paths_map={"type": "$.detail-type", "id": "$.detail.capacity-reservation-id",
                                     "end": "$.detail.end-date"},
                    input_template=message))])
        topic.allow_events(f"arn:{cdk.Aws.PARTITION}:events:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:rule/{rule_name}")
