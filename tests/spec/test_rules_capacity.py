"""fmcluster.spec.rules.capacity: node-group sizing, reservations, Capacity Blocks, placement, EFA."""

import pytest

from fmcluster.spec.rules import capacity
from tests.support.specs import base_spec, findings, messages, paths, with_, without

CR = "cr-0123456789abcdef0"
RG = "arn:aws:resource-groups:us-east-1:111122223333:group/gpu-reservations"
G0 = "node_groups[0]"


def group(**fields):
    """The base spec with node_groups[0] fields replaced (None: the field is left out)."""
    spec = base_spec()
    for key, value in fields.items():
        if value is not None:
            spec = with_(spec, f"{G0}.{key}", value)
        elif key in spec["node_groups"][0]:
            spec = without(spec, f"{G0}.{key}")
    return spec


def cap(**fields):
    return group(capacity=fields)


# ---- count_or_range -------------------------------------------------------------------

@pytest.mark.parametrize("sizing", [{"count": 4}, {"count": None, "min_count": 0, "max_count": 8},
                                    {"count": None, "max_count": 8}])
def test_count_or_a_range_passes(sizing):
    spec = group(**sizing)
    assert findings(capacity.count_or_range, spec) == []
    assert paths(spec) == set()


@pytest.mark.parametrize("extra", [{"min_count": 1}, {"max_count": 4}, {"min_count": 1, "max_count": 4}])
def test_count_with_min_or_max_is_an_error(extra):
    spec = group(**extra)
    assert f"{G0}.count" in paths(spec)
    assert "not both" in messages(spec, f"{G0}.count")[0]


@pytest.mark.parametrize("sizing", [{"count": None}, {"count": None, "min_count": 2}])
def test_a_group_without_size_is_an_error(sizing):
    spec = group(**sizing)
    assert G0 in paths(spec)
    assert "no size" in messages(spec, G0)[0]


# ---- min_not_above_max ----------------------------------------------------------------

@pytest.mark.parametrize("low, high", [(0, 8), (4, 4)])
def test_min_not_above_max_passes(low, high):
    spec = group(count=None, min_count=low, max_count=high)
    assert findings(capacity.min_not_above_max, spec) == []
    assert paths(spec) == set()


def test_min_above_max_is_an_error():
    spec = group(count=None, min_count=5, max_count=2)
    assert f"{G0}.min_count" in paths(spec)
    assert "min_count 5 is above max_count 2" in messages(spec, f"{G0}.min_count")[0]


# ---- group_not_empty ------------------------------------------------------------------

def test_group_with_nodes_passes():
    spec = group(count=1)
    assert findings(capacity.group_not_empty, spec) == []


def test_zero_count_group_is_an_error():
    spec = group(count=0)
    assert f"{G0}.count" in paths(spec)
    assert "never have a node" in messages(spec, f"{G0}.count")[0]


def test_zero_max_count_group_is_an_error():
    spec = group(count=None, min_count=0, max_count=0)
    assert f"{G0}.max_count" in paths(spec)
    assert "never have a node" in messages(spec, f"{G0}.max_count")[0]


# ---- reservation_given ----------------------------------------------------------------

@pytest.mark.parametrize("fields", [{"type": "reservation", "reservation_id": CR},
                                    {"type": "reservation", "reservation_resource_group_arn": RG},
                                    {"type": "capacity-block", "reservation_id": CR},
                                    {"type": "on-demand"}, {"type": "spot"}])
def test_reservation_given_passes(fields):
    spec = cap(**fields)
    assert findings(capacity.reservation_given, spec) == []
    assert paths(spec) == set()


@pytest.mark.parametrize("kind", ["reservation", "capacity-block"])
def test_reserved_capacity_without_reservation_id(kind):
    spec = cap(type=kind)
    assert f"{G0}.capacity.reservation_id" in paths(spec)
    assert f"{kind} needs a reservation_id" in messages(spec, f"{G0}.capacity.reservation_id")[0]


# ---- reservation_only_where_used ------------------------------------------------------

def test_reservation_id_with_reservation_type_passes():
    spec = cap(type="reservation", reservation_id=CR)
    assert findings(capacity.reservation_only_where_used, spec) == []


@pytest.mark.parametrize("kind", ["on-demand", "spot"])
@pytest.mark.parametrize("field, value", [("reservation_id", CR), ("reservation_resource_group_arn", RG)])
def test_reservation_with_unreserved_capacity_type(kind, field, value):
    spec = cap(type=kind, **{field: value})
    assert f"{G0}.capacity.{field}" in paths(spec)
    assert f"capacity type is {kind}" in messages(spec, f"{G0}.capacity.{field}")[0]


