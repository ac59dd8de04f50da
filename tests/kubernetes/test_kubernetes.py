"""fmcluster.kubernetes (charts, kueue, manifests) and the EKS node configuration (fmcluster.node.eks), pure."""

import email

import pytest
import yaml

from fmcluster.facts import kubernetes as k8s
from fmcluster.facts.efa import InterfaceMode
from fmcluster.kubernetes import charts, kueue
from fmcluster.kubernetes import manifests as kubernetes
from fmcluster.model.cluster import resolve
from fmcluster.node import eks as eks_node
from fmcluster.node.refs import ClusterDetails
from tests.support import nodes
from tests.support.specs import base_spec, validated, with_
from tests.support.ultraserver import gb200

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
    assert k8s.label_value_valid(value) is valid


@pytest.mark.parametrize("key, ok", [("team", True), ("example.com/team", True), ("a/b/c", False),
                                     ("Example.com/team", False), ("example.com/", False)])
def test_label_keys(key, ok):
    assert (k8s.label_key_problem(key) is None) is ok


def test_node_user_data_raid0():
    gpu = nodes.group("eks", "p5.48xlarge")  # the instance store, striped for kubelet: the NodeConfig first
    text = eks_node.node_user_data(*gpu, nodes.NO_METRICS)
    (part, _script) = email.message_from_string(text).get_payload()
    assert part.get_content_type() == "application/node.eks.aws"
    assert "localStorage:\n      strategy: RAID0" in part.get_payload()
    cpu = nodes.group("eks", "m7i.2xlarge")  # no instance store, no GPU to check, no metrics: nothing
    assert eks_node.node_user_data(*cpu, nodes.NO_METRICS) is None


def test_node_config_with_cluster_details():
    details = ClusterDetails("c", "https://ABC.eks.amazonaws.com", "Q0E=", "10.100.0.0/16")
    document = eks_node.node_config(raid0=False, cluster=details)
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
    quotas = kueue.flavor_quotas(model)
    assert [q.name for q in quotas] == ["cpu", "gpu"]  # CPU first
    gpu = quotas[1]
    assert (gpu.cpu, gpu.memory_gib, gpu.gpus, gpu.efa) == (768, 8192, 32, 64)
    assert quotas[0].tolerations == () and gpu.tolerations == (k8s.GPU_TOLERATION,)
    assert kueue.total_gpus(model) == 32


def test_namespace_manifest_only_for_new_namespaces():
    assert kubernetes.namespace_manifest("default") is None
    assert kubernetes.namespace_manifest("kube-system") is None
    assert kubernetes.namespace_manifest("training") == {"apiVersion": "v1", "kind": "Namespace",
                                                         "metadata": {"name": "training"}}


def test_chart_pins_are_exact_versions():
    for chart in charts.CHARTS + charts.METRICS_CHARTS + charts.ULTRASERVER_CHARTS:
        assert all(part.isdigit() for part in chart.version.removeprefix("v").split(".")), chart
    assert charts.KUEUE.repository.startswith("oci://")
    assert charts.LWS in charts.CHARTS and charts.LWS.repository.startswith("oci://")


def test_the_operators_and_lws_run_on_the_system_nodes():
    """Each operator sub-chart a release of its own in kube-system (each sub-chart makes its own
    namespace); the MPI operator placed by its chart's value, the training operator (no such value)
    by the installer's node selector; LWS by its chart's nodeSelector, its image the chart's own."""
    system = {"fmcluster.dev/node-group": "system"}
    model = resolve(eks_spec([{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}]))
    mpi, training = (row for row in charts.INSTALLS if isinstance(getattr(row, "chart", None), charts.Subchart))
    assert (mpi.chart.chart, training.chart.chart) == charts.OPERATOR_SUBCHARTS
    assert (mpi.release, mpi.namespace, training.release, training.namespace) == (
        "mpi-operator", "kube-system", "training-operators", "kube-system")
    assert mpi.values(model) == {"mpiOperator": {"nodeSelector": system}} and mpi.chart.node_selector is None
    assert training.values(model) == {} and training.chart.node_selector == system
    assert charts.lws_values() == {"nodeSelector": system}
    assert mpi.values(model) is not mpi.values(model)  # fresh values each time


# --- UltraServers ------------------------------------------------------------------------------

def gb200_model():
    return resolve(validated(gb200(orchestrator_type="eks", version="1.33", extra=("use1-az4", "use1-az6"))))


def test_ultraserver_groups_of_the_model():
    assert [g.name for g in gb200_model().ultraserver_groups] == ["gb200"]
    assert resolve(eks_spec([{"name": "gpu", "instance_type": "p5en.48xlarge", "count": 2}])).ultraserver_groups == ()


def test_only_ultraserver_flavors_name_the_nvlink_topology():
    spec = gb200(orchestrator_type="eks", version="1.33", extra=("use1-az4", "use1-az6"))
    spec = with_(spec, "node_groups[1]", {"name": "cpu", "instance_type": "m7i.4xlarge", "count": 2})
    model = resolve(validated(spec))
    assert {q.name: q.topology for q in kueue.flavor_quotas(model)} == {"cpu": None, "gb200": "nvlink-domain"}
    documents = kueue.kueue_manifests(model)
    assert documents[0] == kueue.topology_manifest()
    flavors = {d["metadata"]["name"]: d["spec"] for d in documents if d["kind"] == "ResourceFlavor"}
    assert "topologyName" not in flavors["cpu"] and flavors["gb200"]["topologyName"] == "nvlink-domain"


