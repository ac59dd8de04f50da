"""fmcluster.spec.rules.ultraserver and the Local Zone network rules: P6e-GB200 UltraServer groups
(whole UltraServers on an UltraServer Capacity Block, no placement group, control planes that run
them) and GPU nodes in a Local Zone with the control plane in the region."""

import pytest

from fmcluster.spec.rules import network, orchestrator, ultraserver
from tests.support.specs import base_spec, findings, messages, paths, problems, with_
from tests.support.ultraserver import DALLAS, G0, RG, gb200


def test_a_whole_ultraserver_block_in_the_dallas_local_zone_is_valid():
    """Valid; on AWS PCS with a warning: GB200's EFA cards are EFA-only and PCS documents no layout
    for them (pcs-efa-only-interfaces)."""
    assert [(d.severity, d.rule) for d in problems(gb200()) if d.severity != "info"] == [
        ("warning", "pcs-efa-only-interfaces"), ("warning", "placeholder-values")]  # CR: an example id
    accepted = with_(gb200(), "accepted_warnings", [{"rule": "pcs-efa-only-interfaces", "reason": "tried"}])
    assert [(d.severity, d.rule) for d in problems(accepted) if d.severity != "info"] == [
        ("accepted", "pcs-efa-only-interfaces"), ("warning", "placeholder-values")]


def test_gb200_on_pcs_is_warned_of_its_efa_only_cards():
    (diag,) = [d for d in problems(gb200()) if d.rule == "pcs-efa-only-interfaces"]
    assert diag.severity == "warning" and diag.path == ("node_groups", 0, "instance_type")
    assert "(1, 5, 9, 13) are EFA-only" in diag.message and "PCS documents no" in diag.message
    # EKS takes efa-only in its launch templates; no EFA, no efa-only interfaces
    assert not findings(ultraserver.pcs_efa_only_interfaces, gb200(orchestrator_type="eks", version="1.33"))
    assert not findings(ultraserver.pcs_efa_only_interfaces, with_(gb200(), f"{G0}.efa", False))
    assert not findings(ultraserver.pcs_efa_only_interfaces, base_spec())  # p5.48xlarge on PCS: efa


@pytest.mark.parametrize("extra", [{"ultraserver_type": "u-p6e-gb200x36", "ultraserver_count": 2},
                                   {"reservation_id": None, "reservation_resource_group_arn": RG}])
def test_two_small_ultraservers_or_a_resource_group_are_valid(extra):
    """18 = 2 x u-p6e-gb200x36; UltraServer blocks (only they) may be targeted by resource group."""
    assert paths(gb200(**extra)) == set()


def test_an_ultraserver_type_off_a_capacity_block_is_refused():
    spec = with_(gb200(), f"{G0}.capacity", {"type": "on-demand"})
    assert findings(ultraserver.ultraserver_capacity, spec)
    (message,) = messages(spec, f"{G0}.capacity.type")
    assert "sold only as UltraServer Capacity Blocks" in message and "u-p6e-gb200x72" in message


def test_an_ultraserver_block_must_say_its_ultraserver_type():
    spec = gb200(ultraserver_type=None)
    (message,) = messages(spec, f"{G0}.capacity.ultraserver_type")
    assert "say its UltraServer type" in message and "u-p6e-gb200x36, u-p6e-gb200x72" in message


def test_an_ultraserver_type_of_another_instance_type_is_refused():
    spec = with_(gb200(count=2), f"{G0}.instance_type", "p5.48xlarge")
    (message,) = messages(spec, f"{G0}.capacity.ultraserver_type")
    assert "made of p6e-gb200.36xlarge" in message


def test_an_unknown_ultraserver_type_is_a_format_error():
    spec = gb200(ultraserver_type="u-p6e-gb200x8")
    (diag,) = [d for d in problems(spec) if d.rule == "ultraserver-type"]
    assert "unknown UltraServer type" in diag.message and "u-p6e-gb200x72" in diag.hint


@pytest.mark.parametrize("count,servers,kind", [(19, 1, "u-p6e-gb200x72"), (10, 1, "u-p6e-gb200x36"),
                                                (37, 2, "u-p6e-gb200x72")])
def test_more_nodes_than_the_ultraservers_hold_is_an_error(count, servers, kind):
    spec = gb200(count=count, ultraserver_type=kind, ultraserver_count=servers)
    (message,) = messages(spec, f"{G0}.count")
    assert f"the group asks for {count}" in message


def test_a_partial_ultraserver_is_a_warning_that_can_be_accepted():
    spec = gb200(count=17)
    assert paths(spec) == set()
    (message,) = messages(spec, f"{G0}.count", "warning")
    assert "17 of the 18 instances" in message and "1 paid for and idle" in message
    accepted = with_(spec, "accepted_warnings", [{"rule": "ultraserver-partial", "reason": "one spare"},
                                                 {"rule": "pcs-efa-only-interfaces", "reason": "tried"}])
    assert paths(accepted, "warning") == {f"{G0}.capacity.reservation_id"}  # CR, an example id: a placeholder


