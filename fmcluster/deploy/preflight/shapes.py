"""What preflight reads of EC2's capacity reservations and Capacity Blocks, and what it keeps of
a reservation for its JSON report (which `fmcluster plan --preflight FILE` reads back)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional, Required, TypedDict


class CapacityReservation(TypedDict, total=False):
    """What preflight reads of an entry of DescribeCapacityReservations."""

    CapacityReservationId: Required[str]
    ReservationType: str  # "default" or "capacity-block"
    StartDate: datetime
    EndDate: datetime
    State: str
    InstanceType: str
    AvailabilityZone: str
    AvailabilityZoneId: str
    TotalInstanceCount: int
    AvailableInstanceCount: int
    CapacityBlockId: str  # the Capacity Block a capacity-block reservation belongs to


class CapacityBlock(TypedDict, total=False):
    """What preflight reads of an entry of DescribeCapacityBlocks (botocore's CapacityBlock)."""

    CapacityBlockId: Required[str]
    UltraserverType: str  # absent for a block of instances
    AvailabilityZone: str
    AvailabilityZoneId: str
    CapacityReservationIds: list[str]
    StartDate: datetime
    EndDate: datetime
    State: str


class ReadReservation(TypedDict):
    """A reservation as preflight read it, in `--format json`'s "reservations" (`fmcluster plan
    --preflight FILE` shows the Capacity Blocks' windows from it)."""

    id: str
    kind: str  # "capacity-block" or "reservation"
    state: str
    instance_type: str
    instances: int
    start: Optional[str]  # ISO 8601, UTC
    end: Optional[str]  # None: no end date


def read_reservation(r: CapacityReservation) -> ReadReservation:
    def iso(value: Optional[datetime]) -> Optional[str]:
        return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if value else None

    return {"id": r["CapacityReservationId"],
            "kind": "capacity-block" if r.get("ReservationType") == "capacity-block" else "reservation",
            "state": r.get("State", ""), "instance_type": r.get("InstanceType", ""),
            "instances": r.get("TotalInstanceCount", 0), "start": iso(r.get("StartDate")), "end": iso(r.get("EndDate"))}
