"""Network placement on a real Slurm (tests/support/slurm_cluster.py: Debian's slurmctld and five
slurmd on localhost, one partition `gpu`): each node runs fmcluster's network-features program
(fmcluster/node/scripts/boot/programs/network-features.sh) with the real scontrol, its instance's
network nodes coming from the recorded DescribeInstanceTopology answer tests/data/topology/p5.48xlarge.json
(stand-ins only for the instance metadata service, `hostname` and the AWS CLI); then the kit's
placement.sh (fmcluster.kits.placement) asks for nodes, and real sbatch places the jobs.

The recorded topology: every node under one layer-1 network node; nodes 1-4 under one layer-2
node, node 5 under another; at layer 3, nodes 1-2 under X, 3-4 under Y, 5 under Z.

Slurm 22.05 (Debian) and AWS PCS's 24.11+ share what is used here: `scontrol update
AvailableFeatures= ActiveFeatures=` on a node without a NodeFeatures plugin, sinfo's %f, and
sbatch's matching OR `--constraint=[A|B]` (sbatch(1), "Matching OR"). The program runs on AWS PCS
only, so the cluster is Slurm of a release PCS runs, from its root as PCS lays it out
(SlurmCluster's `release`: the daemons and the program's scontrol, auth/slurm): 26.05, and 24.11
too for the test marked EVERY_RELEASE (the features published, read back from `scontrol -o show
node`, lost at `scontrol reconfigure` and set again).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fmcluster.facts.node import FMCLUSTER_LIB
from fmcluster.kits import placement
from fmcluster.model import cluster as cluster_model
from fmcluster.spec import loader
from tests.support import slurm_roots
from tests.support.paths import EXAMPLES_DIR, ROOT
from tests.support.slurm_cluster import PCS_RELEASES, SlurmCluster, release_id, require_slurm

PROGRAM = ROOT / "fmcluster" / "node" / "scripts" / "boot" / "programs" / "network-features.sh"
ANSWER = ROOT / "tests" / "data" / "topology" / "p5.48xlarge.json"
X, Y = "nn3-c3e50490a237cb0f1", "nn3-c3e50490a237cb0f2"
LAYER2, LAYER1 = "nn2-b27c0d1e2f3a4b501", "nn1-a1f0e5d4c3b2a1901"

# The instance metadata service (IMDSv2) of node NAME's instance, `hostname -s`, and the AWS CLI
# answering from the recorded file for the instance asked for, as its text output prints the
# query Instances[].NetworkNodes[] (the ids tab-separated on one line).
CURL = """#!/bin/bash
case "$*" in
  *api/token*) printf token ;;
  *meta-data/instance-id*) printf '%s' "{instance}" ;;
  *meta-data/placement/region*) printf us-east-2 ;;
  *) exit 22 ;;
