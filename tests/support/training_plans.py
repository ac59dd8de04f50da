"""SageMaker DescribeTrainingPlan's answers for the tests of the Lambda handlers that read a plan's
window (fmcluster_cdk/constructs/handler_lib/training_plans.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
ARN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5-pretrain"
P5 = "ml.p5.48xlarge"


def reserved(start: timedelta, end: timedelta, instance_type: str = P5, now: datetime = NOW) -> dict:
    """A reserved capacity of the plan, from `now` + start to `now` + end."""
    return {"ReservedCapacityArn": f"{ARN}/rc-{int(start.total_seconds())}", "InstanceType": instance_type,
            "TotalInstanceCount": 4, "Status": "Active", "StartTime": now + start, "EndTime": now + end}


def plan(status: str = "Active", *summaries: dict, now: datetime = NOW, arn: str = ARN) -> dict:
    """The plan (its own times: from a day before `now` to 9 days after) with `summaries`."""
    return {"TrainingPlanArn": arn, "TrainingPlanName": arn.rsplit("/", 1)[-1], "Status": status,
            "StartTime": now - timedelta(days=1), "EndTime": now + timedelta(days=9),
            "ReservedCapacitySummaries": list(summaries)}
