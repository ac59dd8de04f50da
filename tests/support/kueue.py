"""Kueue's DRA accounting (kubernetes-sigs/kueue v0.18.3), read from the manifests fmcluster writes: what
Kueue charges a job for its ResourceClaimTemplates, and a flavor's quota. Not a test module. Shared
by tests/kits/test_jobs_kubernetes.py and tests/kits/test_serving.py."""

from __future__ import annotations

from fmcluster.kubernetes import kueue


def driver_claim_template(domain: dict) -> tuple[str, list[str]]:
    """(name, DeviceClass of each device request) of the ResourceClaimTemplate NVIDIA's DRA driver
    makes for a ComputeDomain (k8s-dra-driver-gpu v25.8.0
    templates/compute-domain-workload-claim-template.tmpl.yaml: one request `channel`, `exactly`,
    of compute-domain-default-channel.nvidia.com, no count: ExactCount 1)."""
    return domain["spec"]["channel"]["resourceClaimTemplate"]["name"], [kueue.COMPUTE_DOMAIN_CHANNEL_CLASS]


def pod_sets(manifest: dict) -> list[tuple[dict, int]]:
    """(pod spec, pods) of each pod set Kueue makes of a job (an LWS: every group's leader and workers)."""
    kind, spec = manifest["kind"], manifest["spec"]
    if kind in ("MPIJob", "PyTorchJob"):
        replicas = spec.get("mpiReplicaSpecs") or spec["pytorchReplicaSpecs"]
        return [(r["template"]["spec"], r["replicas"]) for r in replicas.values()]
    if kind == "LeaderWorkerSet":
        template, groups = spec["leaderWorkerTemplate"], spec["replicas"]
        if "leaderTemplate" not in template:
            return [(template["workerTemplate"]["spec"], groups * template["size"])]
        return [(template["leaderTemplate"]["spec"], groups),
                (template["workerTemplate"]["spec"], groups * (template["size"] - 1))]
    return [(spec["template"]["spec"], spec.get("parallelism", 1))]


def dra_charge(model, documents: list[dict]) -> dict[str, int]:
    """What Kueue 0.18.3 charges the job among `documents` (its ComputeDomains beside it) for its
    ResourceClaimTemplates: each DeviceClass of a template a pod claims maps to its logical resource
    (resources.deviceClassMappings), one a device request a pod, times the pods (pkg/dra/claims.go
    GetResourceRequestsForResourceClaimTemplates; pkg/workload/workload.go). A DeviceClass that is
    not mapped makes the workload Inadmissible: an AssertionError here."""
    configuration = kueue.kueue_configuration(model) or {}
    mapped = {c: m["name"] for m in configuration.get("resources", {}).get("deviceClassMappings", [])
              for c in m["deviceClassNames"]}
    templates = dict(driver_claim_template(d) for d in documents if d["kind"] == "ComputeDomain")
    charge: dict[str, int] = {}
    for pod, pods in pod_sets(documents[-1] if documents[-1]["kind"] != "Service" else documents[-2]):
        for claim in pod.get("resourceClaims", []):
            for device_class in templates[claim["resourceClaimTemplateName"]]:
                assert device_class in mapped, f"DeviceClass {device_class} is not mapped in DRA configuration"
                charge[mapped[device_class]] = charge.get(mapped[device_class], 0) + pods
    return charge


def flavor_quota(model, flavor: str) -> dict:
    """The ClusterQueue's nominal quota of `flavor`, by resource, and its covered resources."""
    queue = next(m for m in kueue.kueue_manifests(model) if m["kind"] == "ClusterQueue")
    (group,) = queue["spec"]["resourceGroups"]
    (found,) = [f for f in group["flavors"] if f["name"] == flavor]
    assert [r["name"] for r in found["resources"]] == group["coveredResources"]
    return {r["name"]: r["nominalQuota"] for r in found["resources"]}
