"""The HyperPod controller's Pyxis registration against a real Slurm (tests/support/slurm_cluster.py:
Debian's slurmctld and slurmd on localhost): after its `scontrol reconfigure`, the controller
resumes the compute nodes drained only because their readiness check ran before it registered
Pyxis (fmcluster/node/scripts/hyperpod/plugstack.sh, resume_plugstack_drained), reading the drain
reasons from the real `scontrol -o show nodes`, and leaves a node drained for anything else too.
The drains are made as a compute node makes them (fmcluster/node/scripts/boot/gate-drain.sh's reason).
"""

from __future__ import annotations

import subprocess

from tests.support.paths import ROOT
from tests.support.slurm_cluster import SlurmCluster

PLUGSTACK = ROOT / "fmcluster" / "node" / "scripts" / "hyperpod" / "plugstack.sh"
PLUGSTACK_REASON = ("slurmd's plugstack.conf does not load Pyxis: the controller's must include "
                    "/opt/slurm/etc/plugstack.conf.d/pyxis.conf")


def drain(cluster: SlurmCluster, node: str, *reasons: str) -> None:
    """As gate_drain does: every reason after 'fmcluster node-ready: ', separated by '; '."""
    cluster.run("scontrol", "update", f"nodename={node}", "state=drain",
                f"reason=fmcluster node-ready: {'; '.join(reasons)}")


def test_the_controller_resumes_only_nodes_drained_for_the_plugstack_alone(tmp_path):
    with SlurmCluster(tmp_path / "slurm", 3) as cluster:
        drain(cluster, "node1", PLUGSTACK_REASON)
        drain(cluster, "node2", PLUGSTACK_REASON, "GPUs missing: 7 of 8")
        cluster.run("scontrol", "update", "nodename=node3", "state=drain", "reason=maintenance")
        script = f"""
log() {{ echo "log: $*"; }}
SLURM_PREFIX=/nonexistent  # Debian's Slurm commands are on PATH already
source {PLUGSTACK}
resume_plugstack_drained
"""
        result = subprocess.run(["bash", "-c", script], env=cluster.env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert "resumed node1" in result.stdout and "node2" not in result.stdout
        state = {node: cluster.node(node)["State"] for node in ("node1", "node2", "node3")}
        assert "DRAIN" not in state["node1"] and "DRAIN" in state["node2"] and "DRAIN" in state["node3"], state
        assert "GPUs missing" in cluster.node("node2")["Reason"]
