"""The end of a node group's reserved capacity, handled on Kubernetes
(fmcluster_cdk/constructs/compute/capacity_end.py): before the instances go, the pods on them get
their termination signal with their grace period, Kueue admits nothing more onto the group's
flavor, and the workloads that ran there are requeued.

Run by EventBridge every few minutes (and on a Capacity Block's own events), it reads the end of the
capacity at every run, so that an extension moves everything with it: a Capacity Block's `State`
and `EndDate` (EC2 DescribeCapacityReservations, RESERVATION) or a training plan's `Status` and the
end of its reserved capacity of the group's instance type (SageMaker DescribeTrainingPlan,
TRAINING_PLAN: training_plans.plan_window). SIGNAL = the end - SIGNAL_MINUTES. The cluster is then reconciled,
through the Kubernetes API, with one of three phases:

- open (the capacity is active and SIGNAL is ahead): no taint TAINT_KEY on the group's nodes (label
  NODE_LABEL=GROUP) nor in the ResourceFlavor FLAVOR's spec.nodeTaints; a job that would not finish
  is held back, as Slurm's reservation holds it: a workload Kueue admitted there at most STARTING
  ago that declares its run time (spec.maximumExecutionTimeSeconds, its job's label
  kueue.x-k8s.io/max-exec-time-seconds) and would run past SIGNAL is deactivated as in step 3, its
  annotation TAINT_KEY saying why;
- waiting (the capacity has not started): the flavor carries the taint, so that Kueue admits nothing
  onto nodes that do not exist yet (it reopens when the capacity is active), and a workload Kueue
  admitted there all the same (while a re-apply of the manifests opened the flavor) is requeued as
  in step 3 below: its pods could not run before the capacity starts;
- ending (from SIGNAL, or the capacity is over):
  1. each node of the group gets the taint TAINT_KEY=GROUP:NoSchedule: nothing new is placed there;
  2. so does the flavor: Kueue assigns it to no workload whose pods do not tolerate the taint, and
     retries its inadmissible workloads whenever the flavor changes;
  3. each Kueue workload with quota reserved on the flavor is deactivated (spec.active false, label
     TAINT_KEY=GROUP): Kueue evicts it (reason Deactivated) and stops its job, whose pods get their
     grace period, and clears its requeuing back-off;
  4. every other pod on the nodes (not a DaemonSet's or a static pod, not terminating or finished)
     is evicted through the Eviction API (policy/v1): a PodDisruptionBudget that allows no
     disruption answers 429 and the pod is tried again on the next run; a pod gone answers 404; the
     pod gets SIGTERM, then its terminationGracePeriodSeconds.

What tolerates the taint stays, as a DaemonSet's pods do: a workload a pod set of which, assigned
the flavor, tolerates it (with the flavor's own tolerations, as Kueue's flavor assigner weighs them)
would be admitted there again once reactivated, and a pod that tolerates it would be placed there
again by its controller; requeued or evicted, they would be at every run until the nodes go.

In every phase, a workload this function deactivated whose quota Kueue has released is reactivated
(spec.active true, the label removed): Kueue requeues it (Requeued, reason Reactivated), in the
order of its creation, for a flavor it can still use; not, while the flavor is open, one that would
still run past SIGNAL (Kueue would admit it there again). Node and flavor patches carry the object's
resourceVersion: a concurrent change answers 409 and the next run tries again; until then the
node's pods are not evicted, nor, while the flavor should be closed, a workload reactivated.

The function signs in as its own IAM role, with the token aws-iam-authenticator makes (a presigned
STS GetCallerIdentity request with the signed header x-k8s-aws-id: CLUSTER), and reaches the API
server from the cluster's VPC; the role's EKS access entry puts it in a Kubernetes group whose
ClusterRole allows exactly these calls (fmcluster/kubernetes/capacity_end.py).

Environment: CLUSTER, GROUP, FLAVOR, NODE_LABEL, TAINT_KEY, SIGNAL_MINUTES, and RESERVATION (cr-...)
or TRAINING_PLAN (its ARN) with PLAN_INSTANCE_TYPE (the group's, as the plan names it: ml.TYPE).
"""

