"""Node health at scale: the faults fmcluster's continuous node health check finds, what each one
means for the node (drained and replaced, or drained until it passes again), and the defaults an
operator tunes in the spec's `health` section.

Sources and details: docs/research-notes.md, "fmcluster/facts/health.py"."""

from __future__ import annotations

from dataclasses import dataclass

# Defaults of the spec's `health` section.
CHECK_MINUTES = 5  # how often a node in service is checked
CHECK_MINUTES_RANGE = (1, 60)
MAX_REPLACING = 2  # nodes being replaced at once, per cluster
REPLACE_WINDOW_MINUTES = 30  # a replacement counts as "in flight" this long after it starts
# A node is never replaced in its Capacity Block's last hour: the new instance would not be ready,
# or not live, before EC2 ends the block (it terminates instances from 30 minutes before the end,
# 60 for an UltraServer block).
BLOCK_GUARD_MINUTES = 60

# The prefix of every Slurm drain reason the health check sets (`sinfo -R` shows it), and of the
# Kubernetes condition reasons: a node drained with another reason is a person's, never resumed
# or replaced by fmcluster.
REASON_PREFIX = "fmcluster-health"

HARDWARE, NODE = "hardware", "node"  # Fault.kind: replace the node; or drain it until it passes


@dataclass(frozen=True)
class Fault:
    """One kind of fault the health check reports (a line `SLUG TEXT` of the program's output)."""

    slug: str
    kind: str  # HARDWARE: drained, then replaced once its jobs end; NODE: drained until it passes again
    what: str  # what was found, in a phrase (docs, plan)


# XIDs after which the node needs a reset or a new GPU (FACTS: 48, 63, 64, 74, 79, 94, 95).
REPLACE_XIDS = (48, 63, 64, 74, 79, 94, 95)

FAULTS = (
    Fault("gpu-count", HARDWARE, "fewer GPUs visible than the instance type has"),
    Fault("gpu-state", HARDWARE, "nvidia-smi fails, or a GPU reports an error state"),
    Fault("xid", HARDWARE, f"an XID error that needs a reset or a new GPU ({', '.join(map(str, REPLACE_XIDS))})"),
    Fault("ecc", HARDWARE, "uncorrectable ECC errors, or a failed or pending row remap"),
    Fault("nvlink", HARDWARE, "an NVLink link down"),
    Fault("efa", HARDWARE, "fewer EFA devices than the node group's layout"),
    Fault("dcgm", HARDWARE, "the DCGM diagnostic fails (run while the node is idle)"),
    Fault("filesystem", NODE, "a shared or local file system missing or not answering"),
)
FAULT_SLUGS = tuple(f.slug for f in FAULTS)


def fault(slug: str) -> Fault:
    return next(f for f in FAULTS if f.slug == slug)


# The deep check a new node runs before its first job (DCGM diagnostic level 2 and a node-local
# NCCL all-reduce over its GPUs), and about how long it adds to its first boot.
DEEP_DCGM_LEVEL = 2
DEEP_CHECK_MINUTES = 5

# EKS managed node groups: node auto repair stops acting once more nodes of a group are unhealthy
# than its threshold (NodeRepairConfig MaxUnhealthyNodeThresholdCount: "a count threshold of
# unhealthy nodes, above which node auto repair actions will stop"; cfn-lint's AWS::EKS::Nodegroup
# schema and botocore's eks model). EKS's own default halts repair when a group has more than five
# nodes and more than 20% of them are unhealthy (EKS User Guide, "Automatically repair nodes in EKS
# clusters"): a cluster-wide problem (a bad driver, a network event) is not "fixed" by replacing
# every node. fmcluster keeps those 20%, as a count so that a small group still repairs at least
# as many nodes as it may replace at once.
REPAIR_HALT_PERCENT = 20


def repair_halt_count(nodes: int, max_replacing: int) -> int:
    """The unhealthy nodes of a group of `nodes` above which EKS node repair stops: 20% of the group
    (rounded up), never fewer than `max_replacing` (at least 1)."""
    return max(1, max_replacing, -(-nodes * REPAIR_HALT_PERCENT // 100))
