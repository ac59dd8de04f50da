"""A Kubernetes API server in memory, for the capacity-end function
(fmcluster_cdk/constructs/compute/handlers/capacity_end): the calls it makes, with the semantics it
relies on. Not a test module.

- Objects are Nodes, Pods, Kueue ResourceFlavors and Workloads, each validated when stored and after
  every change: core objects against Kubernetes' OpenAPI schema (kubernetes-validate, strict), Kueue
  objects against their CRDs (tests/data/crds, kubernetes-sigs/kueue v0.18.3).
- Every request is authorized against the rules of a ClusterRole (fmcluster/kubernetes/capacity_end.py):
  a GET of one object is `get`, of a collection `list`, PATCH `patch`, the POST of an Eviction
  `create` on pods/eviction; resourceNames limit get and patch. Anything else answers 403.
- Lists take labelSelector (key=value), fieldSelector (spec.nodeName=NAME for pods), limit and
  continue. PATCH takes only application/merge-patch+json (RFC 7386; otherwise 415); a
  metadata.resourceVersion in the patch that is not the object's answers 409; each change gives the
  object a new resourceVersion.
- An Eviction (policy/v1, validated) of a pod that is gone answers 404; of a pod a disruption budget
  protects (`budget`), 429 (apiserver pkg/registry/core/pod/storage/eviction.go: checkAndDecrement);
  otherwise the pod gets a deletionTimestamp and its grace period (terminating until `kubelet_removes`).
- `kueue_stops` does what Kueue's controllers do with a deactivated workload (pkg/controller/core/
  workload_controller.go, pkg/controller/jobframework/reconciler.go): Evicted (reason Deactivated),
  the job stopped (its pods terminating), then the quota released (QuotaReserved False, no admission),
  the time it was admitted, until TIME, added to its accumulatedPastExecutionTimeSeconds.
"""

from __future__ import annotations

import copy
import json
import urllib.parse
from datetime import datetime
from typing import Any, Callable, Optional

import jsonschema
import kubernetes_validate

from tests.support.crds import crds

KUBERNETES = "1.35.0"  # the newest version the examples run, and kubernetes-validate has
KUEUE = "kueue.x-k8s.io/v1beta2"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
TIME = "2026-12-01T12:00:00Z"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for name, value in patch.items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = merge_patch(result.get(name), value)
    return result


def validate(obj: dict[str, Any]) -> None:
    if obj["apiVersion"] == KUEUE:
        jsonschema.Draft7Validator(crds()[(KUEUE, obj["kind"])]["schema"]).validate(obj)
    else:
        kubernetes_validate.validate(obj, KUBERNETES, strict=True)


def condition(kind: str, status: str, reason: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": reason, "lastTransitionTime": TIME}


def node(name: str, group: str, taints: Optional[list[dict[str, str]]] = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"fmcluster.dev/node-group": group}},
            "spec": {"taints": list(taints or [])}}


def pod(name: str, node_name: str, namespace: str = "default", *, workload: str = "", owner: str = "Job",
        phase: str = "Running", tolerations: Optional[list[dict[str, Any]]] = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace,
                            "ownerReferences": [{"apiVersion": "apps/v1" if owner == "DaemonSet" else "batch/v1",
                                                 "kind": owner, "name": f"{name}-owner", "uid": f"uid-{name}",
                                                 "controller": True}]}
    if workload:
        meta["annotations"] = {WORKLOAD_ANNOTATION: workload}
    spec: dict[str, Any] = {"nodeName": node_name, "terminationGracePeriodSeconds": 600,
                            "containers": [{"name": "main", "image": "train:1"}]}
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def flavor(name: str, node_taints: Optional[list[dict[str, str]]] = None) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": {"nodeLabels": {"fmcluster.dev/node-group": name}, "nodeTaints": list(node_taints or [])}}


