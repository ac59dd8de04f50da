"""Facts about the node images the Slurm control planes launch from (NAME-images, EC2 Image Builder).

A node image is the control plane's own base image with everything installed that does not depend
on the node's identity (Enroot and Pyxis built against the base's Slurm, the exporters' packages),
baked once per change instead of on every boot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fmcluster.facts.catalog import STANDARD_VCPUS, VcpuQuota
from fmcluster.facts.controlplanes import ARCHITECTURES, pcs_ami_parameter

PCS, HYPERPOD_SLURM = "pcs", "hyperpod-slurm"  # the control planes whose nodes launch from baked images
IMAGE_TAG = "fmcluster:image"  # the image's key, on each AMI NAME-images bakes (besides fmcluster:cluster)

# Where Slurm is on each plane's base image: AWS PCS installs each Slurm release it offers under its
# own prefix (PCS User Guide, "Install SPANK plugins"); SageMaker HyperPod keeps Slurm in /opt/slurm.
PCS_SLURM_PREFIX = "/opt/aws/pcs/scheduler/slurm-{version}"
HYPERPOD_SLURM_PREFIX = "/opt/slurm"

# The instance an image is built and tested on, per architecture: any instance of the
# architecture runs the base image; the build compiles (Enroot's helpers against musl, Pyxis) and
# needs neither GPU nor EFA. 8 vCPUs keep the compile short.
BUILD_INSTANCE_TYPES = {"x86_64": "c6i.2xlarge", "arm64": "c7g.2xlarge"}
BUILD_INSTANCE_VCPUS = {"c6i.2xlarge": 8, "c7g.2xlarge": 8}  # EC2's figures (the instance catalog holds GPU nodes)
# ... and the EC2 vCPU quota their On-Demand instances count against (C: a Standard family)
BUILD_INSTANCE_QUOTAS: dict[str, VcpuQuota] = {"c6i.2xlarge": STANDARD_VCPUS, "c7g.2xlarge": STANDARD_VCPUS}
# AWS PCS runs node lifecycle actions (the node program, fmcluster.node.pcs) from agent 1.5.0-1 on
# (PCS User Guide, "Configure node lifecycle actions"); a PCS AMI names its agent in its description
# ("PCS Agent: 1.5.0-1. Slurm: ...").
PCS_AGENT_MIN = "1.5.0-1"
PCS_AGENT_IN_DESCRIPTION = r"PCS Agent:\s*([0-9]+(?:[.-][0-9]+)*)"
# ... and the Slurm releases it carries, each under PCS_SLURM_PREFIX ("Slurm: 24.11.7-2, 25.05.8-2,
# 25.11.6-2": awslabs/awsome-distributed-ai, architectures/aws-pcs/docs/PCS-READY-DLAMI.md, every
# PCS-ready DLAMI up to 2026-08-05). A cluster whose Slurm is not among them has no Slurm to build
# Pyxis against (the bake stops with "no Slurm headers") and no slurmd of its version to start.
PCS_SLURM_IN_DESCRIPTION = r"Slurm:\s*([0-9]+\.[0-9]+[0-9.-]*(?:\s*,\s*[0-9]+\.[0-9]+[0-9.-]*)*)"
# The root volume of a PCS image's build instance, and so the size of the image's root snapshot and
# the smallest root volume of a node launched from it (EC2 refuses a volume smaller than its
# snapshot: the spec rule node_root_volume_holds_the_image). The PCS-ready DLAMIs' own root snapshots
# are about 100 GiB, and Image Builder builds on them (Enroot, Pyxis, packages); preflight reads the
# base's own size and FAILs where it is larger than this.
BUILD_ROOT_VOLUME_GIB = 200
# The root device that PCS images' recipes size: the root device of Ubuntu AMIs, which the PCS-ready
# DLAMIs are. A recipe's block device mapping overrides the parent's mapping of the same device and
# adds a volume for any other (AWS::ImageBuilder::ImageRecipe InstanceBlockDeviceMapping: "NoDevice:
# ... remove a mapping from the parent image"; EbsInstanceBlockDeviceSpecification.VolumeSize: "Use
# to override the device's volume size"); preflight compares it with the base's RootDeviceName.
BUILD_ROOT_DEVICE = "/dev/sda1"
# What a first deploy spends on one image (an estimate for `plan`): an Image Builder build instance,
# the build, the AMI snapshot of a 100+ GiB root volume, a test instance from the new AMI and its
# tests. Images build in parallel, before NAME-cluster, and only when their recipe changes.
BUILD_MINUTES_ESTIMATE = 60
# ImageTestsConfiguration.TimeoutMinutes (60..1440). Image Builder's API model says the service does
# not yet act on it (each AWSTOE step has its own timeout: fmcluster.node.image's); set for when it does.
BUILD_TIMEOUT_MINUTES = 240


# The services that launch instances from (or build) an image encrypted with a customer managed key,
# by their service-linked roles: (service principal, role name). Their predefined permissions cover
# AWS managed keys only, so the key's policy must let them use it (AWS PCS User Guide, "Required KMS
# key policy for use with encrypted EBS volumes in AWS PCS"; EC2 Image Builder likewise for the
# build and test instances it launches), and KMS accepts a policy only naming roles that exist.
KEY_USERS = {PCS: ("pcs.amazonaws.com", "AWSServiceRoleForPCS"),
             "imagebuilder": ("imagebuilder.amazonaws.com", "AWSServiceRoleForImageBuilder")}


def service_linked_role_arn(partition: str, account: str, user: str) -> str:
    """The ARN of a KEY_USERS service-linked role in an account (values may be CDK tokens)."""
    service, role = KEY_USERS[user]
    return f"arn:{partition}:iam::{account}:role/aws-service-role/{service}/{role}"


@dataclass(frozen=True)
class Base:
    """A plane's base image for one architecture: `parent` as Image Builder's ParentImage takes it
    (``ssm:PARAMETER``: resolved when the image is built, so the recipe stays the same)."""

    plane: str
    architecture: str
    parameter: str

    @property
    def parent(self) -> str:
        return f"ssm:{self.parameter}"


def base(plane: str, architecture: str) -> Base:
    """The base image a plane's nodes of `architecture` are baked from."""
    if architecture not in ARCHITECTURES:
        raise ValueError(f"no base image for architecture {architecture!r}")
    if plane == PCS:
        return Base(plane, architecture, pcs_ami_parameter(architecture))
    if plane == HYPERPOD_SLURM:
        return Base(plane, architecture, hyperpod_ami_parameter(architecture))
    raise ValueError(f"{plane} nodes do not launch from fmcluster's images")


