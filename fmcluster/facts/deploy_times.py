"""How long the parts of a first deploy take: what each of a cluster's stacks creates, and a new
node's way to ready, in minutes, a low and a high figure each (fmcluster.model.first_deploy puts
them together for a cluster; `fmcluster plan` shows them).

Each figure says what it rests on (`Minutes.basis`):
- PUBLISHED: a duration the vendor publishes (AWS, NVIDIA); its page is named with it.
- ESTIMATE: the vendor publishes none (CloudFormation, FSx, EC2 Image Builder, AWS PCS and
  SageMaker HyperPod give no creation times, only "several minutes" at most); the figure is an
  estimate, and its reason is given with it.
None is measured here: the repository's boot harness (tests/support/sandbox.py) runs the node
scripts on a virtual clock, which holds their waits and bounds but not how long a real boot takes,
and no real first deploy has been timed into the repository. A measured figure, with its cluster and
date, replaces an estimate when one is made.
"""

from __future__ import annotations

from dataclasses import dataclass

from fmcluster.facts import health
from fmcluster.facts import images as image_facts

PUBLISHED, ESTIMATE = "published", "estimate"


@dataclass(frozen=True)
class Minutes:
    """A duration, from `low` to `high` minutes, with what it rests on (PUBLISHED or ESTIMATE) and
    its source: the vendor's words and page, or the estimate's reason."""

    low: int
    high: int
    basis: str
    source: str

    def __post_init__(self) -> None:
        if not 0 <= self.low <= self.high:
            raise ValueError(f"a duration runs from its low to its high figure: {self.low} to {self.high}")
        if self.basis not in (PUBLISHED, ESTIMATE):
            raise ValueError(f"unknown basis {self.basis!r}")


# ---- NAME-network, NAME-storage, NAME-observability ------------------------------------------

NETWORK = Minutes(2, 5, ESTIMATE, (
    "a VPC, its subnets and route tables, an internet and a NAT gateway, the S3 gateway endpoint, flow "
    "logs and security groups, created side by side; the NAT gateway is the slowest, and EC2 publishes "
    "no creation time for it"))
BUCKETS = Minutes(1, 2, ESTIMATE, "S3 buckets, their policies and the storage key: seconds each")
LUSTRE = Minutes(10, 30, ESTIMATE, (
    "AWS says only that \"File system creation can take several minutes\" (AWS PCS User Guide, "
    "\"Create shared storage for AWS PCS in Amazon FSx for Lustre\"); AWS Labs' data-on-eks blueprints "
    "note \"FSx for Lustre file system creation can take up to 10 mins\" for 2,400 GiB of PERSISTENT_2 "
    "(analytics/terraform/emr-eks-karpenter/fsx-for-lustre.tf), and a larger file system has more servers "
    "to provision"))
LUSTRE_LINKS = Minutes(2, 10, ESTIMATE, (
    "the data repository associations, once the file system is AVAILABLE, side by side; FSx publishes "
    "no creation time (the Terraform AWS provider's 10-minute default wait is at times too short: "
    "aws-samples/amazon-eks-machine-learning-with-terraform-and-kubeflow#112)"))
OPENZFS = Minutes(10, 20, ESTIMATE, (
    "an FSx for OpenZFS file system and its volumes; FSx publishes no creation time, so it is taken "
    "to be about that of a Lustre file system"))
ACCOUNTING_DATABASE = Minutes(10, 20, ESTIMATE, (
    "an RDS for MariaDB instance and its secret; RDS publishes no creation time"))
PROMETHEUS = Minutes(2, 5, ESTIMATE, (
    "the Managed Prometheus workspace, its rule groups and alert manager, the SNS topic and its key, "
    "CloudWatch alarms and dashboard, side by side: none publishes a creation time"))
GRAFANA = Minutes(5, 15, ESTIMATE, (
    "an Amazon Managed Grafana workspace, then the function that provisions its data source and "
    "dashboards; Managed Grafana publishes no creation time"))

# ---- NAME-images -----------------------------------------------------------------------------

# One image (they build side by side). Its typical figure is images.BUILD_MINUTES_ESTIMATE, which
# the plan's cost line prices a build at; the bake may run for an hour and the test for ten
# minutes (fmcluster.node.image BAKE_TIMEOUT_SECONDS, CHECK_TIMEOUT_SECONDS) before Image Builder
# fails the image, so a build that succeeds stays under the high figure.
IMAGE_BUILD = Minutes(45, 90, ESTIMATE, (
    "an EC2 Image Builder build and test: a build instance from the base image, the bake (packages, "
    "Enroot and Pyxis compiled), the AMI's snapshot of its root volume, a test instance from the new AMI "
    f"and its checks; about {image_facts.BUILD_MINUTES_ESTIMATE} minutes is typical, and Image Builder "
    "publishes no build time"))

