"""FSx for Lustre facts: capacity and throughput grids, metadata IOPS, EFA increments, servers.

Shared by validation, subnet sizing and the plan report (FSx for Lustre User Guide; CreateFileSystem API).
"""

from __future__ import annotations

import math
from functools import cache

MAX_LINKS = 8  # data repository associations per file system (hard limit)
THROUGHPUT_PER_TIB = {"PERSISTENT_2": (125, 250, 500, 1000), "PERSISTENT_1": (50, 100, 200)}
DEFAULT_THROUGHPUT_PER_TIB = {"PERSISTENT_2": 250, "PERSISTENT_1": 200}
SCRATCH_THROUGHPUT_PER_TIB = 200
METADATA_IOPS_FIXED = (1500, 3000, 6000, 12000)
METADATA_IOPS_STEP, METADATA_IOPS_MAX = 12000, 192000
SSD_SERVER_GIB = 2400  # storage behind one file server (SSD, non-EFA)
# EFA-enabled PERSISTENT_2: storage per file server, and so the capacity increment, by throughput tier
EFA_SERVER_GIB = {1000: 4800, 500: 9600, 250: 19200, 125: 38400}
# Data repository associations exist on every Lustre 2.12 and 2.15 file system except SCRATCH_1
# (FSx API Reference, CreateDataRepositoryAssociation): on every deployment type the spec offers,
# since fmcluster makes 2.15 file systems. Each needs its own file-system path (not nested in
# another's; `/` only as the one link) and its own S3 bucket or prefix.


def capacity_increment(efa: bool, throughput_per_tib: int | None) -> int:
    return EFA_SERVER_GIB.get(throughput_per_tib or 0, SSD_SERVER_GIB) if efa else SSD_SERVER_GIB


def capacity_ok(gib: int, efa: bool = False, throughput_per_tib: int | None = None) -> bool:
    """SSD: 1,200 GiB or a multiple of 2,400 GiB; EFA: a multiple of the tier's increment."""
    step = capacity_increment(efa, throughput_per_tib)
    if efa:
        return gib > 0 and gib % step == 0
    return gib == 1200 or (gib > 0 and gib % step == 0)


def metadata_iops_ok(iops: int) -> bool:
    return iops in METADATA_IOPS_FIXED or (0 < iops <= METADATA_IOPS_MAX and iops % METADATA_IOPS_STEP == 0)


def file_servers(gib: int, efa: bool = False, throughput_per_tib: int | None = None) -> int:
    return max(1, math.ceil(gib / capacity_increment(efa, throughput_per_tib)))


def addresses(gib: int, efa: bool = False, throughput_per_tib: int | None = None) -> int:
    """Addresses a file system takes in its subnet: about one per file server, plus metadata
    servers and room for FSx to replace servers during maintenance (a safe estimate: FSx does
    not publish an exact figure)."""
    return file_servers(gib, efa, throughput_per_tib) + 4


def throughput_mbps(gib: int, deployment_type: str, throughput_per_tib: int | None) -> float:
    """Aggregate baseline throughput: capacity in TiB x per-TiB throughput."""
    per_tib = throughput_per_tib or SCRATCH_THROUGHPUT_PER_TIB
    return gib / 1024 * per_tib


# The most the file servers' network carries, MB/s per TiB of storage: the burst figure where a
# deployment has one, else its baseline (FSx for Lustre User Guide, "Performance characteristics
# of SSD and HDD storage classes", ssd-storage.html: SCRATCH_2 200 baseline / 1,300 burst;
# PERSISTENT_2 125: 320 / 1,300, 250: 640 / 1,300, 500: 1,300, 1000: 2,600; previous-generation
# PERSISTENT_1 50: 250 / 1,300, 100: 500 / 1,300, 200: 750 / 1,300; some Regions burst to 530
# only). Reads served from the servers' memory reach it; the disks' throughput is below it
# (PERSISTENT_2: 125 to 1,000 MB/s/TiB baseline, 500 burst for 125 and 250).
NETWORK_MBPS_PER_TIB = {("SCRATCH_2", None): 1300, ("PERSISTENT_2", 125): 1300, ("PERSISTENT_2", 250): 1300,
                        ("PERSISTENT_2", 500): 1300, ("PERSISTENT_2", 1000): 2600, ("PERSISTENT_1", 50): 1300,
                        ("PERSISTENT_1", 100): 1300, ("PERSISTENT_1", 200): 1300}


def network_throughput_mbps(gib: int, deployment_type: str, throughput_per_tib: int | None) -> float:
    """The most the file system's servers can send or receive, MB/s: capacity in TiB x its
    network throughput per TiB (burst where it has one)."""
    per_tib = None if deployment_type == "SCRATCH_2" else throughput_per_tib
    return gib / 1024 * NETWORK_MBPS_PER_TIB[(deployment_type, per_tib)]


@cache
def lustre_updatable() -> frozenset[str]:
    """The LustreConfiguration properties of an existing file system that FSx changes in place:
    the members of UpdateFileSystemLustreConfiguration in botocore's FSx model (the UpdateFileSystem
    API; CloudFormation updates AWS::FSx::FileSystem through it). Every other LustreConfiguration
    property (DeploymentType, EfaEnabled, DriveCacheType, ImportPath, ...) is set at creation only:
    changing it replaces the file system. StorageCapacity only grows (UpdateFileSystem increases it)."""
    import botocore.session  # only `fmcluster diff` asks: validate never loads botocore
    from botocore.model import StructureShape

    shape = botocore.session.get_session().get_service_model("fsx").shape_for("UpdateFileSystemLustreConfiguration")
    assert isinstance(shape, StructureShape)  # a structure in every botocore release that has it
    return frozenset(shape.members)
