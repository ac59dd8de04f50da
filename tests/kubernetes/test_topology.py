"""Topology-aware placement on the Kubernetes planes (eks, hyperpod-eks): the Kueue Topologies over
EKS's network-node labels and the NVLink domain, the flavors that name them, and the placement the
kits and serving ask for, held to Kueue's own rules (kubernetes-sigs/kueue v0.18.3, the pinned
chart's release):

- the Topology CRD (config/components/crd/bases/kueue.x-k8s.io_topologies.yaml, from
  apis/kueue/v1beta2/topology_types.go): 1 to 16 levels, unique, kubernetes.io/hostname only last
  (CEL rules, which the schema validator does not evaluate: checked here by hand), ordered from the
  highest (coarsest) level to the lowest (site/content/en/docs/concepts/topology.md);
- the ResourceFlavor CRD: "at least one nodeLabel is required when topology is set";
- a ClusterQueue with a flavor naming a Topology that does not exist is inactive
  (pkg/cache/scheduler/clusterqueue.go, TopologyNotFound);
- a pod set gets a TAS flavor only where it asks for topology, unless every flavor of its
  ClusterQueue is a TAS flavor; and only a level its Topology has
  (pkg/scheduler/flavorassigner/tas_flavorassigner.go checkPodSetAndFlavorMatchForTAS);
- a pod-set group (podset-group-name) is exactly 2 pod sets with the same required or preferred
  request (pkg/controller/jobframework/tas_validation.go ValidatePodSetGroupingTopology).
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from fmcluster.kits import kubernetes as jobs_kubernetes
from fmcluster.kits import serving
from fmcluster.kubernetes import kueue
from fmcluster.model import expected
from fmcluster.model.cluster import ClusterModel, resolve
from fmcluster.spec import loader
from tests.support.crds import KUBERNETES_EXAMPLES, validate
from tests.support.paths import ROOT
from tests.support.specs import base_spec, validated, with_

HOSTNAME = "kubernetes.io/hostname"
LAYER = "topology.k8s.aws/network-node-layer-{}"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
GROUP_NAME = "kueue.x-k8s.io/podset-group-name"
REQUESTS = (kueue.REQUIRED_TOPOLOGY_ANNOTATION, kueue.PREFERRED_TOPOLOGY_ANNOTATION, UNCONSTRAINED)

# example -> flavor -> the Topology it names
EXPECTED_FLAVORS = {
    "examples/p5en-eks.yaml": {"gpu": "network-3", "cpu": None},
    # p5.4xlarge is not a type of EC2 instance topology: its nodes have no network labels
    "examples/p5-hyperpod-eks.yaml": {"train": "network-3", "explore": None},
    "examples/p6e-gb200-eks.yaml": {"gb200": "nvlink-domain"},
}


def example(name: str) -> ClusterModel:
    return resolve(loader.load(ROOT / name).spec)


def eks(instance_type: str = "p5.48xlarge", count: int = 2, **more: Any) -> ClusterModel:
    spec = with_(with_(base_spec(), "orchestrator.type", "eks"), "network.extra_availability_zone_ids", ["use1-az1"])
    spec = with_(with_(spec, "node_groups[0].instance_type", instance_type), "node_groups[0].count", count)
    for path, value in more.items():
        spec = with_(spec, path, value)
    return resolve(validated(spec))


def by_kind(documents: list[dict], kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in documents if d["kind"] == kind}


def check_topology(topology: dict) -> list[str]:
    """The CEL rules of the Topology CRD and Kueue's ordering, as the API server would hold them."""
    levels = [level["nodeLabel"] for level in topology["spec"]["levels"]]
    problems = []
    if not 1 <= len(levels) <= 16:
        problems.append(f"{len(levels)} levels")
    if len(set(levels)) != len(levels):
        problems.append("levels must be unique")
    if HOSTNAME in levels and levels[-1] != HOSTNAME:
        problems.append("the kubernetes.io/hostname label can only be used at the lowest level of topology")
    network = [label for label in levels if label.startswith(LAYER.format(""))]
    if network != [LAYER.format(n) for n in range(1, len(network) + 1)]:
        problems.append(f"network layers not from the top down: {network}")
    return problems


# --- the Topologies and flavors ------------------------------------------------------------------

def test_every_kubernetes_example_is_expected():
    assert set(EXPECTED_FLAVORS) == set(KUBERNETES_EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXPECTED_FLAVORS))
