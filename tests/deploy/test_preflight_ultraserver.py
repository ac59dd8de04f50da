"""fmcluster preflight for UltraServer groups and Local Zones (issue 17): the Capacity Block behind
an UltraServer group's reservations (DescribeCapacityBlocks, DescribeCapacityBlockStatus, which
moto lacks: botocore's Stubber, on shapes botocore validates) and a Local Zone's opt-in, parent
zone and instance-type offerings (moto's data has no Local Zone: Stubber)."""

from __future__ import annotations

from datetime import timedelta

import boto3
import pytest

from fmcluster.deploy.preflight import FAIL, PASS, WARN, Context, account, capacity
from fmcluster.deploy.preflight.context import when
from fmcluster.facts.controlplanes import ULTRASERVER_BLOCK_TERMINATION_MINUTES
from tests.support.moto_aws import mocked_aws
from tests.support.preflight import (
    BLOCK_ID,
    NOW,
    Clients,
    by_name,
    reservation,
    shown,
    stubbed,
    ultraserver_block,
)
from tests.support.specs import validated, with_
from tests.support.ultraserver import CR, DALLAS, RG, gb200

RIDS = ("cr-00000000000000001", "cr-00000000000000002")
BLOCK_IDS = ("cb-00000000000000001", "cb-00000000000000002")


def spec_of(**capacity):
    return validated(gb200(**capacity))


def block_ec2(spec, reservations, blocks=None, statuses=None, *, block_ids=(BLOCK_ID,)):
    """An EC2 client stubbed for the reservations, then (where given) the blocks and their status,
    each call with the parameters preflight must send."""
    ec2, stub = stubbed("ec2", spec.region)
    stub.add_response("describe_capacity_reservations", {"CapacityReservations": reservations})
    if blocks is not None:
        stub.add_response("describe_capacity_blocks", {"CapacityBlocks": blocks},
                          {"CapacityBlockIds": list(block_ids)})
    if statuses is not None:
        stub.add_response("describe_capacity_block_status", {"CapacityBlockStatuses": statuses},
                          {"CapacityBlockIds": list(block_ids)})
    return ec2, stub


def status(interconnect="ok", block_id=BLOCK_ID) -> dict:
    return {"CapacityBlockId": block_id, "InterconnectStatus": interconnect, "TotalCapacity": 18,
            "TotalAvailableCapacity": 18, "TotalUnavailableCapacity": 0}


def run_reservations(spec, ec2, stub, **clients):
    checks = list(capacity.reservations(Context(spec, {"ec2": ec2, **clients}.get, NOW)))
    stub.assert_no_pending_responses()
    return checks


def test_a_matching_ultraserver_block_passes():
    spec = spec_of()
    group = spec.node_groups[0]
    ec2, stub = block_ec2(spec, [reservation(group, DALLAS, block_id=BLOCK_ID)],
                          [ultraserver_block("u-p6e-gb200x72", DALLAS)], [status()])
    checks = run_reservations(spec, ec2, stub)
    assert not [c for c in checks if c.status != PASS], checks
    assert by_name(checks, "reservation gb200: UltraServer type").reason == f"{BLOCK_ID}: u-p6e-gb200x72"
    assert by_name(checks, "reservation gb200: block AZ ID").reason == f"{BLOCK_ID}: {DALLAS}"
    state = by_name(checks, "reservation gb200: block state").reason
    end = NOW + timedelta(days=6) - timedelta(minutes=ULTRASERVER_BLOCK_TERMINATION_MINUTES)
    assert state.startswith(f"{BLOCK_ID}: active UltraServer Capacity Block, 2026-11-30 12:00Z to 2026-12-07 12:00Z")
    assert f"terminates its instances from {when(end)} (60 minutes before the end)" in state
    assert by_name(checks, "reservation gb200: interconnect").reason == f"{BLOCK_ID}: accelerator interconnect ok"
    assert by_name(checks, "reservation gb200: size").status == PASS  # 18 instances, as before


def test_a_block_of_the_other_ultraserver_type_fails_with_the_right_value():
    spec = spec_of()
    group = spec.node_groups[0]
    ec2, stub = block_ec2(spec, [reservation(group, DALLAS, block_id=BLOCK_ID)],
                          [ultraserver_block("u-p6e-gb200x36", DALLAS)], [status()])
    check = by_name(run_reservations(spec, ec2, stub), "reservation gb200: UltraServer type")
    assert check.status == FAIL and "is a block of u-p6e-gb200x36 UltraServers; node group gb200 says " \
                                     "u-p6e-gb200x72" in check.reason
    assert check.hint == "set capacity.ultraserver_type: u-p6e-gb200x36"


