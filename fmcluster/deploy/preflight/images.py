"""What NAME-images needs of the region (AWS PCS and SageMaker HyperPod, whose nodes launch from
images fmcluster bakes): each image's base image (its public SSM parameter, the image it names,
on AWS PCS its agent and Slurm releases, its root volume), EBS encryption by default, the
service-linked roles an encrypted image's key names (IAM), and EC2 Image Builder answering."""

from __future__ import annotations

from functools import partial
from typing import Any, Iterable, Mapping

from botocore.exceptions import ClientError

from fmcluster.deploy.preflight import endpoints
from fmcluster.deploy.preflight.context import FAIL, PASS, WARN, Check, Context
from fmcluster.deploy.preflight.ec2 import AMI_NOT_FOUND
from fmcluster.deploy.preflight.endpoints import ListCall, answers
from fmcluster.deploy.preflight.guard import ec2_found, guard
from fmcluster.facts import images as image_facts
from fmcluster.model import cluster as model

PARAMETER_NOT_FOUND = {"ParameterNotFound", "ParameterVersionNotFound"}
# Image Builder answering in the region: the account's own recipes, one at most
IMAGE_BUILDER: ListCall = ("imagebuilder", "list_image_recipes", {"owner": "Self", "maxResults": 1},
                           "imageRecipeSummaryList", "EC2 Image Builder")


def node_images(ctx: Context) -> Iterable[Check]:
    """What NAME-images needs of the region: each image's base image (its parameter; on AWS PCS
    its agent and Slurm releases; its root volume), EBS encryption by default, the service-linked
    roles an encrypted image's key names, and EC2 Image Builder answering (the build instances'
    vCPUs are in the quota checks)."""
    if not ctx.images:
        return
    for image in ctx.images:
        name = f"base image {image.key}"
        yield from guard(ctx, name, partial(_base_image, ctx, image, name))
    name = "EBS encryption by default"
    yield from guard(ctx, name, partial(_ebs_encryption, ctx, name))
    if any(image.encrypted for image in ctx.images):
        for user in sorted(image_facts.KEY_USERS):
            name = f"service-linked role {image_facts.KEY_USERS[user][1]}"
            yield from guard(ctx, name, partial(_key_user, ctx, user, name))
    service, call, kwargs, key, what = IMAGE_BUILDER
    if endpoints.offered_in(service, ctx.spec.region) is False:
        yield Check(what, FAIL, f"{what} is not offered in {ctx.spec.region} (botocore's endpoint data)",
                    "choose a region where it runs, or give every node group an ami_id of your own")
        return
    yield from guard(ctx, what, partial(answers, ctx, service, call, kwargs, key, what))


def _key_user(ctx: Context, user: str, name: str) -> Iterable[Check]:
    """A service that launches from the images encrypted with the storage key has its
    service-linked role: NAME-storage's key policy names it, and KMS refuses a policy that names
    a role that does not exist."""
    service, role = image_facts.KEY_USERS[user]
    try:
        ctx.client("iam").get_role(RoleName=role)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "NoSuchEntity":
            raise
        yield Check(name, FAIL, f"{role} does not exist: {ctx.spec.name}-storage's key policy lets it use the "
                    "storage key for the encrypted node images, and KMS refuses a policy naming a missing role",
                    f"aws iam create-service-linked-role --aws-service-name {service}")
        return
    yield Check(name, PASS, f"{role} exists (the storage key's policy lets it launch from the encrypted images)")


