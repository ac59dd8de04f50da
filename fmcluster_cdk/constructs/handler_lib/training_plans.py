"""The window of a SageMaker training plan that a node group's instances run in, shared by the Lambda
handlers that act on its end (fmcluster_cdk/constructs/GROUP/handlers/NAME/training_plans.py: a link
to this file, which CDK's asset staging copies into each function's code, so that every function
reads the end one way, as the Slurm nodes do in programs/capacity-end.sh).

A plan holds reserved capacities (DescribeTrainingPlan's ReservedCapacitySummaries, each of one
instance type, with a StartTime and an EndTime); SageMaker runs a group's instances in the one of
the group's type that holds now, and terminates them 30 minutes before its end unless another of
that type starts by then (an extension: back to back, the instances stay; in a gap between two it
returns the plan to Scheduled); one Pending its payment, or Failed, is not counted on. A plan that
lists none is read by its own StartTime, EndTime and Status. Two of the type that hold at once (two
blocks bought for one group) are read as one window, to the later end: the nodes of the one that
ends first go before it. The node's own reader,
fmcluster/node/scripts/boot/programs/capacity-end.sh (plan_read), reads it the same way."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Optional

USABLE = ("Active", "Scheduled")  # a reserved capacity's Status that runs instances or will: not Pending
# (its payment), Expired or Failed, whose instances SageMaker would not keep


def plan_window(plan: dict[str, Any], instance_type: str, now: datetime) -> tuple[str, Optional[datetime]]:
    """(state, end) of a training plan for the instances of `instance_type` (ml.TYPE), as
    DescribeTrainingPlan gives it. The end is that of the plan's reserved capacity of the type that
    holds now, carried on through each that starts by its end, or, where none holds now, of the next
    one to start (so carried on); None where none is left, or the plan is expired or failed. The
    state is the plan's Status in lower case; an active plan with nothing of the type holding now is
    "scheduled" while one is still ahead, else "expired"."""
    status = str(plan.get("Status", "unknown")).lower()
    if status in ("expired", "failed"):  # TrainingPlanStatus: its capacity is gone, or never came
        return status, None
    summaries = plan.get("ReservedCapacitySummaries") or [
        {"InstanceType": instance_type, "Status": plan.get("Status"), "StartTime": plan.get("StartTime"),
         "EndTime": plan.get("EndTime")}]  # none listed: the plan's own
    spans = [(s["StartTime"], s["EndTime"]) for s in summaries if s.get("InstanceType") == instance_type
             and s.get("Status") in USABLE and s.get("StartTime") and s.get("EndTime")]
    holding = any(start <= now < end for start, end in spans)
    ahead = sorted(start for start, _ in spans if start > now)
    at: Optional[datetime] = now if holding else (ahead[0] if ahead else None)
    end: Optional[datetime] = None
    while at is not None:
        later = [stop for start, stop in spans if start <= at < stop]
        if not later:
            break
        at = end = max(later)
    if status != "active" or holding:
        return status, end
    return ("scheduled" if ahead else "expired"), end
