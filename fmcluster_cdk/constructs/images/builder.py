"""A node image baked by EC2 Image Builder: the build and test components, the recipe, where and how
it is built (infrastructure configuration), where the AMI goes (distribution), the image itself,
which CloudFormation waits for, and the build instance's own role and log group.

Plain props only: these constructs know nothing of the cluster spec.

Sources: EC2 Image Builder User Guide ("How Image Builder works", "Manage components with AWSTOE",
"Set up IAM roles", "Create a VPC endpoint policy for Image Builder"), the Image Builder API
Reference (CreateComponent, CreateImageRecipe, CreateImage, DeleteImage) and CloudFormation's
AWS::ImageBuilder::* resource types.
"""

from __future__ import annotations

import re
from typing import Mapping, Optional, Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_imagebuilder as imagebuilder
from aws_cdk import aws_logs as logs
from constructs import Construct

from fmcluster_cdk.errors import ConstructError

VERSION = "1.0.0"  # every name carries the content's identity, so each name has one version only
# Image Builder names: letters, digits, hyphens, underscores and spaces, 3 to 128 characters; its
# ARNs hold the name lower-cased with underscores and spaces normalized, so fmcluster's names keep to
# lower-case letters, digits and hyphens, and leave room for the -build and -test suffixes.
NAME = re.compile(r"[a-z0-9][a-z0-9-]{1,100}[a-z0-9]")
LOG_GROUP_PREFIX = "/aws/imagebuilder/"  # Image Builder's own log groups: /aws/imagebuilder/IMAGE-NAME
LOG_GROUP = re.compile(re.escape(LOG_GROUP_PREFIX) + r"[a-zA-Z0-9\-_/.]{1,494}")  # Image LoggingConfiguration
BUILD_DATE = "{{ imagebuilder:buildDate }}"  # each build's AMI gets a name of its own (AmiDistributionConfiguration)
ROOT_DEVICE = "/dev/sda1"  # the root device of Ubuntu AMIs (the PCS and HyperPod Slurm bases)
# The recipe's block device mappings apply over the parent image's: a mapping of the parent's root
# device overrides its size ("Use to override the device's volume size"), a mapping of any other
# device adds a volume, and NoDevice removes one of the parent's (CloudFormation,
# AWS::ImageBuilder::ImageRecipe InstanceBlockDeviceMapping and EbsInstanceBlockDeviceSpecification,
# as cfn-lint's schema of the resource has them; BlockDeviceMappings is optional there). Without
# any, the build instance, and so the image, has the parent's volumes as they are.

# What the SSM agent on the build and test instances needs for Image Builder's Run Command calls
# (the agent's part of AmazonSSMManagedInstanceCore, without State Manager, inventory, patching or
# Session Manager's data channels): register the instance, take commands from the message
# delivery service (ec2messages) or the agent's control channel (ssmmessages), report back.
AGENT_INSTANCE_ACTIONS = ["ssm:UpdateInstanceInformation"]
AGENT_MESSAGE_ACTIONS = ["ec2messages:AcknowledgeMessage", "ec2messages:DeleteMessage", "ec2messages:FailMessage",
                         "ec2messages:GetEndpoint", "ec2messages:GetMessages", "ec2messages:SendReply",
                         "ssmmessages:CreateControlChannel", "ssmmessages:CreateDataChannel",
                         "ssmmessages:OpenControlChannel", "ssmmessages:OpenDataChannel"]
# The rest of what AWS's AmazonSSMManagedInstanceCore gives the agent (documents, associations and
# their status, inventory), which Image Builder's guide has its build instances carry; parameters
# (ssm:GetParameter*) are left out: they are the account's data, and no fmcluster document reads one.
AGENT_CORE_ACTIONS = ["ssm:DescribeAssociation", "ssm:DescribeDocument", "ssm:GetDeployablePatchSnapshotForInstance",
                      "ssm:GetDocument", "ssm:GetManifest", "ssm:ListAssociations", "ssm:ListInstanceAssociations",
                      "ssm:PutComplianceItems", "ssm:PutConfigurePackageResult", "ssm:PutInventory",
                      "ssm:UpdateAssociationStatus", "ssm:UpdateInstanceAssociationStatus"]
# Image Builder's own buckets (AWSTOE and its documents' downloads), as EC2InstanceProfileForImageBuilder
# grants: a signed request from this role to another account's bucket needs the role's allow too.
IMAGE_BUILDER_BUCKETS = "arn:{partition}:s3:::ec2imagebuilder*/*"
LOG_ACTIONS = ["logs:CreateLogStream", "logs:PutLogEvents"]
ROLE_PATH = "/fmcluster-image-build/"  # build roles apart from the nodes' own