def test_each_flavor_names_its_groups_topology(name):
    model = example(name)
    documents = kueue.kueue_manifests(model)
    flavors = by_kind(documents, "ResourceFlavor")
    assert {f: spec["spec"].get("topologyName") for f, spec in flavors.items()} == EXPECTED_FLAVORS[name]
    topologies = by_kind(documents, "Topology")
    named = {spec["spec"]["topologyName"] for spec in flavors.values() if "topologyName" in spec["spec"]}
    assert set(topologies) == named  # each one named is there, and no other
    kinds = [d["kind"] for d in documents]
    assert kinds[:len(topologies)] == ["Topology"] * len(topologies)  # before the flavors that name them
    for topology in topologies.values():
        validate(topology)
        assert check_topology(topology) == []
    for flavor in flavors.values():
        validate(flavor)
        if "topologyName" in flavor["spec"]:
            assert len(flavor["spec"]["nodeLabels"]) >= 1  # the CRD's rule with a topology


def test_network_topologies_follow_the_types_layers():
    assert kueue.topology_manifest("network-3")["spec"]["levels"] == [
        {"nodeLabel": LAYER.format(1)}, {"nodeLabel": LAYER.format(2)}, {"nodeLabel": LAYER.format(3)},
        {"nodeLabel": HOSTNAME}]
    four = kueue.topology_manifest("network-4")
    assert [level["nodeLabel"] for level in four["spec"]["levels"]] == [
        LAYER.format(1), LAYER.format(2), LAYER.format(3), LAYER.format(4), HOSTNAME]
    assert four["apiVersion"] == "kueue.x-k8s.io/v1beta2" and four["metadata"] == {"name": "network-4"}
    assert kueue.topology_manifest() == kueue.topology_manifest("nvlink-domain")
    for name in ("network-3", "network-4", "nvlink-domain"):
        validate(kueue.topology_manifest(name))
        assert check_topology(kueue.topology_manifest(name)) == []


def test_the_checks_refuse_a_broken_topology():
    topology = kueue.topology_manifest("network-3")
    topology["spec"]["levels"].reverse()
    assert check_topology(topology) == [
        "the kubernetes.io/hostname label can only be used at the lowest level of topology",
        f"network layers not from the top down: {[LAYER.format(n) for n in (3, 2, 1)]}"]


def test_a_four_layer_type_gets_its_own_topology():
    model = eks("p6-b200.48xlarge")
    documents = kueue.kueue_manifests(model)
    (topology,) = by_kind(documents, "Topology").values()
    assert topology == kueue.topology_manifest("network-4")
    assert by_kind(documents, "ResourceFlavor")["gpu"]["spec"]["topologyName"] == "network-4"
    (group,) = model.node_groups
    assert kueue.topology_request(group) == {kueue.PREFERRED_TOPOLOGY_ANNOTATION: LAYER.format(4)}
    assert kueue.group_placement(model, group) == (
        "Kueue topology network-4: jobs prefer one layer-4 network node (topology.k8s.aws/network-node-layer-4)")


def test_three_and_four_layer_groups_side_by_side():
    second = {"name": "b200", "instance_type": "p6-b200.48xlarge", "count": 2}
    spec = with_(with_(base_spec(), "orchestrator.type", "eks"), "network.extra_availability_zone_ids", ["use1-az1"])
    spec["node_groups"].append({**spec["node_groups"][0], **second})
    model = resolve(validated(spec))
    documents = kueue.kueue_manifests(model)
    assert list(by_kind(documents, "Topology")) == ["network-3", "network-4"]
    assert {f: d["spec"].get("topologyName") for f, d in by_kind(documents, "ResourceFlavor").items()} == {
        "gpu": "network-3", "b200": "network-4"}


@pytest.mark.parametrize("instance_type, count", [
    ("p5.48xlarge", 1),  # one node: no multi-node job to place
    ("p5.4xlarge", 2),  # not a type of EC2 instance topology: no network labels on its nodes
])
def test_no_topology_where_nothing_is_placed_by_it(instance_type, count):
    model = eks(instance_type, count)
    documents = kueue.kueue_manifests(model)
    assert "Topology" not in {d["kind"] for d in documents}
    assert "topologyName" not in by_kind(documents, "ResourceFlavor")["gpu"]["spec"]
    (group,) = model.node_groups
    assert kueue.topology_request(group) == {} and kueue.group_placement(model, group) is None


def test_no_topology_without_efa():
    model = eks(**{"node_groups[0].efa": False})
    (group,) = model.node_groups
    assert group.efa_interfaces == 0
    assert kueue.group_topology(group) is None and "Topology" not in {
        d["kind"] for d in kueue.kueue_manifests(model)}


