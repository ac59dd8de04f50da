"""The end of the reserved capacity (fmcluster.observability.capacity): what NAME-observability counts
down to, with which alarms, and what each control plane does at the end, for the examples and
variants of the base spec (no synthesis: tests/cdk/test_observability_stack.py holds the stack
to it)."""

from __future__ import annotations

import pytest

from fmcluster.model.cluster import resolve
from fmcluster.observability import capacity as capacity_end
from fmcluster.spec import loader
from tests.support.paths import ROOT
from tests.support.specs import base_spec, validated, with_
from tests.support.ultraserver import CR, gb200

BLOCK = {"type": "capacity-block", "reservation_id": CR}


def model_of(example: str):
    return resolve(loader.load(ROOT / "examples" / example).spec)


def test_a_block_is_counted_with_an_alarm_a_day_before_and_one_an_hour_before_ec2_terminates():
    (counted,) = capacity_end.counted(model_of("p5-pcs.yaml"))
    assert (counted.capacity, counted.kind, counted.groups, counted.termination_minutes) == (
        "cr-0123456789abcdef0", "capacity-block", ("gpu",), 30)
    day, ending = counted.thresholds()
    assert (day.suffix, day.hours, ending.suffix, ending.hours) == ("last-day", 24, "ending", 1.5)
    assert capacity_end.alarm_names("llm-pretrain", counted) == [
        "fmcluster-llm-pretrain-cr-0123456789abcdef0-last-day", "fmcluster-llm-pretrain-cr-0123456789abcdef0-ending"]
    assert "ends within 1.5 hours" in ending.meaning and "from 30 minutes before its end" in ending.meaning


def test_an_ultraserver_blocks_instances_go_from_an_hour_before_so_its_alarm_comes_earlier():
    (counted,) = capacity_end.counted(resolve(validated(gb200())))
    assert counted.termination_minutes == 60 and counted.thresholds()[1].hours == 2


def test_a_training_plan_is_counted_by_its_name():
    (counted,) = capacity_end.counted(model_of("p5-hyperpod-eks.yaml"))
    assert (counted.capacity, counted.kind, counted.reservation_id) == ("p5-pretrain", "training-plan", None)
    assert counted.training_plan_arn == "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5-pretrain"
    assert counted.termination_minutes == 30 and counted.label == "p5-pretrain (train)"


def test_groups_on_one_block_are_counted_once_and_named_together():
    spec = with_(with_(base_spec(), "node_groups[0].capacity", BLOCK), "node_groups[1]",
                 {"name": "more", "instance_type": "p5.48xlarge", "count": 1, "capacity": BLOCK})
    (counted,) = capacity_end.counted(resolve(validated(spec)))
    assert counted.groups == ("gpu", "more") and counted.label == f"{CR} (gpu, more)"


@pytest.mark.parametrize("capacity", [
    {"type": "reservation", "reservation_id": CR},  # an ODCR: its instances outlive it
    {"type": "capacity-block", "reservation_resource_group_arn":
        "arn:aws:resource-groups:us-east-1:111122223333:group/blocks"},  # its members are known at run time
    {"type": "on-demand"},
])
def test_what_is_not_counted(capacity):
    assert capacity_end.counted(resolve(validated(with_(base_spec(), "node_groups[0].capacity", capacity)))) == []


def test_a_cluster_without_observability_counts_nothing():
    spec = with_(with_(base_spec(), "node_groups[0].capacity", BLOCK), "observability",
                 {"prometheus": False, "grafana": False})
    m = resolve(validated(spec))
    assert not m.observed and capacity_end.counted(m) == []


@pytest.mark.parametrize(("example", "says"), [
    ("p5-pcs.yaml", "a Slurm maintenance reservation on the group's nodes from 30 minutes before the end"),
    ("p5-pcs.yaml", "15 minutes before it begins, the running jobs get SIGUSR1 (to checkpoint) and the nodes drain"),
    ("p5-pcs.yaml", "; EC2 terminates the instances from 30 minutes before the end"),
    ("p6-b200-hyperpod-slurm.yaml", "SageMaker terminates the training plan's instances from 30 minutes before"),
    ("p6-b200-hyperpod-slurm.yaml", "a Slurm maintenance reservation on the group's nodes from 30 minutes before"),
    ("p5en-reservation-pcs.yaml", "EC2 keeps the running instances as On-Demand instances"),
])
def test_what_happens_at_the_end_on_each_plane(example, says):
    m = model_of(example)
    assert says in capacity_end.at_end(m, m.node_groups[0])


@pytest.mark.parametrize("example", ["p5en-eks.yaml", "p6e-gb200-eks.yaml", "p5-hyperpod-eks.yaml"])
def test_the_kubernetes_planes_ends_are_said_by_the_function_that_handles_them(example):
    """A Capacity Block of EKS or a training plan of HyperPod EKS: a function in the cluster handles
    its end, and the plan says what it does (fmcluster.kubernetes.capacity_end.at_end), not this."""
    from fmcluster.facts import prices
    from fmcluster.kubernetes import capacity_end as kubernetes_end
    from fmcluster.plan import capacity as plan_capacity

    m = model_of(example)
    group = m.node_groups[0]
    assert capacity_end.at_end(m, group) is None
    said = kubernetes_end.at_end(m, group)
    assert said and [c.at_end for c in plan_capacity.capacities(m, {}, prices.table())][0] == said


def test_at_the_end_of_an_ultraserver_block_pcs_reserves_and_ec2_terminates_from_60_minutes():
    m = resolve(validated(gb200()))
    text = capacity_end.at_end(m, m.node_groups[0])
    assert "a Slurm maintenance reservation on the group's nodes from 60 minutes before the end" in text
    assert text.endswith("; EC2 terminates the instances from 60 minutes before the end")


def test_on_demand_and_spot_groups_have_no_end():
    m = model_of("p6-b200-hyperpod-slurm.yaml")
    assert [capacity_end.at_end(m, g) is None for g in m.node_groups] == [False, True]
    m = model_of("p5-hyperpod-eks.yaml")  # a spot group, with no Slurm to signal its jobs
    assert capacity_end.at_end(m, m.node_groups[1]) is None
