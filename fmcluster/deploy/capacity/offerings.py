"""What an offering of reserved GPU capacity is, as fmcluster reads it, and which one fits which
node group: the search window asked for, the request each group's search sends, the offerings
read from the answers, their price per hour, and the order they are shown in (cheapest first).

Pure: no AWS call, no clock (the time a command runs at is passed in). The request and answer
shapes are botocore's service models (ec2 2016-11-15, sagemaker 2017-07-24):

- EC2 DescribeCapacityBlockOfferings: CapacityDurationHours (required), InstanceType and
  InstanceCount, or UltraserverType and UltraserverCount; StartDateRange, EndDateRange. Each
  CapacityBlockOffering: CapacityBlockOfferingId, InstanceType, AvailabilityZone (a name: the
  offering has no AZ ID, its segments do), InstanceCount, StartDate, EndDate,
  CapacityBlockDurationHours and CapacityBlockDurationMinutes, UpfrontFee (a string), CurrencyCode,
  UltraserverType, UltraserverCount, ZoneType, CapacityBlockOfferingSegments.
- SageMaker SearchTrainingPlanOfferings: InstanceType (ml.*, an enum of the model), InstanceCount
  (0-256), UltraServerType (ml.u-*), UltraServerCount, StartTimeAfter, EndTimeBefore, DurationHours
  (1-87600), TargetResources (hyperpod-cluster); each TrainingPlanOffering:
  TrainingPlanOfferingId, DurationHours and DurationMinutes, UpfrontFee, CurrencyCode and up to 5
  ReservedCapacityOfferings (InstanceType, InstanceCount, AvailabilityZone, StartTime, EndTime).
- EC2 DescribeCapacityBlockExtensionOfferings (CapacityReservationId,
  CapacityBlockExtensionDurationHours): CapacityBlockExtensionOfferingId, AvailabilityZoneId,
  CapacityBlockExtensionStartDate (the block's end now) and EndDate, DurationHours, UpfrontFee;
  SageMaker's TrainingPlanExtensionOfferings (SearchTrainingPlanOfferings with TrainingPlanArn):
  TrainingPlanExtensionOfferingId, StartDate, EndDate, DurationHours, UpfrontFee.

Limits (EC2 User Guide, "Find and purchase Capacity Blocks" and "Extend Capacity Blocks"; the
ec2 model's CapacityDurationHours): a block, and an extension, lasts whole days up to 14 days and
whole weeks up to 182 days; a block holds up to 64 instances; every block ends at 11:30 UTC."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from typing import Any, Collection, Mapping, Optional

from fmcluster.spec.models import ClusterSpec, NodeGroupSpec

BLOCK, PLAN, BLOCK_EXTENSION, PLAN_EXTENSION = "capacity-block", "training-plan", "block-extension", "plan-extension"
# The operation each kind of offering is read from, and the one that buys it
SEARCH = {BLOCK: "DescribeCapacityBlockOfferings", PLAN: "SearchTrainingPlanOfferings",
          BLOCK_EXTENSION: "DescribeCapacityBlockExtensionOfferings", PLAN_EXTENSION: "SearchTrainingPlanOfferings"}
BUY = {BLOCK: "PurchaseCapacityBlock", PLAN: "CreateTrainingPlan", BLOCK_EXTENSION: "PurchaseCapacityBlockExtension",
       PLAN_EXTENSION: "ExtendTrainingPlan"}
DAY = 24
BLOCK_MAX_DAYS = 182  # 26 weeks
BLOCK_DAILY_UP_TO = 14  # days; weeks beyond
BLOCK_MAX_INSTANCES = 64  # in one Capacity Block
PLAN_MAX_INSTANCES = 256  # sagemaker ReservedCapacityInstanceCount
PLAN_MAX_HOURS = 87600  # sagemaker TrainingPlanDurationHoursInput
HYPERPOD_TARGET = "hyperpod-cluster"  # sagemaker SageMakerResourceName: a plan for HyperPod instance groups
ML = "ml."  # SageMaker's prefix of instance and UltraServer types


# ---- the command line's values ---------------------------------------------------------------

_DURATION = re.compile(r"(\d+)\s*([hdw]?)")


def parse_duration(text: str) -> int:
    """Hours of a duration as typed: `7d`, `2w`, `168h` or `168` (hours). ValueError otherwise."""
    match = _DURATION.fullmatch(text.strip().lower())
    if not match or int(match.group(1)) == 0:
        raise ValueError(f"expected a duration such as 7d, 2w or 168h, got {text!r}")
    return int(match.group(1)) * {"": 1, "h": 1, "d": DAY, "w": 7 * DAY}[match.group(2)]


def parse_time(text: str) -> datetime:
    """An ISO 8601 date or time (`2026-12-01`, `2026-12-01T11:30Z`), UTC unless it says
    otherwise. ValueError otherwise."""
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"expected an ISO 8601 date or time such as 2026-12-01 or 2026-12-01T11:30Z, "
                         f"got {text!r}") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def days(hours: int) -> str:
    """`168` -> `7 days`; hours that are no whole days stay hours."""
    if hours % DAY:
        return f"{hours} hours" if hours != 1 else "1 hour"
    n = hours // DAY
    return f"{n} day{'s' if n != 1 else ''}"


def block_duration_problem(hours: int) -> Optional[str]:
    """Why `hours` is no duration of a Capacity Block (or of its extension), naming the nearest
    that are; None when it is one."""
    allowed = block_durations()
    if hours in allowed:
        return None
    below = max((h for h in allowed if h < hours), default=None)
    above = min((h for h in allowed if h > hours), default=None)
    near = " or ".join(days(h) for h in (below, above) if h is not None)
    return (f"a Capacity Block lasts whole days up to {BLOCK_DAILY_UP_TO} days, then whole weeks up to "
            f"{BLOCK_MAX_DAYS} days: {days(hours)} is not one; {near} is")


def block_durations() -> tuple[int, ...]:
    """Every duration, in hours, a Capacity Block or extension may have."""
    daily = range(1, BLOCK_DAILY_UP_TO + 1)
    weekly = range(BLOCK_DAILY_UP_TO + 7, BLOCK_MAX_DAYS + 1, 7)
    return tuple(d * DAY for d in (*daily, *weekly))


@dataclass(frozen=True)
class Window:
    """What a search asks for: offerings of `hours`, starting no earlier than `start` and
    ending no later than `end` (None: the service's own default, from now on)."""

    hours: int
    start: Optional[datetime] = None
    end: Optional[datetime] = None


def window(start: Optional[datetime], end: Optional[datetime], hours: Optional[int], now: datetime) -> Window | str:
    """The search window of `--start`, `--end` and `--duration`, or why there is none. Without a
    duration, the window's whole days from the start (or now) to the end."""
    if end is not None and end <= (start or now):
        return f"--end {iso(end)} is not after {'--start ' + iso(start) if start else 'now'}"
    if start is not None and start < now:
        return f"--start {iso(start)} is in the past (now: {iso(now)})"
    if hours is None:
        if end is None:
            return "give --duration (such as 7d) or --end: how long the capacity is wanted"
        whole = (end - (start or now)) // timedelta(days=1)
        if whole < 1:
            return f"the window to --end {iso(end)} is shorter than a day: give --duration, or a later --end"
        hours = whole * DAY
    elif end is not None and (start or now) + timedelta(hours=hours) > end:
        return f"{days(hours)} do not fit between {iso(start) if start else 'now'} and --end {iso(end)}"
    return Window(hours, start, end)


def iso(when: Optional[datetime]) -> str:
    """A time as fmcluster prints it: UTC, to the minute (`2026-12-01 11:30Z`)."""
    return when.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%MZ") if when else "-"


def argument(when: datetime) -> str:
    """A time as the command line takes it back (`2026-12-01T11:30Z`)."""
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%MZ")


# ---- what each group asks for ------------------------------------------------------------------

@dataclass(frozen=True)
class Need:
    """What a node group's reserved capacity must hold: `instances` of `instance_type`, or
    `ultraservers` UltraServers of `ultraserver` (whose instances they are)."""

    group: str
    instance_type: str
    instances: int
    ultraserver: Optional[str] = None
    ultraservers: int = 0


def need(group: NodeGroupSpec) -> Need:
    """A group's need at its size (count, or max_count: a Capacity Block is of fixed size)."""
    cap = group.capacity
    if cap.ultraserver_type:
        return Need(group.name, group.instance_type, group.max_nodes, cap.ultraserver_type, cap.ultraserver_count)
    return Need(group.name, group.instance_type, group.max_nodes)


@dataclass(frozen=True)
class Search:
    """One group's search: the kind of offering, the operation's keyword arguments; or, with
    `skipped`, why the group is not searched."""

    need: Need
    kind: str
    kwargs: Mapping[str, Any]
    skipped: Optional[str] = None


def search(spec: ClusterSpec, group: NodeGroupSpec, win: Window, plan_types: Collection[str] = ()) -> Search:
    """The search for `group`'s offerings in `win`: Capacity Blocks for EC2 control planes,
    training plans for SageMaker HyperPod (`plan_types`: SageMaker's ReservedCapacityInstanceType
    values, from its model)."""
    wanted = need(group)
    if spec.orchestrator.control_plane.hyperpod:
        return _plan_search(wanted, win, plan_types)
    return _block_search(group, wanted, win)


def _block_search(group: NodeGroupSpec, wanted: Need, win: Window) -> Search:
    def skip(why: str) -> Search:
        return Search(wanted, BLOCK, {}, why)

    if not group.instance.capacity_block:
        return skip(f"{group.instance_type} is not sold as Capacity Blocks for ML")
    if (problem := block_duration_problem(win.hours)) is not None:
        return skip(problem)
    kwargs: dict[str, Any] = {"InstanceType": group.instance_type, "CapacityDurationHours": win.hours}
    if wanted.ultraserver:
        kwargs.update(UltraserverType=wanted.ultraserver, UltraserverCount=wanted.ultraservers)
    elif wanted.instances > BLOCK_MAX_INSTANCES:
        return skip(f"a Capacity Block holds at most {BLOCK_MAX_INSTANCES} instances; {group.name} has "
                    f"{wanted.instances}: split it into groups of {BLOCK_MAX_INSTANCES} or fewer")
    elif wanted.instances < 1:
        return skip("the group has no instance to reserve")
    else:
        kwargs["InstanceCount"] = wanted.instances
    return Search(wanted, BLOCK, _dated(kwargs, win, "StartDateRange", "EndDateRange"))


def _plan_search(wanted: Need, win: Window, plan_types: Collection[str]) -> Search:
    kind = ML + wanted.instance_type
    if kind not in plan_types:
        return Search(wanted, PLAN, {}, f"SageMaker offers no training plans of {kind}")
    if not 1 <= win.hours <= PLAN_MAX_HOURS:
        return Search(wanted, PLAN, {}, f"a training plan lasts 1 to {PLAN_MAX_HOURS} hours")
    kwargs: dict[str, Any] = {"InstanceType": kind, "DurationHours": win.hours, "TargetResources": [HYPERPOD_TARGET]}
    if wanted.ultraserver:
        kwargs.update(UltraServerType=ML + wanted.ultraserver, UltraServerCount=wanted.ultraservers)
    elif not 1 <= wanted.instances <= PLAN_MAX_INSTANCES:
        return Search(wanted, PLAN, {}, f"a training plan holds 1 to {PLAN_MAX_INSTANCES} instances")
    else:
        kwargs["InstanceCount"] = wanted.instances
    return Search(wanted, PLAN, _dated(kwargs, win, "StartTimeAfter", "EndTimeBefore"))


def _dated(kwargs: dict[str, Any], win: Window, start_key: str, end_key: str) -> dict[str, Any]:
    if win.start is not None:
        kwargs[start_key] = win.start
    if win.end is not None:
        kwargs[end_key] = win.end
    return kwargs


# ---- what the answers offer --------------------------------------------------------------------

@dataclass(frozen=True)
class Offer:
    """One offering, of any kind, as the tables show it. `zone` is the AZ name the answer gives,
    `zone_id` its AZ ID (None: unknown); `zones` every AZ its parts lie in where there are several
    (such an offering cannot serve one group). Extensions: `start` is the block's end now."""

    kind: str
    id: str
    instance_type: str
    instances: int
    start: datetime
    end: datetime
    hours: int
    minutes: int
    upfront: Optional[Decimal]
    currency: str
    zone: str = ""
    zone_id: Optional[str] = None
    zones: tuple[str, ...] = ()
    ultraserver: Optional[str] = None
    ultraservers: int = 0

    @property
    def duration_hours(self) -> Decimal:
        return Decimal(self.hours) + Decimal(self.minutes) / 60

    @property
    def hourly(self) -> Optional[Decimal]:
        """The upfront fee spread over the offering's hours: its price per hour."""
        if self.upfront is None or not self.duration_hours:
            return None
        return self.upfront / self.duration_hours

    @property
    def instance_hourly(self) -> Optional[Decimal]:
        hourly = self.hourly
        return hourly / self.instances if hourly is not None and self.instances else None

    @property
    def where(self) -> str:
        return self.zone_id or self.zone or "?"


def money(raw: Any) -> Optional[Decimal]:
    """An UpfrontFee string as a number; None where it is none (a price is never guessed)."""
    try:
        value = Decimal(str(raw).replace(",", ""))
    except (InvalidOperation, ValueError):
        return None
    return value if value.is_finite() and value >= 0 else None


def _zone_id(name: str, zones: Mapping[str, str]) -> Optional[str]:
    return zones.get(name)


def block_offer(raw: Mapping[str, Any], zones: Mapping[str, str]) -> Offer:
    """A CapacityBlockOffering. `zones`: AZ name -> AZ ID (DescribeAvailabilityZones)."""
    zone = raw.get("AvailabilityZone", "")
    segments = raw.get("CapacityBlockOfferingSegments") or []
    parts = {s.get("AvailabilityZoneId") or _zone_id(s.get("AvailabilityZone", ""), zones) or s.get("AvailabilityZone")
             for s in segments}
    parts.discard(None)
    parts.discard("")
    zone_id = _zone_id(zone, zones) if zone else None
    if zone_id is None and len(parts) == 1:
        zone_id = next(iter(parts))
    several = tuple(sorted(str(p) for p in parts)) if len(parts) > 1 else ()
    return Offer(BLOCK, raw["CapacityBlockOfferingId"], raw.get("InstanceType", ""), int(raw.get("InstanceCount", 0)),
                 raw["StartDate"], raw["EndDate"], int(raw.get("CapacityBlockDurationHours", 0)),
                 int(raw.get("CapacityBlockDurationMinutes", 0) or 0), money(raw.get("UpfrontFee")),
                 raw.get("CurrencyCode", ""), zone, zone_id, several,
                 raw.get("UltraserverType"), int(raw.get("UltraserverCount") or 0))


def plan_offer(raw: Mapping[str, Any], zones: Mapping[str, str]) -> Offer:
    """A TrainingPlanOffering: its reserved capacities together (their instances summed, from the
    first start to the last end)."""
    parts = raw.get("ReservedCapacityOfferings") or []
    names = sorted({p.get("AvailabilityZone", "") for p in parts} - {""})
    starts = [p["StartTime"] for p in parts if p.get("StartTime")]
    ends = [p["EndTime"] for p in parts if p.get("EndTime")]
    kinds = {p.get("InstanceType", "") for p in parts}
    ultra = next((p for p in parts if p.get("UltraServerType")), None)
    zone = names[0] if len(names) == 1 else ""
    start = min(starts) if starts else raw["RequestedStartTimeAfter"]
    end = max(ends) if ends else start + timedelta(hours=int(raw.get("DurationHours", 0)))
    return Offer(PLAN, raw["TrainingPlanOfferingId"], ",".join(sorted(k.removeprefix(ML) for k in kinds)),
                 sum(int(p.get("InstanceCount", 0)) for p in parts), start, end, int(raw.get("DurationHours", 0)),
                 int(raw.get("DurationMinutes", 0) or 0), money(raw.get("UpfrontFee")), raw.get("CurrencyCode", ""),
                 zone, _zone_id(zone, zones) if zone else None,
                 tuple(_zone_id(n, zones) or n for n in names) if len(names) > 1 else (),
                 ultra.get("UltraServerType", "").removeprefix(ML) if ultra else None,
                 int(ultra.get("UltraServerCount") or 0) if ultra else 0)


def block_extension(raw: Mapping[str, Any]) -> Offer:
    """A CapacityBlockExtensionOffering."""
    return Offer(BLOCK_EXTENSION, raw["CapacityBlockExtensionOfferingId"], raw.get("InstanceType", ""),
                 int(raw.get("InstanceCount", 0)), raw["CapacityBlockExtensionStartDate"],
                 raw["CapacityBlockExtensionEndDate"], int(raw.get("CapacityBlockExtensionDurationHours", 0)), 0,
                 money(raw.get("UpfrontFee")), raw.get("CurrencyCode", ""), raw.get("AvailabilityZone", ""),
                 raw.get("AvailabilityZoneId"))


def plan_extension(raw: Mapping[str, Any], zones: Mapping[str, str], instance_type: str, instances: int) -> Offer:
    """A TrainingPlanExtensionOffering, of the plan's `instances` of `instance_type`."""
    zone = raw.get("AvailabilityZone", "")
    return Offer(PLAN_EXTENSION, raw["TrainingPlanExtensionOfferingId"], instance_type, instances, raw["StartDate"],
                 raw["EndDate"], int(raw.get("DurationHours", 0)), 0, money(raw.get("UpfrontFee")),
                 raw.get("CurrencyCode", ""), zone, _zone_id(zone, zones) if zone else None)


def cheapest_first(offers: Collection[Offer]) -> list[Offer]:
    """By price per hour (an unknown price last), then the earlier start, the AZ, the id."""
    def key(o: Offer) -> tuple[int, Decimal, datetime, str, str]:
        hourly = o.hourly
        return (hourly is None, hourly if hourly is not None else Decimal(0), o.start, o.where, o.id)

    return sorted(offers, key=key)


def unfit(offer: Offer, wanted: Need) -> Optional[str]:
    """Why `offer` cannot serve the group of `wanted` (None: it can)."""
    if offer.zones:
        return f"its capacity lies in several zones ({', '.join(offer.zones)}); a node group runs in one"
    if offer.ultraserver or wanted.ultraserver:
        if (offer.ultraserver, offer.ultraservers) != (wanted.ultraserver, wanted.ultraservers):
            return (f"{offer.ultraservers} x {offer.ultraserver} UltraServers, not the group's "
                    f"{wanted.ultraservers} x {wanted.ultraserver}")
    elif offer.instances != wanted.instances:
        return f"{offer.instances} instances, not the group's {wanted.instances}"
    if offer.instance_type != wanted.instance_type:
        return f"{offer.instance_type} instances, not the group's {wanted.instance_type}"
    return None
