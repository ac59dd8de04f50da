"""The execution role of SageMaker HyperPod instance groups, least privilege.

Sources and details: docs/research-notes.md, "fmcluster_cdk/constructs/hyperpod/role.py"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol, Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster_cdk.constructs.compute.node_role import remote_write_statements, storage_statements
from fmcluster_cdk.constructs.images.container import PULL_ACTIONS, pull_statements

SERVICE = "sagemaker.amazonaws.com"
LOG_GROUPS = "/aws/sagemaker/Clusters"
SSM_ACTIONS = ["ssmmessages:CreateControlChannel", "ssmmessages:CreateDataChannel",
               "ssmmessages:OpenControlChannel", "ssmmessages:OpenDataChannel"]
DESCRIBE_ACTIONS = ["ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs", "ec2:DescribeDhcpOptions",
                    "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups"]
ENI_ACTIONS = ["ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
               "ec2:DeleteNetworkInterfacePermission", "ec2:DetachNetworkInterface"]
EKS_DESCRIBE_ACTIONS = ["ec2:DescribeInstances", "ec2:DescribeInstanceTypes", "ec2:DescribeTags"]
EKS_ENI_ACTIONS = ["ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses",
                   "ec2:ModifyNetworkInterfaceAttribute", "ec2:AttachNetworkInterface"]
ECR_PULL_ACTIONS = ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]


def _ec2_arn(kind: str, ident: str = "*", account: str = cdk.Aws.ACCOUNT_ID) -> str:
    return f"arn:{cdk.Aws.PARTITION}:ec2:{cdk.Aws.REGION}:{account}:{kind}/{ident}"


class LifecycleFolder(Protocol):
    """A folder of lifecycle scripts in S3 that instance groups read
    (`fmcluster_cdk.constructs.hyperpod.lifecycle.LifecycleScripts` is one).

    Members: `scope_prefix` (the key prefix of every folder of the cluster, ending in a slash),
    `bucket_arn()` (the ARN of its bucket) and `object_arns()` (the ARN pattern of the objects
    under the scope prefix, for s3:GetObject).
    """

    @property
    def scope_prefix(self) -> str: ...

    def bucket_arn(self) -> str: ...

    def object_arns(self) -> str: ...


@dataclass(frozen=True)
class ExecutionPolicyProps:
    """What the execution role's policy (`execution_policy`) grants, one prop each.

    Props:
        lifecycle: the lifecycle-script folders the instance groups read: one grant per scope
            prefix (s3:ListBucket limited to it, s3:GetObject on its objects), so the policy does
            not grow with the instance groups.
            @default required
        bucket_arns: ARNs of the cluster's S3 buckets (read and write on them and their objects).
            @default required
        kms_key_arn: ARN of the KMS key of those buckets (kms:Decrypt, kms:GenerateDataKey);
            None without a storage key.
            @default required
        vpc_id: the cluster's VPC (``vpc-...``): the network-interface actions are conditioned on
            it (``ec2:Vpc``).
            @default required
        subnet_ids: the cluster's subnets, where HyperPod may create network interfaces.
            @default required
        security_group_ids: the security groups those network interfaces may carry.
            @default required
        eks_cluster_arn: ARN of the EKS cluster of HyperPod on EKS: adds what the VPC CNI, image
            pulls and EKS Pod Identity need.
            @default None: a Slurm cluster
        workspace_arn: ARN of the Prometheus workspace the nodes remote-write to (aps:RemoteWrite).
            @default None: no metrics collection
        metrics_parameter_arn: ARN of the SSM parameter that holds the remote-write URL
            (ssm:GetParameter).
            @default None
        teams_parameter_arn: ARN of the SSM parameter with the teams' Slurm accounting data, which
            the controller applies (ssm:GetParameter).
            @default None
        accounting_secret_arn: ARN of the Secrets Manager secret of the Slurm accounting database
            (secretsmanager:GetSecretValue: HyperPod configures slurmdbd with it).
            @default None
        efa_file_system: HyperPod mounts an EFA-enabled FSx for Lustre file system (its EFA set-up
            calls fsx:DescribeFileSystems).
            @default False
        volume_key_arn: ARN of the customer managed KMS key of the instance groups' EBS volumes
            (kms:CreateGrant and kms:DescribeKey through SageMaker).
            @default None: volumes encrypted with an AWS owned key
        image_repository_arns: ARNs of the ECR repositories whose images the instance groups run
            (pulls from these; on HyperPod EKS the role's pulls from every repository of the region,
            for the add-ons' images, and its registry login are there already).
            @default ``()``: none
    """

    lifecycle: Sequence[LifecycleFolder]
    bucket_arns: Sequence[str]
    kms_key_arn: Optional[str]
    vpc_id: str
    subnet_ids: Sequence[str]
    security_group_ids: Sequence[str]
    eks_cluster_arn: Optional[str] = None
    workspace_arn: Optional[str] = None
    metrics_parameter_arn: Optional[str] = None
    teams_parameter_arn: Optional[str] = None
    accounting_secret_arn: Optional[str] = None
    efa_file_system: bool = False
    volume_key_arn: Optional[str] = None
    image_repository_arns: Sequence[str] = ()


def execution_policy(props: ExecutionPolicyProps) -> iam.PolicyDocument:
    """The execution role's inline policy (docs/research-notes.md says what and why)."""
    log_groups = f"arn:{cdk.Aws.PARTITION}:logs:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:log-group:{LOG_GROUPS}/*"
    vpc_condition = {"ArnEquals": {"ec2:Vpc": _ec2_arn("vpc", props.vpc_id)}}
    # one grant per scope prefix: a cluster's folders share it and the stack's asset bucket (whose
    # name is a new token on each folder, so it cannot be compared here)
    folders = sorted({scripts.scope_prefix: scripts for scripts in props.lifecycle}.values(),
                     key=lambda s: s.scope_prefix)
    statements = [
        iam.PolicyStatement(sid="ClusterLogGroups", actions=["logs:CreateLogGroup"], resources=[log_groups]),
        iam.PolicyStatement(sid="ClusterLogStreams",
                            actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                            resources=[f"{log_groups}:log-stream:*"]),
        iam.PolicyStatement(sid="ClusterMetrics", actions=["cloudwatch:PutMetricData"], resources=["*"],
                            conditions={"StringEquals": {"cloudwatch:namespace": LOG_GROUPS}}),
        iam.PolicyStatement(sid="SessionManager", actions=SSM_ACTIONS, resources=["*"]),
    ]
    if folders:
        statements += [
            iam.PolicyStatement(sid="LifecycleScriptsList", actions=["s3:ListBucket"],
                                resources=sorted({f.bucket_arn() for f in folders}),
                                conditions={"StringLike": {"s3:prefix": [
                                    p for f in folders for p in (f.scope_prefix.rstrip("/"), f"{f.scope_prefix}*")]}}),
            iam.PolicyStatement(sid="LifecycleScriptsRead", actions=["s3:GetObject"],
                                resources=[f.object_arns() for f in folders]),
        ]
    statements += (storage_statements(props.bucket_arns, props.kms_key_arn)
                   + volume_key_statements(props.volume_key_arn))
    eks = props.eks_cluster_arn  # HyperPod on EKS: the cluster's ARN, None on Slurm
    describe = DESCRIBE_ACTIONS + (EKS_DESCRIBE_ACTIONS if eks else [])
    statements += [
        iam.PolicyStatement(sid="DescribeNetwork", actions=describe, resources=["*"]),
        iam.PolicyStatement(sid="CreateNetworkInterfaces", actions=["ec2:CreateNetworkInterface"],
                            resources=[_ec2_arn("network-interface")]
                            + [_ec2_arn("subnet", s) for s in props.subnet_ids]
                            + [_ec2_arn("security-group", g) for g in props.security_group_ids]),
        iam.PolicyStatement(sid="ManageClusterNetworkInterfaces", actions=ENI_ACTIONS,
                            resources=[_ec2_arn("network-interface")], conditions=vpc_condition),
        iam.PolicyStatement(sid="TagNetworkInterfaces", actions=["ec2:CreateTags"],
                            resources=[_ec2_arn("network-interface")]),
        *([iam.PolicyStatement(sid="FsxEfaSetup", actions=["fsx:DescribeFileSystems"], resources=["*"])]
          if props.efa_file_system else []),
        iam.PolicyStatement(sid="InterfacesOnClusterInstances",
                            actions=["ec2:DetachNetworkInterface"] + (["ec2:AttachNetworkInterface"] if eks else []),
                            resources=[_ec2_arn("instance", account="*")]),
    ]
    if eks:
        statements += [
            iam.PolicyStatement(sid="VpcCniNetworkInterfaces", actions=EKS_ENI_ACTIONS,
                                resources=[_ec2_arn("network-interface")], conditions=vpc_condition),
            iam.PolicyStatement(sid="EcrAuthorization", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
            iam.PolicyStatement(sid="EcrPull", actions=ECR_PULL_ACTIONS,
                                resources=[f"arn:{cdk.Aws.PARTITION}:ecr:{cdk.Aws.REGION}:*:repository/*"]),
            iam.PolicyStatement(sid="PodIdentity", actions=["eks-auth:AssumeRoleForPodIdentity"],
                                resources=[eks]),
        ]
    if eks and props.image_repository_arns:  # its registry login is EcrAuthorization's, above
        statements.append(iam.PolicyStatement(sid="ReferenceImagePull", actions=PULL_ACTIONS,
                                              resources=list(props.image_repository_arns)))
    elif not eks:
        statements += pull_statements(props.image_repository_arns)
    statements += remote_write_statements(props.workspace_arn)
    if props.metrics_parameter_arn:
        statements.append(iam.PolicyStatement(sid="MetricsParameter", actions=["ssm:GetParameter"],
                                              resources=[props.metrics_parameter_arn]))
    if props.teams_parameter_arn:
        statements.append(iam.PolicyStatement(sid="SlurmTeamsParameter", actions=["ssm:GetParameter"],
                                              resources=[props.teams_parameter_arn]))
    if props.accounting_secret_arn:
        statements.append(iam.PolicyStatement(sid="SlurmAccountingDatabaseSecret",
                                              actions=["secretsmanager:GetSecretValue"],
                                              resources=[props.accounting_secret_arn]))
    return iam.PolicyDocument(statements=statements)


def volume_key_statements(key_arn: Optional[str]) -> list[iam.PolicyStatement]:
    """What HyperPod needs of the execution role to encrypt EBS volumes with `key_arn` (none without
    one): kms:CreateGrant for AWS resources and kms:DescribeKey, through SageMaker only."""
    if not key_arn:
        return []
    through_sagemaker = {"kms:ViaService": f"sagemaker.{cdk.Aws.REGION}.amazonaws.com"}
    return [
        iam.PolicyStatement(sid="VolumeKeyGrants", actions=["kms:CreateGrant"], resources=[key_arn],
                            conditions={"StringEquals": through_sagemaker,
                                        "Bool": {"kms:GrantIsForAWSResource": "true"}}),
        iam.PolicyStatement(sid="VolumeKeyDescribe", actions=["kms:DescribeKey"], resources=[key_arn],
                            conditions={"StringEquals": through_sagemaker}),
    ]


class HyperPodExecutionRole(Construct):
    """The role every instance group of one HyperPod cluster assumes (trust: SageMaker), with one
    inline policy, ``fmcluster-hyperpod`` (`execution_policy`).

    Props:
        description: the role's description (IAM: at most 1,000 characters).
            @default required
        policy: what the role may do (`ExecutionPolicyProps`).
            @default required

    Attributes:
        role: the `iam.Role`.
        role_arn: the role's ARN (each instance group's `ExecutionRole`).
    """

    def __init__(self, scope: Construct, construct_id: str, *, description: str,
                 policy: ExecutionPolicyProps) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal(SERVICE), description=description,
                             inline_policies={"fmcluster-hyperpod": execution_policy(policy)})

    @property
    def role_arn(self) -> str:
        return self.role.role_arn
