"""Counts down to the end of each Capacity Block and training plan of a cluster
(fmcluster_cdk/constructs/observability/capacity.py): EC2 and SageMaker publish no metric of it.

Run by EventBridge every few minutes, it reads each capacity's end and puts the hours left as
the metric METRIC (namespace NAMESPACE, dimensions Cluster and Capacity), whose alarms page
a day before the end and again shortly before the instances are terminated:

- a Capacity Block (`reservation_id`): DescribeCapacityReservations' EndDate and State;
- a training plan (`training_plan`, its name): DescribeTrainingPlan's Status and the end of the
  reserved capacity of its groups' instance types (`instance_types`, ml.TYPE) that holds now, as the
  nodes read it (training_plans.plan_window): the first of them to end (of the next to start where
  none holds now).

Hours left are those to the end, 0 once it is past, and 0 for a capacity that can take no
instances any more (expired, cancelled, failed, payment-failed, not found): its alarms stay in
ALARM until the cluster points at new capacity. A reservation with no end date gets no reading.
One capacity that cannot be read stops neither the others nor their readings; the run fails
afterwards, so that the failure shows in the function's Errors metric and its log.

Environment: CLUSTER, NAMESPACE, METRIC, CAPACITIES (JSON: [{"capacity": dimension value,
"reservation_id": cr-...} or {"capacity": ..., "training_plan": NAME, "instance_types": [ml.TYPE]}]).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from typing import Any, Optional

from training_plans import plan_window  # this function's code holds it (the asset's root, on sys.path)

# States (EC2's CapacityReservationState, SageMaker's TrainingPlanStatus) whose capacity has an
# end to count to; any other has none left
COUNTING = {"active", "scheduled", "pending", "payment-pending", "assessing", "delayed", "Active", "Scheduled",
            "Pending"}
NOT_FOUND = {"InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed",
             "ResourceNotFound"}


def hours_left(end: datetime, now: datetime) -> float:
    """Hours from `now` to `end`, 0 once it is past, to the minute."""
    return max(0.0, round((end - now).total_seconds() / 3600, 2))


def _error_code(exc: Exception) -> Optional[str]:
    response = getattr(exc, "response", None)
    return response.get("Error", {}).get("Code") if isinstance(response, dict) else None


def plan_reading(plan: dict[str, Any], instance_types: list[str], now: datetime) -> tuple[str, Optional[datetime]]:
    """(state, end) of a training plan for the node groups on it: the window of each group's instance
    type (training_plans.plan_window, as the nodes read it), the first to end of those that hold now
    (the running nodes that go first), else the first to end of the others (a gap, or not started)."""
    windows = [plan_window(plan, instance_type, now) for instance_type in instance_types or [""]]
    far = datetime.max.replace(tzinfo=timezone.utc)
    return min(windows, key=lambda w: (w[0] != "active", w[1] or far))


def _read(ec2: Any, sagemaker: Any, capacity: dict[str, Any], now: datetime
          ) -> tuple[Optional[str], Optional[datetime]]:
    """(its state, its end) as EC2 or SageMaker describes it; ("not found", None) where it does not exist."""
    try:
        if "training_plan" in capacity:
            found = sagemaker.describe_training_plan(TrainingPlanName=capacity["training_plan"])
            return plan_reading(found, capacity.get("instance_types", []), now)
        reservations = ec2.describe_capacity_reservations(
            CapacityReservationIds=[capacity["reservation_id"]])["CapacityReservations"]
    except Exception as exc:  # botocore's ClientError, without importing botocore in the tests' stand-ins
        if _error_code(exc) in NOT_FOUND:
            return "not found", None
        raise
    if not reservations:
        return "not found", None
    return reservations[0].get("State"), reservations[0].get("EndDate")


def readings(ec2: Any, sagemaker: Any, capacities: list[dict[str, Any]], now: datetime
             ) -> tuple[list[dict[str, Any]], list[str]]:
    """Each capacity's reading ({capacity, state, end, hours}: hours None where there is none to
    put) and the errors of those that could not be read."""
    found: list[dict[str, Any]] = []
    errors: list[str] = []
    for capacity in capacities:
        try:
            state, end = _read(ec2, sagemaker, capacity, now)
        except Exception as exc:
            errors.append(f"{capacity['capacity']}: {exc}")
            continue
        if state not in COUNTING:
            hours: Optional[float] = 0.0
        else:
            hours = hours_left(end, now) if end is not None else None
        found.append({"capacity": capacity["capacity"], "state": state,
                      "end": end.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if end else None,
                      "hours": hours})
    return found, errors


def publish(cloudwatch: Any, env: dict[str, str], found: list[dict[str, Any]], now: datetime) -> int:
    """Put each reading that has hours; how many were put."""
    data = [{"MetricName": env["METRIC"], "Timestamp": now, "Value": r["hours"], "Unit": "None",
             "Dimensions": [{"Name": "Cluster", "Value": env["CLUSTER"]}, {"Name": "Capacity", "Value": r["capacity"]}]}
            for r in found if r["hours"] is not None]
    if data:
        cloudwatch.put_metric_data(Namespace=env["NAMESPACE"], MetricData=data)
    return len(data)


def count_down(clients: dict[str, Any], env: dict[str, str], now: datetime) -> dict[str, Any]:
    capacities = json.loads(env["CAPACITIES"])
    found, errors = readings(clients.get("ec2"), clients.get("sagemaker"), capacities, now)
    put = publish(clients["cloudwatch"], env, found, now)
    result: dict[str, Any] = {"cluster": env["CLUSTER"], "readings": found, "put": put}
    if errors:
        result["errors"] = errors
    return result


def handler(event: dict[str, Any], context: Any, clients: Optional[dict[str, Any]] = None,
            now: Optional[datetime] = None) -> dict[str, Any]:
    env = dict(os.environ)
    if clients is None:
        import boto3

        capacities = json.loads(env["CAPACITIES"])
        clients = {"cloudwatch": boto3.client("cloudwatch")}
        if any("reservation_id" in c for c in capacities):
            clients["ec2"] = boto3.client("ec2")
        if any("training_plan" in c for c in capacities):
            clients["sagemaker"] = boto3.client("sagemaker")
    result = count_down(clients, env, now or datetime.now(timezone.utc))
    print(json.dumps(result, default=str))
    if "errors" in result:
        raise RuntimeError("could not read " + "; ".join(result["errors"]))
    return result
