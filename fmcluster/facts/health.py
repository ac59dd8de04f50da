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

# Fault.kind: replace the node; drain it until it passes; or reboot it once, then replace it
HARDWARE, NODE, RESET = "hardware", "node", "reset"


@dataclass(frozen=True)
class Fault:
    """One kind of fault the health check reports (a line `SLUG TEXT` of the program's output)."""

    slug: str
    kind: str  # HARDWARE: drained, then replaced once its jobs end; NODE: drained until it passes again;
    # RESET: drained, rebooted once its jobs end (Slurm resumes it); found again on the same GPU in
    # the boot right after that reboot, on the same instance, it is a HARDWARE fault (`xid`, `ecc`:
    # replaced)
    what: str  # what was found, in a phrase (docs, plan)


# XIDs that take a GPU out of service (FACTS), in two classes (NVIDIA, "Analyzing Xid Errors with
# the Xid Catalog", https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, its
# resolution buckets; "Dynamic Page Retirement", https://docs.nvidia.com/deploy/dynamic-page-retirement/):
# - RESET_XIDS ask for a GPU reset or a reboot, not a new instance: 63 and 64 (a row remap or page
#   retirement that takes effect at the next reset), 74 (an NVLink error), 94 (a contained ECC
#   error). The node is rebooted (`scontrol reboot ASAP nextstate=RESUME`); replacing it would burn
#   Capacity Block hours on a new instance's start and, on SageMaker HyperPod, destroy the
#   instance's volumes.
# - REPLACE_XIDS ask for a new GPU: 48 (a double-bit ECC error), 79 (the GPU has fallen off the
#   bus), 95 (an uncontained ECC error); so does a reset-class XID that comes back after the reboot.
# The memory errors those XIDs report are reset-class too (NVIDIA, "NVIDIA A100 GPU Memory Error
# Management", https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/): XID 94, a contained
# uncorrectable error, raises the volatile uncorrected ECC count and leaves a row remap pending;
# XID 63 on Ampere and later is "New row marked for remapping, reset gpu to activate", and a
# retired page pending (XID 63/64 on older GPUs) also takes effect at the next reset. Those are
# `ecc-reset`; a failed row remap (no spare row left), or a count or pending remap still there
# after the reboot, needs a new GPU (`ecc`).
# The node's settings (node-health.env, bootstrap.NodeProgram.health) carry both; node-health.sh
# keeps RESET_XIDS as its default for an older node-health.env (tests/node/test_node_health.py holds
# the two equal).
RESET_XIDS = (63, 64, 74, 94)
REPLACE_XIDS = (48, 79, 95)
DRAIN_XIDS = tuple(sorted(RESET_XIDS + REPLACE_XIDS))

FAULTS = (
    Fault("gpu-count", HARDWARE, "fewer GPUs visible than the instance type has"),
    Fault("gpu-state", HARDWARE, "nvidia-smi fails, or a GPU reports an error state"),
    Fault("xid", HARDWARE, f"an XID error that needs a new GPU ({', '.join(map(str, REPLACE_XIDS))}), or a "
                           f"reset-class XID again after a reboot"),
    Fault("xid-reset", RESET, f"an XID error that needs a GPU reset ({', '.join(map(str, RESET_XIDS))})"),
    Fault("ecc", HARDWARE, "a failed row remap, or uncorrected ECC errors or a pending row remap or page "
                           "retirement still there after a reboot"),
    Fault("ecc-reset", RESET, "uncorrected ECC errors since the last GPU reset, or a row remap or page "
                              "retirement pending a reset"),
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
# On AWS PCS, the readiness gate runs it (fmcluster/node/scripts/boot/programs/deep-check.sh): PCS's
# own deep health checks on start (instanceHealthChecks.deepHealthChecks, profile QUICK|MEDIUM|LONG =
# DCGM levels 1/2/3) exist in the PCS API for Slurm 26.05 only, and not in CloudFormation's
# AWS::PCS::ComputeNodeGroup (cfn-lint 1.58 schema); SageMaker HyperPod Slurm has
# OnStartDeepHealthChecks (InstanceStress, InstanceConnectivity).
DEEP_DCGM_LEVEL = 2
# DCGM level 2: "Medium validation, normally lasting approximately two minutes" (NVIDIA, DCGM
# reference, "dcgmi diag", https://docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/dcgmi-diag.html;
# level 1 "normally lasting seconds", level 3 "approximately 15 minutes").
DEEP_DCGM_MINUTES = 2
# all_reduce_perf -b 8 -e 1G -f 2 -g GPUS: 28 sizes, 5 warm-up and 20 timed iterations each
# (nccl-tests' defaults, README "Arguments"); at a node's NVLink bus bandwidth (p5e: 458 GB/s at
# 1 GiB, awsome-distributed-ai HyperPod Local Zone quickstart) the largest size takes milliseconds,
# so NCCL's start-up dominates: an estimate, under a minute (no published timing found).
DEEP_NCCL_MINUTES = 1
DEEP_CHECK_MINUTES = DEEP_DCGM_MINUTES + DEEP_NCCL_MINUTES  # added to a new node's first boot
# The bounds of each tool (a node that hangs in a tool is not ready, never waits for ever): several
# times the typical duration, well under DCGM level 3's 15 minutes. Together (16 minutes with
# node-ready's minute to spare) they keep a PCS node inside the "approximately 30 minutes to join
# Slurm" its lifecycle scripts have (PCS User Guide, "Best practices for node lifecycle actions").
DEEP_DCGM_TIMEOUT_SECONDS = 600
DEEP_NCCL_TIMEOUT_SECONDS = 300
# Where the Deep Learning AMIs keep nccl-tests: built by the EFA installer with the AMI's CUDA under
# /usr/local/cuda-X/efa/test-cuda-X/ (older DLAMI release notes, as a public repository quotes them:
# "NCCL Tests Location: /usr/local/cuda-xx.x/efa/test-cuda-xx.x/"; public scripts for the 2025-2026
# Ubuntu DLAMIs and HyperPod look there, for cuda-12.4 to cuda-13.0).
# /usr/local/cuda is the AMI's default CUDA. Not confirmed for the PCS-ready DLAMI itself: a node
# without the binary fails the check with its reason (`deep-nccl`), it never downloads one.
DEEP_NCCL_TESTS = ("/usr/local/cuda/efa/test-cuda-*/all_reduce_perf",
                   "/usr/local/cuda-*/efa/test-cuda-*/all_reduce_perf")
# A public validation run on the PCS-ready DLAMI (p5.48xlarge, Slurm 25.11, 2026-05-31) found
# "the PCS DLAMI ships prebuilt all_reduce_perf under /usr/local/cuda-13.2/efa/test-cuda-13.2/" and
# ran it with mpirun (code index, find_string "test-cuda-13", id 55853580496; repository not shown).
# The EFA installer's Open MPI, which those binaries are built with (AWS's nccl-tests image:
# MPI_HOME=/opt/amazon/openmpi): the deep check runs all_reduce_perf as one rank under it.
DEEP_MPIRUN = "/opt/amazon/openmpi/bin/mpirun"
# The verdict kept per instance (the instance ID, then the reasons), and the tools' output.
DEEP_CHECK_MARKER = "/var/lib/fmcluster/deep-check"
DEEP_CHECK_LOG = "/var/log/fmcluster-deep-check.log"
# The not-ready reasons' slugs: the diagnostic, the all-reduce, and the whole check past its bound.
DEEP_FAULTS = ("deep-dcgm", "deep-nccl", "deep-check")

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
