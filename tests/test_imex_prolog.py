"""The IMEX Slurm prolog (fmcluster/slurm/imex-prolog.sh) run as a process on a sandboxed node
(tests/sandbox.py): what it writes, which commands it calls and in what order, and what it does
when a piece is missing. The pattern is the AWS PCS User Guide's ("Configure UltraServer instances")."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.sandbox import Sandbox, Scenario

PROLOG = Path(__file__).resolve().parent.parent / "fmcluster" / "slurm" / "imex-prolog.sh"
GB200 = Scenario(instance_type="p6e-gb200.36xlarge", imex=True, gpus=4, gpu_model="GB200", nvme_disks=3,
                 efa_devices=4)
EXCLUSIVE = {"SLURM_JOB_ID": "42", "SLURM_NODELIST": "gpu-[1-2]", "SLURM_JOB_OVERSUBSCRIBE": "NO"}


def prolog(tmp_path, scenario=GB200, env=EXCLUSIVE, node=None):
    node = node or Sandbox(tmp_path, scenario)
    return node, node.run(PROLOG.read_text(), name="prolog.sh", env=env)


def commands(node) -> list[str]:
    return [c.line for c in node.calls() if c.command != "_tick"]


def test_an_exclusive_job_on_an_ultraserver_gets_an_imex_domain_of_its_nodes(tmp_path):
    node, result = prolog(tmp_path)
    assert result.returncode == 0, result.stderr
    assert node.file("/etc/nvidia-imex/nodes_config.cfg") == "10.1.0.11\n10.1.0.12\n"
    assert (node.root / "dev/nvidia-caps-imex-channels/channel0").exists()
    run = [line for line in commands(node) if not line.startswith(("curl", "logger"))]
    channel = "/dev/nvidia-caps-imex-channels/channel0"  # (the fakes record paths inside the sandbox root)
    assert run == ["systemctl is-enabled --quiet nvidia-imex.service", f"mknod {channel} c 234 0",
                   "scontrol -ao show node gpu-[1-2]", "timeout 15 systemctl stop nvidia-imex.service",
                   "systemctl stop nvidia-imex.service", "pkill -9 -x nvidia-imex",
                   "timeout 60 systemctl start nvidia-imex.service", "systemctl start nvidia-imex.service"]
    curls = [c.args for c in node.calls("curl")]
    assert "PUT" in curls[0] and any("X-aws-ec2-metadata-token: AQAEA-token" in a for a in curls[1])  # IMDSv2
    assert (node.state / "units/nvidia-imex.service").read_text().strip() == "active"
    assert "IMEX domain of 2 nodes: 10.1.0.11 10.1.0.12" in node.file("/var/log/fmcluster-imex-prolog.log")


def test_the_next_job_gets_its_own_nodes_and_the_channel_is_made_once(tmp_path):
    node, _ = prolog(tmp_path)
    node.set_scenario(slurm_nodes=(("gpu-3", "10.1.0.13"),))
    _, result = prolog(tmp_path, node=node, env={**EXCLUSIVE, "SLURM_NODELIST": "gpu-3", "SLURM_JOB_ID": "43"})
    assert result.returncode == 0, result.stderr
    assert node.file("/etc/nvidia-imex/nodes_config.cfg") == "10.1.0.13\n"  # never the last job's nodes
    assert len(node.calls("mknod")) == 1


@pytest.mark.parametrize("instance_type", ["p5.48xlarge", "p6-b200.48xlarge", "g6e.48xlarge"])
def test_other_instance_types_are_left_alone(tmp_path, instance_type):
    node, result = prolog(tmp_path, Scenario(instance_type=instance_type))
    assert result.returncode == 0, result.stderr
    assert [c.command for c in node.calls() if c.command != "_tick"] == ["curl", "curl"]
    assert not (node.root / "etc/nvidia-imex").exists()


@pytest.mark.parametrize("oversubscribe", ["OK", "YES", "FORCE", None])
def test_a_job_that_is_not_exclusive_gets_no_imex_domain(tmp_path, oversubscribe):
    env = {k: v for k, v in EXCLUSIVE.items() if k != "SLURM_JOB_OVERSUBSCRIBE"}
    if oversubscribe:
        env["SLURM_JOB_OVERSUBSCRIBE"] = oversubscribe
    node, result = prolog(tmp_path, env=env)
    assert result.returncode == 0 and not (node.root / "etc/nvidia-imex").exists()
    assert "submit with --exclusive" in node.file("/var/log/fmcluster-imex-prolog.log")


def test_topo_oversubscription_counts_as_exclusive(tmp_path):
    node, result = prolog(tmp_path, env={**EXCLUSIVE, "SLURM_JOB_OVERSUBSCRIBE": "TOPO"})
    assert result.returncode == 0 and node.file("/etc/nvidia-imex/nodes_config.cfg")


@pytest.mark.parametrize("change, message", [
    ({"imex": False}, "nvidia-imex.service is not enabled on this p6e-gb200.36xlarge node"),
    ({"imex_channels_major": None}, "no nvidia-caps-imex-channels device in /proc/devices"),
    ({"imex_start_fails": True}, "nvidia-imex.service did not start"),
    ({"imds": False}, "cannot read the instance type from the instance metadata service"),
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
    result = subprocess.run(["shellcheck", str(PROLOG)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
