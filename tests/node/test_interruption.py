"""Where the spot interruption program runs (fmcluster.model.node.capacity_end_of, NodeProgram.capacity_end):
the compute nodes of AWS PCS spot groups, with the spec's signal; what its install leaves on a node;
and how it treats the instance metadata service (fmcluster/node/scripts/boot/programs/interruption.sh),
run with stand-ins for that service, for Slurm's commands and for `sleep`, which records how long the
program would wait and returns at once (tests/support/node_end.py). Its behaviour on a real Slurm:
test_interruption_slurm.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from fmcluster.facts.node import FMCLUSTER_LIB
from fmcluster.model.cluster import resolve
from fmcluster.model.node import SPOT_NOTICE, CapacityEnd
from fmcluster.node import pcs
from fmcluster.node.program import NodeProgram
from fmcluster.node.refs import NodeRefs
from fmcluster.node.shell import FMCLUSTER_ETC, header
from tests.support import node_end
from tests.support.specs import base_spec, messages, on, validated, with_
from tests.support.tools import assert_shellcheck_clean

REFS = NodeRefs(lustre_dns_name="fs.example", lustre_mount_name="abc", home_dns_name="home.example",
                replacement_queue="https://sqs.example/q")
SETTINGS = ("SLURM_BIN=/opt/slurm/bin\nSIGNAL=B:USR1\nPOLL_SECONDS=2\nBACKOFF_SECONDS=60\nTOKEN_SECONDS=21600\n"
            f"STATE_DIR=/var/lib/fmcluster/interruption\nFMCLUSTER_LIB={FMCLUSTER_LIB}\n")
# sleep records its seconds; after `FAIL_SLEEPS` of them the metadata service's failure ends
SLEEP = ('#!/bin/sh\necho "$1" >>"${0%/*}/sleeps"\n'
         '[ "$(wc -l <"${0%/*}/sleeps")" -lt "${FAIL_SLEEPS:-999}" ] || rm -f "$HEAL"\n')
# Slurm that does not answer: each command recorded, and a failure
SLURM = '#!/bin/sh\necho "${0##*/} $*" >>"${0%/*}/slurm.log"\nexit 1\n'


def spot(signal: str = "USR1"):
    spec = with_(with_(base_spec(), "node_groups[0].capacity.type", "spot"), "node_groups[0].capacity.end_signal",
                 signal)
    return resolve(validated(spec))


def test_spot_groups_of_pcs_handle_the_notice_with_their_signal():
    m = spot("B:USR1")
    assert m.node(m.node_groups[0]).capacity_end == CapacityEnd("", 2, 0, "B:USR1", SPOT_NOTICE)
    on_demand = resolve(validated(base_spec()))
    assert on_demand.node(on_demand.node_groups[0]).capacity_end is None


def test_hyperpod_slurm_takes_no_spot_capacity():
    """SageMaker HyperPod offers Spot Instances with its continuous provisioning, documented for
    EKS (fmcluster.facts.controlplanes): a HyperPod Slurm spec cannot ask for them."""
    spec = on("hyperpod-slurm", with_(base_spec(), "node_groups[0].capacity.type", "spot"))
    assert messages(spec, "node_groups[0].capacity.type") == [
        "hyperpod-slurm does not support spot capacity | supported: on-demand, reservation, capacity-block"]


def test_the_configure_script_installs_it_and_not_capacity_end():
    m = spot()
    (configure,) = [s for s in pcs.node_actions(m, m.node_groups[0], REFS) if s.name == "fmcluster configure"]
    lines = configure.text.splitlines()
    assert "  step install_interruption" in lines and "  step install_capacity_end" not in lines
    for line in ("INTERRUPTION_SIGNAL='USR1'", "INTERRUPTION_POLL_SECONDS=2", "INTERRUPTION_BACKOFF_SECONDS=60",
                 "INTERRUPTION_SLURM_BIN=/opt/aws/pcs/scheduler/slurm-25.11/bin"):
        assert line in lines, line


def test_its_install_leaves_the_program_its_settings_and_a_service(tmp_path):
    m = spot()
    group = m.node_groups[0]
    end, slurm = m.node(group).capacity_end, m.node(group).slurm
    assert end is not None and slurm is not None
    program = NodeProgram(group.instance).capacity_end(end, slurm.bin, slurm.slurmd_units)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "systemctl").write_text(f'#!/bin/sh\necho "$*" >>{tmp_path}/systemctl.log\n')
    (tmp_path / "bin" / "systemctl").chmod(0o755)
    (tmp_path / "node.sh").write_text(program.render(header()))
    root = tmp_path / "root"
    result = subprocess.run(["bash", str(tmp_path / "node.sh")], capture_output=True, text=True, timeout=60,
                            env={"FMCLUSTER_ROOT": str(root), "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    lib, etc = root / FMCLUSTER_LIB.lstrip("/"), root / FMCLUSTER_ETC.lstrip("/")
    assert {p.name for p in lib.iterdir()} == {"interruption", "slurm-node.sh", "slurm-jobs.sh"}
    assert (lib / "interruption").stat().st_mode & 0o111
    settings = (etc / "interruption.env").read_text().splitlines()
    for line in (f"SLURM_BIN={slurm.bin}", "SIGNAL=USR1", "POLL_SECONDS=2", "BACKOFF_SECONDS=60",
                 "TOKEN_SECONDS=21600", "STATE_DIR=/var/lib/fmcluster/interruption"):
        assert line in settings, line
    unit = (root / "etc/systemd/system/fmcluster-interruption.service").read_text()
    assert f"After=network-online.target {slurm.slurmd_units}" in unit and "Restart=always" in unit
    assert f"ExecStart={FMCLUSTER_LIB}/interruption {FMCLUSTER_ETC}/interruption.env" in unit
    assert "enable --now fmcluster-interruption.service" in (tmp_path / "systemctl.log").read_text()


def test_the_scripts_that_install_it_are_shellcheck_clean(tmp_path):
    m = spot()
    assert_shellcheck_clean(tmp_path, {s.file_name.removesuffix(".sh"): s.text
                                       for s in pcs.node_actions(m, m.node_groups[0], REFS)})


def look(tmp_path: Path, polls: int, **env: str) -> tuple[subprocess.CompletedProcess, list[str], list[int]]:
    """The program on node1, looking `polls` times, Slurm not answering: what it said, the metadata
    requests it made and the seconds it slept."""
    bin_dir = node_end.bin_dir(tmp_path, "node1")
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, text in [("sleep", SLEEP), *((command, SLURM) for command in ("scontrol", "sinfo", "squeue",
                                                                             "scancel"))]:
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    result = node_end.run(None, tmp_path, "interruption.sh", "node1", SETTINGS,
                          env={"FMCLUSTER_POLLS": str(polls), **env}, timeout=60)
    folder = node_end.metadata(tmp_path, "node1")
    requests = (folder / "requests.log").read_text().splitlines() if (folder / "requests.log").exists() else []
    sleeps = (bin_dir / "sleeps").read_text().split() if (bin_dir / "sleeps").exists() else []
    return result, requests, [int(s) for s in sleeps]


def test_one_token_serves_every_look_and_slurm_is_asked_once_while_it_does_not_answer(tmp_path):
    """No notice (404): every look is one GET with the token of the first PUT, every 2 seconds;
    Slurm, asked whether this program drained the node, does not answer (slurmd not yet up), and
    is asked again only 30 seconds later, not at every look."""
    result, requests, sleeps = look(tmp_path, 5)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert requests == ["PUT api/token"] + ["GET meta-data/spot/instance-action"] * 5
    assert sleeps == [2, 2, 2, 2]
    asked = (node_end.bin_dir(tmp_path, "node1") / "slurm.log").read_text().splitlines()
    assert asked == ["scontrol -o show node node1", "scontrol -o show node"], asked  # slurm_node, once


def test_a_refused_token_is_asked_for_again(tmp_path):
    node_end.metadata(tmp_path, "node1").joinpath("expire-token").write_text("")
    result, requests, sleeps = look(tmp_path, 3)
    assert requests == ["PUT api/token", "GET meta-data/spot/instance-action", "PUT api/token",
                        "GET meta-data/spot/instance-action", "GET meta-data/spot/instance-action"], requests
    assert sleeps == [4, 2], sleeps  # the 401 counts as a failure: one longer wait


def test_a_metadata_service_that_does_not_answer_is_asked_less_and_less_often(tmp_path):
    """No connection: one token request a look, the wait doubling to BACKOFF_SECONDS, said once."""
    node_end.metadata(tmp_path, "node1").joinpath("down").write_text("")
    result, requests, sleeps = look(tmp_path, 7)
    assert requests == ["PUT api/token"] * 7
    assert sleeps == [4, 8, 16, 32, 60, 60]
    assert result.stderr.count("does not answer") == 1, result.stderr


def test_errors_back_off_and_an_answer_brings_the_two_seconds_back(tmp_path):
    """HTTP 500 on the notice's item for three looks, then 404 again."""
    failing = node_end.metadata(tmp_path, "node1") / "spot"
    failing.mkdir()
    (failing / "instance-action.status").write_text("500")
    result, requests, sleeps = look(tmp_path, 6, FAIL_SLEEPS="3", HEAL=str(failing / "instance-action.status"))
    assert requests == ["PUT api/token"] + ["GET meta-data/spot/instance-action"] * 6  # the token kept
    assert sleeps == [4, 8, 16, 2, 2]
    assert "does not answer (HTTP 500)" in result.stderr and "answers again" in result.stderr, result.stderr