from __future__ import annotations

import base64
import functools
import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterator, Optional

from training_plans import plan_window  # this function's code holds it (the asset's root, on sys.path)

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"  # Kueue's, on the pods of an admitted workload
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"  # a static pod's mirror: the API cannot evict it
MERGE_PATCH = "application/merge-patch+json"
PAGE = 100  # workloads a list page: each carries its pod templates
WAITING = ("scheduled", "payment-pending", "pending", "assessing", "delayed")  # not started yet
OPEN, WAITING_PHASE, ENDING = "open", "waiting", "ending"
STARTING = timedelta(minutes=10)  # admitted this recently, a workload is still held back (5 runs)


@dataclass(frozen=True)
class Settings:
    group: str
    flavor: str
    node_label: str
    taint_key: str
    signal_minutes: int

    @property
    def taint(self) -> dict[str, str]:
        return {"key": self.taint_key, "value": self.group, "effect": "NoSchedule"}


def settings_of(env: dict[str, str]) -> Settings:
    return Settings(env["GROUP"], env["FLAVOR"], env["NODE_LABEL"], env["TAINT_KEY"], int(env["SIGNAL_MINUTES"]))


# --- decisions: pure functions of the capacity, the clock and the objects read --------------------

def phase(state: str, end: Optional[datetime], now: datetime, minutes: int) -> tuple[str, str]:
    """The phase for a capacity in `state` ("active", or EC2's other states in lower case) ending at
    `end`, and why."""
    if state in WAITING:
        return WAITING_PHASE, f"the capacity is {state}"
    if state != "active":
        return ENDING, f"the capacity is {state}"
    if end is not None and end - now <= timedelta(minutes=minutes):
        return ENDING, f"the capacity ends at {end:%Y-%m-%d %H:%MZ}: signalled {minutes} minutes before"
    return OPEN, "the capacity is active" + (f" until {end:%Y-%m-%d %H:%MZ}" if end else "")


def tainted(taints: list[dict[str, Any]], taint: dict[str, str], wanted: bool) -> Optional[list[dict[str, Any]]]:
    """The taints with `taint` present (once, as given) or absent (by its key and effect) as
    `wanted`; None where they already are as wanted."""
    same = [t for t in taints if (t.get("key"), t.get("effect")) == (taint["key"], taint["effect"])]
    if (wanted and same == [taint]) or (not wanted and not same):
        return None
    others = [t for t in taints if t not in same]
    return others + [dict(taint)] if wanted else others


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, str]) -> bool:
    """One of `tolerations` tolerates `taint`, as Kubernetes decides it (k8s.io/api core/v1
    Toleration.ToleratesTaint): its effect, if any, is the taint's; its key, if any, is the taint's
    (none, with Exists: every key); Exists takes any value, Equal (the default) the taint's."""
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint["effect"]:
            continue
        if toleration.get("key") and toleration["key"] != taint["key"]:
            continue
        operator = toleration.get("operator") or "Equal"
        if operator == "Exists" or (operator == "Equal" and toleration.get("value", "") == taint["value"]):
            return True
    return False


def _conditions(workload: dict[str, Any]) -> dict[str, str]:
    return {c.get("type", ""): c.get("status", "") for c in workload.get("status", {}).get("conditions", [])}


def key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata", {})
    return meta.get("namespace", ""), meta.get("name", "")


def admitted_on(workload: dict[str, Any], flavor: str) -> bool:
    """Quota reserved for the workload on `flavor` (status.admission's pod set assignments), and
    the workload active and not finished."""
    conditions = _conditions(workload)
    if conditions.get("QuotaReserved") != "True" or conditions.get("Finished") == "True":
        return False
    if workload.get("spec", {}).get("active") is False:
        return False
    assignments = (workload.get("status", {}).get("admission") or {}).get("podSetAssignments", [])
    return any(flavor in (a.get("flavors") or {}).values() for a in assignments)