def test_a_block_of_instances_behind_an_ultraserver_group_fails():
    spec = spec_of()
    group = spec.node_groups[0]
    ec2, stub = block_ec2(spec, [reservation(group, DALLAS, block_id=BLOCK_ID)],
                          [ultraserver_block(None, DALLAS)], [status("insufficient-data")])
    check = by_name(run_reservations(spec, ec2, stub), "reservation gb200: UltraServer type")
    assert check.status == FAIL and "a block of instances, not of UltraServers" in check.reason
    assert check.hint == "target a u-p6e-gb200x72 UltraServer Capacity Block"


def test_a_block_in_another_zone_fails():
    spec = spec_of()
    group = spec.node_groups[0]
    ec2, stub = block_ec2(spec, [reservation(group, DALLAS, block_id=BLOCK_ID)],
                          [ultraserver_block("u-p6e-gb200x72", "use1-az4")], [status()])
    check = by_name(run_reservations(spec, ec2, stub), "reservation gb200: block AZ ID")
    assert check.status == FAIL and f"the cluster's GPU AZ ID is {DALLAS}" in check.reason
    assert check.hint == "set availability_zone_id: use1-az4"


@pytest.mark.parametrize("interconnect,word,hint", [
    ("impaired", "accelerator interconnect impaired", "open an AWS Support case"),
    ("insufficient-data", "accelerator interconnect insufficient-data", "run preflight again in a few minutes"),
])
def test_an_interconnect_that_is_not_ok_warns(interconnect, word, hint):
    spec = spec_of()
    group = spec.node_groups[0]
    ec2, stub = block_ec2(spec, [reservation(group, DALLAS, block_id=BLOCK_ID)],
                          [ultraserver_block("u-p6e-gb200x72", DALLAS)], [status(interconnect)])
    check = by_name(run_reservations(spec, ec2, stub), "reservation gb200: interconnect")
    assert check.status == WARN and word in check.reason and hint in check.hint
    assert f"aws ec2 describe-capacity-block-status --capacity-block-ids {BLOCK_ID} --region us-east-1" in check.hint


def test_a_scheduled_block_warns_without_a_window_and_its_interconnect_is_not_reported_yet():
    spec = spec_of()
    group = spec.node_groups[0]
    start, end = NOW + timedelta(days=2), NOW + timedelta(days=9)
    ec2, stub = block_ec2(spec, [reservation(group, DALLAS, state="scheduled", start=start, end=end,
                                             block_id=BLOCK_ID)],
                          [ultraserver_block("u-p6e-gb200x72", DALLAS, state="scheduled", start=start, end=end)],
                          [{"CapacityBlockId": BLOCK_ID}])
    checks = run_reservations(spec, ec2, stub)
    state = by_name(checks, "reservation gb200: block state")
    assert state.status == WARN and "--window" in state.hint
    interconnect = by_name(checks, "reservation gb200: interconnect")
    assert interconnect.status == WARN and "not reported (scheduled block)" in interconnect.reason
    assert interconnect.hint.startswith("EC2 reports it once the block is active")


@pytest.mark.parametrize("state", ["expired", "cancelled", "failed", "payment-failed", "unavailable"])
def test_a_block_that_takes_no_instances_fails(state):
    spec = spec_of()
    group = spec.node_groups[0]
    ec2, stub = block_ec2(spec, [reservation(group, DALLAS, block_id=BLOCK_ID)],
                          [ultraserver_block("u-p6e-gb200x72", DALLAS, state=state)], [status()])
    check = by_name(run_reservations(spec, ec2, stub), "reservation gb200: block state")
    assert check.status == FAIL and f"{BLOCK_ID}: {state} UltraServer Capacity Block" in check.reason


def test_a_reservation_without_a_block_id_is_not_an_ultraserver_block():
    spec = spec_of()
    group = spec.node_groups[0]
    ec2, stub = block_ec2(spec, [reservation(group, DALLAS)])  # no CapacityBlockId: no further call
    check = by_name(run_reservations(spec, ec2, stub), "reservation gb200: UltraServer block")
    assert check.status == FAIL
    assert check.reason == f"{CR} is not an UltraServer Capacity Block (no CapacityBlockId)"
    assert "aws ec2 describe-capacity-block-offerings --ultraserver-type u-p6e-gb200x72 --ultraserver-count 1" \
        in check.hint


def test_a_block_the_answer_does_not_list_fails():
    spec = spec_of()
    group = spec.node_groups[0]
    ec2, stub = block_ec2(spec, [reservation(group, DALLAS, block_id=BLOCK_ID)], [])
    (check,) = [c for c in run_reservations(spec, ec2, stub) if "UltraServer" in c.name]
    assert check.status == FAIL and f"DescribeCapacityBlocks does not list {BLOCK_ID}" in check.reason


