"""Reservations and Capacity Blocks (EC2, and Resource Groups for a group of reservations): each
one the node groups draw on, once: its kind, state and window, instance type and AZ ID for each
group, and its size against what every group drawing on it needs together. An UltraServer
group's blocks are read further (fmcluster.deploy.preflight.ultraserver)."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial
from typing import Iterable

from fmcluster.deploy.preflight.context import FAIL, PASS, WARN, Check, Context, when
from fmcluster.deploy.preflight.guard import ec2_found, guard
from fmcluster.deploy.preflight.shapes import CapacityReservation, read_reservation
from fmcluster.deploy.preflight.ultraserver import ultraserver_blocks
from fmcluster.facts.controlplanes import CAPACITY_BLOCK, RESERVATION
from fmcluster.spec.models import NodeGroupSpec

NOT_FOUND = {"InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed",
             "InvalidCapacityReservationId", "NotFoundException"}
RESERVATION_OK_STATES = {"active"}
RESERVATION_WAIT_STATES = {"scheduled", "pending", "payment-pending", "assessing", "delayed"}
ENDING_SOON = timedelta(hours=24)


def reservations(ctx: Context) -> Iterable[Check]:
    """Each reservation or resource group the node groups draw on, once: its kind, state,
    instance type and AZ ID for each group, and its size against what every group drawing on
    it needs together."""
    targets: dict[str, list[NodeGroupSpec]] = {}
    for group in ctx.spec.node_groups:
        capacity = group.capacity
        if capacity.type not in (CAPACITY_BLOCK, RESERVATION):
            continue
        if capacity.training_plan_arn and not (capacity.reservation_id or capacity.reservation_resource_group_arn):
            yield Check(f"reservation {group.name}", WARN, "training plans are not checked by preflight",
                        "aws sagemaker describe-training-plan")
            continue
        target = capacity.reservation_id or capacity.reservation_resource_group_arn
        if target:  # else it names no reservation: the rule reservation_given reports it
            targets.setdefault(target, []).append(group)
    for target, groups in targets.items():
        name = "reservation " + ", ".join(g.name for g in groups)
        yield from guard(ctx, name, partial(_target, ctx, target, groups, name))


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
    start, end, state = r.get("StartDate"), r.get("EndDate"), r.get("State", "")
    kind = "Capacity Block" if block else "On-Demand Capacity Reservation"
    span = f"{when(start)} to {when(end)}" if end else f"from {when(start)}, no end date"
    if (group.capacity.type == CAPACITY_BLOCK) != block:
        wanted = "capacity-block" if block else "reservation"
        yield Check(f"{name}: kind", FAIL, f"{rid} is a {kind}, the node group says {group.capacity.type}",
                    f"set capacity.type: {wanted}")
    from_, until = window or (now, now)
    covers = (start is None or start <= from_) and (end is None or end >= until)
    planned = "the planned window" if window else "now"
    if state in RESERVATION_OK_STATES | RESERVATION_WAIT_STATES and window and not covers:
        yield Check(f"{name}: window", FAIL, f"{rid} runs {span}, which does not cover {planned} "
                    f"({when(from_)} to {when(until)})", "buy a Capacity Block for the window, or move the window")
    elif state in RESERVATION_OK_STATES and covers:
        soon = end is not None and end - now < ENDING_SOON
        yield Check(f"{name}: state", WARN if soon else PASS, f"{rid}: {state} {kind}, {span}"
                    + (" (ends within 24 h)" if soon else ""))
    elif state in RESERVATION_WAIT_STATES:
        hint = None if window else "pass --window START/END to check the planned window"
        status = PASS if window and covers else WARN
        yield Check(f"{name}: state", status, f"{rid}: {state} {kind}, {span}", hint)
    else:
        yield Check(f"{name}: state", FAIL, f"{rid}: {state or 'unknown state'} {kind}, {span}",
                    "nodes cannot launch into it: buy or create a new one")
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
