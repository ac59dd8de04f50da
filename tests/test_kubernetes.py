"""fmcluster.kubernetes: node labels, node configuration, queue quotas and manifests (pure)."""

import email

import pytest

from fmcluster import catalog, kubernetes
from fmcluster.efa import InterfaceMode
from fmcluster.model import resolve
from tests.specs import base_spec, validated, with_

EKS = InterfaceMode.EFA_ONLY


def eks_spec(node_groups):
    spec = with_(base_spec(), "orchestrator.type", "eks")
    spec = with_(spec, "network.extra_availability_zone_ids", ["use1-az1"])
    return validated(with_(spec, "node_groups", node_groups))


def group(instance_type, efa=None, **extra):
    spec = with_(base_spec(), "node_groups[0]", {"name": "g", "instance_type": instance_type, "count": 2,
                                                 **({"efa": efa} if efa is not None else {}), **extra})
    return validated(spec).node_groups[0]


@pytest.mark.parametrize("value, valid", [("", True), ("gpu", True), ("a.b_c-d", True), ("gpu-", False),
                                          ("-gpu", False), ("a b", False), ("x" * 63, True), ("x" * 64, False)])
def test_label_values(value, valid):
    assert kubernetes.label_value_valid(value) is valid


@pytest.mark.parametrize("key, ok", [("team", True), ("example.com/team", True), ("a/b/c", False),
                                     ("Example.com/team", False), ("example.com/", False)])
def test_label_keys(key, ok):
    assert (kubernetes.label_key_problem(key) is None) is ok


def test_node_user_data_raid0():
    cpu = catalog.get("m7i.2xlarge")  # no GPU to check, no metrics: the NodeConfig alone
    text = kubernetes.node_user_data(cpu, raid0=True)
    (part,) = email.message_from_string(text).get_payload()
    assert part.get_content_type() == "application/node.eks.aws"
    assert "localStorage:\n      strategy: RAID0" in part.get_payload()
    assert kubernetes.node_user_data(cpu, raid0=False) is None


def test_node_config_with_cluster_details():
    details = kubernetes.ClusterDetails("c", "https://ABC.eks.amazonaws.com", "Q0E=", "10.100.0.0/16")
    document = kubernetes.node_config(raid0=False, cluster=details)
    assert document == ("---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: c\n"
                        "    apiServerEndpoint: https://ABC.eks.amazonaws.com\n    certificateAuthority: Q0E=\n"
                        "    cidr: 10.100.0.0/16\n")


@pytest.mark.parametrize("vpc, service", [("10.0.0.0/16", "10.100.0.0/16"), ("10.100.0.0/16", "172.20.0.0/16"),
                                          ("10.0.0.0/8", "172.20.0.0/16")])
def test_service_cidr_never_overlaps_the_vpc(vpc, service):
    assert kubernetes.service_cidr(vpc) == service


def test_flavor_quotas_and_total_gpus():
    model = resolve(eks_spec([{"name": "gpu", "instance_type": "p5en.48xlarge", "min_count": 0, "max_count": 4},
                              {"name": "cpu", "instance_type": "m7i.4xlarge", "count": 3}]))
    quotas = kubernetes.flavor_quotas(model)
    assert [q.name for q in quotas] == ["cpu", "gpu"]  # CPU first
    gpu = quotas[1]
    assert (gpu.cpu, gpu.memory_gib, gpu.gpus, gpu.efa) == (768, 8192, 32, 64)
    assert quotas[0].tolerations == () and gpu.tolerations == (kubernetes.GPU_TOLERATION,)
    assert kubernetes.total_gpus(model) == 32


def test_namespace_manifest_only_for_new_namespaces():
    assert kubernetes.namespace_manifest("default") is None
    assert kubernetes.namespace_manifest("kube-system") is None
    assert kubernetes.namespace_manifest("training") == {"apiVersion": "v1", "kind": "Namespace",
                                                         "metadata": {"name": "training"}}


def test_chart_pins_are_exact_versions():
    for chart in kubernetes.CHARTS:
        assert all(part.isdigit() for part in chart.version.removeprefix("v").split(".")), chart
    assert kubernetes.KUEUE.repository.startswith("oci://")
