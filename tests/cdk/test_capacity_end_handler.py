"""The capacity-end function (fmcluster_cdk/constructs/compute/handlers/capacity_end): its decisions as
pure functions of the capacity, the clock and the objects it reads, and the function against a
Kubernetes API in memory (tests/support/fake_kubernetes.py: schemas, authorization by the
ClusterRole fmcluster applies, merge patches with resourceVersion preconditions, the Eviction API's
answers, Kueue's stop of a deactivated workload) and EC2 / SageMaker answers in their service
models' shapes (botocore's Stubber). No test reads the clock: each passes `now`."""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, HTTPServer

import boto3
import pytest
from botocore.stub import Stubber

from fmcluster.kubernetes import capacity_end as end_model
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from tests.support import fake_kubernetes as fake
from tests.support import lambda_handlers, training_plans
from tests.support.clock import frozen_at
from tests.support.paths import EXAMPLES_DIR, ROOT
from tests.support.training_plans import plan, reserved

HANDLER = ROOT / "fmcluster_cdk/constructs/compute/handlers/capacity_end/index.py"
handler = lambda_handlers.load(HANDLER, "capacity_end_handler")

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
RID = "cr-0123456789abcdef0"
TAINT = {"key": "fmcluster.dev/capacity-end", "value": "gpu", "effect": "NoSchedule"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
ENV = {"CLUSTER": "p5en-eks", "GROUP": "gpu", "FLAVOR": "gpu", "NODE_LABEL": "fmcluster.dev/node-group",
       "TAINT_KEY": "fmcluster.dev/capacity-end", "SIGNAL_MINUTES": "60", "RESERVATION": RID}
SETTINGS = handler.settings_of(ENV)
OURS = {"fmcluster.dev/capacity-end": "gpu"}


def rules() -> list[dict]:
    """The ClusterRole's rules fmcluster applies to the p5en-eks example (its gpu group's flavor)."""
    (role, _binding) = end_model.rbac_manifests(resolve(loader.load(EXAMPLES_DIR / "p5en-eks.yaml").spec))
    return role["rules"]


RULES = rules()


# --- the decisions ------------------------------------------------------------------------------

@pytest.mark.parametrize("state, left, expected", [
    ("active", timedelta(days=2), "open"), ("active", timedelta(minutes=61), "open"),
    ("active", timedelta(minutes=60), "ending"), ("active", timedelta(minutes=10), "ending"),
    ("active", None, "open"), ("scheduled", timedelta(days=2), "waiting"),
    ("payment-pending", timedelta(days=2), "waiting"), ("expired", None, "ending"),
    ("cancelled", timedelta(days=1), "ending"), ("not found", None, "ending")])
def test_the_phase_follows_the_capacity_and_the_clock(state, left, expected):
    """SIGNAL_MINUTES before the end (here 60: the scaler's 45 and end_signal_minutes' 15) it ends."""
    current, why = handler.phase(state, NOW + left if left else None, NOW, 60)
    assert current == expected
    if expected == "ending" and state == "active":
        assert why == f"the capacity ends at {NOW + left:%Y-%m-%d %H:%MZ}: signalled 60 minutes before"


def test_a_taint_is_added_once_and_removed_by_its_key():
    assert handler.tainted([GPU_TAINT], TAINT, True) == [GPU_TAINT, TAINT]
    assert handler.tainted([TAINT, GPU_TAINT], TAINT, True) is None  # as wanted, wherever it is
    assert handler.tainted([GPU_TAINT, {**TAINT, "value": "other"}], TAINT, True) == [GPU_TAINT, TAINT]
    assert handler.tainted([TAINT, GPU_TAINT], TAINT, False) == [GPU_TAINT]
    assert handler.tainted([{**TAINT, "value": "old-block"}], TAINT, False) == []
    assert handler.tainted([GPU_TAINT], TAINT, False) is None
    assert handler.tainted([{**TAINT, "effect": "NoExecute"}], TAINT, False) is None  # not ours


def summary(workload: dict, flavor_tolerations: tuple = ()) -> dict:
    return handler._workload_summary(workload, TAINT, list(flavor_tolerations))


def test_workloads_admitted_on_the_flavor_are_requeued_at_the_end():
    workloads = [summary(w) for w in (
        fake.workload("on-gpu", "gpu"), fake.workload("on-cpu", "cpu"), fake.workload("pending", None),
        fake.workload("done", "gpu", finished=True), fake.workload("held", "gpu", active=False),
        fake.workload("stopping", "gpu", active=False, labels=OURS),
        fake.workload("released", None, active=False, labels=OURS),
        fake.workload("resumed", "cpu", labels=OURS),
        fake.workload("ours-done", None, active=False, labels=OURS, finished=True))]
    assert handler.requeued(workloads, SETTINGS, closing=True) == {
        "deactivate": [("default", "on-gpu")], "reactivate": [("default", "released")],
        "let_go": [("default", "resumed"), ("default", "ours-done")], "stopping": [("default", "stopping")],
        "tolerates": [], "hold": [], "held": []}
    # while the flavor is open nothing is deactivated, but what was is still reactivated
    assert handler.requeued(workloads, SETTINGS, closing=False)["deactivate"] == []
    assert handler.requeued(workloads, SETTINGS, closing=False)["reactivate"] == [("default", "released")]


SIGNAL = NOW + timedelta(hours=2)  # the end 3 hours ahead, signalled 60 minutes before
M = timedelta(minutes=1)


@pytest.mark.parametrize("declared, admitted, past, expected", [
    (None, NOW, None, False),  # no declared run time: nothing to go by
    (7200, NOW, None, False), (7201, NOW, None, True),  # from its admission, up to the signal and past it
    (7200 + 600, NOW - 10 * M, None, False),  # admitted 10 minutes ago: Kueue counts from then
    (7200 + 601, NOW - 10 * M, None, True),
    (7200 + 600, NOW, 600, False), (7200 + 601, NOW, 600, True),  # its past admissions count as well
    (7200, None, None, False), (7201, None, None, True),  # quota reserved, not admitted yet: from now
])
def test_a_workload_overruns_the_signal_as_kueue_counts_its_time(declared, admitted, past, expected):
    """Kueue deactivates a workload once maximumExecutionTimeSeconds - accumulatedPastExecutionTimeSeconds
    have passed since its Admitted condition's transition (workload_controller.go, reconcileMaxExecutionTime)."""
    workload = fake.workload("w", "gpu", max_seconds=declared, past_seconds=past,
                             admitted=stamp(admitted) if admitted else None)
    assert handler.overruns(summary(workload), SIGNAL, NOW) is expected


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_workload_that_would_not_finish_before_the_signal_is_held_back():
    """While the flavor is open: a workload just admitted there whose declared run reaches past the
    signal is deactivated (hold); one that fits, one that declares nothing, one that has run longer
    than STARTING (left to the signal), one that tolerates the taint and one on another flavor are
    left; ours, released, stay inactive while they would still overrun (held), else are reactivated."""
    workloads = [summary(w) for w in (
        fake.workload("fits", "gpu", max_seconds=3600), fake.workload("long", "gpu", max_seconds=4 * 3600),
        fake.workload("undeclared", "gpu"),
        fake.workload("checks-pending", "gpu", max_seconds=4 * 3600, admitted=None),
        fake.workload("running", "gpu", max_seconds=8 * 3600, admitted=stamp(NOW - 11 * M)),
        fake.workload("just-started", "gpu", max_seconds=8 * 3600, admitted=stamp(NOW - 10 * M)),
        fake.workload("anywhere", "gpu", max_seconds=4 * 3600, tolerations=[{"operator": "Exists"}]),
        fake.workload("on-cpu", "cpu", max_seconds=4 * 3600),
        fake.workload("waiting", None, active=False, labels=OURS, max_seconds=4 * 3600),
        fake.workload("fits-now", None, active=False, labels=OURS, max_seconds=3600, past_seconds=60),
        fake.workload("requeued", None, active=False, labels=OURS))]
    plan = handler.requeued(workloads, SETTINGS, False, SIGNAL, NOW)
    assert plan == {"deactivate": [], "reactivate": [("default", "fits-now"), ("default", "requeued")],
                    "let_go": [], "stopping": [], "tolerates": [],
                    "hold": [("default", "long"), ("default", "checks-pending"), ("default", "just-started")],
                    "held": [("default", "waiting")]}
    # closing (the signal, or before the capacity starts), the gate is off: every one is requeued
    closing = handler.requeued(workloads, SETTINGS, True, SIGNAL, NOW)
    assert closing["hold"] == closing["held"] == []
    assert ("default", "waiting") in closing["reactivate"] and ("default", "long") in closing["deactivate"]
    # without an end, nothing is held back
    assert handler.requeued(workloads, SETTINGS, False)["hold"] == []


def test_what_the_eviction_api_stops():
    kept = {("default", "w1")}
    assert handler.evictable(fake.pod("plain", "n1"), kept, TAINT)
    assert handler.evictable(fake.pod("other-workload", "n1", workload="w2"), kept, TAINT)
    assert not handler.evictable(fake.pod("left-to-kueue", "n1", workload="w1"), kept, TAINT)
    assert handler.evictable(fake.pod("same-name-elsewhere", "n1", namespace="team-a", workload="w1"), kept, TAINT)
    assert not handler.evictable(fake.pod("agent", "n1", owner="DaemonSet"), kept, TAINT)
    assert not handler.evictable(fake.pod("done", "n1", phase="Succeeded"), kept, TAINT)
    terminating = fake.pod("going", "n1")
    terminating["metadata"]["deletionTimestamp"] = fake.TIME
    assert not handler.evictable(terminating, kept, TAINT)
    mirror = fake.pod("static", "n1")
    mirror["metadata"]["annotations"] = {handler.MIRROR_ANNOTATION: "abc"}
    assert not handler.evictable(mirror, kept, TAINT)
    # a pod that tolerates the taint would be placed on the node again: it stays, as a DaemonSet's does
    assert not handler.evictable(fake.pod("anywhere", "n1", tolerations=[{"operator": "Exists"}]), kept, TAINT)
    assert handler.evictable(fake.pod("gpu-only", "n1", tolerations=[GPU_TOLERATION]), kept, TAINT)


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@pytest.mark.parametrize("toleration, expected", [
    ({"operator": "Exists"}, True),  # no key, Exists: every taint
    ({"operator": "Exists", "effect": "NoSchedule"}, True), ({"operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "fmcluster.dev/capacity-end", "operator": "Exists"}, True),
    ({"key": "fmcluster.dev/capacity-end", "value": "gpu"}, True),  # Equal, the default
    ({"key": "fmcluster.dev/capacity-end", "operator": "Equal", "value": "other"}, False),
    ({"key": "fmcluster.dev/capacity-end", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}, True),
    (GPU_TOLERATION, False), ({"key": "fmcluster.dev/capacity-end", "operator": "Lt", "value": "9"}, False),
])
def test_a_toleration_is_weighed_as_kubernetes_weighs_it(toleration, expected):
    """k8s.io/api core/v1 Toleration.ToleratesTaint, which the scheduler and Kueue's flavor assigner use."""
    assert handler.tolerates([GPU_TOLERATION, toleration], TAINT) is expected


def test_a_workload_that_tolerates_the_taint_stays_on_the_flavor():
    """Its pod set assigned the flavor tolerates the taint (or the flavor's own tolerations do): Kueue
    would admit it there again once reactivated, so it is not requeued."""
    anywhere = fake.workload("anywhere", "gpu", tolerations=[{"operator": "Exists"}])
    plain = fake.workload("plain", "gpu", tolerations=[GPU_TOLERATION])
    assert summary(anywhere)["tolerant"] == ["main"] and summary(plain)["tolerant"] == []
    assert summary(plain, [{"key": "fmcluster.dev/capacity-end", "operator": "Exists"}])["tolerant"] == ["main"]
    assert handler.requeued([summary(anywhere), summary(plain)], SETTINGS, closing=True) == {
        "deactivate": [("default", "plain")], "reactivate": [], "let_go": [], "stopping": [],
        "tolerates": [("default", "anywhere")], "hold": [], "held": []}
    # a pod set that tolerates it, but on another flavor, does not keep the workload here
    elsewhere = fake.workload("elsewhere", "gpu", tolerations=[{"operator": "Exists"}])
    elsewhere["status"]["admission"]["podSetAssignments"][0]["name"] = "other"
    assert handler.requeued([summary(elsewhere)], SETTINGS, closing=True)["deactivate"] == [("default", "elsewhere")]


# --- the function against the API ---------------------------------------------------------------

def cluster(*extra: dict) -> fake.FakeKubernetes:
    """Two gpu nodes and a cpu node; the gpu and cpu flavors; a job admitted on gpu with a pod on
    each gpu node; a plain pod, a DaemonSet's and a job pod on the cpu node."""
    api = fake.FakeKubernetes(handler.KubeError, RULES)
    api.add(fake.node("gpu-1", "gpu", [GPU_TAINT]), fake.node("gpu-2", "gpu", [GPU_TAINT]), fake.node("cpu-1", "cpu"),
            fake.flavor("gpu"), fake.flavor("cpu"), fake.workload("train", "gpu"), fake.workload("prep", "cpu"),
            fake.pod("train-0", "gpu-1", workload="train"), fake.pod("train-1", "gpu-2", workload="train"),
            fake.pod("notebook", "gpu-1"), fake.pod("exporter-gpu-1", "gpu-1", owner="DaemonSet"),
            fake.pod("prep-0", "cpu-1", workload="prep"), *extra)
    return api


def run(api: fake.FakeKubernetes, left: timedelta | None = timedelta(minutes=50), state: str = "active") -> dict:
    return handler.reconcile(handler.Kube(api.send), SETTINGS, state, NOW + left if left else None, NOW)


def writes(api: fake.FakeKubernetes) -> list[tuple[str, str]]:
    return [c for c in api.calls if c[0] != "GET"]


def test_an_open_capacity_changes_nothing():
    api = cluster()
    result = run(api, timedelta(days=2))
    assert (result["phase"], result["nodes"]) == ("open", 2) and writes(api) == []
    # with the end known, every workload is read (a job that would not finish is held back)
    assert ("GET", "/apis/kueue.x-k8s.io/v1beta2/workloads?limit=100") in api.calls
    # without it (no EndDate), the workloads are asked for by the label only
    api.calls.clear()
    assert run(api, None)["phase"] == "open" and writes(api) == []
    assert ("GET", "/apis/kueue.x-k8s.io/v1beta2/workloads?limit=100&labelSelector=fmcluster.dev%2Fcapacity-end%3Dgpu"
            ) in api.calls


def test_the_end_taints_closes_requeues_and_evicts():
    api = cluster()
    result = run(api)
    assert result["phase"] == "ending"
    assert result["flavor closed"] == ["gpu"] and result["tainted"] == ["gpu-1", "gpu-2"]
    assert api.taints("Node", "gpu-1") == [GPU_TAINT, TAINT] and api.taints("Node", "cpu-1") == []
    assert api.taints("ResourceFlavor", "gpu") == [TAINT] and api.taints("ResourceFlavor", "cpu") == []
    train = api.get("Workload", "train", "default")
    assert train["spec"]["active"] is False and train["metadata"]["labels"] == OURS
    assert api.get("Workload", "prep", "default")["spec"]["active"] is True
    # the job's pods are Kueue's to stop (the job suspended); the plain pod is evicted; the DaemonSet's stays
    assert result["evicted"] == ["default/notebook"]
    assert not api.get("Pod", "train-0", "default")["metadata"].get("deletionTimestamp")
    assert api.get("Pod", "notebook", "default")["metadata"]["deletionGracePeriodSeconds"] == 600
    assert not api.get("Pod", "exporter-gpu-1", "default")["metadata"].get("deletionTimestamp")

    # Kueue stops the job and releases its quota: the next run reactivates the workload
    api.kueue_stops()
    assert api.get("Pod", "train-0", "default")["metadata"]["deletionTimestamp"]
    second = run(api, timedelta(minutes=48))
    assert second["reactivated"] == ["default/train"] and "deactivated" not in second and "evicted" not in second
    train = api.get("Workload", "train", "default")
    assert train["spec"]["active"] is True and not train["metadata"].get("labels")
    api.kubelet_removes()
    third = run(api, timedelta(minutes=46))
    assert [k for k in third if k not in ("phase", "why", "nodes")] == []  # nothing left to do


def test_what_tolerates_the_taint_is_neither_requeued_nor_evicted():
    """A workload whose pods tolerate every taint, and a pod that tolerates this one: requeued or
    evicted, they would be placed on the ending nodes again, and stopped again at every run."""
    anywhere = [{"operator": "Exists"}]
    api = cluster(fake.workload("anywhere", "gpu", tolerations=anywhere),
                  fake.pod("anywhere-0", "gpu-2", workload="anywhere", tolerations=anywhere),
                  fake.pod("agent", "gpu-2", owner="ReplicaSet",
                           tolerations=[{"key": "fmcluster.dev/capacity-end", "operator": "Exists"}]))
    result = run(api)
    assert result["deactivated"] == ["default/train"] and result["tolerates"] == ["default/anywhere"]
    assert result["evicted"] == ["default/notebook"]
    assert api.get("Workload", "anywhere", "default")["spec"]["active"] is True
    assert not any(api.get("Pod", name, "default")["metadata"].get("deletionTimestamp")
                   for name in ("anywhere-0", "agent"))
    api.kueue_stops()
    second = run(api, timedelta(minutes=48))
    assert "deactivated" not in second and "evicted" not in second and second["tolerates"] == ["default/anywhere"]


def test_a_stopping_workloads_pods_are_left_to_kueue():
    """Deactivated by an earlier run, its quota still held: its pods are not evicted beside Kueue."""
    api = cluster()
    run(api)
    assert "evicted" not in run(api, timedelta(minutes=48))
    assert not api.get("Pod", "train-1", "default")["metadata"].get("deletionTimestamp")


def test_a_disruption_budget_holds_a_pod_until_a_later_run():
    api = cluster()
    api.budget.add(("default", "notebook"))
    assert run(api)["blocked"] == ["default/notebook"]
    assert not api.get("Pod", "notebook", "default")["metadata"].get("deletionTimestamp")
    api.budget.clear()
    assert run(api, timedelta(minutes=48))["evicted"] == ["default/notebook"]


def test_a_pod_gone_before_its_eviction_is_no_error():
    api = cluster()
    send = api.send

    def vanishing(method, path, body, content_type):
        if path.endswith("/pods/notebook/eviction"):
            del api.objects[("Pod", "default", "notebook")]
        return send(method, path, body, content_type)

    result = handler.reconcile(handler.Kube(vanishing), SETTINGS, "active", NOW + timedelta(minutes=50), NOW)
    assert result["gone"] == ["default/notebook"] and "errors" not in result


def racing(api: fake.FakeKubernetes, path: str):
    """The API, where another writer changes the object at `path` just before each patch of it."""
    send = api.send

    def send_racing(method, sent_path, body, content_type):
        if method == "PATCH" and sent_path == path:
            kind, name = ("Node", path.rsplit("/", 1)[-1]) if "/nodes/" in path else ("ResourceFlavor", "gpu")
            api.touch(kind, name)
        return send(method, sent_path, body, content_type)

    return handler.Kube(send_racing)


def test_a_concurrent_change_of_a_node_is_retried_on_the_next_run():
    """The patch carries the resourceVersion read: another writer in between answers 409. The node's
    pods wait for its taint: evicted from an untainted node, they could be placed there again."""
    api = cluster(fake.pod("shell", "gpu-2", owner="ReplicaSet"))
    result = handler.reconcile(racing(api, "/api/v1/nodes/gpu-2"), SETTINGS, "active", NOW + timedelta(minutes=50),
                               NOW)
    assert result["conflict"] == ["gpu-2"] and result["tainted"] == ["gpu-1"]
    assert api.taints("Node", "gpu-2") == [GPU_TAINT]
    assert result["evicted"] == ["default/notebook"]  # on gpu-1; not shell, on gpu-2
    assert not api.get("Pod", "shell", "default")["metadata"].get("deletionTimestamp")
    second = run(api, timedelta(minutes=48))
    assert second["tainted"] == ["gpu-2"] and second["evicted"] == ["default/shell"]


def test_a_workload_is_reactivated_once_the_flavor_is_closed():
    """While the flavor's patch answers 409 it is still open: a workload reactivated then could be
    admitted onto it again, so it waits for a run that closes it."""
    api = cluster()
    flavor = racing(api, "/apis/kueue.x-k8s.io/v1beta2/resourceflavors/gpu")
    first = handler.reconcile(flavor, SETTINGS, "active", NOW + timedelta(minutes=50), NOW)
    assert first["conflict"] == ["gpu"] and first["deactivated"] == ["default/train"]
    api.kueue_stops()
    second = handler.reconcile(flavor, SETTINGS, "active", NOW + timedelta(minutes=48), NOW)
    assert "reactivated" not in second and second["kept until the flavor closes"] == ["default/train"]
    assert api.get("Workload", "train", "default")["spec"]["active"] is False
    assert api.taints("ResourceFlavor", "gpu") == []
    third = run(api, timedelta(minutes=46))
    assert third["flavor closed"] == ["gpu"] and third["reactivated"] == ["default/train"]


def test_an_extension_undoes_the_end():
    """The end moves later (fmcluster capacity extend): the taints go, the requeued work is let go."""
    api = cluster()
    run(api)
    api.kueue_stops()
    result = run(api, timedelta(days=1))
    assert result["phase"] == "open" and result["flavor opened"] == ["gpu"]
    assert result["untainted"] == ["gpu-1", "gpu-2"] and result["reactivated"] == ["default/train"]
    assert api.taints("Node", "gpu-1") == [GPU_TAINT] and api.taints("ResourceFlavor", "gpu") == []


def test_before_the_capacity_starts_the_flavor_is_closed_and_nothing_else_changes():
    api = cluster()
    del api.objects[("Workload", "default", "train")]  # nothing admitted on the flavor
    result = run(api, timedelta(days=3), state="scheduled")
    assert result["phase"] == "waiting" and result["flavor closed"] == ["gpu"]
    assert [w for w in writes(api) if "/resourceflavors/" not in w[1]] == []
    assert run(api, timedelta(days=3), state="active")["flavor opened"] == ["gpu"]


def test_a_workload_admitted_before_the_capacity_starts_is_requeued():
    """The manifests applied again open the flavor until the next run closes it: Kueue may admit a
    workload there meanwhile, whose pods would wait for the block (days, maybe) holding its quota.
    It is requeued; no node is tainted and no pod evicted (there are none yet)."""
    api = cluster()
    result = run(api, timedelta(days=3), state="scheduled")
    assert result["phase"] == "waiting" and result["deactivated"] == ["default/train"]
    assert "tainted" not in result and "evicted" not in result
    api.kueue_stops()
    assert run(api, timedelta(days=3), state="scheduled")["reactivated"] == ["default/train"]
    assert api.taints("ResourceFlavor", "gpu") == [TAINT] and api.taints("Node", "gpu-1") == [GPU_TAINT]


def test_every_workload_is_read_page_by_page(monkeypatch):
    monkeypatch.setattr(handler, "PAGE", 2)
    api = cluster(*(fake.workload(f"job-{i}", "gpu") for i in range(5)))
    assert len(run(api)["deactivated"]) == 6


def test_a_call_that_fails_otherwise_fails_the_run():
    """A 500 (a pod under two disruption budgets, which the Eviction API refuses) is kept, the rest
    done, and the handler fails after its log line: the function's Errors metric counts it."""
    api = cluster()
    send = api.send

    def two_budgets(method, path, body, content_type):
        if path.endswith("/pods/notebook/eviction"):
            raise handler.KubeError(500, "This pod has more than one PodDisruptionBudget")
        return send(method, path, body, content_type)

    result = handler.reconcile(handler.Kube(two_budgets), SETTINGS, "active", NOW + timedelta(minutes=50), NOW)
    assert result["errors"] == ["evicted default/notebook: 500: This pod has more than one PodDisruptionBudget"]
    assert result["deactivated"] == ["default/train"]


def gated(api: fake.FakeKubernetes, left: timedelta, now: datetime = NOW) -> dict:
    return handler.reconcile(handler.Kube(api.send), SETTINGS, "active", now + left, now)


HOLD_REASON = ("held back from flavor gpu: its maximum execution time runs past 2026-12-01 14:00Z, "
               "the capacity's end signal")


def test_a_job_that_would_not_finish_is_held_back_until_the_signal():
    """The end 3 hours ahead (the signal in 2): a job admitted on the flavor that declares 4 hours is
    held back (deactivated, labelled and annotated why) and stays so, its quota released, until the
    signal closes the flavor; then it is reactivated, for another flavor or an extension. One that
    declares 1 hour, and one that declares nothing, run on; at the signal they are requeued as ever."""
    api = cluster(fake.workload("fits", "gpu", max_seconds=3600), fake.workload("long", "gpu", max_seconds=4 * 3600),
                  fake.pod("long-0", "gpu-1", workload="long"))
    first = gated(api, timedelta(hours=3))
    assert first["phase"] == "open" and first["held back"] == ["default/long"]
    assert "deactivated" not in first and "evicted" not in first
    long = api.get("Workload", "long", "default")
    assert long["spec"]["active"] is False and long["metadata"]["labels"] == OURS
    assert long["metadata"]["annotations"] == {"fmcluster.dev/capacity-end": HOLD_REASON}
    assert all(api.get("Workload", name, "default")["spec"]["active"] for name in ("fits", "train"))
    assert api.taints("ResourceFlavor", "gpu") == [] and api.taints("Node", "gpu-1") == [GPU_TAINT]

    api.kueue_stops()  # Kueue stops the job (its pods terminate) and releases its quota
    assert api.get("Pod", "long-0", "default")["metadata"]["deletionTimestamp"]
    written = len(writes(api))
    for minutes in (2, 4, 60):  # it would still run past the signal: kept inactive, not admitted again
        result = gated(api, timedelta(hours=3) - minutes * M, NOW + minutes * M)
        assert result["kept held back"] == ["default/long"] and "reactivated" not in result
        assert len(writes(api)) == written  # nothing written
    assert api.get("Workload", "long", "default")["spec"]["active"] is False

    # the signal: the flavor closes, the others are requeued, the held-back one let go into the queue
    at_signal = gated(api, timedelta(minutes=60), NOW + 2 * timedelta(hours=1))
    assert at_signal["phase"] == "ending" and at_signal["flavor closed"] == ["gpu"]
    assert at_signal["reactivated"] == ["default/long"]
    assert at_signal["deactivated"] == ["default/fits", "default/train"]
    long = api.get("Workload", "long", "default")
    assert long["spec"]["active"] is True and not long["metadata"].get("labels")
    assert not long["metadata"].get("annotations")


def test_a_held_back_job_goes_when_an_extension_makes_room():
    api = cluster(fake.workload("long", "gpu", max_seconds=4 * 3600))
    assert gated(api, timedelta(hours=3))["held back"] == ["default/long"]
    api.kueue_stops()
    assert gated(api, timedelta(hours=3) - 2 * M, NOW + 2 * M)["kept held back"] == ["default/long"]
    extended = gated(api, timedelta(days=1), NOW + 4 * M)  # the block extended by a day
    assert extended["reactivated"] == ["default/long"] and "held back" not in extended
    assert api.get("Workload", "long", "default")["spec"]["active"] is True


def test_a_long_running_or_undeclared_job_is_left_to_the_signal():
    """Admitted more than STARTING ago (it ran before this function saw it), or declaring no run
    time: not held back; the signal stops it with its grace period as before."""
    api = cluster(fake.workload("running", "gpu", max_seconds=8 * 3600, admitted=stamp(NOW - 30 * M)))
    result = gated(api, timedelta(hours=3))
    assert result["phase"] == "open" and "held back" not in result and writes(api) == []


def test_the_cluster_role_is_all_it_needs_and_is_enforced():
    """Every call above is authorized by the ClusterRole's rules; a flavor it does not name, or a
    change of a pod, is refused."""
    api = cluster(fake.flavor("other"))
    kube = handler.Kube(api.send)
    for refused_call in (lambda: kube.get("/apis/kueue.x-k8s.io/v1beta2/resourceflavors/other"),
                         lambda: kube.patch("/api/v1/namespaces/default/pods/notebook", {"metadata": {}}),
                         lambda: kube.get("/api/v1/namespaces/default/pods/notebook")):
        with pytest.raises(handler.KubeError) as refused:
            refused_call()
        assert refused.value.status == 403


# --- the handler: the capacity's end from EC2 or SageMaker ---------------------------------------

@pytest.fixture
def ec2():
    client = boto3.client("ec2", region_name="us-east-2", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def test_the_handler_reads_the_blocks_end_at_every_run(ec2, monkeypatch, capsys):
    client, stub = ec2
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(handler, "datetime", frozen_at(NOW))  # the handler reads the clock
    stub.add_response("describe_capacity_reservations", {"CapacityReservations": [
        {"CapacityReservationId": RID, "State": "active", "EndDate": NOW + timedelta(minutes=50)}]},
        {"CapacityReservationIds": [RID]})
    api = cluster()
    result = handler.handler({"detail-type": "Capacity Block Reservation Expiration Warning"}, None,
                             clients={"ec2": client}, kube=handler.Kube(api.send))
    assert (result["phase"], result["capacity"], result["trigger"]) == (
        "ending", RID, "Capacity Block Reservation Expiration Warning")
    assert json.loads(capsys.readouterr().out)["tainted"] == ["gpu-1", "gpu-2"]


def test_the_handler_fails_after_its_log_line_when_a_call_failed(ec2, monkeypatch, capsys):
    client, stub = ec2
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(handler, "datetime", frozen_at(NOW))
    stub.add_response("describe_capacity_reservations", {"CapacityReservations": [
        {"CapacityReservationId": RID, "State": "expired"}]}, {"CapacityReservationIds": [RID]})
    api = cluster()
    send = api.send

    def failing(method, path, body, content_type):
        if method == "POST":
            raise handler.KubeError(500, "internal error")
        return send(method, path, body, content_type)

    with pytest.raises(RuntimeError, match="1 Kubernetes calls failed: evicted default/notebook: 500"):
        handler.handler({}, None, clients={"ec2": client}, kube=handler.Kube(failing))
    assert json.loads(capsys.readouterr().out)["phase"] == "ending"


PLAN = training_plans.ARN


H = timedelta(hours=1)


def test_a_training_plan_is_read_from_sagemaker(monkeypatch):
    """HyperPod EKS: DescribeTrainingPlan (which takes the ARN) gives the plan's Status and its
    reserved capacities."""
    env = {**{k: v for k, v in ENV.items() if k != "RESERVATION"}, "TRAINING_PLAN": PLAN,
           "PLAN_INSTANCE_TYPE": "ml.p5.48xlarge", "SIGNAL_MINUTES": "45"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("RESERVATION", raising=False)
    monkeypatch.setattr(handler, "datetime", frozen_at(NOW))
    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_response("describe_training_plan", plan("Active", reserved(-H, timedelta(minutes=40))),
                          {"TrainingPlanName": PLAN})
        api = cluster()
        result = handler.handler({}, None, clients={"sagemaker": client}, kube=handler.Kube(api.send))
    assert (result["phase"], result["capacity"]) == ("ending", PLAN)
    assert result["why"] == "the capacity ends at 2026-12-01 12:40Z: signalled 45 minutes before"


# --- signing in, and the wire ---------------------------------------------------------------------

def test_the_token_is_aws_iam_authenticators(monkeypatch):
    """k8s-aws-v1. + unpadded URL-safe base64 of a presigned GetCallerIdentity URL of the region's STS
    endpoint, signed with the x-k8s-aws-id header (pkg/token/token.go)."""
    monkeypatch.setattr("botocore.auth.get_current_datetime",
                        lambda remove_tzinfo=True: NOW.replace(tzinfo=None))
    session = boto3.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name="us-east-2")
    token = handler.eks_token(session, "p5en-eks", "us-east-2")
    assert token.startswith("k8s-aws-v1.") and "=" not in token and len(token) < 4096
    encoded = token.removeprefix("k8s-aws-v1.")
    url = urllib.parse.urlsplit(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode())
    query = dict(urllib.parse.parse_qsl(url.query))
    assert (url.scheme, url.netloc, url.path) == ("https", "sts.us-east-2.amazonaws.com", "/")
    assert query["Action"] == "GetCallerIdentity" and query["Version"] == "2011-06-15"
    assert query["X-Amz-SignedHeaders"] == "host;x-k8s-aws-id" and query["X-Amz-Expires"] == "60"
    assert query["X-Amz-Date"] == "20261201T120000Z"
    assert query["X-Amz-Credential"] == "AKIDEXAMPLE/20261201/us-east-2/sts/aws4_request"


class Recorder(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def log_message(self, *args):
        pass

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        Recorder.seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                              "body": json.loads(self.rfile.read(length)) if length else None})
        status = 429 if self.path.endswith("/eviction") else 200
        body = {"kind": "Status", "message": "Cannot evict pod as it would violate the pod's disruption budget.",
                "code": 429} if status == 429 else {"items": []}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PATCH = do_POST = _answer


def test_the_transport_sends_the_token_and_the_patch_type_and_reads_the_status():
    server = HTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        kube = handler.Kube(handler.https_transport(f"http://127.0.0.1:{server.server_port}", "k8s-aws-v1.abc", ""))
        assert list(kube.items("/api/v1/nodes", labelSelector="fmcluster.dev/node-group=gpu")) == []
        kube.patch("/api/v1/nodes/gpu-1", {"spec": {"taints": []}})
        with pytest.raises(handler.KubeError) as blocked:
            kube.evict("default", "notebook")
    finally:
        server.shutdown()
    assert blocked.value.status == 429 and "disruption budget" in str(blocked.value)
    listed, patched, evicted = Recorder.seen[-3:]
    assert listed["path"] == "/api/v1/nodes?limit=100&labelSelector=fmcluster.dev%2Fnode-group%3Dgpu"
    assert listed["headers"]["Authorization"] == "Bearer k8s-aws-v1.abc"
    assert patched["headers"]["Content-Type"] == "application/merge-patch+json"
    assert evicted["body"] == {"apiVersion": "policy/v1", "kind": "Eviction",
                               "metadata": {"name": "notebook", "namespace": "default"}}
    fake.validate(evicted["body"])
