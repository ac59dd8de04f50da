"""fmcluster preflight, without the network: moto for what it implements (caller identity, zones
by AZ ID, instance type offerings, EKS/SageMaker/FSx list calls), botocore's Stubber for what it
lacks (capacity reservations and Capacity Blocks, EC2 service quotas, AWS PCS)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError
from botocore.stub import Stubber
from moto import mock_aws

from fmcluster import loader, preflight
from fmcluster.preflight import FAIL, PASS, WARN, Preflight, reservation_checks
from tests.specs import base_spec, validated, with_

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "examples").glob("*.yaml"))
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing"}


@pytest.fixture(autouse=True)
def credentials(monkeypatch):
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


class Split:
    """A client whose `operations` go to a Stubber-backed client and everything else to moto
    (which lacks DescribeCapacityReservations)."""

    def __init__(self, base, stubbed, operations=("describe_capacity_reservations",)) -> None:
        self.base, self.stubbed, self.operations = base, stubbed, operations

    def __getattr__(self, name):
        return getattr(self.stubbed if name in self.operations else self.base, name)


def stubbed(service: str, region: str):
    client = boto3.client(service, region_name=region)
    stubber = Stubber(client)
    stubber.activate()
    return client, stubber


def reservation(spec_group, az_id="use1-az4", *, block=True, state="active", start=NOW - timedelta(days=1),
                end=NOW + timedelta(days=6), total=None, available=None, instance_type=None, rid=None) -> dict:
    total = spec_group.max_nodes if total is None else total
    found = {"CapacityReservationId": rid or spec_group.capacity.reservation_id or "cr-0123456789abcdef0",
            "InstanceType": instance_type or spec_group.instance_type, "AvailabilityZoneId": az_id,
            "AvailabilityZone": "us-east-1d", "TotalInstanceCount": total,
            "AvailableInstanceCount": total if available is None else available, "State": state,
            "StartDate": start, "EndDate": end, "ReservationType": "capacity-block" if block else "default",
            "InstancePlatform": "Linux/UNIX"}
    return {key: value for key, value in found.items() if value is not None}


class Clients:
    """moto clients, with Stubber-backed EC2 reservations, Service Quotas and PCS."""

    def __init__(self, spec, reservations=(), quota=10_000.0) -> None:
        region = spec.region
        self.moto = {}
        self.region = region
        ec2_stub, self.reservations = stubbed("ec2", region)
        for response in reservations:
            self.reservations.add_response("describe_capacity_reservations", {"CapacityReservations": response})
        self.ec2 = Split(boto3.client("ec2", region_name=region), ec2_stub)
        self.quotas, self.quota_stub = stubbed("service-quotas", region)
        if spec.orchestrator.control_plane.hyperpod:
            self.quota_stub.add_response("list_service_quotas", {"Quotas": [
                {"QuotaName": f"ml.{t} for cluster usage", "Value": quota, "QuotaCode": f"L-{i:08d}"}
                for i, t in enumerate(sorted({g.instance_type for g in spec.node_groups}
                                             | {spec.orchestrator.login.instance_type}))]})
        else:
            for _ in range(4):  # at most one EC2 vCPU quota per class and market
                self.quota_stub.add_response("get_service_quota", {"Quota": {"Value": quota}})
        self.pcs, pcs_stub = stubbed("pcs", region)
        pcs_stub.add_response("list_clusters", {"clusters": []})

    def __call__(self, service: str):
        if service == "ec2":
            return self.ec2
        if service == "service-quotas":
            return self.quotas
        if service == "pcs":
            return self.pcs
        if service not in self.moto:
            self.moto[service] = boto3.client(service, region_name=self.region)
        return self.moto[service]


def by_name(checks, name):
    found = [c for c in checks if c.name == name]
    assert found, f"no check {name!r} in {[c.name for c in checks]}"
    return found[0]


def matching_reservations(spec) -> list[list[dict]]:
    return [[reservation(g, spec.availability_zone_id, block=g.capacity.type == "capacity-block")]
            for g in spec.node_groups if g.capacity.reservation_id]


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_runs_and_prints_a_table(example, capsys):
    spec = loader.load(ROOT / example).spec
    with mock_aws():
        rc = preflight.main(spec, client=Clients(spec, matching_reservations(spec)), now=NOW)
    out = capsys.readouterr().out
    assert rc in (0, 1)
    assert out.startswith(f"fmcluster preflight: {spec.name} in {spec.region}\n  STATUS")
    assert "PASS    credentials" in out and "checks:" in out.splitlines()[-1]
    assert (rc == 1) == (not out.splitlines()[-1].endswith(" 0 fail"))


def test_capacity_block_example_passes():
    spec = loader.load(ROOT / "examples/p5-pcs.yaml").spec
    with mock_aws():
        clients = Clients(spec, matching_reservations(spec))
        checks = Preflight(spec, clients, NOW).run()
    assert {c.status for c in checks} == {PASS, WARN}, [c for c in checks if c.status == FAIL]
    assert by_name(checks, "AZ ID use1-az4").reason == "use1-az4 is us-east-1d in this account"
    assert by_name(checks, "offering p5.48xlarge").status == PASS
    assert by_name(checks, "reservation gpu: state").reason.startswith("cr-0123456789abcdef0: active Capacity Block")
    assert by_name(checks, "reservation gpu: size").status == PASS
    assert by_name(checks, "FSx PERSISTENT_2").status == WARN  # no read-only API can tell
    assert by_name(checks, "AWS PCS").status == PASS
    clients.reservations.assert_no_pending_responses()


def test_instance_type_not_offered_in_the_az_fails(capsys):
    """moto's offerings data: p6-b300.48xlarge is not offered in use2-az1."""
    spec = loader.load(ROOT / "examples/p6-b300-pcs.yaml").spec
    with mock_aws():
        rc = preflight.main(spec, client=Clients(spec), now=NOW)
    out = capsys.readouterr().out
    assert rc == 1
    assert "FAIL    offering p6-b300.48xlarge" in out and "not offered in use2-az1" in out
    assert "hint: aws ec2 describe-instance-type-offerings --location-type availability-zone-id" in out
    assert "PASS    offering c7i.8xlarge" in out


