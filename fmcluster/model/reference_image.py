"""The reference GPU images of a cluster: the image the acceptance kit's jobs run (nccl-tests, fio,
the EFA user space), built by NAME-reference for each architecture of the cluster's GPU groups, so that
the first job on a new cluster needs nothing built or pushed by hand.

One recipe, fmcluster/data/docker/Dockerfile (shipped with the package), read here once: the stack
builds its Image Builder template from `template()`, the kit names the image it runs by the same
`ReferenceImage`, and both carry the image's identity (a digest of everything that makes it), so the
image the kit runs is the one the stack built from this version of fmcluster.

Pure: no AWS call, no aws_cdk.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Protocol

from fmcluster.facts import images as image_facts
from fmcluster.facts import regions, software
from fmcluster.facts.catalog import InstanceType

if TYPE_CHECKING:
    from fmcluster.spec.models import ClusterSpec


class GpuGroup(Protocol):
    """What this module reads of a node group (fmcluster.model.cluster.NodeGroup, which imports it)."""

    @property
    def name(self) -> str: ...

    @property
    def instance(self) -> InstanceType: ...

IDENTITY_DIGITS = 12  # hex digits of the identity in the repository name and the tag (48 bits)
# The recipe's base image: its ARG and the FROM that reads it, which Image Builder's template takes
# from the recipe's parent image instead (the same value: software.CUDA_BASE_IMAGE).
_BASE_ARG = re.compile(r"^ARG CUDA_BASE_IMAGE=(?P<value>\S+)\n", re.MULTILINE)
_FROM = re.compile(r"^FROM \$\{CUDA_BASE_IMAGE\}\n", re.MULTILINE)
PARENT_IMAGE = "{{{ imagebuilder:parentImage }}}"  # Image Builder's contextual variables
ENVIRONMENTS = "{{{ imagebuilder:environments }}}"
COMPONENTS = "{{{ imagebuilder:components }}}"


@cache
def dockerfile() -> str:
    """The reference image's recipe, as the package ships it."""
    return resources.files("fmcluster").joinpath("data", "docker", "Dockerfile").read_text(encoding="utf-8")


@cache
def template() -> str:
    """The recipe as an Image Builder Dockerfile template: the base image's ARG dropped and its FROM
    made `FROM {{{ imagebuilder:parentImage }}}` (the recipe's parent image, PARENT below), with
    Image Builder's environments and components right after it, and its comment lines (the parser
    directive too) left out; every other line as it is."""
    text = dockerfile()
    arg = _BASE_ARG.search(text)
    if arg is None or _FROM.search(text) is None:
        raise ValueError("fmcluster/data/docker/Dockerfile: no 'ARG CUDA_BASE_IMAGE=...' and 'FROM ${CUDA_BASE_IMAGE}'")
    if arg.group("value") != software.CUDA_BASE_IMAGE:
        raise ValueError(f"fmcluster/data/docker/Dockerfile: CUDA_BASE_IMAGE is {arg.group('value')}, "
                         f"fmcluster/facts/software.py says {software.CUDA_BASE_IMAGE}")
    text = _BASE_ARG.sub("", text, count=1)
    text = _FROM.sub(f"FROM {PARENT_IMAGE}\n{ENVIRONMENTS}\n{COMPONENTS}\n", text, count=1)
    # Without its comments (Docker drops them, also between continuation lines), so that a comment
    # changes neither the image's identity nor its recipe; without the parser directive too (`#
    # syntax=` would have BuildKit pull an unpinned frontend image from Docker Hub; the recipe uses
    # no feature of it).
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")) + "\n"
    if len(text) > image_facts.REFERENCE_TEMPLATE_MAX_CHARS:
        raise ValueError(f"the reference image's Dockerfile template is {len(text)} characters; Image Builder "
                         f"takes at most {image_facts.REFERENCE_TEMPLATE_MAX_CHARS}")
    return text


PARENT = software.CUDA_BASE_IMAGE  # the recipe's parent image: the CUDA devel image, pinned by digest


