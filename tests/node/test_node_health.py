"""The continuous node health check (fmcluster/node/scripts/boot/programs/node-health.sh, installed by
health.sh through fmcluster.node.program.NodeProgram.health), run in the boot-path harness: a sandboxed node
(tests/support/sandbox.py) whose nvidia-smi, kernel log, EFA devices, mounts, dcgmi and Slurm
controller (scontrol) are recording fakes in the real tools' formats. Each fault of
fmcluster.facts.health shows the node leaving the job pool: drained with a reason naming the fault
(what the fake scontrol recorded), and the metric; a healthy node, and a node someone else
drained, are left alone; a node drained for a file system that answers again is resumed; a
hardware fault on a drained node without jobs asks for its replacement once."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from fmcluster.facts import health as health_facts
from fmcluster.facts import node as node_facts
from fmcluster.node import hyperpod as hyperpod_node
from fmcluster.node import pcs as pcs_node
from fmcluster.node import program as prog
from fmcluster.node import shell as node_shell
from fmcluster.node.refs import NodeRefs
from tests.support import frozen_fs, nodes
from tests.support.frozen_fs import FrozenFs
from tests.support.sandbox import Sandbox, Scenario

HEALTH = f"{node_facts.FMCLUSTER_LIB}/node-health"
METRICS = f"{node_facts.TEXTFILE_DIR}/fmcluster-health.prom"
REPLACEMENTS = "/var/lib/replacements"  # where the stand-in request-replacement records its calls
MOUNTS = ("/fsx", "/scratch")
TAG = "/sys/devices/virtual/dmi/id/board_asset_tag"  # the instance id on EC2 Nitro instances
INSTANCE = "i-0123456789abcdef0"


def node(tmp_path, *, instance="p5.48xlarge", replace=True, **changes) -> Sandbox:
    """A node of `instance` (the EC2 instance INSTANCE) with the health check installed by its node
    script (the timer runner) and /fsx and /scratch mounted; `changes` to its Scenario."""
    made, group = nodes.group("pcs", instance)
    entry = group.instance
    world = dict(gpus=entry.gpu_count, nvme_disks=0, efa_devices=entry.max_efa_interfaces)
    sandbox = Sandbox(tmp_path, Scenario(**{**world, **changes}))
    new_instance(sandbox, INSTANCE)
    for mount in MOUNTS:
        (sandbox.root / mount.lstrip("/")).mkdir()
        (sandbox.state / "mounts").open("a").write(f"{mount}\t10.1.0.9@tcp:/fsx\tlustre\tlustre\tlnet=tcp\n")
    program = prog.NodeProgram(entry).health(
        efa_devices=made.node(group).efa_devices, mounts=MOUNTS, check_seconds=300, replace=replace,
        slurm_bin=str(sandbox.bin))  # the sandbox's Slurm commands
    result = sandbox.run(program.render(node_shell.header()))
    assert result.returncode == 0, result.stderr
    replacement = sandbox.root / node_facts.FMCLUSTER_LIB.lstrip("/") / "request-replacement"
    replacement.write_text(f'#!/bin/sh\necho "$*" >>"$FMCLUSTER_ROOT{REPLACEMENTS}"\n')
    replacement.chmod(0o755)
    return sandbox


def new_instance(sandbox: Sandbox, instance_id: str) -> None:
    """The node's Slurm name now on the EC2 instance `instance_id` (its DMI board asset tag)."""
    tag = sandbox.root / TAG.lstrip("/")
    tag.parent.mkdir(parents=True, exist_ok=True)
    tag.write_text(instance_id + "\n")


def check(sandbox: Sandbox, *args: str, program: str = f"$FMCLUSTER_ROOT{HEALTH}", env: dict | None = None):
    return sandbox.run(f'exec "{program}" "$@"', *args, name="check.sh", env={**mount_table(sandbox), **(env or {})})


def mount_table(sandbox: Sandbox) -> dict[str, str]:
    """The kernel's mount table, as node-health reads it (MOUNTINFO, /proc/self/mountinfo on a node):
    the root and the sandbox's mounts (state/mounts), in the kernel's format."""
    lines = ["22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/root rw"]
    for i, mount in enumerate(sandbox.mounts().values()):
        lines.append(f"{30 + i} 22 0:{50 + i} / {mount.target} rw,relatime shared:{2 + i} - {mount.fstype} "
                     f"{mount.source} rw")
    path = sandbox.state / "mountinfo"
    path.write_text("".join(line + "\n" for line in lines))
    return {"MOUNTINFO": str(path)}


def drains(sandbox: Sandbox) -> list[str]:
    return [c.line for c in sandbox.calls("scontrol") if c.args and c.args[0] == "update"]


def metrics(sandbox: Sandbox) -> dict[str, str]:
    return dict(line.rsplit(" ", 1) for line in sandbox.file(METRICS).splitlines() if not line.startswith("#"))


def slurm_node(sandbox: Sandbox) -> tuple[str, str]:
    state, reason = sandbox.file("/../state/slurm-node").rstrip("\n").split("\t")
    return state, reason


FAULTS = {
    "gpu-count": (dict(gpus=7), "gpu-count 7 of 8 GPUs visible"),
    "gpu-state": (dict(gpu_error="[GPU requires reset]"), "gpu-state GPU 0 (00000000:53:00.0): [GPU requires reset]"),
    "xid": (dict(xids=(79,)), "xid XID 79 on PCI:0000:53:00"),
    "xid-reset": (dict(xids=(94,)), "xid-reset XID 94 on PCI:0000:53:00"),
    "ecc": (dict(remap_failure=True), "ecc GPU 00000000:53:00.0: row remapping failed"),
    "ecc-reset": (dict(ecc_errors=2), "ecc-reset GPU 0 (00000000:53:00.0): 2 uncorrected ECC errors"),
    "nvlink": (dict(nvlink_inactive=2), "nvlink 2 NVLink links inactive: GPU 0 link 0, GPU 0 link 1"),
    "efa": (dict(efa_devices=31), "efa 31 of 32 EFA devices present"),
    "filesystem": (dict(hung_mounts=("/fsx",)), "filesystem /fsx does not answer (30s)"),
    "dcgm": (dict(dcgm="fail"), "dcgm dcgmi diag -r 1 fails: GPU Memory"),
}


def test_every_fault_of_the_facts_has_a_test():
    assert sorted(FAULTS) == sorted(health_facts.FAULT_SLUGS)


