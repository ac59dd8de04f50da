"""The Capacity Block scaler's handler (fmcluster_cdk/constructs/compute/handlers/capacity_block_scaler) against
EC2, EKS and SSM answers in their service models' shapes (botocore's Stubber): it reconciles an
EKS managed node group's desired size with its Capacity Block's state and end."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import boto3
import pytest
from botocore.stub import Stubber

from fmcluster_cdk.constructs.compute import capacity_blocks
from tests.support import lambda_handlers
from tests.support.clock import frozen_at

handler = lambda_handlers.load(capacity_blocks.HANDLER / "index.py", "capacity_block_scaler")

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
RID = "cr-0123456789abcdef0"
ENV = {"CLUSTER": "p5en-eks", "NODEGROUP": "NodeGroupgpu-AbC123", "RESERVATION": RID, "SIZE": "8",
       "HOLD_PARAMETER": "/fmcluster/p5en-eks/node-groups/gpu/hold", "DRAIN_MINUTES": "45"}


def block(state: str, end: datetime | None = NOW + timedelta(days=2)) -> dict:
    found = {"CapacityReservationId": RID, "InstanceType": "p5en.48xlarge", "AvailabilityZoneId": "use2-az2",
             "TotalInstanceCount": 8, "AvailableInstanceCount": 8, "State": state, "ReservationType": "capacity-block",
             "StartDate": NOW - timedelta(hours=1), "EndDateType": "limited", "InstanceMatchCriteria": "targeted"}
    if end is not None:
        found["EndDate"] = end
    return found


@pytest.fixture
def clients():
    made = {name: boto3.client(name, region_name="us-east-2", aws_access_key_id="x", aws_secret_access_key="x")
            for name in ("ec2", "eks", "ssm")}
    stubs = {name: Stubber(client) for name, client in made.items()}
    for stub in stubs.values():
        stub.activate()
    yield made, stubs
    for stub in stubs.values():
        stub.assert_no_pending_responses()
        stub.deactivate()


def no_hold(stubs):
    stubs["ssm"].add_client_error("get_parameter", "ParameterNotFound", http_status_code=400,
                                  expected_params={"Name": ENV["HOLD_PARAMETER"]})


def block_is(stubs, found):
    stubs["ec2"].add_response("describe_capacity_reservations", {"CapacityReservations": found},
                              {"CapacityReservationIds": [RID]})


def desired_is(stubs, desired):
    stubs["eks"].add_response("describe_nodegroup", {"nodegroup": {
        "nodegroupName": ENV["NODEGROUP"], "clusterName": "p5en-eks", "status": "ACTIVE",
        "capacityType": "CAPACITY_BLOCK",
        "scalingConfig": {"minSize": 0, "maxSize": 8, "desiredSize": desired}}},
        {"clusterName": "p5en-eks", "nodegroupName": ENV["NODEGROUP"]})


def scaled_to(stubs, desired):
    stubs["eks"].add_response("update_nodegroup_config", {"update": {"id": "u-1", "status": "InProgress",
                                                                     "type": "ConfigUpdate"}},
                              {"clusterName": "p5en-eks", "nodegroupName": ENV["NODEGROUP"],
                               "scalingConfig": {"minSize": 0, "maxSize": 8, "desiredSize": desired}})


def reconcile(made, now=NOW):
    return handler.reconcile(made["ec2"], made["eks"], made["ssm"], ENV, now)


def test_an_active_block_scales_the_group_up_to_its_size(clients):
    made, stubs = clients
    no_hold(stubs)
    block_is(stubs, [block("active")])
    desired_is(stubs, 0)
    scaled_to(stubs, 8)
    result = reconcile(made)
    assert (result["action"], result["wanted"]) == ("scaled", 8)
    assert result["why"] == "the Capacity Block is active until 2026-12-03 12:00Z"


def test_at_its_size_already_nothing_changes(clients):
    made, stubs = clients
    no_hold(stubs)
    block_is(stubs, [block("active")])
    desired_is(stubs, 8)
    assert reconcile(made)["action"] == "none"


@pytest.mark.parametrize("state", ["scheduled", "payment-pending", "expired", "cancelled"])
def test_a_block_that_is_not_active_keeps_the_group_at_zero(clients, state):
    made, stubs = clients
    no_hold(stubs)
    block_is(stubs, [block(state)])
    desired_is(stubs, 8 if state == "expired" else 0)
    if state == "expired":
        scaled_to(stubs, 0)
    result = reconcile(made)
    assert result["wanted"] == 0 and result["why"] == f"the Capacity Block is {state}"


@pytest.mark.parametrize("left, wanted", [(timedelta(minutes=40), 0), (timedelta(minutes=45), 0),
                                          (timedelta(minutes=46), 8)])
def test_the_group_is_drained_before_ec2_terminates_it(clients, left, wanted):
    """EC2 warns 40 minutes before the end and terminates from 30: the group goes to 0 at 45."""
    made, stubs = clients
    no_hold(stubs)
    block_is(stubs, [block("active", end=NOW + left)])
    desired_is(stubs, 8)
    if wanted == 0:
        scaled_to(stubs, 0)
    result = reconcile(made)
    assert result["wanted"] == wanted
    if wanted == 0:
        assert result["why"] == f"the Capacity Block ends at {NOW + left:%Y-%m-%d %H:%MZ}: drained 45 minutes before"


def test_a_hold_leaves_the_group_alone(clients):
    """An operator upgrading the group holds it at 0 (README): nothing else is even read."""
    made, stubs = clients
    stubs["ssm"].add_response("get_parameter", {"Parameter": {"Name": ENV["HOLD_PARAMETER"], "Type": "String",
                                                              "Value": "upgrading to 1.35", "Version": 1}},
                              {"Name": ENV["HOLD_PARAMETER"]})
    result = reconcile(made)
    assert result["action"] == "none" and result["why"].endswith(": upgrading to 1.35")


def test_an_update_in_progress_is_retried_on_the_next_run(clients):
    made, stubs = clients
    no_hold(stubs)
    block_is(stubs, [block("active")])
    desired_is(stubs, 0)
    stubs["eks"].add_client_error("update_nodegroup_config", "ResourceInUseException", "update in progress",
                                  http_status_code=409)
    assert reconcile(made)["action"] == "retry"


def test_a_missing_block_keeps_the_group_at_zero(clients):
    made, stubs = clients
    no_hold(stubs)
    block_is(stubs, [])
    desired_is(stubs, 0)
    assert reconcile(made)["why"] == "the Capacity Block is not found"


def test_the_handler_says_what_ran_it(clients, monkeypatch, capsys):
    made, stubs = clients
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(handler, "datetime", frozen_at(NOW))  # the handler reads the clock
    no_hold(stubs)
    block_is(stubs, [block("active")])
    desired_is(stubs, 8)
    result = handler.handler({"detail-type": "Capacity Block Delivered"}, None, clients=made)
    assert result["trigger"] == "Capacity Block Delivered" and '"action": "none"' in capsys.readouterr().out


# --- node repair: never in the block's last hour ------------------------------------------------

REPAIR = {"enabled": True, "maxParallelNodesRepairedCount": 2, "maxUnhealthyNodeThresholdCount": 2}
REPAIR_ENV = {**ENV, "REPAIR": json.dumps(REPAIR), "BLOCK_GUARD_MINUTES": "60"}


def group_is(stubs, desired, repair_enabled):
    stubs["eks"].add_response("describe_nodegroup", {"nodegroup": {
        "nodegroupName": ENV["NODEGROUP"], "clusterName": "p5en-eks", "status": "ACTIVE",
        "capacityType": "CAPACITY_BLOCK", "scalingConfig": {"minSize": 0, "maxSize": 8, "desiredSize": desired},
        "nodeRepairConfig": {**REPAIR, "enabled": repair_enabled}}},
        {"clusterName": "p5en-eks", "nodegroupName": ENV["NODEGROUP"]})


def repair_set(stubs, enabled):
    """The whole configuration is sent, limits kept: only `enabled` changes."""
    stubs["eks"].add_response("update_nodegroup_config", {"update": {"id": "u-2", "status": "InProgress",
                                                                     "type": "ConfigUpdate"}},
                              {"clusterName": "p5en-eks", "nodegroupName": ENV["NODEGROUP"],
                               "nodeRepairConfig": {**REPAIR, "enabled": enabled}})


def reconcile_repair(made, now=NOW):
    return handler.reconcile(made["ec2"], made["eks"], made["ssm"], REPAIR_ENV, now)


@pytest.mark.parametrize("left, on", [(timedelta(minutes=59), False), (timedelta(minutes=60), False),
                                      (timedelta(minutes=61), True), (timedelta(days=2), True)])
def test_repair_is_off_in_the_blocks_last_hour(clients, left, on):
    """Repair on while the block has more than BLOCK_GUARD_MINUTES left; off from then on."""
    made, stubs = clients
    no_hold(stubs)
    block_is(stubs, [block("active", end=NOW + left)])
    group_is(stubs, 8, repair_enabled=not on)
    repair_set(stubs, on)
    result = reconcile_repair(made)
    assert (result["action"], result["repair"]) == ("none", "on" if on else "off")
    if not on:
        assert result["repair_why"] == (f"the Capacity Block ends at {NOW + left:%Y-%m-%d %H:%MZ}: "
                                        "no repair in its last 60 minutes")


def test_repair_already_as_wanted_is_left_alone(clients):
    made, stubs = clients
    no_hold(stubs)
    block_is(stubs, [block("active", end=NOW + timedelta(minutes=30))])
    group_is(stubs, 0, repair_enabled=False)
    result = reconcile_repair(made)
    assert (result["action"], result["repair"]) == ("none", "none")


def test_repair_goes_off_before_the_group_drains(clients):
    """Both change in one run (a deploy 40 minutes before the end): repair first, then the scaling."""
    made, stubs = clients
    no_hold(stubs)
    block_is(stubs, [block("active", end=NOW + timedelta(minutes=40))])
    group_is(stubs, 8, repair_enabled=True)
    repair_set(stubs, False)
    scaled_to(stubs, 0)
    result = reconcile_repair(made)
    assert (result["action"], result["repair"]) == ("scaled", "off")


def test_repair_comes_on_after_the_group_scales_up(clients):
    made, stubs = clients
    no_hold(stubs)
    block_is(stubs, [block("active")])
    group_is(stubs, 0, repair_enabled=False)
    scaled_to(stubs, 8)
    repair_set(stubs, True)
    result = reconcile_repair(made)
    assert (result["action"], result["repair"]) == ("scaled", "on")
    assert result["repair_why"] == "the Capacity Block is active until 2026-12-03 12:00Z"


@pytest.mark.parametrize("state", ["scheduled", "expired"])
def test_no_repair_outside_an_active_block(clients, state):
    made, stubs = clients
    no_hold(stubs)
    block_is(stubs, [block(state)])
    group_is(stubs, 0, repair_enabled=True)
    repair_set(stubs, False)
    assert reconcile_repair(made)["repair"] == "off"


def test_a_repair_change_during_an_update_is_retried(clients):
    made, stubs = clients
    no_hold(stubs)
    block_is(stubs, [block("active", end=NOW + timedelta(minutes=50))])
    group_is(stubs, 8, repair_enabled=True)
    stubs["eks"].add_client_error("update_nodegroup_config", "ResourceInUseException", "update in progress",
                                  http_status_code=409)
    result = reconcile_repair(made)
    assert result["repair"] == "retry" and "update in progress" in result["error"]


def test_without_repair_wanted_the_scaler_leaves_it_alone(clients):
    """health.replace false: no REPAIR; the group's repair (off, from the template) is not touched."""
    made, stubs = clients
    no_hold(stubs)
    block_is(stubs, [block("active", end=NOW + timedelta(minutes=50))])
    group_is(stubs, 8, repair_enabled=False)
    result = handler.reconcile(made["ec2"], made["eks"], made["ssm"], {**ENV, "REPAIR": ""}, NOW)
    assert "repair" not in result and result["action"] == "none"


def test_a_hold_leaves_repair_alone_too(clients):
    made, stubs = clients
    stubs["ssm"].add_response("get_parameter", {"Parameter": {"Name": ENV["HOLD_PARAMETER"], "Type": "String",
                                                              "Value": "upgrading", "Version": 1}},
                              {"Name": ENV["HOLD_PARAMETER"]})
    assert "repair" not in reconcile_repair(made)
