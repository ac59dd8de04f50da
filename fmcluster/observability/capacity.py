"""The end of the cluster's reserved capacity: when EC2 or SageMaker takes a Capacity Block's or
training plan's instances back, what each control plane does before then, and the countdown to
each end that NAME-observability keeps (the metric HoursToCapacityEnd, its two alarms, a
dashboard widget). Pure: `fmcluster plan` shows it, the observability stack builds the countdown
from it, and preflight's window check uses the same minutes.

EC2 publishes no metric of a reservation's end, so a function of NAME-observability reads each
counted reservation's EndDate (DescribeCapacityReservations) or training plan's EndTime
(DescribeTrainingPlan) every EVERY_MINUTES and puts the hours left. Counted: each Capacity Block a
node group names by `reservation_id` and each training plan it names by `training_plan_arn`. Not
counted: On-Demand Capacity Reservations (at their end the instances go on as On-Demand ones,
nothing is lost) and resource groups of reservations (their members are known only at run time).

Sources: EC2 User Guide, Capacity Blocks ("Monitor Capacity Blocks using EventBridge": the
instances are terminated from 30 minutes before the end, 60 for an UltraServer block); SageMaker
Developer Guide, training plans ("Reserved Capacity termination process": from 30 minutes before
the end time); EC2 API Reference, CreateCapacityReservation `EndDate` (an expired On-Demand
Capacity Reservation releases its capacity; the instances keep running, as On-Demand instances)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from fmcluster.facts.controlplanes import CAPACITY_BLOCK, RESERVATION, termination_minutes
from fmcluster.model import cluster as model
from fmcluster.model.node import BLOCK_END, PLAN_END, CapacityEnd

NAMESPACE = "fmcluster"  # the custom metrics' namespace (the node replacer's NodesReplaced too)
METRIC = "HoursToCapacityEnd"
EVERY_MINUTES = 5  # how often the countdown function reads the ends
PERIOD_MINUTES = 15  # the alarms' period: three readings each, so that one missed run raises nothing
LAST_DAY_HOURS = 24  # the first alarm: a day left, to extend the block or plan the last checkpoint
ENDING_MARGIN_MINUTES = 60  # the second alarm: this long before the instances start to be terminated


@dataclass(frozen=True)
class Threshold:
    """One countdown alarm of a counted capacity: in ALARM under `hours` left."""

    suffix: str  # the alarm name's last part
    hours: float
    meaning: str  # the alarm's description: what to do


@dataclass(frozen=True)
class Counted:
    """A Capacity Block or training plan whose end NAME-observability counts down to."""

    capacity: str  # the metric's Capacity dimension: the cr-... id, or the training plan's name
    kind: str  # "capacity-block" or "training-plan"
    reservation_id: Optional[str]
    training_plan_arn: Optional[str]
    groups: tuple[str, ...]  # the node groups that run on it
    termination_minutes: int  # its instances are terminated from this long before its end
    instance_types: tuple[str, ...] = ()  # a training plan: its groups' instance types (ml.TYPE), each once

    @property
    def label(self) -> str:
        """How the dashboard names it: the capacity and its node groups."""
        return f"{self.capacity} ({', '.join(self.groups)})"

    def thresholds(self) -> tuple[Threshold, Threshold]:
        what = "Capacity Block" if self.kind == CAPACITY_BLOCK else "training plan"
        ending = (self.termination_minutes + ENDING_MARGIN_MINUTES) / 60
        groups = ", ".join(self.groups)
        return (
            Threshold("last-day", LAST_DAY_HOURS,
                      f"{what} {self.capacity} (node groups {groups}) ends within {LAST_DAY_HOURS} hours: extend it "
                      "(fmcluster capacity extend) or plan the last checkpoint before its instances are "
                      f"terminated, from {self.termination_minutes} minutes before its end."),
            Threshold("ending", ending,
                      f"{what} {self.capacity} (node groups {groups}) ends within {ending:g} hours: its instances "
                      f"are terminated from {self.termination_minutes} minutes before its end. Checkpoint now; "
                      "start nothing that cannot finish."),
        )


def group_termination_minutes(group: model.NodeGroup, hyperpod: bool) -> int:
    """How long before its end the instances of a group's Capacity Block or training plan are
    terminated."""
    capacity = group.capacity
    return termination_minutes(hyperpod and bool(capacity.training_plan_arn), bool(capacity.ultraserver_type))


def plan_name(arn: str) -> str:
    """A training plan's name, the last part of its ARN (what DescribeTrainingPlan takes)."""
    return arn.rsplit("/", 1)[-1]


