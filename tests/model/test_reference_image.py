"""The reference GPU images of the model (fmcluster.model.reference_image): which architectures get
one, what the Image Builder template is made of, and the names the stack and the kit share."""

from __future__ import annotations

import re

import pytest

from fmcluster.facts import images as image_facts
from fmcluster.facts import regions, software
from fmcluster.model import reference_image
from fmcluster.model.cluster import resolve
from fmcluster.spec.rules import check
from tests.support.dockerfile import parse
from tests.support.specs import base_spec, validated

MIXED = [{"name": "h100", "instance_type": "p5.48xlarge", "count": 2, "capacity": {"type": "on-demand"}},
         {"name": "cpu", "instance_type": "c7i.4xlarge", "count": 1, "capacity": {"type": "on-demand"}},
         {"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "count": 18,
          "capacity": {"type": "capacity-block", "reservation_id": "cr-0a1b2c3d4e5f60718",
                       "ultraserver_type": "u-p6e-gb200x72"}},
         {"name": "h200", "instance_type": "p5e.48xlarge", "count": 1, "capacity": {"type": "on-demand"}}]


def model_of(**overrides):
    spec = validated(base_spec(**overrides))
    assert not [p for p in check(spec) if p.severity == "error"], check(spec)
    return resolve(spec)


@pytest.mark.parametrize("plane", ["pcs", "eks"])
def test_one_image_per_architecture_of_the_gpu_groups(plane):
    model = model_of(orchestrator={"type": plane}, node_groups=MIXED,
                     network={"extra_availability_zone_ids": ["use1-az1"]})
    made = {r.architecture: r for r in model.reference_images}
    assert set(made) == {"x86_64", "arm64"} and [r.architecture for r in model.reference_images][0] == "x86_64"
    assert made["x86_64"].groups == ("h100", "h200") and made["arm64"].groups == ("gb200",)
    assert model.reference_image(model.group("h200")) is made["x86_64"]
    assert model.reference_image(model.group("cpu")) is None
    assert made["arm64"].build_instance_type == image_facts.REFERENCE_BUILD_INSTANCE_TYPES["arm64"]
    assert "arm64" in made["arm64"].build_ami and "arm64" not in made["x86_64"].build_ami
    assert model.stack("reference") is not None and (model.stack("images") is not None) == (plane == "pcs")


@pytest.mark.parametrize("plane", ["hyperpod-slurm", "hyperpod-eks"])
def test_sagemaker_hyperpod_gets_one_too(plane):
    model = model_of(orchestrator={"type": plane}, network={"extra_availability_zone_ids": ["use1-az1"]})
    assert [(r.architecture, r.groups) for r in model.reference_images] == [("x86_64", ("gpu",))]


def test_none_without_gpu_groups_or_when_the_spec_says_so():
    cpu = [{"name": "cpu", "instance_type": "c7i.4xlarge", "count": 1, "capacity": {"type": "on-demand"}}]
    assert model_of(node_groups=cpu).reference_images == ()
    off = model_of(images={"reference": False})
    assert off.reference_images == () and off.reference_image(off.group("gpu")) is None
    # no NAME-reference; the node images still need NAME-images on AWS PCS
    assert off.stack("reference") is None and off.stack("images") is not None


def test_the_template_is_the_recipe_with_image_builders_base():
    text = reference_image.template()
    recipe = reference_image.dockerfile()
    context = {reference_image.ENVIRONMENTS, reference_image.COMPONENTS}  # Image Builder fills these in
    instructions = parse("\n".join(line for line in text.splitlines() if line not in context))
    froms = [i for i in instructions if i.keyword == "FROM"]
    assert [f.arguments for f in froms] == [reference_image.PARENT_IMAGE]
    assert not any(i.keyword == "ARG" and i.arguments.startswith("CUDA_BASE_IMAGE") for i in instructions)
    # everything else is the recipe, line for line, in its order
    kept = [line for line in recipe.splitlines() if not line.lstrip().startswith("#")
            and not line.startswith(("ARG CUDA_BASE_IMAGE=", "FROM ${CUDA_BASE_IMAGE}"))]
    added = {reference_image.PARENT_IMAGE, reference_image.ENVIRONMENTS, reference_image.COMPONENTS}
    assert [line for line in text.splitlines() if line.removeprefix("FROM ") not in added] == kept
    assert recipe.startswith("# syntax=")  # BuildKit's frontend for a build by hand, not Image Builder's
    assert not [line for line in text.splitlines() if line.lstrip().startswith("#")]
    assert reference_image.PARENT == software.CUDA_BASE_IMAGE
    assert len(text) <= image_facts.REFERENCE_TEMPLATE_MAX_CHARS


def test_a_recipe_whose_base_differs_from_the_facts_is_refused(monkeypatch):
    reference_image.template.cache_clear()
    other = reference_image.dockerfile().replace(software.CUDA_IMAGE_DIGEST, "sha256:" + "0" * 64)
    monkeypatch.setattr(reference_image, "dockerfile", lambda: other)
    try:
        with pytest.raises(ValueError, match="CUDA_BASE_IMAGE is"):
            reference_image.template()
    finally:
        reference_image.template.cache_clear()


def test_a_comment_changes_nothing(monkeypatch):
    commented = reference_image.dockerfile().replace("\nRUN ", "\n# a new comment\nRUN ", 1)
    assert commented != reference_image.dockerfile()
    before = reference_image.template()
    reference_image.template.cache_clear()
    monkeypatch.setattr(reference_image, "dockerfile", lambda: commented)
    try:
        assert reference_image.template() == before
    finally:
        reference_image.template.cache_clear()


def test_the_identity_follows_what_makes_the_image():
    base = reference_image.identity("x86_64", 0)
    assert base == reference_image.identity("x86_64", 0)
    assert len({base, reference_image.identity("arm64", 0), reference_image.identity("x86_64", 1)}) == 3
    model = model_of()
    again = model_of(images={"revision": 1})
    assert model.reference_images[0].tag != again.reference_images[0].tag


@pytest.mark.parametrize("name", ["abc", "test-cluster", "ab--c", "zz-", "x" * 32])
def test_names_keep_to_ecr_and_image_builder_rules(name):
    (image,) = model_of(name=name).reference_images
    assert image_facts.ECR_REPOSITORY.fullmatch(image.repository) and 2 <= len(image.repository) <= 256
    assert image.repository.startswith(f"fmcluster-images/{name.strip('-').replace('--', '-')}/reference-x86-64-")
    assert image.repository.endswith(image.tag) and len(image.tag) == reference_image.IDENTITY_DIGITS
    assert re.fullmatch(r"[a-z0-9][a-z0-9-]{1,100}[a-z0-9]", image.name)


def test_uris_name_the_registry_of_the_partition():
    (image,) = model_of().reference_images
    assert image.uri("111122223333", "us-east-1") == \
        f"111122223333.dkr.ecr.us-east-1.amazonaws.com/{image.repository}:{image.tag}"
    assert image.enroot_uri("$ACCOUNT", "cn-north-1") == \
        f"docker://$ACCOUNT.dkr.ecr.cn-north-1.amazonaws.com.cn#{image.repository}:{image.tag}"
    assert regions.dns_suffix("us-gov-west-1") == "amazonaws.com"
