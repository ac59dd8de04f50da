"""Amazon Managed Service for Prometheus: the workspace, its alert rules and alert manager, and
the SNS topic alerts go to.

- `PrometheusWorkspace`: `AWS::APS::Workspace` (encrypted at rest with an AWS-owned key), one
  `AWS::APS::RuleGroupsNamespace` per rule file (the file's text, unchanged), and an alert
  manager definition that routes every alert to `topic_arn` (SigV4, grouped by cluster, alert
  and node). `remote_write_statement()` / `query_statement()`: the only IAM a writer or a
  reader needs, scoped to this workspace.
- `AlertTopic`: an SNS topic encrypted with its own KMS key, whose policies let only this
  account's CloudWatch alarms and this workspace's alert manager publish; `email` subscribed.
  Plain `CfnResource`s (constructs_lib/cfn.py): `aws_cdk.aws_sns` and `aws_cdk.aws_kms`, with
  the modules they bring along, are not loaded for one topic and one key.
"""

from __future__ import annotations

from typing import Mapping, Optional

import aws_cdk as cdk
from aws_cdk import aws_aps as aps
from aws_cdk import aws_iam as iam
from constructs import Construct

from constructs_lib import cfn

REMOTE_WRITE_ACTIONS = ["aps:RemoteWrite"]
QUERY_ACTIONS = ["aps:QueryMetrics", "aps:GetSeries", "aps:GetLabels", "aps:GetMetricMetadata"]
ALERT_GROUP_BY = ["cluster", "alertname", "node"]
TOPIC_KEY_PENDING_DAYS = 7


def alertmanager_definition(topic_arn: str, region: str) -> str:
    """Alert manager configuration (AMP's YAML envelope): every alert to the SNS topic."""
    return "\n".join([
        "alertmanager_config: |",
        "  route:",
        "    receiver: sns",
        f"    group_by: [{', '.join(ALERT_GROUP_BY)}]",
        "    group_wait: 30s",
        "    group_interval: 5m",
        "    repeat_interval: 4h",
        "  receivers:",
        "    - name: sns",
        "      sns_configs:",
        f"        - topic_arn: {topic_arn}",
        "          sigv4:",
        f"            region: {region}",
        "          subject: '[{{ .CommonLabels.severity }}] {{ .CommonLabels.alertname }} ({{ .CommonLabels.cluster }})'",
        "          attributes:",
        "            severity: '{{ .CommonLabels.severity }}'",
        "",
    ])


def _policy(statements: list[dict]) -> dict:
    return {"Version": "2012-10-17", "Statement": statements}


def _allow_services(sid: str, actions: list[str], services: list[str], resource, conditions: dict) -> dict:
    """A policy statement as IAM's `PolicyStatement` renders it (one action or principal: a string)."""
    return {"Sid": sid, "Effect": "Allow", "Action": actions[0] if len(actions) == 1 else sorted(actions),
            "Principal": {"Service": services[0] if len(services) == 1 else sorted(services)},
            "Resource": resource, "Condition": conditions}


class AlertTopic(Construct):
    """SNS topic (KMS-encrypted) for alarms and alerts; `email` subscribed when given. `tags`:
    the cluster's tags, on the key and the topic.

    Plain resources at the paths an `sns.Topic` and a `kms.Key` give theirs (constructs_lib/cfn.py),
    with the policies those constructs write: the key's grants the account root all of KMS (as
    every CDK key policy does, so IAM policies can grant its use), the topic's denies publishing
    without TLS (`enforce_ssl`)."""

    def __init__(self, scope: Construct, construct_id: str, *, name: str, email: Optional[str] = None,
                 tags: Optional[Mapping[str, str]] = None) -> None:
        super().__init__(scope, construct_id)
        account = cdk.Stack.of(self).account
        self._account = account
        publishers = {"StringEquals": {"aws:SourceAccount": account}}
        # Notifications only: nothing is stored under this key beyond SNS's delivery retries, so
        # it goes with the stack (after the pending window) instead of being retained.
        self.key = cfn.l2_resource(self, "Key", "AWS::KMS::Key", {
            "Description": f"fmcluster {name}: alert notifications (SNS)",
            "EnableKeyRotation": True,
            "PendingWindowInDays": TOPIC_KEY_PENDING_DAYS,
            "KeyPolicy": _policy([
                {"Effect": "Allow", "Action": "kms:*", "Resource": "*",
                 "Principal": {"AWS": f"arn:{cfn.partition(self)}:iam::{account}:root"}},
                _allow_services("AlarmsAndAlertManagerPublish", ["kms:Decrypt", "kms:GenerateDataKey*"],
                                ["cloudwatch.amazonaws.com", "aps.amazonaws.com"], "*", publishers)]),
            "Tags": cfn.tags(tags or {})})
        self.key.apply_removal_policy(cdk.RemovalPolicy.DESTROY)
        topic = Construct(self, "Topic")
        self.topic = cfn.resource(topic, "Resource", "AWS::SNS::Topic", {
            "DisplayName": f"fmcluster {name} alerts", "KmsMasterKeyId": cfn.attribute(self.key, "Arn"),
            "Tags": cfn.tags(tags or {})})
        self._statements = [
            {"Sid": "AllowPublishThroughSSLOnly", "Effect": "Deny", "Action": "sns:Publish", "Principal": "*",
             "Resource": self.topic_arn, "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
            _allow_services("CloudWatchAlarmsPublish", ["sns:Publish"], ["cloudwatch.amazonaws.com"],
                            self.topic_arn, publishers)]
        self.policy = cfn.l2_resource(topic, "Policy", "AWS::SNS::TopicPolicy", {
            "Topics": [self.topic_arn], "PolicyDocument": _policy(self._statements)})
        if email:
            cfn.l2_resource(self, "Email", "AWS::SNS::Subscription",
                            {"TopicArn": self.topic_arn, "Protocol": "email", "Endpoint": email})

    @property
    def topic_arn(self) -> str:
        return self.topic.ref

    def allow_alert_manager(self, workspace_arn: str) -> None:
        """Let the alert manager of one workspace (and no other) publish."""
        self._statements.append(_allow_services(
            "AlertManagerPublish", ["sns:Publish", "sns:GetTopicAttributes"], ["aps.amazonaws.com"],
            self.topic_arn, {"StringEquals": {"aws:SourceAccount": self._account},
                             "ArnEquals": {"aws:SourceArn": workspace_arn}}))
        # A resource's properties are given when it is made: the statements replace the policy's.
        self.policy.add_property_override("PolicyDocument.Statement", cfn.compact(self._statements))


class PrometheusWorkspace(Construct):
    """`rules`: {namespace name: rule file text}. `topic`: the AlertTopic alerts go to."""

    def __init__(self, scope: Construct, construct_id: str, *, alias: str, rules: Mapping[str, str],
                 topic: Optional[AlertTopic] = None, tags: Optional[Mapping[str, str]] = None) -> None:
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
