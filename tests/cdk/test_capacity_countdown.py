"""The capacity countdown's handler (fmcluster_cdk/constructs/observability/handlers/capacity_countdown):
it reads each Capacity Block's end from EC2 and each training plan's from SageMaker (botocore's
Stubber, on their service models' shapes: moto has neither call) and puts the hours left in
CloudWatch (moto, read back). Every run is given its time; none reads the clock."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import boto3
import pytest
from botocore.stub import Stubber

from fmcluster.observability import capacity as capacity_end
from fmcluster_cdk.constructs.observability import capacity
from tests.support import lambda_handlers
from tests.support import training_plans as plans
from tests.support.moto_aws import mocked_aws

handler = lambda_handlers.load(capacity.HANDLER / "index.py", "capacity_countdown")

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
RID = "cr-0123456789abcdef0"
PLAN = "b200-pretrain"
PLAN_ARN = f"arn:aws:sagemaker:us-east-1:111122223333:training-plan/{PLAN}"
BLOCK = {"capacity": RID, "reservation_id": RID}
TRAINING_PLAN = {"capacity": PLAN, "training_plan": PLAN}


def env(*capacities) -> dict:
    return {"CLUSTER": "llm-pretrain", "NAMESPACE": capacity_end.NAMESPACE, "METRIC": capacity_end.METRIC,
            "CAPACITIES": json.dumps(list(capacities))}


def reservation(state: str, end: datetime | None) -> dict:
    """An entry of DescribeCapacityReservations for a Capacity Block."""
    found = {"CapacityReservationId": RID, "InstanceType": "p5.48xlarge", "AvailabilityZoneId": "use1-az4",
             "TotalInstanceCount": 16, "AvailableInstanceCount": 0, "State": state, "ReservationType": "capacity-block",
             "StartDate": NOW - timedelta(days=1), "InstanceMatchCriteria": "targeted"}
    if end is not None:
        found.update(EndDate=end, EndDateType="limited")
    return found


def training_plan(status: str, end: datetime) -> dict:
    """DescribeTrainingPlan's answer."""
    return {"TrainingPlanArn": PLAN_ARN, "TrainingPlanName": PLAN, "Status": status,
            "StartTime": NOW - timedelta(days=1), "EndTime": end, "DurationHours": 168, "DurationMinutes": 0,
            "UpfrontFee": "262080.00", "CurrencyCode": "USD", "TotalInstanceCount": 16,
            "AvailableInstanceCount": 16, "InUseInstanceCount": 0, "TargetResources": ["hyperpod-cluster"]}


@pytest.fixture
def clients():
    """Stubbed EC2 and SageMaker, moto's CloudWatch."""
    with mocked_aws():
        made = {name: boto3.client(name, region_name="us-east-1") for name in ("ec2", "sagemaker", "cloudwatch")}
        stubs = {name: Stubber(made[name]) for name in ("ec2", "sagemaker")}
        with stubs["ec2"], stubs["sagemaker"]:  # active inside
            yield made, stubs
            stubs["ec2"].assert_no_pending_responses()
            stubs["sagemaker"].assert_no_pending_responses()


def block_is(stubs, found: list) -> None:
    stubs["ec2"].add_response("describe_capacity_reservations", {"CapacityReservations": found},
                              {"CapacityReservationIds": [RID]})


def plan_is(stubs, answer: dict) -> None:
    stubs["sagemaker"].add_response("describe_training_plan", answer, {"TrainingPlanName": PLAN})


def put(made, capacity_name: str) -> list[float]:
    """What CloudWatch holds of the countdown of `capacity_name` around NOW."""
    answer = made["cloudwatch"].get_metric_statistics(
        Namespace="fmcluster", MetricName="HoursToCapacityEnd", StartTime=NOW - timedelta(minutes=5),
        EndTime=NOW + timedelta(minutes=5), Period=60, Statistics=["Minimum"],
        Dimensions=[{"Name": "Cluster", "Value": "llm-pretrain"}, {"Name": "Capacity", "Value": capacity_name}])
    return [point["Minimum"] for point in answer["Datapoints"]]