# SageMaker HyperPod publishes its Slurm base image (the image it launches by default, the documented
# base of HyperPod custom AMIs: SageMaker Developer Guide, "Custom AMIs for SageMaker HyperPod") for
# x86_64 only; no arm64 parameter is documented.
HYPERPOD_BASE_ARCHITECTURES = ("x86_64",)


def has_base(plane: str, architecture: str) -> bool:
    """Whether fmcluster can bake a `plane` node image for `architecture`."""
    if plane == HYPERPOD_SLURM:
        return architecture in HYPERPOD_BASE_ARCHITECTURES
    return plane == PCS and architecture in ARCHITECTURES


def hyperpod_ami_parameter(architecture: str) -> str:
    """The SSM parameter of SageMaker HyperPod's Slurm base image for an architecture."""
    if architecture not in HYPERPOD_BASE_ARCHITECTURES:
        raise ValueError(f"no HyperPod Slurm base image for {architecture!r}")
    return f"/aws/service/sagemaker-hyperpod/ami/{architecture}/slurm-ubuntu-22.04/latest/ami-id"


def slurm_prefix(plane: str, slurm_version: str) -> str:
    """Where Slurm (its include/ and lib/slurm/) is on a plane's base image."""
    if plane == PCS:
        return PCS_SLURM_PREFIX.format(version=slurm_version)
    return HYPERPOD_SLURM_PREFIX


def pcs_agent(description: str) -> str | None:
    """The PCS agent version a PCS AMI's description names, or None."""
    found = re.search(PCS_AGENT_IN_DESCRIPTION, description)
    return found.group(1) if found else None


def pcs_slurm_versions(description: str) -> tuple[str, ...]:
    """The Slurm versions a PCS AMI's description lists (``24.11.7-2``, ...), in its order; () where
    it lists none."""
    found = re.search(PCS_SLURM_IN_DESCRIPTION, description)
    if not found:
        return ()
    return tuple(v.strip().rstrip(".-") for v in found.group(1).split(","))


def slurm_release(version: str) -> str:
    """A Slurm version's release, major.minor, as the PCS API and orchestrator.version name it
    (``25.11.6-2`` -> ``25.11``)."""
    return ".".join(version.split("-", 1)[0].split(".")[:2])


def build_root_volume_gib(plane: str) -> int | None:
    """The root volume a plane's image is built with, and so its root snapshot's size; None: the
    base image's own (SageMaker HyperPod). SageMaker sizes a HyperPod node's root volume itself
    (SageMaker API Reference, ClusterEbsVolumeConfig.RootVolume: "You can't specify the
    VolumeSizeInGB field. The size of the root volume is determined for you"), so a HyperPod image
    keeps its base's root snapshot (AWS's HyperPod custom-AMI example keeps 100 GiB), and its recipe
    maps no device at all: the device name of an ``ssm:`` parent is not known at synthesis, and a
    mapping of another device than the base's root adds a second volume, which HyperPod refuses
    (ClusterInstanceGroupSpecification.ImageId: "Only the primary AMI snapshot volume is
    supported"). preflight reads the base's root device and size."""
    return None if plane == HYPERPOD_SLURM else BUILD_ROOT_VOLUME_GIB