def test_group_placement_in_the_plans_words():
    phrases = {(name, g.name): kueue.group_placement(example(name), g)
               for name in EXPECTED_FLAVORS for g in example(name).node_groups}
    assert phrases == {
        ("examples/p5en-eks.yaml", "gpu"):
            "Kueue topology network-3: jobs prefer one layer-3 network node (topology.k8s.aws/network-node-layer-3)",
        ("examples/p5en-eks.yaml", "cpu"): None,
        ("examples/p5-hyperpod-eks.yaml", "train"):
            "Kueue topology network-3: jobs prefer one layer-3 network node (topology.k8s.aws/network-node-layer-3)",
        ("examples/p5-hyperpod-eks.yaml", "explore"): None,
        ("examples/p6e-gb200-eks.yaml", "gb200"):
            "Kueue topology nvlink-domain: jobs prefer one NVLink domain (nvidia.com/gpu.clique)",
    }


def test_no_kueue_placement_on_slurm():
    model = resolve(validated(base_spec()))  # AWS PCS
    assert all(kueue.group_placement(model, g) is None for g in model.node_groups)


# --- what the kits and serving ask for, as Kueue's flavor assigner reads it ----------------------

def templates(manifest: dict) -> list[tuple[str, dict, int]]:
    """(role, pod template, pods) of every pod set Kueue makes of a job."""
    kind, spec = manifest["kind"], manifest["spec"]
    if kind in ("MPIJob", "PyTorchJob"):
        replicas = spec.get("mpiReplicaSpecs") or spec["pytorchReplicaSpecs"]
        return [(role, r["template"], r["replicas"]) for role, r in replicas.items()]
    if kind == "LeaderWorkerSet":
        template = spec["leaderWorkerTemplate"]
        if "leaderTemplate" not in template:
            return [("worker", template["workerTemplate"], template["size"])]
        return [("leader", template["leaderTemplate"], 1),
                ("worker", template["workerTemplate"], template["size"] - 1)]
    if kind == "Job":
        return [("pod", spec["template"], spec.get("parallelism", 1))]
    return []


def flavor_problem(model: ClusterModel, template: dict) -> Optional[str]:
    """Why Kueue 0.18.3 would give the pod set no flavor of the model's ClusterQueue (None: it would):
    the flavors whose node labels its nodeSelector matches, and of those the TAS ones only where it
    asks for topology at a level of the flavor's Topology (checkPodSetAndFlavorMatchForTAS)."""
    documents = kueue.kueue_manifests(model)
    flavors = by_kind(documents, "ResourceFlavor")
    levels = {name: [level["nodeLabel"] for level in t["spec"]["levels"]]
              for name, t in by_kind(documents, "Topology").items()}
    tas_only = all("topologyName" in f["spec"] for f in flavors.values())
    selector = template["spec"].get("nodeSelector", {})
    annotations = template.get("metadata", {}).get("annotations", {})
    asked = [a for a in REQUESTS if a in annotations]
    assert len(asked) <= 1, annotations  # Kueue's webhook takes one of them
    matching = [f for f in flavors.values() if f["spec"]["nodeLabels"].items() <= selector.items()]
    if not matching:
        return "no flavor matches its nodeSelector"
    for flavor in matching:
        topology = flavor["spec"].get("topologyName")
        if topology is None:
            return None if not asked else f"{flavor['metadata']['name']} does not support TAS"
        if not asked:
            if tas_only:
                return None
            return f"Flavor {flavor['metadata']['name']!r} supports only TopologyAwareScheduling"
        if asked[0] != UNCONSTRAINED and annotations[asked[0]] not in levels[topology]:
            return f"Flavor {flavor['metadata']['name']!r} does not contain the requested level"
        return None
    return "unreachable"


def check_groups(sets: list[tuple[str, dict, int]]) -> None:
    """Pod-set groups as Kueue's webhook takes them (ValidatePodSetGroupingTopology)."""
    groups: dict[str, list[tuple[dict, int]]] = {}
    for _, template, pods in sets:
        annotations = template.get("metadata", {}).get("annotations", {})
        if GROUP_NAME in annotations:
            assert {kueue.REQUIRED_TOPOLOGY_ANNOTATION, kueue.PREFERRED_TOPOLOGY_ANNOTATION} & set(annotations)
            groups.setdefault(annotations[GROUP_NAME], []).append((annotations, pods))
    for members in groups.values():
        assert len(members) == 2 and 1 in (members[0][1], members[1][1])
        (first, _), (second, _) = members
        assert {k: v for k, v in first.items() if k in REQUESTS} == {k: v for k, v in second.items() if k in REQUESTS}