@pytest.mark.parametrize("operation", ["describe_capacity_blocks", "describe_capacity_block_status"])
def test_access_denied_to_a_block_call_fails_that_check_only(operation):
    spec = spec_of()
    group = spec.node_groups[0]
    ec2, stub = stubbed("ec2", spec.region)
    stub.add_response("describe_capacity_reservations", {"CapacityReservations": [
        reservation(group, DALLAS, block_id=BLOCK_ID)]})
    if operation == "describe_capacity_block_status":
        stub.add_response("describe_capacity_blocks", {"CapacityBlocks": [
            ultraserver_block("u-p6e-gb200x72", DALLAS)]})
    stub.add_client_error(operation, "UnauthorizedOperation", "You are not authorized to perform this operation.",
                          http_status_code=403)
    checks = run_reservations(spec, ec2, stub)
    api = "".join(part.capitalize() for part in operation.split("_"))
    denied = [c for c in checks if c.status == FAIL]
    assert [c.reason for c in denied] == [f"access denied to {api}"]
    assert f"allow ec2:{api}" in denied[0].hint and "ec2:DescribeCapacityBlockStatus" in denied[0].hint
    assert by_name(checks, "reservation gb200: size").status == PASS  # the reservation's checks still ran
    if operation == "describe_capacity_block_status":  # and the block's
        assert by_name(checks, "reservation gb200: UltraServer type").status == PASS


def test_a_resource_group_of_two_ultraserver_blocks_reads_both():
    """Two u-p6e-gb200x36 blocks, each one reservation of 9, behind one resource group."""
    spec = spec_of(reservation_id=None, reservation_resource_group_arn=RG, ultraserver_type="u-p6e-gb200x36",
                   ultraserver_count=2)
    group = spec.node_groups[0]
    groups, groups_stub = stubbed("resource-groups", spec.region)
    groups_stub.add_response("list_group_resources", {"Resources": [
        {"Identifier": {"ResourceArn": f"arn:aws:ec2:us-east-1:111122223333:capacity-reservation/{rid}",
                        "ResourceType": "AWS::EC2::CapacityReservation"}} for rid in RIDS]}, {"Group": RG})
    pairs = list(zip(RIDS, BLOCK_IDS, strict=True))
    ec2, stub = block_ec2(
        spec, [reservation(group, DALLAS, total=9, rid=rid, block_id=bid) for rid, bid in pairs],
        [ultraserver_block("u-p6e-gb200x36", DALLAS, block_id=bid, rids=(rid,)) for rid, bid in pairs],
        [status(block_id=BLOCK_IDS[0]), status("impaired", block_id=BLOCK_IDS[1])], block_ids=BLOCK_IDS)
    checks = run_reservations(spec, ec2, stub, **{"resource-groups": groups})
    assert not [c for c in checks if c.status == FAIL], checks
    assert [c.reason for c in checks if c.name.endswith(": UltraServer type")] == [
        f"{bid}: u-p6e-gb200x36" for bid in BLOCK_IDS]
    assert [c.status for c in checks if c.name.endswith(": interconnect")] == [PASS, WARN]
    assert "2 reservations hold 18 instances" in by_name(checks, "reservation gb200: size").reason


def test_instance_groups_read_their_blocks_status_and_no_ultraserver_block():
    """A Capacity Block of instances (no ultraserver_type) that EC2 names by a CapacityBlockId:
    the reservation checks and the block's status (issue 41), but no DescribeCapacityBlocks call
    and no UltraServer row; an interconnect EC2 does not report is no row."""
    spec = validated(with_(gb200(az="use1-az4", extra=("use1-az6",)), "node_groups[0]", {
        "name": "gpu", "instance_type": "p5.48xlarge", "count": 2,
        "capacity": {"type": "capacity-block", "reservation_id": CR}}))
    answer = {"CapacityBlockId": BLOCK_ID, "TotalCapacity": 2, "TotalAvailableCapacity": 2,
              "TotalUnavailableCapacity": 0}
    ec2, stub = block_ec2(spec, [reservation(spec.node_groups[0], block_id=BLOCK_ID)], statuses=[answer])
    checks = run_reservations(spec, ec2, stub)
    assert not [c for c in checks if "UltraServer" in c.name or "interconnect" in c.name]
    capacity_row = by_name(checks, "reservation gpu: block capacity")
    assert (capacity_row.status, capacity_row.reason) == (PASS, f"{BLOCK_ID}: capacity 2, none unavailable, 2 free "
                                                                "to launch")


