"""Keeps an EKS managed node group on a Capacity Block at the block's size while the block is
active, and at 0 otherwise (fmcluster_cdk/constructs/compute/capacity_blocks.py).

EKS's documentation for managed node groups on Capacity Blocks: create the group with a desired
size of 0 before the block is active, scale it up when the block becomes active, and keep it at 0
while the group is upgraded; EC2 Auto Scaling's: scale in to zero more than 30 minutes before the
block's end (EC2 terminates what is left from 30 minutes before the end, and warns 40 minutes
before). Run by EventBridge on the block's events (delivered, expiration warning) and every few
minutes (a deploy during an active block, a missed event), it reconciles:

- wanted = SIZE while the block is `active` and ends more than DRAIN_MINUTES from now, else 0;
- nothing is changed while the hold parameter exists (an operator upgrading the group: README);
- the node group's scaling is updated only when its desired size differs, with minSize 0;
- with REPAIR (the group's wanted EKS nodeRepairConfig, JSON; empty: repair is not wanted and is
  left alone), node auto repair is on while the block is `active` and ends more than
  BLOCK_GUARD_MINUTES from now, else off (the same limits, `enabled` false): a node replaced in
  the block's last hour would not be ready before EC2 ends the block. UpdateNodegroupConfig takes
  `nodeRepairConfig` (botocore's eks model). Repair is turned off before the group is scaled, and
  on after it; an update in progress (ResourceInUseException) is retried on the next run.

Environment: CLUSTER, NODEGROUP, RESERVATION (cr-...), SIZE, HOLD_PARAMETER, DRAIN_MINUTES, REPAIR,
BLOCK_GUARD_MINUTES.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from typing import Any, Optional


def wanted_size(reservation: dict[str, Any], size: int, now: datetime, drain: timedelta) -> tuple[int, str]:
    """The desired size for the block as DescribeCapacityReservations describes it, and why."""
    state, end = reservation.get("State", "unknown"), reservation.get("EndDate")
    if state != "active":
        return 0, f"the Capacity Block is {state}"
    if end is not None and end - now <= drain:
        return 0, f"the Capacity Block ends at {end:%Y-%m-%d %H:%MZ}: drained {int(drain.total_seconds() // 60)} " \
                  "minutes before"
    return size, "the Capacity Block is active" + (f" until {end:%Y-%m-%d %H:%MZ}" if end else "")


def repair_wanted(reservation: dict[str, Any], now: datetime, guard: timedelta) -> tuple[bool, str]:
    """Whether the group's node repair is on for the block as DescribeCapacityReservations
    describes it, and why."""
    state, end = reservation.get("State", "unknown"), reservation.get("EndDate")
    if state != "active":
        return False, f"the Capacity Block is {state}"
    if end is not None and end - now <= guard:
        return False, f"the Capacity Block ends at {end:%Y-%m-%d %H:%MZ}: no repair in its last " \
                      f"{int(guard.total_seconds() // 60)} minutes"
    return True, "the Capacity Block is active" + (f" until {end:%Y-%m-%d %H:%MZ}" if end else "")


def _update(eks: Any, cluster: str, nodegroup: str, **config: Any) -> Optional[str]:
    """UpdateNodegroupConfig; the error of an update in progress (the next run retries), else None."""
    try:
        eks.update_nodegroup_config(clusterName=cluster, nodegroupName=nodegroup, **config)
    except eks.exceptions.ResourceInUseException as exc:
        return str(exc)
    return None


def _held(ssm: Any, name: str) -> Optional[str]:
    try:
        return ssm.get_parameter(Name=name)["Parameter"]["Value"]
    except ssm.exceptions.ParameterNotFound:
        return None


def reconcile(ec2: Any, eks: Any, ssm: Any, env: dict[str, str], now: datetime) -> dict[str, Any]:
    cluster, nodegroup, reservation = env["CLUSTER"], env["NODEGROUP"], env["RESERVATION"]
    size, drain = int(env["SIZE"]), timedelta(minutes=int(env["DRAIN_MINUTES"]))
    result: dict[str, Any] = {"cluster": cluster, "nodegroup": nodegroup, "reservation": reservation}
    hold = _held(ssm, env["HOLD_PARAMETER"])
    if hold is not None:
        return {**result, "action": "none", "why": f"held by {env['HOLD_PARAMETER']}: {hold}"}
    found = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation])["CapacityReservations"]
    block = found[0] if found else {"State": "not found"}
    wanted, why = wanted_size(block, size, now, drain)
    group = eks.describe_nodegroup(clusterName=cluster, nodegroupName=nodegroup)["nodegroup"]
    scaling = group["scalingConfig"]
    result.update(desired=scaling.get("desiredSize"), wanted=wanted, why=why, action="none")
    steps: list[tuple[str, str, dict[str, Any]]] = []
    if scaling.get("desiredSize") != wanted:
        steps.append(("action", "scaled", {"scalingConfig": {"minSize": 0, "maxSize": size, "desiredSize": wanted}}))
    if env.get("REPAIR"):
        repair, repair_why = repair_wanted(block, now, timedelta(minutes=int(env["BLOCK_GUARD_MINUTES"])))
        enabled = bool(group.get("nodeRepairConfig", {}).get("enabled", False))
        result.update(repair="none", repair_why=repair_why)
        if enabled != repair:
            step = ("repair", "on" if repair else "off", {"nodeRepairConfig": {**json.loads(env["REPAIR"]),
                                                                                "enabled": repair}})
            steps.insert(len(steps) if repair else 0, step)  # off before scaling, on after it
    for key, done, config in steps:
        error = _update(eks, cluster, nodegroup, **config)
        result[key] = "retry" if error else done
        if error:
            result.setdefault("error", error)
    return result


def handler(event: dict[str, Any], context: Any, clients: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    if clients is None:
        import boto3

        clients = {name: boto3.client(name) for name in ("ec2", "eks", "ssm")}
    result = reconcile(clients["ec2"], clients["eks"], clients["ssm"], dict(os.environ), datetime.now(timezone.utc))
    result["trigger"] = event.get("detail-type", "schedule")
    print(json.dumps(result, default=str))
    return result