def test_a_healthy_node_is_left_alone(tmp_path):
    sandbox = node(tmp_path)
    result = check(sandbox, "--slurm")
    assert result.returncode == 0, result.stdout + result.stderr
    assert drains(sandbox) == []
    found = metrics(sandbox)
    assert found["fmcluster_node_healthy"] == "1"
    assert not any(name.startswith("fmcluster_node_fault") for name in found)
    assert int(found["fmcluster_node_health_checked_timestamp_seconds"]) > 0
    # the idle node ran the DCGM diagnostic, and every command ran under timeout
    assert any(c.args[:3] == ("diag", "-r", "1") for c in sandbox.calls("dcgmi"))
    timed = [c.args[1] for c in sandbox.calls("timeout")]
    for command in ("nvidia-smi", "journalctl", "dcgmi", str(sandbox.bin / "scontrol")):
        assert command in timed
    # but the probes of the mounts, in the background: mounted or not comes from the kernel's mount
    # table, and only `stat -f` touches a file system
    assert "stat" not in timed and sandbox.calls("mountpoint") == []
    assert sorted(c.args for c in sandbox.calls("stat")) == [("-f", "/fsx"), ("-f", "/scratch")]
    assert not list((sandbox.root / "run/fmcluster/health").iterdir())  # no probe left behind


@pytest.mark.parametrize("slug", list(FAULTS))
def test_a_fault_drains_the_node_with_its_reason(tmp_path, slug):
    changes, line = FAULTS[slug]
    sandbox = node(tmp_path, replace=False, **changes)
    result = check(sandbox, "--slurm")
    assert result.returncode == 1
    assert result.stdout.splitlines() == [line]
    name, text = line.split(" ", 1)
    reason = f"{health_facts.REASON_PREFIX}: {name}: {text} [{INSTANCE}]"  # the instance it was found on
    assert drains(sandbox) == [f"scontrol update nodename=ip-10-1-0-42 state=drain reason={reason}"]
    assert slurm_node(sandbox) == ("IDLE+DRAIN", reason)
    found = metrics(sandbox)
    assert found["fmcluster_node_healthy"] == "0"
    assert found[f'fmcluster_node_fault{{fault="{slug}"}}'] == "1"
    # checked again, still faulty: the drain stands, nothing is sent twice
    assert check(sandbox, "--slurm").returncode == 1
    assert len(drains(sandbox)) == 1


def test_the_dcgm_diagnostic_runs_only_on_an_idle_node(tmp_path):
    sandbox = node(tmp_path, dcgm="fail", slurm_state="MIXED")
    assert check(sandbox, "--slurm").returncode == 0
    assert sandbox.calls("dcgmi") == [] and drains(sandbox) == []


@pytest.mark.parametrize("changes, line", [
    (dict(gpus=0), "gpu-state nvidia-smi fails: nvidia-smi: NVIDIA-SMI has failed because it couldn't "
                   "communicate with the NVIDIA driver."),
    (dict(nvidia_smi_hangs=True), "gpu-state nvidia-smi does not answer (30s)"),
    # GPU 2 fell off the bus: the reason names it, not GPU 0 (nvidia-smi's first line)
    (dict(gpu_lost=2), "gpu-state nvidia-smi fails: Unable to determine the device handle for GPU 0000:73:00.0: "
                       "GPU is lost.  Reboot the system to recover this GPU"),
    (dict(remap_failure=True), "ecc GPU 00000000:53:00.0: row remapping failed"),
    (dict(remap_pending=True), "ecc-reset GPU 00000000:53:00.0: row remap pending a reset"),
    (dict(pages_pending=True), "ecc-reset GPU 0 (00000000:53:00.0): retired pages pending a reset"),
    (dict(xids=(13, 31)), None),  # application XIDs: no fault
    (dict(xids=(48, 48)), "xid XID 48 on PCI:0000:53:00"),  # once per XID and GPU
])
def test_gpu_state_readings(tmp_path, changes, line):
    sandbox = node(tmp_path, **changes)
    result = check(sandbox)
    assert result.stdout.splitlines() == ([line] if line else [])
    assert result.returncode == (1 if line else 0)


# `nvidia-smi -L` on a MIG node whose GPU 1 fell off the bus (exit 15): each GPU's MIG devices indented
MIG_LISTING = """GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)
  MIG 3g.40gb     Device  0: (UUID: MIG-00000000-0000-0000-0000-000000000000)
  MIG 3g.40gb     Device  1: (UUID: MIG-00000000-0000-0000-0000-000000000001)
{lost}GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000002)
  MIG 7g.80gb     Device  0: (UUID: MIG-00000000-0000-0000-0000-000000000002)
"""


@pytest.mark.parametrize("lost, reason", [
    ("Unable to determine the device handle for GPU 0000:64:00.0: GPU is lost.  Reboot the system to recover "
     "this GPU\n", "Unable to determine the device handle for GPU 0000:64:00.0: GPU is lost.  Reboot the system to "
                   "recover this GPU"),
    # a message of another kind: the first line that is neither a GPU's nor a MIG device's
    ("Failed to initialize NVML: Driver/library version mismatch\n",
     "Failed to initialize NVML: Driver/library version mismatch"),
])
def test_a_lost_gpu_on_a_mig_node_is_named(tmp_path, lost, reason):
    sandbox = node(tmp_path, gpus=3)
    smi = sandbox.bin / "nvidia-smi"
    smi.unlink()
    smi.write_text(f"#!/bin/sh\ncat <<'EOF'\n{MIG_LISTING.format(lost=lost)}EOF\nexit 15\n")
    smi.chmod(0o755)
    assert check(sandbox).stdout.splitlines() == [f"gpu-state nvidia-smi fails: {reason}"]


def test_the_program_finds_its_helper_in_fmcluster_lib_wherever_it_runs_from(tmp_path):
    """slurm-node.sh is sourced from FMCLUSTER_LIB (node-health.env), not from beside the running
    copy of the program (a copy run from elsewhere, or through a link, still finds the node)."""
    sandbox = node(tmp_path, gpus=7)
    elsewhere = sandbox.dir / "elsewhere/node-health"
    elsewhere.parent.mkdir()
    elsewhere.write_text((sandbox.root / HEALTH.lstrip("/")).read_text())
    elsewhere.chmod(0o755)
    result = check(sandbox, "--slurm", program=str(elsewhere))
    assert result.returncode == 1, result.stderr
    assert drains(sandbox) == [f"scontrol update nodename=ip-10-1-0-42 state=drain reason="
                               f"{health_facts.REASON_PREFIX}: gpu-count: 7 of 8 GPUs visible [{INSTANCE}]"]


def test_a_node_drained_by_someone_else_is_never_touched(tmp_path):
    sandbox = node(tmp_path, xids=(79,), slurm_state="IDLE+DRAIN", slurm_reason="maintenance: new BIOS")
    assert check(sandbox, "--slurm").returncode == 1
    assert drains(sandbox) == []
    assert slurm_node(sandbox) == ("IDLE+DRAIN", "maintenance: new BIOS")
    assert not sandbox.exists(REPLACEMENTS)
    sandbox.set_scenario(xids=())  # healthy: still not resumed
    assert check(sandbox, "--slurm").returncode == 0
    assert drains(sandbox) == []


