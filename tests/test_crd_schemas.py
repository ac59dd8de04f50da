"""The custom resources fmcluster writes, validated against the CRDs' own schemas.

tests/data/crds/ holds the openAPIV3Schema of each CRD version fmcluster writes, taken from the
release it pins (each file's `$comment` says which: kubernetes-sigs/kueue v0.18.3, the chart
fmcluster.kubernetes.KUEUE installs; NVIDIA/k8s-dra-driver-gpu v25.8.0, DRA_DRIVER's). The Kueue
objects of every Kubernetes example and the ComputeDomain of a job are checked with a JSON Schema
validator (jsonschema; the OpenAPI extensions `x-kubernetes-*`, CEL rules among them, are not
evaluated: tests/test_eks_stack.py checks the Topology's CEL rules by hand). A test also holds the
pinned versions to the files, so that a chart bump without new schemas fails here.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from fmcluster import kubernetes, loader
from fmcluster.model import resolve

ROOT = Path(__file__).resolve().parent.parent
CRDS = ROOT / "tests" / "data" / "crds"
KUBERNETES_EXAMPLES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "examples").glob("*.yaml")
                             if loader.load(p).spec.orchestrator.control_plane.scheduler == "kubernetes")


def crds() -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> the CRD file."""
    found = {}
    for path in sorted(CRDS.glob("*.json")):
        crd = json.loads(path.read_text())
        found[(f"{crd['group']}/{crd['version']}", crd["kind"])] = crd
    return found


def validate(manifest: dict) -> None:
    crd = crds()[(manifest["apiVersion"], manifest["kind"])]
    jsonschema.Draft7Validator(crd["schema"]).validate(manifest)
    namespaced = crd["scope"] == "Namespaced"
    assert ("namespace" in manifest["metadata"]) == namespaced, manifest["metadata"]


def test_the_schemas_are_of_the_pinned_releases():
    comments = {name: crd["$comment"] for name, crd in crds().items()}
    assert kubernetes.KUEUE_API == "kueue.x-k8s.io/v1beta2"
    assert all(f"kubernetes-sigs/kueue v{kubernetes.KUEUE.version} " in c for (api, _), c in comments.items()
               if api == kubernetes.KUEUE_API)
    (dra,) = [c for (api, _), c in comments.items() if api == kubernetes.COMPUTE_DOMAIN_API]
    assert f"NVIDIA/k8s-dra-driver-gpu v{kubernetes.DRA_DRIVER.version} " in dra


def test_every_kubernetes_example_is_covered():
    assert {"examples/p5en-eks.yaml", "examples/p5-hyperpod-eks.yaml", "examples/p6e-gb200-eks.yaml"} <= set(
        KUBERNETES_EXAMPLES)


@pytest.mark.parametrize("example", KUBERNETES_EXAMPLES)
def test_kueue_objects_match_their_crds(example):
    manifests = kubernetes.kueue_manifests(resolve(loader.load(ROOT / example).spec))
    kinds = [m["kind"] for m in manifests]
    assert kinds.count("ClusterQueue") == 1 and kinds.count("LocalQueue") == 1 and "ResourceFlavor" in kinds
    for manifest in manifests:
        validate(manifest)


def test_the_ultraserver_example_has_its_topology_named_by_its_flavor():
    manifests = kubernetes.kueue_manifests(resolve(loader.load(ROOT / "examples/p6e-gb200-eks.yaml").spec))
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
    manifests = kubernetes.kueue_manifests(resolve(loader.load(ROOT / "examples/p6e-gb200-eks.yaml").spec))
    manifest = copy.deepcopy(next(m for m in manifests if m["kind"] == kind))
    break_it(manifest)
    with pytest.raises(jsonschema.ValidationError):
        validate(manifest)


def test_a_compute_domain_without_its_channel_is_refused():
    manifest = kubernetes.compute_domain_manifest("smoke", namespace="training")
    del manifest["spec"]["channel"]
    with pytest.raises(jsonschema.ValidationError):
        validate(manifest)
