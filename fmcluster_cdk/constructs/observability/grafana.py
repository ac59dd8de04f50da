"""Amazon Managed Grafana for one Prometheus workspace, and its dashboards from repo files.

Sources and details: docs/research-notes.md, "fmcluster_cdk/constructs/observability/grafana.py"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Protocol

import aws_cdk as cdk
from aws_cdk import aws_grafana as grafana
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from fmcluster_cdk.constructs.lambda_code import handler_code
from fmcluster_cdk.constructs.observability.workspace import query_statement

GRAFANA_VERSION = "10.4"
HANDLER = Path(__file__).with_name("handlers") / "grafana_provisioner"
RESOURCE_TYPE = "Custom::GrafanaProvisioner"
DATA_SOURCE_UID = "fmcluster-amp"  # the uid the dashboard files reference
PROVISIONER_ACTIONS = ["grafana:DescribeWorkspace", "grafana:ListWorkspaceServiceAccounts",
                       "grafana:CreateWorkspaceServiceAccount", "grafana:CreateWorkspaceServiceAccountToken",
                       "grafana:DeleteWorkspaceServiceAccountToken"]


class GrafanaWorkspace(Construct):
    """An Amazon Managed Grafana workspace of this account (Grafana `GRAFANA_VERSION`, sign-in
    through IAM Identity Center, plugin administration off) and its role.

    Props:
        name: the workspace's name (`Name`: 1 to 255 of letters, digits and ``-._~``), also in
            its description (``fmcluster NAME``) and its role's.
            @default required
        prometheus_workspace_arn: ARN of the Prometheus workspace the role may query (and
            describe): the only data source it can read.
            @default required

    Attributes:
        role: the workspace's `iam.Role` (trust: Grafana, this account only).
        workspace: the `grafana.CfnWorkspace`.
        workspace_id: the workspace's id (``g-`` and 10 hex digits).
        url: ``https://`` and the workspace's endpoint.
        workspace_arn: the workspace's ARN (the resource of the grafana: actions).
    """

    def __init__(self, scope: Construct, construct_id: str, *, name: str, prometheus_workspace_arn: str) -> None:
        super().__init__(scope, construct_id)
        account = cdk.Stack.of(self).account
        self.role = iam.Role(
            self, "Role", description=f"Amazon Managed Grafana {name}: query the cluster's Prometheus workspace",
            assumed_by=iam.ServicePrincipal("grafana.amazonaws.com", conditions={
                "StringEquals": {"aws:SourceAccount": account}}),
            inline_policies={"query-prometheus": iam.PolicyDocument(statements=[
                query_statement(prometheus_workspace_arn),
                iam.PolicyStatement(sid="DescribeWorkspace", actions=["aps:DescribeWorkspace"],
                                    resources=[prometheus_workspace_arn])])})
        self.workspace = grafana.CfnWorkspace(
            self, "Workspace", name=name, description=f"fmcluster {name}",
            account_access_type="CURRENT_ACCOUNT", authentication_providers=["AWS_SSO"],
            permission_type="CUSTOMER_MANAGED", role_arn=self.role.role_arn, grafana_version=GRAFANA_VERSION,
            plugin_admin_enabled=False)

    @property
    def workspace_id(self) -> str:
        return self.workspace.attr_id

    @property
    def url(self) -> str:
        return f"https://{self.workspace.attr_endpoint}"

    @property
    def workspace_arn(self) -> str:
        """arn:PARTITION:grafana:REGION:ACCOUNT:/workspaces/ID (the resource of the grafana: actions)."""
        stack = cdk.Stack.of(self)
        return f"arn:{stack.partition}:grafana:{stack.region}:{stack.account}:/workspaces/{self.workspace_id}"


def dashboard_properties(dashboards: Mapping[str, str]) -> dict[str, str]:
    """{file stem: dashboard JSON, compact and key-sorted} (stable bytes in the template)."""
    return {name: json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
            for name, text in sorted(dashboards.items())}


class GrafanaWorkspaceRef(Protocol):
    """The Grafana workspace a `GrafanaProvisioner` provisions (`GrafanaWorkspace` is one).

    Members: `workspace_id`, `url` (``https://`` and its endpoint) and `workspace_arn` (the
    resource the handler's grafana: actions are scoped to).
    """

    @property
    def workspace_id(self) -> str: ...

    @property
    def url(self) -> str: ...

    @property
    def workspace_arn(self) -> str: ...


class GrafanaProvisioner(Construct):
    """Data source and dashboards of `workspace`, through the Grafana HTTP API at deploy time.

    The handler (Python 3.14, 5 minutes, 256 MB, logs kept one month) may only mint and delete
    service-account tokens of this one workspace.

    Props:
        workspace: the Grafana workspace to provision.
            @default required
        prometheus_endpoint: the Prometheus workspace's endpoint (with its trailing slash), the
            URL of the data source (uid `DATA_SOURCE_UID`, SigV4).
            @default required
        dashboards: dashboard name (the file's stem) -> the dashboard's JSON text; written
            compact and key-sorted into the custom resource's properties.
            @default required

    Attributes:
        function: the handler (`lambda_.Function`).
        resource: the custom resource (`Custom::GrafanaProvisioner`).
    """

    def __init__(self, scope: Construct, construct_id: str, *, workspace: GrafanaWorkspaceRef,
                 prometheus_endpoint: str, dashboards: Mapping[str, str]) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_MONTH,
                                  removal_policy=cdk.RemovalPolicy.DESTROY)
        self.function = lambda_.Function(
            self, "Handler", runtime=lambda_.Runtime.PYTHON_3_14, handler="index.handler",
            code=handler_code(HANDLER), timeout=cdk.Duration.minutes(5), memory_size=256,
            description="provisions the Grafana data source and dashboards of fmcluster", log_group=log_group)
        self.function.add_to_role_policy(iam.PolicyStatement(
            sid="GrafanaServiceAccountTokens", actions=PROVISIONER_ACTIONS, resources=[workspace.workspace_arn]))
        self.resource = cdk.CustomResource(
            self, "Resource", service_token=self.function.function_arn, resource_type=RESOURCE_TYPE,
            properties={"WorkspaceId": workspace.workspace_id, "GrafanaUrl": workspace.url,
                        "PrometheusUrl": prometheus_endpoint,
                        "Region": stack.region, "DataSourceUid": DATA_SOURCE_UID,
                        "Dashboards": dashboard_properties(dashboards)})
