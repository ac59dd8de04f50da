"""cdk-nag (AwsSolutions) on the stacks of a cluster, and every finding fmcluster accepts, with why.

Sources and details: docs/research-notes.md, "fmcluster_cdk/nag.py"."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Optional

from constructs import IConstruct

CONTEXT_KEY = "nag"
PACK = "AwsSolutions"


# A finding names a pseudo parameter where the stack's environment leaves it to the deploy (a spec
# without `account`), and its value where the environment names it (a spec's `account`, and every
# stage of the GitOps pipeline): a suppression that names the parameter matches either.
PSEUDO_VALUES = {"<AWS::AccountId>": "[0-9]{12}", "<AWS::Region>": "[a-z]{2}(?:-[a-z]+)+-[0-9]",
                 "<AWS::Partition>": "aws(?:-[a-z]+)*"}


@dataclass(frozen=True)
class Suppression:
    rule: str  # AwsSolutions-ID or AwsSolutions-ID[finding]; `{*}` matches anything but `/`; a
    # pseudo parameter (PSEUDO_VALUES) matches itself or its value
    paths: tuple[str, ...]  # construct path patterns; `*` matches anything, `/` included
    reason: str
    _rule_re: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _path_res: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_rule_re", _pattern(self.rule, "{*}", "[^/]*", PSEUDO_VALUES))
        object.__setattr__(self, "_path_res", tuple(_pattern(p, "*", ".*") for p in self.paths))

    def matches(self, rule_id: str, path: str) -> bool:
        return bool(self._rule_re.fullmatch(rule_id)) and any(p.fullmatch(path) for p in self._path_res)


def _pattern(pattern: str, wildcard: str, regex: str, values: dict[str, str] | None = None) -> re.Pattern[str]:
    """`pattern` with `wildcard` as `regex`, and each key of `values` as itself or its value's regex."""
    def literal(part: str) -> str:
        text = re.escape(part)
        for name, value in (values or {}).items():
            text = text.replace(re.escape(name), f"(?:{re.escape(name)}|{value})")
        return text

    return re.compile(regex.join(literal(part) for part in pattern.split(wildcard)))


def _iam4(policy: str) -> str:
    return f"{PACK}-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{policy}]"


def _iam5(resource: str) -> str:
    return f"{PACK}-IAM5[Resource::{resource}]"


# PCS and EKS node roles (fmcluster_cdk/constructs/compute/node_role.py, fmcluster_cdk/constructs/eks/iam.py)
NODE_ROLES = ("*/NodeRole/Role/Resource",)
EXECUTION_ROLES = ("*/ExecutionRole/Role/Resource",)  # HyperPod (fmcluster_cdk/constructs/hyperpod/role.py)
KUBECTL_PROVIDER = "*/KubectlProvider/*"  # aws_eks_v2's kubectl provider: code and roles owned by aws-cdk-lib
LAMBDA_SERVICE_ROLES = ("*/Handler/ServiceRole/Resource",)  # fmcluster's custom-resource handlers
# fmcluster_cdk/constructs/images/builder.py: the node images' (NAME-images) and the reference images'
# (NAME-reference, constructs/images/container.py)
IMAGE_BUILD_ROLES = ("*-images/*/BuildRole/Role/Resource", "*-reference/*/BuildRole/Role/Resource")

