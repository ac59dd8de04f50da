"""The IMEX prolog as the Prolog= of a real Slurm (tests/support/slurm_cluster.py: Debian's slurmctld and
two slurmd on localhost, PrologFlags=Alloc,NoHold as on the AWS PCS cluster), with stand-ins only
for what a GB200 node has and this host has not: NVIDIA's nvidia-imex daemon (its systemctl unit)
and nvidia-imex-ctl.

Each slurmd runs in a private mount namespace where /usr/bin/scontrol is hidden: as on an AWS PCS
node, Slurm's commands are on no PATH a prolog gets; the cluster's own are in SLURM_BIN (a copy of
Debian's scontrol there, as PCS has it in /opt/aws/pcs/scheduler/slurm-VERSION/bin). Each node has
a root directory of its own (the prolog's ROOT, by SLURMD_NODENAME): its /proc/devices, its
/etc/nvidia-imex/nodes_config.cfg and IMEX channel.

The stand-in daemon models IMEX's quorum: a node's `nvidia-imex-ctl -N` says "Domain State: UP" once
every address of its nodes_config.cfg belongs to a node whose daemon runs with the same
nodes_config.cfg; a node marked `fails-to-join` never joins (a peer that cannot be reached).

Slurm 22.05 (Debian) sets no SLURM_JOB_OVERSUBSCRIBE in a prolog's environment (23.02 and later do;
AWS PCS runs 24.11+): a wrapper in front of the prolog reads it from `scontrol show job`, as
24.11's slurmd would set it, and changes nothing else (no PATH).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from fmcluster.node import program as prog
from tests.support.paths import ROOT
from tests.support.sandbox import IMEX_PACKAGED_CONFIG
from tests.support.slurm_cluster import SlurmCluster, find, node_address, require_slurm

PROLOG = ROOT / "fmcluster" / "node" / "scripts" / "slurm" / "imex-prolog.sh"
IMEX_MAJOR = 234

# systemctl, for nvidia-imex.service only: per node (SLURMD_NODENAME) under STATE; `start` reads
# the node's nodes_config.cfg, as the daemon does when it starts.
SYSTEMCTL = r"""#!/bin/bash
state={state}/$SLURMD_NODENAME
echo "systemctl $*" >>"$state/calls"
unit=${{*: -1}}
[[ "$unit" == nvidia-imex.service ]] || {{ echo "stand-in: no unit $unit" >&2; exit 5; }}
case "$1" in
  is-enabled) [[ -e "$state/enabled" ]] ;;
  stop) echo inactive >"$state/daemon" ;;
  start) cp {nodes}/"$SLURMD_NODENAME"/etc/nvidia-imex/nodes_config.cfg "$state/config" &&
         cp {nodes}/"$SLURMD_NODENAME"/etc/nvidia-imex/config.cfg "$state/daemon.cfg" &&
         echo active >"$state/daemon" ;;
  *) exit 1 ;;
esac
"""

# nvidia-imex-ctl -N: UP once every address of this daemon's nodes_config.cfg is a node whose
# daemon runs with the same file and joins.
IMEX_CTL = r"""#!/bin/bash
state={state}
me=$state/$SLURMD_NODENAME
echo "nvidia-imex-ctl $*" >>"$me/calls"
[[ "$(cat "$me/daemon" 2>/dev/null)" == active ]] || {{ echo "cannot connect to nvidia-imex" >&2; exit 1; }}
# the daemon's command service answers only when it started with IMEX_CMD_ENABLED=1
grep -qx IMEX_CMD_ENABLED=1 "$me/daemon.cfg" || {{ echo "cannot connect: command service disabled" >&2; exit 1; }}
domain=UP
echo "Nodes:"
while read -r address; do
  node=$(awk -v a="$address" '$1 == a {{ print $2 }}' "$state/addresses")
  status=READY
  if [[ -z "$node" || "$(cat "$state/$node/daemon" 2>/dev/null)" != active || -e "$state/$node/fails-to-join" ]] ||
     ! cmp -s "$state/$node/config" "$me/config"; then
    status=UNAVAILABLE
    domain=DOWN
  fi
  echo "Node - $address - $status - Version: 570.172"
