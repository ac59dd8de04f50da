"""Replaces the cluster's nodes that its node health check drained for a hardware fault
(fmcluster_cdk/constructs/compute/node_replacer.py; the nodes' sender:
fmcluster/node/scripts/boot/programs/request-replacement.sh).

A node whose jobs have ended asks, with one SQS message {cluster, node, instance_id, fault, text,
at}; this function, run by EventBridge every few minutes (its runs never overlap: a minute at most,
never retried), decides for each request and acts:

- refused: the message is not one, names another cluster, or the instance is not one of the
  cluster's (EC2: tag fmcluster:cluster=CLUSTER and running; HyperPod: ListClusterNodes);
- kept: the node is in a Capacity Block (HyperPod: a training plan's reserved capacity of the node's
  type, training_plans.plan_window) that ends within BLOCK_GUARD_MINUTES: a new instance would not be
  ready before EC2 ends the block;
- deferred: MAX_REPLACING replacements started within WINDOW_MINUTES (the ledger, one SSM
  parameter): the message stays in the queue (hidden until a place frees up), nothing else;
- replaced: PLANE hyperpod-slurm: SageMaker BatchReplaceClusterNodes (new hardware, same
  configuration; it destroys the instance's volumes);
- kept, on PLANE pcs: AWS PCS documents no way to replace the instance of a static node (its minimum
  count) before its own instance health checks (repairAction REPLACE, Slurm 26.05: in the PCS API,
  not yet in CloudFormation). Terminating the instance and hoping PCS launches another for the same
  Slurm node, and clears the drain, is written nowhere, so the function does not: the node stays
  drained for a person, and the decision is logged. (A dynamic node never asks: the node powers it
  down through Slurm, node-health.sh.)

Several requests for one instance count as one. Every decision is one JSON line in the function's
log (node, instance, fault, text, requested_at, decided_at, action, why) and every replacement the
metric fmcluster/NodesReplaced{Cluster, Fault}; a message is deleted once decided, never when deferred.

Environment: CLUSTER, PLANE (pcs | hyperpod-slurm), QUEUE_URL, LEDGER_PARAMETER, MAX_REPLACING,
WINDOW_MINUTES, BLOCK_GUARD_MINUTES, BATCH (messages a run reads, at most), TRAINING_PLANS (HyperPod:
JSON {instance group: training plan ARN}).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from training_plans import plan_window  # this function's code holds it (the asset's root, on sys.path)

CLUSTER_TAG = "fmcluster:cluster"  # fmcluster.facts.naming.CLUSTER_TAG
NAMESPACE = "fmcluster"
METRIC = "NodesReplaced"
PCS, HYPERPOD = "pcs", "hyperpod-slurm"
REPLACED, DEFERRED, KEPT, REFUSED = "replaced", "deferred", "kept", "refused"
SQS_BATCH = 10  # ReceiveMessage's MaxNumberOfMessages, at most
VISIBILITY_SECONDS = 300  # a received message stays hidden this long while the run decides
MAX_VISIBILITY_SECONDS = 12 * 3600  # SQS's limit on a message's visibility timeout
FIELDS = ("cluster", "node", "instance_id", "fault", "text", "at")
PCS_STATIC = ("a static AWS PCS node: PCS documents no replacement of its instance before its instance health "
              "checks (Slurm 26.05), so it stays drained for a person")


@dataclass
class Request:
    """One node's request (the message's body), with the messages that carry it."""

    cluster: str
    node: str
    instance_id: str
    fault: str
    text: str
    at: str
    receipts: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.instance_id or f"node:{self.node}"


def parse(body: str) -> Optional[Request]:
    """The request in a message body, or None when it is not one."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or not all(isinstance(data.get(k, ""), str) for k in FIELDS):
        return None
    if not data.get("cluster") or not (data.get("instance_id") or data.get("node")):
        return None
    return Request(**{k: data.get(k, "") for k in FIELDS})


def pruned(ledger: list[dict[str, str]], now: datetime, window: timedelta) -> list[dict[str, str]]:
    """The ledger's replacements that started within `window` of `now`."""
    return [e for e in ledger if now - datetime.fromisoformat(e["at"]) < window]


def decide(request: Request, cluster: str, member: tuple[bool, str], block_end: Optional[datetime],
           ledger: list[dict[str, str]], now: datetime, *, max_replacing: int, window: timedelta,
           guard: timedelta) -> tuple[str, str]:
    """The action for one request and why: the pure rule (membership, block, limit)."""
    if request.cluster != cluster:
        return REFUSED, f"the request names cluster {request.cluster!r}, not {cluster!r}"
    known, why = member
    if not known:
        return REFUSED, why
    earlier = next((e for e in ledger if e["instance"] == request.instance_id), None)
    if earlier is not None:
        return REFUSED, f"already being replaced since {earlier['at']}"
    if block_end is not None and block_end - now <= guard:
        return KEPT, f"block ends at {block_end:%Y-%m-%d %H:%MZ}: not replaced in its last " \
                     f"{int(guard.total_seconds() // 60)} minutes"
    if len(ledger) >= max_replacing:
        return DEFERRED, f"{len(ledger)} replacements started within {int(window.total_seconds() // 60)} " \
                         f"minutes (at most {max_replacing})"
    return REPLACED, why


