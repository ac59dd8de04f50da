"""Custom resources validated against their CRDs' own schemas (tests/data/crds/, each file's `$comment`
says from which release; tests/kubernetes/test_crd_schemas.py holds them to the pins). Not a test
module. Shared by the Kubernetes, job-kit and serving-kit tests."""

from __future__ import annotations

import functools
import json

import jsonschema

from fmcluster.spec import loader
from tests.support.paths import DATA, EXAMPLES, ROOT

CRDS = DATA / "crds"
KUBERNETES_EXAMPLES = [e for e in EXAMPLES
                       if loader.load(ROOT / e).spec.orchestrator.control_plane.scheduler == "kubernetes"]


@functools.cache
def crds() -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> the CRD file (read once: the operators' files are large)."""
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
