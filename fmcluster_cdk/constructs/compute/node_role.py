"""The IAM role and instance profile of AWS PCS compute nodes, and the node role every plane's
nodes have (an EKS cluster's too: fmcluster_cdk.constructs.eks.iam).

Sources and details: docs/research-notes.md, "fmcluster_cdk/constructs/compute/node_role.py"."""

from __future__ import annotations

from typing import Optional, Sequence

from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster_cdk.constructs.images.container import pull_statements

PCS_PATH = "/aws-pcs/"
BUCKET_ACTIONS = ["s3:GetBucketLocation", "s3:ListBucket", "s3:ListBucketMultipartUploads"]
OBJECT_ACTIONS = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                  "s3:ListMultipartUploadParts"]
KMS_ACTIONS = ["kms:Decrypt", "kms:GenerateDataKey"]
NODE_POLICY = "fmcluster-node"  # the inline policy of a node role


def storage_statements(bucket_arns: Sequence[str], kms_key_arn: Optional[str]) -> list[iam.PolicyStatement]:
    """Read and write on the cluster's buckets (and their objects) only; the storage key when
    there is one. Shared by the PCS node role and the SageMaker HyperPod execution role."""
    statements = []
    if bucket_arns:
        statements += [
            iam.PolicyStatement(sid="ClusterBuckets", actions=BUCKET_ACTIONS, resources=list(bucket_arns)),
            iam.PolicyStatement(sid="ClusterBucketObjects", actions=OBJECT_ACTIONS,
                                resources=[f"{arn}/*" for arn in bucket_arns]),
        ]
    if kms_key_arn:
        statements.append(iam.PolicyStatement(sid="StorageKey", actions=KMS_ACTIONS, resources=[kms_key_arn]))
    return statements


def remote_write_statements(workspace_arn: Optional[str]) -> list[iam.PolicyStatement]:
    """`aps:RemoteWrite` on one Prometheus workspace (none without one). Shared by the PCS node
    role and the SageMaker HyperPod execution role."""
    if not workspace_arn:
        return []
    return [iam.PolicyStatement(sid="PrometheusRemoteWrite", actions=["aps:RemoteWrite"], resources=[workspace_arn])]


def node_role(scope: Construct, *, description: str, managed_policies: Sequence[str],
              statements: Sequence[iam.PolicyStatement], path: Optional[str] = None) -> iam.Role:
    """The role of a cluster's nodes (construct id `Role` in `scope`; trust: EC2), of the PCS
    cluster's (NodeRole) or the EKS cluster's (EksNodeRole): AWS managed policies by name, and
    `statements` in one inline policy NODE_POLICY (none without statements)."""
    return iam.Role(
        scope, "Role", path=path, assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"), description=description,
        managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(name) for name in managed_policies],
        inline_policies={NODE_POLICY: iam.PolicyDocument(statements=list(statements))} if statements else None)


def node_statements(cluster_arn: str, bucket_arns: Sequence[str], kms_key_arn: Optional[str],
                    workspace_arn: Optional[str] = None, instance_topology: bool = False,
                    image_repository_arns: Sequence[str] = (),
                    capacity_blocks: bool = False) -> list[iam.PolicyStatement]:
    """What a PCS node may do: register with its cluster, read its place in the network, use the
    cluster's buckets, remote-write its metrics, pull the cluster's images."""
    statements = [iam.PolicyStatement(sid="RegisterWithPcsCluster", actions=["pcs:RegisterComputeNodeGroupInstance"],
                                      resources=[cluster_arn])]
    if instance_topology:
        # a node reads its own place in EC2's network (network-features); the Service Authorization
        # Reference lists ec2:DescribeInstanceTopology with no resource type (List, key ec2:Region):
        # "*" only
        statements.append(iam.PolicyStatement(sid="InstanceTopology", actions=["ec2:DescribeInstanceTopology"],
                                              resources=["*"]))
    if capacity_blocks:
        # a Capacity Block node reads its block's end (capacity-end: EndDate, and its own instance's
        # CapacityReservationId where the group names a resource group of reservations); the Service
        # Authorization Reference lists ec2:DescribeCapacityReservations and ec2:DescribeInstances
        # with no resource type (List): "*" only, read-only
        statements.append(iam.PolicyStatement(sid="CapacityBlockEnd", actions=[
            "ec2:DescribeCapacityReservations", "ec2:DescribeInstances"], resources=["*"]))
    return (statements + storage_statements(bucket_arns, kms_key_arn) + remote_write_statements(workspace_arn)
            + pull_statements(image_repository_arns))


class NodeRole(Construct):
    """Role (path /aws-pcs/) and instance profile for the nodes of one PCS cluster (trust: EC2);
    its permissions, in one inline policy ``fmcluster-node``, are those docs/research-notes.md
    lists for this module.

    Props:
        cluster_arn: ARN of the PCS cluster the nodes register with
            (pcs:RegisterComputeNodeGroupInstance on it only).
            @default required
        bucket_arns: ARNs of the cluster's S3 buckets (read and write on them and their objects).
            @default ``()``: no bucket
        kms_key_arn: ARN of the buckets' KMS key (kms:Decrypt, kms:GenerateDataKey).
            @default None: no storage key
        workspace_arn: ARN of the Prometheus workspace the nodes remote-write to (aps:RemoteWrite).
            @default None: no metrics collection
        instance_topology: the nodes read their place in EC2's network (ec2:DescribeInstanceTopology).
            @default False
        image_repository_arns: ARNs of the ECR repositories whose images the nodes run (pull
            them, and ecr:GetAuthorizationToken, which has no resource type).
            @default ``()``: none
        capacity_blocks: some nodes are on a Capacity Block and read its end
            (ec2:DescribeCapacityReservations, ec2:DescribeInstances).
            @default False

    Attributes:
        role: the `iam.Role`.
        instance_profile: the `iam.CfnInstanceProfile`.
        instance_profile_arn: the instance profile's ARN (the compute node groups'
            `IamInstanceProfileArn`).
    """

    def __init__(self, scope: Construct, construct_id: str, *, cluster_arn: str, bucket_arns: Sequence[str] = (),
                 kms_key_arn: Optional[str] = None, workspace_arn: Optional[str] = None,
                 instance_topology: bool = False, image_repository_arns: Sequence[str] = (),
                 capacity_blocks: bool = False) -> None:
        super().__init__(scope, construct_id)
        self.role = node_role(
            self, path=PCS_PATH,
            description="AWS PCS compute nodes: register with the cluster, use the cluster's buckets",
            managed_policies=["AmazonSSMManagedInstanceCore"],
            statements=node_statements(cluster_arn, bucket_arns, kms_key_arn, workspace_arn, instance_topology,
                                       image_repository_arns, capacity_blocks))
        self.instance_profile = iam.CfnInstanceProfile(self, "InstanceProfile", path=PCS_PATH,
                                                       roles=[self.role.role_name])

    @property
    def instance_profile_arn(self) -> str:
        return self.instance_profile.attr_arn