def admitted_at(workload: dict[str, Any]) -> Optional[datetime]:
    """When Kueue admitted the workload (its Admitted condition's lastTransitionTime); None: not."""
    for c in workload.get("status", {}).get("conditions", []):
        if c.get("type") == "Admitted" and c.get("status") == "True" and c.get("lastTransitionTime"):
            return datetime.fromisoformat(c["lastTransitionTime"].replace("Z", "+00:00"))
    return None


def overruns(workload: dict[str, Any], signal: datetime, now: datetime) -> bool:
    """The workload declares a maximum execution time and Kueue would let it run past `signal`: Kueue
    deactivates it once its time admitted, since its Admitted condition's transition (from `now`, not
    admitted yet) and in its past admissions (status.accumulatedPastExecutionTimeSeconds), exceeds it
    (pkg/controller/core/workload_controller.go: reconcileMaxExecutionTime)."""
    declared = workload.get("spec", {}).get("maximumExecutionTimeSeconds")
    if not declared:
        return False
    left = timedelta(seconds=declared - (workload.get("status", {}).get("accumulatedPastExecutionTimeSeconds") or 0))
    return (admitted_at(workload) or now) + left > signal


def tolerated_on(workload: dict[str, Any], flavor: str) -> bool:
    """A pod set of the workload assigned `flavor` tolerates the taint (`tolerant`: the pod sets that
    do, _workload_summary): Kueue would assign it the closed flavor again."""
    tolerant = set(workload.get("tolerant", ()))
    assignments = (workload.get("status", {}).get("admission") or {}).get("podSetAssignments", [])
    return any(a.get("name") in tolerant and flavor in (a.get("flavors") or {}).values() for a in assignments)


def ours(workload: dict[str, Any], settings: Settings) -> bool:
    return workload.get("metadata", {}).get("labels", {}).get(settings.taint_key) == settings.group


def released(workload: dict[str, Any]) -> bool:
    """Kueue has released the quota of a deactivated workload: its job is stopped."""
    return _conditions(workload).get("QuotaReserved") != "True"


def requeued(workloads: list[dict[str, Any]], settings: Settings, closing: bool, signal: Optional[datetime] = None,
             now: Optional[datetime] = None) -> dict[str, list[tuple[str, str]]]:
    """The workloads to deactivate (admitted on the flavor, while it closes), to reactivate (ours,
    deactivated and released) and to let go of (ours, but made active again by someone else, or
    finished: the label only is removed); `stopping`: ours, deactivated, Kueue still stopping them;
    `tolerates`: admitted on the flavor, but tolerating its taint there (tolerated_on), left alone.
    While the flavor is open, before `signal` (at `now`): `hold`, to deactivate, a workload on the
    flavor, admitted at most STARTING ago, that overruns the signal (a workload running longer is
    left to the signal); `held`: ours, released, not reactivated while it would."""
    out: dict[str, list[tuple[str, str]]] = {"deactivate": [], "reactivate": [], "let_go": [], "stopping": [],
                                             "tolerates": [], "hold": [], "held": []}
    gate = (signal, now) if signal is not None and now is not None and not closing else None
    for workload in workloads:
        if ours(workload, settings):
            inactive = workload.get("spec", {}).get("active") is False
            if not inactive or _conditions(workload).get("Finished") == "True":
                out["let_go"].append(key(workload))
            elif not released(workload):
                out["stopping"].append(key(workload))
            else:
                out["held" if gate and overruns(workload, *gate) else "reactivate"].append(key(workload))
        elif not admitted_on(workload, settings.flavor) or tolerated_on(workload, settings.flavor) and not closing:
            continue
        elif closing:
            out["tolerates" if tolerated_on(workload, settings.flavor) else "deactivate"].append(key(workload))
        elif gate and (admitted_at(workload) or gate[1]) >= gate[1] - STARTING and overruns(workload, *gate):
            out["hold"].append(key(workload))
    return out