SUPPRESSIONS: tuple[Suppression, ...] = (
    Suppression(
        f"{PACK}-S1", ("*-storage/Bucket-*/Resource",),
        "Server access logs are off on the dataset and checkpoint buckets: FSx imports and exports and "
        "training jobs make millions of requests, each would be a best-effort log record in another "
        "bucket; request auditing belongs to CloudTrail S3 data events, set up account- or "
        "organization-wide. The buckets are private, TLS-only, encrypted and retained."),
    Suppression(
        _iam4("AmazonSSMManagedInstanceCore"), NODE_ROLES,
        "Login is through SSM Session Manager (no SSH key, no open port): AWS's policy for the SSM "
        "agent (ssm:UpdateInstanceInformation, ssmmessages, ec2messages and a few reads); it grants "
        "no S3, FSx or EC2 access."),
    Suppression(
        _iam4("AmazonEKSWorkerNodePolicy"), NODE_ROLES,
        "Required on the node role of EKS managed node groups (EKS User Guide, 'Amazon EKS node IAM "
        "role'); AWS keeps it in step with what the kubelet needs."),
    Suppression(
        _iam4("AmazonEC2ContainerRegistryPullOnly"), NODE_ROLES,
        "Nodes pull the add-on and plugin images from ECR: the narrowest AWS policy for it (pull only, "
        "no push, no repository changes), as the EKS node role documentation recommends."),
    Suppression(
        _iam4("AmazonEKS_CNI_Policy"), ("*/Addon-vpc-cni/PodIdentityRole/Role/Resource",),
        "The VPC CNI add-on's documented policy, on a Pod Identity role of the aws-node service "
        "account only, not on the node role."),
    Suppression(
        _iam4("AmazonEKSClusterPolicy"), ("*/Cluster/Role/Resource",),
        "The EKS cluster service role requires this policy (EKS User Guide, 'Amazon EKS cluster IAM role')."),
    Suppression(
        _iam4("service-role/AWSLambdaBasicExecutionRole"), (KUBECTL_PROVIDER,) + LAMBDA_SERVICE_ROLES,
        "Lambda handlers write their own logs: AWS's policy for CloudWatch Logs only. The kubectl provider's "
        "roles are made by aws-cdk-lib's aws_eks_v2 and cannot be changed from here."),
    Suppression(
        _iam4("service-role/AWSLambdaVPCAccessExecutionRole"), (KUBECTL_PROVIDER,),
        "aws_eks_v2 runs the kubectl provider in the cluster's VPC (private endpoint); AWS's policy for "
        "the Lambda network interfaces. Role made by aws-cdk-lib."),
    Suppression(
        _iam4("service-role/AWSLambdaVPCAccessExecutionRole"), ("*/CapacityEnd*/Handler/ServiceRole/Resource",),
        "The function that handles a capacity's end in a Kubernetes cluster runs in the cluster's VPC, to "
        "reach the API server's private endpoint (fmcluster_cdk/constructs/compute/capacity_end.py): AWS's "
        "policy for the Lambda network interfaces, which aws_lambda attaches to a function in a VPC."),
    Suppression(
        _iam4("AmazonEC2ContainerRegistryReadOnly"), (KUBECTL_PROVIDER,),
        "aws_eks_v2's kubectl provider reads Helm charts from ECR (OCI). Role made by aws-cdk-lib."),
    Suppression(
        f"{PACK}-IAM4[Policy::" + '{"Fn::If":[{*},{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},'
        '":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},{"Ref":"AWS::NoValue"}]}]',
        (KUBECTL_PROVIDER,),
        "aws_eks_v2's kubectl provider reads Helm charts from ECR Public where the region has it. Role "
        "made by aws-cdk-lib."),
    Suppression(
        _iam5("<{*}KubectlProviderHandler{*}.Arn>:*"), (KUBECTL_PROVIDER,),
        "The provider framework invokes versions of its own handler function only. Policy made by aws-cdk-lib."),
    Suppression(
        f"{PACK}-L1", ("*/KubectlProvider/Handler/Resource", "*/KubectlProvider/Provider/framework-onEvent/Resource"),
        "The kubectl provider's runtime is chosen by aws-cdk-lib's aws_eks_v2 (it moves with the aws-cdk-lib pin)."),
    Suppression(
        _iam5("arn:<AWS::Partition>:s3:::{*}-<AWS::AccountId>-{*}/*"), NODE_ROLES + EXECUTION_ROLES,
        "Objects of the cluster's own buckets (names from fmcluster.facts.naming: cluster, bucket, account, "
        "region); object keys are the training data and checkpoints, unknown at synth."),
    Suppression(
        _iam5("arn:<AWS::Partition>:s3:::cdk-{*}-assets-<AWS::AccountId>-{*}/fmcluster-lifecycle/{*}/*"),
        EXECUTION_ROLES,
        "s3:GetObject on the cluster's lifecycle-script folders only (content-addressed asset prefixes "
        "in the CDK asset bucket)."),
    Suppression(
        _iam5("*"), EXECUTION_ROLES,
        "Only actions that support no resource-level permissions (Service Authorization Reference): "
        "ec2:Describe*, ssmmessages channels (Session Manager), ecr:GetAuthorizationToken, "
        "fsx:DescribeFileSystems (EFA set-up of the FSx mount), and cloudwatch:PutMetricData limited to "
        "the /aws/sagemaker/Clusters namespace by condition. Each is on the allow-list of the IAM walk "
        "(tests/support/security.py)."),
    Suppression(
        _iam5("*"), ("*/CapacityBlockScaler/Handler/ServiceRole/DefaultPolicy/Resource",),
        "ec2:DescribeCapacityReservations only, which has no resource types (Service Authorization "
        "Reference): the Capacity Block scaler reads its block's state and end. It may scale its one node "
        "group and read its one hold parameter, each by ARN."),
    Suppression(
        _iam5("*"), ("*/CapacityEnd*/Handler/ServiceRole/DefaultPolicy/Resource",),
        "ec2:DescribeCapacityReservations only, which has no resource types (Service Authorization "
        "Reference): the function that handles a Capacity Block's end in the Kubernetes cluster reads the "
        "block's state and end. It may describe its one cluster, by ARN; a training plan's is read by ARN."),
    Suppression(
        _iam5("*"), ("*/CapacityCountdown/Handler/ServiceRole/DefaultPolicy/Resource",),
        "ec2:DescribeCapacityReservations, which has no resource types (Service Authorization Reference), "
        "and cloudwatch:PutMetricData, limited to the fmcluster namespace by condition: the capacity "
        "countdown reads each Capacity Block's end and puts the hours left. The training plans it reads "
        "are named by ARN."),
    Suppression(
        _iam5("*"), NODE_ROLES,
        "ec2:DescribeInstanceTopology, which has no resource types (Service Authorization "
        "Reference): an AWS PCS GPU node reads its own place in EC2's network at boot and publishes it as "
        "Slurm node features for placement; and ecr:GetAuthorizationToken, the registry login (no "
        "resource type) for pulling the reference GPU image, whose pull is on its repositories by ARN; "
        "on a Capacity Block group, ec2:DescribeCapacityReservations and ec2:DescribeInstances (no "
        "resource types either): the node reads its block's end to stop Slurm starting jobs the end "
        "would cut. Read-only."),
    Suppression(
        _iam5("*"), ("*/NodeReplacer/Handler/ServiceRole/DefaultPolicy/Resource",),
        "ec2:DescribeInstances and ec2:DescribeCapacityReservations, which have no resource types (Service "
        "Authorization Reference), and cloudwatch:PutMetricData, limited to the fmcluster namespace by "
        "condition: the node replacer checks a request's instance and its Capacity Block's end, and counts "
        "replacements. Its queue, ledger parameter and HyperPod cluster are named by ARN."),
    Suppression(
        _iam5("*"), ("*/Addon-aws-fsx-csi-driver/PodIdentityRole/Role/Resource",),
        "fsx:DescribeFileSystems only, which has no resource types (Service Authorization Reference): "
        "a file-system ARN would leave the CSI driver's describe call denied. Read-only; the update call "
        "is on the cluster's file system only."),
    Suppression(
        _iam5("arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:network-interface/*"), EXECUTION_ROLES,
        "HyperPod creates and manages interfaces in the cluster's VPC: their ids are unknown at synth; "
        "creation also names the cluster's subnets and security groups, and deleting, detaching and the "
        "CNI calls require the interface to be in the cluster's VPC (condition ec2:Vpc)."),
    Suppression(
        _iam5("arn:<AWS::Partition>:ec2:<AWS::Region>:*:instance/*"), EXECUTION_ROLES,
        "The instance side of ec2:DetachNetworkInterface (and, VPC CNI on HyperPod EKS, "
        "ec2:AttachNetworkInterface), which require the instance resource type too: HyperPod's "
        "instances belong to an account SageMaker owns, unknown at synth; the interface side of the "
        "same calls is limited to the cluster's VPC (ec2:Vpc)."),
    Suppression(
        _iam5("arn:<AWS::Partition>:ecr:<AWS::Region>:*:repository/*"), EXECUTION_ROLES,
        "Image pulls (read-only) of the EKS add-ons and HyperPod agents, which live in AWS-owned "
        "registries whose account differs by region."),
    Suppression(
        _iam5("arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws/sagemaker/Clusters/*{*}"),
        EXECUTION_ROLES,
        "HyperPod writes to log groups /aws/sagemaker/Clusters/NAME/ID (and their streams); the cluster id "
        "is known only after creation."),
    Suppression(
        _iam5("arn:{*}:ec2:{*}:<AWS::AccountId>:instance/*"), IMAGE_BUILD_ROLES,
        "ssm:UpdateInstanceInformation, by which the SSM agent of an Image Builder build or test instance "
        "registers its own instance: Image Builder launches those instances during the build, so their ids "
        "are unknown at synth; this account's instances in this region only."),
    Suppression(
        _iam5("*"), IMAGE_BUILD_ROLES,
        "Only the SSM agent's calls of AWS's AmazonSSMManagedInstanceCore (parameters left out), which "
        "Image Builder's guide has build instances carry: ec2messages (Run Command delivery) and the "
        "ssmmessages channels, which have no resource types (Service Authorization Reference), and the "
        "agent's documents, associations and inventory; Image Builder runs AWSTOE through them; and, for "
        "a reference image's container build, ecr:GetAuthorizationToken (the registry login, no resource "
        "type), its push being on its own repository by ARN. No AWS managed policy: the components, the "
        "repository and the log group are the image's own, by ARN."),
    Suppression(
        _iam5("<{*}Recipe{*}.Arn>/*"), ("*-reference/*/BuildRole/Role/Resource",),
        "imagebuilder:GetContainerRecipe on the reference image's own container recipe, by its ARN and "
        "ARN/* (the container-recipe resource type is NAME/VERSION, Service Authorization Reference), as "
        "AWS's EC2InstanceProfileForImageBuilderECRContainerBuilds grants it: the build reads its recipe."),
    Suppression(
        _iam5("arn:{*}:s3:::ec2imagebuilder*/*"), IMAGE_BUILD_ROLES,
        "s3:GetObject on EC2 Image Builder's own buckets (AWSTOE and its downloads), as AWS's "
        "EC2InstanceProfileForImageBuilder grants it: another account's buckets, read only."),
    # the Slurm accounting database of a HyperPod Slurm cluster with teams
    # (fmcluster_cdk/constructs/storage/accounting_database.py)
    Suppression(
        f"{PACK}-RDS3", ("*-storage/SlurmAccounting/*",),
        "One Availability Zone: the database holds Slurm's accounting (associations, job records), not "
        "the cluster's data; slurmctld keeps scheduling with the associations it has cached and queues "
        "its records while slurmdbd cannot reach the database (Slurm's accounting guide). Daily "
        "backups, deletion protection and retention keep it; Multi-AZ would double its cost."),
    Suppression(
        f"{PACK}-RDS11", ("*-storage/SlurmAccounting/*",),
        "MariaDB's default port, which SageMaker HyperPod's AccountingDatabase defaults to: the instance "
        "is in private subnets, not publicly accessible, and its security group admits only the "
        "cluster's nodes on it; another port would hide nothing."),
    Suppression(
        f"{PACK}-SMG4", ("*-storage/SlurmAccounting/Credentials/Resource",),
        "No automatic rotation: SageMaker HyperPod reads the secret when it configures slurmdbd on the "
        "controller, and its documentation does not say that a rotated password reaches slurmdbd; a "
        "rotation would cut Slurm off its accounting. The secret is generated, encrypted (the storage "
        "key where there is one) and readable only by the cluster's execution role."),
)