# ---- NAME-cluster, per control plane ---------------------------------------------------------

PCS_CLUSTER = Minutes(10, 20, ESTIMATE, (
    "AWS PCS publishes no figure: \"It takes time for AWS PCS to create the cluster. The cluster is in a "
    "Creating state until it is ready to use\" (AWS PCS API Reference, CreateCluster); it makes the Slurm "
    "controller, and slurmdbd with accounting, in an account of its own"))
PCS_NODE_GROUPS = Minutes(5, 10, ESTIMATE, (
    "the compute node groups (the login group and one per node group, each a nested stack, side by "
    "side), then the queues; AWS PCS publishes no figure, and launches a group's instances once the "
    "group is active: their boot is the first node's, below"))
HYPERPOD_CLUSTER = Minutes(20, 45, ESTIMATE, (
    "SageMaker publishes no figure; around the \"approximately 30 minutes\" that a public description of "
    "AWS Labs' SageMaker AI MCP server gives HyperPod cluster creation (not AWS documentation); the "
    "cluster is InService once every instance group has launched its instances and run their lifecycle "
    "scripts, so their boot is part of it"))
EKS_CLUSTER = Minutes(15, 20, PUBLISHED, (
    "the EKS control plane and its managed node groups, their nodes joined: a cluster and its node group "
    "usually take 15 to 20 minutes (Eksctl User Guide, Tutorial, step 3); \"EKS cluster control plane "
    "provisioning time currently averages 15 minutes\" (the EKS team, aws/containers-roadmap#1227); \"In "
    "most cases, it takes several minutes to create a cluster\" (Amazon EKS API Reference, CreateCluster)"))
EKS_CHARTS = Minutes(3, 10, ESTIMATE, (
    "the Helm charts and manifests, applied by the kubectl provider's function once the nodes they run "
    "on have joined; neither publishes a time"))

# ---- NAME-reference --------------------------------------------------------------------------

# One reference GPU image (fmcluster.model.reference_image; they build side by side: CloudFormation
# creates a stack's independent resources concurrently, so NAME-reference takes as long as its
# longest build). It deploys after NAME-cluster, and nothing waits for it. Its typical figure is
# images.REFERENCE_BUILD_MINUTES_ESTIMATE, which the plan's cost line prices a build at; no test
# instance.
REFERENCE_BUILD = Minutes(45, 120, ESTIMATE, (
    "an EC2 Image Builder container build: a build instance from the ECS-optimized AMI, the CUDA devel "
    "base image pulled, the EFA installer, NCCL compiled for every GPU generation of the architecture and "
    "nccl-tests, the image (about 10 GB) pushed to ECR; about "
    f"{image_facts.REFERENCE_BUILD_MINUTES_ESTIMATE} minutes is typical, and Image Builder publishes no "
    "build time"))

# ---- a new node, from its launch to ready ----------------------------------------------------

INSTANCE_BOOT = Minutes(3, 10, ESTIMATE, (
    "EC2 launches the GPU instance and it boots (the AMI's instance-store and EFA set-up, the GPU "
    "driver); EC2 publishes no launch-to-boot time"))
NODE_PROGRAM = Minutes(1, 5, ESTIMATE, (
    "fmcluster's node program: the instance-store RAID, LNet, the file systems mounted, the readiness "
    "check (the node program bounds each wait: a mount is retried for up to 5 minutes)"))
DEEP_CHECK = Minutes(health.DEEP_CHECK_MINUTES, health.DEEP_CHECK_MINUTES, ESTIMATE, (
    f"fmcluster's deep check: DCGM level {health.DEEP_DCGM_LEVEL}, \"normally lasting approximately two "
    "minutes\" (NVIDIA, DCGM reference, dcgmi diag), and a node-local NCCL all-reduce, about a minute "
    "(fmcluster.facts.health)"))
DEVICE_PLUGINS = Minutes(1, 3, ESTIMATE, (
    "after a GPU node joins Kubernetes: the NVIDIA and EFA device plugins start on it and advertise its "
    "GPUs and EFA interfaces"))
HYPERPOD_DEEP_CHECKS = Minutes(15, 60, ESTIMATE, (
    "SageMaker HyperPod's deep health checks on a new GPU node (InstanceStress: DCGM diagnostics level 4 "
    "and EFA; InstanceConnectivity: NCCL across nodes), which keep it out of the pool while they run; "
    "SageMaker publishes no duration, and NVIDIA says of level 4 only that it runs longer than level 3, "
    "\"approximately 15 minutes\" (DCGM reference, dcgmi diag)"))
# AWS PCS gives a node's lifecycle scripts "approximately 30 minutes to join Slurm" (PCS User Guide,
# "Best practices for node lifecycle actions"): a PCS node not ready by then is not a slow node but
# a failed one, so the first node's high figure on AWS PCS stays under it.
PCS_JOIN_MINUTES = 30