def test_unknown_az_id_fails():
    spec = validated(base_spec(availability_zone_id="use1-az9"))
    with mock_aws():
        checks = Preflight(spec, Clients(spec), NOW).run()
    check = by_name(checks, "AZ ID use1-az9")
    assert check.status == FAIL and "use1-az4" in check.hint


def test_other_account_fails():
    spec = validated(base_spec(account="111122223333"))
    with mock_aws():
        check = by_name(Preflight(spec, Clients(spec), NOW).run(), "credentials")
    assert check.status == FAIL and "123456789012" in check.reason  # moto's account


# ---- reservations and Capacity Blocks (Stubber) --------------------------------------------

def cb_group(**capacity):
    data = with_(base_spec(), "node_groups[0]", {"name": "gpu", "instance_type": "p5.48xlarge", "count": 16,
                                                  "capacity": {"type": "capacity-block",
                                                               "reservation_id": "cr-0123456789abcdef0", **capacity}})
    return validated(data).node_groups[0]


def statuses(checks) -> dict[str, str]:
    return {c.name.split(": ", 1)[1]: c.status for c in checks}


def test_active_block_covering_now_passes():
    group = cb_group()
    checks = list(reservation_checks(group, reservation(group), "use1-az4", NOW, None))
    assert statuses(checks) == {"state": PASS, "instance type": PASS, "AZ ID": PASS, "size": PASS}


def test_future_block_warns_without_a_window_and_is_checked_against_one():
    group = cb_group()
    future = reservation(group, state="scheduled", start=NOW + timedelta(days=2), end=NOW + timedelta(days=9))
    checks = list(reservation_checks(group, future, "use1-az4", NOW, None))
    assert statuses(checks)["state"] == WARN and "--window" in checks[0].hint
    inside = (NOW + timedelta(days=3), NOW + timedelta(days=5))
    assert statuses(reservation_checks(group, future, "use1-az4", NOW, inside))["state"] == PASS
    outside = (NOW + timedelta(days=8), NOW + timedelta(days=12))
    window = [c for c in reservation_checks(group, future, "use1-az4", NOW, outside) if c.name.endswith("window")]
    assert window[0].status == FAIL and "does not cover the planned window" in window[0].reason


@pytest.mark.parametrize("state", ["expired", "cancelled", "failed"])
def test_ended_reservation_fails(state):
    group = cb_group()
    r = reservation(group, state=state, start=NOW - timedelta(days=9), end=NOW - timedelta(days=2))
    assert statuses(reservation_checks(group, r, "use1-az4", NOW, None))["state"] == FAIL


def test_block_ending_within_a_day_warns():
    group = cb_group()
    r = reservation(group, end=NOW + timedelta(hours=5))
    checks = list(reservation_checks(group, r, "use1-az4", NOW, None))
    assert statuses(checks)["state"] == WARN and "ends within 24 h" in checks[0].reason