# EBS encryption by default (EC2 GetEbsEncryptionByDefault) encrypts every new volume and snapshot
# of the account in the region, with GetEbsDefaultKmsKeyId's key: a volume asked for unencrypted
# comes out encrypted (EC2 User Guide, "Encryption by default"), and so does an image built on it.
# SageMaker takes only unencrypted custom AMIs for HyperPod (botocore's sagemaker model,
# ClusterInstanceGroupSpecification.ImageId: "Encryption: The custom AMI must be unencrypted"), so
# preflight refuses a HyperPod image build in such a region. The default key is also the key of a PCS
# image built encrypted without the storage key. The AWS managed EBS key, by the alias an answer of
# GetEbsDefaultKmsKeyId may name it with (the API model documents an ARN, which does not say whether
# the key is AWS or customer managed):
AWS_MANAGED_EBS_KEY = "alias/aws/ebs"


def version_key(version: str) -> tuple[int, ...]:
    """A dotted and dashed version (1.5.0-1) as numbers, for comparing."""
    return tuple(int(part) for part in re.split(r"[.-]", version))


# ==================================== the reference container image ================================
# NAME-images also builds the reference GPU image (fmcluster/data/docker/Dockerfile: CUDA, the EFA
# user space, NCCL and nccl-tests, fio) that the acceptance kit's jobs run, with EC2 Image Builder's
# container pipeline: a container recipe whose Dockerfile template is that Dockerfile with its FROM
# taken from the recipe's parent image (Image Builder's `{{{ imagebuilder:parentImage }}}`), built
# by `docker build` on an instance of the image's architecture and pushed into an ECR repository of
# the stack's own (Image Builder User Guide, "Create a container recipe"; CreateContainerRecipe:
# dockerfileTemplateData at most 16,000 characters; the target repository must exist first).
REFERENCE_TEMPLATE_MAX_CHARS = 16_000
# The build instance, per architecture: no GPU needed (nvcc compiles NCCL and nccl-tests for every
# GPU of the catalog without one), but many cores: NCCL's device code for five GPU generations is
# the long step. 32 vCPUs, 64 GiB (EC2's figures for c6i.8xlarge and c7g.8xlarge).
REFERENCE_BUILD_INSTANCE_TYPES = {"x86_64": "c6i.8xlarge", "arm64": "c7g.8xlarge"}
REFERENCE_BUILD_INSTANCE_VCPUS = {"c6i.8xlarge": 32, "c7g.8xlarge": 32}
# The build instance's AMI: Image Builder's default for container builds is "the appropriate
# ECS-optimized AMI" (AWS::ImageBuilder::ContainerRecipe InstanceConfiguration.Image), which it
# does not say per architecture; fmcluster names the Amazon Linux 2023 ECS-optimized AMI of each
# architecture (Docker installed) through ECS's public SSM parameters (Amazon ECS Developer Guide,
# "Retrieving Amazon ECS-optimized Linux AMI metadata"), resolved when the image is built.
REFERENCE_BUILD_AMI = {
    "x86_64": "ssm:/aws/service/ecs/optimized-ami/amazon-linux-2023/recommended/image_id",
    "arm64": "ssm:/aws/service/ecs/optimized-ami/amazon-linux-2023/arm64/recommended/image_id",
}
# Its root volume holds Docker's layers: the CUDA devel base (about 10 GB unpacked), the build's
# layers and the NCCL and nccl-tests sources and objects. /dev/xvda: the root device of Amazon Linux AMIs.
REFERENCE_BUILD_ROOT_DEVICE = "/dev/xvda"
REFERENCE_BUILD_VOLUME_GIB = 200
# A first deploy's estimate for one reference image (`plan`): the build instance, pulling the CUDA
# base, compiling NCCL for every GPU generation and nccl-tests, pushing a ~10 GB image.
REFERENCE_BUILD_MINUTES_ESTIMATE = 75
# The repository of each image is named for the cluster, the architecture and the image's identity
# (fmcluster.model.reference_image): one image per repository, whose tag is never moved, so the
# repository's tags are IMMUTABLE; a new identity is a new repository, and the old one, emptied, goes
# with the deploy that replaces it (EmptyOnDelete). ECR repository names: lower-case alphanumeric
# runs joined by '.', '_' or '-', in '/'-separated parts, 2 to 256 characters (ECR API Reference,
# CreateRepository).
ECR_REPOSITORY = re.compile(r"(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*")
REFERENCE_REPOSITORY_PREFIX = "fmcluster-images"  # ECR namespace of fmcluster's images
