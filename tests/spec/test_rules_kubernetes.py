"""fmcluster.spec.rules.kubernetes: label-valid names and labels, system nodes and access on EKS."""

import pytest

from fmcluster.spec.rules import kubernetes as k8s
from tests.support.specs import base_spec, findings, messages, paths, with_

ROLE = "arn:aws:iam::111122223333:role/MlPlatformAdmin"


def eks(spec=None, admin=True):
    spec = with_(spec or base_spec(), "orchestrator.type", "eks")
    spec = with_(spec, "network.extra_availability_zone_ids", ["use1-az1"])
    return with_(spec, "orchestrator.admin_role_arn", ROLE) if admin else spec


# ---- node_group_names_are_label_values ------------------------------------------------

def test_group_names_ending_alphanumeric_pass():
    spec = with_(eks(), "node_groups[0].name", "gpu-a1")
    assert findings(k8s.node_group_names_are_label_values, spec) == []
    assert paths(spec) == set()


def test_group_name_ending_with_a_dash_on_eks():
    spec = with_(eks(), "node_groups[0].name", "gpu-")
    assert "node_groups[0].name" in paths(spec)
    (message,) = messages(spec, "node_groups[0].name")
    assert "'gpu-' is not a valid Kubernetes label value" in message and "end the name with a letter" in message


def test_group_name_ending_with_a_dash_is_fine_on_pcs():
    spec = with_(base_spec(), "node_groups[0].name", "gpu-")
    assert findings(k8s.node_group_names_are_label_values, spec) == []


# ---- node_labels_valid ----------------------------------------------------------------

def test_valid_labels_pass():
    spec = with_(eks(), "node_groups[0].labels", {"team": "pretraining", "example.com/tier": "gold", "empty": ""})
    assert findings(k8s.node_labels_valid, spec) == []
    assert paths(spec) == set()


@pytest.mark.parametrize("key, why", [
    ("-team", "is not a valid Kubernetes label key"),
    ("Bad_Prefix!/team", "is not a valid Kubernetes label key"),
    ("x" * 64, "is not a valid Kubernetes label key"),
    ("node.kubernetes.io/gpu", "is reserved"),
    ("k8s.io/x", "is reserved"),
    ("fmcluster.dev/node-group", "is reserved"),
    ("nvidia.com/gpu.present", "is reserved"),
])
def test_invalid_or_reserved_label_keys(key, why):
    spec = with_(eks(), "node_groups[0].labels", {key: "a"})
    path = f"node_groups[0].labels.{key}"
    assert why in " ".join(messages(spec, path))


def test_invalid_label_value():
    spec = with_(eks(), "node_groups[0].labels", {"team": "pre training"})
    assert "'pre training' is not a valid Kubernetes label value" in messages(spec, "node_groups[0].labels.team")[0]


# ---- node_labels_only_on_kubernetes ---------------------------------------------------

def test_labels_on_pcs_warn():
    spec = with_(base_spec(), "node_groups[0].labels", {"team": "a"})
    assert "used only by Kubernetes control planes, not pcs" in messages(spec, "node_groups[0].labels", "warning")[0]
    assert findings(k8s.node_labels_only_on_kubernetes, eks(spec)) == []


# ---- eks_has_system_nodes ---------------------------------------------------------------

def test_eks_without_system_nodes():
    spec = with_(eks(), "orchestrator.login.count", 0)
    assert "orchestrator.login.count" in paths(spec)
    assert "at least one system node" in messages(spec, "orchestrator.login.count")[0]


def test_system_nodes_pass_and_pcs_needs_none():
    assert findings(k8s.eks_has_system_nodes, eks()) == []
    assert findings(k8s.eks_has_system_nodes, with_(base_spec(), "orchestrator.login.count", 0)) == []


# ---- eks_admin_role ---------------------------------------------------------------------

def test_eks_without_an_admin_role_warns():
    spec = eks(admin=False)
    assert paths(spec) == set()  # a warning, not an error
    (message,) = [m for m in messages(spec, "orchestrator", "warning") if "0.0.0.0/0" not in m]  # api-endpoint-open
    assert "nobody can reach the Kubernetes API" in message and "admin_role_arn" in message
    assert findings(k8s.eks_admin_role, eks()) == []