# ---- one_reservation_target -----------------------------------------------------------

def test_one_reservation_target_passes():
    spec = cap(type="reservation", reservation_resource_group_arn=RG)
    assert findings(capacity.one_reservation_target, spec) == []


def test_reservation_id_and_resource_group_together():
    spec = cap(type="reservation", reservation_id=CR, reservation_resource_group_arn=RG)
    assert f"{G0}.capacity.reservation_resource_group_arn" in paths(spec)
    assert "not both" in messages(spec, f"{G0}.capacity.reservation_resource_group_arn")[0]


# ---- capacity_block_by_id -------------------------------------------------------------

def test_capacity_block_by_reservation_id_passes():
    spec = cap(type="capacity-block", reservation_id=CR)
    assert findings(capacity.capacity_block_by_id, spec) == []


def test_capacity_block_by_resource_group():
    spec = cap(type="capacity-block", reservation_resource_group_arn=RG)
    assert f"{G0}.capacity.reservation_resource_group_arn" in paths(spec)
    assert any("resource group" in m for m in messages(spec, f"{G0}.capacity.reservation_resource_group_arn"))


# ---- capacity_block_fixed_size --------------------------------------------------------

def test_capacity_block_with_count_passes():
    spec = cap(type="capacity-block", reservation_id=CR)
    assert findings(capacity.capacity_block_fixed_size, spec) == []


def test_elastic_capacity_block_points_at_min_count():
    spec = with_(group(count=None, min_count=0, max_count=4), f"{G0}.capacity",
                 {"type": "capacity-block", "reservation_id": CR})
    assert f"{G0}.min_count" in paths(spec)
    assert "fixed size" in messages(spec, f"{G0}.min_count")[0]


# ---- capacity_block_offered -----------------------------------------------------------

@pytest.mark.parametrize("instance_type", ["p5.48xlarge", "p5en.48xlarge", "p6-b300.48xlarge"])
def test_capacity_block_instance_types_pass(instance_type):
    spec = with_(cap(type="capacity-block", reservation_id=CR), f"{G0}.instance_type", instance_type)
    assert findings(capacity.capacity_block_offered, spec) == []
    assert paths(spec) == set()


def test_capacity_block_of_a_cpu_type():
    spec = with_(cap(type="capacity-block", reservation_id=CR), f"{G0}.instance_type", "c7i.8xlarge")
    assert f"{G0}.instance_type" in paths(spec)
    assert "not offered as a Capacity Block" in messages(spec, f"{G0}.instance_type")[0]


# ---- capacity_block_not_placed --------------------------------------------------------

@pytest.mark.parametrize("pg", ["auto", "none"])
def test_capacity_block_with_auto_placement_passes(pg):
    spec = with_(cap(type="capacity-block", reservation_id=CR), f"{G0}.placement_group", pg)
    assert findings(capacity.capacity_block_not_placed, spec) == []
    assert paths(spec) == set()


def test_capacity_block_with_a_named_placement_group_is_a_warning():
    """EC2 accepts it; the block is placed already, so the group only risks capacity errors."""
    spec = with_(cap(type="capacity-block", reservation_id=CR), f"{G0}.placement_group", "my-pg")
    assert paths(spec) == set()
    assert f"{G0}.placement_group" in paths(spec, severity="warning")
    assert "placed already" in messages(spec, f"{G0}.placement_group", severity="warning")[0]


# ---- placement_group_name -------------------------------------------------------------

@pytest.mark.parametrize("pg", ["auto", "none", "my-pg", "Train_PG.1", "p" * 255])
def test_placement_group_names_pass(pg):
    spec = group(placement_group=pg)
    assert findings(capacity.placement_group_name, spec) == []
    assert paths(spec) == set()


@pytest.mark.parametrize("pg", ["", "my pg", "pg/1", "pg!", "p" * 256])
def test_bad_placement_group_names(pg):
    spec = group(placement_group=pg)
    assert f"{G0}.placement_group" in paths(spec)
    assert "not auto, none or a placement group name" in messages(spec, f"{G0}.placement_group")[0]


# ---- efa_supported --------------------------------------------------------------------

@pytest.mark.parametrize("instance_type, efa", [("p5.48xlarge", True), ("c7i.48xlarge", True),
                                                ("c7i.8xlarge", False), ("c7i.8xlarge", None)])
def test_efa_where_supported_passes(instance_type, efa):
    spec = group(instance_type=instance_type, efa=efa)
    assert findings(capacity.efa_supported, spec) == []
    assert f"{G0}.efa" not in paths(spec)