def evictable(pod: dict[str, Any], left_alone: set[tuple[str, str]], taint: dict[str, str]) -> bool:
    """A pod that the Eviction API stops: not a DaemonSet's (its controller would place it again) or
    a static pod's mirror, not terminating or finished, not tolerating `taint` (it would be placed
    there again), not of a workload Kueue is stopping or that is left where it is."""
    meta = pod.get("metadata", {})
    if meta.get("deletionTimestamp") or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
        return False
    if MIRROR_ANNOTATION in meta.get("annotations", {}):
        return False
    if any(owner.get("kind") == "DaemonSet" for owner in meta.get("ownerReferences", [])):
        return False
    if tolerates(pod.get("spec", {}).get("tolerations") or [], taint):
        return False
    workload = meta.get("annotations", {}).get(WORKLOAD_ANNOTATION)
    return not (workload and (meta.get("namespace", ""), workload) in left_alone)


# --- the Kubernetes API ----------------------------------------------------------------------------

class KubeError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


Transport = Callable[[str, str, Optional[dict[str, Any]], str], Any]


def eks_token(session: Any, cluster: str, region: str) -> str:
    """A bearer token for the EKS cluster, as aws-iam-authenticator makes it (pkg/token/token.go):
    "k8s-aws-v1." and the unpadded URL-safe base64 of a presigned STS GetCallerIdentity URL whose
    signed headers include x-k8s-aws-id: CLUSTER. EKS accepts it for 15 minutes."""
    from botocore.signers import RequestSigner

    sts = session.client("sts", region_name=region)
    signer = RequestSigner(sts.meta.service_model.service_id, region, "sts", "v4", session.get_credentials(),
                           sts.meta.events)
    url = signer.generate_presigned_url(
        {"method": "GET", "url": f"{sts.meta.endpoint_url}/?Action=GetCallerIdentity&Version=2011-06-15",
         "body": {}, "headers": {"x-k8s-aws-id": cluster}, "context": {}},
        region_name=region, expires_in=60, operation_name="")
    return "k8s-aws-v1." + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def https_transport(endpoint: str, token: str, ca_data: str) -> Transport:
    """Requests to the API server at `endpoint`, trusting only the cluster's CA (base64 PEM, as EKS
    DescribeCluster gives it)."""
    context = ssl.create_default_context(cadata=base64.b64decode(ca_data).decode()) if ca_data else None

    def send(method: str, path: str, body: Optional[dict[str, Any]], content_type: str) -> Any:
        request = urllib.request.Request(
            endpoint + path, method=method, data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json",
                     **({"Content-Type": content_type} if body is not None else {})})
        try:
            with urllib.request.urlopen(request, timeout=20, context=context) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            text = error.read().decode(errors="replace")
            try:
                message = json.loads(text).get("message", text)
            except ValueError:
                message = text
            raise KubeError(error.code, message[:300]) from None

    return send


class Kube:
    """The calls the function makes, over a transport (the API server, or a test's fake)."""

    def __init__(self, send: Transport) -> None:
        self.send = send

    def get(self, path: str, **query: str) -> Any:
        return self.send("GET", path + ("?" + urllib.parse.urlencode(query) if query else ""), None, "")

    def patch(self, path: str, body: dict[str, Any]) -> Any:
        return self.send("PATCH", path, body, MERGE_PATCH)

    def items(self, path: str, **query: str) -> Iterator[dict[str, Any]]:
        """Every item of a list, page by page (limit and continue)."""
        token = ""
        while True:
            page = self.get(path, limit=str(PAGE), **query, **({"continue": token} if token else {}))
            yield from page.get("items", [])
            token = page.get("metadata", {}).get("continue", "")
            if not token:
                return

    def evict(self, namespace: str, name: str) -> None:
        self.send("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
                  {"apiVersion": "policy/v1", "kind": "Eviction",
                   "metadata": {"name": name, "namespace": namespace}}, "application/json")


def _workload_summary(workload: dict[str, Any], taint: dict[str, str],
                      flavor_tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    """What the decisions read of a workload (a page of them carries whole pod templates), with the
    names of its pod sets that tolerate `taint`, their own tolerations and the flavor's together
    (Kueue's flavor assigner: pkg/scheduler/flavorassigner/flavorassigner.go, checkFlavorForPodSets)."""
    meta, spec, status = workload.get("metadata", {}), workload.get("spec", {}), workload.get("status", {})
    tolerant = [ps.get("name") for ps in spec.get("podSets", [])
                if tolerates(((ps.get("template") or {}).get("spec") or {}).get("tolerations", []) + flavor_tolerations,
                             taint)]
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "labels") if k in meta},
            "spec": {"active": spec.get("active", True), "maximumExecutionTimeSeconds":
                     spec.get("maximumExecutionTimeSeconds")}, "tolerant": tolerant,
            "status": {"conditions": status.get("conditions", []),
                       **{k: status.get(k) for k in ("admission", "accumulatedPastExecutionTimeSeconds")}}}