def defer_seconds(ledger: list[dict[str, str]], now: datetime, window: timedelta) -> int:
    """How long a deferred message stays hidden: until the oldest replacement leaves the window."""
    oldest = min((datetime.fromisoformat(e["at"]) for e in ledger), default=now)
    seconds = int((oldest + window - now).total_seconds()) + 1
    return max(60, min(seconds, MAX_VISIBILITY_SECONDS))


# --- what the cloud says ---------------------------------------------------------------------------

def ec2_member(ec2: Any, request: Request, cluster: str) -> tuple[tuple[bool, str], Optional[str]]:
    """(is the instance the cluster's and running, why), and its capacity reservation (or None)."""
    if not request.instance_id:
        return (False, "the request names no instance"), None
    try:
        found = ec2.describe_instances(InstanceIds=[request.instance_id])["Reservations"]
    except ec2.exceptions.ClientError as exc:  # InvalidInstanceID.NotFound / .Malformed
        return (False, f"no such instance: {exc.response['Error']['Code']}"), None
    instances = [i for r in found for i in r.get("Instances", [])]
    if not instances:
        return (False, "no such instance"), None
    instance = instances[0]
    tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
    if tags.get(CLUSTER_TAG) != cluster:
        return (False, f"instance of cluster {tags.get(CLUSTER_TAG)!r}, not {cluster!r}"), None
    state = instance.get("State", {}).get("Name", "unknown")
    if state != "running":
        return (False, f"instance is {state}"), None
    return (True, "the cluster's running instance"), instance.get("CapacityReservationId")


def block_end(ec2: Any, reservation_id: Optional[str]) -> Optional[datetime]:
    """The end of the Capacity Block `reservation_id` (None: not a Capacity Block, or no end)."""
    if not reservation_id:
        return None
    found = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])["CapacityReservations"]
    if not found or found[0].get("ReservationType") != "capacity-block":
        return None
    return found[0].get("EndDate")


def hyperpod_nodes(sagemaker: Any, cluster: str) -> list[dict[str, Any]]:
    pages = sagemaker.get_paginator("list_cluster_nodes").paginate(ClusterName=cluster)
    return [node for page in pages for node in page.get("ClusterNodeSummaries", [])]


def hyperpod_member(nodes: list[dict[str, Any]], request: Request) -> tuple[tuple[bool, str], Optional[dict]]:
    """The cluster's node of the request (by instance id, else by its host name), and why."""
    node = next((n for n in nodes if request.instance_id and n.get("InstanceId") == request.instance_id), None)
    if node is None and not request.instance_id:
        node = next((n for n in nodes if request.node and n.get("PrivateDnsHostname", "").split(".")[0]
                     == request.node.split(".")[0]), None)
    if node is None:
        return (False, "not a node of the cluster (ListClusterNodes)"), None
    status = node.get("InstanceStatus", {}).get("Status", "unknown")
    if status != "Running":
        return (False, f"node is {status}"), None
    return (True, "the cluster's running node"), node


def plan_end(sagemaker: Any, plans: dict[str, str], node: dict[str, Any], now: datetime) -> Optional[datetime]:
    """The end of the training plan's window the node runs in (its instance group's plan, the node's
    instance type: training_plans.plan_window, as the nodes read it): `now` where none of its type
    holds now (a gap, the plan over or failed: a new instance would not run); None: no plan."""
    arn = plans.get(node.get("InstanceGroupName", ""))
    if not arn:
        return None
    plan = sagemaker.describe_training_plan(TrainingPlanName=arn.rsplit("/", 1)[-1])
    state, end = plan_window(plan, node.get("InstanceType", ""), now)
    return end if state == "active" and end is not None else now


def load_ledger(ssm: Any, name: str) -> list[dict[str, str]]:
    try:
        value = ssm.get_parameter(Name=name)["Parameter"]["Value"]
    except ssm.exceptions.ParameterNotFound:
        return []
    try:
        return list(json.loads(value).get("replacing", []))
    except (ValueError, AttributeError):
        return []


def save_ledger(ssm: Any, name: str, ledger: list[dict[str, str]]) -> None:
    ssm.put_parameter(Name=name, Value=json.dumps({"replacing": ledger}, separators=(",", ":")),
                      Type="String", Overwrite=True)


