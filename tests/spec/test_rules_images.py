"""fmcluster.spec.rules.images: a node group's root volume holds the root snapshot of the node image
it launches from. Each case is located at the group's root_volume_gib."""

import pytest

from fmcluster.facts import images as image_facts
from fmcluster.spec.rules import images
from tests.support.specs import base_spec, findings, messages, on, paths, with_

FIELD = "node_groups[0].root_volume_gib"


def test_the_default_root_volume_holds_the_pcs_image():
    assert findings(images.node_root_volume_holds_the_image, base_spec()) == []


@pytest.mark.parametrize("gib", [image_facts.BUILD_ROOT_VOLUME_GIB, image_facts.BUILD_ROOT_VOLUME_GIB + 1])
def test_a_root_volume_of_the_snapshot_size_or_more_passes(gib):
    spec = with_(base_spec(), "node_groups[0].root_volume_gib", gib)
    assert findings(images.node_root_volume_holds_the_image, spec) == []


def test_a_root_volume_smaller_than_the_pcs_image_is_an_error_at_the_field():
    spec = with_(base_spec(), "node_groups[0].root_volume_gib", 32)
    assert FIELD in paths(spec)
    (message,) = messages(spec, FIELD)
    assert message.startswith("32 GiB is smaller than the root snapshot of the node image the group launches "
                              "from (200 GiB, test-cluster-images)")
    (problem,) = findings(images.node_root_volume_holds_the_image, spec)
    assert problem.hint == "root_volume_gib: 200 or more, or an ami_id of your own with a smaller root snapshot"


def test_a_group_with_its_own_ami_is_left_to_preflight():
    spec = with_(base_spec(), "node_groups[0].root_volume_gib", 32)
    spec = with_(spec, "node_groups[0].ami_id", "ami-0123456789abcdef0")
    assert findings(images.node_root_volume_holds_the_image, spec) == []


@pytest.mark.parametrize("type_", ["hyperpod-slurm", "hyperpod-eks", "eks"])
def test_other_planes_size_no_root_from_an_image(type_):
    """HyperPod sizes its nodes' root volumes itself (root_volume_gib is /opt/sagemaker's); EKS
    launches from EKS's images, not fmcluster's."""
    spec = with_(on(type_), "node_groups[0].root_volume_gib", 32)
    assert findings(images.node_root_volume_holds_the_image, spec) == []
