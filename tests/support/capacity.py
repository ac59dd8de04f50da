"""Running `fmcluster capacity` without the network: moto for what it implements (STS, EC2's
DescribeAvailabilityZones) and botocore's Stubber, which holds every request and answer to the
service models' shapes, for what moto 5.2 lacks (Capacity Block offerings, purchases and
extensions, DescribeCapacityReservations, SageMaker training plans). Not a test module. Shared by
tests/deploy/test_capacity*.py."""

from __future__ import annotations

import sys
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from fmcluster.deploy import capacity
from fmcluster.deploy.capacity.report import Request
from fmcluster.spec import loader
from tests.support.paths import ROOT
from tests.support.preflight import Split, client, stubbed

FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing"}
NOW = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)  # the time every capacity test runs at
START = datetime(2026, 12, 3, 11, 30, tzinfo=timezone.utc)  # Capacity Blocks start and end at 11:30 UTC
WEEK = 7 * 24
# moto's us-east-1: AZ names and IDs (DescribeAvailabilityZones)
ZONE = {"use1-az4": "us-east-1d", "use1-az6": "us-east-1a", "use1-az1": "us-east-1b"}
EC2_CALLS = ("describe_capacity_block_offerings", "purchase_capacity_block", "describe_capacity_reservations",
             "describe_capacity_block_extension_offerings", "purchase_capacity_block_extension")
BOUGHT = "cr-0b3f6a1c9e2d47580"  # the reservation a purchase answers
PLAN_ARN = "arn:aws:sagemaker:us-east-1:210987654321:training-plan/llm-b200-b200-20261203"


@pytest.fixture
def fake_credentials(monkeypatch):
    """moto's credentials in the environment, and nothing else of AWS's (no profile, no instance
    metadata): what a test module of `fmcluster capacity` uses for every test."""
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def spec_of(example: str):
    result = loader.load(ROOT / example)
    assert result.spec is not None, result.diagnostics
    return result.spec


def block_offering(offering_id: str = "cb-0123456789abcdef0", az_id: str = "use1-az4", *, start: datetime = START,
                   hours: int = WEEK, count: int = 16, fee: str = "258048.00", instance_type: str = "p5.48xlarge",
                   **more) -> dict:
    """A CapacityBlockOffering (botocore's shape) of `count` x `instance_type` in AZ `az_id`."""
    found = {"CapacityBlockOfferingId": offering_id, "InstanceType": instance_type, "AvailabilityZone": ZONE[az_id],
             "InstanceCount": count, "StartDate": start, "EndDate": start + timedelta(hours=hours),
             "CapacityBlockDurationHours": hours, "CapacityBlockDurationMinutes": 0, "UpfrontFee": fee,
             "CurrencyCode": "USD", "Tenancy": "default", **more}
    return found


def plan_offering(offering_id: str = "tpo-0123456789abcdef", az: str = "us-east-1d", *, start: datetime = START,
                  hours: int = WEEK, count: int = 16, fee: str = "480000.00",
                  instance_type: str = "ml.p6-b200.48xlarge") -> dict:
    """A TrainingPlanOffering (botocore's shape) of one reserved capacity."""
    return {"TrainingPlanOfferingId": offering_id, "TargetResources": ["hyperpod-cluster"], "DurationHours": hours,
            "DurationMinutes": 0, "UpfrontFee": fee, "CurrencyCode": "USD", "ReservedCapacityOfferings": [
                {"ReservedCapacityType": "Instance", "InstanceType": instance_type, "InstanceCount": count,
                 "AvailabilityZone": az, "DurationHours": hours, "DurationMinutes": 0, "StartTime": start,
                 "EndTime": start + timedelta(hours=hours)}]}


def reservation(reservation_id: str, *, state: str = "active", start: datetime = NOW - timedelta(days=2),
                end: datetime = NOW + timedelta(days=5), count: int = 16, kind: str = "capacity-block") -> dict:
    """A CapacityReservation of DescribeCapacityReservations (a Capacity Block's by default)."""
    return {"CapacityReservationId": reservation_id, "InstanceType": "p5.48xlarge", "AvailabilityZoneId": "use1-az4",
            "AvailabilityZone": "us-east-1d", "TotalInstanceCount": count, "AvailableInstanceCount": 0,
            "State": state, "StartDate": start, "EndDate": end, "ReservationType": kind,
            "InstancePlatform": "Linux/UNIX"}


def extension_offering(offering_id: str = "cbe-0123456789abcdef0", *, start: datetime = NOW + timedelta(days=5),
                       hours: int = 48, fee: str = "73728.00", reservation_id: str = "") -> dict:
    """A CapacityBlockExtensionOffering: `hours` more from the block's end now (`start`)."""
    return {"CapacityBlockExtensionOfferingId": offering_id, "InstanceType": "p5.48xlarge", "InstanceCount": 16,
            "AvailabilityZone": "us-east-1d", "AvailabilityZoneId": "use1-az4", "StartDate": NOW - timedelta(days=2),
            "CapacityBlockExtensionStartDate": start, "CapacityBlockExtensionEndDate": start + timedelta(hours=hours),
            "CapacityBlockExtensionDurationHours": hours, "UpfrontFee": fee, "CurrencyCode": "USD",
            "Tenancy": "default"}


class Clients:
    """A client per service: moto's STS and EC2 (its zones), with the EC2 calls moto lacks and
    SageMaker on Stubbers (`ec2`, `sagemaker`: queue answers and errors on them)."""

    def __init__(self, region: str = "us-east-1") -> None:
        stub_ec2, self.ec2 = stubbed("ec2", region)
        self.sagemaker_client, self.sagemaker = stubbed("sagemaker", region)
        self._ec2 = Split(client("ec2", region)[0], stub_ec2, EC2_CALLS)
        self._sts = client("sts", region)[0]

    def __call__(self, service: str):
        return {"ec2": self._ec2, "sagemaker": self.sagemaker_client, "sts": self._sts}[service]

    def done(self) -> None:
        """Every answer queued was asked for."""
        self.ec2.assert_no_pending_responses()
        self.sagemaker.assert_no_pending_responses()


def request(action: str, spec_path: str, **fields) -> Request:
    if "max_price" in fields and fields["max_price"] is not None:
        fields["max_price"] = Decimal(str(fields["max_price"]))
    return Request(action, spec_path, **fields)


def shown(spec, req: Request, fmt: str = "text", **run) -> int:
    """`fmcluster capacity ...` with the clients of `run`, printed as the command line prints it:
    its exit code."""
    report = capacity.run(spec, req, **run)
    out, err = capacity.render(report, fmt)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return capacity.exit_code(report)
