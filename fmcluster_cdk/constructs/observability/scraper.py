"""The Amazon Managed Service for Prometheus managed scraper of an EKS cluster
(`AWS::APS::Scraper`): it discovers the exporters' pods in the cluster and remote-writes what it
scrapes to the workspace.

Sources and details: docs/research-notes.md, "fmcluster_cdk/constructs/observability/scraper.py"."""

from __future__ import annotations

import base64
from typing import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_aps as aps
from constructs import Construct


class ManagedScraper(Construct):
    """`AWS::APS::Scraper`: source the EKS cluster (its ARN, private subnets in at least two AZs,
    a security group that reaches the nodes), destination the workspace, the scrape
    configuration base64-encoded as AMP wants it.

    Props:
        alias: the scraper's alias (`Alias`: 1 to 100 characters, letters, digits and ``-._``,
            starting with a letter or digit).
            @default required
        cluster_arn: ARN of the EKS cluster to scrape.
            @default required
        subnet_ids: the subnets the scraper reaches the cluster from (``subnet-...``).
            @default required
        security_group_ids: the scraper's security groups (``sg-...``), which must reach the
            exporters' pods.
            @default required
        workspace_arn: ARN of the Prometheus workspace the scraper writes to.
            @default required
        scrape_configuration: the Prometheus-compatible scrape configuration, as text (YAML);
            base64-encoded here (`ScrapeConfiguration.ConfigurationBlob`).
            @default required
        tags: tags of the scraper, key -> value.
            @default required

    Attributes:
        resource: the `aps.CfnScraper`.
        scraper_arn: the scraper's ARN.
        role_arn: ARN of the scraper's service-linked role (its EKS access entry).
    """

    def __init__(self, scope: Construct, construct_id: str, *, alias: str, cluster_arn: str,
                 subnet_ids: Sequence[str], security_group_ids: Sequence[str], workspace_arn: str,
                 scrape_configuration: str, tags: Mapping[str, str]) -> None:
        super().__init__(scope, construct_id)
        blob = base64.b64encode(scrape_configuration.encode("utf-8")).decode("ascii")
        self.resource = aps.CfnScraper(
            self, "Resource", alias=alias,
            source=aps.CfnScraper.SourceProperty(eks_configuration=aps.CfnScraper.EksConfigurationProperty(
                cluster_arn=cluster_arn, subnet_ids=list(subnet_ids), security_group_ids=list(security_group_ids))),
            destination=aps.CfnScraper.DestinationProperty(
                amp_configuration=aps.CfnScraper.AmpConfigurationProperty(workspace_arn=workspace_arn)),
            scrape_configuration=aps.CfnScraper.ScrapeConfigurationProperty(configuration_blob=blob),
            tags=[cdk.CfnTag(key=k, value=v) for k, v in sorted(tags.items())])
        self.scraper_arn: str = self.resource.attr_arn
        self.role_arn: str = self.resource.attr_role_arn
