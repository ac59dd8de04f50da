"""A spot interruption notice on a real Slurm of AWS PCS's releases (tests/support/slurm_cluster.py:
two slurmd on localhost): each node runs fmcluster's interruption program
(fmcluster/node/scripts/boot/programs/interruption.sh) with the real scontrol, sinfo, squeue and
scancel; stand-ins only for the instance metadata service (which gives the notice) and `hostname`
(tests/support/node_end.py). The program looks a set number of times (FMCLUSTER_POLLS) and `sleep`
is a stand-in that returns at once: nothing waits for a time to come.

One scenario on one cluster, its steps in order: a job of both nodes whose tasks trap SIGUSR1 and
go on; no notice; a drain of an earlier instance returned to service (and another's drain kept);
the notice on both nodes (each drained, the job signalled once); nothing new starts there; a
signal Slurm could not be asked for is sent at the next look; an instance that hibernated and
resumed is returned to service."""

from __future__ import annotations

import pytest

from fmcluster.facts.node import FMCLUSTER_LIB
from tests.support import node_end
from tests.support.slurm_cluster import PCS_RELEASES, SlurmCluster, release_id, require_slurm

NOTICE = '{"action": "terminate", "time": "2026-12-03T11:32:00Z"}'
REASON = "fmcluster-interruption: spot terminate at 2026-12-03T11:32:00Z"
LATER = '{"action": "terminate", "time": "2026-12-03T13:02:00Z"}'
HIBERNATE = '{"action": "hibernate", "time": "2026-12-03T14:00:00Z"}'
# sleep records its seconds and returns at once; after its Nth wait it runs the file after-N beside
# it, where there is one (the world changing while the program waits)
SLEEP = ('#!/bin/sh\necho "$1" >>"${0%/*}/sleeps"\nn=$(wc -l <"${0%/*}/sleeps")\n'
         '[ ! -x "${0%/*}/after-$n" ] || "${0%/*}/after-$n"\n')


def run(world, node: str, polls: int = 1):
    """interruption on `node`, looking `polls` times."""
    cluster, tmp_path = world["cluster"], world["tmp"]
    bin_dir = tmp_path / node / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "sleep").write_text(SLEEP)
    (bin_dir / "sleep").chmod(0o755)
    settings = (f"SLURM_BIN={cluster.bin}\nSIGNAL=USR1\nPOLL_SECONDS=2\nBACKOFF_SECONDS=60\nTOKEN_SECONDS=21600\n"
                f"STATE_DIR=/var/lib/fmcluster/interruption\nFMCLUSTER_LIB={FMCLUSTER_LIB}\n")
    return node_end.run(cluster, tmp_path, "interruption.sh", node, settings, env={"FMCLUSTER_POLLS": str(polls)})


def signals(world) -> list[str]:
    marker = world["marker"]
    return marker.read_text().splitlines() if marker.exists() else []


@pytest.fixture(params=PCS_RELEASES, ids=release_id)
def world(request, tmp_path_factory):
    """The cluster and a job of both nodes whose every task writes a line to the marker on each
    SIGUSR1 and goes on."""
    require_slurm(request.param)
    tmp_path = tmp_path_factory.mktemp("interruption")
    with SlurmCluster(tmp_path / "slurm", nodes=2, release=request.param) as cluster:
        marker = cluster.dir / "signalled"
        script = (f"#!/bin/bash\n{cluster.node_bin}/srun bash -c 'trap \"echo USR1 >>{marker}\" USR1; "
                  "while :; do sleep 0.2; done'\n")
        job = cluster.sbatch(script, "-N2", "--ntasks-per-node=1")
        cluster.wait_job(job, until=lambda j: j.get("JobState") == "RUNNING")
        yield {"cluster": cluster, "tmp": tmp_path, "job": job, "marker": marker}
        cluster.run("scancel", job, check=False)


def without_a_notice_nothing_changes(world):
    cluster = world["cluster"]
    for node in ("node1", "node2"):
        result = run(world, node, polls=3)
        assert result.returncode == 0 and result.stderr == "", result.stderr
        assert "DRAIN" not in cluster.node(node)["State"]
        # IMDSv2: one token for every look, each look one request, no request refused
        requests = (world["tmp"] / node / "imds" / "requests.log").read_text().splitlines()
        assert requests == ["PUT api/token"] + ["GET meta-data/spot/instance-action"] * 3, requests
        assert (world["tmp"] / node / "bin" / "sleeps").read_text().split() == ["2", "2"]
    assert signals(world) == []


def a_drain_of_an_earlier_instance_is_lifted_and_anothers_kept(world):
    """node2 drained by this program on the instance it had before (AWS PCS gave the node a new
    one); node1 drained by a person."""
    cluster = world["cluster"]
    cluster.run("scontrol", "update", "nodename=node2", "state=drain", f"reason={REASON} [i-0aaaaaaaaaaaaaaaa]")
    cluster.run("scontrol", "update", "nodename=node1", "state=drain", "reason=maintenance")
    for node in ("node1", "node2"):
        assert run(world, node).returncode == 0
    assert "DRAIN" not in cluster.node("node2")["State"], cluster.node("node2")
    assert "DRAIN" in cluster.node("node1")["State"] and cluster.node("node1")["Reason"].startswith("maintenance")
    cluster.run("scontrol", "update", "nodename=node1", "state=resume")


