"""fmcluster.facts.placement: which node groups get a cluster placement group."""

from __future__ import annotations

import pytest

from fmcluster.facts.placement import Placement, placement_for
from fmcluster.spec.models import NodeGroupSpec


def group(capacity: str = "on-demand", placement_group: str = "auto", instance_type: str = "p5.48xlarge",
          **fields) -> NodeGroupSpec:
    return NodeGroupSpec.model_validate({"name": "g", "instance_type": instance_type, "count": 2,
                                         "capacity": {"type": capacity}, "placement_group": placement_group,
                                         **fields})


@pytest.mark.parametrize("capacity", ["on-demand", "spot"])
def test_auto_creates_a_group_for_efa_on_demand_and_spot(capacity):
    assert placement_for(group(capacity)) == Placement(create=True)


@pytest.mark.parametrize("capacity", ["capacity-block", "reservation"])
def test_auto_creates_none_for_capacity_blocks_and_reservations(capacity):
    # a Capacity Block is placed already; a reservation's instances are placed where it was made
    assert placement_for(group(capacity)) == Placement(create=False)


def test_auto_creates_none_without_efa():
    assert placement_for(group(efa=False)) == Placement(create=False)
    assert placement_for(group(instance_type="c7i.8xlarge")) == Placement(create=False)  # efa resolves to false


def test_none_creates_none():
    assert placement_for(group(placement_group="none")) == Placement(create=False)


@pytest.mark.parametrize("capacity", ["on-demand", "reservation"])
def test_a_name_is_an_existing_group(capacity):
    placement = placement_for(group(capacity, placement_group="my-pg"))
    assert placement == Placement(create=False, name="my-pg")