def test_the_whole_run_reads_the_block(capsys):
    """`fmcluster preflight` on the Dallas spec, end to end: moto for what it has (not the Local
    Zone: that row fails there), the reservation and the block stubbed."""
    spec = spec_of()
    with mocked_aws():
        clients = Clients(spec, [[reservation(spec.node_groups[0], DALLAS, block_id=BLOCK_ID)]])
        rc = shown(spec, client=clients, now=NOW)
        clients.blocks.assert_no_pending_responses()
    out = capsys.readouterr().out
    assert rc == 1 and "Traceback" not in out
    rows = [" ".join(line.split()) for line in out.splitlines()]
    assert f"PASS reservation gb200: UltraServer type {BLOCK_ID}: u-p6e-gb200x72" in rows
    assert f"PASS reservation gb200: interconnect {BLOCK_ID}: accelerator interconnect ok" in rows
    assert f"FAIL AZ ID {DALLAS} no zone {DALLAS} in us-east-1" in rows  # moto's zones have no Local Zone


# ---- Local Zones -------------------------------------------------------------------------

def dallas(opt_in="opted-in") -> dict:
    """DescribeAvailabilityZones' entry of the Dallas Local Zone (botocore's AvailabilityZone)."""
    return {"ZoneId": DALLAS, "ZoneName": "us-east-1-dfw-2a", "ZoneType": "local-zone", "State": "available",
            "OptInStatus": opt_in, "GroupName": "us-east-1-dfw-2", "NetworkBorderGroup": "us-east-1-dfw-2",
            "ParentZoneId": "use1-az4", "ParentZoneName": "us-east-1d", "RegionName": "us-east-1"}


REGIONAL = [{"ZoneId": az, "ZoneName": name, "ZoneType": "availability-zone", "State": "available",
             "OptInStatus": "opt-in-not-required", "GroupName": "us-east-1", "RegionName": "us-east-1"}
            for az, name in (("use1-az4", "us-east-1d"), ("use1-az6", "us-east-1a"))]


def zone_checks(opt_in):
    spec = spec_of()
    ec2, stub = stubbed("ec2", spec.region)
    stub.add_response("describe_availability_zones", {"AvailabilityZones": [*REGIONAL, dallas(opt_in)]},
                      {"AllAvailabilityZones": True})
    return list(account.zones(Context(spec, lambda service: ec2, NOW)))


def test_an_opted_in_local_zone_passes_and_names_its_parent_zone():
    check = by_name(zone_checks("opted-in"), f"AZ ID {DALLAS}")
    assert check.status == PASS
    assert check.reason == (f"{DALLAS} is us-east-1-dfw-2a in this account: a Local Zone, its parent zone use1-az4 "
                            "(us-east-1d), opted in")


def test_a_local_zone_not_opted_in_fails_with_the_opt_in_command():
    check = by_name(zone_checks("not-opted-in"), f"AZ ID {DALLAS}")
    assert check.status == FAIL and "a Local Zone, available, not-opted-in" in check.reason
    assert check.hint == ("aws ec2 modify-availability-zone-group --group-name us-east-1-dfw-2 --opt-in-status "
                          "opted-in --region us-east-1")


@pytest.mark.parametrize("offered,status", [(True, PASS), (False, WARN)])
def test_offerings_are_asked_for_the_local_zone_id(offered, status):
    """moto's offerings data has no Local Zone: Stubber checks the request (location type
    availability-zone-id, the Local Zone ID) and answers as EC2 would."""
    spec = spec_of()
    ec2, stub = stubbed("ec2", spec.region)
    types = ["m7i.2xlarge", "p6e-gb200.36xlarge"]
    # the login nodes run in the region's AZ ID (use1-az4), the GPU nodes in the Local Zone
    stub.add_response("describe_instance_type_offerings", {"InstanceTypeOfferings": [
        {"InstanceType": "m7i.2xlarge", "LocationType": "availability-zone-id", "Location": "use1-az4"}] + (
        [{"InstanceType": "p6e-gb200.36xlarge", "LocationType": "availability-zone-id", "Location": DALLAS}]
        if offered else [])},
        {"LocationType": "availability-zone-id",
         "Filters": [{"Name": "location", "Values": sorted([DALLAS, "use1-az4"])},
                     {"Name": "instance-type", "Values": types}]})
    checks = list(account.offerings(Context(spec, lambda service: ec2, NOW)))
    stub.assert_no_pending_responses()
    assert by_name(checks, "offering m7i.2xlarge").reason == "offered in use1-az4"
    check = by_name(checks, "offering p6e-gb200.36xlarge")
    assert check.status == status
    assert check.reason == (f"offered in {DALLAS}" if offered else
                            f"not listed as offered in {DALLAS}; node group gb200 runs on a capacity-block, "
                            "checked below")


def test_moto_has_no_local_zone_offerings():
    """Why the test above stubs: moto answers nothing for a Local Zone ID (when it does, test it here)."""
    with mocked_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        answer = ec2.describe_instance_type_offerings(LocationType="availability-zone-id",
                                                      Filters=[{"Name": "location", "Values": [DALLAS]}])
    assert answer["InstanceTypeOfferings"] == []