def test_a_file_system_that_answers_again_is_resumed(tmp_path):
    sandbox = node(tmp_path, hung_mounts=("/fsx",))
    assert check(sandbox, "--slurm").returncode == 1
    assert slurm_node(sandbox)[0] == "IDLE+DRAIN"
    assert not sandbox.exists(REPLACEMENTS)  # a node-kind fault: never replaced
    sandbox.set_scenario(hung_mounts=())
    assert check(sandbox, "--slurm").returncode == 0
    assert drains(sandbox)[-1] == "scontrol update nodename=ip-10-1-0-42 state=resume"
    assert slurm_node(sandbox) == ("IDLE", "")


def test_a_hung_file_system_does_not_hang_the_check(tmp_path):
    """A stat on a hung Lustre or NFS server sleeps uninterruptibly: no signal ends it, so neither
    `timeout` nor the check may wait for it (the fake stat ignores SIGTERM and sleeps on)."""
    sandbox = node(tmp_path, hung_mounts=("/fsx",))
    started = time.monotonic()
    result = check(sandbox, "--slurm")
    assert time.monotonic() - started < 15  # the stuck stat sleeps 20 s, left behind
    assert result.returncode == 1
    assert result.stdout.splitlines() == ["filesystem /fsx does not answer (30s)"]
    assert slurm_node(sandbox)[0] == "IDLE+DRAIN"
    # the other mount was checked too, its probe started with /fsx's: 30 s of polling on the
    # virtual clock for both
    assert sorted(c.args[-1] for c in sandbox.calls("stat")) == ["/fsx", "/scratch"]
    assert [c.args[0] for c in sandbox.calls("sleep")] == ["0.1"] * 10 + ["1"] * 29


def test_two_hung_file_systems_take_the_time_of_one(tmp_path):
    """Every mount's probe starts at once: two dead mounts are polled together for 30 s, not one
    after the other for 60 s (slurmd kills a HealthCheckProgram after 60 s)."""
    sandbox = node(tmp_path, hung_mounts=MOUNTS)
    result = check(sandbox, "--slurm")
    assert result.stdout.splitlines() == [f"filesystem {m} does not answer (30s)" for m in MOUNTS]
    assert [c.args[0] for c in sandbox.calls("sleep")] == ["0.1"] * 10 + ["1"] * 29
    assert slurm_node(sandbox)[1].startswith(f"{health_facts.REASON_PREFIX}: filesystem: /fsx does not answer "
                                             f"(30s) (+1 more)")


def test_a_file_system_missing_from_the_mount_table_is_not_mounted(tmp_path):
    """Mounted or not is the kernel's mount table's answer: nothing runs on a mount that is not there."""
    sandbox = node(tmp_path)
    mounts = sandbox.state / "mounts"
    mounts.write_text("".join(line + "\n" for line in mounts.read_text().splitlines() if not line.startswith("/fsx\t")))
    result = check(sandbox)
    assert result.stdout.splitlines() == ["filesystem /fsx is not mounted"]
    assert [c.args for c in sandbox.calls("stat")] == [("-f", "/scratch")]


# --- a file system that really stops answering ----------------------------------------------------

def fuse_node(tmp_path, fs: FrozenFs) -> Sandbox:
    """A node whose /fsx is the FUSE file system `fs` (mounted at ROOT/fsx once entered): the fake
    mountpoint runs the real one on it, the fake stat the real stat."""
    sandbox = node(tmp_path)
    mounts = sandbox.state / "mounts"
    mounts.write_text("".join("/fsx\tfrozen\tfuse\treal\t\n" if line.startswith("/fsx\t") else line + "\n"
                              for line in mounts.read_text().splitlines()))
    fs.mountpoint = sandbox.root / "fsx"
    return sandbox


def stuck(fs: FrozenFs) -> dict[int, str]:
    """The processes (but the daemon) whose command line names the mount point of `fs` (mountpoint,
    stat): process id -> state."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            if (proc.name.isdigit() and int(proc.name) != fs.pid
                    and str(fs.mountpoint).encode() in (proc / "cmdline").read_bytes().split(b"\0")):
                found[int(proc.name)] = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
    return found


def wait_gone(fs: FrozenFs) -> None:
    for _ in range(500):
        if not stuck(fs):
            return
        time.sleep(0.02)
    raise AssertionError(f"processes on {fs.mountpoint} still there: {stuck(fs)}")


def probe(sandbox: Sandbox, mount: str = "/fsx") -> tuple[int, str]:
    """The probe node-health left behind on `mount` (PROBE_DIR/probe-MOUNT): its process id, and
    since when it runs."""
    pid, since = sandbox.file(f"/run/fmcluster/health/probe-{mount.strip('/').replace('/', '-')}").split()
    return int(pid), since


def test_a_frozen_file_system_drains_the_node_and_never_hangs_the_check(tmp_path):
    """/fsx is a real FUSE file system that stops answering the way a dead Lustre or NFS server
    does: `stat -f` on it sleeps uninterruptibly in the kernel (D state), which no signal ends.
    The check is not held up: the node is drained because /fsx does not answer (never "not
    mounted"), the stuck probe is left behind and never started again while it lives (checks
    while /fsx is frozen add no process: they say since when it is stuck, at once), and once the
    file system thaws the node is resumed."""
    frozen_fs.require()
    fs = FrozenFs(tmp_path / "unused")
    sandbox = fuse_node(tmp_path, fs)
    with fs:
        assert check(sandbox, "--slurm").returncode == 0  # answering: healthy
        fs.freeze()
        # a check held up by /fsx would wait for ever: the watchdog thaws it after 60 s
        watchdog = threading.Timer(60, fs.thaw)
        watchdog.start()
        started = time.monotonic()
        result = check(sandbox, "--slurm")
        assert time.monotonic() - started < 30, "the check waited for the frozen file system"
        watchdog.cancel()
        fs.wait_blocked()
        assert result.returncode == 1
        assert result.stdout.splitlines() == ["filesystem /fsx does not answer (30s)"]
        reason = f"{health_facts.REASON_PREFIX}: filesystem: /fsx does not answer (30s) [{INSTANCE}]"
        assert slurm_node(sandbox) == ("IDLE+DRAIN", reason)
        # the probe is still there, asleep in the kernel on /fsx, and was never waited for; no
        # signal ends it, SIGKILL neither: it sleeps on uninterruptibly (D)
        pid, since = probe(sandbox)
        time.sleep(0.2)
        assert stuck(fs) == {pid: "D"}
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        assert stuck(fs) == {pid: "D"}
        # checked again while frozen, twice: /fsx is not probed again, and does not answer at once
        blocked, sleeps = fs.blocked(), len(sandbox.calls("sleep"))
        for _ in range(2):
            result = check(sandbox, "--slurm")
            assert result.stdout.splitlines() == [f"filesystem /fsx does not answer (stuck since {since})"]
        assert stuck(fs) == {pid: "D"} and fs.blocked() == blocked
        assert [c.args[-1] for c in sandbox.calls("stat")].count("/fsx") == 2  # the healthy check's, the first
        assert set(c.args[0] for c in sandbox.calls("sleep")[sleeps:]) <= {"0.1"}  # no waiting for /fsx
        assert slurm_node(sandbox) == ("IDLE+DRAIN", f"{health_facts.REASON_PREFIX}: filesystem: /fsx does not "
                                                     f"answer (stuck since {since}) [{INSTANCE}]")
        assert len(drains(sandbox)) == 2  # the new reason once
        fs.thaw()
        wait_gone(fs)
        assert check(sandbox, "--slurm").returncode == 0
        assert drains(sandbox)[-1] == "scontrol update nodename=ip-10-1-0-42 state=resume"
        assert slurm_node(sandbox) == ("IDLE", "")
        assert [c.args[-1] for c in sandbox.calls("stat")].count("/fsx") == 3
        assert not list((sandbox.root / "run/fmcluster/health").iterdir())
    assert not any("not mounted" in line for line in drains(sandbox))


def test_a_probe_file_naming_another_process_is_probed_again(tmp_path):
    """A probe's process id may be reused (a reboot clears /run, but not a long uptime): a live
    process that is not that probe's `stat -f` does not make the mount stuck."""
    sandbox = node(tmp_path)
    path = sandbox.root / "run/fmcluster/health/probe-fsx"
    path.parent.mkdir(parents=True)
    path.write_text(f"{os.getpid()} 2026-01-01T00:00:00+0000\n")  # this test's process: alive
    assert check(sandbox).returncode == 0
    assert sorted(c.args[-1] for c in sandbox.calls("stat")) == ["/fsx", "/scratch"]
    assert not path.exists()