def test_wrong_type_az_size_and_kind_fail():
    group = cb_group()
    r = reservation(group, az_id="use1-az6", total=8, instance_type="p5en.48xlarge", block=False)
    checks = {c.name.split(": ", 1)[1]: c for c in reservation_checks(group, r, "use1-az4", NOW, None)}
    assert checks["kind"].status == FAIL and "set capacity.type: reservation" in checks["kind"].hint
    assert checks["instance type"].status == FAIL and "p5en.48xlarge" in checks["instance type"].reason
    assert checks["AZ ID"].status == FAIL and checks["AZ ID"].hint == "set availability_zone_id: use1-az6"
    assert checks["size"].status == FAIL and "holds 8 instances" in checks["size"].reason


def test_instances_in_use_warn():
    group = cb_group()
    r = reservation(group, available=10)
    assert statuses(reservation_checks(group, r, "use1-az4", NOW, None))["size"] == WARN


def test_reservation_not_found_fails():
    spec = validated(with_(base_spec(), "node_groups[0].capacity",
                           {"type": "reservation", "reservation_id": "cr-0fedcba9876543210"}))
    ec2, stub = stubbed("ec2", spec.region)
    stub.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound",
                          "The capacity reservation ID 'cr-0fedcba9876543210' does not exist")
    checks = list(Preflight(spec, lambda service: ec2, NOW).reservations())
    assert checks[0].status == FAIL and "cr-0fedcba9876543210 not found in us-east-1" in checks[0].reason


def test_reservations_of_a_resource_group_are_added_up():
    arn = "arn:aws:resource-groups:us-east-1:111122223333:group/p5-odcrs"
    spec = validated(with_(base_spec(), "node_groups[0].capacity",
                           {"type": "reservation", "reservation_resource_group_arn": arn}))
    group = spec.node_groups[0]  # 2 x p5.48xlarge
    groups, groups_stub = stubbed("resource-groups", spec.region)
    groups_stub.add_response("list_group_resources", {"Resources": [
        {"Identifier": {"ResourceArn": "arn:aws:ec2:us-east-1:111122223333:capacity-reservation/"
                                       f"cr-0000000000000000{i}",
                        "ResourceType": "AWS::EC2::CapacityReservation"}} for i in (1, 2)]}, {"Group": arn})
    ec2, ec2_stub = stubbed("ec2", spec.region)
    ec2_stub.add_response("describe_capacity_reservations", {"CapacityReservations": [
        reservation(group, block=False, total=1, rid=f"cr-0000000000000000{i}", end=None) for i in (1, 2)]},
        {"CapacityReservationIds": ["cr-00000000000000001", "cr-00000000000000002"]})
    checks = list(Preflight(spec, {"resource-groups": groups, "ec2": ec2}.get, NOW).reservations())
    total = by_name(checks, "reservation gpu: size")
    assert total.status == FAIL and "holds 1 instances" in total.reason  # each one alone is too small
    summed = [c for c in checks if "2 reservations hold 2 instances" in c.reason]
    assert summed and summed[0].status == PASS


# ---- quotas --------------------------------------------------------------------------------

