"""`fmcluster capacity extend`: the extension offerings of a group's Capacity Block (or training
plan), cheapest first, and the purchase of one with the same rules as `buy`; a block that has
ended, is not one, or is an example id is refused before any extension call. botocore's Stubber
holds the shapes (moto 5.2 has none of these calls); the clock is passed in."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from fmcluster.deploy import capacity
from fmcluster.spec import loader
from tests.support.capacity import (
    NOW,
    PLAN_ARN,
    Clients,
    extension_offering,
    fake_credentials,  # noqa: F401  (the fixture of pytestmark)
    request,
    reservation,
    shown,
    spec_of,
)
from tests.support.moto_aws import mocked_aws
from tests.support.paths import ROOT

BLOCK = "cr-08f3a9c2b1d4e6f70"  # the spec's block: a real-looking id, not an example
EXTENSION = "cbe-0123456789abcdef0"
DESCRIBED = {"CapacityReservationIds": [BLOCK]}
ASKED = {"CapacityReservationId": BLOCK, "CapacityBlockExtensionDurationHours": 48}
PURCHASE = {"CapacityBlockExtensionOfferingId": EXTENSION, "CapacityReservationId": BLOCK}

pytestmark = pytest.mark.usefixtures("fake_credentials")


def own_spec():
    text = (ROOT / "examples/p5-pcs.yaml").read_text().replace("cr-0123456789abcdef0", BLOCK)
    return loader.load_text(text, "cluster.yaml").spec


def extending(clients, fmt="text", spec=None, confirm=None, **fields) -> int:
    fields = {"group": "gpu", "hours": 48, **fields}
    return shown(spec or own_spec(), request("extend", "cluster.yaml", **fields), fmt, client=clients, now=NOW,
                 confirm=confirm)


def test_extension_offerings_cheapest_first(capsys):
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_response("describe_capacity_reservations", {"CapacityReservations": [reservation(BLOCK)]},
                                 DESCRIBED)
        clients.ec2.add_response("describe_capacity_block_extension_offerings", {"CapacityBlockExtensionOfferings": [
            extension_offering("cbe-0ffffffffffffffff", fee="80000.00"), extension_offering(EXTENSION)]}, ASKED)
        assert extending(clients) == 0
        clients.done()
    out = capsys.readouterr().out
    assert f"{BLOCK}: active, 2026-11-29 09:00Z to 2026-12-06 09:00Z, 16 instances" in out
    assert "gpu: 16 x p5.48xlarge, Capacity Block extensions (DescribeCapacityBlockExtensionOfferings)" in out
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("  cbe-")]
    assert rows == [EXTENSION, "cbe-0ffffffffffffffff"]
    assert f"  {EXTENSION}  2026-12-06 09:00  2026-12-08 09:00  48     use1-az4  73,728.00    1,536.00" in out
    assert out.endswith(f"  fmcluster capacity extend cluster.yaml gpu {EXTENSION} --duration 2d --max-price "
                        "73728.00\n")


def test_no_extension_offered_exits_1(capsys):
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_response("describe_capacity_reservations", {"CapacityReservations": [reservation(BLOCK)]})
        clients.ec2.add_response("describe_capacity_block_extension_offerings",
                                 {"CapacityBlockExtensionOfferings": []}, ASKED)
        assert extending(clients) == 1
        clients.done()
    assert "no offering in this window" in capsys.readouterr().out


@pytest.mark.parametrize("held, said", [
    (reservation(BLOCK, state="expired", end=NOW - timedelta(hours=3)),
     f"the Capacity Block {BLOCK} ended at 2026-12-01 06:00Z (expired)"),
    (reservation(BLOCK, state="active", end=NOW), f"the Capacity Block {BLOCK} ended at 2026-12-01 09:00Z (active)"),
    (reservation(BLOCK, state="payment-failed"), f"the Capacity Block {BLOCK} is payment-failed: EC2 extends a block "
                                                 "only while it is active or scheduled"),
    (reservation(BLOCK, kind="default"), f"{BLOCK} is an On-Demand Capacity Reservation, not a Capacity Block"),
])
def test_a_block_that_ended_or_is_none_is_not_extended(held, said, capsys):
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_response("describe_capacity_reservations", {"CapacityReservations": [held]}, DESCRIBED)
        assert extending(clients, offering=EXTENSION, yes=True, max_price=100000) == 1
        clients.done()  # no extension offering asked for, none bought
    err = capsys.readouterr().err
    assert err.startswith(f"error: {said}") and "buy a new one: fmcluster capacity find cluster.yaml gpu" in err


def test_a_block_ec2_does_not_know(capsys):
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound",
                                     "nope", 400)
        assert extending(clients) == 1
    assert capsys.readouterr().err.startswith(f"error: EC2 has no capacity reservation {BLOCK}\n")


def test_yes_within_the_max_price_extends_and_nothing_is_deployed(capsys):
    bought = {"CapacityReservationId": BLOCK, "InstanceType": "p5.48xlarge", "InstanceCount": 16,
              "CapacityBlockExtensionOfferingId": EXTENSION, "CapacityBlockExtensionDurationHours": 48,
              "CapacityBlockExtensionStatus": "payment-pending",
              "CapacityBlockExtensionStartDate": NOW + timedelta(days=5),
              "CapacityBlockExtensionEndDate": NOW + timedelta(days=7), "UpfrontFee": "73728.00",
              "CurrencyCode": "USD"}
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_response("describe_capacity_reservations", {"CapacityReservations": [reservation(BLOCK)]})
        clients.ec2.add_response("describe_capacity_block_extension_offerings", {"CapacityBlockExtensionOfferings": [
            extension_offering(EXTENSION)]}, ASKED)
        clients.ec2.add_response("purchase_capacity_block_extension", {"CapacityBlockExtensions": [bought]}, PURCHASE)
        assert extending(clients, "json", offering=EXTENSION, yes=True, max_price=73728) == 0
        clients.done()
    report = json.loads(capsys.readouterr().out)
    assert report["bought"] == {"offering": EXTENSION, "id": BLOCK, "state": "payment-pending",
                                "end": "2026-12-08T09:00:00Z", "upfront_fee": "73728.00", "currency": "USD",
                                "written": []}
    assert report["next"][0].startswith("nothing to deploy: the block keeps its reservation id")


def test_asked_on_a_terminal_and_answered_no(capsys):
    asked = []
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_response("describe_capacity_reservations", {"CapacityReservations": [reservation(BLOCK)]})
        clients.ec2.add_response("describe_capacity_block_extension_offerings", {"CapacityBlockExtensionOfferings": [
            extension_offering(EXTENSION)]})
        assert extending(clients, offering=EXTENSION, confirm=lambda q: asked.append(q) or False) == 1
        clients.done()
    assert asked == [f"Buy Capacity Block extension {EXTENSION} for node group gpu: 16 x p5.48xlarge in use1-az4, "
                     "2026-12-06 09:00Z to 2026-12-08 09:00Z, for USD 73,728.00 up front (USD 1,536.00 an hour)? "
                     "Type yes to buy: "]
    assert capsys.readouterr().err == "error: not confirmed: nothing bought\n"


def test_an_extension_above_the_max_price_is_refused(capsys):
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_response("describe_capacity_reservations", {"CapacityReservations": [reservation(BLOCK)]})
        clients.ec2.add_response("describe_capacity_block_extension_offerings", {"CapacityBlockExtensionOfferings": [
            extension_offering(EXTENSION)]})
        assert extending(clients, offering=EXTENSION, yes=True, max_price=70000) == 1
        clients.done()
    assert capsys.readouterr().err.startswith(f"error: {EXTENSION} costs USD 73,728.00 up front, above --max-price "
                                              "70,000.00: nothing bought\n")


@pytest.mark.parametrize("code, said", [
    ("InsufficientCapacity", "PurchaseCapacityBlockExtension: not enough capacity (InsufficientCapacity: no); "
                             "nothing bought"),
    ("UnauthorizedOperation", "access denied to PurchaseCapacityBlockExtension; nothing bought"),
])
def test_a_refused_extension(code, said, capsys):
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_response("describe_capacity_reservations", {"CapacityReservations": [reservation(BLOCK)]})
        clients.ec2.add_response("describe_capacity_block_extension_offerings", {"CapacityBlockExtensionOfferings": [
            extension_offering(EXTENSION)]})
        clients.ec2.add_client_error("purchase_capacity_block_extension", code, "no", 400, expected_params=PURCHASE)
        assert extending(clients, offering=EXTENSION, yes=True, max_price=80000) == 1
        clients.done()
    assert capsys.readouterr().err.startswith(f"error: {said}\n")


def test_access_denied_to_the_extension_offerings(capsys):
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_response("describe_capacity_reservations", {"CapacityReservations": [reservation(BLOCK)]})
        clients.ec2.add_client_error("describe_capacity_block_extension_offerings", "UnauthorizedOperation", "no",
                                     403)
        assert extending(clients) == 1
    assert capsys.readouterr().err == ("error: access denied to DescribeCapacityBlockExtensionOfferings\n  hint: "
                                       "allow ec2:DescribeCapacityBlockExtensionOfferings to the credentials' role "
                                       "or user (IAM)\n")


@pytest.mark.parametrize("spec, fields, error", [
    ("own", {"hours": 15 * 24}, "an extension lasts whole days up to 14 days, then whole weeks up to 182 days: 15 "
                                "days is not one; 14 days or 21 days is"),
    ("own", {"hours": None}, "give --duration: how much longer, such as 2d"),
    ("examples/p5-pcs.yaml", {}, "cr-0123456789abcdef0: "),
    ("examples/p6-b300-pcs.yaml", {"group": "b300"}, "node group b300 holds no Capacity Block to extend "
                                                     "(capacity.type on-demand)"),
])
def test_what_cannot_be_extended_exits_2_with_no_call(spec, fields, error, capsys):
    with mocked_aws():
        clients = Clients()
        assert extending(clients, spec=own_spec() if spec == "own" else spec_of(spec), **fields) == 2
        clients.done()
    assert capsys.readouterr().err.startswith(f"error: {error}")


def test_a_training_plan_is_extended_through_sagemaker(capsys):
    text = (ROOT / "examples/p6-b200-hyperpod-slurm.yaml").read_text().replace(
        "arn:aws:sagemaker:us-east-1:111122223333:training-plan/b200-pretrain", PLAN_ARN)
    spec = loader.load_text(text, "hp.yaml").spec
    plan = {"TrainingPlanArn": PLAN_ARN, "TrainingPlanName": "llm-b200-b200-20261203", "Status": "Active",
            "StartTime": NOW - timedelta(days=2), "EndTime": NOW + timedelta(days=5), "TotalInstanceCount": 16}
    offer = {"TrainingPlanExtensionOfferingId": "tpe-0123", "AvailabilityZone": "us-east-1d",
             "StartDate": NOW + timedelta(days=5), "EndDate": NOW + timedelta(days=7), "DurationHours": 48,
             "UpfrontFee": "120000.00", "CurrencyCode": "USD"}
    extended = {"TrainingPlanExtensionOfferingId": "tpe-0123", "StartDate": NOW + timedelta(days=5),
                "EndDate": NOW + timedelta(days=7), "Status": "Pending", "PaymentStatus": "payment-pending",
                "DurationHours": 48, "UpfrontFee": "120000.00", "CurrencyCode": "USD"}
    with mocked_aws():
        clients = Clients()
        clients.sagemaker.add_response("describe_training_plan", plan, {"TrainingPlanName": PLAN_ARN})
        clients.sagemaker.add_response("search_training_plan_offerings", {"TrainingPlanOfferings": [],
                                       "TrainingPlanExtensionOfferings": [offer]},
                                       {"TrainingPlanArn": PLAN_ARN, "DurationHours": 48})
        clients.sagemaker.add_response("extend_training_plan", {"TrainingPlanExtensions": [extended]},
                                       {"TrainingPlanExtensionOfferingId": "tpe-0123"})
        report = capacity.run(spec, request("extend", "hp.yaml", group="train", hours=48, offering="tpe-0123",
                                            yes=True, max_price=120000), client=clients, now=NOW)
        clients.done()
    assert capacity.exit_code(report) == 0, report.error
    assert (report.bought.id, report.bought.state, report.bought.end) == (PLAN_ARN, "payment-pending",
                                                                          NOW + timedelta(days=7))
    assert report.bought.offer.where == "use1-az4" and report.bought.offer.instances == 16
    assert report.next[0] == "nothing to deploy: the training plan keeps its ARN, and its end is SageMaker's"


def test_a_training_plan_that_expired_is_not_extended(capsys):
    text = (ROOT / "examples/p6-b200-hyperpod-slurm.yaml").read_text().replace(
        "arn:aws:sagemaker:us-east-1:111122223333:training-plan/b200-pretrain", PLAN_ARN)
    spec = loader.load_text(text, "hp.yaml").spec
    plan = {"TrainingPlanArn": PLAN_ARN, "TrainingPlanName": "x", "Status": "Expired",
            "EndTime": NOW - timedelta(days=1)}
    with mocked_aws():
        clients = Clients()
        clients.sagemaker.add_response("describe_training_plan", plan)
        report = capacity.run(spec, request("extend", "hp.yaml", group="train", hours=48), client=clients, now=NOW)
        clients.done()
    assert capacity.exit_code(report) == 1
    assert report.error == f"the training plan {PLAN_ARN} ended at 2026-11-30 09:00Z (Expired)"
