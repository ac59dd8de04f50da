"""Teams sharing a cluster: the priority classes every scheduler gets, and the names the teams'
objects take. Facts the spec's rules, the model, the Slurm accounting program and the Kueue
objects share.

Three priority classes, the same on Slurm and Kubernetes: `high` and `normal` jobs may preempt
`low` ones (which are the preemptible, opportunistic work), `high` may preempt `normal` too.
On Slurm each class is a QOS (PreemptType=preempt/qos: a job of a QOS preempts the jobs of the
QOSes its `Preempt` lists); on Kubernetes a Kueue WorkloadPriorityClass (a workload of a higher
value may preempt a lower one, within a ClusterQueue and, reclaiming its quota, across the
cohort). A team's own class is its jobs' default and the highest it may use; every team may
use the classes below it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PriorityClass:
    name: str
    value: int  # Slurm QOS Priority; Kueue WorkloadPriorityClass value
    preempts: tuple[str, ...]  # the classes its jobs may preempt
    description: str


PRIORITY_CLASSES: tuple[PriorityClass, ...] = (
    PriorityClass("high", 1000, ("normal", "low"), "urgent work: preempts normal and low jobs"),
    PriorityClass("normal", 100, ("low",), "the default: preempts low jobs"),
    PriorityClass("low", 10, (), "opportunistic work on idle GPUs: preempted first"),
)
PRIORITY_NAMES: tuple[str, ...] = tuple(p.name for p in PRIORITY_CLASSES)  # highest first
DEFAULT_PRIORITY = "normal"


def priority(name: str) -> PriorityClass:
    return next(p for p in PRIORITY_CLASSES if p.name == name)


def allowed_priorities(own: str) -> tuple[str, ...]:
    """The classes a team of class `own` may use: its own and every lower one, highest first."""
    return PRIORITY_NAMES[PRIORITY_NAMES.index(own):]


# Names a team cannot take: Slurm's own account (root) and QOS names, and the Kubernetes
# namespaces the cluster's own software runs in (kube-*, kueue-system and the add-ons').
RESERVED_TEAM_NAMES: frozenset[str] = frozenset({
    "root", "default", "kube-system", "kube-public", "kube-node-lease", "kueue-system", "amazon-cloudwatch",
    "nvidia-device-plugin", "nvidia-dra-driver-gpu", "gpu-operator", "prometheus", "aws-observability",
    *PRIORITY_NAMES})
TEAM_NAME_MAX = 30  # a Slurm account, a Kubernetes namespace and ClusterQueue name, a cost tag value

# What Slurm's accounting holds of a team's numbers (slurm/slurm.h, slurm/slurmdb.h, sacctmgr). A
# TRES count, such as the account's GrpTRES=gres/gpu=N, is a uint64_t whose top values are
# sentinels (INFINITE64, 2^64 - 1: no limit, which strtoull also makes of any larger number;
# NO_VAL64; NO_CONSUME_VAL64), and Slurm caps a count it adds up at MAX_VAL64. Fairshare is a
# uint32_t that sacctmgr casts from a long without a word, whose 0x7fffffff
# (SLURMDB_FS_USE_PARENT) means "the parent's".
SLURM_MAX_TRES_COUNT = 0xFFFF_FFFF_FFFF_FFF0  # MAX_VAL64
SLURM_MAX_FAIRSHARE = 0x7FFF_FFFE  # the most below SLURMDB_FS_USE_PARENT

# A Linux user or group name as useradd accepts it by default (shadow-utils' NAME_REGEX, at most
# 32 characters): what Slurm's associations name users by.
LINUX_NAME = r"[a-z_][a-z0-9_-]{0,30}[a-z0-9_$-]?"