def test_on_demand_p_quota_is_counted_in_vcpus():
    spec = validated(base_spec())  # 2 x p5.48xlarge on demand = 384 vCPUs; login m7i.2xlarge = 8
    quotas, stub = stubbed("service-quotas", spec.region)
    stub.add_response("get_service_quota", {"Quota": {"Value": 192.0}},
                      {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"})
    stub.add_client_error("get_service_quota", "NoSuchResourceException", "no applied quota")
    stub.add_response("get_aws_default_service_quota", {"Quota": {"Value": 5.0}},
                      {"ServiceCode": "ec2", "QuotaCode": "L-1216C47A"})
    checks = list(Preflight(spec, lambda service: quotas, NOW).quotas())
    p = by_name(checks, "quota On-Demand P vCPUs")
    assert p.status == FAIL and "384 vCPUs needed, the quota is 192" in p.reason
    assert "--quota-code L-417A185B --desired-value 384" in p.hint
    standard = checks[1]
    assert standard.status == FAIL and "8 vCPUs needed, the quota is 5" in standard.reason
    stub.assert_no_pending_responses()


def test_spot_groups_use_the_spot_quota():
    spec = validated(with_(base_spec(), "node_groups[0].capacity.type", "spot"))
    quotas, stub = stubbed("service-quotas", spec.region)
    stub.add_response("get_service_quota", {"Quota": {"Value": 4000.0}},
                      {"ServiceCode": "ec2", "QuotaCode": "L-7212CCBC"})
    stub.add_response("get_service_quota", {"Quota": {"Value": 4000.0}},
                      {"ServiceCode": "ec2", "QuotaCode": "L-1216C47A"})
    checks = list(Preflight(spec, lambda service: quotas, NOW).quotas())
    assert [c.status for c in checks] == [PASS, PASS]
    assert checks[0].name == "quota Spot P vCPUs"


def test_quota_missing_in_moto_warns():
    """moto implements Service Quotas for VPC only: an EC2 quota is 'not found' there."""
    spec = validated(base_spec())
    with mock_aws():
        quotas = boto3.client("service-quotas", region_name=spec.region)
        with Stubber(quotas) as stub:  # moto lacks GetAWSDefaultServiceQuota: stub that second call
            stub.add_client_error("get_service_quota", "NoSuchResourceException")
            stub.add_client_error("get_aws_default_service_quota", "NoSuchResourceException")
            stub.add_client_error("get_service_quota", "NoSuchResourceException")
            stub.add_client_error("get_aws_default_service_quota", "NoSuchResourceException")
            checks = list(Preflight(spec, lambda service: quotas, NOW).quotas())
    assert [c.status for c in checks] == [WARN, WARN]


# ---- failures that must not be tracebacks --------------------------------------------------

def test_access_denied_fails_that_check_only(capsys):
    spec = validated(base_spec())
    with mock_aws():
        clients = Clients(spec)
        ec2, stub = stubbed("ec2", spec.region)
        stub.add_client_error("describe_availability_zones", "UnauthorizedOperation",
                              "You are not authorized to perform this operation.")
        clients.ec2 = Split(clients.ec2.base, ec2, ("describe_availability_zones",))
        rc = preflight.main(spec, client=clients, now=NOW)
    out = capsys.readouterr().out
    assert rc == 1
    assert "FAIL    availability zones" in out and "access denied to DescribeAvailabilityZones" in out
    assert "ec2:Describe*" in out and "PASS    credentials" in out


def test_service_missing_from_the_region_fails():
    spec = validated(base_spec())
    pcs = boto3.client("pcs", region_name=spec.region)

    def unreachable(**kwargs):
        raise EndpointConnectionError(endpoint_url="https://pcs.us-east-1.amazonaws.com/")

    pcs.meta.events.register("before-send.pcs.ListClusters", unreachable)
    checks = list(Preflight(spec, lambda service: pcs, NOW).control_plane())
    assert checks == [preflight.Check("AWS PCS", FAIL, "AWS PCS is not available in us-east-1 (no endpoint)",
                                      "choose a region where the service runs")]


def test_hyperpod_uses_sagemaker_quotas_and_list_clusters():
    spec = validated(base_spec(orchestrator={"type": "hyperpod-slurm"}))
    with mock_aws():
        checks = Preflight(spec, Clients(spec, quota=1.0), NOW).run()
    assert by_name(checks, "instance types").status == WARN
    assert by_name(checks, "quota ml.p5.48xlarge for cluster usage").status == FAIL  # 2 needed, quota 1
    assert by_name(checks, "SageMaker HyperPod").status == PASS


def test_no_credentials_is_one_clear_message(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE=str(tmp_path / "none"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"))
    result = subprocess.run([sys.executable, "-m", "fmcluster", "preflight", "examples/p5-pcs.yaml"], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "error: no usable AWS credentials: Unable to locate credentials" in result.stderr
    assert "hint: preflight reads the target account" in result.stderr


def test_unknown_profile_is_one_clear_message(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_PROFILE="nope", AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_EC2_METADATA_DISABLED="true")
    result = subprocess.run([sys.executable, "-m", "fmcluster", "preflight", "examples/p5-pcs.yaml"], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "no usable AWS credentials" in result.stderr and "nope" in result.stderr


def test_bad_window_and_invalid_spec_exit_2(tmp_path, capsys):
    from fmcluster.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["preflight", "examples/p5-pcs.yaml", "--window", "tomorrow"])
    assert exc.value.code == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    assert main(["preflight", str(bad)]) == 2


def test_json_format(capsys):
    spec = loader.load(ROOT / "examples/p5-pcs.yaml").spec
    with mock_aws():
        assert preflight.main(spec, "json", client=Clients(spec, matching_reservations(spec)), now=NOW) == 0
    import json

    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["cluster"] == "llm-pretrain"
    assert {"name", "status", "reason", "hint"} == set(report["checks"][0])


def test_readme_shows_real_preflight_output(capsys):
    from tests.test_plan import readme_output

    spec = loader.load(ROOT / "examples/p5en-reservation-pcs.yaml").spec
    small = reservation(spec.node_groups[0], "usw2-az2", block=False, total=24, end=None)
    with mock_aws():
        assert preflight.main(spec, client=Clients(spec, [[small]]), now=NOW) == 1
    assert readme_output("fmcluster preflight examples/p5en-reservation-pcs.yaml") == capsys.readouterr().out