class ImageBuildRole(Construct):
    """The role (path ``/fmcluster-image-build/``) and instance profile of an image's build and test
    instances (trust: EC2), with one
    inline policy ``fmcluster-image-build``: the SSM agent's calls (``AGENT_*_ACTIONS``, what AWS's
    AmazonSSMManagedInstanceCore gives it but parameters; the registration on this account's
    instances only), ``imagebuilder:GetComponent`` on the image's own components, reading Image
    Builder's own ``ec2imagebuilder*`` buckets, and writing to its own log group. No AWS managed
    policy: Image Builder's EC2InstanceProfileForImageBuilder would add every component and every
    /aws/imagebuilder/ log group. Encrypted volumes and AMIs are Image Builder's service-linked
    role's business, not the instance's (the storage key's policy names it).

    Props:
        component_arns: ARNs of the image's components (their build versions, as the recipe names
            them): imagebuilder:GetComponent on these only; none (a container recipe without
            components): no such grant.
            @default required
        log_group_arn: ARN of the image's log group (the ``Arn`` attribute, which ends in ``:*``:
            its streams).
            @default required
        description: the role's description.
            @default required
        statements: more statements of the inline policy (a container build's push to its
            repository).
            @default ``()``

    Attributes:
        role: the `iam.Role`.
        instance_profile: the `iam.CfnInstanceProfile` (its `ref` is the profile's name).
    """

    def __init__(self, scope: Construct, construct_id: str, *, component_arns: Sequence[str], log_group_arn: str,
                 description: str, statements: Sequence[iam.PolicyStatement] = ()) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        instances = stack.format_arn(service="ec2", resource="instance", resource_name="*")
        policy = iam.PolicyDocument(statements=[
            iam.PolicyStatement(sid="SsmAgentInstance", actions=AGENT_INSTANCE_ACTIONS, resources=[instances]),
            iam.PolicyStatement(sid="SsmAgentMessages", actions=AGENT_MESSAGE_ACTIONS, resources=["*"]),
            iam.PolicyStatement(sid="SsmAgentCore", actions=AGENT_CORE_ACTIONS, resources=["*"]),
            iam.PolicyStatement(sid="ImageBuilderBuckets", actions=["s3:GetObject"],
                                resources=[IMAGE_BUILDER_BUCKETS.format(partition=stack.partition)]),
            *([iam.PolicyStatement(sid="ImageComponents", actions=["imagebuilder:GetComponent"],
                                   resources=list(component_arns))] if component_arns else []),
            iam.PolicyStatement(sid="ImageLogs", actions=LOG_ACTIONS, resources=[log_group_arn]),
            *statements,
        ])
        self.role = iam.Role(self, "Role", path=ROLE_PATH, assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
                             description=description, inline_policies={"fmcluster-image-build": policy})
        self.instance_profile = iam.CfnInstanceProfile(self, "InstanceProfile", roles=[self.role.role_name])


def checked_build(scope: Construct, name: str, security_group_ids: Sequence[str],
                  log_group_name: Optional[str]) -> str:
    """Refuse what Image Builder would of an image's name, its subnet's security groups and its log
    group (NAME, LOG_GROUP); the log group's name (``/aws/imagebuilder/NAME`` by default)."""
    if not NAME.fullmatch(name):
        raise ConstructError(scope, f"image name {name!r}: lower-case letters, digits and hyphens, 3 to 102 "
                                    "characters")
    if not security_group_ids:
        raise ConstructError(scope, f"image {name}: a subnet needs at least one security group")
    found = log_group_name or f"{LOG_GROUP_PREFIX}{name}"
    if not LOG_GROUP.fullmatch(found):
        raise ConstructError(scope, f"log group {found!r}: not a name under {LOG_GROUP_PREFIX}")
    return found


def retained_log_group(scope: Construct, log_group_name: str, retention_days: int) -> logs.CfnLogGroup:
    """The image's build log group (`Logs`), kept when the stack goes: it holds every build's history."""
    log_group = logs.CfnLogGroup(scope, "Logs", log_group_name=log_group_name, retention_in_days=retention_days)
    log_group.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
    return log_group


