"""Where capacity-end runs (fmcluster.model.node.capacity_end_of, NodeProgram.capacity_end): the
compute nodes of AWS PCS Capacity Block groups, with the block and EC2's termination lead, and of
SageMaker HyperPod Slurm training-plan groups, with the plan and SageMaker's, each with the spec's
signal settings; nowhere else. What its install leaves on a node, with stand-ins for systemd. Its
behaviour on a real Slurm: test_capacity_end_slurm.py (blocks), test_capacity_end_plan_slurm.py
(training plans)."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import datetime, timezone

import pytest

from fmcluster.facts.images import HYPERPOD_SLURM_PREFIX
from fmcluster.facts.node import FMCLUSTER_LIB
from fmcluster.model import cluster as cluster_model
from fmcluster.model.node import PLAN_END, CapacityEnd
from fmcluster.node import hyperpod, pcs, program
from fmcluster.node.program import NodeProgram
from fmcluster.node.refs import NodeRefs
from fmcluster.node.shell import FMCLUSTER_ETC, PROGRAMS, header, without_comments
from fmcluster.spec import loader
from fmcluster.spec.models.compute import CapacitySpec
from tests.support import node_end
from tests.support import training_plans as plans
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
    program = NodeProgram(group.instance).capacity_end(setup.capacity_end, setup.slurm.bin, setup.slurm.slurmd_units,
                                                       partition="train")
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
                 "SIGNAL=USR1", "READ_MINUTES=30", "NEAR_MINUTES=10", "GRACE_SECONDS=240",
                 f"FMCLUSTER_LIB={FMCLUSTER_LIB}"):
        assert line in settings, line
    assert "PARTITION=train" in settings  # every node of the group: its partition (HyperPod's, PCS's queue)
    unit = (root / "etc/systemd/system/fmcluster-capacity-end.service").read_text()
    assert "After=network-online.target slurmd.service" in unit
    assert f"ExecStart={FMCLUSTER_LIB}/capacity-end {FMCLUSTER_ETC}/capacity-end.env" in unit
    assert "enable --now fmcluster-capacity-end.timer" in (tmp_path / "systemctl.log").read_text()


def test_the_scripts_that_install_it_are_shellcheck_clean(tmp_path):
    m = model("p6-b200-hyperpod-slurm.yaml")
    assert_shellcheck_clean(tmp_path, {"pcs-configure": configure_script(),
                                       "hyperpod-train": hyperpod.entry_script(m, m.group("train"), REFS)})


# --- the program with stand-ins for Slurm (tests/support/node_end.py SLURM), EC2 and the metadata service

BLOCK = "cr-0123456789abcdef0"
T0 = 1_800_000_000  # the clock of these runs (FMCLUSTER_NOW): no test reads the real one


def block_settings(reservation_id: str = BLOCK, **changes: str | int) -> str:
    """A settings file of a Capacity Block node of the partition `gpu` (node1 alone)."""
    values: dict[str, str | int] = {
        "SLURM_BIN": "/opt/slurm/bin", "END_SOURCE": "capacity-block", "RESERVATION_ID": reservation_id,
        "TRAINING_PLAN_ARN": "", "PLAN_INSTANCE_TYPE": "ml.p5.48xlarge", "PARTITION": "gpu",
        "TERMINATION_MINUTES": 30, "SIGNAL_MINUTES": 15, "SIGNAL": "USR1", "READ_MINUTES": 30,
        "NEAR_MINUTES": 10, "GRACE_SECONDS": 240, "STATE_DIR": "/var/lib/fmcluster/capacity-end",
        "FMCLUSTER_LIB": FMCLUSTER_LIB, **changes}
    return "".join(f"{name}={value}\n" for name, value in values.items())


def ec2(tmp_path, ends: dict[str, int], instances: dict[str, str] | None = None) -> None:
    """EC2's answer: each block of `ends` active until its end; each instance of `instances` in its block."""
    tmp_path.mkdir(exist_ok=True)
    node_end.answer(tmp_path, {
        "CapacityReservations": [{"CapacityReservationId": block, "State": "active", "EndDate": datetime.fromtimestamp(
            end, timezone.utc).isoformat()} for block, end in ends.items()],
        "Reservations": [{"Instances": [{"InstanceId": i, "CapacityReservationId": block}]}
                         for i, block in (instances or {}).items()]})


def end_program(tmp_path, at: int, settings: str | None = None, **options) -> subprocess.CompletedProcess:
    """capacity-end on node1 at `at`, its Slurm the stand-ins."""
    node_end.stand_in_slurm(tmp_path)
    return node_end.run(None, tmp_path, "capacity-end.sh", "node1", settings or block_settings(), now=at,
                        timeout=60, **options)