def test_a_mounted_file_system_whose_stat_fails_fails(tmp_path):
    """A FUSE server that died: the file system is still mounted, but every call on it fails
    (ENOTCONN, as an NFS server's ESTALE or a Lustre EIO): it "fails", with stat's error, neither
    "not mounted" nor "does not answer"."""
    frozen_fs.require()
    fs = FrozenFs(tmp_path / "unused")
    sandbox = fuse_node(tmp_path, fs)
    with fs:
        fs.kill()
        result = check(sandbox, "--slurm")
        assert result.stdout.splitlines() == ["filesystem /fsx fails (stat -f: Transport endpoint is not connected)"]
        assert slurm_node(sandbox)[1] == (f"{health_facts.REASON_PREFIX}: filesystem: /fsx fails (stat -f: Transport "
                                          f"endpoint is not connected) [{INSTANCE}]")


def test_a_file_system_that_answers_after_the_timeout_does_not_answer(tmp_path):
    """The real `timeout` (2 s) and the real `sleep`: the FUSE file system answers each stat after
    4 s (2 s past the timeout, so that a loaded machine's late `timeout` still comes first: with
    0.5 s the answer sometimes won). `timeout` signals the probe at 2 s, but the probe sleeps in the
    kernel until the answer comes and only then dies of the signal (timeout's status 124): that file system did not
    answer in time. It is never reported "not mounted"."""
    frozen_fs.require()
    fs = FrozenFs(tmp_path / "unused")
    sandbox = fuse_node(tmp_path, fs)
    for command in ("timeout", "sleep"):
        (sandbox.bin / command).unlink()  # /usr/bin's
    env = sandbox.root / node_shell.FMCLUSTER_ETC.lstrip("/") / "node-health.env"
    env.write_text(env.read_text().replace("COMMAND_TIMEOUT=30", "COMMAND_TIMEOUT=2"))
    with fs:
        fs.freeze(4)
        result = check(sandbox, "--slurm")
        assert fs.blocked() >= 1
        assert result.stdout.splitlines() == ["filesystem /fsx does not answer (2s)"], result.stderr
        assert slurm_node(sandbox)[1].startswith(f"{health_facts.REASON_PREFIX}: filesystem: /fsx does not answer")
        wait_gone(fs)  # the probe ended (of timeout's signal), after the answer
        fs.thaw()
        assert check(sandbox, "--slurm").returncode == 0
        assert slurm_node(sandbox) == ("IDLE", "")


def test_a_hardware_fault_stays_drained_when_it_passes_again(tmp_path):
    sandbox = node(tmp_path, replace=False, nvlink_inactive=1)
    check(sandbox, "--slurm")
    sandbox.set_scenario(nvlink_inactive=0)
    assert check(sandbox, "--slurm").returncode == 0
    assert slurm_node(sandbox)[0] == "IDLE+DRAIN" and len(drains(sandbox)) == 1


def test_replacement_is_requested_once_the_drained_node_has_no_jobs(tmp_path):
    sandbox = node(tmp_path, xids=(79,), slurm_state="MIXED")
    assert check(sandbox, "--slurm").returncode == 1
    assert slurm_node(sandbox)[0] == "MIXED+DRAIN"  # draining: its jobs run on
    assert not sandbox.exists(REPLACEMENTS)
    (sandbox.state / "slurm-node").write_text(sandbox.file("/../state/slurm-node").replace("MIXED", "IDLE"))
    check(sandbox, "--slurm")
    check(sandbox, "--slurm")
    assert sandbox.file(REPLACEMENTS).splitlines() == ["xid XID 79 on PCI:0000:53:00"]


def test_a_replaced_instance_resumes_the_node_its_predecessor_drained(tmp_path):
    """AWS PCS replaces a drained node's instance under the same Slurm node name; slurmctld keeps
    DRAIN and the reason (only resume, power down or ResumeTimeout clear it: node_mgr.c)."""
    sandbox = node(tmp_path, xids=(79,))
    assert check(sandbox, "--slurm").returncode == 1
    state, reason = slurm_node(sandbox)
    assert state == "IDLE+DRAIN" and reason.endswith(f" [{INSTANCE}]")
    assert sandbox.file(REPLACEMENTS).splitlines() == ["xid XID 79 on PCI:0000:53:00"]
    # the same instance, healthy again: a hardware fault stays drained
    sandbox.set_scenario(xids=())
    assert check(sandbox, "--slurm").returncode == 0
    assert slurm_node(sandbox) == ("IDLE+DRAIN", reason)
    # a new instance (its root volume new, but even with the old marker left): resumed
    new_instance(sandbox, "i-0fedcba9876543210")
    assert check(sandbox, "--slurm").returncode == 0
    assert drains(sandbox)[-1] == "scontrol update nodename=ip-10-1-0-42 state=resume"
    assert slurm_node(sandbox) == ("IDLE", "")
    # and when it is faulty too, it is drained under its own id and asks for itself once
    sandbox.set_scenario(xids=(79,))
    check(sandbox, "--slurm")
    check(sandbox, "--slurm")
    assert slurm_node(sandbox)[1].endswith(" [i-0fedcba9876543210]")
    assert sandbox.file(REPLACEMENTS).splitlines() == ["xid XID 79 on PCI:0000:53:00"] * 2


