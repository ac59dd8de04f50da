"""The custom resources fmcluster writes, validated against the CRDs' own schemas.

tests/data/crds/ holds the openAPIV3Schema of each CRD version fmcluster writes, taken from the
release it pins (each file's `$comment` says which: kubernetes-sigs/kueue v0.18.3, the chart
fmcluster.kubernetes.charts.KUEUE installs; NVIDIA/k8s-dra-driver-gpu v25.8.0, DRA_DRIVER's; the MPIJob
and PyTorchJob of the HyperPod dependencies chart's operator sub-charts, which both Kubernetes
planes run (fmcluster_cdk.constructs.hyperpod.dependencies.COMMIT; the files come from a later commit, at
which those sub-charts are unchanged); kubernetes-sigs/lws v0.10.0, LWS's), made by
tests/data/crds/convert.py. The job and serving kits' manifests are checked with `validate`. The Kueue
objects of every Kubernetes example and the ComputeDomain of a job are checked with a JSON Schema
validator (jsonschema; the OpenAPI extensions `x-kubernetes-*`, CEL rules among them, are not
evaluated: tests/cdk/test_eks_stack.py checks the Topology's CEL rules by hand). A test also holds the
pinned versions to the files, so that a chart bump without new schemas fails here.
"""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
import yaml

from fmcluster.kubernetes import charts, kueue
from fmcluster.kubernetes import manifests as kubernetes
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from fmcluster_cdk.constructs.hyperpod import dependencies as deps
from tests.data.crds import convert
from tests.support.crds import CRDS, KUBERNETES_EXAMPLES, crds, validate
from tests.support.paths import ROOT


def test_the_schemas_are_of_the_pinned_releases():
    comments = {name: crd["$comment"] for name, crd in crds().items()}
    assert kueue.KUEUE_API == "kueue.x-k8s.io/v1beta2"
    assert all(f"kubernetes-sigs/kueue v{charts.KUEUE.version} " in c for (api, _), c in comments.items()
               if api == kueue.KUEUE_API)
    (dra,) = [c for (api, _), c in comments.items() if api == kubernetes.COMPUTE_DOMAIN_API]
    assert f"NVIDIA/k8s-dra-driver-gpu v{charts.DRA_DRIVER.version} " in dra
    (lws,) = [c for (api, _), c in comments.items() if api == charts.LWS_API]
    assert f"kubernetes-sigs/lws v{charts.LWS.version} charts/lws/crds/" in lws
    # the operators' sub-charts (OPERATOR_SUBCHARTS) of the chart at HyperPod's pin, read at a later
    # commit that the comment names, with the pin
    for api, kind, subchart in ((charts.MPIJOB_API, "MPIJob", "mpi-operator"),
                                (charts.PYTORCHJOB_API, "PyTorchJob", "training-operators")):
        comment = comments[(api, kind)]
        assert subchart in charts.OPERATOR_SUBCHARTS
        assert f", from {deps.REPOSITORY} {deps.subchart_path(subchart)}/" in comment, kind
        assert f"the pin {deps.COMMIT} " in comment and "not in the mirror's history" in comment, kind


def test_the_converter_made_every_file():
    """convert.py gives each file's text back from its CRD version and its source."""
    for path in sorted(CRDS.glob("*.json")):
        crd = json.loads(path.read_text())
        definition = {"kind": "CustomResourceDefinition", "spec": {
            "group": crd["group"], "scope": crd["scope"],
            "names": {"kind": crd["kind"], "plural": path.name.split("_")[1]},
            "versions": [{"name": "v0"}, {"name": crd["version"], "schema": {"openAPIV3Schema": crd["schema"]}}]}}
        source = crd["$comment"].split(", from ", 1)[1].rsplit(" (tests/kubernetes/test_crd_schemas.py", 1)[0]
        assert convert.convert_crd(definition, crd["version"], source) == (path.name, path.read_text()), path.name


def test_the_converter_reads_a_yaml_stream():
    stream = "# a comment\n---\napiVersion: v1\nkind: Namespace\n---\n" + yaml.safe_dump({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "spec": {"group": "example.com", "scope": "Cluster", "names": {"kind": "Thing", "plural": "things"},
                 "versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object"}}}]}})
    name, text = convert.convert(stream, "v1", "example/things v1 crds/things.yaml")
    assert name == "example.com_things_v1.json"
    assert json.loads(text) == {
        "$comment": "openAPIV3Schema of example.com/v1 Thing, from example/things v1 crds/things.yaml "
                    "(tests/kubernetes/test_crd_schemas.py validates fmcluster's manifests against it)",
        "group": "example.com", "kind": "Thing", "schema": {"type": "object"}, "scope": "Cluster", "version": "v1"}


def test_every_kubernetes_example_is_covered():
    assert {"examples/p5en-eks.yaml", "examples/p5-hyperpod-eks.yaml", "examples/p6e-gb200-eks.yaml"} <= set(
        KUBERNETES_EXAMPLES)


@pytest.mark.parametrize("example", KUBERNETES_EXAMPLES)
def test_kueue_objects_match_their_crds(example):
    model = resolve(loader.load(ROOT / example).spec)
    manifests = kueue.kueue_manifests(model)
    kinds = [m["kind"] for m in manifests]
    queues = len(model.teams) or 1  # a ClusterQueue and LocalQueue per team, else the cluster's
    assert kinds.count("ClusterQueue") == queues and kinds.count("LocalQueue") == queues and "ResourceFlavor" in kinds
    assert kinds.count("Cohort") == (1 if model.teams else 0)
    assert kinds.count("WorkloadPriorityClass") == (3 if model.teams else 0)
    for manifest in manifests:
        validate(manifest)


