"""The node groups' reserved capacity in the plan: each Capacity Block's, reservation's or training
plan's window and cost as `fmcluster preflight` read them (the plan itself reads no account: offline
it says where to read them), what happens at its end on the control plane
(fmcluster.kubernetes.capacity_end where fmcluster handles it in a Kubernetes cluster,
fmcluster.observability.capacity elsewhere) and the alarms that count down to it; the records
(fmcluster.plan.shape.capacity) and their rows for the text and markdown plans.

A Capacity Block's price is its upfront fee, paid at purchase, which EC2 does not report once the
block is bought: the plan says so rather than guess. A training plan's fee is in
DescribeTrainingPlan (preflight keeps it). An On-Demand Capacity Reservation bills the On-Demand
rate for every reserved instance hour, used or not: the price table's list price."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping, Optional

from fmcluster.facts.controlplanes import CAPACITY_BLOCK, RESERVATION
from fmcluster.facts.prices import PriceTable
from fmcluster.kubernetes import capacity_end as kubernetes_end
from fmcluster.model import cluster as model
from fmcluster.observability import capacity as capacity_end
from fmcluster.plan.figures import num, usd
from fmcluster.plan.shape.capacity import CapacityPlan, CountdownAlarmPlan
from fmcluster.text.table import Table

TRAINING_PLAN = "training-plan"
KIND_NAMES = {CAPACITY_BLOCK: "Capacity Block", RESERVATION: "On-Demand Capacity Reservation",
              TRAINING_PLAN: "training plan"}
HOW_TO_READ = ("not read: fmcluster preflight SPEC --format json > preflight.json, then fmcluster plan SPEC "
               "--preflight preflight.json")


def _kind(group: model.NodeGroup, hyperpod: bool) -> str:
    if hyperpod and group.capacity.training_plan_arn:
        return TRAINING_PLAN
    return group.capacity.type


def _hours(start: Optional[str], end: Optional[str]) -> Optional[float]:
    if not start or not end:
        return None
    try:
        return round((datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds() / 3600, 2)
    except ValueError:  # a report edited by hand
        return None


def _money(value: Any) -> Optional[float]:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _cost(kind: str, found: Optional[Mapping[str, Any]], hours: Optional[float], unit: Optional[float],
          table: PriceTable) -> tuple[Optional[float], str]:
    """The window's whole cost where it is known, and how it is priced."""
    fee, currency = (_money(found.get("upfront_fee")), found.get("currency")) if found else (None, None)
    if kind == TRAINING_PLAN:
        if fee is not None:
            return fee, f"{currency or ''} {fee:,.2f} paid up front: the plan's whole price".strip()
        return None, "priced at purchase: its upfront fee (DescribeTrainingPlan; plan --preflight shows it)"
    if kind == CAPACITY_BLOCK:
        return None, ("priced at purchase: the upfront fee is the block's whole price (fmcluster capacity find "
                      "shows an offering's); EC2 does not report a bought block's, so the plan does not either")
    if unit is None:
        return None, "billed at the On-Demand rate for every reserved instance hour, used or not; no price in the table"
    rate = f"{usd(unit)}/h per instance at {table.region} list prices"
    instances = found.get("instances") if found else None
    if isinstance(instances, int) and hours is not None:
        total = round(unit * instances * hours, 2)
        return total, f"{instances} x {rate} x {num(hours)} h, billed used or not"
    return None, f"{rate}, for every reserved instance hour, used or not" + (
        ": no end date" if found else "")


def _countdown(m: model.ClusterModel, group: model.NodeGroup, kind: str) -> tuple[str, list[CountdownAlarmPlan]]:
    counted = next((c for c in capacity_end.counted(m) if group.name in c.groups), None)
    if counted is not None:
        alarms = [CountdownAlarmPlan(name=capacity_end.alarm_name(m.name, counted.capacity, t.suffix), hours=t.hours)
                  for t in counted.thresholds()]
        return (f"{capacity_end.METRIC} on the CloudWatch dashboard fmcluster-{m.name}; alarms "
                + " and ".join(f"{a.name} (under {a.hours:g} h)" for a in alarms)), alarms
    if not m.observed:
        return f"none: the cluster has no {m.name}-observability (observability.prometheus and grafana off)", []
    if kind == RESERVATION:
        return "none: an On-Demand Capacity Reservation's instances outlive it", []
    return "none: a resource group's reservations are known only at run time (preflight reads each)", []


def capacities(m: model.ClusterModel, read: Mapping[str, Mapping[str, Any]], table: PriceTable) -> list[CapacityPlan]:
    """The reserved capacity of each node group that has some, in the spec's order; `read`: what
    `fmcluster preflight` read, by reservation id or training plan ARN."""
    hyperpod = m.control_plane.hyperpod
    out = []
    for group in m.node_groups:
        at_end = kubernetes_end.at_end(m, group) or capacity_end.at_end(m, group)
        if at_end is None:
            continue
        kind = _kind(group, hyperpod)
        capacity = group.capacity
        reference = str(capacity.training_plan_arn if kind == TRAINING_PLAN else
                        capacity.reservation_id or capacity.reservation_resource_group_arn or "")
        found = read.get(reference)
        start, end = (found.get("start"), found.get("end")) if found else (None, None)
        hours = _hours(start, end)
        unit = table.instance_hourly(group.instance_type) if kind == RESERVATION and not hyperpod else None
        total, cost = _cost(kind, found, hours, unit, table)
        countdown, alarms = _countdown(m, group, kind)
        instances = found.get("instances") if found else None
        out.append(CapacityPlan(
            node_group=group.name, kind=kind, capacity=reference, read=found is not None,
            state=found.get("state") if found else None, start=start, end=end, hours=hours,
            instances=instances if isinstance(instances, int) else None,
            upfront_fee=_money(found.get("upfront_fee")) if found else None,
            currency=found.get("currency") if found else None, total_cost=total, cost=cost, at_end=at_end,
            countdown=countdown, countdown_alarms=alarms))
    return out


def window_cell(c: CapacityPlan) -> str:
    """'2026-11-30T12:00:00Z to 2026-12-07T12:00:00Z, 168 h (active, 8 instances)', or how to read it."""
    if not c.read:
        if c.capacity.startswith("arn:aws") and ":resource-groups:" in c.capacity:
            return "a resource group: `fmcluster preflight` reads each of its reservations"
        return HOW_TO_READ
    span = f"{c.start or '?'} to {c.end}, {num(c.hours or 0)} h" if c.end else f"from {c.start or '?'}, no end date"
    return f"{span} ({c.state or 'unknown state'}, {c.instances if c.instances is not None else '?'} instances)"


def title(c: CapacityPlan) -> str:
    return f"{c.node_group}: {KIND_NAMES.get(c.kind, c.kind)} {c.capacity}"


def capacity_rows(c: CapacityPlan) -> Table:
    """The record of one group's capacity: window, cost, end and countdown."""
    return [["", ""], ["window", window_cell(c)], ["cost", c.cost], ["at its end", c.at_end],
            ["countdown", c.countdown]]


def capacity_table(capacities: list[CapacityPlan]) -> Table:
    """A row per group's capacity (the markdown plan)."""
    return [["node group", "capacity", "window", "cost", "at its end", "countdown"],
            *[[c.node_group, f"{KIND_NAMES.get(c.kind, c.kind)} `{c.capacity}`", window_cell(c), c.cost, c.at_end,
               c.countdown] for c in capacities]]
