"""IAM roles of an EKS cluster's nodes and of its add-ons (EKS Pod Identity).

Sources and details: docs/research-notes.md, "fmcluster_cdk/constructs/eks/iam.py"."""

from __future__ import annotations

from typing import Optional, Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster_cdk.constructs.compute.node_role import node_role, storage_statements
from fmcluster_cdk.constructs.images.container import pull_statements

NODE_MANAGED_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly",
                         "AmazonSSMManagedInstanceCore")
POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"


class EksNodeRole(Construct):
    """The role of every managed node group of one cluster (EKS creates the instance profiles).

    Props:
        bucket_arns: ARNs of the cluster's S3 buckets (read and write on them and their objects).
            @default ``()``: no bucket
        kms_key_arn: ARN of the buckets' KMS key (kms:Decrypt, kms:GenerateDataKey).
            @default None: no storage key
        image_repository_arns: ARNs of the ECR repositories whose images the nodes run: pulls from
            these, by name (AWS's AmazonEC2ContainerRegistryPullOnly, which the role carries for the
            add-ons' images, allows pulls from every repository already; these keep the role's
            own grant of them should that policy go).
            @default ``()``: none

    Attributes:
        role: the `iam.Role` (trust: EC2).
        role_arn: the role's ARN (each node group's `NodeRole`).
    """

    def __init__(self, scope: Construct, construct_id: str, *, bucket_arns: Sequence[str] = (),
                 kms_key_arn: Optional[str] = None, image_repository_arns: Sequence[str] = ()) -> None:
        super().__init__(scope, construct_id)
        self.role = node_role(
            self, description="EKS nodes: join the cluster, pull images, use the cluster's buckets",
            managed_policies=NODE_MANAGED_POLICIES,
            statements=storage_statements(bucket_arns, kms_key_arn) + pull_statements(image_repository_arns))

    @property
    def role_arn(self) -> str:
        return self.role.role_arn


class PodIdentityRole(Construct):
    """A role for the pods of one service account, through EKS Pod Identity: AWS managed
    policies by name and/or inline statements (one inline policy, ``fmcluster``).

    Props:
        cluster_arn: ARN of the EKS cluster whose pods may assume the role (the trust's
            ``aws:SourceArn``).
            @default required
        description: the role's description (IAM: at most 1,000 characters).
            @default required
        managed_policies: names of AWS managed policies to attach, such as ``AmazonEKS_CNI_Policy``.
            @default ``()``: none
        statements: statements of the inline policy.
            @default ``()``: no inline policy

    Attributes:
        role: the `iam.Role`.
        role_arn: the role's ARN (an add-on's Pod Identity `RoleArn`).
    """

    def __init__(self, scope: Construct, construct_id: str, *, cluster_arn: str, description: str,
                 managed_policies: Sequence[str] = (), statements: Sequence[iam.PolicyStatement] = ()) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        principal = iam.ServicePrincipal(POD_IDENTITY_PRINCIPAL, conditions={
            "StringEquals": {"aws:SourceAccount": stack.account},
            "ArnEquals": {"aws:SourceArn": cluster_arn}}).with_session_tags()
        self.role = iam.Role(
            self, "Role", assumed_by=principal, description=description,
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(name) for name in managed_policies],
            inline_policies={"fmcluster": iam.PolicyDocument(statements=list(statements))} if statements else None)

    @property
    def role_arn(self) -> str:
        return self.role.role_arn
