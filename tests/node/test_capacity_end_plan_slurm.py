"""The end of a SageMaker HyperPod training plan on a real Slurm of HyperPod's release
(fmcluster.facts.controlplanes: 24.11, here as tests/support/slurm_cluster.py runs it, with two
slurmd on localhost): each node runs fmcluster's capacity-end program
(fmcluster/node/scripts/boot/programs/capacity-end.sh, END_SOURCE=training-plan) with the real
scontrol, squeue and scancel; stand-ins only for `hostname` and the AWS CLI, which answers
DescribeTrainingPlan from a file in the API's shape (tests/support/node_end.py).

The clock: slurmctld reads the real one, and a reservation's times are absolute, so the program is
given Slurm's own time (FMCLUSTER_NOW: a job's SubmitTime) and the plan's times are set from it.
One scenario on one cluster, its steps in order (each starts where the one before left Slurm)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from fmcluster.facts import controlplanes
from fmcluster.facts.node import FMCLUSTER_LIB
from tests.support import node_end
from tests.support.node_end import epoch, field
from tests.support.slurm_cluster import PCS_RELEASES, SlurmCluster, release_id, require_slurm

PLAN = "b200-pretrain"
ARN = f"arn:aws:sagemaker:us-east-1:111122223333:training-plan/{PLAN}"
TYPE = "ml.p6-b200.48xlarge"
NAME = f"fmcluster-end-{PLAN}-p6-b200.48xlarge"  # one reservation per plan and instance type
TERMINATION, LEAD = 30, 10  # minutes: SageMaker terminates from 30 minutes before the end; the signal 10 before
# HyperPod's Slurm releases that this machine can run (as AWS PCS lays them out: the commands are the same)
RELEASES = [r for r in controlplanes.get("hyperpod-slurm").versions if r in PCS_RELEASES]


Time = int | float | str


def iso(seconds: Time) -> float | str:
    """A time in seconds since the epoch (an int) as the AWS CLI v2 prints it (ISO 8601); a float as
    the CLI v1 prints it by default (as SageMaker's JSON protocol sends it: seconds since the epoch);
    a string as it is."""
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat() if isinstance(seconds, int) else seconds


def plan(tmp_path: Path, spans: list[tuple[str, Time, Time]], start: Time, end: Time) -> None:
    """SageMaker's answer: the plan, from `start` to `end`, with a reserved capacity per (instance
    type, start, end) of `spans` (times as `iso` takes them)."""
    node_end.answer(tmp_path, {
        "TrainingPlanArn": ARN, "TrainingPlanName": PLAN, "Status": "Active", "StartTime": iso(start),
        "EndTime": iso(end), "TotalInstanceCount": 16, "TargetResources": ["hyperpod-cluster"],
        "ReservedCapacitySummaries": [
            {"ReservedCapacityArn": f"arn:aws:sagemaker:us-east-1:111122223333:reserved-capacity/rc-{i}",
             "InstanceType": kind, "TotalInstanceCount": 16, "Status": "Active", "StartTime": iso(s),
             "EndTime": iso(e)} for i, (kind, s, e) in enumerate(spans)]})


def run(world, node: str, at: int, tmp_path: Path | None = None):
    cluster = world["cluster"]
    settings = (f"SLURM_BIN={cluster.bin}\nEND_SOURCE=training-plan\nRESERVATION_ID=\nTRAINING_PLAN_ARN={ARN}\n"
                f"PLAN_INSTANCE_TYPE={TYPE}\nPARTITION=debug\nTERMINATION_MINUTES={TERMINATION}\n"
                f"SIGNAL_MINUTES={LEAD}\nSIGNAL=USR1\nREAD_MINUTES=30\nNEAR_MINUTES=10\nGRACE_SECONDS=240\n"
                f"STATE_DIR=/var/lib/fmcluster/capacity-end\nFMCLUSTER_LIB={FMCLUSTER_LIB}\n")
    return node_end.run(cluster, tmp_path or world["tmp"], "capacity-end.sh", node, settings, now=at)


@pytest.fixture(params=RELEASES, ids=release_id)
def world(request, tmp_path_factory):
    """The cluster, a job trapping SIGUSR1 on node1, and the plan: a reserved capacity of the nodes'
    type that holds now and ends in 30 minutes, another back to back with it to 50 minutes (the
    instances stay: the end is at 50), one of another type to 5 hours and one of the nodes' type
    after a gap (neither counts)."""
    require_slurm(request.param)
    tmp_path = tmp_path_factory.mktemp("plan-end")
    with SlurmCluster(tmp_path / "slurm", nodes=2, release=request.param,
                      extra=["SchedulerParameters=bf_interval=1"]) as cluster:
        job, now, marker = node_end.trapping_job(cluster)
        # (in no order: SageMaker promises none)
        plan(tmp_path, [(TYPE, now + 30 * 60, now + 50 * 60), ("ml.p5.48xlarge", now - 3600, now + 5 * 3600),
                        (TYPE, now + 2 * 3600, now + 3 * 3600), (TYPE, now - 3600, now + 30 * 60)],
             now - 3600, now + 3 * 3600)
        yield {"cluster": cluster, "tmp": tmp_path, "job": job, "now": now, "marker": marker}
        cluster.run("scancel", job, check=False)


def reserved_until_the_stretch_of_capacity_that_holds_now_ends(world):
    cluster, now = world["cluster"], world["now"]
    for node in ("node1", "node2"):
        result = run(world, node, now)
        assert result.returncode == 0, result.stderr + cluster.logs()
    line = node_end.reservation(cluster, NAME)
    assert field(line, "Nodes") == "node[1-2]"
    assert epoch(field(line, "StartTime")) == now + 20 * 60 and epoch(field(line, "EndTime")) == now + 50 * 60
    assert "MAINT" in field(line, "Flags") and "IGNORE_JOBS" in field(line, "Flags")
    long = cluster.sbatch("#!/bin/sh\ntrue\n", "--time=60", "-w", "node2")
    short = cluster.sbatch("#!/bin/sh\ntrue\n", "--time=5", "-w", "node2")
    assert cluster.wait_job(short)["JobState"] == "COMPLETED"
    held = cluster.job(long)
    assert (held["JobState"], held["Reason"]) == ("PENDING", "ReqNodeNotAvail,_Reserved_for_maintenance"), held
    cluster.run("scancel", long)
    again = run(world, "node2", now + 60)
    assert again.returncode == 0 and again.stderr == "", again.stderr


def jobs_are_signalled_and_the_nodes_drained(world):
    cluster, now = world["cluster"], world["now"]
    for node in ("node1", "node2"):
        result = run(world, node, now + 11 * 60)
        assert result.returncode == 0, result.stderr
    node_end.assert_signalled_and_drained(cluster, world["job"], world["marker"],
                                          f"fmcluster-capacity-end: {PLAN}-p6-b200.48xlarge is reclaimed from")


def an_extended_plan_moves_the_reservation_and_returns_the_nodes(world):
    """ExtendTrainingPlan: a reserved capacity back to back with the last one, an hour more."""
    cluster, now = world["cluster"], world["now"]
    plan(world["tmp"], [(TYPE, now + 50 * 60, now + 110 * 60), (TYPE, now - 3600, now + 30 * 60),
                        (TYPE, now + 30 * 60, now + 50 * 60)], now - 3600, now + 110 * 60)
    for node in ("node1", "node2"):
        result = run(world, node, now + 12 * 60)
        assert result.returncode == 0, result.stderr
    line = node_end.reservation(cluster, NAME)
    assert epoch(field(line, "StartTime")) == now + 80 * 60 and epoch(field(line, "EndTime")) == now + 110 * 60
    for node in ("node1", "node2"):
        assert "DRAIN" not in cluster.node(node)["State"], cluster.node(node)


def a_plan_that_lists_no_capacities_ends_at_its_end(world):
    """Seen once the answer node1 keeps is due again (READ_MINUTES after it was read, at the latest):
    before, far from the signal, SageMaker is not asked."""
    cluster, now = world["cluster"], world["now"]
    plan(world["tmp"], [], now - 3600, now + 170 * 60)
    asked = len(node_end.aws_calls(world["tmp"]))
    result = run(world, "node1", now + 13 * 60)
    assert result.returncode == 0 and node_end.aws_calls(world["tmp"])[asked:] == [], result.stderr
    result = run(world, "node1", now + (12 + 30) * 60)
    assert result.returncode == 0, result.stderr
    assert node_end.aws_calls(world["tmp"])[asked:] == ["sagemaker describe-training-plan"]
    line = node_end.reservation(cluster, NAME)
    assert epoch(field(line, "StartTime")) == now + 140 * 60 and epoch(field(line, "EndTime")) == now + 170 * 60


def no_end_from_sagemaker_drains_nothing(world):
    """No capacity that holds now, or a time that is not one, and no earlier answer kept (a node new
    to the plan): no end is read, nothing drains."""
    cluster, now = world["cluster"], world["now"]
    cases: dict[str, list[tuple[str, Time, Time]]] = {
        "gap": [(TYPE, now + 3600, now + 7200)], "odd": [(TYPE, now - 3600, "None")], "other type": [
            ("ml.p5.48xlarge", now - 3600, now + 7200)]}
    for case, spans in cases.items():
        fresh = world["tmp"] / f"fresh-{case.replace(' ', '-')}"
        fresh.mkdir()
        plan(fresh, spans, "None", "None")
        result = run(world, "node1", now + 12 * 60, fresh)
        assert result.returncode == 1 and "no end for the training plan from SageMaker" in result.stderr, result.stderr
        assert "DRAIN" not in cluster.node("node1")["State"], case


def an_answer_in_seconds_since_the_epoch_is_the_same_end(world):
    """The AWS CLI v1 prints a time as it comes over the wire (cli_timestamp_format's default), and
    SageMaker's JSON protocol sends seconds since the epoch: the end read so is the same (here the
    one the reservation has already), for a node new to the plan."""
    cluster, now = world["cluster"], world["now"]
    fresh = world["tmp"] / "fresh-wire"
    fresh.mkdir()
    plan(fresh, [(TYPE, now - 3600.5, float(now + 170 * 60))], now - 3600.5, float(now + 170 * 60))
    result = run(world, "node1", now + 12 * 60, fresh)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    kept = fresh / "node1" / "root" / "var" / "lib" / "fmcluster" / "capacity-end" / f"end-{PLAN}-p6-b200.48xlarge"
    assert kept.read_text().split()[0] == f"{now + 170 * 60}"  # the end, then when it is read again
    line = node_end.reservation(cluster, NAME)
    assert epoch(field(line, "StartTime")) == now + 140 * 60 and epoch(field(line, "EndTime")) == now + 170 * 60


def test_the_end_of_a_training_plan_on_slurm(world):
    reserved_until_the_stretch_of_capacity_that_holds_now_ends(world)
    jobs_are_signalled_and_the_nodes_drained(world)
    an_extended_plan_moves_the_reservation_and_returns_the_nodes(world)
    a_plan_that_lists_no_capacities_ends_at_its_end(world)
    no_end_from_sagemaker_drains_nothing(world)
    an_answer_in_seconds_since_the_epoch_is_the_same_end(world)