def test_a_reason_without_an_instance_id_is_this_instances(tmp_path):
    old = f"{health_facts.REASON_PREFIX}: xid: XID 79 on PCI:0000:53:00"
    sandbox = node(tmp_path, slurm_state="IDLE+DRAIN", slurm_reason=old)
    assert check(sandbox, "--slurm").returncode == 0
    assert slurm_node(sandbox) == ("IDLE+DRAIN", old) and drains(sandbox) == []


def test_a_long_reason_keeps_the_instance_id(tmp_path):
    sandbox = node(tmp_path, replace=False, xids=(79,), nvlink_inactive=18)
    check(sandbox, "--slurm")
    reason = slurm_node(sandbox)[1]
    assert reason.startswith(f"{health_facts.REASON_PREFIX}: nvlink: 18 NVLink links inactive: GPU 0 link 0")
    assert reason.endswith(f" [{INSTANCE}]") and len(reason) == 200


def boot(sandbox: Sandbox, boot_id: str) -> None:
    """The node now runs its boot `boot_id` (/proc/sys/kernel/random/boot_id: a reboot changes it)."""
    path = sandbox.root / "proc/sys/kernel/random/boot_id"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(boot_id + "\n")


def reboots(sandbox: Sandbox) -> list[str]:
    return [c.line for c in sandbox.calls("scontrol") if c.args and c.args[0] == "reboot"]


