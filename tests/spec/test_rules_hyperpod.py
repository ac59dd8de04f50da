"""fmcluster.spec.rules.hyperpod: what a SageMaker HyperPod cluster takes from a spec. Each rule has a
passing spec and a failing one, located at its field path."""

import pytest

from fmcluster.facts import controlplanes
from fmcluster.spec.rules import hyperpod
from tests.support.specs import base_spec, findings, messages, on, paths, with_

HYPERPOD = ["hyperpod-slurm", "hyperpod-eks"]
G0 = "node_groups[0]"


def m7i_group(name, count=1):
    return {"name": name, "instance_type": "m7i.4xlarge", "count": count}


# ---- hyperpod_fixed_size ----------------------------------------------------------------

@pytest.mark.parametrize("type_", HYPERPOD)
def test_fixed_size_group_passes(type_):
    assert findings(hyperpod.hyperpod_fixed_size, on(type_)) == []


@pytest.mark.parametrize("type_", HYPERPOD)
@pytest.mark.parametrize("bounds, field", [({"min_count": 0, "max_count": 4}, "min_count"),
                                           ({"max_count": 4}, "max_count")])
def test_elastic_group_on_hyperpod(type_, bounds, field):
    group = {"name": "gpu", "instance_type": "p5.48xlarge", **bounds}
    spec = with_(on(type_), "node_groups", [group])
    assert f"{G0}.{field}" in paths(spec)
    (message,) = messages(spec, f"{G0}.{field}")
    assert "fixed size: use count" in message and "count: 4" in message


@pytest.mark.parametrize("type_", HYPERPOD)
def test_min_count_equal_to_max_count_is_a_fixed_size(type_):
    group = {"name": "gpu", "instance_type": "p5.48xlarge", "min_count": 4, "max_count": 4}
    spec = with_(on(type_), "node_groups", [group])
    assert findings(hyperpod.hyperpod_fixed_size, spec) == []
    assert paths(spec) == set()


def test_elastic_group_on_pcs_is_fine():
    spec = with_(base_spec(), "node_groups", [{"name": "gpu", "instance_type": "p5.48xlarge", "max_count": 4}])
    assert findings(hyperpod.hyperpod_fixed_size, spec) == []


# ---- hyperpod_instance_count --------------------------------------------------------------

def test_instance_count_at_the_limit_passes():
    spec = with_(on("hyperpod-slurm"), "node_groups", [m7i_group("cpu", controlplanes.HYPERPOD_MAX_INSTANCE_COUNT)])
    assert findings(hyperpod.hyperpod_instance_count, spec) == []


def test_instance_count_above_the_limit():
    spec = with_(on("hyperpod-slurm"), "node_groups", [m7i_group("cpu", controlplanes.HYPERPOD_MAX_INSTANCE_COUNT + 1)])
    assert f"{G0}.count" in paths(spec)
    assert "at most 6758 instances" in messages(spec, f"{G0}.count")[0]


# ---- hyperpod_instance_group_limit --------------------------------------------------------

def groups(n):
    return [m7i_group(f"g{i}") for i in range(n)]


def test_98_groups_with_controller_and_login_pass():
    spec = with_(on("hyperpod-slurm"), "node_groups", groups(98))  # + controller + login = 100
    assert findings(hyperpod.hyperpod_instance_group_limit, spec) == []


def test_99_groups_with_controller_and_login():
    spec = with_(on("hyperpod-slurm"), "node_groups", groups(99))
    assert "node_groups" in paths(spec)
    assert "101 instance groups exceed SageMaker HyperPod's 100" in messages(spec, "node_groups")[0]


def test_100_groups_on_hyperpod_eks_pass():
    spec = with_(on("hyperpod-eks"), "node_groups", groups(100))  # system nodes are an EKS node group
    assert findings(hyperpod.hyperpod_instance_group_limit, spec) == []


# ---- hyperpod_names -----------------------------------------------------------------------

@pytest.mark.parametrize("type_", HYPERPOD)
def test_names_pass(type_):
    assert findings(hyperpod.hyperpod_names, with_(on(type_), "node_groups[0].name", "gpu-a--b")) == []


