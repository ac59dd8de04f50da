"""What preflight reads of EC2's capacity reservations and Capacity Blocks and of SageMaker's
training plans, and what it keeps of each for its JSON report (which `fmcluster plan --preflight
FILE` reads back)."""

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


class CapacityBlockStatus(TypedDict, total=False):
    """What preflight reads of an entry of DescribeCapacityBlockStatus (botocore's CapacityBlockStatus)."""

    CapacityBlockId: Required[str]
    InterconnectStatus: str  # ok | impaired | insufficient-data; absent where EC2 reports none
    TotalCapacity: int
    TotalAvailableCapacity: int
    TotalUnavailableCapacity: int  # capacity a failed system status check keeps from use


class ReservedCapacitySummary(TypedDict, total=False):
    """What preflight reads of a training plan's ReservedCapacitySummaries (botocore's shape)."""

    InstanceType: str  # ml.p5.48xlarge: SageMaker's name of the instance type
    TotalInstanceCount: int


class TrainingPlan(TypedDict, total=False):
    """What preflight reads of DescribeTrainingPlan's answer."""

    TrainingPlanArn: Required[str]
    Status: str  # Pending | Active | Scheduled | Expired | Failed
    StartTime: datetime
    EndTime: datetime
    UpfrontFee: str
    CurrencyCode: str
    TotalInstanceCount: int
    TargetResources: list[str]  # training-job, hyperpod-cluster, endpoint
    ReservedCapacitySummaries: list[ReservedCapacitySummary]


class ReadReservation(TypedDict):
    """A reservation or training plan as preflight read it, in `--format json`'s "reservations"
    (`fmcluster plan --preflight FILE` shows each node group's window and cost from it)."""

    id: str  # cr-..., or a training plan's ARN
    kind: str  # "capacity-block", "reservation" or "training-plan"
    state: str
    instance_type: str
    instances: int
    start: Optional[str]  # ISO 8601, UTC
    end: Optional[str]  # None: no end date
    upfront_fee: Optional[str]  # what was paid up front, as SageMaker says it; None: not reported (EC2's)
    currency: Optional[str]  # the upfront fee's


def _iso(value: Optional[datetime]) -> Optional[str]:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def read_reservation(r: CapacityReservation) -> ReadReservation:
    """EC2 reports no price of a reservation or a bought Capacity Block: no fee."""
    return {"id": r["CapacityReservationId"],
            "kind": "capacity-block" if r.get("ReservationType") == "capacity-block" else "reservation",
            "state": r.get("State", ""), "instance_type": r.get("InstanceType", ""),
            "instances": r.get("TotalInstanceCount", 0), "start": _iso(r.get("StartDate")),
            "end": _iso(r.get("EndDate")), "upfront_fee": None, "currency": None}


def read_training_plan(plan: TrainingPlan) -> ReadReservation:
    """A training plan's instance types as EC2 names them (ml.p5.48xlarge: p5.48xlarge)."""
    types = sorted({s.get("InstanceType", "").removeprefix("ml.") for s in plan.get("ReservedCapacitySummaries", [])})
    return {"id": plan["TrainingPlanArn"], "kind": "training-plan", "state": plan.get("Status", ""),
            "instance_type": ", ".join(t for t in types if t), "instances": plan.get("TotalInstanceCount", 0),
            "start": _iso(plan.get("StartTime")), "end": _iso(plan.get("EndTime")),
            "upfront_fee": plan.get("UpfrontFee"), "currency": plan.get("CurrencyCode")}
