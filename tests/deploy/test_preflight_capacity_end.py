"""fmcluster preflight and the end of the reserved capacity (issue 41): a training plan's status,
window, target, instance types and size (DescribeTrainingPlan); a Capacity Block's capacity and
interconnect status where EC2 names the block (DescribeCapacityBlockStatus); a window whose end
falls after the instances are terminated; and what the JSON report keeps of each for the plan.
moto has none of these calls: botocore's Stubber, on the shapes botocore validates, error answers
included."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from fmcluster.deploy.preflight import FAIL, PASS, WARN, Context, capacity, reservation_checks
from fmcluster.deploy.preflight.context import when
from fmcluster.spec import loader
from tests.support.moto_aws import mocked_aws
from tests.support.paths import ROOT
from tests.support.preflight import NOW, Clients, by_name, reservation, shown, stubbed, training_plan
from tests.support.specs import base_spec, validated, with_
from tests.support.ultraserver import CR, gb200

PLAN_ARN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/b200-pretrain"
BLOCK_ID = "cb-0123456789abcdef0"


def plan_spec(count=16):
    """A hyperpod-slurm cluster of one training-plan group of `count` p6-b200.48xlarge."""
    return validated(base_spec(orchestrator={"type": "hyperpod-slurm"}, node_groups=[
        {"name": "train", "instance_type": "p6-b200.48xlarge", "count": count,
         "capacity": {"type": "capacity-block", "training_plan_arn": PLAN_ARN}}]))


def plan_checks(spec, answer=None, error=None, window=None):
    """The reservations check of `spec` with DescribeTrainingPlan answering `answer` (or the
    client error `error`: code, HTTP status), and the context it ran in."""
    sagemaker, stub = stubbed("sagemaker", spec.region)
    if error:
        stub.add_client_error("describe_training_plan", error[0], f"{error[0]} answered", error[1],
                              expected_params={"TrainingPlanName": "b200-pretrain"})
    else:
        stub.add_response("describe_training_plan", answer or training_plan(spec.node_groups[0]),
                          {"TrainingPlanName": "b200-pretrain"})
    ctx = Context(spec, {"sagemaker": sagemaker}.__getitem__, NOW, window)
    checks = list(capacity.reservations(ctx))
    stub.assert_no_pending_responses()
    return checks, ctx


# ---- training plans ----------------------------------------------------------------------------

def test_an_active_plan_for_hyperpod_of_the_groups_type_and_size_passes_and_is_kept_for_the_plan():
    spec = plan_spec()
    checks, ctx = plan_checks(spec)
    assert [(c.name, c.status) for c in checks] == [
        ("training plan train: state", PASS), ("training plan train: instance type", PASS),
        ("training plan train: size", PASS)]
    assert by_name(checks, "training plan train: state").reason == (
        "b200-pretrain: Active training plan, 2026-11-30 12:00Z to 2026-12-07 12:00Z")
    assert ctx.read[PLAN_ARN] == {
        "id": PLAN_ARN, "kind": "training-plan", "state": "Active", "instance_type": "p6-b200.48xlarge",
        "instances": 16, "start": "2026-11-30T12:00:00Z", "end": "2026-12-07T12:00:00Z", "upfront_fee": "262080.00",
        "currency": "USD"}


@pytest.mark.parametrize(("status", "window", "expected"), [
    ("Scheduled", None, WARN), ("Pending", None, WARN), ("Scheduled", "inside", PASS),
    ("Expired", None, FAIL), ("Failed", None, FAIL),
])
def test_a_plans_status_is_checked_as_a_reservations_state(status, window, expected):
    spec = plan_spec()
    start, end = NOW + timedelta(days=1), NOW + timedelta(days=8)
    planned = (start + timedelta(hours=1), end - timedelta(hours=2)) if window else None
    checks, _ = plan_checks(spec, training_plan(spec.node_groups[0], status=status, start=start, end=end),
                            window=planned)
    state = by_name(checks, "training plan train: state")
    assert state.status == expected and state.reason.startswith(f"b200-pretrain: {status} training plan")
    if expected == WARN:
        assert state.hint == "pass --window START/END to check the planned window"
    if expected == FAIL:
        assert state.hint == "nodes cannot launch into it: buy or create a new one"


def test_a_plan_ending_within_a_day_warns_and_one_that_misses_the_window_fails():
    spec = plan_spec()
    checks, _ = plan_checks(spec, training_plan(spec.node_groups[0], end=NOW + timedelta(hours=20)))
    state = by_name(checks, "training plan train: state")
    assert state.status == WARN and state.reason.endswith("(ends within 24 h)")
    later = (NOW + timedelta(days=10), NOW + timedelta(days=12))
    checks, _ = plan_checks(spec, window=later)
    assert by_name(checks, "training plan train: window").status == FAIL


def test_a_plan_for_training_jobs_the_wrong_type_or_too_small_fails():
    spec = plan_spec()
    answer = training_plan(spec.node_groups[0], targets=("training-job",), instance_type="p5.48xlarge", total=8)
    checks, _ = plan_checks(spec, answer)
    target, kind, size = (by_name(checks, f"training plan train: {what}") for what in ("target", "instance type",
                                                                                         "size"))
    assert target.status == FAIL and target.reason == ("b200-pretrain reserves capacity for training-job, not for "
                                                       "SageMaker HyperPod clusters")
    assert kind.status == FAIL and kind.reason == ("b200-pretrain reserves ml.p5.48xlarge; node group train runs "
                                                   "ml.p6-b200.48xlarge")
    assert size.status == FAIL and size.reason == "b200-pretrain holds 8 instances; the node groups need up to 16"


@pytest.mark.parametrize(("error", "reason", "hint"), [
    (("ResourceNotFound", 400), "training plan b200-pretrain not found in us-east-1", "aws sagemaker "
                                                                                      "list-training-plans"),
    (("AccessDeniedException", 400), "access denied to DescribeTrainingPlan", "sagemaker:DescribeTrainingPlan"),
    (("ThrottlingException", 400), "DescribeTrainingPlan was throttled (ThrottlingException) after retries",
     "run preflight again in a minute"),
    (("InternalFailure", 500), "DescribeTrainingPlan failed on the AWS side: HTTP 500 InternalFailure",
     "AWS Health Dashboard"),
])
def test_a_plan_that_cannot_be_read_is_one_fail_row_with_a_hint(error, reason, hint):
    checks, ctx = plan_checks(plan_spec(), error=error)
    (check,) = checks
    assert (check.name, check.status, check.reason) == ("training plan train", FAIL, reason)
    assert hint in check.hint and ctx.read == {}


# ---- the end of a block against the planned window ------------------------------------------------

def cb_group(spec_dict=None):
    spec = validated(spec_dict or with_(base_spec(), "node_groups[0].capacity",
                                        {"type": "capacity-block", "reservation_id": CR}))
    return spec.node_groups[0]


@pytest.mark.parametrize(("group", "minutes"), [("instances", 30), ("ultraserver", 60)])
def test_a_window_that_ends_after_ec2_starts_terminating_warns(group, minutes):
    """The block covers the window, but its instances go from 30 minutes (60 for an UltraServer
    block) before its end: a run planned to its last minute is cut."""
    g = cb_group() if group == "instances" else cb_group(gb200())
    end = NOW + timedelta(days=2)
    r = reservation(g, end=end)
    until = end - timedelta(minutes=minutes - 5)
    window = [c for c in reservation_checks(g, r, "use1-az4", NOW, (NOW, until)) if c.name.endswith("window")]
    assert [c.status for c in window] == [WARN]
    assert window[0].reason == (f"{CR} ends {when(end)}, but its instances are terminated from "
                                f"{when(end - timedelta(minutes=minutes))} ({minutes} minutes before its end), before "
                                f"the planned window ends ({when(until)})")
    assert "fmcluster capacity extend" in window[0].hint
    clear = (NOW, end - timedelta(minutes=minutes))
    assert not [c for c in reservation_checks(g, r, "use1-az4", NOW, clear) if c.name.endswith("window")]


def test_an_on_demand_reservation_ending_with_the_window_is_no_warning():
    """Its instances outlive it (as On-Demand ones): nothing is cut."""
    g = cb_group(with_(base_spec(), "node_groups[0].capacity", {"type": "reservation", "reservation_id": CR}))
    end = NOW + timedelta(days=2)
    r = reservation(g, block=False, end=end)
    assert not [c for c in reservation_checks(g, r, "use1-az4", NOW, (NOW, end)) if c.name.endswith("window")]


@pytest.mark.parametrize("state", ["payment-failed", "unavailable", "unsupported"])
def test_a_block_in_a_state_that_takes_no_instances_fails(state):
    g = cb_group()
    checks = list(reservation_checks(g, reservation(g, state=state), "use1-az4", NOW, None))
    assert by_name(checks, f"reservation {g.name}: state").status == FAIL


# ---- a block's status where EC2 names the block ------------------------------------------------------

def block_spec():
    return validated(with_(base_spec(), "node_groups[0].capacity", {"type": "capacity-block", "reservation_id": CR}))


def status_checks(spec, statuses=None, error=None):
    ec2, stub = stubbed("ec2", spec.region)
    stub.add_response("describe_capacity_reservations", {"CapacityReservations": [
        reservation(spec.node_groups[0], block_id=BLOCK_ID)]}, {"CapacityReservationIds": [CR]})
    if error:
        stub.add_client_error("describe_capacity_block_status", error, f"{error} answered", 403,
                              expected_params={"CapacityBlockIds": [BLOCK_ID]})
    else:
        stub.add_response("describe_capacity_block_status", {"CapacityBlockStatuses": statuses},
                          {"CapacityBlockIds": [BLOCK_ID]})
    checks = list(capacity.reservations(Context(spec, {"ec2": ec2}.__getitem__, NOW)))
    stub.assert_no_pending_responses()
    return checks


def block_status(unavailable=0, interconnect=None):
    found = {"CapacityBlockId": BLOCK_ID, "TotalCapacity": 2, "TotalAvailableCapacity": 2 - unavailable,
             "TotalUnavailableCapacity": unavailable, "CapacityReservationStatuses": [
                 {"CapacityReservationId": CR, "TotalCapacity": 2, "TotalAvailableCapacity": 2 - unavailable,
                  "TotalUnavailableCapacity": unavailable}]}
    return {**found, "InterconnectStatus": interconnect} if interconnect else found


def test_capacity_a_status_check_keeps_from_use_warns():
    row = by_name(status_checks(block_spec(), [block_status(unavailable=1)]), "reservation gpu: block capacity")
    assert row.status == WARN and row.reason == (f"{BLOCK_ID}: 1 of its capacity of 2 unavailable (a failed system "
                                                 "status check): fewer nodes than the block holds can run")
    assert f"aws ec2 describe-capacity-block-status --capacity-block-ids {BLOCK_ID}" in row.hint


@pytest.mark.parametrize(("interconnect", "status"), [("ok", PASS), ("impaired", WARN), ("insufficient-data", None)])
def test_an_interconnect_is_a_row_where_ec2_reports_it(interconnect, status):
    checks = status_checks(block_spec(), [block_status(interconnect=interconnect)])
    rows = [c for c in checks if c.name == "reservation gpu: interconnect"]
    assert [c.status for c in rows] == ([status] if status else [])
    assert by_name(checks, "reservation gpu: block capacity").status == PASS


def test_a_block_the_status_does_not_list_warns():
    row = by_name(status_checks(block_spec(), []), "reservation gpu: block status")
    assert row.status == WARN and row.reason == f"DescribeCapacityBlockStatus does not list {BLOCK_ID}"


def test_access_denied_to_the_status_fails_that_row_only():
    checks = status_checks(block_spec(), error="UnauthorizedOperation")
    denied = [c for c in checks if c.status == FAIL]
    assert [(c.name, c.reason) for c in denied] == [
        ("reservation gpu: block status", "access denied to DescribeCapacityBlockStatus")]
    assert "allow ec2:DescribeCapacityBlockStatus" in denied[0].hint
    assert by_name(checks, "reservation gpu: size").status == PASS


# ---- the JSON report --------------------------------------------------------------------------------

def test_the_report_keeps_each_training_plans_window_and_fee(capsys):
    spec = loader.load(ROOT / "examples/p6-b200-hyperpod-slurm.yaml").spec
    with mocked_aws():
        shown(spec, "json", client=Clients(spec), now=NOW)
    (read,) = json.loads(capsys.readouterr().out)["reservations"]
    assert read == {"id": spec.node_groups[0].capacity.training_plan_arn, "kind": "training-plan", "state": "Active",
                    "instance_type": "p6-b200.48xlarge", "instances": 16, "start": "2026-11-30T12:00:00Z",
                    "end": "2026-12-07T12:00:00Z", "upfront_fee": "262080.00", "currency": "USD"}


def test_the_plan_shows_what_preflight_read_of_a_training_plan(tmp_path, capsys):
    """`fmcluster preflight SPEC --format json > REPORT`, then `fmcluster plan SPEC --preflight
    REPORT`: the training plan's window, hours and fee in the plan's reserved capacity."""
    from fmcluster.cli import main as cli

    example = ROOT / "examples/p6-b200-hyperpod-slurm.yaml"
    spec = loader.load(example).spec
    with mocked_aws():
        shown(spec, "json", client=Clients(spec), now=NOW)
    saved = tmp_path / "preflight.json"
    saved.write_text(capsys.readouterr().out)
    assert cli(["plan", str(example), "--preflight", str(saved)]) == 0
    out = capsys.readouterr().out
    section = out[out.index("Reserved capacity"):out.index("\nStorage\n")]
    lines = [" ".join(line.split()) for line in section.splitlines()]
    assert "window 2026-11-30T12:00:00Z to 2026-12-07T12:00:00Z, 168 h (Active, 16 instances)" in lines
    assert "cost USD 262,080.00 paid up front: the plan's whole price" in lines
    assert cli(["plan", str(example), "--preflight", str(saved), "--format", "json"]) == 0
    (held,) = json.loads(capsys.readouterr().out)["capacity"]
    assert (held["read"], held["hours"], held["total_cost"], held["currency"]) == (True, 168, 262080.0, "USD")