def a_notice_drains_each_node_and_signals_the_job_once(world):
    cluster = world["cluster"]
    for node in ("node1", "node2"):
        (node_end.metadata(world["tmp"], node) / "spot").mkdir(exist_ok=True)
        (node_end.metadata(world["tmp"], node) / "spot" / "instance-action").write_text(NOTICE)
    said = {}
    for node in ("node1", "node2"):
        result = run(world, node, polls=2)
        assert result.returncode == 0, result.stderr + cluster.logs()
        said[node] = result.stderr
        info = cluster.node(node)
        assert "DRAIN" in info["State"], info
        assert info["Reason"].startswith(f"{REASON} [i-0a1b2c3d4e5f6000{node[-1]}]"), info
    # one signal, by node1 (the first of the job's nodes drained for it), to each of its two tasks,
    # recorded in the job's AdminComment for every node to read
    assert f"job {world['job']} signalled (USR1)" in said["node1"] and "signalled" not in said["node2"], said
    cluster.wait_job(world["job"], until=lambda j: len(signals(world)) >= 2)
    assert signals(world) == ["USR1", "USR1"]
    assert cluster.job(world["job"])["AdminComment"] == "fmcluster-interruption USR1 by node1"
    assert cluster.job(world["job"])["JobState"] == "RUNNING"  # it traps the signal and goes on
    # looked at again (a new process: the service restarted): no second signal, no new drain
    again = run(world, "node1", polls=2)
    assert again.returncode == 0 and "signalled" not in again.stderr and "drained" not in again.stderr, again.stderr
    assert signals(world) == ["USR1", "USR1"]


def nothing_new_starts_on_the_nodes(world):
    cluster = world["cluster"]
    cluster.run("scancel", world["job"])
    cluster.wait_job(world["job"])
    new = cluster.sbatch("#!/bin/sh\ntrue\n", "-w", "node1")
    held = cluster.wait_job(new, states=(), until=lambda j: "ReqNodeNotAvail" in j.get("Reason", ""))
    assert held["JobState"] == "PENDING", held  # node1 is not available: drained
    assert "DRAIN" in cluster.node("node1")["State"]
    cluster.run("scancel", new)


def a_signal_slurm_could_not_be_asked_for_is_sent_at_the_next_look(world):
    """A new job on node1 and a new notice for it; squeue fails once (slurmctld busy, as when many
    spot nodes go at once): the node is drained, and the job is signalled at the next look."""
    cluster, tmp = world["cluster"], world["tmp"]
    for node in ("node1", "node2"):
        (node_end.metadata(tmp, node) / "spot" / "instance-action").unlink()
        cluster.run("scontrol", "update", f"nodename={node}", "state=resume")
    job, _, marker = node_end.trapping_job(cluster)
    (node_end.metadata(tmp, "node1") / "spot" / "instance-action").write_text(LATER)
    squeue = node_end.bin_dir(tmp, "node1") / "squeue"
    squeue.write_text(f'#!/bin/sh\n[ -e "$0.failed" ] || {{ touch "$0.failed"; exit 1; }}\n'
                      f'exec {cluster.bin}/squeue "$@"\n')
    squeue.chmod(0o755)
    try:
        result = run(world, "node1", polls=2)
    finally:
        squeue.unlink()
    assert "node1 drained" in result.stderr and "trying again" in result.stderr, result.stderr
    assert f"job {job} signalled (USR1)" in result.stderr, result.stderr
    node_end.assert_signalled_and_drained(cluster, job, marker, "fmcluster-interruption: spot terminate at "
                                          "2026-12-03T13:02:00Z", nodes=("node1",))


def after(world, node: str, wait: int, command: str) -> None:
    """`command`, run by `node`'s stand-in sleep after its `wait`th wait of the next run."""
    path = node_end.bin_dir(world["tmp"], node) / f"after-{wait}"
    path.write_text(f"#!/bin/sh\n{command}\n")
    path.chmod(0o755)


def an_instance_that_hibernated_and_resumed_returns_to_service(world):
    """node2, in service, its program running: no notice, then a hibernation's (EC2 hibernates the
    instance at once), then none again: the instance resumed, and so did the program, which drained
    the node; the node is returned to service."""
    cluster, tmp = world["cluster"], world["tmp"]
    notice = node_end.metadata(tmp, "node2") / "spot" / "instance-action"
    node_end.bin_dir(tmp, "node2").joinpath("sleeps").unlink(missing_ok=True)
    after(world, "node2", 1, f"echo '{HIBERNATE}' >{notice}")
    after(world, "node2", 2, f"rm {notice}")
    result = run(world, "node2", polls=3)
    assert result.returncode == 0, result.stderr
    assert "node2 drained" in result.stderr and "node2 back in service" in result.stderr, result.stderr
    assert "DRAIN" not in cluster.node("node2")["State"], cluster.node("node2")


def test_a_spot_interruption_notice_on_slurm(world):
    without_a_notice_nothing_changes(world)
    a_drain_of_an_earlier_instance_is_lifted_and_anothers_kept(world)
    a_notice_drains_each_node_and_signals_the_job_once(world)
    nothing_new_starts_on_the_nodes(world)
    a_signal_slurm_could_not_be_asked_for_is_sent_at_the_next_look(world)
    an_instance_that_hibernated_and_resumed_returns_to_service(world)
