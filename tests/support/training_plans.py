"""SageMaker DescribeTrainingPlan's answers for the tests of the Lambda handlers that read a plan's
window (fmcluster_cdk/constructs/handler_lib/training_plans.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
ARN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5-pretrain"
P5 = "ml.p5.48xlarge"


def reserved(start: timedelta, end: timedelta, instance_type: str = P5, now: datetime = NOW,
             status: str = "Active") -> dict:
    """A reserved capacity of the plan, from `now` + start to `now` + end."""
    return {"ReservedCapacityArn": f"{ARN}/rc-{int(start.total_seconds())}", "InstanceType": instance_type,
            "TotalInstanceCount": 4, "Status": status, "StartTime": now + start, "EndTime": now + end}


def plan(status: str = "Active", *summaries: dict, now: datetime = NOW, arn: str = ARN) -> dict:
    """The plan (its own times: from a day before `now` to 9 days after) with `summaries`."""
    return {"TrainingPlanArn": arn, "TrainingPlanName": arn.rsplit("/", 1)[-1], "Status": status,
            "StartTime": now - timedelta(days=1), "EndTime": now + timedelta(days=9),
            "ReservedCapacitySummaries": list(summaries)}


H = timedelta(hours=1)
# (DescribeTrainingPlan's answer, the window of P5 at NOW as plan_window reads it, the end the nodes
# read: that of a window of P5 holding now, None where none holds): the cases the functions' reader
# (fmcluster_cdk/constructs/handler_lib/training_plans.py) and the nodes' own
# (programs/capacity-end.sh, plan_read) are both held to
CASES = [
    # the reserved capacity of the group's type that holds now ends the window
    (plan("Active", reserved(-H, 2 * H), reserved(5 * H, 9 * H)), ("active", NOW + 2 * H), NOW + 2 * H),
    # one that starts as it ends carries it on (an extension), through the next
    (plan("Active", reserved(-H, 2 * H), reserved(2 * H, 3 * H), reserved(3 * H, 4 * H)), ("active", NOW + 4 * H),
     NOW + 4 * H),
    # another type's capacity is not this group's
    (plan("Active", reserved(-H, 2 * H), reserved(-H, 8 * H, "ml.p5e.48xlarge")), ("active", NOW + 2 * H),
     NOW + 2 * H),
    # an extension Pending its payment, or Failed, does not carry it on; a Scheduled one does
    (plan("Active", reserved(-H, 2 * H), reserved(2 * H, 8 * H, status="Pending")), ("active", NOW + 2 * H),
     NOW + 2 * H),
    (plan("Active", reserved(-H, 2 * H), reserved(2 * H, 8 * H, status="Failed")), ("active", NOW + 2 * H),
     NOW + 2 * H),
    (plan("Active", reserved(-H, 2 * H), reserved(2 * H, 8 * H, status="Scheduled")), ("active", NOW + 8 * H),
     NOW + 8 * H),
    # in a gap between two: waiting for the next, which ends the window it opens (carried on)
    (plan("Active", reserved(-3 * H, -H), reserved(H, 2 * H), reserved(2 * H, 5 * H)), ("scheduled", NOW + 5 * H),
     None),
    # after the last: over
    (plan("Active", reserved(-3 * H, -H)), ("expired", None), None),
    # capacities listed, none of the group's type: nothing (not the plan's own times)
    (plan("Active", reserved(-H, 8 * H, "ml.p5e.48xlarge")), ("expired", None), None),
    # none listed: the plan's own times and Status
    (plan("Active"), ("active", NOW + timedelta(days=9)), NOW + timedelta(days=9)),
    (plan("Pending"), ("pending", None), None),
    (plan("Scheduled", reserved(H, 2 * H, status="Scheduled")), ("scheduled", NOW + 2 * H), None),
    # the plan's Status says Scheduled or Pending, a capacity of the type holds all the same: its end
    (plan("Scheduled", reserved(-H, 2 * H)), ("scheduled", NOW + 2 * H), NOW + 2 * H),
    (plan("Pending", reserved(-H, 2 * H)), ("pending", NOW + 2 * H), NOW + 2 * H),
    # gone, or never came: no end to count to, whatever a capacity says
    (plan("Expired"), ("expired", None), None), (plan("Failed", reserved(H, 2 * H)), ("failed", None), None),
    (plan("Expired", reserved(-H, 2 * H)), ("expired", None), None),
]