def run(made, *capacities, now=NOW):
    return handler.count_down(made, env(*capacities), now)


def test_the_hours_to_a_blocks_end_are_put_for_its_cluster_and_reservation(clients):
    made, stubs = clients
    block_is(stubs, [reservation("active", NOW + timedelta(days=2, minutes=30))])
    result = run(made, BLOCK)
    assert result["readings"] == [{"capacity": RID, "state": "active", "end": "2026-12-03T12:30:00Z", "hours": 48.5}]
    assert result["put"] == 1 and "errors" not in result
    assert put(made, RID) == [48.5]


def test_a_training_plan_is_read_by_its_name(clients):
    made, stubs = clients
    plan_is(stubs, training_plan("Active", NOW + timedelta(minutes=90)))
    result = run(made, TRAINING_PLAN)
    assert result["readings"][0]["hours"] == 1.5
    assert put(made, PLAN) == [1.5]


@pytest.mark.parametrize("summaries, reading", [
    # each group's type has its window; the first to end is counted (its nodes go first)
    ([("ml.p6-b200.48xlarge", -24, 30), ("ml.p5.48xlarge", -24, 6)], ("active", 6.0)),
    # the B200 window is carried on by an extension that starts as it ends; the P5 one is over: the
    # active window counts, not the one that has ended
    ([("ml.p6-b200.48xlarge", -24, 2), ("ml.p6-b200.48xlarge", 2, 50), ("ml.p5.48xlarge", -24, -1)], ("active", 50.0)),
    # another type's capacity, on no group of the cluster, is not counted
    ([("ml.p6-b200.48xlarge", -24, 30), ("ml.p4d.24xlarge", -24, 1), ("ml.p5.48xlarge", -24, 40)], ("active", 30.0)),
])
def test_a_training_plan_counts_to_the_first_end_of_its_groups_windows(clients, summaries, reading):
    """The plan's own EndTime (9 days on) is not when the nodes go: each group's reserved capacity of
    its type is (training_plans.plan_window, as the nodes read it)."""
    made, stubs = clients
    plan_is(stubs, plans.plan("Active", *[plans.reserved(timedelta(hours=start), timedelta(hours=end), kind)
                                          for kind, start, end in summaries], arn=PLAN_ARN))
    counted = {**TRAINING_PLAN, "instance_types": ["ml.p5.48xlarge", "ml.p6-b200.48xlarge"]}
    (found,) = run(made, counted)["readings"]
    assert (found["state"], found["hours"]) == reading


def test_a_scheduled_block_counts_to_its_end_and_a_past_end_is_zero(clients):
    made, stubs = clients
    block_is(stubs, [reservation("scheduled", NOW + timedelta(days=10))])
    assert run(made, BLOCK)["readings"][0]["hours"] == 240
    block_is(stubs, [reservation("active", NOW - timedelta(minutes=1))])  # EC2 has not said expired yet
    assert run(made, BLOCK)["readings"][0]["hours"] == 0


@pytest.mark.parametrize("state", ["expired", "cancelled", "failed", "payment-failed", "unavailable"])
def test_a_block_that_takes_no_instances_counts_zero_whatever_its_end(clients, state):
    made, stubs = clients
    block_is(stubs, [reservation(state, NOW + timedelta(days=3))])
    assert run(made, BLOCK)["readings"] == [{"capacity": RID, "state": state, "end": "2026-12-04T12:00:00Z",
                                             "hours": 0.0}]
    assert put(made, RID) == [0.0]


@pytest.mark.parametrize("status", ["Expired", "Failed"])
def test_an_expired_or_failed_training_plan_counts_zero(clients, status):
    made, stubs = clients
    plan_is(stubs, training_plan(status, NOW + timedelta(days=3)))
    assert run(made, TRAINING_PLAN)["readings"][0]["hours"] == 0