esac
"""
HOSTNAME = "#!/bin/sh\necho {name}\n"
AWS = """#!/bin/bash
[[ "$1 $2 $3" == "ec2 describe-instance-topology --instance-ids" ]] || exit 2
[[ "$*" == *" --query Instances[].NetworkNodes[] --output text" ]] || exit 2
exec python3 -c 'import json, sys
found = [i for i in json.load(open(sys.argv[1]))["Instances"] if i["InstanceId"] == sys.argv[2]]
print("\\t".join(n for i in found for n in i["NetworkNodes"]))' {answer} "$4"
"""


def run_program(cluster: SlurmCluster, tmp_path: Path, name: str, instance: str,
                aws: str = "", mode: str = "", host: str = "") -> subprocess.CompletedProcess:
    """network-features for node `name` (instance `instance`), as its unit runs it (`mode`
    "--restore": as its restore timer does, "--clear": as the boot does before slurmd); `aws`:
    another AWS CLI stand-in; `host`: what `hostname -s` says (default the node's name)."""
    root, bin_dir = tmp_path / name / "root", tmp_path / name / "bin"
    install(root)
    bin_dir.mkdir(parents=True, exist_ok=True)
    for command, text in (("curl", CURL.format(instance=instance)), ("hostname", HOSTNAME.format(name=host or name)),
                          ("aws", aws or AWS.format(answer=ANSWER))):
        (bin_dir / command).write_text(text)
        (bin_dir / command).chmod(0o755)
    # the stand-ins, then the cluster's commands (SLURM_BIN comes after PATH under test)
    env = {**cluster.env, "FMCLUSTER_ROOT": str(root), "PATH": f"{bin_dir}:{cluster.bin}:{os.environ['PATH']}"}
    argv = [mode, str(cluster.bin)] if mode else [str(cluster.bin), "2", "1"]
    return subprocess.run(["bash", str(PROGRAM), *argv], env=env, capture_output=True, text=True, timeout=60)


def install(root: Path) -> None:
    """The node's FMCLUSTER_LIB under `root` (FMCLUSTER_ROOT): the slurm-node.sh the program sources
    from there, as the node program installs it beside the program; and /run."""
    (root / "run").mkdir(parents=True, exist_ok=True)
    lib = root / FMCLUSTER_LIB.lstrip("/")
    lib.mkdir(parents=True, exist_ok=True)
    shutil.copy(PROGRAM.parent / "slurm-node.sh", lib / "slurm-node.sh")


def publish(cluster: SlurmCluster, tmp_path: Path) -> None:
    """Run network-features for each node, as its unit would once slurmd has registered."""
    instances = [i["InstanceId"] for i in json.loads(ANSWER.read_text())["Instances"]]
    for name, instance in zip(cluster.names, instances, strict=True):
        result = run_program(cluster, tmp_path, name, instance)
        assert result.returncode == 0, result.stderr


def placement_sh(tmp_path: Path) -> Path:
    """The p5 PCS example's placement.sh (it asks by features on AWS PCS)."""
    model = cluster_model.resolve(loader.load(EXAMPLES_DIR / "p5-pcs.yaml").spec)
    path = tmp_path / "placement.sh"
    path.write_text(placement.placement_sh(model))
    path.chmod(0o755)
    return path


def ask(cluster: SlurmCluster, script: Path, nodes: int) -> str:
    result = subprocess.run(["bash", str(script), str(nodes), "gpu"], capture_output=True, text=True, timeout=30,
                            env={**cluster.env, "PATH": f"{cluster.bin}:{cluster.env['PATH']}"})
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def expand(cluster: SlurmCluster, nodelist: str) -> list[str]:
    return cluster.run("scontrol", "show", "hostnames", nodelist).stdout.split()


@pytest.fixture
def release():
    """The newest release AWS PCS runs, unless a test is parametrized with EVERY_RELEASE."""
    return PCS_RELEASES[-1]


@pytest.fixture
def cluster(tmp_path, release):
    require_slurm(release)
    with SlurmCluster(tmp_path / "slurm", nodes=5, partitions={"gpu": [f"node{i}" for i in range(1, 6)]},
                      release=release) as c:
        publish(c, tmp_path)
        yield c


EVERY_RELEASE = pytest.mark.parametrize("release", PCS_RELEASES, ids=release_id)


def test_each_node_publishes_its_network_nodes(cluster):
    answer = {i["InstanceId"]: i["NetworkNodes"] for i in json.loads(ANSWER.read_text())["Instances"]}
    for name, nodes in zip(cluster.names, answer.values(), strict=True):
        node = cluster.node(name)
        want = ",".join(f"nn{layer}-{n.removeprefix('nn-')}" for layer, n in enumerate(nodes, 1))
        assert node["AvailableFeatures"] == node["ActiveFeatures"] == want


def test_jobs_land_under_one_network_node(cluster, tmp_path):
    script = placement_sh(tmp_path)
    # 2 nodes: both layer-3 network nodes that hold 2 (Slurm's matching OR picks one)
    two = ask(cluster, script, 2)
    assert two == f"--constraint=[{X}|{Y}]"
    busy = cluster.sbatch("#!/bin/sh\nsleep 120\n", "-N1", "--exclusive", "-w", "node1")
    cluster.wait_job(busy, until=lambda job: job.get("JobState") == "RUNNING")
    try:
        job = cluster.wait_job(cluster.sbatch("#!/bin/sh\ntrue\n", "-N2", "--exclusive", two))
        assert job["JobState"] == "COMPLETED", job
        assert expand(cluster, job["NodeList"]) == ["node3", "node4"]  # under Y: node1 is busy, X has one free
        # 3 nodes: no layer-3 network node holds 3; the layer-2 one over nodes 1-4 does
        three = ask(cluster, script, 3)
        assert three == f"--constraint={LAYER2}"
        job = cluster.wait_job(cluster.sbatch("#!/bin/sh\ntrue\n", "-N3", "--exclusive", three))
        assert job["JobState"] == "COMPLETED", job
        assert expand(cluster, job["NodeList"]) == ["node2", "node3", "node4"]  # never node5
    finally:
        cluster.run("scancel", busy, check=False)
    assert ask(cluster, script, 5) == f"--constraint={LAYER1}"
    assert ask(cluster, script, 6) == ""  # more than the partition holds: no constraint


def test_nodes_that_cannot_take_jobs_do_not_count(cluster, tmp_path):
    script = placement_sh(tmp_path)
    cluster.run("scontrol", "update", "nodename=node3", "state=drain", "reason=test")
    assert ask(cluster, script, 2) == f"--constraint={X}"
    assert re.fullmatch(r"--constraint=nn2-\S+", ask(cluster, script, 3))


@EVERY_RELEASE
def test_features_slurmctld_forgets_are_set_again_from_the_cache(cluster, tmp_path):
    """`scontrol reconfigure` drops features set with scontrol (scontrol(1), AvailableFeatures); the
    timer's next run sets them again from /run's cache, without asking EC2 (its stand-in now fails)."""
    before = cluster.node("node1")["AvailableFeatures"]
    cluster.run("scontrol", "reconfigure")
    lost = cluster.node("node1")["AvailableFeatures"]
    assert lost != before
    result = run_program(cluster, tmp_path, "node1", "i-0a1b2c3d4e5f60001", aws="#!/bin/sh\nexit 1\n")
    assert result.returncode == 0, result.stderr
    assert cluster.node("node1")["AvailableFeatures"] == cluster.node("node1")["ActiveFeatures"] == before
    # and a run while Slurm still has them changes nothing (one scontrol show, no update)
    again = run_program(cluster, tmp_path, "node1", "i-0a1b2c3d4e5f60001", aws="#!/bin/sh\nexit 1\n")
    assert again.returncode == 0 and "already set" in again.stderr


def test_features_come_back_when_slurmctld_comes_back(cluster, tmp_path):
    """A restarted slurmctld (without -R) has forgotten every node's features; the restore timer's
    next run (every few seconds) sets them again from /run's cache as soon as slurmctld answers,
    without EC2; while slurmctld is down it changes nothing and fails no unit for good."""
    before = cluster.node("node2")["AvailableFeatures"]
    with cluster.controller_down():
        down = run_program(cluster, tmp_path, "node2", "i-0a1b2c3d4e5f60002", aws="#!/bin/sh\nexit 1\n",
                           mode="--restore")
        assert down.returncode != 0  # no answer: tried again at the timer's next run
    assert cluster.node("node2")["AvailableFeatures"] != before  # forgotten
    result = run_program(cluster, tmp_path, "node2", "i-0a1b2c3d4e5f60002", aws="#!/bin/sh\nexit 1\n",
                         mode="--restore")
    assert result.returncode == 0, result.stderr
    assert cluster.node("node2")["AvailableFeatures"] == cluster.node("node2")["ActiveFeatures"] == before


def test_a_new_instance_clears_the_features_of_the_one_before(cluster, tmp_path):
    """The node keeps an earlier instance's features in slurmctld; `--clear` (after each start of
    slurmd) removes them and keeps the others."""
    cluster.run("scontrol", "update", "nodename=node4", f"AvailableFeatures=gpu,{LAYER1},{LAYER2},{Y}",
                f"ActiveFeatures=gpu,{LAYER1},{LAYER2},{Y}")
    for name in ("node4", "node5"):  # a new instance: a new boot, its /run empty
        shutil.rmtree(tmp_path / name / "root" / "run")
    result = run_program(cluster, tmp_path, "node4", "i-0a1b2c3d4e5f60009", mode="--clear")
    assert result.returncode == 0, result.stderr
    assert cluster.node("node4")["AvailableFeatures"] == cluster.node("node4")["ActiveFeatures"] == "gpu"
    # and with nothing but network features: none left
    run_program(cluster, tmp_path, "node5", "i-0a1b2c3d4e5f60005", mode="--clear")
    assert cluster.node("node5")["AvailableFeatures"] == "(null)"


def test_the_node_is_found_by_its_host_name(cluster, tmp_path):
    """A host whose name is no Slurm node's (AWS PCS's ip-... hosts): the node whose NodeHostName is
    the host (here every node's is localhost: the first, node1)."""
    cluster.run("scontrol", "update", "nodename=node1", "AvailableFeatures=gpu", "ActiveFeatures=gpu")
    result = run_program(cluster, tmp_path, "node1", "i-0a1b2c3d4e5f60001", host="localhost")
    assert result.returncode == 0, result.stderr
    assert cluster.node("node1")["AvailableFeatures"].startswith("gpu,nn1-")


def on_node(cluster: SlurmCluster, tmp_path: Path, node: str, slurmd: bool) -> subprocess.CompletedProcess:
    """`network-features --clear` on node `node` of the cluster as it runs there, with PCS's Slurm
    commands (node_bin) and slurm.conf (SLURM_CONF: a node that has it, more than configless AWS
    PCS gives before slurmd): `slurmd` False, in a view of the root where no slurmd runs yet (the
    lifecycle script before slurmd: no SACK socket, neither slurmd's nor slurmctld's, whose /run
    is the controller's); True, in the view of the node's slurmd (its unit's ExecStartPost=,
    where slurmd serves /run/slurm/sack.socket)."""
    root, bin_dir = tmp_path / node / "root", tmp_path / node / "bin"
    install(root)
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "hostname").write_text(HOSTNAME.format(name=node))
    (bin_dir / "hostname").chmod(0o755)
    command = ["/usr/bin/env", f"SLURM_CONF={cluster.conf}", f"FMCLUSTER_ROOT={root}", f"PATH={bin_dir}:/usr/bin:/bin",
               "/usr/bin/timeout", "30", "bash", str(PROGRAM), "--clear", str(cluster.node_bin), "2", "1"]
    if slurmd:
        (pid,) = [p.pid for p in cluster.processes if "-N" in p.args and p.args[p.args.index("-N") + 1] == node]
        argv = slurm_roots.joined(pid, command)
    else:
        argv = slurm_roots.argv(cluster.lower, command, binds=(str(cluster.dir), str(tmp_path), str(PROGRAM.parent)))
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