@dataclass(frozen=True)
class ReferenceImage:
    """The reference image of one architecture, built by NAME-reference into a repository of its own.

    `repository` names the cluster, the architecture and the identity: one image per repository and
    a tag that never moves, so a changed recipe is a new repository (and a new build), and the old
    one goes with the deploy that replaces it."""

    cluster: str
    architecture: str  # x86_64 | arm64 (the catalog's names)
    identity: str  # hex SHA-256 of what makes the image (identity())
    build_instance_type: str
    build_ami: str  # ssm:PARAMETER of the build instance's AMI
    groups: tuple[str, ...]  # the GPU groups that run it, in model order

    @property
    def key(self) -> str:
        """reference-ARCHITECTURE: construct ids."""
        return f"reference-{self.architecture}"

    @property
    def tag(self) -> str:
        return self.identity[:IDENTITY_DIGITS]

    @property
    def repository(self) -> str:
        """fmcluster-images/CLUSTER/reference-ARCHITECTURE-TAG (ECR's name rules: the cluster name's runs of
        '-' become one, and a trailing '-' goes)."""
        cluster = re.sub(r"-+", "-", self.cluster).strip("-")
        return f"{image_facts.REFERENCE_REPOSITORY_PREFIX}/{cluster}/{self.key}-{self.tag}".replace("_", "-")

    @property
    def name(self) -> str:
        """The Image Builder resources' name: CLUSTER-reference-ARCH-TAG, lower-case and hyphenated."""
        return f"{self.cluster}-{self.key}-{self.tag}".replace("_", "-").lower()

    @staticmethod
    def registry(account: str, region: str) -> str:
        """An account's ECR registry in a region (`account` may be a shell expansion)."""
        return f"{account}.dkr.ecr.{region}.{regions.dns_suffix(region)}"

    def uri(self, account: str, region: str) -> str:
        """The image as Docker and Kubernetes name it: REGISTRY/REPOSITORY:TAG."""
        return f"{self.registry(account, region)}/{self.repository}:{self.tag}"

    def enroot_uri(self, account: str, region: str) -> str:
        """The image as Enroot and Pyxis name it: docker://REGISTRY#REPOSITORY:TAG."""
        return f"docker://{self.registry(account, region)}#{self.repository}:{self.tag}"


def identity(architecture: str, revision: int) -> str:
    """The hex SHA-256 of everything that makes a reference image: the template (every version is
    an ARG default in it), the parent image, the architecture, the spec's images.revision (a
    new revision builds again, with the newest packages the recipe installs) and the build
    instance's AMI and volume (the container recipe's InstanceConfiguration is create-only: a
    change replaces the recipe, which needs a name, and so a repository, of its own)."""
    facts = image_facts
    build = {"ami": facts.REFERENCE_BUILD_AMI[architecture], "root_device": facts.REFERENCE_BUILD_ROOT_DEVICE,
             "volume_gib": facts.REFERENCE_BUILD_VOLUME_GIB}
    made = {"template": template(), "parent": PARENT, "architecture": architecture, "revision": revision,
            "build": build}
    return hashlib.sha256(json.dumps(made, sort_keys=True).encode()).hexdigest()


def reference_images(spec: ClusterSpec, gpu_groups: tuple[GpuGroup, ...]) -> tuple[ReferenceImage, ...]:
    """One reference image per architecture of the GPU compute groups (x86_64 first), with the
    groups that run it; none without GPU groups or with `images.reference: false`."""
    if not spec.images.reference:
        return ()
    users: dict[str, list[str]] = {}
    for group in gpu_groups:
        users.setdefault(group.instance.architecture, []).append(group.name)
    return tuple(ReferenceImage(
        cluster=spec.name, architecture=arch, identity=identity(arch, spec.images.revision),
        build_instance_type=image_facts.REFERENCE_BUILD_INSTANCE_TYPES[arch],
        build_ami=image_facts.REFERENCE_BUILD_AMI[arch], groups=tuple(names))
        for arch, names in sorted(users.items(), key=lambda item: item[0] != "x86_64"))