def kit_jobs(model: ClusterModel) -> list[tuple[Any, str, dict]]:
    found = []
    for group in expected.gpu_groups(model):
        for test in jobs_kubernetes.TESTS:
            documents = jobs_kubernetes.manifests(model, group, test)
            if documents:
                found.append((group, test, documents[-1]))
    return found


@pytest.mark.parametrize("name", sorted(EXPECTED_FLAVORS))
def test_kueue_gives_every_kit_pod_set_its_groups_flavor(name):
    model = example(name)
    for group, test, job in kit_jobs(model):
        sets = templates(job)
        assert sets, (group.name, test)
        for role, template, _ in sets:
            assert flavor_problem(model, template) is None, (group.name, test, role)
            assert template.get("metadata", {}).get("annotations", {}) == kueue.topology_request(group)
        check_groups(sets)


def test_the_check_refuses_a_pod_set_that_does_not_ask():
    model = example("examples/p5en-eks.yaml")  # a CPU flavor beside: the ClusterQueue is not TAS-only
    group = model.group("gpu")
    (job,) = jobs_kubernetes.manifests(model, group, "dcgm")
    template = job["spec"]["template"]
    del template["metadata"]
    assert flavor_problem(model, template) == "Flavor 'gpu' supports only TopologyAwareScheduling"
    template["metadata"] = {"annotations": {kueue.PREFERRED_TOPOLOGY_ANNOTATION: "nvidia.com/gpu.clique"}}
    assert flavor_problem(model, template) == "Flavor 'gpu' does not contain the requested level"


def test_network_groups_prefer_the_lowest_layer_in_the_kit():
    model = example("examples/p5en-eks.yaml")
    group = model.group("gpu")
    for test in ("nccl", "smoke"):
        job = jobs_kubernetes.manifests(model, group, test)[-1]
        for _, template, _ in templates(job):
            assert template["metadata"]["annotations"] == {kueue.PREFERRED_TOPOLOGY_ANNOTATION: LAYER.format(3)}


def test_per_node_jobs_hold_the_nodes_gpus_on_a_tas_flavor():
    """Kueue's TAS assigns nodes by free capacity and reads no pod anti-affinity: a per-node job's pod
    holds the node's GPUs there, so that one pod lands on each node."""
    model = example("examples/p5en-eks.yaml")
    group = model.group("gpu")
    for test in ("dcgm", "fio"):
        (job,) = jobs_kubernetes.manifests(model, group, test)
        (container,) = job["spec"]["template"]["spec"]["containers"]
        assert container["resources"]["limits"][kueue.GPU_RESOURCE] == group.gpus, test
    plain = eks(count=1)  # no topology: the fio job asks for no GPU
    fio = jobs_kubernetes.manifests(plain, plain.group("gpu"), "fio")
    assert all("limits" not in c["resources"] for job in fio for c in job["spec"]["template"]["spec"]["containers"])


def llama(params: float = 405, nodes: int = 4, instance_type: str = "p5.48xlarge") -> ClusterModel:
    model = {"name": "llama", "path": "/fsx/models/llama", "parameters_billions": params, "dtype": "bf16"}
    spec = with_(with_(base_spec(), "orchestrator.type", "eks"), "network.extra_availability_zone_ids", ["use1-az1"])
    spec = with_(with_(spec, "node_groups[0].instance_type", instance_type), "node_groups[0].count", nodes)
    return resolve(validated(with_(spec, "serving", {"node_group": "gpu", "model": model})))


@pytest.mark.parametrize("params", [405, 8])
def test_serving_asks_for_the_lowest_layer(params):
    model = llama(params)
    lws = next(d for d in serving.kubernetes_serve_manifests(model, namespace="ml", queue="llm", claim="fsx")
               if d["kind"] == "LeaderWorkerSet")
    validate(lws)
    sets = templates(lws)
    check_groups(sets)
    several = model.serving.pipeline_parallel > 1
    for _, template, _ in sets:
        assert flavor_problem(model, template) is None
        wanted = {kueue.PREFERRED_TOPOLOGY_ANNOTATION: LAYER.format(3)}
        if several:  # a leader and its workers placed together
            wanted[GROUP_NAME] = serving.serving_name(model)
        assert template["metadata"]["annotations"] == wanted
    assert several == (params == 405)