# ---- kueue_flavor_limit, system nodes on HyperPod EKS (issue 15) ----------------------------

def many(n, spec):
    return with_(spec, "node_groups", [{"name": f"cpu{i:02d}", "instance_type": "c7i.8xlarge", "count": 1}
                                       for i in range(n)])


def test_sixty_four_flavors_pass():
    spec = many(64, eks())
    assert findings(k8s.kueue_flavor_limit, spec) == []
    assert paths(spec) == set()


@pytest.mark.parametrize("kind", ["eks", "hyperpod-eks"])
def test_sixty_five_node_groups_exceed_kueues_flavors(kind):
    spec = with_(many(65, eks()), "orchestrator.type", kind)
    assert "node_groups[64]" in paths(spec)
    assert "at most 64 flavors" in messages(spec, "node_groups[64]")[0]


def test_hyperpod_eks_needs_a_system_node():
    """Without one, validate passed and synthesis failed with a traceback."""
    spec = with_(with_(eks(), "orchestrator.type", "hyperpod-eks"), "orchestrator.login.count", 0)
    (message,) = messages(spec, "orchestrator.login.count")
    assert "a HyperPod EKS cluster needs at least one system node" in message


def test_eks_label_keys_of_63_characters_pass_and_64_do_not():
    ok, long = "example.com/" + "k" * 51, "example.com/" + "k" * 52
    assert findings(k8s.eks_label_keys_fit, with_(eks(), "node_groups[0].labels", {ok: "v"})) == []
    spec = with_(eks(), "node_groups[0].labels", {long: "v"})
    assert f"node_groups[0].labels.{long}" in paths(spec)
    assert "at most 63 characters, prefix included" in messages(spec, f"node_groups[0].labels.{long}")[0]


# ---- api_endpoint_open, public_access_cidrs ------------------------------------------------

def test_api_endpoint_public_to_everyone_warns():
    (message,) = [m for m in messages(eks(), "orchestrator", "warning") if "0.0.0.0/0" in m]
    assert "public to the whole internet" in message and "public_access_cidrs" in message
    assert len(findings(k8s.api_endpoint_open, eks())) == 1
    spec = with_(eks(), "orchestrator.public_access_cidrs", ["203.0.113.0/24", "0.0.0.0/0"])
    (message,) = messages(spec, "orchestrator.public_access_cidrs[1]", "warning")
    assert "0.0.0.0/0" in message
    hyperpod = with_(eks(), "orchestrator.type", "hyperpod-eks")
    assert len(findings(k8s.api_endpoint_open, hyperpod)) == 1


@pytest.mark.parametrize("change", [("orchestrator.public_access_cidrs", ["203.0.113.0/24", "198.51.100.7/32"]),
                                    ("orchestrator.endpoint_access", "private")])
def test_api_endpoint_limited_or_private_passes(change):
    spec = with_(eks(), *change)
    assert findings(k8s.api_endpoint_open, spec) == []
    assert paths(spec) == set()


def test_api_endpoint_rule_is_for_kubernetes_only():
    assert findings(k8s.api_endpoint_open, base_spec()) == []


@pytest.mark.parametrize("cidr", ["203.0.113.1/24", "10.0.0.0/33", "example.com", "::/0"])
def test_public_access_cidrs_must_be_ipv4_blocks(cidr):
    spec = with_(eks(), "orchestrator.public_access_cidrs", [cidr])
    assert "orchestrator.public_access_cidrs[0]" in paths(spec)


def test_public_access_cidrs_where_they_do_nothing_warn():
    from fmcluster.spec.rules import orchestrator

    private = with_(with_(eks(), "orchestrator.endpoint_access", "private"),
                    "orchestrator.public_access_cidrs", ["203.0.113.0/24"])
    (message,) = messages(private, "orchestrator.public_access_cidrs", "warning")
    assert "only with endpoint_access public-and-private" in message
    slurm = with_(base_spec(), "orchestrator.public_access_cidrs", ["203.0.113.0/24"])
    (message,) = messages(slurm, "orchestrator.public_access_cidrs", "warning")
    assert "used only by Kubernetes control planes" in message
    assert len(findings(orchestrator.kubernetes_only_fields, slurm)) == 1
