"""The IMEX Slurm prolog (fmcluster/node/scripts/slurm/imex-prolog.sh, as fmcluster.node.program.imex_prolog renders
it) run as a process on a sandboxed node (tests/support/sandbox.py): what it writes, which commands it
calls and in what order, and what it does when a piece is missing. The pattern is the AWS PCS User
Guide's ("Configure UltraServer instances"). tests/node/test_imex_slurm.py runs it under a real Slurm."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess

import pytest

from fmcluster.model.node import SlurmPaths
from fmcluster.node import program as prog
from tests.support.paths import ROOT
from tests.support.sandbox import IMEX_PACKAGED_CONFIG, Sandbox, Scenario

PROLOG = ROOT / "fmcluster" / "node" / "scripts" / "slurm" / "imex-prolog.sh"
SLURM_BIN = SlurmPaths.pcs("25.05").bin  # an AWS PCS node's
GB200 = Scenario(instance_type="p6e-gb200.36xlarge", imex=True, gpus=4, gpu_model="GB200", nvme_disks=3,
                 efa_devices=4)
EXCLUSIVE = {"SLURM_JOB_ID": "42", "SLURM_NODELIST": "gpu-[1-2]", "SLURM_JOB_OVERSUBSCRIBE": "NO"}


def prolog(tmp_path, scenario=GB200, env=EXCLUSIVE, node=None):
    node = node or Sandbox(tmp_path, scenario)
    return node, node.run(prog.imex_prolog(SLURM_BIN), name="prolog.sh", env=env)


def commands(node) -> list[str]:
    return [c.line for c in node.calls() if c.command != "_tick"]


def test_an_exclusive_job_on_an_ultraserver_gets_an_imex_domain_of_its_nodes(tmp_path):
    node, result = prolog(tmp_path)
    assert result.returncode == 0, result.stderr
    assert node.file("/etc/nvidia-imex/nodes_config.cfg") == "10.1.0.11\n10.1.0.12\n"
    assert (node.root / "dev/nvidia-caps-imex-channels/channel0").exists()
    run = [line for line in commands(node) if not line.startswith("logger")]
    channel = "/dev/nvidia-caps-imex-channels/channel0"  # (the fakes record paths inside the sandbox root)
    assert run == ["systemctl is-enabled --quiet nvidia-imex.service", f"mknod {channel} c 234 0",
                   "scontrol -ao show node gpu-[1-2]", "timeout 15 systemctl stop nvidia-imex.service",
                   "systemctl stop nvidia-imex.service", "pkill -9 -x nvidia-imex",
                   "timeout 60 systemctl start nvidia-imex.service", "systemctl start nvidia-imex.service",
                   "timeout 10 nvidia-imex-ctl -N", "nvidia-imex-ctl -N"]
    assert (node.state / "units/nvidia-imex.service").read_text().strip() == "active"
    assert "IMEX domain UP, 2 nodes: 10.1.0.11 10.1.0.12" in node.file("/var/log/fmcluster-imex-prolog.log")
    # the command service (nvidia-imex-ctl -N asks it) turned on in the packaged config, the rest kept
    assert node.file("/etc/nvidia-imex/config.cfg") == IMEX_PACKAGED_CONFIG.replace(
        "IMEX_CMD_ENABLED=0", "IMEX_CMD_ENABLED=1").replace("IMEX_CMD_PORT=\n", "IMEX_CMD_PORT=50005\n")


def test_the_job_waits_for_the_domain_to_be_up(tmp_path):
    """nvidia-imex-ctl -N says UP only once every node's daemon has joined: the prolog polls it."""
    node, result = prolog(tmp_path, dataclasses.replace(GB200, imex_up_at=30))
    assert result.returncode == 0, result.stderr
    (up,) = [c for c in node.calls("nvidia-imex-ctl")][-1:]
    assert up.clock == 30 and len(node.calls("nvidia-imex-ctl")) == 7  # every 5 s from 0


def test_a_domain_never_up_fails_the_prolog_in_bounded_time(tmp_path):
    node, result = prolog(tmp_path, dataclasses.replace(GB200, imex_up_at=None))
    assert result.returncode == 1
    assert "fmcluster-imex-prolog: IMEX domain not UP after 120s (nvidia-imex-ctl -N)" in result.stderr
    assert node.clock() == 120