def test_the_node_gets_both_classes_of_xids_from_the_facts(tmp_path):
    """node-health.env carries REPLACE_XIDS and RESET_XIDS as fmcluster.facts.health has them
    (prog.NodeProgram.health), not the script's own default."""
    sandbox = node(tmp_path)
    env = sandbox.root / node_shell.FMCLUSTER_ETC.lstrip("/") / "node-health.env"
    show = 'source "$1" && printf "%s\\n" "$REPLACE_XIDS" "$RESET_XIDS"'
    shown = subprocess.run(["bash", "-c", show, "env", str(env)], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    assert shown == [" ".join(map(str, health_facts.REPLACE_XIDS)), " ".join(map(str, health_facts.RESET_XIDS))]
    # the node follows its settings: there XID 94 is of neither class
    sandbox.set_scenario(xids=(94,))
    assert check(sandbox).stdout.splitlines() == ["xid-reset XID 94 on PCI:0000:53:00"]
    env.write_text(env.read_text() + "RESET_XIDS='63 64 74'\n")
    assert check(sandbox).returncode == 0
    # an older node-health.env without RESET_XIDS: the script's default is the facts'
    script = (Path(prog.__file__).parent / "scripts/boot/programs/node-health.sh").read_text()
    assert f"RESET_XIDS=${{RESET_XIDS:-{' '.join(map(str, health_facts.RESET_XIDS))}}}" in script.splitlines()
    assert set(health_facts.RESET_XIDS).isdisjoint(health_facts.REPLACE_XIDS)
    assert sorted(health_facts.RESET_XIDS + health_facts.REPLACE_XIDS) == [48, 63, 64, 74, 79, 94, 95]
    resets = " ".join(f.slug for f in health_facts.FAULTS if f.kind == health_facts.RESET)
    assert f"RESET_FAULTS=${{RESET_FAULTS:-{resets}}}" in script.splitlines()
    assert resets == "xid-reset ecc-reset"


@pytest.mark.parametrize("xid", health_facts.RESET_XIDS)
def test_a_reset_class_xid_reboots_the_node_through_slurm_once(tmp_path, xid):
    """XIDs 63, 64, 74 and 94 ask for a GPU reset, not a new instance: Slurm reboots the drained
    node once its jobs end and resumes it when it is back; no replacement is asked for."""
    sandbox = node(tmp_path, xids=(xid,), slurm_state="MIXED")
    boot(sandbox, "boot-1")
    assert check(sandbox, "--slurm").returncode == 1
    reason = f"{health_facts.REASON_PREFIX}: xid-reset: XID {xid} on PCI:0000:53:00 [{INSTANCE}]"
    assert slurm_node(sandbox) == ("MIXED+DRAIN", reason)
    assert reboots(sandbox) == [f"scontrol reboot ASAP nextstate=RESUME reason={reason} ip-10-1-0-42"]
    check(sandbox, "--slurm")  # the same boot: asked once
    assert len(reboots(sandbox)) == 1 and not sandbox.exists(REPLACEMENTS)


def test_a_reset_class_xid_again_after_the_reboot_replaces_the_node(tmp_path):
    sandbox = node(tmp_path, xids=(94,))
    boot(sandbox, "boot-1")
    check(sandbox, "--slurm")
    assert len(reboots(sandbox)) == 1
    # rebooted: Slurm resumed the node, and this boot's kernel log has no XID
    boot(sandbox, "boot-2")
    (sandbox.state / "slurm-node").write_text("IDLE\t\n")
    sandbox.set_scenario(xids=())
    assert check(sandbox, "--slurm").returncode == 0 and slurm_node(sandbox) == ("IDLE", "")
    # the XID comes back on the same instance: a new GPU is needed
    sandbox.set_scenario(xids=(94,))
    result = check(sandbox, "--slurm")
    assert result.stdout.splitlines() == ["xid XID 94 on PCI:0000:53:00 again after a reboot"]
    assert slurm_node(sandbox)[1] == (f"{health_facts.REASON_PREFIX}: xid: XID 94 on PCI:0000:53:00 again after "
                                      f"a reboot [{INSTANCE}]")
    assert sandbox.file(REPLACEMENTS).splitlines() == ["xid XID 94 on PCI:0000:53:00 again after a reboot"]
    assert len(reboots(sandbox)) == 1
    # a new instance under the node's name starts afresh: a reset-class XID reboots it
    new_instance(sandbox, "i-0fedcba9876543210")
    (sandbox.state / "slurm-node").write_text("IDLE\t\n")
    check(sandbox, "--slurm")
    assert slurm_node(sandbox)[1].startswith(f"{health_facts.REASON_PREFIX}: xid-reset: XID 94")
    assert len(reboots(sandbox)) == 2


def test_a_replace_class_xid_beside_a_reset_class_one_replaces_without_a_reboot(tmp_path):
    sandbox = node(tmp_path, xids=(94, 79))
    check(sandbox, "--slurm")
    assert reboots(sandbox) == []
    assert sandbox.file(REPLACEMENTS).splitlines() == ["xid XID 79 on PCI:0000:53:00"]


def test_no_reboot_unless_repairs_are_asked(tmp_path):
    sandbox = node(tmp_path, replace=False, xids=(94,))
    check(sandbox, "--slurm")
    assert slurm_node(sandbox)[0] == "IDLE+DRAIN" and reboots(sandbox) == []


# XID 94 (a contained uncorrectable ECC error) raises the volatile uncorrected count and leaves a
# row remap pending; XID 63 on Ampere and later is "New row marked for remapping, reset gpu to
# activate" (NVIDIA's A100 memory error management guide, its XID catalog)
MEMORY_XIDS = {63: dict(xids=(63,), remap_pending=True),
               94: dict(xids=(94,), remap_pending=True, ecc_errors=1)}


@pytest.mark.parametrize("xid", sorted(MEMORY_XIDS))
def test_a_memory_xid_with_its_pending_remap_reboots_the_node(tmp_path, xid):
    """What a reset-class memory XID leaves on the GPU (an uncorrected volatile count, a row remap
    pending a reset) is reset-class too: the node is rebooted, not replaced."""
    sandbox = node(tmp_path, **MEMORY_XIDS[xid])
    boot(sandbox, "boot-1")
    result = check(sandbox, "--slurm")
    expected = (["ecc-reset GPU 0 (00000000:53:00.0): 1 uncorrected ECC errors"] if xid == 94 else []) + [
        "ecc-reset GPU 00000000:53:00.0: row remap pending a reset", f"xid-reset XID {xid} on PCI:0000:53:00"]
    assert result.stdout.splitlines() == expected
    assert len(reboots(sandbox)) == 1 and not sandbox.exists(REPLACEMENTS)
    assert not any("POWER_DOWN" in line for line in drains(sandbox))


def test_a_failed_row_remap_beside_a_reset_class_xid_replaces_the_node(tmp_path):
    sandbox = node(tmp_path, xids=(94,), remap_failure=True)
    check(sandbox, "--slurm")
    assert reboots(sandbox) == []
    assert sandbox.file(REPLACEMENTS).splitlines() == ["ecc GPU 00000000:53:00.0: row remapping failed"]


def rebooted(sandbox: Sandbox, boot_id: str, **scenario) -> None:
    """The node came back from Slurm's reboot as boot `boot_id`, resumed, its GPU as `scenario`."""
    boot(sandbox, boot_id)
    (sandbox.state / "slurm-node").write_text("IDLE\t\n")
    sandbox.set_scenario(**scenario)


def test_an_uncorrected_count_back_after_the_reboot_replaces_the_node(tmp_path):
    sandbox = node(tmp_path, **MEMORY_XIDS[94])
    boot(sandbox, "boot-1")
    check(sandbox, "--slurm")
    assert len(reboots(sandbox)) == 1
    # the reset activated the remap and cleared the volatile count, but errors come back
    rebooted(sandbox, "boot-2", xids=(), remap_pending=False, ecc_errors=3)
    result = check(sandbox, "--slurm")
    assert result.stdout.splitlines() == ["ecc GPU 0 (00000000:53:00.0): 3 uncorrected ECC errors again after a reboot"]
    assert sandbox.file(REPLACEMENTS).splitlines() == [
        "ecc GPU 0 (00000000:53:00.0): 3 uncorrected ECC errors again after a reboot"]
    assert len(reboots(sandbox)) == 1


@pytest.mark.parametrize("later, again", [
    (dict(boot_id="boot-2", xids=(94,)), True),  # the same XID on the same GPU, the boot right after
    (dict(boot_id="boot-2", xids=(74,)), False),  # another XID
    (dict(boot_id="boot-2", xids=(94,), gpu=1), False),  # the same XID on another GPU
    (dict(boot_id="boot-3", xids=(94,)), False),  # a later boot: that reboot did its work
])
def test_only_the_same_xid_on_the_same_gpu_right_after_the_reboot_is_again(tmp_path, later, again):
    sandbox = node(tmp_path, xids=(94,))
    boot(sandbox, "boot-1")
    check(sandbox, "--slurm")
    rebooted(sandbox, "boot-2", xids=())
    assert check(sandbox, "--slurm").returncode == 0  # the boot right after: healthy
    if later["boot_id"] != "boot-2":
        rebooted(sandbox, later["boot_id"])
        assert check(sandbox, "--slurm").returncode == 0
    sandbox.set_scenario(xids=later["xids"])
    if later.get("gpu"):
        journal = sandbox.bin / "journalctl"
        journal.unlink()
        journal.write_text("#!/bin/sh\necho 'NVRM: Xid (PCI:0000:63:00): 94, pid=1, Contained ECC error'\n")
        journal.chmod(0o755)
    result = check(sandbox, "--slurm")
    (line,) = result.stdout.splitlines()
    if again:
        assert line == "xid XID 94 on PCI:0000:53:00 again after a reboot"
        assert len(reboots(sandbox)) == 1 and sandbox.exists(REPLACEMENTS)
    else:
        assert line.startswith("xid-reset ")
        assert len(reboots(sandbox)) == 2 and not sandbox.exists(REPLACEMENTS)


# `scontrol show config` of a cluster whose Slurm powers nodes down (SuspendProgram set, no node or
# partition excluded): its nodes are dynamic ones; RebootProgram as written
CONFIG = """RebootProgram           = {reboot}
ResumeTimeout           = 1800 sec
SuspendExcNodes         = (null)
SuspendExcParts         = (null)
SuspendProgram          = {suspend}
SuspendTime             = 300 sec
"""


def slurm_config(sandbox: Sandbox, *, reboot: str = "(null)", dynamic: bool = False) -> None:
    suspend = "/opt/aws/pcs/bin/suspend" if dynamic else "(null)"
    (sandbox.state / "slurm-config").write_text(CONFIG.format(reboot=reboot, suspend=suspend))


def power_downs(sandbox: Sandbox) -> list[str]:
    return [line for line in drains(sandbox) if "POWER_DOWN" in line]


def test_no_reboot_is_asked_of_a_slurm_without_a_reboot_program(tmp_path):
    """Slurm 24.11 to 25.11 accept `scontrol reboot` without a RebootProgram and do nothing (the node
    goes DOWN "reboot timed out" after ResumeTimeout): a static node stays drained, and says why."""
    sandbox = node(tmp_path, **MEMORY_XIDS[94])
    slurm_config(sandbox)
    result = check(sandbox, "--slurm")
    assert result.returncode == 1
    assert reboots(sandbox) == [] and power_downs(sandbox) == [] and not sandbox.exists(REPLACEMENTS)
    assert slurm_node(sandbox)[0] == "IDLE+DRAIN"
    assert "Slurm cannot reboot ip-10-1-0-42 (no RebootProgram in scontrol show config): it stays drained" in (
        result.stderr)
    # with a RebootProgram it is rebooted
    slurm_config(sandbox, reboot="/opt/aws/pcs/bin/reboot")
    check(sandbox, "--slurm")
    assert len(reboots(sandbox)) == 1


def test_a_dynamic_node_without_a_reboot_program_gets_a_new_instance(tmp_path):
    sandbox = node(tmp_path, xids=(94,), slurm_state="MIXED")
    slurm_config(sandbox, dynamic=True)
    check(sandbox, "--slurm")
    assert slurm_node(sandbox)[0] == "MIXED+DRAIN" and power_downs(sandbox) == []  # its jobs run on
    (sandbox.state / "slurm-node").write_text(sandbox.file("/../state/slurm-node").replace("MIXED", "IDLE"))
    check(sandbox, "--slurm")
    check(sandbox, "--slurm")
    assert reboots(sandbox) == [] and not sandbox.exists(REPLACEMENTS)
    assert power_downs(sandbox) == ["scontrol update nodename=ip-10-1-0-42 state=POWER_DOWN_ASAP"]


def test_a_refused_reboot_leaves_the_node_drained(tmp_path):
    """Slurm 26.05 refuses a reboot without a RebootProgram (where show config did not say)."""
    sandbox = node(tmp_path, xids=(94,))
    (sandbox.state / "slurm-reboot-refused").write_text("Reboot request rejected: RebootProgram not defined\n")
    result = check(sandbox, "--slurm")
    assert len(reboots(sandbox)) == 1 and not sandbox.exists(REPLACEMENTS)
    assert "Slurm refuses to reboot ip-10-1-0-42" in result.stderr
    assert slurm_node(sandbox)[0] == "IDLE+DRAIN" and not sandbox.exists("/var/lib/fmcluster/health/reset")


def test_a_down_dynamic_node_is_powered_down_only_once_idle(tmp_path):
    """POWER_DOWN_ASAP on a DOWN+DRAIN node clears DRAIN but leaves DOWN: powered down, it would
    never be used again. The power down waits for IDLE+DRAIN."""
    reason = f"{health_facts.REASON_PREFIX}: xid: XID 79 on PCI:0000:53:00 [{INSTANCE}]"
    sandbox = node(tmp_path, xids=(79,), slurm_state="DOWN+DRAIN", slurm_reason=reason)
    slurm_config(sandbox, reboot="/opt/aws/pcs/bin/reboot", dynamic=True)
    result = check(sandbox, "--slurm")
    assert result.returncode == 1 and power_downs(sandbox) == [] and not sandbox.exists(REPLACEMENTS)
    assert "ip-10-1-0-42 is DOWN+DRAIN: powered down once Slurm has it IDLE+DRAIN" in result.stderr
    (sandbox.state / "slurm-node").write_text(f"IDLE+DRAIN\t{reason}\n")
    check(sandbox, "--slurm")
    assert power_downs(sandbox) == ["scontrol update nodename=ip-10-1-0-42 state=POWER_DOWN_ASAP"]
    # a static node DOWN+DRAIN: the replacer takes it
    sandbox = node(tmp_path / "static", xids=(79,), slurm_state="DOWN+DRAIN", slurm_reason=reason)
    slurm_config(sandbox, reboot="/opt/aws/pcs/bin/reboot")
    check(sandbox, "--slurm")
    assert sandbox.file(REPLACEMENTS).splitlines() == ["xid XID 79 on PCI:0000:53:00"] and power_downs(sandbox) == []


@pytest.mark.parametrize("state", ["IDLE+POWERING_DOWN", "IDLE+DRAIN+POWER_DOWN", "IDLE+POWERED_DOWN",
                                   "IDLE+DRAIN+REBOOT_REQUESTED", "DOWN+REBOOT_ISSUED"])
def test_a_node_slurm_powers_down_or_reboots_is_never_drained_or_resumed(tmp_path, state):
    """A drain set while Slurm powers a node down would outlive its instance (Slurm makes a powered
    down node available only when it is not drained: power_save.c)."""
    reason = f"{health_facts.REASON_PREFIX}: xid: XID 79 on PCI:0000:53:00 [i-0aaaaaaaaaaaaaaaa]"
    sandbox = node(tmp_path, xids=(79,), slurm_state=state, slurm_reason=reason if "DRAIN" in state else "")
    assert check(sandbox, "--slurm").returncode == 1
    assert drains(sandbox) == [] and reboots(sandbox) == [] and not sandbox.exists(REPLACEMENTS)


def test_replacement_is_off_unless_asked(tmp_path):
    sandbox = node(tmp_path, replace=False, xids=(79,))
    check(sandbox, "--slurm")
    assert slurm_node(sandbox)[0] == "IDLE+DRAIN" and not sandbox.exists(REPLACEMENTS)


def test_the_timer_runs_the_slurm_mode(tmp_path):
    sandbox = node(tmp_path)
    assert "fmcluster-node-health.timer" in sandbox.enabled()
    service = sandbox.file("/etc/systemd/system/fmcluster-node-health.service")
    assert f"ExecStart={HEALTH} --slurm" in service
    # once node-health exits, systemd signals it alone, not a probe it left stuck in the kernel (no
    # signal ends that one: the unit would sit in "deactivating", then fail, at every run)
    assert "\nKillMode=process\n" in service
    assert "OnUnitActiveSec=300s" in sandbox.file("/etc/systemd/system/fmcluster-node-health.timer")
    assert sandbox.verify_units().stdout == ""


def test_a_type_without_nvlink_or_efa_checks_neither(tmp_path):
    sandbox = node(tmp_path, instance="g6e.xlarge", nvlink_inactive=18, efa_devices=0)
    assert check(sandbox).returncode == 0
    assert not any(c.args[:1] == ("nvlink",) for c in sandbox.calls("nvidia-smi"))


# --- where it is installed ------------------------------------------------------------------------

# where a node drained for a hardware fault asks to be replaced (the replacer's queue)
ASKS = {"queue": "p5-pcs-node-replacements", "region": "us-east-1", "cluster": "p5-pcs"}
REFS = NodeRefs(lustre_dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", lustre_mount_name="abcdefgh",
                replacement_queue=ASKS["queue"])


def test_a_check_that_asks_for_replacements_needs_the_replacer():
    made, gpu = nodes.group("pcs", "p5.48xlarge")
    assert made.node(gpu).health.replace
    with pytest.raises(ValueError, match="needs the replacer's queue"):
        prog.install_health(prog.NodeProgram(gpu.instance), made, made.node(gpu), NodeRefs())


def test_pcs_gpu_compute_nodes_get_the_check():
    edits = {"name": ASKS["cluster"], "orchestrator.version": "25.11", "health.check_minutes": 10}
    made, gpu = nodes.group("pcs", "p5.48xlarge", edits)
    program = pcs_node.node_program(made, gpu, REFS)
    assert "install_node_health" in program.steps
    # a node that may ask for its replacement has the request, to the cluster's replacer's queue
    assert "install_request_replacement" in program.steps
    assert (program.settings["REPLACE_QUEUE_URL"], program.settings["REPLACE_PLANE"]) == (ASKS["queue"], "pcs")
    assert (program.settings["REPLACE_REGION"], program.settings["REPLACE_CLUSTER"]) == (ASKS["region"],
                                                                                        ASKS["cluster"])
    settings = program.settings
    assert (settings["HEALTH_EFA"], settings["HEALTH_MOUNTS"], settings["HEALTH_NVLINK"]) == (32, "/fsx /scratch", 1)
    assert (settings["HEALTH_SLURM_BIN"], settings["HEALTH_REPLACE"]) == ("/opt/aws/pcs/scheduler/slurm-25.11/bin", 1)
    assert (settings["HEALTH_CHECK_SECONDS"], settings["HEALTH_RUNNER"]) == (600, "timer")
    assert settings["HEALTH_XIDS"] == " ".join(map(str, health_facts.REPLACE_XIDS))
    assert settings["HEALTH_RESET_XIDS"] == " ".join(map(str, health_facts.RESET_XIDS))
    assert settings["HEALTH_NODE_FAULTS"] == "filesystem"
    # the node lifecycle scripts install it with the node's configuration, once

    (configure, *_) = pcs_node.node_actions(made, gpu, REFS)
    assert "step install_node_health" in configure.text
    # a CPU node, and the login nodes, have nothing to check
    cpu = nodes.group("pcs", "c7i.2xlarge", edits)
    assert "install_node_health" not in pcs_node.node_program(*cpu, REFS).steps
    assert "install_node_health" not in pcs_node.node_program(made, made.login, REFS).steps
    # without replacements, no request
    kept = nodes.group("pcs", "p5.48xlarge", {**edits, "health.replace": False})
    assert "install_request_replacement" not in pcs_node.node_program(*kept, REFS).steps


def test_hyperpod_slurm_gpu_nodes_get_the_check(tmp_path):

    script = hyperpod_node.entry_script(*nodes.group("hyperpod-slurm", "p5.48xlarge"), REFS)
    assert "HEALTH_SLURM_BIN=/opt/slurm/bin" in script and "  step install_node_health" in script
    assert "HEALTH_MOUNTS='/fsx /scratch'" in script and "REPLACE_PLANE='hyperpod-slurm'" in script
    assert "install_node_health" not in hyperpod_node.entry_script(*nodes.group("hyperpod-slurm", "c7i.8xlarge"), REFS)


def test_the_node_is_found_by_its_host_name_when_slurm_names_it_otherwise(tmp_path):
    sandbox = node(tmp_path, gpus=7, slurm_name="gpu-st-p5-1")
    assert check(sandbox, "--slurm").returncode == 1
    assert drains(sandbox) == [f"scontrol update nodename=gpu-st-p5-1 state=drain reason="
                               f"{health_facts.REASON_PREFIX}: gpu-count: 7 of 8 GPUs visible [{INSTANCE}]"]
    # under slurmd (HealthCheckProgram), SLURMD_NODENAME names it
    sandbox = node(tmp_path / "named", gpus=7, slurm_name="gpu-st-p5-2")
    check(sandbox, "--slurm", env={"SLURMD_NODENAME": "gpu-st-p5-2"})
    assert drains(sandbox)[0].startswith("scontrol update nodename=gpu-st-p5-2 state=drain")
    assert not any(c.args[:3] == ("-o", "show", "node") and len(c.args) == 3 for c in sandbox.calls("scontrol"))


def test_eks_gpu_nodes_run_the_check_for_its_metrics_only(tmp_path):
    """On Amazon EKS the node monitoring agent and node repair take a faulty node out; fmcluster's
    check runs from the same timer, without Slurm, for the metrics NodeUnhealthy alerts on."""
    from fmcluster.node import eks

    made, gpu = nodes.group("eks", "p5en.48xlarge")
    entry = gpu.instance
    script = eks.node_script(made, gpu, nodes.REFS, compact=False)
    assert script is not None and "  step install_node_health" in script and "HEALTH_RUNNER='metrics'" in script
    assert "install_request_replacement" not in script
    # without the cluster's metrics (no NAME-observability), nothing to check for
    assert "install_node_health" not in (eks.node_script(made, gpu, nodes.NO_METRICS, compact=False) or "")
    sandbox = Sandbox(tmp_path, Scenario(gpus=entry.gpu_count, nvme_disks=0, efa_devices=entry.max_efa_interfaces,
                                         xids=(79,)))
    program = prog.install_health(prog.NodeProgram(entry), made, made.node(gpu), nodes.REFS)
    assert sandbox.run(program.render(node_shell.header())).returncode == 0
    unit = sandbox.file("/etc/systemd/system/fmcluster-node-health.service")
    assert f"ExecStart={HEALTH}\n" in unit and "After=kubelet.service" in unit
    result = check(sandbox)
    assert result.returncode == 1 and "xid XID 79" in result.stdout
    assert metrics(sandbox)["fmcluster_node_healthy"] == "0"
    assert drains(sandbox) == []  # no Slurm here


def test_the_gpu_key_tells_apart_gpus_on_the_same_bus_of_other_pci_domains():
    """A reboot is asked for a reset-class finding on one GPU, and only the same GPU's finding after
    it escalates: the key that matches the kernel log's XID lines to nvidia-smi's bus IDs keeps the
    PCI domain, which is all that tells a p6e-gb200's four GPUs apart (00000008..00000019:01:00.0)."""
    program = (node_shell.PROGRAMS / "node-health.sh").read_text()
    function = program[program.index("gpu_key() {"):]
    function = function[:function.index("\n}\n") + 3]
    keys = subprocess.run(["bash", "-c", function + "for b in \"$@\"; do gpu_key \"$b\"; done", "keys",
                           "PCI:0008:01:00", "00000008:01:00.0", "PCI:0009:01:00", "00000019:01:00.0",
                           "PCI:0000:53:00", "00000000:53:00.0"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert keys == ["8:01:00", "8:01:00", "9:01:00", "19:01:00", "0:53:00", "0:53:00"]