def test_ec2_is_asked_again_only_when_the_answer_kept_is_due_or_the_signal_near(tmp_path):
    """Far from the end the answer kept serves for a random half to whole of READ_MINUTES (30): at
    1,000 nodes 0.74 reads a second, not 8.3 (the program's header); from NEAR_MINUTES (10) before the
    signal every run reads, so an extension is seen before the signal."""
    far, near = tmp_path / "far", tmp_path / "near"
    ec2(far, {BLOCK: T0 + 10 * 3600})
    reads = []
    for at in (T0, T0 + 15 * 60 - 1, T0 + 30 * 60, T0 + 30 * 60 + 120):
        result = end_program(far, at)
        assert result.returncode == 0, result.stderr
        reads.append(len(node_end.aws_calls(far)))
    assert reads == [1, 1, 2, 2]
    # the signal at T0 + 15 minutes (45 before the end), read at every run from T0 + 5
    ec2(near, {BLOCK: T0 + 60 * 60})
    reads = []
    for at in (T0, T0 + 5 * 60 - 1, T0 + 5 * 60, T0 + 7 * 60):
        result = end_program(near, at)
        assert result.returncode == 0, result.stderr
        reads.append(len(node_end.aws_calls(near)))
    assert reads == [1, 1, 2, 3]
    assert node_end.aws_calls(near) == ["ec2 describe-capacity-reservations"] * 3


def test_the_block_of_an_instance_is_asked_once_a_boot_and_an_end_kept_for_another_never_used(tmp_path):
    """A group targeting a resource group (RESERVATION_ID ""): DescribeInstances names the block once
    per boot. On another boot (a new instance from an image that carries the old one's state) that EC2
    does not answer yet, the end kept for the old block is not this node's: nothing is done."""
    boot = tmp_path / "node1" / "root" / "proc" / "sys" / "kernel" / "random" / "boot_id"
    boot.parent.mkdir(parents=True)
    boot.write_text("boot-1\n")
    ec2(tmp_path, {BLOCK: T0 + 10 * 3600}, {"i-0a1b2c3d4e5f60001": BLOCK})
    for at in (T0, T0 + 60):
        result = end_program(tmp_path, at, block_settings(""))
        assert result.returncode == 0, result.stderr
    assert node_end.aws_calls(tmp_path) == ["ec2 describe-instances", "ec2 describe-capacity-reservations"]
    slurm = node_end.bin_dir(tmp_path, "node1") / "slurm.log"
    assert any("create reservation reservationname=fmcluster-end-cr-0123456789abcdef0" in line and "nodes=node1" in line
               for line in slurm.read_text().splitlines())
    boot.write_text("boot-2\n")
    ec2(tmp_path, {BLOCK: T0 + 10 * 3600})  # the new instance: not in a block EC2 names yet
    slurm.unlink()
    result = end_program(tmp_path, T0 + 9 * 3600, block_settings(""))  # past the old block's signal
    assert result.returncode == 1 and "no Capacity Block for this instance" in result.stderr, result.stderr
    assert [line for line in slurm.read_text().splitlines() if "reservation" in line or "update" in line] == []


def test_without_the_aws_cli_it_says_so_once_and_fails_every_run(tmp_path):
    ec2(tmp_path, {BLOCK: T0 + 10 * 3600})
    said = [end_program(tmp_path, T0 + i * 120, aws=False) for i in range(2)]
    assert [r.returncode for r in said] == [1, 1]
    assert "the AWS CLI (aws) is not installed" in said[0].stderr and said[1].stderr == "", said[1].stderr
    back = end_program(tmp_path, T0 + 240)  # installed: the end is read, and the marker gone
    assert back.returncode == 0 and back.stderr.startswith("fmcluster-capacity-end: reservation"), back.stderr
    assert not (tmp_path / "node1" / "root" / "var" / "lib" / "fmcluster" / "capacity-end" / "no-aws-cli").exists()


HANG = "#!/bin/sh\necho \"${0##*/} $*\" >>\"${0%/*}/slurm.log\"\nexec /bin/sleep 600\n"


def test_a_slurm_command_that_does_not_answer_is_bounded(tmp_path):
    """sinfo and squeue hang (a slurmctld that does not answer): each is cut at SLURM_SECONDS and the
    run ends, failed, for the timer to try again; then scancel hangs on a job."""
    ec2(tmp_path, {BLOCK: T0 + 60 * 60})
    node_end.stand_in_slurm(tmp_path)
    folder = node_end.bin_dir(tmp_path, "node1")
    for command in ("sinfo", "squeue"):
        (folder / command).write_text(HANG)
    past_grace = T0 + 15 * 60 + 240  # the signal's time and the grace: sinfo is asked who drained
    result = node_end.run(None, tmp_path, "capacity-end.sh", "node1", block_settings(SLURM_SECONDS=1), now=past_grace,
                          timeout=60)
    assert result.returncode == 1 and "could not ask Slurm for the running jobs" in result.stderr, result.stderr
    asked = (folder / "slurm.log").read_text().splitlines()
    assert [line.split()[0] for line in asked if line.split()[0] in ("sinfo", "squeue")] == ["sinfo", "squeue"]
    (folder / "squeue").write_text('#!/bin/sh\necho "7 node1"\n')
    (folder / "scancel").write_text(HANG)
    result = node_end.run(None, tmp_path, "capacity-end.sh", "node1", block_settings(SLURM_SECONDS=1),
                          now=past_grace + 120, timeout=60)
    assert result.returncode == 1 and "signalled" not in result.stderr, result.stderr
    assert "scancel --signal=USR1 7" in (folder / "slurm.log").read_text()


