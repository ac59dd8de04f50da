"""The node health check as a real Slurm's HealthCheckProgram (tests/support/slurm_cluster.py:
slurmctld and two slurmd on localhost; the drain test on each Slurm release AWS PCS runs, from its
root as PCS lays it out, with auth/slurm, where the program finds Slurm's commands where PCS keeps
them, on no PATH): slurmd runs it every HealthCheckInterval, and a fault drains the node with a
reason naming it (`sinfo -R`), so that a job no longer runs there.

Each node has a root directory of its own (the program's ROOT, by SLURMD_NODENAME), where its node
script (prog.NodeProgram.health, the "slurm" runner) installed the program and its settings.
HealthCheckProgram names a wrapper that only points the program at that root and at the
stand-ins of what a GPU node has and this host has not (nvidia-smi, per node, and the suite's
dcgmi); Slurm's own environment is kept, so that the node's name comes from what slurmd sets
(SLURMD_NODENAME: every node here has the host's name, NodeHostname=localhost).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from fmcluster.facts import health as health_facts
from fmcluster.facts import node as node_facts
from fmcluster.node import program as prog
from fmcluster.node import shell as node_shell
from tests.support import nodes as node_models
from tests.support.sandbox import GPU_STANDINS
from tests.support.slurm_cluster import PCS_RELEASES, SlurmCluster, find, release_id, require_slurm

# nvidia-smi as NVIDIA's tool prints it (tests/support/sandbox_fakes.sh has the same formats),
# with the GPUs of the node's file gpus (8 unless written).
NVIDIA_SMI = r"""#!/bin/bash
root={nodes}/$SLURMD_NODENAME
gpus=$(cat "$root/gpus" 2>/dev/null || echo 8)
for ((i = 0; i < gpus; i++)); do
  case "${{1:-}}" in
    --query-gpu=*) printf '%s, 00000000:%02X:00.0, 0, [N/A]\n' "$i" $((0x53 + 0x10 * i)) ;;
    --query-remapped-rows=*) printf '00000000:%02X:00.0, 0, 0\n' $((0x53 + 0x10 * i)) ;;
    *) printf 'GPU %s: NVIDIA H100 80GB HBM3 (UUID: GPU-%08d-0000-0000-0000-000000000000)\n' "$i" "$i" ;;
  esac