def test_an_ultraserver_group_takes_no_placement_group():
    spec = with_(gb200(), f"{G0}.placement_group", "my-cluster-pg")
    (message,) = messages(spec, f"{G0}.placement_group")
    assert "takes no placement group" in message
    assert findings(ultraserver.ultraserver_placement_group, with_(gb200(), f"{G0}.placement_group", "none")) == []


@pytest.mark.parametrize("type_,old,new", [("pcs", "24.11", "25.05"), ("eks", "1.32", "1.33"),
                                           ("hyperpod-eks", "1.32", "1.33")])
def test_control_plane_versions_that_run_ultraservers(type_, old, new):
    az, extra = ("use1-az4", ("use1-az6",)) if type_ == "hyperpod-eks" else (DALLAS, ("use1-az4", "use1-az6"))
    capacity = {"reservation_id": None, "training_plan_arn":
                "arn:aws:sagemaker:us-east-1:111122223333:training-plan/gb200"} if type_ == "hyperpod-eks" else {}
    spec = gb200(orchestrator_type=type_, version=old, az=az, extra=extra, **capacity)
    (message,) = messages(spec, "orchestrator.version")
    assert f"from {'Slurm' if type_ == 'pcs' else 'Kubernetes'} version {new}" in message
    assert paths(gb200(orchestrator_type=type_, version=new, az=az, extra=extra, **capacity)) == set()


def test_the_capacity_block_by_id_rule_still_holds_for_instance_blocks():
    spec = with_(base_spec(), f"{G0}.capacity", {"type": "capacity-block", "reservation_resource_group_arn": RG})
    assert "node_groups[0].capacity.reservation_resource_group_arn" in paths(spec)


# ---- Local Zones -------------------------------------------------------------------------

def test_a_local_zone_id_is_an_az_id_of_its_region():
    assert findings(network.az_ids_in_region, gb200()) == []
    spec = with_(gb200(), "region", "us-west-2")
    assert any("Local Zone ID 'use1-dfw2-az1' is in us-east-1" in m for m in messages(spec, "availability_zone_id"))


def test_a_local_zone_does_not_count_as_the_control_planes_zone():
    spec = gb200(extra=())
    (message,) = messages(spec, "network.extra_availability_zone_ids")
    assert "at least 1 Availability Zones of us-east-1; the spec has 0" in message
    assert "does not count" in message and "use1-az1" in message
    eks = gb200(orchestrator_type="eks", version="1.33", extra=("use1-az4",))
    assert findings(orchestrator.enough_availability_zones, eks)


def test_extra_zones_are_availability_zones():
    spec = gb200(az="use1-az4", extra=(DALLAS,))
    (message,) = messages(spec, "network.extra_availability_zone_ids[0]")
    assert "is a Local Zone" in message


@pytest.mark.parametrize("type_", ["hyperpod-slurm", "hyperpod-eks"])
def test_hyperpod_is_not_built_in_a_local_zone(type_):
    spec = with_(base_spec(availability_zone_id=DALLAS,
                           network={"extra_availability_zone_ids": ["use1-az4", "use1-az6"]}),
                 "orchestrator.type", type_)
    assert findings(network.local_zone_control_plane, spec)
    assert any("Availability Zones only" in m for m in messages(spec, "availability_zone_id"))


def test_hyperpod_slurm_ultraserver_groups_are_not_built_yet():
    spec = gb200(orchestrator_type="hyperpod-slurm", version="24.11", az="use1-az4", extra=(),
                 reservation_id=None, training_plan_arn="arn:aws:sagemaker:us-east-1:111122223333:training-plan/gb200")
    found = messages(spec, f"{G0}.instance_type")
    assert any("not build UltraServer groups" in m and "pcs" in m for m in found)
    # and, besides, HyperPod publishes no arm64 base to bake the group's image from (hyperpod-slurm-image-base)
    assert any("no arm64 Slurm base image" in m for m in found) and len(found) == 2


def test_eks_follows_an_ultraserver_block_by_its_reservation_id():
    spec = gb200(orchestrator_type="eks", version="1.33", extra=("use1-az4", "use1-az6"),
                 reservation_id=None, reservation_resource_group_arn=RG)
    (message,) = messages(spec, f"{G0}.capacity.reservation_resource_group_arn")
    assert "follows its block by the block's reservation_id" in message
    assert paths(gb200(orchestrator_type="eks", version="1.33", extra=("use1-az4", "use1-az6"))) == set()


def test_an_ultraserver_type_needs_a_capacity_block():
    spec = with_(gb200(), f"{G0}.capacity", {"type": "on-demand", "ultraserver_type": "u-p6e-gb200x72"})
    assert findings(ultraserver.ultraserver_type_matches, spec)
    assert any("the capacity type is on-demand" in m for m in messages(spec, f"{G0}.capacity.ultraserver_type"))
    assert findings(ultraserver.ultraserver_type_matches, gb200()) == []