def test_the_readiness_check_wants_the_aws_cli_where_capacity_end_runs(tmp_path):
    """The groups that run capacity-end have READY_AWS_CLI=1 (node-ready.env AWS_CLI=1): a node without
    the AWS CLI is not ready (so it never takes a job the end would cut unwarned); other groups not."""
    assert "READY_AWS_CLI=1" in configure_script().splitlines()
    assert "READY_AWS_CLI=1" not in configure_script("p5en-reservation-pcs.yaml", "train").splitlines()
    env = tmp_path / "node-ready.env"
    env.write_text(f"EXPECTED_GPUS=0\nREQUIRED_MOUNTS=\nLNET_EFA=0\nREADY_WAIT_SECONDS=0\nTEXTFILE_DIR={tmp_path}\n"
                   "AWS_CLI=1\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("bash", "grep", "mkdir", "mv", "awk"):
        (bin_dir / name).symlink_to(shutil.which(name))

    def ready() -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(PROGRAMS / "node-ready.sh")], capture_output=True, text=True, timeout=60,
                              env={"NODE_READY_ENV": str(env), "PATH": str(bin_dir)})

    missing = ready()
    assert missing.returncode == 1 and missing.stdout.startswith("aws-cli the AWS CLI (aws) is not installed"), missing
    (bin_dir / "aws").write_text("#!/bin/sh\n")
    (bin_dir / "aws").chmod(0o755)
    assert ready().returncode == 0


def _wire(value, epoch: bool):
    """The answer as the AWS CLI prints its times: seconds since the epoch (v1) or ISO 8601 (v2)."""
    if isinstance(value, datetime):
        return value.timestamp() if epoch else value.isoformat()
    if isinstance(value, dict):
        return {k: _wire(v, epoch) for k, v in value.items()}
    return [_wire(v, epoch) for v in value] if isinstance(value, list) else value


@pytest.mark.parametrize("wire", [True, False], ids=["epoch", "iso"])
@pytest.mark.parametrize("answer, window, nodes", plans.CASES)
def test_the_nodes_read_a_training_plans_end_as_the_functions_do(tmp_path, answer, window, nodes, wire):
    """plan_read of programs/capacity-end.sh, under the AWS CLI stand-in (which runs the query with
    jmespath), against the functions' reader's cases (tests/support/training_plans.py): where a
    window of the node's type holds now, its end, the functions' (the AWS CLI v1 prints SageMaker's
    times as the seconds they are sent as, v2 as ISO 8601); else nothing (the node waits, or the plan
    is over)."""
    node_end.answer(tmp_path, _wire(answer, wire))
    settings = (f"SLURM_BIN=/usr/bin\nEND_SOURCE=training-plan\nRESERVATION_ID=\nTRAINING_PLAN_ARN={plans.ARN}\n"
                f"PLAN_INSTANCE_TYPE={plans.P5}\nPARTITION=gpu\nTERMINATION_MINUTES=30\nSIGNAL_MINUTES=15\n"
                "SIGNAL=USR1\nREAD_MINUTES=30\nNEAR_MINUTES=10\nGRACE_SECONDS=240\n"
                f"STATE_DIR=/var/lib/fmcluster/capacity-end\nFMCLUSTER_LIB={FMCLUSTER_LIB}\n")
    result = node_end.run(None, tmp_path, "capacity-end.sh", "node1", settings, now=int(plans.NOW.timestamp()),
                          call="plan_read")
    if nodes is not None:
        assert window[1] == nodes  # the functions read the same end
    expected = f"{int(nodes.timestamp())}\n" if nodes is not None else ""
    assert (result.stdout, result.returncode == 0, result.stderr) == (expected, bool(expected), "")


def test_the_shortest_end_signal_leaves_a_job_time_to_checkpoint():
    """capacity.end_signal_minutes' minimum against the nodes' timer (its interval after the last run
    ended, its random delay and accuracy, as the boot script writes the unit), a run's read of the end
    (bounded by the program's `timeout 60 aws`) and the backup node's grace: a job whose first node is
    gone is signalled 3 minutes or more before its nodes go, even then."""
    (minimum,) = [m.ge for m in CapacitySpec.model_fields["end_signal_minutes"].metadata if hasattr(m, "ge")]
    unit = (PROGRAMS.parent / "capacity-end.sh").read_text()
    delay = int(re.search(r"^RandomizedDelaySec=(\d+)s$", unit, re.MULTILINE).group(1))
    accuracy = int(re.search(r"^AccuracySec=(\d+)s$", unit, re.MULTILINE).group(1))
    assert "OnUnitInactiveSec=${CAPACITY_END_SECONDS}s" in unit
    read = int(re.search(r"^  timeout (\d+) aws ", (PROGRAMS / "capacity-end.sh").read_text(), re.MULTILINE).group(1))
    late = program.CAPACITY_END_GRACE_SECONDS + program.CAPACITY_END_SECONDS + delay + accuracy + read
    assert minimum * 60 - late >= 180 > (minimum - 1) * 60 - late
