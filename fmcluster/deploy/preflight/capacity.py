"""Reservations, Capacity Blocks and training plans (EC2, Resource Groups for a group of
reservations, SageMaker for a training plan): each one the node groups draw on, once: its kind,
state and window (and whether its instances are terminated before the window's end), instance
type and AZ ID for each group, and its size against what every group drawing on it needs
together. A Capacity Block that EC2 names (CapacityBlockId) is read further: its capacity and
accelerator interconnect status, and an UltraServer group's block its type, AZ and state
(fmcluster.deploy.preflight.ultraserver)."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial
from typing import Iterable, Optional

from botocore.exceptions import ClientError

from fmcluster.deploy.preflight.context import FAIL, PASS, WARN, Check, Context, when
from fmcluster.deploy.preflight.guard import ec2_found, guard
from fmcluster.deploy.preflight.shapes import CapacityReservation, TrainingPlan, read_reservation, read_training_plan
from fmcluster.deploy.preflight.ultraserver import block_statuses, ultraserver_blocks
from fmcluster.facts.controlplanes import (
    CAPACITY_BLOCK,
    RESERVATION,
    termination_minutes,
)
from fmcluster.observability.capacity import plan_name
from fmcluster.spec.models import NodeGroupSpec

NOT_FOUND = {"InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed",
             "InvalidCapacityReservationId", "NotFoundException"}
RESERVATION_OK_STATES = {"active"}
RESERVATION_WAIT_STATES = {"scheduled", "pending", "payment-pending", "assessing", "delayed"}
ENDING_SOON = timedelta(hours=24)
# TrainingPlanStatus (botocore's sagemaker model): Expired and Failed take no instances
PLAN_OK_STATES = {"Active"}
PLAN_WAIT_STATES = {"Scheduled", "Pending"}
PLAN_NOT_FOUND = {"ResourceNotFound", "ValidationException"}
HYPERPOD_TARGET = "hyperpod-cluster"  # a training plan's TargetResources entry that HyperPod may use


def reservations(ctx: Context) -> Iterable[Check]:
    """Each reservation or resource group the node groups draw on, once: its kind, state,
    instance type and AZ ID for each group, and its size against what every group drawing on
    it needs together."""
    targets: dict[str, list[NodeGroupSpec]] = {}
    plans: dict[str, list[NodeGroupSpec]] = {}
    for group in ctx.spec.node_groups:
        capacity = group.capacity
        if capacity.type not in (CAPACITY_BLOCK, RESERVATION):
            continue
        if capacity.training_plan_arn and not (capacity.reservation_id or capacity.reservation_resource_group_arn):
            plans.setdefault(capacity.training_plan_arn, []).append(group)
            continue
        target = capacity.reservation_id or capacity.reservation_resource_group_arn
        if target:  # else it names no reservation: the rule reservation_given reports it
            targets.setdefault(target, []).append(group)
    for target, groups in targets.items():
        name = "reservation " + ", ".join(g.name for g in groups)
        yield from guard(ctx, name, partial(_target, ctx, target, groups, name))
    for arn, groups in plans.items():
        name = "training plan " + ", ".join(g.name for g in groups)
        yield from guard(ctx, name, partial(_training_plan, ctx, arn, groups, name))


def _target(ctx: Context, target: str, groups: list[NodeGroupSpec], name: str) -> Iterable[Check]:
    if target.startswith("arn:"):
        ids = _group_reservations(ctx, target)
        if not ids:
            yield Check(name, FAIL, "the resource group holds no capacity reservation",
                        "add the reservations to the group, or name one with reservation_id")
            return
    else:
        ids = [target]
    found = ec2_found(ctx, "describe_capacity_reservations", "CapacityReservations", NOT_FOUND,
                       CapacityReservationIds=ids)
    if not found:
        yield Check(name, FAIL, f"{', '.join(ids)} not found in {ctx.spec.region}",
                    "check the id and that the credentials are of the account that owns the reservation")
        return
    for r in found:
        ctx.read[r["CapacityReservationId"]] = read_reservation(r)
    for group in groups:
        for r in found:
            yield from reservation_checks(group, r, ctx.spec.availability_zone_id, ctx.now, ctx.window)
    yield size_check(name, groups, found)
    ultraserver_groups = [g for g in groups if g.capacity.ultraserver_type]
    if ultraserver_groups:
        yield from guard(ctx, f"{name}: UltraServer block",
                         partial(ultraserver_blocks, ctx, ultraserver_groups, found, name))
    else:
        # a block EC2 names has a status: its capacity, and its interconnect where EC2 reports one
        named = sorted({r["CapacityBlockId"] for r in found if r.get("CapacityBlockId")})
        if named:
            yield from guard(ctx, f"{name}: block status", partial(block_statuses, ctx, named, name))


def _group_reservations(ctx: Context, group_arn: str) -> list[str]:
    pages = ctx.client("resource-groups").get_paginator("list_group_resources").paginate(Group=group_arn)
    arns = [r["Identifier"]["ResourceArn"] for page in pages for r in page.get("Resources", [])]
    return [arn.rsplit("/", 1)[-1] for arn in arns if ":capacity-reservation/" in arn]


def reservation_checks(group: NodeGroupSpec, r: CapacityReservation, az_id: str, now: datetime,
                       window: tuple[datetime, datetime] | None) -> Iterable[Check]:
    """What one DescribeCapacityReservations entry says about a node group: state and window,
    kind, instance type and AZ ID (its size: size_check, over every group drawing on it)."""
    rid, name = r["CapacityReservationId"], f"reservation {group.name}"
    block = r.get("ReservationType") == "capacity-block"
    kind = "Capacity Block" if block else "On-Demand Capacity Reservation"
    if (group.capacity.type == CAPACITY_BLOCK) != block:
        wanted = "capacity-block" if block else "reservation"
        yield Check(f"{name}: kind", FAIL, f"{rid} is a {kind}, the node group says {group.capacity.type}",
                    f"set capacity.type: {wanted}")
    terminated = None
    if block:
        terminated = timedelta(minutes=termination_minutes(False, bool(group.capacity.ultraserver_type)))
    yield from state_checks(name, rid, kind, r.get("State", ""), r.get("StartDate"), r.get("EndDate"), now, window,
                            (RESERVATION_OK_STATES, RESERVATION_WAIT_STATES), terminated)
    if r.get("InstanceType") != group.instance_type:
        yield Check(f"{name}: instance type", FAIL, f"{rid} is for {r.get('InstanceType')}, the node group runs "
                    f"{group.instance_type}", "make them the same")
    else:
        yield Check(f"{name}: instance type", PASS, group.instance_type)
    if r.get("AvailabilityZoneId") != az_id:
        yield Check(f"{name}: AZ ID", FAIL, f"{rid} is in {r.get('AvailabilityZoneId')} "
                    f"({r.get('AvailabilityZone')}), the cluster's GPU AZ ID is {az_id}",
                    f"set availability_zone_id: {r.get('AvailabilityZoneId')}")
    else:
        yield Check(f"{name}: AZ ID", PASS, az_id)


def state_checks(name: str, rid: str, kind: str, state: str, start: Optional[datetime], end: Optional[datetime],
                 now: datetime, window: tuple[datetime, datetime] | None, states: tuple[set[str], set[str]],
                 terminated: Optional[timedelta] = None) -> Iterable[Check]:
    """The state and window of a reservation, block or training plan (`kind`): `states` are
    those that take instances now and those that will; `terminated`, how long before its end its
    instances are terminated (None: they are not, an On-Demand Capacity Reservation's)."""
    ok_states, wait_states = states
    span = f"{when(start)} to {when(end)}" if end else f"from {when(start)}, no end date"
    from_, until = window or (now, now)
    covers = (start is None or start <= from_) and (end is None or end >= until)
    planned = "the planned window" if window else "now"
    if state in ok_states | wait_states and window and not covers:
        yield Check(f"{name}: window", FAIL, f"{rid} runs {span}, which does not cover {planned} "
                    f"({when(from_)} to {when(until)})", "buy a Capacity Block for the window, or move the window")
    elif state in ok_states and covers:
        soon = end is not None and end - now < ENDING_SOON
        yield Check(f"{name}: state", WARN if soon else PASS, f"{rid}: {state} {kind}, {span}"
                    + (" (ends within 24 h)" if soon else ""))
    elif state in wait_states:
        hint = None if window else "pass --window START/END to check the planned window"
        status = PASS if window and covers else WARN
        yield Check(f"{name}: state", status, f"{rid}: {state} {kind}, {span}", hint)
    else:
        yield Check(f"{name}: state", FAIL, f"{rid}: {state or 'unknown state'} {kind}, {span}",
                    "nodes cannot launch into it: buy or create a new one")
        return
    if window and covers and end is not None and terminated is not None and end - terminated < until:
        minutes = int(terminated.total_seconds() // 60)
        yield Check(f"{name}: window", WARN, f"{rid} ends {when(end)}, but its instances are terminated from "
                    f"{when(end - terminated)} ({minutes} minutes before its end), before the planned window ends "
                    f"({when(until)})", "end the run, or its last checkpoint, before then; or extend it "
                    "(fmcluster capacity extend)")


def _training_plan(ctx: Context, arn: str, groups: list[NodeGroupSpec], name: str) -> Iterable[Check]:
    """A SageMaker training plan the node groups (HyperPod instance groups) draw on: its status
    and window, that HyperPod may use it, its instance types and its size."""
    try:
        plan: TrainingPlan = ctx.client("sagemaker").describe_training_plan(TrainingPlanName=plan_name(arn))
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in PLAN_NOT_FOUND:
            raise
        yield Check(name, FAIL, f"training plan {plan_name(arn)} not found in {ctx.spec.region}",
                    "check the ARN and that the credentials are of the account that owns the plan "
                    "(aws sagemaker list-training-plans)")
        return
    ctx.read[arn] = read_training_plan(plan)
    pid = plan_name(arn)
    yield from state_checks(name, pid, "training plan", plan.get("Status", ""), plan.get("StartTime"),
                            plan.get("EndTime"), ctx.now, ctx.window, (PLAN_OK_STATES, PLAN_WAIT_STATES),
                            timedelta(minutes=termination_minutes(True, any(g.capacity.ultraserver_type
                                                                            for g in groups))))
    targets = plan.get("TargetResources", [])
    if HYPERPOD_TARGET not in targets:
        yield Check(f"{name}: target", FAIL, f"{pid} reserves capacity for {', '.join(targets) or 'nothing'}, not "
                    "for SageMaker HyperPod clusters", f"buy a training plan whose target is {HYPERPOD_TARGET}")
    types = {s.get("InstanceType", "") for s in plan.get("ReservedCapacitySummaries", [])}
    for group in groups:
        wanted = f"ml.{group.instance_type}"
        if wanted in types:
            yield Check(f"{name}: instance type", PASS, wanted)
        else:
            yield Check(f"{name}: instance type", FAIL, f"{pid} reserves {', '.join(sorted(types)) or 'no instances'}; "
                        f"node group {group.name} runs {wanted}", "make them the same")
    need, total = sum(g.max_nodes for g in groups), plan.get("TotalInstanceCount", 0)
    if total < need:
        yield Check(f"{name}: size", FAIL, f"{pid} holds {total} instances; the node groups need up to {need}",
                    "size the node groups to what the plan holds, or reserve more")
    else:
        yield Check(f"{name}: size", PASS, f"{pid} holds {total} instances; the node groups need up to {need}")


def size_check(name: str, groups: list[NodeGroupSpec], found: list[CapacityReservation]) -> Check:
    """The reservations of one target (a reservation, or the reservations of a resource group)
    against what every node group drawing on it needs at most, together."""
    need = sum(g.max_nodes for g in groups)
    total = sum(r.get("TotalInstanceCount", 0) for r in found)
    available = sum(r.get("AvailableInstanceCount", 0) for r in found)
    held = found[0]["CapacityReservationId"] if len(found) == 1 else f"{len(found)} reservations"
    needs = (f"node group {groups[0].name} needs up to {need}" if len(groups) == 1 else
             "node groups " + ", ".join(f"{g.name} ({g.max_nodes})" for g in groups) + f" need up to {need} together")
    if total < need:
        return Check(f"{name}: size", FAIL, f"{held} hold{'s' if len(found) == 1 else ''} {total} instances; {needs}",
                     "size the node groups to what the reservation holds, or reserve more")
    if available < need:
        return Check(f"{name}: size", WARN, f"{held} hold{'s' if len(found) == 1 else ''} {total}, {available} "
                     f"available now (others in use); {needs}")
    return Check(f"{name}: size", PASS, f"{held} hold{'s' if len(found) == 1 else ''} {total} instances, {available} "
                 f"available; {needs}")