def test_the_ultraserver_example_has_its_topology_named_by_its_flavor():
    manifests = kueue.kueue_manifests(resolve(loader.load(ROOT / "examples/p6e-gb200-eks.yaml").spec))
    (topology,) = [m for m in manifests if m["kind"] == "Topology"]
    flavors = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "ResourceFlavor"}
    assert [f["spec"].get("topologyName") for f in flavors.values()].count(topology["metadata"]["name"]) == 1


def test_a_compute_domain_matches_its_crd():
    validate(kubernetes.compute_domain_manifest("llama-pretrain", namespace="training", num_nodes=18))
    validate(kubernetes.compute_domain_manifest("smoke", namespace="training"))


@pytest.mark.parametrize("breakage", [
    ("Topology", lambda m: m["spec"].pop("levels")),
    ("Topology", lambda m: m["spec"]["levels"].append({"nodeLabel": 7})),
    ("ResourceFlavor", lambda m: m["spec"].__setitem__("nodeLabels", ["not", "a", "map"])),
    ("ClusterQueue", lambda m: m["spec"]["resourceGroups"][0]["flavors"][0].pop("resources")),
    ("LocalQueue", lambda m: m["spec"].__setitem__("clusterQueue", 3)),
])
def test_the_validator_refuses_broken_objects(breakage):
    kind, break_it = breakage
    manifests = kueue.kueue_manifests(resolve(loader.load(ROOT / "examples/p6e-gb200-eks.yaml").spec))
    manifest = copy.deepcopy(next(m for m in manifests if m["kind"] == kind))
    break_it(manifest)
    with pytest.raises(jsonschema.ValidationError):
        validate(manifest)


def test_a_compute_domain_without_its_channel_is_refused():
    manifest = kubernetes.compute_domain_manifest("smoke", namespace="training")
    del manifest["spec"]["channel"]
    with pytest.raises(jsonschema.ValidationError):
        validate(manifest)


# --- the kits' kinds: MPIJob, PyTorchJob, LeaderWorkerSet (hand-written, minimal) ----------------

def pod(name: str, **resources: int) -> dict:
    container: dict = {"name": name, "image": "public.ecr.aws/example/nccl-tests:2.19.6"}
    if resources:
        container["resources"] = {"limits": dict(resources)}
    return {"spec": {"containers": [container]}}


def mpi_job() -> dict:
    return {"apiVersion": charts.MPIJOB_API, "kind": "MPIJob",
            "metadata": {"name": "nccl", "namespace": "training", "labels": {kueue.QUEUE_NAME_LABEL: "q"}},
            "spec": {"slotsPerWorker": 8, "runPolicy": {"cleanPodPolicy": "Running"},
                     "mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": pod("launcher")},
                                         "Worker": {"replicas": 2, "template": pod(
                                             "worker", **{"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 16})}}}}


def pytorch_job() -> dict:
    return {"apiVersion": charts.PYTORCHJOB_API, "kind": "PyTorchJob",
            "metadata": {"name": "smoke", "namespace": "training", "labels": {kueue.QUEUE_NAME_LABEL: "q"}},
            "spec": {"nprocPerNode": "8", "pytorchReplicaSpecs": {
                role: {"replicas": 1, "template": pod("pytorch", **{"nvidia.com/gpu": 8})}
                for role in ("Master", "Worker")}}}


def leader_worker_set() -> dict:
    return {"apiVersion": charts.LWS_API, "kind": "LeaderWorkerSet",
            "metadata": {"name": "serve", "namespace": "training", "labels": {kueue.QUEUE_NAME_LABEL: "q"}},
            "spec": {"replicas": 1, "startupPolicy": "LeaderCreated",
                     "leaderWorkerTemplate": {"size": 2, "leaderTemplate": pod("leader", **{"nvidia.com/gpu": 8}),
                                              "workerTemplate": pod("worker", **{"nvidia.com/gpu": 8})}}}


KIT_KINDS = {"MPIJob": mpi_job, "PyTorchJob": pytorch_job, "LeaderWorkerSet": leader_worker_set}


@pytest.mark.parametrize("kind", KIT_KINDS)
def test_the_kits_kinds_validate(kind):
    validate(KIT_KINDS[kind]())


@pytest.mark.parametrize("kind, break_it", [
    ("MPIJob", lambda m: m["spec"].pop("mpiReplicaSpecs")),
    ("MPIJob", lambda m: m["spec"].__setitem__("mpiImplementation", "LAM")),
    ("MPIJob", lambda m: m["spec"]["mpiReplicaSpecs"]["Worker"].__setitem__("replicas", "two")),
    ("PyTorchJob", lambda m: m["spec"].pop("pytorchReplicaSpecs")),
    ("PyTorchJob", lambda m: m["spec"].__setitem__("nprocPerNode", 8)),  # a string in kubeflow.org/v1
    ("LeaderWorkerSet", lambda m: m["spec"]["leaderWorkerTemplate"].pop("workerTemplate")),
    ("LeaderWorkerSet", lambda m: m["spec"]["leaderWorkerTemplate"].__setitem__("size", "2")),
    ("LeaderWorkerSet", lambda m: m["spec"].__setitem__("startupPolicy", "Eventually")),
])
def test_broken_kit_objects_are_refused(kind, break_it):
    manifest = KIT_KINDS[kind]()
    break_it(manifest)
    with pytest.raises(jsonschema.ValidationError):
        validate(manifest)


@pytest.mark.parametrize("kind", KIT_KINDS)
def test_the_kits_kinds_are_namespaced(kind):
    manifest = KIT_KINDS[kind]()
    del manifest["metadata"]["namespace"]
    with pytest.raises(AssertionError):
        validate(manifest)
