"""Where capacity-end runs (fmcluster.model.node.capacity_end_of, NodeProgram.capacity_end): the
compute nodes of AWS PCS Capacity Block groups, with the block and EC2's termination lead, and of
SageMaker HyperPod Slurm training-plan groups, with the plan and SageMaker's, each with the spec's
signal settings; nowhere else. What its install leaves on a node, with stand-ins for systemd. Its
behaviour on a real Slurm: test_capacity_end_slurm.py (blocks), test_capacity_end_plan_slurm.py
(training plans)."""

from __future__ import annotations

import subprocess

from fmcluster.facts.images import HYPERPOD_SLURM_PREFIX
from fmcluster.facts.node import FMCLUSTER_LIB
from fmcluster.model import cluster as cluster_model
from fmcluster.model.node import PLAN_END, CapacityEnd
from fmcluster.node import hyperpod, pcs
from fmcluster.node.program import NodeProgram
from fmcluster.node.refs import NodeRefs
from fmcluster.node.shell import FMCLUSTER_ETC, PROGRAMS, header, without_comments
from fmcluster.spec import loader
from tests.support.paths import ROOT
from tests.support.tools import assert_shellcheck_clean

PLAN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/b200-pretrain"  # the example's
REFS = NodeRefs(lustre_dns_name="fs.example", lustre_mount_name="abc", home_dns_name="home.example",
                replacement_queue="https://sqs.example/q")


def model(name: str):
    return cluster_model.resolve(loader.load(ROOT / "examples" / name).spec)


def configure_script(name: str = "p5-pcs.yaml", group: str = "gpu") -> str:
    m = model(name)
    (configure,) = [s for s in pcs.node_actions(m, m.group(group), REFS) if s.name == "fmcluster configure"]
    return configure.text


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
    text = configure_script()
    assert "install_capacity_end\n" in text
    for line in ("CAPACITY_END_RESERVATION_ID='cr-0123456789abcdef0'", "CAPACITY_END_SIGNAL_MINUTES=15",
                 "CAPACITY_END_TERMINATION_MINUTES=30", "CAPACITY_END_SIGNAL='USR1'",
                 "CAPACITY_END_SOURCE='capacity-block'"):
        assert line in text.splitlines(), line


def test_training_plan_groups_of_hyperpod_slurm_handle_their_plans_end():
    """SageMaker terminates a plan's instances from 30 minutes before its end; the group on
    on-demand instances has no end."""
    m = model("p6-b200-hyperpod-slurm.yaml")
    assert {g.name: m.node(g).capacity_end for g in m.node_groups} == {
        "train": CapacityEnd("", 30, 15, "USR1", PLAN_END, PLAN), "eval": None}


def test_the_hyperpod_lifecycle_script_installs_it_with_hyperpods_slurm():
    m = model("p6-b200-hyperpod-slurm.yaml")
    train = hyperpod.entry_script(m, m.group("train"), REFS).splitlines()
    assert "  step install_capacity_end" in train
    for line in (f"CAPACITY_END_SLURM_BIN={HYPERPOD_SLURM_PREFIX}/bin", "CAPACITY_END_SOURCE='training-plan'",
                 f"CAPACITY_END_TRAINING_PLAN_ARN={PLAN}", "CAPACITY_END_TERMINATION_MINUTES=30",
                 "SLURMD_UNITS=slurmd.service"):
        assert line in train, line
    assert "  step install_capacity_end" not in hyperpod.entry_script(m, m.group("eval"), REFS).splitlines()


def test_other_planes_and_capacity_types_do_not():
    """Amazon EKS, HyperPod on EKS (a training plan and spot), On-Demand Capacity Reservations."""
    for name in ("p5en-eks.yaml", "p5-hyperpod-eks.yaml", "p5en-reservation-pcs.yaml"):
        m = model(name)
        assert all(m.node(g).capacity_end is None for g in m.node_groups), name


def test_its_install_leaves_the_program_its_settings_and_its_timer(tmp_path):
    """install_capacity_end (scripts/boot/capacity-end.sh) of a training-plan node, under
    FMCLUSTER_ROOT, systemctl a stand-in that records what it is asked."""
    m = model("p6-b200-hyperpod-slurm.yaml")
    group = m.group("train")
    setup = m.node(group)
    assert setup.capacity_end is not None and setup.slurm is not None
    program = NodeProgram(group.instance).capacity_end(setup.capacity_end, setup.slurm.bin, setup.slurm.slurmd_units)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "systemctl").write_text(f'#!/bin/sh\necho "$*" >>{tmp_path}/systemctl.log\n')
    (tmp_path / "bin" / "systemctl").chmod(0o755)
    script = tmp_path / "node.sh"
    script.write_text(program.render(header()))
    root = tmp_path / "root"
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60,
                            env={"FMCLUSTER_ROOT": str(root), "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    lib, etc = root / FMCLUSTER_LIB.lstrip("/"), root / FMCLUSTER_ETC.lstrip("/")
    for name in ("slurm-node.sh", "slurm-jobs.sh"):  # what the program sources, as in the repository
        assert (lib / name).read_text().strip() == without_comments((PROGRAMS / name).read_text()).strip(), name
    assert (lib / "capacity-end").stat().st_mode & 0o111
    settings = (etc / "capacity-end.env").read_text().splitlines()
    for line in (f"SLURM_BIN={HYPERPOD_SLURM_PREFIX}/bin", "END_SOURCE=training-plan", f"TRAINING_PLAN_ARN={PLAN}",
                 "PLAN_INSTANCE_TYPE=ml.p6-b200.48xlarge", "TERMINATION_MINUTES=30", "SIGNAL_MINUTES=15",
                 "SIGNAL=USR1", f"FMCLUSTER_LIB={FMCLUSTER_LIB}"):
        assert line in settings, line
    unit = (root / "etc/systemd/system/fmcluster-capacity-end.service").read_text()
    assert "After=network-online.target slurmd.service" in unit
    assert f"ExecStart={FMCLUSTER_LIB}/capacity-end {FMCLUSTER_ETC}/capacity-end.env" in unit
    assert "enable --now fmcluster-capacity-end.timer" in (tmp_path / "systemctl.log").read_text()


def test_the_scripts_that_install_it_are_shellcheck_clean(tmp_path):
    m = model("p6-b200-hyperpod-slurm.yaml")
    assert_shellcheck_clean(tmp_path, {"pcs-configure": configure_script(),
                                       "hyperpod-train": hyperpod.entry_script(m, m.group("train"), REFS)})