def workload(name: str, flavor_name: Optional[str], namespace: str = "default", *, active: bool = True,
             labels: Optional[dict[str, str]] = None, finished: bool = False,
             tolerations: Optional[list[dict[str, Any]]] = None, max_seconds: Optional[int] = None,
             admitted: Optional[str] = TIME, past_seconds: Optional[int] = None) -> dict[str, Any]:
    """A workload of one pod set (its pods' `tolerations`), with quota reserved on `flavor_name` (None:
    pending), and admitted at `admitted` (None: not yet, its admission checks pending); its declared
    maximum execution time `max_seconds` (its job's label kueue.x-k8s.io/max-exec-time-seconds), and
    the time it was admitted before (`past_seconds`, Kueue's accumulatedPastExecutionTimeSeconds)."""
    status: dict[str, Any] = {"conditions": []}
    if flavor_name is not None:
        status["admission"] = {"clusterQueue": "cluster-queue", "podSetAssignments": [
            {"name": "main", "count": 2, "flavors": {"nvidia.com/gpu": flavor_name, "cpu": flavor_name},
             "resourceUsage": {"nvidia.com/gpu": "16", "cpu": "64"}}]}
        status["conditions"] = [condition("QuotaReserved", "True", "QuotaReserved"),
                                {**condition("Admitted", "True", "Admitted"), "lastTransitionTime": admitted}
                                if admitted else condition("Admitted", "False", "UnsatisfiedChecks")]
    if past_seconds is not None:
        status["accumulatedPastExecutionTimeSeconds"] = past_seconds
    if finished:
        status["conditions"].append(condition("Finished", "True", "Succeeded"))
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    pod_spec: dict[str, Any] = {"containers": [{"name": "main", "image": "train:1",
                                                "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}
    if tolerations:
        pod_spec["tolerations"] = [dict(t) for t in tolerations]
    spec: dict[str, Any] = {"active": active, "queueName": "user-queue", "podSets": [
        {"name": "main", "count": 2, "template": {"spec": pod_spec}}]}
    if max_seconds is not None:
        spec["maximumExecutionTimeSeconds"] = max_seconds
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": meta, "spec": spec, "status": status}


class FakeKubernetes:
    """The API server; `send` is the handler's transport (method, path, body, content type)."""

    def __init__(self, error: Callable[[int, str], Exception], rules: list[dict[str, Any]]) -> None:
        self.error, self.rules = error, rules
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.version = 0
        self.budget: set[tuple[str, str]] = set()  # pods a PodDisruptionBudget keeps (429)
        self.calls: list[tuple[str, str]] = []

    # --- the store ---------------------------------------------------------------------------

    def add(self, *objects: dict[str, Any]) -> None:
        for obj in objects:
            obj = copy.deepcopy(obj)
            self._store(obj)

    def _store(self, obj: dict[str, Any]) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        validate(obj)
        meta = obj["metadata"]
        self.objects[(obj["kind"], meta.get("namespace", ""), meta["name"])] = obj

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        return self.objects[(kind, namespace, name)]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [o for (k, _, _), o in sorted(self.objects.items()) if k == kind]

    def touch(self, kind: str, name: str, namespace: str = "") -> None:
        """Someone else changed the object (a new resourceVersion)."""
        self._store(self.get(kind, name, namespace))

    # --- the API -----------------------------------------------------------------------------

    def send(self, method: str, path: str, body: Optional[dict[str, Any]], content_type: str) -> Any:
        self.calls.append((method, path))
        url = urllib.parse.urlsplit(path)
        query = dict(urllib.parse.parse_qsl(url.query))
        parts = url.path.strip("/").split("/")
        group = "" if parts[0] == "api" else parts[1]
        rest = parts[2:] if parts[0] == "api" else parts[3:]
        namespace = ""
        if rest and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        resource, name, sub = rest[0], (rest[1] if len(rest) > 1 else ""), (rest[2] if len(rest) > 2 else "")
        verb = {"GET": "get" if name else "list", "PATCH": "patch", "POST": "create"}[method]
        self._authorize(group, resource + (f"/{sub}" if sub else ""), verb, name)
        kind = {"nodes": "Node", "pods": "Pod", "resourceflavors": "ResourceFlavor", "workloads": "Workload"}[resource]
        if verb == "list":
            return self._list(kind, query)
        if sub == "eviction":
            return self._evict(namespace, name, body or {}, content_type)
        found = self.objects.get((kind, namespace, name))
        if found is None:
            raise self.error(404, f'{resource} "{name}" not found')
        if verb == "get":
            return copy.deepcopy(found)
        return self._patch(found, body or {}, content_type)

    def _authorize(self, group: str, resource: str, verb: str, name: str) -> None:
        for rule in self.rules:
            if (group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]
                    and (not rule.get("resourceNames") or name in rule["resourceNames"])):
                return
        raise self.error(403, f'cannot {verb} resource "{resource}" in API group "{group}"')

    def _list(self, kind: str, query: dict[str, str]) -> dict[str, Any]:
        items = self.of(kind)
        if "labelSelector" in query:
            label, _, value = query["labelSelector"].partition("=")
            items = [o for o in items if o["metadata"].get("labels", {}).get(label) == value]
        if "fieldSelector" in query:
            field, _, value = query["fieldSelector"].partition("=")
            assert field == "spec.nodeName", field  # the only field selector pods take here
            items = [o for o in items if o["spec"].get("nodeName") == value]
        start, limit = int(query.get("continue") or 0), int(query.get("limit") or len(items) or 1)
        page = items[start:start + limit]
        more = start + limit < len(items)
        return {"items": copy.deepcopy(page), "metadata": {"continue": str(start + limit)} if more else {}}

    def _patch(self, found: dict[str, Any], body: dict[str, Any], content_type: str) -> dict[str, Any]:
        if content_type != "application/merge-patch+json":
            raise self.error(415, f"the body of the request was in an unknown format: {content_type}")
        wanted = body.get("metadata", {}).get("resourceVersion")
        if wanted is not None and wanted != found["metadata"]["resourceVersion"]:
            raise self.error(409, "the object has been modified; please apply your changes to the latest version")
        changed = merge_patch(found, body)
        self._store(changed)
        return copy.deepcopy(changed)

    def _evict(self, namespace: str, name: str, body: dict[str, Any], content_type: str) -> dict[str, Any]:
        validate(body)
        assert content_type == "application/json" and body["metadata"] == {"name": name, "namespace": namespace}
        found = self.objects.get(("Pod", namespace, name))
        if found is None:
            raise self.error(404, f'pods "{name}" not found')
        if (namespace, name) in self.budget and not found["metadata"].get("deletionTimestamp"):
            raise self.error(429, "Cannot evict pod as it would violate the pod's disruption budget.")
        self._terminate(found)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success"}

    def _terminate(self, found: dict[str, Any]) -> None:
        changed = copy.deepcopy(found)
        changed["metadata"].setdefault("deletionTimestamp", TIME)
        changed["metadata"].setdefault("deletionGracePeriodSeconds", changed["spec"]["terminationGracePeriodSeconds"])
        self._store(changed)

    # --- the controllers ---------------------------------------------------------------------

    def kueue_stops(self) -> None:
        """Kueue evicts each deactivated workload that holds quota, stops its job (the pods terminate)
        and releases the quota."""
        for found in self.of("Workload"):
            conditions = {c["type"]: c for c in found["status"].get("conditions", [])}
            if found["spec"].get("active", True) or conditions.get("QuotaReserved", {}).get("status") != "True":
                continue
            changed = copy.deepcopy(found)
            past = found["status"].get("accumulatedPastExecutionTimeSeconds")
            if conditions.get("Admitted", {}).get("status") == "True":  # pkg/workload/admissionchecks.go
                admitted = datetime.fromisoformat(conditions["Admitted"]["lastTransitionTime"])
                past = (past or 0) + int((datetime.fromisoformat(TIME) - admitted).total_seconds())
            conditions["Evicted"] = condition("Evicted", "True", "Deactivated")
            conditions["QuotaReserved"] = condition("QuotaReserved", "False", "Pending")
            conditions["Admitted"] = condition("Admitted", "False", "NoReservation")
            conditions["Requeued"] = condition("Requeued", "False", "Deactivated")
            changed["status"] = {"conditions": list(conditions.values()),
                                 **({"accumulatedPastExecutionTimeSeconds": past} if past is not None else {})}
            self._store(changed)
            for one in self.of("Pod"):
                meta = one["metadata"]
                if (meta["namespace"], meta.get("annotations", {}).get(WORKLOAD_ANNOTATION)) == \
                        (found["metadata"]["namespace"], found["metadata"]["name"]):
                    self._terminate(one)

    def kubelet_removes(self) -> None:
        """Terminating pods are gone (their grace period over)."""
        for key in [k for k, o in self.objects.items() if k[0] == "Pod" and o["metadata"].get("deletionTimestamp")]:
            del self.objects[key]

    def taints(self, kind: str, name: str) -> list[dict[str, Any]]:
        found = self.get(kind, name)
        return found["spec"].get("taints" if kind == "Node" else "nodeTaints", [])

    def dump(self) -> str:
        return json.dumps(sorted(self.objects), indent=1)