@EVERY_RELEASE
def test_the_clear_works_once_slurmd_runs_and_not_before(release, tmp_path):
    """On a node of AWS PCS's Slurm (auth/slurm, a client's credential from a local SACK socket),
    `--clear` before slurmd (the NodeBootstrapped lifecycle script of an earlier release) cannot
    reach Slurm at all, and an earlier instance's features stay; run as slurmd's unit runs it,
    once slurmd runs, it removes them and keeps the others."""
    require_slurm(release)
    old = f"gpu,{LAYER1},{LAYER2},{Y}"
    with SlurmCluster(tmp_path / "slurm", nodes=2, partitions={"gpu": ["node1", "node2"]}, release=release,
                      shared=[str(tmp_path), str(PROGRAM.parent)]) as c:
        c.run("scontrol", "update", "nodename=node2", f"AvailableFeatures={old}", f"ActiveFeatures={old}")
        before = on_node(c, tmp_path / "before", "node2", slurmd=False)
        assert before.returncode != 0
        assert "sack" in before.stderr.lower(), before.stderr
        assert c.node("node2")["AvailableFeatures"] == old
        after = on_node(c, tmp_path / "after", "node2", slurmd=True)
        assert after.returncode == 0, after.stderr + c.logs()
        assert c.node("node2")["AvailableFeatures"] == c.node("node2")["ActiveFeatures"] == "gpu"
