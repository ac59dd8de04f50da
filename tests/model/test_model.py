"""The resolved cluster model (fmcluster.model.cluster): every derived fact, from a validated spec, once.

tests/cdk/test_examples_synth.py holds the plan and the synthesized templates of every example to
this model; here: what the model derives.
"""

from __future__ import annotations

import pytest

from fmcluster.facts import controlplanes
from fmcluster.facts import kubernetes as k8s
from fmcluster.model import cluster as model
from fmcluster.model.cluster import resolve
from tests.support.specs import base_spec, validated, with_


def one_group(instance_type: str, orchestrator: str = "eks", efa=None, **extra) -> model.NodeGroup:
    spec = base_spec(orchestrator={"type": orchestrator, **({"admin_role_arn": None} if orchestrator == "eks" else {})})
    spec = with_(spec, "node_groups[0]", {"name": "g", "instance_type": instance_type, "count": 2,
                                          **({"efa": efa} if efa is not None else {}), **extra})
    if orchestrator in ("eks", "hyperpod-eks"):
        spec["network"] = {"extra_availability_zone_ids": ["use1-az5"]}
    return resolve(validated(spec)).node_groups[0]


def test_gpu_efa_group_labels_taint_and_interfaces():
    g = one_group("p5.48xlarge", labels={"team": "a"})
    assert dict(g.labels) == {"team": "a", "fmcluster.dev/node-group": "g", "nvidia.com/gpu.present": "true",
                              "vpc.amazonaws.com/efa.present": "true"}
    assert g.taints == ({"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},)
    assert g.efa and g.efa_interfaces == 32 and len(g.interfaces) == 33  # ENA primary + 32 efa-only (EKS)


def test_gpu_group_without_efa_and_cpu_groups():
    no_efa = one_group("p5.48xlarge", efa=False)
    assert dict(no_efa.labels) == {"fmcluster.dev/node-group": "g", "nvidia.com/gpu.present": "true"}
    assert not no_efa.efa and no_efa.efa_interfaces == 0
    cpu = one_group("c7i.8xlarge")
    assert dict(cpu.labels) == {"fmcluster.dev/node-group": "g"} and cpu.taints == ()
    assert one_group("c7i.48xlarge").efa_interfaces == 1  # a CPU type with one EFA


def test_slurm_groups_carry_no_kubernetes_labels():
    g = one_group("p5.48xlarge", orchestrator="pcs")
    assert dict(g.labels) == {} and g.taints == ()
    assert g.efa_interfaces == 32 and len(g.interfaces) == 32  # PCS: efa interfaces, the primary one too


@pytest.mark.parametrize("orchestrator, own", [
    ("pcs", [("login", model.LOGIN)]),
    ("eks", [("system", model.SYSTEM)]),
    ("hyperpod-eks", [("system", model.SYSTEM)]),
    ("hyperpod-slurm", [("controller", model.CONTROLLER), ("login", model.LOGIN)]),
])
def test_the_control_planes_own_groups(orchestrator, own):
    spec = base_spec(orchestrator={"type": orchestrator})
    if orchestrator in ("eks", "hyperpod-eks"):
        spec["network"] = {"extra_availability_zone_ids": ["use1-az5"]}
    m = resolve(validated(spec))
    assert [(g.name, g.role) for g in m.all_groups][:len(own)] == own
    assert all(not g.efa and g.placement == model.NO_PLACEMENT for g in m.all_groups[:len(own)])
    if orchestrator == "hyperpod-slurm":
        assert m.controller.instance_type == controlplanes.hyperpod_controller_type(m.total_nodes)
    if orchestrator in ("eks", "hyperpod-eks"):
        assert dict(m.login.labels) == {k8s.NODE_GROUP_LABEL: k8s.SYSTEM_NODE_GROUP}


def test_no_login_nodes():
    m = resolve(validated(base_spec(orchestrator={"type": "pcs", "login": {"count": 0}})))
    assert m.login is None and m.total_nodes == sum(g.max_count for g in m.node_groups)


def test_sizes_from_every_node():
    spec = validated(base_spec(orchestrator={"type": "pcs", "login": {"instance_type": "m7i.2xlarge", "count": 2}},
                               node_groups=[{"name": "a", "instance_type": "c7i.8xlarge", "min_count": 0,
                                             "max_count": 40}]))
    m = resolve(spec)
    assert m.total_nodes == 42 == spec.managed_nodes
    assert m.pcs_size.name == "MEDIUM" and m.controller is None


@pytest.mark.parametrize("observability, stacks", [
    ({"prometheus": True}, ["network", "storage", "observability", "images", "cluster", "reference"]),
    ({"prometheus": False, "grafana": True}, ["network", "storage", "observability", "images", "cluster", "reference"]),
    ({"prometheus": False, "grafana": False}, ["network", "storage", "images", "cluster", "reference"]),
])
def test_stacks_that_exist(observability, stacks):
    m = resolve(validated(base_spec(observability=observability)))
    assert [s.key for s in m.stacks] == stacks and m.observed == ("observability" in stacks)
    assert [s.name for s in m.stacks] == [f"{m.name}-{key}" for key in stacks]


@pytest.mark.parametrize("protect", [False, True])
def test_protection(protect):
    m = resolve(validated(base_spec(protect=protect)))
    assert {s.key: s.termination_protection for s in m.stacks} == {
        "network": protect, "storage": True, "observability": protect, "images": protect, "cluster": protect,
        "reference": False}  # no data, and a failed first build must be deletable
    assert all(s.description.startswith(f"fmcluster {m.name}: ") for s in m.stacks)


def test_tags_and_instance_tags():
    m = resolve(validated(base_spec(tags={"team": "ml"})))
    assert dict(m.tags) == {"fmcluster:cluster": m.name, "team": "ml"}
    g = m.node_groups[0]
    assert m.instance_tags(g) == {"team": "ml", "fmcluster:cluster": m.name, "fmcluster:node-group": g.name}


def test_lnet_follows_the_file_system_and_the_group():
    spec = base_spec(orchestrator={"type": "pcs"})
    spec["storage"]["lustre"] = {**spec["storage"].get("lustre", {}), "storage_capacity_gib": 4800, "efa": True,
                                 "deployment_type": "PERSISTENT_2", "throughput_per_tib": 1000}
    m = resolve(validated(spec))
    assert m.lustre_efa and [g.lnet_efa_interfaces for g in m.node_groups] == [
        g.instance.lnet_efa_interfaces if g.efa else 0 for g in m.node_groups]


def test_the_model_is_immutable():
    m = resolve(validated(base_spec()))
    with pytest.raises(AttributeError):
        m.total_nodes = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        m.tags["x"] = "y"  # type: ignore[index]


# ---- node images (NAME-images) ----------------------------------------------------------------

def test_a_pcs_cluster_bakes_one_image_per_architecture_for_the_groups_without_their_own():
    spec = validated(base_spec(node_groups=[
        {"name": "gpu", "instance_type": "p5.48xlarge", "max_count": 2},
        {"name": "cpu", "instance_type": "c7i.8xlarge", "max_count": 2},
        {"name": "mine", "instance_type": "c7i.8xlarge", "max_count": 2, "ami_id": "ami-0123456789abcdef0"}]))
    m = resolve(spec)
    (image,) = m.images
    assert image.key == "pcs-x86_64" and image.plane == "pcs" and image.architecture == "x86_64"
    assert image.groups == ("login", "gpu", "cpu")
    assert image.base.parent == "ssm:/aws/service/pcs/ami/dlami-base-ubuntu2404/x86_64/latest/ami-id"
    assert image.slurm_prefix == f"/opt/aws/pcs/scheduler/slurm-{spec.orchestrator.version}"
    assert {g.name: g.image for g in m.all_groups} == {"login": "pcs-x86_64", "gpu": "pcs-x86_64",
                                                        "cpu": "pcs-x86_64", "mine": None}
    assert m.group("mine").ami_id == "ami-0123456789abcdef0" and m.image("pcs-x86_64") is image


def test_every_group_with_its_own_image_leaves_no_images_stack():
    spec = validated(base_spec(orchestrator={"type": "pcs", "login": {"count": 0}}, node_groups=[
        {"name": "mine", "instance_type": "c7i.8xlarge", "max_count": 2, "ami_id": "ami-0123456789abcdef0"}]))
    m = resolve(spec)
    assert m.images == () and m.stack("images") is None


@pytest.mark.parametrize("kms", [False, True])
def test_pcs_images_are_encrypted_with_the_storage_key_hyperpod_images_never(kms):
    pcs = resolve(validated(base_spec(storage={"kms": kms})))
    assert [i.encrypted for i in pcs.images] == [kms]
    hyperpod = resolve(validated(base_spec(storage={"kms": kms}, orchestrator={"type": "hyperpod-slurm"},
                                           node_groups=[{"name": "cpu", "instance_type": "c7i.8xlarge", "count": 1}])))
    assert [(i.key, i.encrypted, i.slurm_prefix) for i in hyperpod.images] == [
        ("hyperpod-slurm-x86_64", False, "/opt/slurm")]
    assert {g.name: g.image for g in hyperpod.all_groups} == dict.fromkeys(("controller", "login", "cpu"),
                                                                           "hyperpod-slurm-x86_64")


def test_the_revision_is_the_images_and_kubernetes_planes_have_none():
    assert resolve(validated(base_spec(images={"revision": 3}))).images[0].revision == 3
    eks = resolve(validated(base_spec(orchestrator={"type": "eks"})))
    assert eks.images == () and all(g.image is None for g in eks.all_groups)
    # no NAME-images there: the reference GPU image is NAME-reference's, and not at all without it
    assert eks.stack("images") is None and eks.stack("reference") is not None
    bare = resolve(validated(base_spec(orchestrator={"type": "eks"}, images={"reference": False})))
    assert bare.reference_images == () and bare.stack("reference") is None


def test_the_reference_images_are_a_stack_of_their_own_after_the_cluster():
    """NAME-reference, last: nothing waits for it (fmcluster_cdk/stacks/app.py), and NAME-images
    holds the node images only."""
    pcs = resolve(validated(base_spec()))
    assert [s.key for s in pcs.stacks] == ["network", "storage", "observability", "images", "cluster", "reference"]
    reference = pcs.stack("reference")
    assert reference is not None and reference.name == "test-cluster-reference"
    assert "reference GPU image" in reference.contents and "reference" not in pcs.stack("images").contents
    protected = resolve(validated(base_spec(protect=True)))
    # it holds no data (the image is rebuilt from its recipe), and a failed first creation
    # (ROLLBACK_COMPLETE) can only be deleted: never termination-protected
    assert not reference.termination_protection and not protected.stack("reference").termination_protection
    assert protected.stack("images").termination_protection
