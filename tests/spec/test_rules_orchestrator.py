"""fmcluster.spec.rules.orchestrator: versions, AZ count, PCS size, HyperPod, Kubernetes-only fields."""

import pytest

from fmcluster.facts import controlplanes
from fmcluster.spec.rules import orchestrator as orch
from tests.support.specs import base_spec, findings, messages, on, paths, problems, validated, with_

PLAN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5-plan"
CR = "cr-0123456789abcdef0"
ROLE = "arn:aws:iam::111122223333:role/ClusterAdmin"


def cpu_group(name, count):
    return {"name": name, "instance_type": "c7i.8xlarge", "count": count}


@pytest.mark.parametrize("type_", controlplanes.ORCHESTRATOR_TYPES)
def test_base_spec_is_valid_on_every_control_plane(type_):
    assert paths(on(type_)) == set()


# ---- version_supported ----------------------------------------------------------------

@pytest.mark.parametrize("type_, version", [("pcs", "25.05"), ("pcs", "24.11"), ("pcs", "25.11"),
                                            ("hyperpod-slurm", "24.11"),
                                            ("eks", "1.35"), ("eks", "1.32"), ("hyperpod-eks", "1.33")])
def test_supported_versions_pass(type_, version):
    spec = with_(on(type_), "orchestrator.version", version)
    assert findings(orch.version_supported, spec) == []
    assert "orchestrator.version" not in paths(spec)


@pytest.mark.parametrize("type_", [t for t in controlplanes.ORCHESTRATOR_TYPES if t != "pcs"])
def test_default_version_is_the_newest_supported(type_):
    model = validated(on(type_))
    assert model.orchestrator.version == controlplanes.get(type_).versions[-1]
    assert list(orch.version_supported(model)) == []


def test_pcs_defaults_to_the_newest_slurm_of_its_base_image():
    """Not 26.05, which the API takes but no PCS-ready DLAMI carries: the images stack would fail."""
    model = validated(on("pcs"))
    assert model.orchestrator.version == controlplanes.PCS_BASE_IMAGE_SLURM_VERSIONS[-1] == "25.11"
    assert list(orch.version_supported(model)) == []


def test_a_slurm_version_no_base_image_carries_is_a_warning():
    spec = with_(on("pcs"), "orchestrator.version", "26.05")
    (problem,) = findings(orch.version_supported, spec)
    assert problem.severity == "warning" and problem.path == ("orchestrator", "version")
    assert "carries Slurm 24.11, 25.05, 25.11, not 26.05" in problem.message
    assert 'version: "25.11"' in problem.hint and "fmcluster preflight" in problem.hint


def test_unsupported_slurm_version_on_pcs():
    spec = with_(base_spec(), "orchestrator.version", "23.11")
    assert "orchestrator.version" in paths(spec)
    (message,) = messages(spec, "orchestrator.version")
    assert "Slurm version 23.11 is not supported by pcs" in message
    assert "supported: 24.11, 25.05, 25.11, 26.05 (default 25.11)" in message


def test_retired_slurm_version_on_pcs_says_why():
    """PCS no longer creates Slurm 24.05 clusters: the spec is refused with the reason, once."""
    spec = with_(base_spec(), "orchestrator.version", "24.05")
    (message,) = messages(spec, "orchestrator.version")
    assert "no longer creates clusters with Slurm 24.05" in message
    assert "supported: 24.11, 25.05, 25.11, 26.05 (default 25.11)" in message


def test_pcs_features_are_keyed_on_the_slurm_version():
    assert controlplanes.pcs_offers("accounting", "24.11")
    assert not controlplanes.pcs_offers("ultraserver", "24.11")
    assert controlplanes.pcs_offers("ultraserver", "25.05")
    assert not controlplanes.pcs_offers("health_monitoring", "25.11")
    assert controlplanes.pcs_offers("health_monitoring", "26.05")


def test_kubernetes_version_on_a_slurm_control_plane():
    spec = with_(on("hyperpod-slurm"), "orchestrator.version", "1.35")
    assert "orchestrator.version" in paths(spec)
    assert "supported: 24.11" in messages(spec, "orchestrator.version")[0]


# ---- enough_availability_zones --------------------------------------------------------

