"""The NAME-images stack: the node images of a Slurm control plane, one per base image and
architecture its groups use (fmcluster.model.cluster.NodeImage), each built and tested by EC2 Image
Builder before NAME-cluster launches a node from it. (The reference GPU images are NAME-reference's:
fmcluster_cdk/stacks/reference.py.)

An image's names carry a digest of what makes it (its AWSTOE documents, base, revision, volume and
encryption): a changed image is a new set of Image Builder resources and a new build, and the AMI of
the image it replaces stays, so nodes launched from it run on until they are replaced. Its log group
is the image's, whatever its build: /aws/imagebuilder/NAME-KEY keeps the history of every build.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Optional

import aws_cdk as cdk
from constructs import Construct

from fmcluster.facts import images as image_facts
from fmcluster.model.cluster import ClusterModel, NodeImage
from fmcluster.model.reference_image import ReferenceImage
from fmcluster.node.image import documents
from fmcluster_cdk.constructs.images.builder import NodeImageBuilder
from fmcluster_cdk.errors import ConstructError
from fmcluster_cdk.stacks.refs import NetworkRefs, StorageRefs

IDENTITY_DIGITS = 12  # hex digits of the identity in the names (48 bits)
IMAGE_TAG = image_facts.IMAGE_TAG  # the image key, on each AMI
IDENTITY_TAG = "fmcluster:image-identity"  # the full identity, on each AMI
DIGEST_TAG = "fmcluster:image-digest"  # the documents' digest, which the bake records in the image's manifest


def identity(image: NodeImage, content_digest: str) -> str:
    """The hex SHA-256 of everything that makes the image: its documents' digest, the base image,
    the revision (a new one bakes again from the newest base), the build volume and the
    encryption. Equal for equal inputs, so the same spec gives the same names."""
    made = {"content": content_digest, "parent": image.base.parent, "revision": image.revision,
            "architecture": image.architecture, "root_volume_gib": image_facts.build_root_volume_gib(image.plane),
            "encrypted": image.encrypted}
    return hashlib.sha256(json.dumps(made, sort_keys=True).encode()).hexdigest()


def image_name(cluster: str, image: NodeImage, digest: str) -> str:
    """NAME-KEY-IDENTITY in Image Builder's lower-case, hyphenated form (pcs-x86_64 -> pcs-x86-64)."""
    return f"{cluster}-{image.key.replace('_', '-').lower()}-{digest[:IDENTITY_DIGITS]}"


def log_group_name(cluster: str, image: NodeImage | ReferenceImage) -> str:
    """/aws/imagebuilder/NAME-KEY: one log group per node or reference image (NAME-reference's),
    every build of it (every identity)."""
    return f"/aws/imagebuilder/{cluster}-{image.key.replace('_', '-').lower()}"


class ImagesStack(cdk.Stack):
    """The node images of one cluster.

    `network`: anything with `region_subnet_ids` and `node_security_group_id` (the builds run in
    the cluster's first private subnet of the region, with the nodes' security group, and reach the
    service endpoints through its NAT gateway). `storage`: anything with `kms_key_arn` (the images
    the model marks `encrypted` are encrypted with it).

    Attributes:
      builders     image key -> NodeImageBuilder
      image_ids    image key -> AMI id (ImagesRefs)
      identities   image key -> the image's identity (hex SHA-256)
    """

    def __init__(self, scope: Construct, construct_id: str, *, model: ClusterModel, network: NetworkRefs,
                 storage: StorageRefs, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        spec = model.spec
        self.builders: dict[str, NodeImageBuilder] = {}
        self.image_ids: dict[str, str] = {}
        self.identities: dict[str, str] = {}
        for image in model.images:
            kms_key_arn: Optional[str] = None
            if image.encrypted:
                if not storage.kms_key_arn:
                    raise ConstructError(self, f"image {image.key} is to be encrypted with the storage key, and "
                                               "there is none")
                kms_key_arn = storage.kms_key_arn
            docs = documents(image)
            digest = self.identities[image.key] = identity(image, docs.digest)
            name = image_name(spec.name, image, digest)
            # SageMaker HyperPod takes only unencrypted custom AMIs (API Reference,
            # ClusterInstanceGroupSpecification.ImageId) and sizes its nodes' root volumes itself: its
            # image keeps the base's root volume as it is, unencrypted (no mapping:
            # fmcluster.facts.images.build_root_volume_gib; `preflight` refuses a region with EBS
            # encryption by default on). The others are encrypted, with the storage key where the
            # model says so, on a root volume of BUILD_ROOT_VOLUME_GIB at the base's root device.
            root_volume_gib = image_facts.build_root_volume_gib(image.plane)
            encrypted = image.encrypted or image.plane != image_facts.HYPERPOD_SLURM
            builder = NodeImageBuilder(
                self, image.key, name=name, parent_image=image.base.parent, build_document=docs.build,
                test_document=docs.test, instance_type=image.build_instance_type,
                subnet_id=network.region_subnet_ids[0], security_group_ids=[network.node_security_group_id],
                root_volume_gib=root_volume_gib, root_device_name=image_facts.BUILD_ROOT_DEVICE,
                encrypted=encrypted, kms_key_arn=kms_key_arn,
                ami_tags={**model.tags, IMAGE_TAG: image.key, IDENTITY_TAG: digest, DIGEST_TAG: docs.digest},
                test_timeout_minutes=image_facts.BUILD_TIMEOUT_MINUTES,
                log_group_name=log_group_name(spec.name, image),
                # (a component's and a recipe's descriptions are create-only: nothing in them that
                # the names do not carry, such as which groups use the image)
                description=f"fmcluster {spec.name}: {image.plane} node image for {image.architecture}")
            # The AMI id changes with every new image: NAME-cluster reads it as the app's references
            # are by default, weak (Fn::GetStackOutput; an export in use could never change), and
            # picks up the new image on its next deploy (the old AMI stays until then).
            self.builders[image.key] = builder
            self.image_ids[image.key] = builder.image_id
            cdk.CfnOutput(builder, "ImageId", value=builder.image_id,
                          description=f"{spec.name}: AMI of node image {image.key} ({name})")