@dataclass(frozen=True)
class Finding:
    rule: str  # AwsSolutions-ID, or AwsSolutions-ID[finding]
    path: str  # construct path of the resource
    severity: str  # error | warning
    description: str
    suppression: Optional[Suppression]


def suppression_for(rule_id: str, path: str) -> Optional[Suppression]:
    return next((s for s in SUPPRESSIONS if s.matches(rule_id, path)), None)


def requested(scope: IConstruct) -> bool:
    """True when the context asks for cdk-nag (`-c nag=true`, or `"nag": true` in cdk.json)."""
    return str(scope.node.try_get_context(CONTEXT_KEY)).lower() in ("true", "1", "yes")


def check(scopes: Iterable[IConstruct]) -> list[Finding]:
    """Run the AwsSolutions pack over the constructs under `scopes` (nested stacks included):
    every finding, with the suppression that covers it (None when none does)."""
    from cdk_nag import AwsSolutionsChecks

    pack = AwsSolutionsChecks()
    findings = []
    for scope in scopes:
        for violation in pack.validate_scope(scope).violations:
            for resource in violation.violating_resources:
                path, severity = resource.construct_path, violation.severity
                assert path is not None and severity is not None  # cdk-nag gives both (optional in the CDK's type)
                findings.append(Finding(violation.rule_name, path, severity, violation.description,
                                        suppression_for(violation.rule_name, path)))
    return findings


def apply(scopes: Iterable[IConstruct]) -> list[Finding]:
    """`check`, then acknowledge every suppressed finding on its construct (with its reason) and
    annotate the others as errors or warnings (`cdk synth` prints them and fails on an error)."""
    import aws_cdk as cdk

    scopes = list(scopes)
    constructs = {c.node.path: c for scope in scopes for c in scope.node.find_all()}
    findings = check(scopes)
    for finding in findings:
        target = constructs[finding.path]
        if finding.suppression:
            cdk.Validations.of(target).acknowledge(cdk.Acknowledgment(id=finding.rule,
                                                                      reason=finding.suppression.reason))
        elif finding.severity == "error":
            cdk.Annotations.of(target).add_error(f"{finding.rule}: {finding.description}")
        else:
            cdk.Annotations.of(target).add_warning_v2(finding.rule, f"{finding.rule}: {finding.description}")
    return findings