def test_efa_on_c7i_8xlarge():
    spec = group(instance_type="c7i.8xlarge", efa=True)
    assert f"{G0}.efa" in paths(spec)
    assert "c7i.8xlarge does not support EFA" in messages(spec, f"{G0}.efa")[0]


# ---- capacity_supported_by_control_plane ----------------------------------------------

@pytest.mark.parametrize("orchestrator, kind", [("pcs", "spot"), ("pcs", "on-demand"),
                                                ("hyperpod-slurm", "on-demand")])
def test_capacity_types_the_control_plane_supports(orchestrator, kind):
    spec = with_(cap(type=kind), "orchestrator.type", orchestrator)
    assert findings(capacity.capacity_supported_by_control_plane, spec) == []
    assert paths(spec) == set()


@pytest.mark.parametrize("orchestrator", ["hyperpod-slurm"])  # HyperPod offers Spot with EKS only
def test_spot_on_hyperpod(orchestrator):
    spec = with_(cap(type="spot"), "orchestrator.type", orchestrator)
    assert f"{G0}.capacity.type" in paths(spec)
    (message,) = messages(spec, f"{G0}.capacity.type")
    assert f"{orchestrator} does not support spot" in message
    assert "supported: on-demand, reservation, capacity-block" in message


# ---- training_plan_given (HyperPod takes reserved capacity through a training plan) -----

PLAN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5-plan"


def hyperpod(**fields):
    return with_(cap(**fields), "orchestrator.type", "hyperpod-slurm")


@pytest.mark.parametrize("fields", [{"type": "capacity-block", "training_plan_arn": PLAN},
                                    {"type": "reservation", "training_plan_arn": PLAN},
                                    {"type": "on-demand"}])
def test_hyperpod_reserved_capacity_with_training_plan_passes(fields):
    spec = hyperpod(**fields)
    assert findings(capacity.training_plan_given, spec) == []
    assert findings(capacity.reservation_given, spec) == []  # no reservation_id needed on HyperPod
    assert paths(spec) == set()


def test_training_plan_rule_ignores_pcs():
    assert findings(capacity.training_plan_given, cap(type="capacity-block", reservation_id=CR)) == []


@pytest.mark.parametrize("kind", ["reservation", "capacity-block"])
def test_hyperpod_reserved_capacity_needs_training_plan(kind):
    spec = hyperpod(type=kind)
    assert f"{G0}.capacity.training_plan_arn" in paths(spec)
    assert f"{G0}.capacity.reservation_id" not in paths(spec)
    assert "training plan" in messages(spec, f"{G0}.capacity.training_plan_arn")[0]


@pytest.mark.parametrize("field, value", [("reservation_id", CR), ("reservation_resource_group_arn", RG)])
def test_hyperpod_cannot_target_an_ec2_reservation(field, value):
    spec = hyperpod(type="reservation", training_plan_arn=PLAN, **{field: value})
    assert f"{G0}.capacity.{field}" in paths(spec)
    assert "cannot target an EC2 reservation" in messages(spec, f"{G0}.capacity.{field}")[0]


# ---- min_count = max_count = N is a fixed size (issue 15) ----------------------------------

def test_capacity_block_with_min_equal_to_max_is_a_fixed_size():
    spec = without(cap(type="capacity-block", reservation_id=CR), f"{G0}.count")
    spec = with_(with_(spec, f"{G0}.min_count", 4), f"{G0}.max_count", 4)
    assert findings(capacity.capacity_block_fixed_size, spec) == []
    assert paths(spec) == set()


def test_capacity_block_with_a_range_is_still_refused():
    spec = without(cap(type="capacity-block", reservation_id=CR), f"{G0}.count")
    spec = with_(with_(spec, f"{G0}.min_count", 2), f"{G0}.max_count", 4)
    assert f"{G0}.min_count" in paths(spec)


# ---- end_signal_minutes -------------------------------------------------------------------

@pytest.mark.parametrize("minutes, valid", [(11, False), (12, True), (120, True), (121, False)])
def test_the_end_signal_leaves_a_job_time_to_checkpoint(minutes, valid):
    """At least 12 minutes (tests/node/test_capacity_end.py holds the figure to the nodes' timer): a
    job whose first node is gone is signalled by another up to about 7 minutes after the signal time."""
    spec = cap(type="capacity-block", reservation_id=CR, end_signal_minutes=minutes)
    wrong = f"{G0}.capacity.end_signal_minutes" in paths(spec)
    assert wrong is not valid
