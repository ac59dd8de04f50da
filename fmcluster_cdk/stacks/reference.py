"""The NAME-reference stack: the reference GPU images the acceptance kit's jobs run
(fmcluster.model.reference_image.ReferenceImage), one per architecture of the GPU groups, on every
control plane, each built by EC2 Image Builder's container pipeline into an ECR repository of its
own.

A stack of its own, which nothing depends on: a failed build (a registry's rate limit, a compile
failure) rolls back this stack only, never the node images the cluster launches from, and its long
build is not on the cluster's way. It is deployed after NAME-cluster (fmcluster_cdk/stacks/app.py).
The nodes that run the images pull them by their repositories' ARNs, derived from the model's
names (`reference_repository_arns`), not by references to this stack.

A reference image's names and repository carry its identity (ReferenceImage.name, .repository): a
changed image is a new repository and a new build, and the repository of the image it replaces goes
with the deploy, emptied. Its log group is the image's, whatever its build:
/aws/imagebuilder/NAME-reference-ARCH keeps the history of every build.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from fmcluster.facts import images as image_facts
from fmcluster.model.cluster import ClusterModel
from fmcluster.model.reference_image import PARENT, template
from fmcluster_cdk.constructs.images.container import ContainerImageBuilder, repository_arn
from fmcluster_cdk.stacks.images import log_group_name
from fmcluster_cdk.stacks.refs import NetworkRefs


def reference_repository_arns(scope: Construct, model: ClusterModel) -> list[str]:
    """The ARNs of the reference images' repositories in the account and region of `scope`'s stack,
    derived from the model's names (no reference to NAME-reference): the nodes that run the images
    may pull from these."""
    return [repository_arn(scope, reference.repository) for reference in model.reference_images]


class ReferenceStack(cdk.Stack):
    """The reference GPU images of one cluster.

    `network`: anything with `region_subnet_ids` and `node_security_group_id` (the builds run in
    the cluster's first private subnet of the region, with the nodes' security group, and reach the
    registries through its NAT gateway).

    Attributes:
      references   reference image key -> ContainerImageBuilder
    """

    def __init__(self, scope: Construct, construct_id: str, *, model: ClusterModel, network: NetworkRefs,
                 **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        spec = model.spec
        self.references: dict[str, ContainerImageBuilder] = {}
        for reference in model.reference_images:
            # (construct ids as NAME-images had them: the same logical ids)
            self.references[reference.key] = built = ContainerImageBuilder(
                self, reference.key, name=reference.name, repository_name=reference.repository,
                image_tag=reference.tag, parent_image=PARENT, dockerfile_template=template(),
                build_image=reference.build_ami, instance_type=reference.build_instance_type,
                subnet_id=network.region_subnet_ids[0], security_group_ids=[network.node_security_group_id],
                root_device_name=image_facts.REFERENCE_BUILD_ROOT_DEVICE,
                root_volume_gib=image_facts.REFERENCE_BUILD_VOLUME_GIB,
                log_group_name=log_group_name(spec.name, reference),
                # (create-only descriptions: nothing the names do not carry, such as the groups)
                description=f"fmcluster {spec.name}: reference GPU image for {reference.architecture}")
            cdk.CfnOutput(built, "ImageUri", value=built.image_uri,
                          description=f"{spec.name}: reference GPU image for {reference.architecture} "
                                      "(the acceptance kit's jobs)")