def _base_image(ctx: Context, image: model.NodeImage, name: str) -> Iterable[Check]:
    """The base image's public SSM parameter exists in the region (Image Builder resolves it
    when the image is built), and the image it names (DescribeImages): on AWS PCS, an agent that
    runs node lifecycle actions and the cluster's Slurm release (its description names both);
    its root device and root snapshot, which the image's recipe sizes (AWS PCS) or keeps
    (SageMaker HyperPod: fmcluster.facts.images.build_root_volume_gib)."""
    parameter, groups = image.base.parameter, image.groups
    try:
        value = ctx.client("ssm").get_parameter(Name=parameter)["Parameter"]["Value"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in PARAMETER_NOT_FOUND:
            raise
        yield Check(name, FAIL, f"{parameter} not found in {ctx.spec.region}: no base image to build "
                    f"{ctx.spec.name}-images' image for {', '.join(groups)} from",
                    "choose a region where the control plane publishes its base image, or give the node groups "
                    "an ami_id of their own (docs/guides/images.md)")
        return
    found = ec2_found(ctx, "describe_images", "Images", AMI_NOT_FOUND, ImageIds=[value])
    describe = f"aws ec2 describe-images --image-ids {value} --region {ctx.spec.region}"
    if not found:
        yield Check(name, WARN, f"{parameter}: {value}, which DescribeImages does not find: its agent, Slurm "
                    "and root volume go unchecked", describe)
        return
    base = found[0]
    if image.plane != image_facts.PCS:
        yield Check(name, PASS, f"{parameter}: {value}")
    else:
        description = base.get("Description", "")
        yield _pcs_agent(ctx, name, parameter, value, description)
        yield _pcs_slurm(ctx, image, f"{name} Slurm", parameter, value, description)
    yield _base_root(ctx, image, f"{name} root volume", value, base)


def _pcs_agent(ctx: Context, name: str, parameter: str, value: str, description: str) -> Check:
    agent = image_facts.pcs_agent(description)
    needs = (f"node lifecycle actions, which run the node program, need PCS agent {image_facts.PCS_AGENT_MIN} "
             "or later")
    if agent is None:
        return Check(name, WARN, f"{parameter}: {value}; its description names no PCS agent version: {needs}",
                     f"aws ec2 describe-images --image-ids {value} --region {ctx.spec.region}")
    if image_facts.version_key(agent) < image_facts.version_key(image_facts.PCS_AGENT_MIN):
        return Check(name, FAIL, f"{parameter}: {value} has PCS agent {agent}; {needs} (a node of "
                     "it would never start slurmd)",
                     "deploy once AWS publishes a PCS AMI with a newer agent (raise images.revision to bake "
                     "from it), or give the node groups an ami_id of your own with agent "
                     f"{image_facts.PCS_AGENT_MIN} or later")
    return Check(name, PASS, f"{parameter}: {value}, PCS agent {agent}")


def _pcs_slurm(ctx: Context, image: model.NodeImage, name: str, parameter: str, value: str, description: str
               ) -> Check:
    """The cluster's Slurm release is among those the PCS base image carries (its description
    lists them: fmcluster.facts.images.PCS_SLURM_IN_DESCRIPTION)."""
    versions = image_facts.pcs_slurm_versions(description)
    wanted = image.slurm_version
    if not versions:
        return Check(name, WARN, f"{value}'s description lists no Slurm versions: the cluster's Slurm "
                     f"{wanted} may not be on it ({image_facts.slurm_prefix(image.plane, wanted)})",
                     f"aws ec2 describe-images --image-ids {value} --region {ctx.spec.region}")
    listed = ", ".join(versions)
    releases = sorted({image_facts.slurm_release(v) for v in versions}, key=image_facts.version_key)
    if wanted in releases:
        return Check(name, PASS, f"{value} carries Slurm {listed}: the cluster's {wanted} among them")
    return Check(name, FAIL, f"the cluster's Slurm {wanted} (orchestrator.version) is not on {value} "
                 f"({parameter}), which carries Slurm {listed}: the image build finds no Slurm {wanted} to "
                 f"build Pyxis against and {ctx.spec.name}-images fails",
                 f"set orchestrator.version to one the base image carries ({', '.join(releases)}; the newest is "
                 f"{releases[-1]}), or wait until AWS publishes a PCS AMI with Slurm {wanted} and raise "
                 "images.revision")


def _base_root(ctx: Context, image: model.NodeImage, name: str, value: str, base: Mapping[str, Any]) -> Check:
    """What the image's root volume will be: its recipe sizes the root device
    (fmcluster.facts.images.BUILD_ROOT_DEVICE, AWS PCS), which must be the base's, to at least
    the base's snapshot; or keeps the base's (SageMaker HyperPod), which may carry no volume
    besides its root (fmcluster.facts.images.build_root_volume_gib)."""
    device = base.get("RootDeviceName")
    volumes = [m for m in base.get("BlockDeviceMappings", []) if "Ebs" in m]
    root = next((m for m in volumes if m.get("DeviceName") == device), None)
    size = root["Ebs"].get("VolumeSize") if root else None
    others = [m.get("DeviceName", "?") for m in volumes if m is not root]
    sized = image_facts.build_root_volume_gib(image.plane)
    describe = f"aws ec2 describe-images --image-ids {value} --region {ctx.spec.region}"
    if device is None or size is None:
        return Check(name, WARN, f"{value}: DescribeImages names no root device with its EBS snapshot size",
                     describe)
    found = f"{value}: root device {device}, root snapshot {size} GiB"
    if sized is None:  # SageMaker HyperPod: the image keeps the base's root volume
        if others:
            return Check(name, FAIL, f"{found}, and EBS volumes at {', '.join(others)}: the image would carry "
                         "them too, and SageMaker HyperPod takes a custom AMI with its primary snapshot volume "
                         "only", "give the node groups an ami_id of your own with a root volume only")
        return Check(name, PASS, f"{found}: the image keeps it (SageMaker sizes a HyperPod node's root volume "
                     "itself)")
    if device != image_facts.BUILD_ROOT_DEVICE:
        return Check(name, FAIL, f"{found}: the image's recipe sizes {image_facts.BUILD_ROOT_DEVICE} to {sized} "
                     f"GiB, which on this base adds a second volume and leaves the root at {size} GiB",
                     "give the node groups an ami_id of your own until fmcluster follows the base's root "
                     f"device ({describe})")
    if size > sized:
        return Check(name, FAIL, f"{found}: larger than the {sized} GiB the image's recipe gives the root volume "
                     "(EC2 refuses a volume smaller than its snapshot)",
                     "give the node groups an ami_id of your own until fmcluster's build volume "
                     "(fmcluster.facts.images.BUILD_ROOT_VOLUME_GIB) holds it")
    return Check(name, PASS, f"{found}: the image's root is {sized} GiB")


def _ebs_encryption(ctx: Context, name: str) -> Iterable[Check]:
    """EBS encryption by default in the region (fmcluster.facts.images.AWS_MANAGED_EBS_KEY's
    comment): it encrypts a SageMaker HyperPod image, which is built unencrypted because SageMaker
    takes only unencrypted custom AMIs. fmcluster refuses rather than build the image with the
    storage key: botocore's SageMaker model says "The custom AMI must be unencrypted"
    (ClusterInstanceGroupSpecification.ImageId), and ClusterEbsVolumeConfig.RootVolume's key is the
    key HyperPod encrypts the nodes' root volumes with, which it does already under storage.kms.
    An AWS PCS image without the storage key is encrypted with the default key, whatever the
    setting: AWS PCS launches from it through its service-linked role, whose own permissions
    cover AWS managed keys only (AWS PCS User Guide, "Required KMS key policy for use with
    encrypted EBS volumes in AWS PCS")."""
    ec2 = ctx.client("ec2")
    on = bool(ec2.get_ebs_encryption_by_default()["EbsEncryptionByDefault"])
    hyperpod = [i.key for i in ctx.images if i.plane == image_facts.HYPERPOD_SLURM]
    default_keyed = [i.key for i in ctx.images if i.plane == image_facts.PCS and not i.encrypted]
    key = ec2.get_ebs_default_kms_key_id()["KmsKeyId"] if (on and hyperpod) or default_keyed else None
    if hyperpod and on:
        yield Check(name, FAIL, f"EBS encryption by default is on in {ctx.spec.region} (key {key}): image "
                    f"{', '.join(hyperpod)} would come out encrypted, and SageMaker HyperPod launches only "
                    "unencrypted custom AMIs",
                    f"turn it off while {ctx.spec.name}-images builds (aws ec2 disable-ebs-encryption-by-default "
                    f"--region {ctx.spec.region}; the AMI stays unencrypted when it is turned on again, and "
                    "HyperPod encrypts the nodes' volumes itself, with the storage key under storage.kms); "
                    "where an organization policy keeps it on, HyperPod nodes cannot launch from fmcluster's "
                    "images in this account")
        return
    if default_keyed and key is not None and key.rsplit(":", 1)[-1] != image_facts.AWS_MANAGED_EBS_KEY:
        yield Check(name, WARN, f"image {', '.join(default_keyed)} is encrypted with the account's default EBS "
                    f"key {key}, which may be customer managed: AWS PCS launches nodes from it through "
                    "AWSServiceRoleForPCS, whose own permissions cover AWS managed keys only",
                    "set storage.kms: true (the storage key's policy lets AWS PCS use it), or give that key the "
                    "policy of the AWS PCS User Guide's \"Required KMS key policy for use with encrypted EBS "
                    "volumes in AWS PCS\"")
        return
    state = "on" if on else "off"
    what = ("the HyperPod image is built unencrypted, as SageMaker takes it" if hyperpod
            else "the images are encrypted with the storage key" if not default_keyed
            else f"the images are encrypted with the account's default EBS key, {key}")
    yield Check(name, PASS, f"EBS encryption by default is {state} in {ctx.spec.region}: {what}")