@pytest.mark.parametrize("type_", ["pcs", "hyperpod-slurm"])
def test_slurm_control_planes_need_one_az_id(type_):
    spec = with_(base_spec(), "orchestrator.type", type_)
    assert findings(orch.enough_availability_zones, spec) == []
    assert paths(spec) == set()


@pytest.mark.parametrize("type_", ["eks", "hyperpod-eks"])
def test_kubernetes_control_planes_need_a_second_az_id(type_):
    """On the control plane that needs it where the file lists no extra AZ IDs; on the list
    where it does."""
    spec = with_(base_spec(), "orchestrator.type", type_)
    assert "network.extra_availability_zone_ids" not in paths(spec)
    (message,) = messages(spec, "orchestrator.type")
    assert "at least 2 Availability Zones of us-east-1; the spec has 1" in message
    assert "[use1-az1]" in message  # the hint suggests an AZ ID of the region
    listed = with_(spec, "network.extra_availability_zone_ids", [])
    assert "orchestrator.type" not in paths(listed)
    assert messages(listed, "network.extra_availability_zone_ids") == [message]
    assert findings(orch.enough_availability_zones, on(type_)) == []


# ---- pcs_size_limit -------------------------------------------------------------------

def three_groups(a, b, c, login=1):
    spec = with_(base_spec(), "node_groups", [cpu_group("cpu-a", a), cpu_group("cpu-b", b), cpu_group("cpu-c", c)])
    return with_(spec, "orchestrator.login.count", login)


def test_pcs_at_2048_nodes_passes():
    spec = three_groups(700, 700, 647)  # + 1 login node = 2048
    assert findings(orch.pcs_size_limit, spec) == []
    assert paths(spec) == set()


def test_pcs_above_2048_nodes():
    spec = three_groups(700, 700, 648)
    assert "node_groups[2].count" in paths(spec)  # the group that takes it over, not the list
    (message,) = messages(spec, "node_groups[2].count")
    assert ("2049 nodes (2048 in node groups at their maximum, 1 login) exceed the largest PCS cluster "
            "(2048 instances)") in message


def test_pcs_limit_counts_max_count_of_elastic_groups():
    spec = with_(three_groups(700, 700, 600, login=0), "node_groups[2]",
                 {"name": "c", "instance_type": "c7i.8xlarge", "min_count": 0, "max_count": 649})
    assert "node_groups[2].max_count" in paths(spec)
    assert "2049 nodes exceed" in messages(spec, "node_groups[2].max_count")[0]  # no login nodes: no split


def test_pcs_limit_is_for_pcs_only():
    spec = on("hyperpod-slurm", three_groups(700, 700, 648))
    spec = with_(spec, "node_groups", [{**g, "instance_type": "m7i.8xlarge"} for g in spec["node_groups"]])
    assert findings(orch.pcs_size_limit, spec) == []
    assert not [p for p in paths(spec) if p.startswith("node_groups")]


# ---- hyperpod_instance_types ----------------------------------------------------------

@pytest.mark.parametrize("type_", ["hyperpod-slurm", "hyperpod-eks"])
def test_hyperpod_instance_types_pass(type_):
    spec = with_(on(type_), "node_groups[1]", {"name": "cpu", "instance_type": "m7i.8xlarge", "count": 2})
    spec = with_(spec, "orchestrator.login.instance_type", "r7i.2xlarge")
    assert findings(orch.hyperpod_instance_types, spec) == []
    assert paths(spec) == set()


def test_c7i_group_on_hyperpod():
    spec = with_(on("hyperpod-slurm"), "node_groups[1]", cpu_group("cpu", 2))
    assert "node_groups[1].instance_type" in paths(spec)
    assert "node_groups[0].instance_type" not in paths(spec)
    assert "does not offer ml.c7i.8xlarge" in messages(spec, "node_groups[1].instance_type")[0]


def test_c7i_system_nodes_on_hyperpod_eks_pass():
    spec = with_(on("hyperpod-eks"), "orchestrator.login.instance_type", "c7i.2xlarge")
    assert findings(orch.hyperpod_instance_types, spec) == []