done <"$me/config"
echo
echo "Domain State: $domain"
"""

# Slurm 22.05: SLURM_JOB_OVERSUBSCRIBE as 23.02+ set it for a prolog (module docstring).
WRAPPER = """#!/bin/sh
SLURM_JOB_OVERSUBSCRIBE=$({scontrol} -o show job "$SLURM_JOB_ID" | sed -n 's/.* OverSubscribe=\\([^ ]*\\).*/\\1/p')
export SLURM_JOB_OVERSUBSCRIBE
exec {prolog} "$@"
"""


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


class ImexNodes:
    """The GB200 side of the test: node roots, stand-ins, Slurm's bin directory, the prolog."""

    def __init__(self, tmp_path: Path, names: list[str], addresses: dict[str, str]) -> None:
        self.dir = tmp_path
        self.nodes = tmp_path / "nodes"
        self.state = tmp_path / "imex"
        self.slurm_bin = tmp_path / "opt/aws/pcs/scheduler/slurm-22.05/bin"
        self.slurm_bin.mkdir(parents=True)
        shutil.copy2(find("scontrol"), self.slurm_bin / "scontrol")
        (self.state).mkdir()
        (self.state / "addresses").write_text("".join(f"{addresses[n]} {n}\n" for n in names))
        for name in names:
            (self.nodes / name / "proc").mkdir(parents=True)
            (self.nodes / name / "proc/devices").write_text(
                f"Character devices:\n195 nvidia\n{IMEX_MAJOR} nvidia-caps-imex-channels\n")
            (self.nodes / name / "etc/nvidia-imex").mkdir(parents=True)
            (self.nodes / name / "etc/nvidia-imex/config.cfg").write_text(IMEX_PACKAGED_CONFIG)
            (self.state / name).mkdir()
            (self.state / name / "enabled").touch()  # the boot enabled nvidia-imex.service
        self.systemctl = executable(tmp_path / "standins/systemctl",
                                    SYSTEMCTL.format(state=self.state, nodes=self.nodes))
        # nvidia-imex-ctl: where a GB200 node has it, /usr/bin, is on the prolog's PATH after
        # SLURM_BIN; this host has none, so the stand-in goes in the first directory of that PATH
        executable(self.slurm_bin / "nvidia-imex-ctl", IMEX_CTL.format(state=self.state))

    def binds(self) -> dict[str, str]:
        return {"/usr/bin/systemctl": str(self.systemctl)}

    def install(self, text: str) -> Path:
        """`text` as the cluster's prolog (behind the 22.05 wrapper); its ROOT is the node's own."""
        text, count = re.subn(r"^ROOT=.*$", f"ROOT={self.nodes}/$SLURMD_NODENAME", text, count=1, flags=re.M)
        assert count == 1
        prolog = executable(self.dir / "prolog/imex-prolog", text)
        return executable(self.dir / "prolog/prolog-22.05", WRAPPER.format(scontrol=self.slurm_bin / "scontrol",
                                                                           prolog=prolog))

    def file(self, node: str, path: str) -> str:
        return (self.nodes / node / path.lstrip("/")).read_text()

    def calls(self, node: str) -> list[str]:
        path = self.state / node / "calls"
        return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def imex(tmp_path):
    require_slurm()
    if shutil.which("unshare") is None or subprocess.run(["unshare", "--mount", "true"]).returncode != 0:
        pytest.skip("slurmd needs a private mount namespace here (unshare --mount) to hide /usr/bin/scontrol")

    def start(render, nodes: int = 2) -> tuple[SlurmCluster, ImexNodes]:
        """A cluster whose prolog is `render(slurm_bin)`."""
        names = [f"node{i + 1}" for i in range(nodes)]
        addresses = {n: node_address(i) for i, n in enumerate(names)}
        gb200 = ImexNodes(tmp_path / "gb200", names, addresses)
        prolog = gb200.install(render(str(gb200.slurm_bin)))
        cluster = SlurmCluster(tmp_path / "slurm", nodes, extra=[f"Prolog={prolog}", "PrologFlags=Alloc,NoHold"],
                               hide=["/usr/bin/scontrol"], binds=gb200.binds())
        assert cluster.addresses == addresses
        started.append(cluster)
        cluster.start()
        return cluster, gb200

    started: list[SlurmCluster] = []
    yield start
    for cluster in started:
        cluster.stop()


JOB = "#!/bin/sh\necho ran on $(hostname) >{out}\n"


def drained(cluster: SlurmCluster, node: str, timeout: float = 30) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = cluster.node(node)
        if "DRAIN" in info.get("State", ""):
            return info
        time.sleep(0.2)
    raise TimeoutError(f"{node} not drained: {cluster.node(node)}\n{cluster.logs()}")


def requeued_and_held(cluster: SlurmCluster, job: str, timeout: float = 60) -> dict[str, str]:
    """The job's record once Slurm has requeued and held it after the failed launch (or the last
    record read, at the timeout): the requeue follows the drain by a moment, and Slurm names the
    reason while the job is still COMPLETING on the other node (its prolog fails later)."""
    deadline = time.monotonic() + timeout
    info = cluster.job(job)
    while ((info.get("Reason"), info.get("JobState")) != ("launch_failed_requeued_held", "PENDING")
           and time.monotonic() < deadline):
        time.sleep(0.2)
        info = cluster.job(job)
    return info


def without_path(text: str) -> str:
    """The prolog as it was before it set PATH itself: Slurm's commands by name."""
    text, count = re.subn(r"^export PATH=.*\n", "", text, count=1, flags=re.M)
    assert count == 1
    return text