@dataclass
class Outcome:
    """What a run did, for its log line."""

    done: dict[str, list[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def add(self, what: str, name: str) -> None:
        self.done.setdefault(what, []).append(name)

    def attempt(self, what: str, name: str, call: Callable[[], Any]) -> bool:
        """Make a call: 429 (a disruption budget) and 409 (a concurrent change) are tried again on
        the next run, 404 is an object gone; any other error is kept (the run then fails)."""
        try:
            call()
        except KubeError as error:
            kind = {429: "blocked", 409: "conflict", 404: "gone"}.get(error.status)
            if kind is None:
                self.errors.append(f"{what} {name}: {error}")
            else:
                self.add(kind, name)
            return False
        self.add(what, name)
        return True


def _retaint(kube: Kube, outcome: Outcome, path: str, obj: dict[str, Any], taints_path: tuple[str, str],
             taint: dict[str, str], wanted: bool, what: str) -> bool:
    """Whether the object's taints are now as `wanted` (already, or patched)."""
    section, name = taints_path
    current = obj.get(section, {}).get(name) or []
    changed = tainted(current, taint, wanted)
    if changed is None:
        return True
    body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, section: {name: changed}}
    return outcome.attempt(what, obj["metadata"]["name"], lambda: kube.patch(path, body))


def reconcile(kube: Kube, settings: Settings, state: str, end: Optional[datetime], now: datetime) -> dict[str, Any]:
    """One run against the cluster; the result says the phase and what was done. What rests on a
    taint waits for a run that finds it in place (a 409 is tried again): a node's pods are evicted
    once it is tainted (else their controllers could place them there again), and, while the flavor
    should be closed, a workload is reactivated once it is (else Kueue could admit it there again)."""
    current, why = phase(state, end, now, settings.signal_minutes)
    closing, ending = current != OPEN, current == ENDING
    outcome = Outcome()
    taint = settings.taint
    flavor_path = f"{KUEUE}/resourceflavors/{settings.flavor}"
    flavor_tolerations: list[dict[str, Any]] = []
    flavor_as_wanted = True  # or gone: Kueue admits nothing onto a flavor it does not have
    try:
        flavor = kube.get(flavor_path)
    except KubeError as error:
        if error.status != 404:
            raise
        outcome.add("no flavor", settings.flavor)
    else:
        flavor_tolerations = flavor.get("spec", {}).get("tolerations") or []
        flavor_as_wanted = _retaint(kube, outcome, flavor_path, flavor, ("spec", "nodeTaints"), taint, closing,
                                    "flavor closed" if closing else "flavor opened")
    nodes = list(kube.items("/api/v1/nodes", labelSelector=f"{settings.node_label}={settings.group}"))
    held = [node for node in nodes
            if _retaint(kube, outcome, f"/api/v1/nodes/{node['metadata']['name']}", node, ("spec", "taints"), taint,
                        ending, "tainted" if ending else "untainted")]
    signal = end - timedelta(minutes=settings.signal_minutes) if end is not None and not closing else None
    selector = {} if closing or signal else {"labelSelector": f"{settings.taint_key}={settings.group}"}
    workloads = [_workload_summary(w, taint, flavor_tolerations) for w in kube.items(f"{KUEUE}/workloads", **selector)]
    plan = requeued(workloads, settings, closing, signal, now)
    for what, which in (("kept held back", "held"), ("tolerates", "tolerates")):
        for namespace, name in plan[which]:
            outcome.add(what, f"{namespace}/{name}")
    if closing and not flavor_as_wanted:
        for namespace, name in plan.pop("reactivate"):
            outcome.add("kept until the flavor closes", f"{namespace}/{name}")
        plan["reactivate"] = []
    unlabelled = {"metadata": {"labels": {settings.taint_key: None}, "annotations": {settings.taint_key: None}}}
    labelled = {"labels": {settings.taint_key: settings.group}}
    reason = {"annotations": {settings.taint_key: f"held back from flavor {settings.flavor}: its maximum execution "
                           f"time runs past {signal:%Y-%m-%d %H:%MZ}, the capacity's end signal"}} if signal else {}
    patches = (("deactivated", "deactivate", {"metadata": labelled, "spec": {"active": False}}),
               ("held back", "hold", {"metadata": {**labelled, **reason}, "spec": {"active": False}}),
               ("reactivated", "reactivate", {**unlabelled, "spec": {"active": True}}),
               ("let go", "let_go", unlabelled))
    for what, which, body in patches:
        for namespace, name in plan[which]:
            path = f"{KUEUE}/namespaces/{namespace}/workloads/{name}"
            outcome.attempt(what, f"{namespace}/{name}", functools.partial(kube.patch, path, body))
    if ending:
        left_alone = set(plan["deactivate"]) | set(plan["stopping"]) | set(plan["tolerates"])
        for node in held:
            pods = kube.items("/api/v1/pods", fieldSelector=f"spec.nodeName={node['metadata']['name']}")
            for pod in pods:
                if evictable(pod, left_alone, taint):
                    namespace, name = key(pod)
                    outcome.attempt("evicted", f"{namespace}/{name}", functools.partial(kube.evict, namespace, name))
    return {"phase": current, "why": why, "nodes": len(nodes), **outcome.done,
            **({"errors": outcome.errors} if outcome.errors else {})}


# --- the capacity's end, and the handler -----------------------------------------------------------

def capacity_of(env: dict[str, str], clients: dict[str, Any], now: datetime) -> tuple[str, Optional[datetime], str]:
    """(state in EC2's words, end, what) of the Capacity Block or the training plan."""
    if env.get("RESERVATION"):
        found: list[Any] = clients["ec2"].describe_capacity_reservations(
            CapacityReservationIds=[env["RESERVATION"]])["CapacityReservations"]
        block: dict[str, Any] = found[0] if found else {"State": "not found"}
        return block.get("State", "unknown"), block.get("EndDate"), env["RESERVATION"]
    plan: dict[str, Any] = clients["sagemaker"].describe_training_plan(TrainingPlanName=env["TRAINING_PLAN"])
    return (*plan_window(plan, env["PLAN_INSTANCE_TYPE"], now), env["TRAINING_PLAN"])


def cluster_kube(eks: Any, session: Any, cluster: str) -> Kube:
    """The cluster's API server (EKS DescribeCluster: its endpoint and CA), signed in as this role."""
    described = eks.describe_cluster(name=cluster)["cluster"]
    token = eks_token(session, cluster, eks.meta.region_name)
    return Kube(https_transport(described["endpoint"], token, described["certificateAuthority"]["data"]))


def handler(event: dict[str, Any], context: Any, clients: Optional[dict[str, Any]] = None,
            kube: Optional[Kube] = None) -> dict[str, Any]:
    env = dict(os.environ)
    if clients is None:
        import boto3

        session = boto3.Session()
        clients = {"session": session, "eks": session.client("eks"),
                   **({"ec2": session.client("ec2")} if env.get("RESERVATION") else
                      {"sagemaker": session.client("sagemaker")})}
    now = datetime.now(timezone.utc)
    state, end, capacity = capacity_of(env, clients, now)
    if kube is None:
        kube = cluster_kube(clients["eks"], clients["session"], env["CLUSTER"])
    result = {"cluster": env["CLUSTER"], "group": env["GROUP"], "capacity": capacity,
              **reconcile(kube, settings_of(env), state, end, now),
              "trigger": event.get("detail-type", "schedule")}
    print(json.dumps(result, default=str))
    if result.get("errors"):
        raise RuntimeError(f"{len(result['errors'])} Kubernetes calls failed: {result['errors'][0]}")
    return result