def counted(m: model.ClusterModel) -> list[Counted]:
    """What NAME-observability counts down to, each once, in the spec's order; none where the
    cluster is not observed (it has no NAME-observability)."""
    if not m.observed:
        return []
    hyperpod = m.control_plane.hyperpod
    found: dict[str, Counted] = {}
    for group in m.node_groups:
        capacity = group.capacity
        if capacity.training_plan_arn and hyperpod:
            key, kind = capacity.training_plan_arn, "training-plan"
            item = Counted(plan_name(key), kind, None, key, (), group_termination_minutes(group, hyperpod),
                           (group.sagemaker_instance_type,))
        elif capacity.type == CAPACITY_BLOCK and capacity.reservation_id:
            key = capacity.reservation_id
            item = Counted(key, CAPACITY_BLOCK, key, None, (), group_termination_minutes(group, hyperpod))
        else:
            continue
        before = found.get(key, item)
        found[key] = Counted(before.capacity, before.kind, before.reservation_id, before.training_plan_arn,
                             before.groups + (group.name,),
                             max(before.termination_minutes, item.termination_minutes),
                             tuple(dict.fromkeys(before.instance_types + item.instance_types)))
    return list(found.values())


def alarm_name(cluster: str, capacity: str, suffix: str) -> str:
    """`fmcluster-NAME-CAPACITY-SUFFIX` (CloudWatch: at most 255 characters; a cluster name and a
    training plan's name are at most 64 each)."""
    return f"fmcluster-{cluster}-{capacity}-{suffix}"


def alarm_names(cluster: str, item: Counted) -> list[str]:
    return [alarm_name(cluster, item.capacity, t.suffix) for t in item.thresholds()]


def drained_before(end: CapacityEnd, minutes: int) -> str:
    """What the Slurm nodes of a group whose end they handle do before their instances are terminated,
    `minutes` before the end (programs/capacity-end.sh)."""
    signal = end.signal.removeprefix("B:").removeprefix("SIG")
    return (f"a Slurm maintenance reservation on the group's nodes from {minutes} minutes before the end keeps "
            f"jobs that would run into it from starting; {end.signal_minutes} minutes before it begins, the "
            f"running jobs get SIG{signal} (to checkpoint) and the nodes drain")


def at_end(m: model.ClusterModel, group: model.NodeGroup) -> Optional[str]:
    """What happens to a node group at the end of its reserved capacity where its nodes handle it
    (the Slurm planes: a Capacity Block of AWS PCS, a training plan of HyperPod Slurm) or EC2 does
    alone (an On-Demand Capacity Reservation); None for a group on no reserved capacity (On-Demand,
    spot), and for a Capacity Block or training plan of a Kubernetes plane, whose end a function in
    the cluster handles (fmcluster.kubernetes.capacity_end.at_end says what it does; the plan asks
    it first)."""
    capacity = group.capacity
    end = m.node(group).capacity_end
    if end is not None and end.source == PLAN_END:
        return (f"SageMaker terminates the training plan's instances from {end.termination_minutes} "
                "minutes before its end; " + drained_before(end, end.termination_minutes))
    if end is not None and end.source == BLOCK_END:
        minutes = end.termination_minutes
        return drained_before(end, minutes) + f"; EC2 terminates the instances from {minutes} minutes before the end"
    if capacity.type == RESERVATION and not capacity.training_plan_arn:
        return ("at its end date, if it has one, the reservation expires: EC2 keeps the running instances as "
                "On-Demand instances, billed at On-Demand rates, and new launches are no longer reserved")
    return None
