"""How long before the end of reserved capacity its instances start to be terminated: one function
(fmcluster.facts.controlplanes.termination_minutes) that the node programs' settings, the Kubernetes
function, preflight and the countdown alarms all read."""

from __future__ import annotations

import pytest

from fmcluster.facts import controlplanes
from fmcluster.model.cluster import resolve
from fmcluster.observability import capacity as countdown
from fmcluster.spec import loader
from tests.support.paths import EXAMPLES_DIR


@pytest.mark.parametrize("training_plan, ultraserver, minutes", [
    (False, False, 30),  # EC2 User Guide, Capacity Blocks
    (False, True, 60),  # P6e-GB200 UltraServer Capacity Blocks
    (True, False, 30),  # SageMaker, "Reserved Capacity termination process"
    (True, True, 60),  # a plan of UltraServers reserves UltraServer blocks: the earlier lead is taken
])
def test_the_lead_of_each_kind_of_capacity(training_plan, ultraserver, minutes):
    assert controlplanes.termination_minutes(training_plan, ultraserver) == minutes


@pytest.mark.parametrize("example, minutes", [("p5-pcs.yaml", 30), ("p6e-gb200-pcs.yaml", 60),
                                              ("p6-b200-hyperpod-slurm.yaml", 30), ("p6e-gb200-eks.yaml", 60)])
def test_the_nodes_and_the_countdown_read_the_same_lead(example, minutes):
    model = resolve(loader.load(EXAMPLES_DIR / example).spec)
    ends = [model.node(g).capacity_end for g in model.node_groups if model.node(g).capacity_end is not None]
    counted = countdown.counted(model)
    assert counted and {c.termination_minutes for c in counted} == {minutes}
    assert {e.termination_minutes for e in ends} <= {minutes}