def test_slurm_commands_come_from_the_rendered_path_not_the_callers_path(tmp_path):
    """Slurm gives a prolog no PATH: the rendered one has Slurm's bin directory, then the system's."""
    text = prog.imex_prolog(SLURM_BIN)
    assert f"SLURM_BIN={SLURM_BIN}\n" in text
    assert "export PATH=${FMCLUSTER_ROOT:+$PATH:}$SLURM_BIN:/usr/sbin:/usr/bin:/sbin:/bin\n" in text
    probe = tmp_path / "probe.sh"
    probe.write_text(text.replace('main "$@"', 'printf "%s" "$PATH"'))
    result = subprocess.run(["/bin/bash", str(probe)], env={}, capture_output=True, text=True)
    assert result.stdout == f"{SLURM_BIN}:/usr/sbin:/usr/bin:/sbin:/bin"
    with pytest.raises(ValueError, match="not a plain absolute path"):
        prog.imex_prolog("/opt/slurm/bin; rm -rf /")


def test_the_next_job_gets_its_own_nodes_and_the_channel_is_made_once(tmp_path):
    node, _ = prolog(tmp_path)
    node.set_scenario(slurm_nodes=(("gpu-3", "10.1.0.13"),))
    _, result = prolog(tmp_path, node=node, env={**EXCLUSIVE, "SLURM_NODELIST": "gpu-3", "SLURM_JOB_ID": "43"})
    assert result.returncode == 0, result.stderr
    assert node.file("/etc/nvidia-imex/nodes_config.cfg") == "10.1.0.13\n"  # never the last job's nodes
    assert len(node.calls("mknod")) == 1


@pytest.mark.parametrize("oversubscribe", ["OK", "YES", "FORCE", None])
def test_a_job_that_is_not_exclusive_gets_no_imex_domain(tmp_path, oversubscribe):
    env = {k: v for k, v in EXCLUSIVE.items() if k != "SLURM_JOB_OVERSUBSCRIBE"}
    if oversubscribe:
        env["SLURM_JOB_OVERSUBSCRIBE"] = oversubscribe
    node, result = prolog(tmp_path, env=env)
    assert result.returncode == 0 and not node.exists("/etc/nvidia-imex/nodes_config.cfg")
    assert node.file("/etc/nvidia-imex/config.cfg") == IMEX_PACKAGED_CONFIG  # left as the package has it
    assert "submit with --exclusive" in node.file("/var/log/fmcluster-imex-prolog.log")


def test_topo_oversubscription_counts_as_exclusive(tmp_path):
    node, result = prolog(tmp_path, env={**EXCLUSIVE, "SLURM_JOB_OVERSUBSCRIBE": "TOPO"})
    assert result.returncode == 0 and node.file("/etc/nvidia-imex/nodes_config.cfg")


@pytest.mark.parametrize("change, message", [
    ({"imex": False}, "nvidia-imex.service is not enabled"),
    ({"imex_channels_major": None}, "no nvidia-caps-imex-channels device in /proc/devices"),
    ({"imex_start_fails": True}, "nvidia-imex.service did not start"),
    ({"slurm_nodes": ()}, "scontrol lists no NodeAddr for gpu-[1-2]"),
])
def test_a_node_that_cannot_join_fails_the_prolog(tmp_path, change, message):
    """Exit 1: Slurm drains the node ('Prolog error') and requeues the job, rather than run it
    without NVLink between the nodes."""
    node, result = prolog(tmp_path, dataclasses.replace(GB200, **change))
    assert result.returncode == 1
    assert f"fmcluster-imex-prolog: {message}" in result.stderr
    assert f"error: {message}" in node.file("/var/log/fmcluster-imex-prolog.log")
    assert not (node.state / "units/nvidia-imex.service").exists() or change.get("imex_start_fails")


def test_prolog_is_shellcheck_clean():
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (make tools)")
    for script in (PROLOG, PROLOG.with_name("no-imex-prolog.sh")):
        result = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True)
        assert result.returncode == 0, result.stdout
