"""Where capacity-end runs (fmcluster.model.node.capacity_end_of, NodeProgram.capacity_end): the
compute nodes of AWS PCS Capacity Block groups, with the block, EC2's termination lead and the
spec's signal settings; nowhere else. Its behaviour on a real Slurm: test_capacity_end_slurm.py."""

from __future__ import annotations

from fmcluster.model import cluster as cluster_model
from fmcluster.model.node import CapacityEnd
from fmcluster.node import pcs
from fmcluster.node.refs import NodeRefs
from fmcluster.spec import loader
from tests.support.paths import ROOT


def model(name: str):
    return cluster_model.resolve(loader.load(ROOT / "examples" / name).spec)


def test_capacity_block_groups_of_pcs_handle_their_end():
    m = model("p5-pcs.yaml")
    setups = {g.name: m.node(g).capacity_end for g in m.node_groups}
    assert setups["gpu"] == CapacityEnd("cr-0123456789abcdef0", 30, 15, "USR1")
    assert [name for name, end in setups.items() if end is not None] == ["gpu"]
    gb200 = model("p6e-gb200-pcs.yaml")
    ends = [gb200.node(g).capacity_end for g in gb200.node_groups]
    # an UltraServer block ends its instances an hour early
    assert {end.termination_minutes for end in ends if end is not None} == {60}


def test_the_configure_script_installs_it_with_the_groups_settings():
    m = model("p5-pcs.yaml")
    group = next(g for g in m.node_groups if g.name == "gpu")
    refs = NodeRefs(lustre_dns_name="fs.example", lustre_mount_name="abc", home_dns_name="home.example",
                    replacement_queue="https://sqs.example/q")
    (configure,) = [s for s in pcs.node_actions(m, group, refs) if s.name == "fmcluster configure"]
    assert "install_capacity_end\n" in configure.text
    for line in ("CAPACITY_END_RESERVATION_ID='cr-0123456789abcdef0'", "CAPACITY_END_SIGNAL_MINUTES=15",
                 "CAPACITY_END_TERMINATION_MINUTES=30", "CAPACITY_END_SIGNAL='USR1'"):
        assert line in configure.text.splitlines(), line


def test_other_planes_and_capacity_types_do_not():
    for name in ("p5en-eks.yaml", "p6-b200-hyperpod-slurm.yaml", "p5en-reservation-pcs.yaml"):
        m = model(name)
        assert all(m.node(g).capacity_end is None for g in m.node_groups), name
