"""The plan's reserved capacity (issue 41): each group's Capacity Block, reservation or training
plan, its window and cost where `fmcluster preflight` read them (offline: where to read them),
what happens at its end on its control plane, and the alarms that count down to it."""

from __future__ import annotations

import json

import pytest
import yaml

from fmcluster.cli import main
from fmcluster.facts import prices
from fmcluster.plan import capacity as capacity_plan
from fmcluster.plan import report as plan
from fmcluster.spec import loader
from tests.support.paths import ROOT
from tests.support.specs import base_spec, validated, with_

CR = "cr-0123456789abcdef0"
PLAN_ARN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/b200-pretrain"
RG = "arn:aws:resource-groups:us-east-1:111122223333:group/blocks"


def plan_of(example: str, reservations=()) -> plan.Plan:
    path = ROOT / "examples" / example
    return plan.build(loader.load(path).spec, yaml.safe_load(path.read_text()), reservations=reservations)


def read(rid=CR, kind="capacity-block", state="active", start="2026-11-30T12:00:00Z", end="2026-12-07T12:00:00Z",
         instances=16, fee=None, currency=None, instance_type="p5.48xlarge") -> dict:
    """An entry of preflight's "reservations", as `fmcluster preflight --format json` writes it."""
    return {"id": rid, "kind": kind, "state": state, "instance_type": instance_type, "instances": instances,
            "start": start, "end": end, "upfront_fee": fee, "currency": currency}


def test_offline_the_plan_says_where_to_read_the_window_and_counts_down_to_the_block():
    (held,) = plan_of("p5-pcs.yaml").capacity
    assert (held.node_group, held.kind, held.capacity, held.read) == ("gpu", "capacity-block", CR, False)
    assert (held.state, held.start, held.end, held.hours, held.total_cost) == (None, None, None, None, None)
    assert capacity_plan.window_cell(held) == capacity_plan.HOW_TO_READ
    assert "EC2 does not report a bought block's" in held.cost
    assert held.at_end.startswith("a Slurm maintenance reservation on the group's nodes from 30 minutes before the end")
    assert [(a.name, a.hours) for a in held.countdown_alarms] == [
        (f"fmcluster-llm-pretrain-{CR}-last-day", 24), (f"fmcluster-llm-pretrain-{CR}-ending", 1.5)]


def test_a_block_read_by_preflight_shows_its_window_and_hours_but_no_price():
    (held,) = plan_of("p5-pcs.yaml", [read()]).capacity
    assert (held.read, held.state, held.hours, held.instances) == (True, "active", 168, 16)
    assert (held.upfront_fee, held.total_cost) == (None, None)
    assert capacity_plan.window_cell(held) == ("2026-11-30T12:00:00Z to 2026-12-07T12:00:00Z, 168 h "
                                               "(active, 16 instances)")


def test_a_training_plan_read_by_preflight_costs_its_upfront_fee():
    found = read(rid=PLAN_ARN, kind="training-plan", state="Scheduled", start="2026-12-02T00:00:00Z",
                 end="2026-12-09T00:00:00Z", fee="262080.00", currency="USD", instance_type="p6-b200.48xlarge")
    (held,) = plan_of("p6-b200-hyperpod-slurm.yaml", [found]).capacity
    assert (held.kind, held.hours, held.upfront_fee, held.currency, held.total_cost) == (
        "training-plan", 168, 262080.0, "USD", 262080.0)
    assert held.cost == "USD 262,080.00 paid up front: the plan's whole price"
    assert held.at_end.startswith("SageMaker terminates the training plan's instances from 30 minutes")
    (_, train), = [(g.name, g) for g in plan_of("p6-b200-hyperpod-slurm.yaml", [found]).node_groups
                   if g.name == "train"]
    assert train.window.startswith("2026-12-02T00:00:00Z to 2026-12-09T00:00:00Z (Scheduled, 16 instances)")


def test_an_on_demand_reservation_costs_its_instances_at_the_list_price_for_every_hour():
    unit = prices.table().instance_hourly("p5en.48xlarge")
    offline = plan_of("p5en-reservation-pcs.yaml").capacity[0]
    assert offline.total_cost is None and offline.cost.startswith(f"${unit:,.2f}/h per instance at us-east-1 list")
    found = read(rid="cr-0fedcba9876543210", kind="reservation", end="2026-12-01T12:00:00Z", instances=32,
                 instance_type="p5en.48xlarge")
    (held,) = plan_of("p5en-reservation-pcs.yaml", [found]).capacity
    assert held.hours == 24 and held.total_cost == round(unit * 32 * 24, 2)
    assert held.cost.startswith(f"32 x ${unit:,.2f}/h per instance")
    assert held.cost.endswith("x 24 h, billed used or not")
    assert "EC2 keeps the running instances as On-Demand instances" in held.at_end
    assert held.countdown == "none: an On-Demand Capacity Reservation's instances outlive it"
    (endless,) = plan_of("p5en-reservation-pcs.yaml", [{**found, "end": None}]).capacity
    assert endless.total_cost is None and endless.cost.endswith("used or not: no end date")
    assert capacity_plan.window_cell(endless) == "from 2026-11-30T12:00:00Z, no end date (active, 32 instances)"


def test_a_resource_group_and_an_unobserved_cluster_say_why_nothing_counts_down():
    spec = with_(base_spec(), "node_groups[0].capacity", {"type": "capacity-block",
                                                         "reservation_id": None, "reservation_resource_group_arn": RG})
    (held,) = plan.build(validated(spec), spec).capacity
    assert held.capacity == RG and held.countdown_alarms == []
    assert held.countdown.startswith("none: a resource group's reservations are known only at run time")
    assert capacity_plan.window_cell(held).startswith("a resource group:")
    dark = with_(with_(base_spec(), "node_groups[0].capacity", {"type": "capacity-block", "reservation_id": CR}),
                 "observability", {"prometheus": False, "grafana": False})
    (held,) = plan.build(validated(dark), dark).capacity
    assert held.countdown == "none: the cluster has no test-cluster-observability (observability.prometheus and " \
                             "grafana off)" and held.countdown_alarms == []


@pytest.mark.parametrize("example", ["p5-hyperpod-eks.yaml", "p5en-eks.yaml"])
def test_groups_on_no_reserved_capacity_have_no_record(example):
    p = plan_of(example)
    assert [c.node_group for c in p.capacity] == [g.name for g in p.node_groups[:1]]  # the second: spot, on-demand


def test_the_json_plan_carries_each_record(capsys):
    assert main(["plan", str(ROOT / "examples/p6e-gb200-eks.yaml"), "--format", "json"]) == 0
    (held,) = json.loads(capsys.readouterr().out)["capacity"]
    assert held["kind"] == "capacity-block" and held["read"] is False
    assert "to 0 from 75 minutes before the end" in held["at_end"]
    assert [a["hours"] for a in held["countdown_alarms"]] == [24, 2]  # EC2 terminates an UltraServer's from 60