def test_ultraserver_flavors_offer_an_imex_channel_a_node():
    """With an UltraServer group, the ClusterQueue covers the ComputeDomain channel's logical resource:
    one a node on the UltraServer flavor (the DRA driver's one channel a node), 0 elsewhere."""
    spec = gb200(orchestrator_type="eks", version="1.33", extra=("use1-az4", "use1-az6"))
    spec = with_(spec, "node_groups[1]", {"name": "cpu", "instance_type": "m7i.4xlarge", "count": 2})
    model = resolve(validated(spec))
    queue = next(d for d in kueue.kueue_manifests(model) if d["kind"] == "ClusterQueue")
    (group,) = queue["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu", "vpc.amazonaws.com/efa",
                                         "fmcluster.dev/imex-channel"]
    quotas = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    assert quotas["gb200"]["fmcluster.dev/imex-channel"] == model.group("gb200").max_count
    assert quotas["cpu"]["fmcluster.dev/imex-channel"] == 0


def test_without_ultraservers_the_queue_and_kueue_stay_as_they_were():
    model = resolve(eks_spec([{"name": "gpu", "instance_type": "p5en.48xlarge", "count": 2}]))
    queue = next(d for d in kueue.kueue_manifests(model) if d["kind"] == "ClusterQueue")
    assert queue["spec"]["resourceGroups"][0]["coveredResources"] == list(kueue.COVERED_RESOURCES)
    assert kueue.kueue_configuration(model) is None
    assert kueue.kueue_values(model) == {
        "controllerManager": {"nodeSelector": {"fmcluster.dev/node-group": "system"}}}


def test_kueue_maps_the_compute_domain_channel_class():
    """Kueue 0.18.3's chart takes its Configuration whole, as a YAML string: the chart's default,
    with the ComputeDomain channel class mapped (resources.deviceClassMappings)."""
    model = gb200_model()
    values = kueue.kueue_values(model)
    configuration = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert configuration == kueue.kueue_configuration(model)
    assert configuration["resources"] == {"deviceClassMappings": [
        {"name": "fmcluster.dev/imex-channel", "deviceClassNames": ["compute-domain-default-channel.nvidia.com"]}]}
    assert {k: v for k, v in configuration.items() if k != "resources"} == kueue.kueue_chart_configuration()
    # the kinds the kits use stay integrated
    assert {"batch/job", "kubeflow.org/mpijob", "kubeflow.org/pytorchjob",
            "leaderworkerset.x-k8s.io/leaderworkerset"} <= set(configuration["integrations"]["frameworks"])
    assert values["controllerManager"] == {"nodeSelector": k8s.system_node_selector()}


def test_topology_levels_nvlink_domain_then_node():
    document = kueue.topology_manifest()
    assert document["apiVersion"] == kueue.KUEUE_API == "kueue.x-k8s.io/v1beta2"
    assert [level["nodeLabel"] for level in document["spec"]["levels"]] == [
        "nvidia.com/gpu.clique", "kubernetes.io/hostname"]


def test_compute_domain_per_job():
    """resource.nvidia.com/v1beta1 ComputeDomain (NVIDIA/k8s-dra-driver-gpu v25.8.0 CRD): namespaced,
    spec.numNodes and spec.channel.resourceClaimTemplate.name required."""
    document = kubernetes.compute_domain_manifest("nccl-gb200", namespace="training")
    assert document == {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
                        "metadata": {"name": "nccl-gb200", "namespace": "training"},
                        "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": "nccl-gb200-channel"}}}}
    sized = kubernetes.compute_domain_manifest("job", namespace="default", num_nodes=18, claim_template="job-imex")
    assert sized["spec"] == {"numNodes": 18, "channel": {"resourceClaimTemplate": {"name": "job-imex"}}}
    assert isinstance(sized["spec"]["numNodes"], int)  # the CRD's type: integer


@pytest.mark.parametrize("args, message", [
    ({"name": "Job_1"}, "not a Kubernetes object name"),
    ({"name": "job", "claim_template": "x" * 254}, "not a Kubernetes object name"),
    ({"name": "job", "num_nodes": -1}, "0 or more"),
])
def test_compute_domain_refuses_what_kubernetes_would(args, message):
    with pytest.raises(ValueError, match=message):
        kubernetes.compute_domain_manifest(namespace="training", **args)


def test_ultraserver_chart_values_reach_only_the_ultraserver_nodes():
    dra = charts.dra_driver_values(["b", "a", "a"])
    assert dra["kubeletPlugin"]["affinity"] == charts.node_group_affinity(["a", "b"])
    terms = dra["kubeletPlugin"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": k8s.NODE_GROUP_LABEL, "operator": "In",
                                            "values": ["a", "b"]}]}]
    assert dra["kubeletPlugin"]["tolerations"] == [k8s.GPU_TOLERATION]
    gfd = charts.gpu_feature_discovery_values(["a"])
    assert gfd["nfd"]["worker"]["tolerations"] == [k8s.GPU_TOLERATION]
    assert charts.GPU_FEATURE_DISCOVERY.version == charts.NVIDIA_DEVICE_PLUGIN.version
