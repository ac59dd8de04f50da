"""The end of a Capacity Block on a real Slurm (tests/support/slurm_cluster.py: Debian's slurmctld
and two slurmd on localhost, one partition): each node runs fmcluster's capacity-end program
(fmcluster/node/scripts/boot/programs/capacity-end.sh) with the real scontrol, squeue and scancel;
stand-ins only for the instance metadata service, `hostname` and the AWS CLI, which answers
DescribeCapacityReservations from a file in the API's shape and applies the program's --query
with JMESPath as the CLI does (text output).

The clock: slurmctld reads the real one, and a reservation's times are absolute, so the program is
given Slurm's own time (FMCLUSTER_NOW: a job's SubmitTime, as slurmctld wrote it) and the block's
end is set from it; no test reads the clock itself, and nothing waits for a time to come.

The module shares one cluster (its tests run in order: the block is reserved, a job is signalled
and the nodes drained, then the block is extended)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from fmcluster.facts.node import FMCLUSTER_LIB
from tests.support import node_end
from tests.support.node_end import epoch, field
from tests.support.slurm_cluster import RELEASES, SlurmCluster, release_id, require_slurm

BLOCK = "cr-0123456789abcdef0"
NAME = f"fmcluster-end-{BLOCK}"
TERMINATION, LEAD = 30, 10  # minutes: EC2 terminates from 30 minutes before the end; the signal 10 before that
GRACE = 240  # seconds: a job's first node has this long to signal it before another of its nodes does


def settings(cluster: SlurmCluster, signal: str, block: str = BLOCK) -> str:
    return (f"SLURM_BIN={cluster.bin}\nEND_SOURCE=capacity-block\nRESERVATION_ID={block}\nTRAINING_PLAN_ARN=\n"
            f"PLAN_INSTANCE_TYPE=ml.p5.48xlarge\nPARTITION=debug\nTERMINATION_MINUTES={TERMINATION}\n"
            f"SIGNAL_MINUTES={LEAD}\nSIGNAL={signal}\nREAD_MINUTES=30\nNEAR_MINUTES=10\n"
            f"GRACE_SECONDS={GRACE}\nSTATE_DIR=/var/lib/fmcluster/capacity-end\nFMCLUSTER_LIB={FMCLUSTER_LIB}\n")


def block(tmp_path: Path, end: int, **others: int) -> None:
    """EC2's answer: the block, active, ending at `end` (seconds since the epoch); and `others`
    (block id -> end) beside it."""
    node_end.answer(tmp_path, {"CapacityReservations": [{
        "CapacityReservationId": block_id, "InstanceType": "p5.48xlarge", "AvailabilityZoneId": "use1-az6",
        "TotalInstanceCount": 2, "AvailableInstanceCount": 0, "State": "active", "EndDateType": "limited",
        "ReservationType": "capacity-block", "StartDate": "2025-01-01T11:30:00+00:00",
        "EndDate": datetime.fromtimestamp(ends, timezone.utc).isoformat()}
        for block_id, ends in {BLOCK: end, **others}.items()]})


def run(cluster: SlurmCluster, tmp_path: Path, node: str, now: int, signal: str = "USR1", block_id: str = BLOCK):
    """capacity-end on node `node` (node1 or node2) at `now`, as its unit runs it, for the block `block_id`."""
    return node_end.run(cluster, tmp_path, "capacity-end.sh", node, settings(cluster, signal, block_id), now=now)


def reservation(cluster: SlurmCluster) -> str:
    return node_end.reservation(cluster, NAME)


@pytest.fixture(params=RELEASES, ids=release_id)
def world(request, tmp_path_factory):
    """The cluster (the suite's Slurm, which refuses Nodes+= and takes the program's other way,
    and each AWS PCS release, laid out as PCS lays it out), a job that traps SIGUSR1 in its step
    running on node1, Slurm's time at its submission, and the block ending 50 minutes after
    (reclaimed from 20, the signal from 10)."""
    require_slurm(request.param)
    tmp_path = tmp_path_factory.mktemp("capacity-end")
    # the backfill scheduler starts the job that ends before the block's reservation, the first
    # pending one being held by it: every second, not Slurm's default of 30 (slurm.conf, bf_interval)
    with SlurmCluster(tmp_path / "slurm", nodes=2, release=request.param,
                      extra=["SchedulerParameters=bf_interval=1"]) as cluster:
        job, now, marker = node_end.trapping_job(cluster)
        block(tmp_path, now + 50 * 60)
        yield {"cluster": cluster, "tmp": tmp_path, "job": job, "now": now, "marker": marker,
               "release": request.param}
        cluster.run("scancel", job, check=False)


def nothing_starts_that_the_end_would_cut(world):
    """The first node that runs the program reserves every node of the group's partition: node2,
    which has not run it (not up yet, powered down, its program failing), is in the reservation too,
    and adds nothing when it runs."""
    cluster, tmp_path, now = world["cluster"], world["tmp"], world["now"]
    first = run(cluster, tmp_path, "node1", now)
    assert first.returncode == 0, first.stderr + cluster.logs()
    assert field(reservation(cluster), "Nodes") == "node[1-2]"
    assert "nothing starts on node[1-2] that would run past" in first.stderr, first.stderr
    second = run(cluster, tmp_path, "node2", now)
    assert second.returncode == 0 and second.stderr == "", second.stderr
    line = reservation(cluster)
    assert field(line, "Nodes") == "node[1-2]"
    assert epoch(field(line, "StartTime")) == now + 20 * 60 and epoch(field(line, "EndTime")) == now + 50 * 60
    assert "MAINT" in field(line, "Flags") and "IGNORE_JOBS" in field(line, "Flags")
    assert cluster.job(world["job"])["JobState"] == "RUNNING"  # made over it: it goes on
    long = cluster.sbatch("#!/bin/sh\ntrue\n", "--time=60", "-w", "node2")
    short = cluster.sbatch("#!/bin/sh\ntrue\n", "--time=5", "-w", "node2")
    assert cluster.wait_job(short)["JobState"] == "COMPLETED"  # it ends before the block is reclaimed
    held = cluster.job(long)
    assert held["JobState"] == "PENDING", held  # 60 minutes would reach into the reservation
    assert held["Reason"] == "ReqNodeNotAvail,_Reserved_for_maintenance", held  # held by the block's reservation
    cluster.run("scancel", long)
    # not drained, nothing else running; Slurm 24.11 and later flag a node the backfill scheduler had
    # planned for the cancelled job PLANNED until its next pass
    assert {n: cluster.node(n)["State"].removesuffix("+PLANNED") for n in ("node1", "node2")} == \
        {"node1": "MIXED", "node2": "IDLE"}


def running_twice_changes_nothing(world):
    cluster, tmp_path, now = world["cluster"], world["tmp"], world["now"]
    before = reservation(cluster)
    result = run(cluster, tmp_path, "node2", now + 60)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert reservation(cluster) == before
    assert node_end.aws_calls(tmp_path) == ["ec2 describe-capacity-reservations"] * 3  # near the signal: each run


def jobs_are_signalled_and_the_nodes_drained_before_the_end(world):
    cluster, tmp_path, now = world["cluster"], world["tmp"], world["now"]
    at = now + 11 * 60  # past the signal's time: the block is reclaimed from now + 20 minutes
    for node in ("node1", "node2"):
        result = run(cluster, tmp_path, node, at)
        assert result.returncode == 0, result.stderr
    # its step trapped SIGUSR1 and ended
    node_end.assert_signalled_and_drained(cluster, world["job"], world["marker"], "fmcluster-capacity-end: ")
    # again: no signal twice, no new drain, nothing said
    again = run(cluster, tmp_path, "node1", at + 60)
    assert again.returncode == 0 and again.stderr == "", again.stderr


def an_extended_block_moves_the_reservation_and_returns_the_nodes(world):
    cluster, tmp_path, now = world["cluster"], world["tmp"], world["now"]
    block(tmp_path, now + 50 * 60 + 3600)  # `fmcluster capacity extend`: an hour more
    at = now + 12 * 60
    for node in ("node1", "node2"):
        result = run(cluster, tmp_path, node, at)
        assert result.returncode == 0, result.stderr
    line = reservation(cluster)
    assert epoch(field(line, "StartTime")) == now + 80 * 60 and epoch(field(line, "EndTime")) == now + 110 * 60
    assert field(line, "Nodes") == "node[1-2]"
    for node in ("node1", "node2"):  # drained by the program: back in service
        info = cluster.node(node)
        assert "DRAIN" not in info["State"], info
        # Slurm 24.11 keeps a resumed node's last reason, whatever the update says (resume with an
        # empty reason, undrain); this machine's Slurm and 26.05 clear it
        if world["release"] != "24.11":
            assert "Reason" not in info, info


def an_end_ec2_does_not_give_drains_nothing(world):
    """EC2's EndDate empty or odd, and no earlier answer kept (a node new to the block): no end is
    read (`date -d ""` would be today's midnight, long past: every node drained at once)."""
    cluster, now = world["cluster"], world["now"]
    for answer in ("", "None", "tomorrow"):
        fresh = world["tmp"] / f"fresh-{answer or 'empty'}"
        fresh.mkdir()
        block(fresh, now)
        data = json.loads((fresh / "answer.json").read_text())
        data["CapacityReservations"][0]["EndDate"] = answer
        (fresh / "answer.json").write_text(json.dumps(data))
        result = run(cluster, fresh, "node1", now + 12 * 60)
        assert result.returncode == 1 and "no end for the Capacity Block" in result.stderr, result.stderr
        info = cluster.node("node1")
        assert "DRAIN" not in info["State"], (answer, info)


def a_job_whose_first_node_runs_no_program_is_signalled_by_another(world):
    """A job of both nodes; node1, its first node in the reservation, runs no program (its instance
    gone, slurmd down or its program failing). At the signal's time node2 drains and leaves the job to
    node1; GRACE later, node2 (drained for this end: it has run past the signal) signals it, once, and
    records it in the job's AdminComment; node1, back, reads that and does not signal it again. The
    block, extended above, ends at now + 110 minutes: the signal at now + 70."""
    cluster, tmp_path, now = world["cluster"], world["tmp"], world["now"]
    marker = cluster.dir / "signals"
    script = (f"#!/bin/bash\n{cluster.node_bin}/srun bash -c 'trap \"echo USR1 >>{marker}\" USR1; "
              "while :; do sleep 0.2; done'\n")
    job = cluster.sbatch(script, "-N2", "--ntasks-per-node=1", "--time=60")  # ends before the reclaim
    cluster.wait_job(job, until=lambda j: j.get("JobState") == "RUNNING")
    signal_at = now + 70 * 60

    def signals() -> list[str]:
        return marker.read_text().splitlines() if marker.exists() else []

    waiting = run(cluster, tmp_path, "node2", signal_at + 60)
    assert waiting.returncode == 0 and "node2 drained" in waiting.stderr, waiting.stderr
    assert "signalled" not in waiting.stderr and signals() == []
    backup = run(cluster, tmp_path, "node2", signal_at + GRACE)
    assert backup.returncode == 0 and f"job {job} signalled (USR1)" in backup.stderr, backup.stderr
    cluster.wait_job(job, states=(), until=lambda j: len(signals()) >= 2)
    assert signals() == ["USR1", "USR1"]  # once, to each of its two tasks
    assert cluster.job(job)["AdminComment"] == f"fmcluster-capacity-end:{BLOCK}@{now + 110 * 60} USR1 by node2"
    back = run(cluster, tmp_path, "node1", signal_at + GRACE + 60)
    assert back.returncode == 0 and "node1 drained" in back.stderr and "signalled" not in back.stderr, back.stderr
    assert signals() == ["USR1", "USR1"] and cluster.job(job)["JobState"] == "RUNNING"
    cluster.run("scancel", job)
    cluster.wait_job(job)


def a_node_of_another_block_leaves_this_ones_reservation(world):
    """node2 runs with another block (reservation_id changed: a new instance under its Slurm name):
    it leaves this block's reservation and makes the other's, and is back in service (its drain was
    for this block); node1 does not take it back into this block's. node2 then given a block EC2 does
    not answer for: the ends kept for the other blocks are not its end, and nothing is done."""
    cluster, tmp_path, now = world["cluster"], world["tmp"], world["now"]
    other, unknown = "cr-0fedcba9876543210", "cr-0aaaaaaaaaaaaaaaa"
    block(tmp_path, now + 110 * 60, **{other: now + 10 * 3600})
    moved = run(cluster, tmp_path, "node2", now + 72 * 60, block_id=other)
    assert moved.returncode == 0, moved.stderr
    assert f"node2 left the reservation {NAME}" in moved.stderr and "node2 back in service" in moved.stderr
    assert field(reservation(cluster), "Nodes") == "node1"
    assert field(node_end.reservation(cluster, f"fmcluster-end-{other}"), "Nodes") == "node2"
    stays = run(cluster, tmp_path, "node1", now + 73 * 60)
    assert stays.returncode == 0 and stays.stderr == "", stays.stderr
    assert field(reservation(cluster), "Nodes") == "node1"
    lost = run(cluster, tmp_path, "node2", now + 75 * 60, block_id=unknown)
    assert lost.returncode == 1 and "no end for the Capacity Block" in lost.stderr, lost.stderr
    assert "DRAIN" not in cluster.node("node2")["State"]
    assert unknown not in cluster.run("scontrol", "-o", "show", "reservation").stdout
    assert field(node_end.reservation(cluster, f"fmcluster-end-{other}"), "Nodes") == "node2"


def test_the_end_of_a_block_on_slurm(world):
    """The steps of one block's end, in order, on one cluster: each starts where the one before
    left Slurm (a test each would be split between the run's workers, each with a cluster of its
    own, and start from nothing)."""
    nothing_starts_that_the_end_would_cut(world)
    running_twice_changes_nothing(world)
    jobs_are_signalled_and_the_nodes_drained_before_the_end(world)
    an_extended_block_moves_the_reservation_and_returns_the_nodes(world)
    an_end_ec2_does_not_give_drains_nothing(world)
    a_job_whose_first_node_runs_no_program_is_signalled_by_another(world)
    a_node_of_another_block_leaves_this_ones_reservation(world)