done
"""

WRAPPER = """#!/bin/sh
env >{nodes}/$SLURMD_NODENAME/health-env
export FMCLUSTER_ROOT={nodes}/$SLURMD_NODENAME SLURM_CONF=${{SLURM_CONF:-{conf}}}
export PATH={standins}:/usr/bin:/bin:/usr/sbin:/sbin
exec "$FMCLUSTER_ROOT{program}" --slurm
"""


def install(nodes: Path, name: str, mounts: tuple[str, ...], slurm_bin: Path | None = None) -> None:
    """The node script's health step, run for node `name` (its root under `nodes`), Slurm's
    commands in `slurm_bin` (SlurmCluster.node_bin; by default this machine's)."""
    instance = node_models.group("pcs", "p5.48xlarge")[1].instance
    slurm_bin = slurm_bin or Path(find("scontrol")).parent
    program = prog.NodeProgram(instance).health(efa_devices=0, mounts=mounts, check_seconds=60,
                                                     replace=False, slurm_bin=str(slurm_bin), runner="slurm")
    root = nodes / name
    root.mkdir(parents=True, exist_ok=True)
    script = nodes / f"install-{name}.sh"
    script.write_text(program.render(node_shell.header()))
    result = subprocess.run(["bash", str(script)], env={**os.environ, "FMCLUSTER_ROOT": str(root)},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def reasons(cluster: SlurmCluster) -> dict[str, str]:
    out = cluster.run("sinfo", "-R", "-h", "-o", "%N|%E").stdout
    return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)


def until(condition, what: str, cluster: SlurmCluster, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise TimeoutError(f"waited {timeout:.0f} s for {what}\n{cluster.logs()}")


@pytest.mark.parametrize("release", PCS_RELEASES, ids=release_id)
def test_slurm_drains_a_faulty_node_with_the_reason_and_resumes_a_file_system(tmp_path, release):
    require_slurm(release)
    nodes = tmp_path / "nodes"
    standins = tmp_path / "standins"
    standins.mkdir()
    (standins / "nvidia-smi").write_text(NVIDIA_SMI.format(nodes=nodes))
    (standins / "dcgmi").symlink_to(GPU_STANDINS / "dcgmi")
    (standins / "nvidia-smi").chmod(0o755)
    wrapper = tmp_path / "node-health-slurm"
    cluster = SlurmCluster(tmp_path / "slurm", nodes=2, extra=[f"HealthCheckProgram={wrapper}",
                                                               "HealthCheckInterval=2"],
                           release=release, shared=(str(tmp_path), str(GPU_STANDINS)))
    for name in ("node1", "node2"):
        install(nodes, name, ("/",), cluster.node_bin)
    wrapper.write_text(WRAPPER.format(nodes=nodes, conf=cluster.conf, standins=standins,
                                      program=f"{node_facts.FMCLUSTER_LIB}/node-health"))
    wrapper.chmod(0o755)
    with cluster:
        until(lambda: all((nodes / n / "health-env").exists() for n in ("node1", "node2")), "a health check", cluster)
        assert reasons(cluster) == {}
        # slurmd names the node to its HealthCheckProgram
        assert "SLURMD_NODENAME=node2" in (nodes / "node2" / "health-env").read_text().splitlines()

        (nodes / "node2" / "gpus").write_text("7\n")  # a GPU lost
        reason = f"{health_facts.REASON_PREFIX}: gpu-count: 7 of 8 GPUs visible"
        until(lambda: reasons(cluster).get("node2") == reason, "node2 drained", cluster)
        assert cluster.node_states()["node2"] in ("drain", "drng")
        assert cluster.node_states()["node1"] == "idle"
        metrics = (nodes / "node2" / node_facts.TEXTFILE_DIR.lstrip("/") / "fmcluster-health.prom").read_text()
        assert 'fmcluster_node_fault{fault="gpu-count"} 1' in metrics

        # a job runs on the healthy node only; one asking for the drained node waits
        job = cluster.sbatch("#!/bin/sh\ntrue\n", "-N1")
        assert cluster.wait_job(job)["NodeList"] == "node1"
        held = cluster.sbatch("#!/bin/sh\ntrue\n", "-N1", "-w", "node2")
        time.sleep(3)
        assert cluster.job(held)["JobState"] == "PENDING"

        # node1 loses a file system (a node-kind fault): drained, then resumed once it is back
        env = nodes / "node1" / "etc/fmcluster/node-health.env"
        healthy = env.read_text()
        env.write_text(healthy.replace("REQUIRED_MOUNTS=/", "REQUIRED_MOUNTS='/ /fmcluster-missing'"))
        until(lambda: reasons(cluster).get("node1", "").startswith(f"{health_facts.REASON_PREFIX}: filesystem:"),
              "node1 drained", cluster)
        env.write_text(healthy)
        until(lambda: "node1" not in reasons(cluster) and cluster.node_states()["node1"] == "idle",
              "node1 resumed", cluster)
        # node2's hardware fault stays: it waits for its replacement
        assert reasons(cluster).get("node2") == reason


JOURNALCTL = """#!/bin/sh
cat {nodes}/$SLURMD_NODENAME/xids 2>/dev/null
"""
RECORDER = """#!/bin/sh
echo "$*" >>{log}
"""
REQUEST_REPLACEMENT = """#!/bin/sh
echo "$SLURMD_NODENAME $*" >>{log}
"""


def test_slurm_powers_down_a_dynamic_node_reboots_for_a_reset_and_asks_for_a_static_one(tmp_path):
    """Slurm's power saving replaces a drained dynamic node (node2: SuspendProgram set, node2 not in
    SuspendExcNodes): `state=POWER_DOWN_ASAP`, then Slurm clears the drain as it runs the
    SuspendProgram, and the node is powered down (idle~), available for the next job's new instance.
    A static node (node1, in SuspendExcNodes) asks the replacer instead. A reset-class XID reboots
    the node through Slurm (`scontrol reboot ASAP nextstate=RESUME`, RebootProgram a recorder) and
    Slurm resumes it once slurmd registers with a new boot time."""
    require_slurm()
    nodes = tmp_path / "nodes"
    standins = tmp_path / "standins"
    standins.mkdir()
    for name, text in (("nvidia-smi", NVIDIA_SMI), ("journalctl", JOURNALCTL)):
        (standins / name).write_text(text.format(nodes=nodes))
        (standins / name).chmod(0o755)
    (standins / "dcgmi").symlink_to(GPU_STANDINS / "dcgmi")
    programs = {}
    for program in ("suspend", "resume", "reboot"):
        programs[program] = tmp_path / f"{program}-program"
        programs[program].write_text(RECORDER.format(log=tmp_path / f"{program}.log"))
        programs[program].chmod(0o755)
    for name in ("node1", "node2"):
        install(nodes, name, ("/",))
        env = nodes / name / "etc/fmcluster/node-health.env"
        env.write_text(env.read_text().replace("REPLACE=0", "REPLACE=1"))
        lib = nodes / name / node_facts.FMCLUSTER_LIB.lstrip("/")
        (lib / "request-replacement").write_text(REQUEST_REPLACEMENT.format(log=tmp_path / "requests.log"))
        (lib / "request-replacement").chmod(0o755)
        boot = nodes / name / "proc/sys/kernel/random/boot_id"
        boot.parent.mkdir(parents=True)
        boot.write_text("boot-1\n")
        tag = nodes / name / "sys/devices/virtual/dmi/id/board_asset_tag"  # the instance, as on EC2 Nitro
        tag.parent.mkdir(parents=True)
        tag.write_text(f"i-0{name[-1] * 16}\n")
    wrapper = tmp_path / "node-health-slurm"
    cluster = SlurmCluster(tmp_path / "slurm", nodes=2, extra=[
        f"HealthCheckProgram={wrapper}", "HealthCheckInterval=2",
        f"SuspendProgram={programs['suspend']}", f"ResumeProgram={programs['resume']}",
        f"RebootProgram={programs['reboot']}", "SuspendTime=3600", "SuspendTimeout=5", "ResumeTimeout=60",
        "SuspendExcNodes=node1"])
    wrapper.write_text(WRAPPER.format(nodes=nodes, conf=cluster.conf, standins=standins,
                                      program=f"{node_facts.FMCLUSTER_LIB}/node-health"))
    wrapper.chmod(0o755)
    with cluster:
        until(lambda: all((nodes / n / "health-env").exists() for n in ("node1", "node2")), "a health check", cluster)

        # the dynamic node2 loses a GPU: drained, then powered down by Slurm, its drain cleared
        (nodes / "node2" / "gpus").write_text("7\n")
        until(lambda: (tmp_path / "suspend.log").exists(), "node2 powered down", cluster)
        assert (tmp_path / "suspend.log").read_text().split() == ["node2"]
        until(lambda: cluster.node_states().get("node2") == "idle~", "node2 powered down (idle~)", cluster)
        assert "node2" not in reasons(cluster)  # no longer drained: its next job resumes a new instance
        assert not (tmp_path / "requests.log").exists()

        # the static node1 gets a reset-class XID: drained, and rebooted by Slurm (no replacement)
        (nodes / "node1" / "xids").write_text("NVRM: Xid (PCI:0000:53:00): 94, pid=1, Contained ECC error\n")
        until(lambda: (tmp_path / "reboot.log").exists(), "node1's reboot", cluster)
        assert cluster.node("node1").get("Reason", "").startswith(f"{health_facts.REASON_PREFIX}: xid-reset: XID 94")
        # the instance reboots: a new boot, a clean kernel log, slurmd registering with a new boot time.
        # A reboot takes an instance a minute or more; here it takes a second at least, so that the
        # new boot is in a later second than the reboot request (Slurm keeps both in whole seconds;
        # a restart in the same second, under load, once left the node waiting for its reboot)
        time.sleep(1.1)
        (nodes / "node1" / "xids").unlink()
        (nodes / "node1" / "proc/sys/kernel/random/boot_id").write_text("boot-2\n")
        cluster.restart_slurmd("node1", "-b")
        until(lambda: cluster.node_states().get("node1") == "idle" and "node1" not in reasons(cluster),
              "node1 back and resumed", cluster)
        assert not (tmp_path / "requests.log").exists()

        # the XID comes back after the reboot: node1 is static, so it asks the replacer
        (nodes / "node1" / "xids").write_text("NVRM: Xid (PCI:0000:53:00): 94, pid=1, Contained ECC error\n")
        until(lambda: (tmp_path / "requests.log").exists(), "node1's replacement request", cluster)
        assert (tmp_path / "requests.log").read_text().splitlines() == [
            "node1 xid XID 94 on PCI:0000:53:00 again after a reboot"]
        assert reasons(cluster)["node1"].startswith(f"{health_facts.REASON_PREFIX}: xid: XID 94 on PCI:0000:53:00 "
                                                    "again after a reboot")
        assert len((tmp_path / "reboot.log").read_text().splitlines()) == 1