@pytest.mark.parametrize("type_", HYPERPOD)
def test_trailing_dash_in_group_name(type_):
    spec = with_(on(type_), "node_groups[0].name", "gpu-")
    assert f"{G0}.name" in paths(spec)
    assert "not a valid SageMaker HyperPod instance group name" in messages(spec, f"{G0}.name")[0]


def test_trailing_dash_in_cluster_name():
    spec = with_(on("hyperpod-slurm"), "name", "train-")
    assert "name" in paths(spec)
    assert "not a valid SageMaker HyperPod cluster name" in messages(spec, "name")[0]


def test_trailing_dash_is_fine_on_pcs():
    assert findings(hyperpod.hyperpod_names, with_(base_spec(), "node_groups[0].name", "gpu-")) == []


# ---- hyperpod_placement_group -------------------------------------------------------------

@pytest.mark.parametrize("choice", ["auto", "none"])
def test_auto_or_none_placement_passes(choice):
    spec = with_(on("hyperpod-slurm"), "node_groups[0].placement_group", choice)
    assert findings(hyperpod.hyperpod_placement_group, spec) == []


@pytest.mark.parametrize("type_", HYPERPOD)
def test_named_placement_group_on_hyperpod(type_):
    spec = with_(on(type_), "node_groups[0].placement_group", "my-pg")
    assert f"{G0}.placement_group" in paths(spec)
    assert "places instances itself" in messages(spec, f"{G0}.placement_group")[0]


# ---- capacity types (controlplanes.py) ----------------------------------------------------

def test_spot_on_hyperpod_eks_passes():
    spec = with_(on("hyperpod-eks"), "node_groups[0].capacity.type", "spot")
    assert paths(spec) == set()


def test_interfaces_are_efa_only_on_hyperpod():
    from fmcluster.facts.efa import InterfaceMode

    assert {controlplanes.get(t).interface_mode for t in HYPERPOD} == {InterfaceMode.EFA_ONLY}


def test_controller_type_grows_with_the_cluster():
    assert [controlplanes.hyperpod_controller_type(n) for n in (1, 64, 65, 512, 513, 5000)] == [
        "m7i.2xlarge", "m7i.2xlarge", "m7i.4xlarge", "m7i.4xlarge", "m7i.12xlarge", "m7i.12xlarge"]


# ---- hyperpod_slurm_image_base ------------------------------------------------------------

def arm_group(**extra):
    return {"name": "cpu", "instance_type": "p6e-gb200.36xlarge", "count": 1, **extra}


def test_an_x86_group_on_hyperpod_slurm_has_a_base_image():
    assert findings(hyperpod.hyperpod_slurm_image_base, on("hyperpod-slurm")) == []


def test_an_arm64_group_on_hyperpod_slurm_without_an_image_of_its_own():
    spec = with_(on("hyperpod-slurm"), "node_groups", [arm_group()])
    (problem,) = findings(hyperpod.hyperpod_slurm_image_base, spec)
    assert "no arm64 Slurm base image" in problem.message and "ami_id" in problem.hint
    assert problem.path == ("node_groups", 0, "instance_type")


def test_an_arm64_group_with_its_own_ami_id_passes():
    spec = with_(on("hyperpod-slurm"), "node_groups", [arm_group(ami_id="ami-0123456789abcdef0")])
    assert findings(hyperpod.hyperpod_slurm_image_base, spec) == []


def test_arm64_login_nodes_on_hyperpod_slurm():
    spec = with_(on("hyperpod-slurm"), "orchestrator", {"type": "hyperpod-slurm",
                                                        "login": {"count": 1, "instance_type": "p6e-gb200.36xlarge"}})
    (problem,) = findings(hyperpod.hyperpod_slurm_image_base, spec)
    assert "login nodes" in problem.message and problem.path == ("orchestrator", "login", "instance_type")


@pytest.mark.parametrize("type_", ["pcs", "hyperpod-eks"])
def test_arm64_groups_elsewhere_are_not_this_rules(type_):
    spec = with_(on(type_), "node_groups", [arm_group()])
    assert findings(hyperpod.hyperpod_slurm_image_base, spec) == []
