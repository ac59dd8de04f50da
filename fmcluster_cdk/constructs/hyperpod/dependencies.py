"""The SageMaker HyperPod dependencies chart on an EKS cluster, installed at deploy time.

Sources and details: docs/research-notes.md, "fmcluster_cdk/constructs/hyperpod/dependencies.py"."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_lambda as lambda_
from aws_cdk.lambda_layer_awscli import AwsCliLayer
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer
from constructs import Construct

from fmcluster_cdk.constructs.lambda_code import handler_code
from fmcluster_cdk.errors import ConstructError

REPOSITORY = "aws/sagemaker-hyperpod-cli"
COMMIT = "bb6a9f9534217c55a5806ae968e1dd8b285d4b8c"
ARCHIVE_URL = f"https://codeload.github.com/{REPOSITORY}/tar.gz/{COMMIT}"
CHART_PATH = "helm_chart/HyperPodHelmChart"  # the handler's default chart folder (handlers/.../index.py)
RELEASE = "hyperpod-dependencies"
NAMESPACE = "kube-system"  # the chart creates aws-hyperpod itself; its name cannot change
HANDLER = Path(__file__).with_name("handlers") / "hyperpod_dependencies"
RESOURCE_TYPE = "Custom::HyperPodDependencies"


def subchart_path(name: str) -> str:
    """The folder of a sub-chart of the dependencies chart (charts/NAME) in the archive."""
    return f"{CHART_PATH}/charts/{name}"


def chart_values(region: str) -> dict[str, Any]:
    """Values over the chart's defaults: the region of the health-monitoring agent, and no
    Neuron device plugin (no Trainium in the instance catalog)."""
    return {"global": {"region": region}, "health-monitoring-agent": {"region": region},
            "neuron-device-plugin": {"devicePlugin": {"enabled": False}}}


class HyperPodChart(Construct):
    """A chart folder of aws/sagemaker-hyperpod-cli at the pinned commit (`COMMIT`), installed at
    deploy time by a custom resource (`Custom::HyperPodDependencies`) whose handler runs with the
    cluster's kubectl provider role, after the provider and its `KubectlReadyBarrier`.

    Props:
        cluster: the aws_eks_v2 cluster, with a kubectl provider (its role and its layer's
            kubectl and helm install the chart; a `KubectlReadyBarrier` child, where there is
            one, is waited for).
            @default required
        release: the Helm release name.
            @default required
        namespace: the release namespace; it must exist (the handler creates none).
            @default required
        values: Helm values over the chart's defaults, passed to the handler as JSON.
            @default required
        chart_path: the chart folder in the archive (`subchart_path` names a sub-chart of the
            dependencies chart); a relative path without `..`, checked by the handler.
            @default CHART_PATH, the dependencies chart (then no `ChartPath` property is written)
        node_selector: a nodeSelector the handler sets on the release's Deployments after the
            install, for a chart with no value that places them.
            @default None: the chart's own placement
        function: the handler of another HyperPodChart, to install this chart too (one function
            for several releases; `subnets`, `security_groups` and `vpc` are then its own).
            @default None: a handler of its own
        subnets: the subnets the handler runs in, when the cluster's API endpoint is private (it
            needs the endpoint and, through NAT, GitHub and the charts' repositories); needs `vpc`.
            @default None: the VPC's default subnets when `vpc` is given
        security_groups: the handler's security groups in the VPC.
            @default None: with `vpc`, CDK creates a security group for the function
        vpc: the VPC the handler runs in (required for `subnets`).
            @default None: the handler runs outside any VPC

    Attributes:
        function: the handler (`lambda_.Function`: Python 3.14, 15 minutes, 1,024 MB), or `function`.
        resource: the custom resource (`cdk.CustomResource`).
    """

    def __init__(self, scope: Construct, construct_id: str, *, cluster: eks.ICluster, release: str,
                 namespace: str, values: Mapping[str, Any], chart_path: str = CHART_PATH,
                 node_selector: Optional[Mapping[str, str]] = None, function: Optional[lambda_.Function] = None,
                 subnets: Optional[Sequence[ec2.ISubnet]] = None,
                 security_groups: Optional[Sequence[ec2.ISecurityGroup]] = None,
                 vpc: Optional[ec2.IVpc] = None) -> None:
        super().__init__(scope, construct_id)
        provider = cluster.kubectl_provider
        if provider is None:
            raise ConstructError(self, "the cluster has no kubectl provider")
        self.function = function or lambda_.Function(
            self, "Handler", runtime=lambda_.Runtime.PYTHON_3_14, handler="index.handler",
            code=handler_code(HANDLER), timeout=cdk.Duration.minutes(15), memory_size=1024,
            role=provider.role, layers=[KubectlV35Layer(self, "KubectlLayer"), AwsCliLayer(self, "AwsCliLayer")],
            description=f"installs {REPOSITORY} charts at {COMMIT[:12]}",
            vpc=vpc, vpc_subnets=ec2.SubnetSelection(subnets=list(subnets)) if subnets else None,
            security_groups=list(security_groups) if security_groups else None)
        stack = cdk.Stack.of(self)
        properties: dict[str, Any] = {"ClusterName": cluster.cluster_name, "ArchiveUrl": ARCHIVE_URL, "Commit": COMMIT,
                                      "Release": release, "Namespace": namespace,
                                      "Values": stack.to_json_string(dict(values))}
        if chart_path != CHART_PATH:
            properties["ChartPath"] = chart_path
        if node_selector:
            properties["NodeSelector"] = stack.to_json_string(dict(node_selector))
        self.resource = cdk.CustomResource(self, "Resource", service_token=self.function.function_arn,
                                           resource_type=RESOURCE_TYPE, properties=properties)
        self.resource.node.add_dependency(provider)
        barrier = cluster.node.try_find_child("KubectlReadyBarrier")  # the provider's access entry is in place
        if barrier is not None:
            self.resource.node.add_dependency(barrier)


class HyperPodDependencies(HyperPodChart):
    """The HyperPod dependencies chart (`CHART_PATH`, release `RELEASE` in `NAMESPACE`), a
    `HyperPodChart` of its own handler.

    Props:
        cluster: the aws_eks_v2 cluster, with a kubectl provider (its role and its layer's
            kubectl and helm install the chart; a `KubectlReadyBarrier` child, where there is
            one, is waited for).
            @default required
        values: Helm values over the chart's defaults (`chart_values` gives the region's and the
            Neuron plugin's), passed to the handler as JSON.
            @default required
        subnets: as HyperPodChart's: the handler's subnets, with a private API endpoint.
            @default None
        security_groups: as HyperPodChart's: the handler's security groups in the VPC.
            @default None
        vpc: as HyperPodChart's: the VPC the handler runs in.
            @default None: outside any VPC
    """

    def __init__(self, scope: Construct, construct_id: str, *, cluster: eks.ICluster, values: Mapping[str, Any],
                 subnets: Optional[Sequence[ec2.ISubnet]] = None,
                 security_groups: Optional[Sequence[ec2.ISecurityGroup]] = None,
                 vpc: Optional[ec2.IVpc] = None) -> None:
        super().__init__(scope, construct_id, cluster=cluster, release=RELEASE, namespace=NAMESPACE, values=values,
                         subnets=subnets, security_groups=security_groups, vpc=vpc)