def test_c7i_login_on_hyperpod():
    spec = with_(on("hyperpod-slurm"), "orchestrator.login.instance_type", "c7i.2xlarge")
    assert "orchestrator.login.instance_type" in paths(spec)
    assert "ml.c7i.2xlarge" in messages(spec, "orchestrator.login.instance_type")[0]
    no_login = with_(spec, "orchestrator.login.count", 0)
    assert findings(orch.hyperpod_instance_types, no_login) == []


def test_c7i_on_pcs_passes():
    spec = with_(base_spec(), "node_groups[1]", cpu_group("cpu", 2))
    spec = with_(spec, "orchestrator.login.instance_type", "c7i.2xlarge")
    assert findings(orch.hyperpod_instance_types, spec) == []
    assert paths(spec) == set()


# ---- training plans (orchestrator.training_plan_only_on_hyperpod, capacity.training_plan_given)

def test_hyperpod_capacity_block_with_training_plan_passes():
    spec = with_(on("hyperpod-slurm"), "node_groups[0].capacity", {"type": "capacity-block", "training_plan_arn": PLAN})
    assert findings(orch.training_plan_only_on_hyperpod, spec) == []
    assert paths(spec) == set()


def test_hyperpod_capacity_block_needs_training_plan():
    spec = with_(on("hyperpod-slurm"), "node_groups[0].capacity.type", "capacity-block")
    assert "node_groups[0].capacity.training_plan_arn" in paths(spec)
    assert "node_groups[0].capacity.reservation_id" not in paths(spec)
    assert "through a training plan" in messages(spec, "node_groups[0].capacity.training_plan_arn")[0]


def test_training_plan_on_pcs():
    spec = with_(base_spec(), "node_groups[0].capacity",
                 {"type": "capacity-block", "reservation_id": CR, "training_plan_arn": PLAN})
    assert "node_groups[0].capacity.training_plan_arn" in paths(spec)
    (message,) = messages(spec, "node_groups[0].capacity.training_plan_arn")
    assert "SageMaker HyperPod feature" in message


def test_reservation_id_on_hyperpod():
    spec = with_(on("hyperpod-slurm"), "node_groups[0].capacity",
                 {"type": "capacity-block", "reservation_id": CR, "training_plan_arn": PLAN})
    assert "node_groups[0].capacity.reservation_id" in paths(spec)
    assert "cannot target an EC2 reservation" in messages(spec, "node_groups[0].capacity.reservation_id")[0]


# ---- kubernetes_only_fields -----------------------------------------------------------

@pytest.mark.parametrize("type_", ["eks", "hyperpod-eks"])
def test_admin_role_on_kubernetes_passes(type_):
    # values of one's own (the module's are placeholders, placeholder-values warns of them)
    spec = with_(on(type_), "orchestrator.admin_role_arn", "arn:aws:iam::381492756031:role/ClusterAdmin")
    spec = with_(spec, "orchestrator.public_access_cidrs", ["100.24.0.0/16"])  # not api-endpoint-open
    assert findings(orch.kubernetes_only_fields, spec) == []
    assert problems(spec) == []


def test_admin_role_on_pcs_is_a_warning_not_an_error():
    spec = with_(base_spec(), "orchestrator.admin_role_arn", ROLE)
    assert paths(spec) == set()
    assert paths(spec, severity="warning") == {"orchestrator.admin_role_arn"}
    assert "only by Kubernetes control planes, not pcs" in messages(spec, "orchestrator.admin_role_arn", "warning")[0]


# ---- namespace_valid ------------------------------------------------------------------

@pytest.mark.parametrize("ns", ["default", "ml-team", "a", "team1", "x" * 63])
def test_valid_namespaces(ns):
    spec = with_(on("eks"), "orchestrator.namespace", ns)
    assert findings(orch.namespace_valid, spec) == []
    assert paths(spec) == set()


@pytest.mark.parametrize("ns", ["ML", "ml_team", "-ml", "ml-", "", "x" * 64, "ml.team"])
def test_invalid_namespaces(ns):
    spec = with_(on("eks"), "orchestrator.namespace", ns)
    assert "orchestrator.namespace" in paths(spec)
    assert "not a valid Kubernetes namespace" in messages(spec, "orchestrator.namespace")[0]
