"""The pure side of `fmcluster capacity`: durations and windows, each group's search request (held
to botocore's shapes by the Stubber in tests/deploy/test_capacity.py), offerings read, priced per
hour and ranked, and which of them fit a group."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from fmcluster.deploy.capacity.offerings import (
    BLOCK,
    PLAN,
    Offer,
    Window,
    block_duration_problem,
    block_durations,
    block_offer,
    cheapest_first,
    money,
    need,
    parse_duration,
    parse_time,
    plan_offer,
    search,
    unfit,
    window,
)
from fmcluster.spec import loader
from tests.support.capacity import NOW, START, WEEK, block_offering, plan_offering, spec_of
from tests.support.specs import base_spec, to_yaml

ZONES = {"us-east-1d": "use1-az4", "us-east-1a": "use1-az6"}


def offer(offer_id: str, fee: str | None, hours: int = WEEK, minutes: int = 0, start: datetime = START,
          zone_id: str = "use1-az4", instances: int = 16) -> Offer:
    return Offer(BLOCK, offer_id, "p5.48xlarge", instances, start, start + timedelta(hours=hours, minutes=minutes),
                 hours, minutes, money(fee), "USD", "us-east-1d", zone_id)


@pytest.mark.parametrize("text, hours", [("7d", 168), ("2w", 336), ("168h", 168), ("36", 36), (" 1D ", 24)])
def test_durations_as_typed(text, hours):
    assert parse_duration(text) == hours


@pytest.mark.parametrize("text", ["", "0d", "7days", "-1d", "1.5d", "d"])
def test_what_is_no_duration(text):
    with pytest.raises(ValueError, match="duration such as 7d"):
        parse_duration(text)


def test_times_are_utc_unless_they_say_otherwise():
    assert parse_time("2026-12-01") == datetime(2026, 12, 1, tzinfo=timezone.utc)
    assert parse_time("2026-12-01T11:30Z") == datetime(2026, 12, 1, 11, 30, tzinfo=timezone.utc)
    assert parse_time("2026-12-01T12:30+01:00") == datetime(2026, 12, 1, 11, 30, tzinfo=timezone.utc)
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_time("next tuesday")


def test_capacity_blocks_last_days_up_to_two_weeks_then_weeks_up_to_26():
    """EC2's CapacityDurationHours: 1-day increments up to 14 days, 7-day increments up to 182."""
    allowed = block_durations()
    assert [h // 24 for h in allowed[:15]] == [*range(1, 15), 21]
    assert allowed[-1] == 182 * 24 and len(allowed) == 14 + 24
    assert block_duration_problem(14 * 24) is None and block_duration_problem(182 * 24) is None
    assert "15 days is not one; 14 days or 21 days is" in block_duration_problem(15 * 24)
    assert "189 days is not one; 182 days is" in block_duration_problem(189 * 24)
    assert "36 hours is not one; 1 day or 2 days is" in block_duration_problem(36)


def test_the_window_of_start_end_and_duration():
    end = NOW + timedelta(days=10, hours=5)
    assert window(None, None, WEEK, NOW) == Window(WEEK)
    assert window(None, end, None, NOW) == Window(10 * 24, None, end)  # whole days up to the end
    assert window(START, START + timedelta(days=8), WEEK, NOW) == Window(WEEK, START, START + timedelta(days=8))
    assert "give --duration" in window(None, None, None, NOW)
    assert "is in the past" in window(NOW - timedelta(hours=1), None, WEEK, NOW)
    assert "is not after --start" in window(START, START, WEEK, NOW)
    assert "do not fit between" in window(START, START + timedelta(days=6), WEEK, NOW)
    assert "shorter than a day" in window(None, NOW + timedelta(hours=20), None, NOW)


def test_a_capacity_block_search_asks_for_the_groups_type_count_and_window():
    spec = spec_of("examples/p5-pcs.yaml")
    found = search(spec, spec.node_groups[0], Window(WEEK, START, START + timedelta(days=10)))
    assert found.kind == BLOCK and found.skipped is None
    assert found.kwargs == {"InstanceType": "p5.48xlarge", "InstanceCount": 16, "CapacityDurationHours": WEEK,
                            "StartDateRange": START, "EndDateRange": START + timedelta(days=10)}


def test_an_ultraserver_group_asks_for_its_ultraservers():
    spec = spec_of("examples/p6e-gb200-pcs.yaml")
    found = search(spec, spec.node_groups[0], Window(WEEK))
    assert found.kwargs == {"InstanceType": "p6e-gb200.36xlarge", "CapacityDurationHours": WEEK,
                            "UltraserverType": "u-p6e-gb200x72", "UltraserverCount": 1}


def test_a_hyperpod_group_asks_for_training_plans_of_its_ml_type():
    spec = spec_of("examples/p6-b200-hyperpod-slurm.yaml")
    types = ("ml.p5.48xlarge", "ml.p6-b200.48xlarge")
    found = search(spec, spec.node_groups[0], Window(WEEK, START), types)
    assert found.kind == PLAN
    assert found.kwargs == {"InstanceType": "ml.p6-b200.48xlarge", "InstanceCount": 16, "DurationHours": WEEK,
                            "TargetResources": ["hyperpod-cluster"], "StartTimeAfter": START}
    assert "no training plans of ml.p6-b200.48xlarge" in search(spec, spec.node_groups[0], Window(WEEK), ()).skipped


def test_what_is_not_searched_says_why():
    spec = loader.load_text(to_yaml(base_spec(node_groups=[
        {"name": "big", "instance_type": "p5.48xlarge", "count": 65},
        {"name": "g6e", "instance_type": "g6e.48xlarge", "count": 2}])), "s.yaml").spec
    big, g6e = spec.node_groups
    assert "at most 64 instances; big has 65" in search(spec, big, Window(WEEK)).skipped
    assert "g6e.48xlarge is not sold as Capacity Blocks" in search(spec, g6e, Window(WEEK)).skipped
    assert "15 days is not one" in search(spec, spec_of("examples/p5-pcs.yaml").node_groups[0], Window(360)).skipped


def test_the_price_per_hour_is_the_upfront_fee_over_the_hours():
    week = offer("a", "258048.00")
    assert week.hourly == Decimal("1536") and week.instance_hourly == Decimal("96")
    short = offer("b", "4230", hours=22, minutes=30)  # a block that starts late ends at 11:30 UTC all the same
    assert short.duration_hours == Decimal("22.5") and short.hourly == Decimal("188")
    assert offer("c", "not a price").hourly is None and offer("d", None).upfront is None
    assert money("1,234.50") == Decimal("1234.50") and money("-1") is None and money("NaN") is None


def test_cheapest_first_by_the_hour_then_the_earlier_start():
    found = cheapest_first([offer("dear", "300000"), offer("unpriced", None), offer("cheap-late", "200000",
                            start=START + timedelta(days=1)), offer("cheap", "200000"),
                            offer("long", "500000", hours=2 * WEEK)])
    assert [o.id for o in found] == ["cheap", "cheap-late", "long", "dear", "unpriced"]


def test_an_offering_fits_a_group_of_its_size_and_type_in_one_zone():
    spec = spec_of("examples/p5-pcs.yaml")
    wanted = need(spec.node_groups[0])
    assert unfit(block_offer(block_offering(), ZONES), wanted) is None
    assert unfit(block_offer(block_offering(count=8), ZONES), wanted) == "8 instances, not the group's 16"
    assert "p5en.48xlarge instances" in unfit(block_offer(block_offering(instance_type="p5en.48xlarge"), ZONES), wanted)
    segments = [{"AvailabilityZoneId": "use1-az4", "InstanceCount": 8}, {"AvailabilityZoneId": "use1-az6",
                                                                          "InstanceCount": 8}]
    split = block_offer(block_offering(CapacityBlockOfferingSegments=segments), ZONES)
    assert "several zones (use1-az4, use1-az6)" in unfit(split, wanted)


def test_an_offering_names_its_zone_and_the_zones_give_its_id():
    read = block_offer(block_offering(az_id="use1-az6"), ZONES)
    assert (read.zone, read.zone_id) == ("us-east-1a", "use1-az6")
    assert block_offer(block_offering(), {}).zone_id is None  # an AZ EC2 did not name: no ID is guessed


def test_a_training_plan_offering_is_its_reserved_capacities_together():
    read = plan_offer(plan_offering(count=16), ZONES)
    assert (read.kind, read.instance_type, read.instances, read.zone_id) == (PLAN, "p6-b200.48xlarge", 16, "use1-az4")
    assert (read.start, read.end, read.upfront) == (START, START + timedelta(hours=WEEK), Decimal("480000.00"))