def test_a_notice_while_slurm_does_not_answer_is_bounded(tmp_path):
    """A notice; Slurm answers the node's drain, then sinfo and squeue hang (slurmctld busy, as when
    many spot nodes go at once): each is cut at SLURM_SECONDS, the look ends and the next one comes."""
    spot_dir = node_end.metadata(tmp_path, "node1") / "spot"
    spot_dir.mkdir()
    (spot_dir / "instance-action").write_text('{"action": "terminate", "time": "2026-12-03T11:32:00Z"}')
    log = node_end.stand_in_slurm(tmp_path)
    folder = node_end.bin_dir(tmp_path, "node1")
    for command in ("sinfo", "squeue"):
        (folder / command).write_text('#!/bin/sh\necho "${0##*/} $*" >>"${0%/*}/slurm.log"\nexec /bin/sleep 600\n')
    (folder / "sleep").write_text(SLEEP)
    (folder / "sleep").chmod(0o755)
    result = node_end.run(None, tmp_path, "interruption.sh", "node1", SETTINGS + "SLURM_SECONDS=1\n",
                          env={"FMCLUSTER_POLLS": "2"}, timeout=60)
    assert result.returncode == 0 and "node1 drained" in result.stderr, result.stderr
    assert result.stderr.count("could not ask Slurm for the running jobs") == 2, result.stderr  # at each look
    assert [line.split()[0] for line in log.read_text().splitlines()].count("squeue") == 2