def build_infrastructure(scope: Construct, *, name: str, description: str, role: ImageBuildRole, instance_type: str,
                         subnet_id: str, security_group_ids: Sequence[str],
                         hop_limit: int) -> imagebuilder.CfnInfrastructureConfiguration:
    """Where and how an image is built (`Infrastructure`): one instance of `instance_type` with `role`'s
    profile, in the subnet, IMDSv2 only, terminated when the build fails."""
    return imagebuilder.CfnInfrastructureConfiguration(
        scope, "Infrastructure", name=name, description=description[:1024],
        instance_profile_name=role.instance_profile.ref, instance_types=[instance_type],
        subnet_id=subnet_id, security_group_ids=list(security_group_ids), terminate_instance_on_failure=True,
        instance_metadata_options=imagebuilder.CfnInfrastructureConfiguration.InstanceMetadataOptionsProperty(
            http_tokens="required", http_put_response_hop_limit=hop_limit),
        resource_tags={"Name": name})


class NodeImageBuilder(Construct):
    """One node image: EC2 Image Builder builds `parent_image` with the build component on an
    instance of `instance_type` in `subnet_id`, snapshots it, launches a second instance from the
    snapshot to run the test component, and only then distributes the AMI; CloudFormation waits for
    all of it (AWS::ImageBuilder::Image). Every Image Builder resource is named after `name`, which
    carries the content's identity: components and recipes are immutable versions, so changed
    content gets new names, new resources and a new image, and the image it replaces keeps its AMI
    (deleting an Image Builder image leaves its AMI), so nodes launched from it run on until they
    are replaced.

    The build and test instances run with IMDSv2 only, are terminated when a build fails, and log
    to `log_group_name`, which is kept for `log_retention_days` and retained when the stack is
    deleted. The root volume is gp3 of `root_volume_gib`, encrypted as asked; or, without
    `root_volume_gib`, the parent image's root volume as it is (no block device mapping).

    Props:
        name: the base of every name: lower-case letters, digits and hyphens, 3 to 102 characters
            (the components are NAME-build and NAME-test, the recipe, infrastructure and
            distribution configurations NAME); it should carry a digest of everything that makes
            the image (documents, parent, revision, encryption).
            @default required
        parent_image: the base image as Image Builder's ParentImage takes it (an AMI id, an image
            ARN, or ``ssm:`` and a parameter name, resolved when the image is built).
            @default required
        build_document: the AWSTOE document of the build component (YAML, at most 16,000 characters).
            @default required
        test_document: the AWSTOE document of the test component, run on an instance of the built image.
            @default required
        instance_type: the build and test instances' type (of the parent image's architecture).
            @default required
        subnet_id: the subnet the build and test instances run in (it needs a way out to the
            service endpoints: NAT or VPC endpoints).
            @default required
        security_group_ids: the instances' security groups (at least one with the subnet).
            @default required
        root_volume_gib: size of the root volume of the build instance, and so of the AMI's snapshot
            (a block device mapping of `root_device_name`); None: no mapping at all, the parent's own
            root volume, size and encryption (for a parent whose root device is not known at
            synthesis: a mapping of another device would add a volume). None takes neither
            `encrypted` nor `kms_key_arn`.
            @default required
        root_device_name: the parent image's root device.
            @default ``/dev/sda1`` (Ubuntu)
        encrypted: encrypt the root volume, and so the AMI's snapshot; False with EBS encryption by
            default on in the region still encrypts it, with the account's default key.
            @default True
        kms_key_arn: the KMS key of the volume and of the distributed AMI (with `encrypted`).
            @default None: the account's default EBS key
        ami_tags: tags of the distributed AMI (at most 50).
            @default ``{}``
        test_timeout_minutes: ImageTestsConfiguration.TimeoutMinutes, 60 to 1,440.
            @default 720
        hop_limit: the IMDS hop limit of the build and test instances, 1 to 64.
            @default 2
        log_retention_days: days the build logs are kept (a CloudWatch Logs retention value).
            @default 365
        log_group_name: the build logs' log group, under ``/aws/imagebuilder/`` (where Image Builder
            writes without an execution role of its own); a name that outlives `name` keeps one
            group, and its history, across the image's builds.
            @default ``/aws/imagebuilder/NAME``
        enhanced_metadata: Image Builder's enhanced image metadata (EnhancedImageMetadataEnabled): an
            SSM inventory association on the build instance that records its OS version and
            packages. It needs the SSM agent's association and inventory calls in the build role
            (not granted here), and fails the build where the account already collects inventory
            from every instance (an instance takes one inventory association at most).
            @default False
        description: a description of the image, on each resource.
            @default required

    Attributes:
        build_component: the build `imagebuilder.CfnComponent`.
        test_component: the test `imagebuilder.CfnComponent`.
        recipe: the `imagebuilder.CfnImageRecipe`.
        log_group: the `logs.CfnLogGroup` (retained).
        build_role: the `ImageBuildRole`.
        infrastructure: the `imagebuilder.CfnInfrastructureConfiguration`.
        distribution: the `imagebuilder.CfnDistributionConfiguration`.
        image: the `imagebuilder.CfnImage`.
        image_id: the AMI id of the build (`ImageId`).
        image_arn: the Image Builder image's ARN.
        log_group_name: the log group's name.
    """

    def __init__(self, scope: Construct, construct_id: str, *, name: str, parent_image: str, build_document: str,
                 test_document: str, instance_type: str, subnet_id: str, security_group_ids: Sequence[str],
                 root_volume_gib: Optional[int], root_device_name: str = ROOT_DEVICE, encrypted: bool = True,
                 kms_key_arn: Optional[str] = None, ami_tags: Optional[Mapping[str, str]] = None,
                 test_timeout_minutes: int = 720, hop_limit: int = 2, log_retention_days: int = 365,
                 log_group_name: Optional[str] = None, enhanced_metadata: bool = False,
                 description: str) -> None:
        super().__init__(scope, construct_id)
        self.log_group_name = checked_build(self, name, security_group_ids, log_group_name)
        if kms_key_arn and not encrypted:
            raise ConstructError(self, f"image {name}: a KMS key for an unencrypted image")
        if root_volume_gib is None and (encrypted or kms_key_arn):
            raise ConstructError(self, f"image {name}: encryption without a root volume mapping (the parent's "
                                       "root volume is taken as it is)")
        self.build_component, self.test_component = (
            imagebuilder.CfnComponent(self, f"{phase.capitalize()}Component", name=f"{name}-{phase}", version=VERSION,
                                      platform="Linux", data=document,
                                      description=f"{description}: {phase}"[:1024])
            for phase, document in (("build", build_document), ("test", test_document)))
        component = imagebuilder.CfnImageRecipe.ComponentConfigurationProperty
        ebs = imagebuilder.CfnImageRecipe.EbsInstanceBlockDeviceSpecificationProperty
        mappings = None if root_volume_gib is None else [imagebuilder.CfnImageRecipe.InstanceBlockDeviceMappingProperty(
            device_name=root_device_name, ebs=ebs(volume_size=root_volume_gib, volume_type="gp3",
                                                  delete_on_termination=True, encrypted=encrypted,
                                                  kms_key_id=kms_key_arn))]
        self.recipe = imagebuilder.CfnImageRecipe(
            self, "Recipe", name=name, version=VERSION, parent_image=parent_image, description=description[:1024],
            components=[component(component_arn=c.attr_arn) for c in (self.build_component, self.test_component)],
            block_device_mappings=mappings)

        self.log_group = retained_log_group(self, self.log_group_name, log_retention_days)
        self.build_role = ImageBuildRole(
            self, "BuildRole", log_group_arn=self.log_group.attr_arn,
            component_arns=[self.build_component.attr_arn, self.test_component.attr_arn],
            description=f"Image Builder build and test instances of {name}")
        self.infrastructure = build_infrastructure(
            self, name=name, description=description, role=self.build_role, instance_type=instance_type,
            subnet_id=subnet_id, security_group_ids=security_group_ids, hop_limit=hop_limit)

        # AmiDistributionConfiguration is untyped JSON in the CDK (no struct): CloudFormation's own names.
        ami: dict[str, object] = {"Name": f"{name}-{BUILD_DATE}", "Description": description[:1024]}
        if ami_tags:
            ami["AmiTags"] = dict(ami_tags)
        if kms_key_arn:
            ami["KmsKeyId"] = kms_key_arn
        self.distribution = imagebuilder.CfnDistributionConfiguration(
            self, "Distribution", name=name, description=description[:1024],
            distributions=[imagebuilder.CfnDistributionConfiguration.DistributionProperty(
                region=cdk.Stack.of(self).region, ami_distribution_configuration=ami)])

        self.image = imagebuilder.CfnImage(
            self, "Image", image_recipe_arn=self.recipe.attr_arn,
            infrastructure_configuration_arn=self.infrastructure.attr_arn,
            distribution_configuration_arn=self.distribution.attr_arn,
            image_tests_configuration=imagebuilder.CfnImage.ImageTestsConfigurationProperty(
                image_tests_enabled=True, timeout_minutes=test_timeout_minutes),
            enhanced_image_metadata_enabled=enhanced_metadata,
            logging_configuration=imagebuilder.CfnImage.ImageLoggingConfigurationProperty(
                log_group_name=self.log_group_name))
        # The build writes to the log group with the role's policy: both exist before it starts.
        self.image.node.add_dependency(self.log_group, self.build_role.role)

    @property
    def image_id(self) -> str:
        return self.image.attr_image_id

    @property
    def image_arn(self) -> str:
        return self.image.attr_arn
