"""fmcluster.spec.rules.slurm: AWS PCS's hard limits and names, Slurm's partition names (issue 15)."""

import pytest

from fmcluster.facts import controlplanes
from fmcluster.spec.rules import slurm
from tests.support.specs import base_spec, findings, messages, paths, with_


def groups(n, login=1, kind="pcs"):
    spec = with_(base_spec(), "node_groups",
                 [{"name": f"cpu{i:02d}", "instance_type": "c7i.8xlarge", "count": 1} for i in range(n)])
    spec = with_(spec, "orchestrator.login.count", login)
    return with_(spec, "orchestrator.type", kind)


# ---- pcs_node_group_limit -------------------------------------------------------------

@pytest.mark.parametrize("n,login", [(9, 1), (10, 0)])
def test_ten_compute_node_groups_pass(n, login):
    spec = groups(n, login)
    assert findings(slurm.pcs_node_group_limit, spec) == []
    assert paths(spec) == set()


@pytest.mark.parametrize("n,login,first_over", [(10, 1, 9), (11, 0, 10)])
def test_an_eleventh_compute_node_group_is_an_error_at_the_first_one_over(n, login, first_over):
    spec = groups(n, login)
    assert paths(spec) == {f"node_groups[{first_over}]"}
    (message,) = messages(spec, f"node_groups[{first_over}]")
    assert "at most 10 compute node groups" in message and "(not adjustable)" in message
    assert ("and the login group" in message) == bool(login)


def test_the_queue_limit_is_never_reached_before_the_node_group_limit():
    """Each queue is a node group's, so pcs_node_group_limit checks both."""
    assert controlplanes.PCS_MAX_QUEUES >= controlplanes.PCS_MAX_COMPUTE_NODE_GROUPS


@pytest.mark.parametrize("kind", ["hyperpod-slurm", "eks"])
def test_other_planes_are_not_held_to_pcs_limits(kind):
    spec = groups(11, 1, kind)
    assert findings(slurm.pcs_node_group_limit, spec) == []


# ---- pcs_names ------------------------------------------------------------------------

def test_three_character_names_pass():
    spec = with_(with_(base_spec(), "name", "abc"), "node_groups[0].name", "gpu")
    assert findings(slurm.pcs_names, spec) == []
    assert paths(spec) == set()


def test_short_cluster_name():
    spec = with_(base_spec(), "name", "ab")
    assert paths(spec) == {"name"}
    assert "at least 3 characters" in messages(spec, "name")[0]


def test_short_group_name():
    spec = with_(base_spec(), "node_groups[0].name", "g1")
    assert paths(spec) == {"node_groups[0].name"}
    assert "compute node group's and queue's" in messages(spec, "node_groups[0].name")[0]


def test_short_names_pass_elsewhere():
    spec = with_(with_(base_spec(), "node_groups[0].name", "g1"), "orchestrator.type", "hyperpod-slurm")
    assert findings(slurm.pcs_names, spec) == []


# ---- slurm_partition_names ------------------------------------------------------------

@pytest.mark.parametrize("kind", ["pcs", "hyperpod-slurm"])
def test_a_partition_named_default_is_refused(kind):
    spec = with_(with_(base_spec(), "node_groups[0].name", "default"), "orchestrator.type", kind)
    assert "node_groups[0].name" in paths(spec)
    assert "PartitionName=DEFAULT" in messages(spec, "node_groups[0].name")[0]


def test_default_as_a_part_of_a_name_passes():
    spec = with_(base_spec(), "node_groups[0].name", "default-gpu")
    assert findings(slurm.slurm_partition_names, spec) == []
    assert paths(spec) == set()
