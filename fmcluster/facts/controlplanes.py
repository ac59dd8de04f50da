"""Facts about each control plane that the spec can choose (orchestrator.type).

Static service limits live here (hard limits are spec errors); quotas that can be raised are
account facts for `fmcluster preflight`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fmcluster.facts.efa import InterfaceMode

ON_DEMAND, RESERVATION, CAPACITY_BLOCK, SPOT = "on-demand", "reservation", "capacity-block", "spot"
# EKS managed node groups on a Capacity Block go to 0 this long before the block ends: EC2 warns 40
# minutes before and terminates from 30 minutes before (EC2 User Guide, Capacity Blocks; EC2 Auto
# Scaling: "scale in to zero more than 30 minutes before the end time")
CAPACITY_BLOCK_DRAIN_MINUTES = 45
# EC2 terminates a Capacity Block's instances from 30 minutes before its end (EC2 User Guide, Capacity
# Blocks; its EventBridge warning comes 40 minutes before the end, "terminate in 10 minutes")
BLOCK_TERMINATION_MINUTES = 30
# P6e-GB200 UltraServer Capacity Blocks terminate their instances from 60 minutes before the end
# (EC2 User Guide, Capacity Blocks), not 30
ULTRASERVER_BLOCK_TERMINATION_MINUTES = 60
# and their EKS node groups go to 0 this long before the end (the same 15 minutes of margin)
ULTRASERVER_BLOCK_DRAIN_MINUTES = 75
# SageMaker terminates a training plan's instances from 30 minutes before the end of its reserved
# capacity (SageMaker Developer Guide, "Training plans utilization for SageMaker training jobs":
# "Reserved Capacity termination process")
TRAINING_PLAN_TERMINATION_MINUTES = 30


def termination_minutes(training_plan: bool, ultraserver: bool) -> int:
    """How long before the end of a group's reserved capacity its instances start to be terminated:
    an UltraServer block's 60 minutes (a HyperPod training plan of UltraServers too: it reserves such
    blocks, and no SageMaker page gives it a shorter lead, so the earlier one is taken), a training
    plan's 30, a Capacity Block's 30."""
    if ultraserver:
        return ULTRASERVER_BLOCK_TERMINATION_MINUTES
    return TRAINING_PLAN_TERMINATION_MINUTES if training_plan else BLOCK_TERMINATION_MINUTES

# EC2 interrupts a Spot Instance two minutes after its interruption notice (EC2 User Guide, "Spot
# Instance interruption notices"; none for hibernation, which begins at once)
SPOT_NOTICE_MINUTES = 2
# The Slurm partition of an UltraServer node group: whole nodes per job (slurm.conf(5)
# OverSubscribe=EXCLUSIVE; AWS PCS takes OverSubscribe as a queue setting)
ULTRASERVER_PARTITION_SETTINGS = {"OverSubscribe": "EXCLUSIVE"}
CAPACITY_TYPES = (ON_DEMAND, RESERVATION, CAPACITY_BLOCK, SPOT)
ARCHITECTURES = ("x86_64", "arm64")  # as the catalog and DescribeImages name them


def pcs_ami_parameter(architecture: str) -> str:
    """The SSM parameter of the PCS-ready DLAMI (Ubuntu 24.04) for an architecture (PCS User Guide,
    "Using PCS-ready DLAMI with AWS PCS": published for x86_64 and arm64)."""
    if architecture not in ARCHITECTURES:
        raise ValueError(f"no PCS-ready DLAMI for {architecture!r}")
    return f"/aws/service/pcs/ami/dlami-base-ubuntu2404/{architecture}/latest/ami-id"


# The Slurm versions the PCS-ready DLAMI carries, each under its own prefix (images.PCS_SLURM_PREFIX),
# as its description lists them ("PCS Agent: 1.5.0-1. Slurm: 24.11.7-2, 25.05.8-2, 25.11.6-2"):
# every release up to 2026-08-05 has these three (awslabs/awsome-distributed-ai,
# architectures/aws-pcs/docs/PCS-READY-DLAMI.md, read 2026-12). The PCS API also creates clusters
# with 26.05, but no base image carries it, so a node image of 26.05 has no Slurm to build Pyxis
# against: `preflight` reads the region's image and FAILs a version it does not list.
PCS_BASE_IMAGE_SLURM_VERSIONS = ("24.11", "25.05", "25.11")

# How each Slurm control plane's Slurm authenticates, which every Slurm command needs before it
# parses an option (Slurm's slurm_init(): "failed to initialize auth plugin" is fatal). AWS PCS's
# Slurm is built `--without-munge` and authenticates with the cluster's Slurm key, auth/slurm (PCS
# User Guide, "Software installers to build custom AMIs for AWS PCS"), whose credentials plugin is
# cred/slurm; SageMaker HyperPod's Slurm runs munge (its lifecycle scripts start munged).
SLURM_AUTH = {"pcs": ("auth/slurm", "cred/slurm"), "hyperpod-slurm": ("auth/munge", "cred/munge")}


# EKS AMI types (botocore's EKS AMITypes): AL2023, NVIDIA for GPU nodes, by architecture
EKS_AMI_TYPES = {("x86_64", True): "AL2023_x86_64_NVIDIA", ("x86_64", False): "AL2023_x86_64_STANDARD",
                 ("arm64", True): "AL2023_ARM_64_NVIDIA", ("arm64", False): "AL2023_ARM_64_STANDARD"}


@dataclass(frozen=True)
class PcsSize:
    name: str
    max_nodes: int
    max_jobs: int


# AWS PCS cluster sizes (PCS User Guide, "Cluster size"): managed instances and jobs.
PCS_SIZES = (PcsSize("SMALL", 32, 256), PcsSize("MEDIUM", 512, 8192), PcsSize("LARGE", 2048, 16384))


# AWS PCS internal quotas, not adjustable (PCS User Guide, "Quotas"): compute node groups (the
# login group is one) and queues per cluster. Name lengths and patterns: botocore's PCS model
# (ClusterName 3-40, ComputeNodeGroupName and QueueName 3-25, a letter first, letters, digits
# and '-'); fmcluster's own names are narrower (fmcluster.spec.models), so only the minimum can bite.
PCS_MAX_COMPUTE_NODE_GROUPS = 10
PCS_MAX_QUEUES = 10
PCS_NAME_MIN = 3

# Slurm reads PartitionName=DEFAULT (any case) as the defaults of the partitions after it, not as
# a partition (slurm.conf(5)); a node group named so would have no partition of its own.
SLURM_RESERVED_PARTITION_NAMES = ("default",)

# Kueue: a ClusterQueue resource group takes at most 64 flavors (fmcluster makes one per node group).
KUEUE_MAX_FLAVORS = 64


def pcs_size_for(nodes: int) -> PcsSize | None:
    """The smallest PCS cluster size that manages `nodes` instances (login nodes included)."""
    return next((size for size in PCS_SIZES if nodes <= size.max_nodes), None)


@dataclass(frozen=True)
class ControlPlane:
    type: str
    scheduler: str  # "slurm" or "kubernetes"
    versions: tuple[str, ...]  # supported, oldest first; the last is the default
    interface_mode: InterfaceMode  # the EFA interface layout its nodes get
    min_availability_zones: int
    capacity_types: tuple[str, ...]
    hyperpod: bool  # instance groups are SageMaker HyperPod ml.* instances
    version_label: str
    pod_addresses_per_node: int = 0  # VPC CNI gives pods addresses from the node's subnet
    default: str = ""  # the version a spec that names none gets; "" for the newest supported

    @property
    def default_version(self) -> str:
        return self.default or self.versions[-1]


CONTROL_PLANES = {
    cp.type: cp
    for cp in (
        # AWS PCS's CreateCluster (botocore's PCS model, 2026-11): Slurm 24.11, 25.05, 25.11 and 26.05.
        # A spec that names no version gets the newest the PCS-ready DLAMI carries, not the newest
        # the API accepts: the node images are built on that base.
        ControlPlane("pcs", "slurm", ("24.11", "25.05", "25.11", "26.05"), InterfaceMode.EFA, 1,
                     CAPACITY_TYPES, False, "Slurm version", default=PCS_BASE_IMAGE_SLURM_VERSIONS[-1]),
        # SageMaker HyperPod picks Slurm through its AMI: the Slurm AMI releases (through January
        # 2026) ship Slurm 24.11 only ("SageMaker HyperPod AMI releases for Slurm").
        # Reserved capacity comes from training plans (capacity.training_plan_arn); Spot is not
        # offered for Slurm clusters. Interfaces: ClusterNetworkInterface.InterfaceType is
        # efa | efa-only (SageMaker API Reference); efa-only takes no IP address.
        ControlPlane("hyperpod-slurm", "slurm", ("24.11",), InterfaceMode.EFA_ONLY, 1,
                     (ON_DEMAND, RESERVATION, CAPACITY_BLOCK), True, "Slurm version"),
        ControlPlane("eks", "kubernetes", ("1.32", "1.33", "1.34", "1.35"), InterfaceMode.EFA_ONLY, 2,
                     CAPACITY_TYPES, False, "Kubernetes version", pod_addresses_per_node=32),
        # HyperPod on EKS supports Kubernetes 1.30-1.35 ("Prerequisites for using Amazon EKS
        # with SageMaker HyperPod"); 1.30 and 1.31 leave EKS extended support in 2026, so the
        # range is that of the eks control plane. Spot: "Spot instances in Amazon SageMaker
        # HyperPod" (continuous provisioning, EKS orchestrator).
        ControlPlane("hyperpod-eks", "kubernetes", ("1.32", "1.33", "1.34", "1.35"), InterfaceMode.EFA_ONLY, 2,
                     (ON_DEMAND, RESERVATION, CAPACITY_BLOCK, SPOT), True, "Kubernetes version",
                     pod_addresses_per_node=32),
    )
}

ORCHESTRATOR_TYPES = tuple(CONTROL_PLANES)

# Versions a control plane no longer creates clusters with, and what to say about them: a spec that
# names one is refused with the reason, not with the bare list of what is supported.
RETIRED_VERSIONS = {
    "pcs": {
        "24.05": "AWS PCS no longer creates clusters with Slurm 24.05: its API takes 24.11, 25.05, 25.11 "
                 "and 26.05",
    },
}

# What an AWS PCS cluster offers from which Slurm version on: every version-dependent behaviour of
# fmcluster is keyed on this one table (PcsFeature names, oldest version).
#   accounting: PCS's managed Slurm accounting (`Accounting: STANDARD`), which teams need;
#   ultraserver: UltraServer node groups (PCS picks Slurm's block topology for them; FACTS);
#   health_monitoring: PCS's own instance health checks with repair and DCGM deep checks at start
#     (`instanceHealthChecks`), in the PCS API but not yet in CloudFormation's
#     AWS::PCS::ComputeNodeGroup, so fmcluster runs its own health check and deep check: with
#     `health.replace` a faulty dynamic node is powered down through Slurm, and a static one stays
#     drained for a person (no replacement of its instance is documented; docs/health.md).
PCS_SLURM_SINCE = {"accounting": "24.11", "ultraserver": "25.05", "health_monitoring": "26.05"}


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def pcs_offers(feature: str, slurm_version: str) -> bool:
    """Whether AWS PCS offers `feature` (a PCS_SLURM_SINCE key) with Slurm `slurm_version`."""
    return version_tuple(slurm_version) >= version_tuple(PCS_SLURM_SINCE[feature])


def get(type_: str) -> ControlPlane:
    return CONTROL_PLANES[type_]


# SageMaker HyperPod hard limits (AWS::SageMaker::Cluster schema: InstanceGroups 1-100 items,
# InstanceCount 0-6758) and naming (InstanceGroupName and ClusterName: [a-zA-Z0-9](-*[a-zA-Z0-9])*).
HYPERPOD_MAX_INSTANCE_GROUPS = 100
HYPERPOD_MAX_INSTANCE_COUNT = 6758
HYPERPOD_NAME_PATTERN = r"[a-zA-Z0-9](-*[a-zA-Z0-9])*"

# Where SageMaker HyperPod mounts an instance's secondary volume (ClusterEbsVolumeConfig) and its
# instance-store NVMe disks: no other file system may be mounted there.
HYPERPOD_VOLUME_PATH = "/opt/sagemaker"

# The Slurm controller of a hyperpod-slurm cluster, by the number of nodes it manages: slurmctld
# is light, but its memory grows with nodes and queued jobs.
HYPERPOD_CONTROLLER_TYPES = ((64, "m7i.2xlarge"), (512, "m7i.4xlarge"), (None, "m7i.12xlarge"))


def hyperpod_controller_type(nodes: int) -> str:
    return next(kind for limit, kind in HYPERPOD_CONTROLLER_TYPES if limit is None or nodes <= limit)