def test_a_capacity_that_is_gone_counts_zero(clients):
    made, stubs = clients
    stubs["ec2"].add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound",
                                  f"The capacity reservation ID '{RID}' does not exist", 400,
                                  expected_params={"CapacityReservationIds": [RID]})
    stubs["sagemaker"].add_client_error("describe_training_plan", "ResourceNotFound",
                                        f"Training plan {PLAN} does not exist", 400,
                                        expected_params={"TrainingPlanName": PLAN})
    result = run(made, BLOCK, TRAINING_PLAN)
    assert [(r["state"], r["hours"]) for r in result["readings"]] == [("not found", 0.0), ("not found", 0.0)]
    assert put(made, RID) == [0.0] and put(made, PLAN) == [0.0]


def test_a_reservation_without_an_end_date_gets_no_reading(clients):
    made, stubs = clients
    block_is(stubs, [reservation("active", None)])
    result = run(made, BLOCK)
    assert result["readings"][0]["hours"] is None and result["put"] == 0
    assert made["cloudwatch"].list_metrics(Namespace="fmcluster")["Metrics"] == []


def test_one_unreadable_capacity_stops_neither_the_others_nor_their_readings_but_fails_the_run(clients, monkeypatch):
    """Throttled after botocore's retries: the plan is still read and put; the run then fails, so
    that the function's Errors metric and its log show it."""
    made, stubs = clients
    stubs["ec2"].add_client_error("describe_capacity_reservations", "RequestLimitExceeded", "Request limit exceeded.",
                                  503, expected_params={"CapacityReservationIds": [RID]})
    plan_is(stubs, training_plan("Scheduled", NOW + timedelta(days=8)))
    for name, value in env(BLOCK, TRAINING_PLAN).items():
        monkeypatch.setenv(name, value)
    with pytest.raises(RuntimeError, match=f"could not read {RID}: .*RequestLimitExceeded"):
        handler.handler({}, None, clients=made, now=NOW)
    assert put(made, PLAN) == [192.0] and put(made, RID) == []


def test_the_handler_reads_what_the_stack_gives_it(clients, monkeypatch):
    """The environment as CapacityCountdown writes it; the result as the log line shows it."""
    made, stubs = clients
    block_is(stubs, [reservation("active", NOW + timedelta(hours=23))])
    plan_is(stubs, training_plan("Active", NOW + timedelta(days=4)))
    for name, value in env(BLOCK, TRAINING_PLAN).items():
        monkeypatch.setenv(name, value)
    result = handler.handler({"detail-type": "Scheduled Event"}, None, clients=made, now=NOW)
    assert [r["hours"] for r in result["readings"]] == [23.0, 96.0] and result["put"] == 2


# ---- the construct's props ---------------------------------------------------------------------

ALARM = capacity.CountdownAlarm(name="fmcluster-demo-cr-1-last-day", hours=24, description="a day left")


@pytest.mark.parametrize(("capacities", "every", "period", "message"), [
    ([], 5, 15, "a capacity or more, read every minute or more, over a period of at least one reading"),
    ([capacity.CountedCapacity(capacity="cr-1", label="cr-1", alarms=(ALARM,), reservation_id="cr-1")], 15, 5,
     "a capacity or more, read every minute or more, over a period of at least one reading"),
    ([capacity.CountedCapacity(capacity="cr-1", label="cr-1", alarms=(ALARM,))], 5, 15,
     "each capacity names exactly one of reservation_id and training_plan_arn"),
    ([capacity.CountedCapacity(capacity="cr-1", label="cr-1", alarms=(ALARM,), reservation_id="cr-1",
                               training_plan_arn=PLAN_ARN)], 5, 15,
     "each capacity names exactly one of reservation_id and training_plan_arn"),
])
def test_the_countdown_refuses_props_it_cannot_count_with(capacities, every, period, message):
    import aws_cdk as cdk

    from fmcluster_cdk.errors import ConstructError

    stack = cdk.Stack(cdk.App(), "demo-observability")
    with pytest.raises(ConstructError) as raised:
        capacity.CapacityCountdown(stack, "CapacityCountdown", cluster="demo", capacities=capacities,
                                   namespace="fmcluster", metric_name="HoursToCapacityEnd", every_minutes=every,
                                   period_minutes=period)
    assert str(raised.value) == f"demo-observability/CapacityCountdown: {message}"