def replace(clients: dict[str, Any], plane: str, cluster: str, instance_id: str) -> tuple[str, str]:
    """Start the replacement: (REPLACED, how), or DEFERRED (the service refused for now: the next
    run asks again) or REFUSED (no such node), with why."""
    if plane == PCS:
        return KEPT, PCS_STATIC
    client = clients["sagemaker"]
    try:
        answer = client.batch_replace_cluster_nodes(ClusterName=cluster, NodeIds=[instance_id])
    except client.exceptions.ClientError as exc:
        return DEFERRED, f"{exc.response['Error']['Code']}: {exc.response['Error'].get('Message', '')}"
    failed = answer.get("Failed", [])
    if failed:
        code = failed[0].get("ErrorCode", "")
        why = f"BatchReplaceClusterNodes: {code}: {failed[0].get('Message', '')}"
        return (REFUSED if code == "InstanceIdNotFound" else DEFERRED), why
    return REPLACED, "SageMaker BatchReplaceClusterNodes"


def receive(sqs: Any, queue_url: str, most: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while len(messages) < most:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=min(SQS_BATCH, most - len(messages)),
                                  VisibilityTimeout=VISIBILITY_SECONDS, WaitTimeSeconds=0).get("Messages", [])
        if not got:
            break
        messages += got
    return messages


def record(request: Request, action: str, why: str, now: datetime, requests: int) -> dict[str, Any]:
    return {"record": "node-replacement", "cluster": request.cluster, "node": request.node,
            "instance": request.instance_id, "fault": request.fault, "text": request.text,
            "requested_at": request.at, "decided_at": now.isoformat(timespec="seconds"), "action": action,
            "why": why, "requests": requests}


def run(clients: dict[str, Any], env: dict[str, str], now: datetime) -> list[dict[str, Any]]:
    """One pass over the queue: the decisions, in the order they were made."""
    cluster, plane, queue_url = env["CLUSTER"], env["PLANE"], env["QUEUE_URL"]
    window, guard = timedelta(minutes=int(env["WINDOW_MINUTES"])), timedelta(minutes=int(env["BLOCK_GUARD_MINUTES"]))
    max_replacing, ledger_name = int(env["MAX_REPLACING"]), env["LEDGER_PARAMETER"]
    sqs = clients["sqs"]
    requests: dict[str, Request] = {}
    decisions: list[dict[str, Any]] = []
    for message in receive(sqs, queue_url, int(env.get("BATCH", "50"))):
        request = parse(message.get("Body", ""))
        if request is None:
            decisions.append({"record": "node-replacement", "cluster": cluster, "action": REFUSED,
                              "why": "not a replacement request", "decided_at": now.isoformat(timespec="seconds"),
                              "body": message.get("Body", "")[:500]})
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            continue
        requests.setdefault(request.key, request).receipts.append(message["ReceiptHandle"])
    if not requests:
        return decisions
    ledger = pruned(load_ledger(clients["ssm"], ledger_name), now, window)
    nodes = hyperpod_nodes(clients["sagemaker"], cluster) if plane == HYPERPOD else []
    plans = json.loads(env.get("TRAINING_PLANS") or "{}")
    for request in requests.values():
        end: Optional[datetime] = None
        if request.cluster != cluster:
            member: tuple[bool, str] = (False, "another cluster")
        elif plane == PCS:
            member, reservation = ec2_member(clients["ec2"], request, cluster)
            end = block_end(clients["ec2"], reservation) if member[0] else None
        else:
            member, node = hyperpod_member(nodes, request)
            if node is not None:
                request.instance_id = request.instance_id or node["InstanceId"]
                end = plan_end(clients["sagemaker"], plans, node, now) if member[0] else None
        action, why = decide(request, cluster, member, end, ledger, now, max_replacing=max_replacing,
                             window=window, guard=guard)
        if action == REPLACED:
            action, why = replace(clients, plane, cluster, request.instance_id)
            if action == REPLACED:
                ledger.append({"instance": request.instance_id, "node": request.node, "fault": request.fault,
                               "at": now.isoformat(timespec="seconds")})
                save_ledger(clients["ssm"], ledger_name, ledger)
                clients["cloudwatch"].put_metric_data(Namespace=NAMESPACE, MetricData=[{
                    "MetricName": METRIC, "Value": 1, "Unit": "Count", "Timestamp": now,
                    "Dimensions": [{"Name": "Cluster", "Value": cluster},
                                   {"Name": "Fault", "Value": request.fault or "unknown"}]}])
        if action == DEFERRED:
            hidden = defer_seconds(ledger, now, window) if len(ledger) >= max_replacing else VISIBILITY_SECONDS
            for receipt in request.receipts:
                sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=receipt, VisibilityTimeout=hidden)
        else:
            for receipt in request.receipts:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=receipt)
        decisions.append(record(request, action, why, now, len(request.receipts)))
    return decisions


def handler(event: dict[str, Any], context: Any, clients: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    if clients is None:
        import boto3

        clients = {name: boto3.client(name) for name in ("sqs", "ec2", "ssm", "cloudwatch", "sagemaker")}
    decisions = run(clients, dict(os.environ), datetime.now(timezone.utc))
    for decision in decisions:
        print(json.dumps(decision, default=str))
    counts: dict[str, int] = {}
    for decision in decisions:
        counts[decision["action"]] = counts.get(decision["action"], 0) + 1
    return {"decisions": len(decisions), **counts}
