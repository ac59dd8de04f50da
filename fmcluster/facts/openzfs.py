"""FSx for OpenZFS facts: the deployment types, throughput capacities and storage limits of the
cluster's shared home file system, and the NFS ports its clients reach.

Shared by validation, the storage stack and the plan report. Sources: the FSx API Reference
(CreateFileSystemOpenZFSConfiguration: DeploymentType, ThroughputCapacity; CreateFileSystem:
StorageCapacity, "from 64 GiB up to 524,288 GiB (512 TiB)"), botocore's FSx model (the same
enumerations), and the FSx for OpenZFS User Guide ("Mounting from Linux clients": NFS v4.1 on the
root volume's path /fsx). The NFS ports and the export's options are the storage construct's
(fmcluster_cdk/constructs/storage/openzfs.py).
"""

from __future__ import annotations

from functools import cache

# Throughput capacity in MB/s by deployment type (ThroughputCapacity). The 2 types add an NVMe read
# cache (L2ARC); the HA types run a standby file server in the same AZ that takes over within
# seconds (during maintenance too) and cost twice as much. MULTI_AZ_1 is left out: it needs a
# second subnet and the route tables of both AZs, and every node of the cluster is in one AZ.
THROUGHPUT_MBPS = {
    "SINGLE_AZ_2": (160, 320, 640, 1280, 2560, 3840, 5120, 7680, 10240),
    "SINGLE_AZ_HA_2": (160, 320, 640, 1280, 2560, 3840, 5120, 7680, 10240),
    "SINGLE_AZ_1": (64, 128, 256, 512, 1024, 2048, 3072, 4096),
    "SINGLE_AZ_HA_1": (64, 128, 256, 512, 1024, 2048, 3072, 4096),
}
DEPLOYMENT_TYPES = tuple(THROUGHPUT_MBPS)
MIN_CAPACITY_GIB, MAX_CAPACITY_GIB = 64, 524288  # SSD storage of one file system
COMPRESSION = ("LZ4", "ZSTD", "NONE")
ROOT_VOLUME_PATH = "/fsx"  # what the root volume is exported as (DNS_NAME:/fsx)
NFS_VERSION = "4.1"  # the mount the User Guide shows; every NFS client of the node images speaks it
# How every client mounts it (the Slurm nodes' fstab, the Kubernetes PersistentVolume): NFS 4.1, with
# the options AWS's ParallelCluster mounts FSx for OpenZFS with (1 MiB reads and writes; a hard
# mount retried every 60 s, twice, before it reports: a home that goes away for a moment makes
# programs wait, never fail).
MOUNT_OPTIONS = (f"nfsvers={NFS_VERSION}", "rsize=1048576", "wsize=1048576", "hard", "timeo=600", "retrans=2")


def default_throughput(deployment_type: str) -> int:
    """The least throughput capacity of a deployment type: a home file system serves shells,
    editors and builds, not the training data (that is on Lustre and S3)."""
    return THROUGHPUT_MBPS[deployment_type][0]


# A team's own volume (Kubernetes with teams): a child of the root volume, named after the team's
# namespace (a volume name is letters, digits and underscores: FSx for OpenZFS User Guide, "Creating
# an Amazon FSx for OpenZFS volume"), exported at the root volume's path and its name, with root
# squashed (a team member's pod running as root writes as nobody, and reaches no other volume).
TEAM_EXPORT_OPTIONS = ("rw", "crossmnt", "root_squash")


def team_volume_name(namespace: str) -> str:
    """The OpenZFS volume of a team's namespace."""
    return namespace.replace("-", "_")


def team_volume_path(namespace: str) -> str:
    """Where a team's volume is exported: ROOT_VOLUME_PATH/NAME (DNS_NAME:/fsx/NAME)."""
    return f"{ROOT_VOLUME_PATH}/{team_volume_name(namespace)}"


def source(dns_name: str) -> str:
    """What a client mounts: the root volume on the file system's DNS name."""
    return f"{dns_name}:{ROOT_VOLUME_PATH}"


# OpenZFSConfiguration properties CloudFormation changes in place under other names than
# UpdateFileSystem's: Options (what deleting the file system deletes with it) is CloudFormation's
# own; RouteTableIds goes through UpdateFileSystem's AddRouteTableIds and RemoveRouteTableIds.
CLOUDFORMATION_ONLY = frozenset({"Options", "RouteTableIds"})


@cache
def openzfs_updatable() -> frozenset[str]:
    """The OpenZFSConfiguration properties of an existing file system that change in place: the
    members of UpdateFileSystemOpenZFSConfiguration in botocore's FSx model (CloudFormation updates
    AWS::FSx::FileSystem through UpdateFileSystem), and CLOUDFORMATION_ONLY. Every other one
    (DeploymentType, RootVolumeConfiguration: the root volume's compression and NFS exports,
    PreferredSubnetId, ...) is set at creation: changing it replaces the file system."""
    import botocore.session  # only `fmcluster diff` asks: validate never loads botocore
    from botocore.model import StructureShape

    shape = botocore.session.get_session().get_service_model("fsx").shape_for("UpdateFileSystemOpenZFSConfiguration")
    assert isinstance(shape, StructureShape)
    return frozenset(shape.members) | CLOUDFORMATION_ONLY