# Slurm as it answers for job 7 on node1, requeued RESTARTS times, whose AdminComment holds the
# record of an interruption of an earlier run (Slurm keeps a job's AdminComment when it requeues it:
# job_mgr.c clears it nowhere; the requeue adds one to Restarts, which `scontrol show job` prints)
REQUEUED_SLURM = """#!/bin/bash
echo "${0##*/} $*" >>"${0%/*}/slurm.log"
case "${0##*/} $*" in
  "scontrol -o show node node1") echo "NodeName=node1 State=IDLE Partitions=gpu" ;;
  "scontrol show hostnames "*) tr , '\\n' <<<"$3" ;;
  "scontrol show job 7") printf '%s\\n' "JobId=7 JobName=train" \\
    "   Requeue=1 Restarts=$RESTARTS BatchFlag=1 Reboot=0" "   WorkDir=/home/u" \\
    "   AdminComment=fmcluster-interruption USR1 by node1 " ;;
  "squeue -h -w node1 -t RUNNING -o %i %N") echo "7 node1" ;;
  "sinfo -h -N -o %N|%E") echo "node1|fmcluster-interruption: spot terminate at 2026-12-03T11:32:00Z" ;;
esac
"""


def test_a_requeued_job_is_signalled_for_its_new_runs_interruption(tmp_path):
    """A spot job whose node went is requeued by Slurm, with its AdminComment (the record of the
    signal of its first run) kept: a notice during its next run signals it again and records that
    run's (KEY#RESTARTS); the record of that same run is still read as signalled."""
    spot_dir = node_end.metadata(tmp_path, "node1") / "spot"
    spot_dir.mkdir(parents=True)
    (spot_dir / "instance-action").write_text('{"action": "terminate", "time": "2026-12-03T11:32:00Z"}')
    folder = node_end.bin_dir(tmp_path, "node1")
    folder.mkdir(parents=True, exist_ok=True)
    for command in node_end.SLURM_COMMANDS:
        (folder / command).write_text(REQUEUED_SLURM)
        (folder / command).chmod(0o755)
    (folder / "sleep").write_text(SLEEP)
    (folder / "sleep").chmod(0o755)
    calls = {}
    for restarts in ("0", "1"):
        (folder / "slurm.log").unlink(missing_ok=True)
        shutil.rmtree(tmp_path / "node1" / "root", ignore_errors=True)  # a fresh node: nothing sent yet
        result = node_end.run(None, tmp_path, "interruption.sh", "node1", SETTINGS,
                              env={"FMCLUSTER_POLLS": "1", "RESTARTS": restarts}, timeout=60)
        assert result.returncode == 0, result.stderr
        calls[restarts] = (folder / "slurm.log").read_text().splitlines()
    # its first run's record: not signalled again
    assert not [c for c in calls["0"] if c.startswith("scancel")], calls["0"]
    # its second run: signalled, and recorded beside the first run's record
    assert "scancel --batch --signal=USR1 7" in calls["1"], calls["1"]
    assert ("scontrol update jobid=7 admincomment=fmcluster-interruption USR1 by node1; "
            "fmcluster-interruption#1 B:USR1 by node1") in calls["1"], calls["1"]