def test_a_prolog_without_its_own_path_drains_the_nodes(imex, tmp_path):
    """The prolog as it was (scontrol by name): on a node whose Slurm is on no default PATH (AWS
    PCS, HyperPod), every exclusive job drains its nodes with "Prolog error"."""
    cluster, gb200 = imex(lambda slurm_bin: without_path(prog.imex_prolog(slurm_bin)))
    out = tmp_path / "old.out"
    job = cluster.sbatch(JOB.format(out=out), "--exclusive", "-N2")
    info = drained(cluster, "node1")
    assert info["Reason"].startswith("Prolog error"), info
    assert cluster.job(job)["JobState"] != "COMPLETED" and not out.exists()
    assert "systemctl is-enabled --quiet nvidia-imex.service" in gb200.calls("node1")  # it got as far as scontrol
    assert "scontrol lists no NodeAddr" in gb200.file("node1", "/var/log/fmcluster-imex-prolog.log")


def test_an_exclusive_job_runs_on_its_imex_domain(imex, tmp_path):
    cluster, gb200 = imex(prog.imex_prolog)
    out = tmp_path / "job.out"
    job = cluster.sbatch(JOB.format(out=out), "--exclusive", "-N2")
    info = cluster.wait_job(job)
    assert info["JobState"] == "COMPLETED", (info, cluster.logs())
    assert out.read_text().startswith("ran on")
    for node in cluster.names:
        assert gb200.file(node, "/etc/nvidia-imex/nodes_config.cfg") == f"{node_address(0)}\n{node_address(1)}\n"
        assert (gb200.nodes / node / "dev/nvidia-caps-imex-channels/channel0").is_char_device()
        assert "nvidia-imex-ctl -N" in gb200.calls(node)
        assert "IMEX domain UP, 2 nodes" in gb200.file(node, "/var/log/fmcluster-imex-prolog.log")
    assert set(cluster.node_states().values()) == {"idle"}


def test_a_job_that_is_not_exclusive_leaves_imex_alone(imex, tmp_path):
    cluster, gb200 = imex(prog.imex_prolog, nodes=1)
    out = tmp_path / "shared.out"
    info = cluster.wait_job(cluster.sbatch(JOB.format(out=out), "-N1", "-n1"))
    assert info["JobState"] == "COMPLETED" and out.exists()
    assert gb200.calls("node1") == [] and not (gb200.nodes / "node1/etc/nvidia-imex/nodes_config.cfg").exists()


def test_a_domain_that_never_comes_up_drains_the_node_and_the_job_never_runs(imex, tmp_path):
    """node2's daemon never joins: each node's prolog waits IMEX_WAIT_SECONDS (5 here) for the
    domain, then fails; Slurm drains the nodes and requeues the job, which never ran."""
    cluster, gb200 = imex(lambda slurm_bin: prog.imex_prolog(slurm_bin, IMEX_WAIT_SECONDS="5"))
    (gb200.state / "node2/fails-to-join").touch()
    out = tmp_path / "never.out"
    job = cluster.sbatch(JOB.format(out=out), "--exclusive", "-N2")
    info = drained(cluster, "node1", timeout=120)  # generous on a loaded machine: it only bounds a failure
    assert info["Reason"].startswith("Prolog error"), info
    # bounded: the prolog gave up after its own wait, as its log says (no wall-clock assertion here)
    assert "IMEX domain not UP after 5s" in gb200.file("node1", "/var/log/fmcluster-imex-prolog.log")
    held = requeued_and_held(cluster, job)  # held for an administrator: it never ran on the broken domain
    assert (held["JobState"], held["Reason"]) == ("PENDING", "launch_failed_requeued_held"), held
    assert not out.exists()


def test_the_cluster_helper_starts_in_seconds_and_cleans_up(tmp_path):
    """tests/support/slurm_cluster.py itself: two nodes with fake GPUs (Gres=gpu:8), a second partition,
    idle in seconds; a GPU job gets its GPUs; every process ends at stop()."""
    cluster = SlurmCluster(tmp_path / "c", 2, gres="gpu:8", partitions={"a": ["node1", "node2"], "b": ["node2"]})
    with cluster:
        assert cluster.start_seconds < 15, cluster.start_seconds
        assert cluster.node("node1")["Gres"] == "gpu:8"
        out = tmp_path / "gpu.out"
        job = cluster.sbatch(f"#!/bin/sh\necho $CUDA_VISIBLE_DEVICES >{out}\n", "-p", "b", "--gres=gpu:2")
        info = cluster.wait_job(job)
        assert info["JobState"] == "COMPLETED" and info["NodeList"] == "node2"
        assert out.read_text().strip() == "0,1"
        pids = [p.pid for p in cluster.processes]
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
