"""The plan's records of the node groups' reserved capacity: each one's window and what it costs
(where `fmcluster preflight` read them), what happens at its end, and the alarms that count down
to it (fmcluster.plan.capacity builds them)."""

from __future__ import annotations

from typing import Optional

from pydantic import Field

from fmcluster.plan.shape.base import Model


class CountdownAlarmPlan(Model):
    """A CloudWatch alarm of NAME-observability that counts down to a capacity's end."""

    name: str
    hours: float = Field(description="in ALARM while fewer hours than this are left")


class CapacityPlan(Model):
    """A node group's reserved capacity: a Capacity Block, an On-Demand Capacity Reservation (or
    a resource group of them) or a SageMaker training plan. The plan reads no account: its state,
    window and price are those `fmcluster preflight` read (`fmcluster plan SPEC --preflight
    REPORT`), else null."""

    node_group: str
    kind: str = Field(description='"capacity-block", "reservation" or "training-plan"')
    capacity: str = Field(description="the cr-... id, the resource group's ARN or the training plan's ARN")
    read: bool = Field(description="preflight read it: the fields from state to upfront_fee hold what it read")
    state: Optional[str] = Field(description="as EC2 or SageMaker says it (active, scheduled, Active, ...)")
    start: Optional[str] = Field(description="ISO 8601, UTC")
    end: Optional[str] = Field(description="ISO 8601, UTC; null where not read or without an end date")
    hours: Optional[float] = Field(description="from start to end")
    instances: Optional[int]
    upfront_fee: Optional[float] = Field(description=(
        "what was paid up front where the API reports it (a training plan); EC2 reports no bought Capacity Block's"))
    currency: Optional[str]
    total_cost: Optional[float] = Field(description=(
        "the window's whole cost where it is known: a training plan's upfront fee; an On-Demand Capacity "
        "Reservation's instances x its On-Demand list price x hours"))
    cost: str = Field(description="how it is priced, in words")
    at_end: str = Field(description="what happens at its end on the control plane, today")
    countdown: str = Field(description="how NAME-observability counts down to its end, or why it does not")
    countdown_alarms: list[CountdownAlarmPlan] = Field(description="the alarms of the countdown; [] where none")
