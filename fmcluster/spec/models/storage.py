"""The spec's `storage` section: S3 buckets, the FSx for Lustre file system and its links, the
shared home (FSx for OpenZFS).

No `from __future__ import annotations` here (fmcluster.spec.models): pydantic must not
evaluate string annotations when it builds the models.
"""

from typing import Literal, Optional

from pydantic import Field, model_validator

from fmcluster.facts import fsx, openzfs
from fmcluster.spec.models.base import Model
from fmcluster.spec.models.formats import AbsPath, BucketName, LinkPath, MetadataIops, S3Event, S3Prefix, Text


class BucketSpec(Model):
    """An S3 bucket of the cluster, in NAME-storage (retained when the stack is deleted)."""

    name: BucketName = Field(description=(
        "short name; the S3 name is NAME-BUCKET-ACCOUNT-REGIONCODE (REGIONCODE: the region's AZ ID prefix)"))
    versioned: bool = Field(default=False, description="S3 versioning")


class LustreLink(Model):
    """A data repository association: a file-system path linked to an S3 bucket (and prefix)."""

    bucket: Text = Field(description="a bucket of storage.buckets, by name")
    path: LinkPath = Field(description=(
        "the file-system path linked to the bucket, such as /datasets: distinct, not nested in another link's; "
        "/ (the whole file system) only as the one link"))
    prefix: S3Prefix = Field(default="", description=(
        "S3 key prefix inside the bucket ('' for the whole bucket); each link a distinct bucket and prefix"))
    import_: list[S3Event] = Field(default=[], alias="import", description=(
        "S3 events imported into the file system automatically: NEW, CHANGED, DELETED"))
    export: list[S3Event] = Field(default=[], description=(
        "file-system events exported to the bucket automatically: NEW, CHANGED, DELETED"))


class LustreSpec(Model):
    """An FSx for Lustre file system in NAME-storage, linked to the buckets by data repository
    associations."""

    storage_capacity_gib: int = Field(default=4800, gt=0, description=(
        "storage capacity in GiB, which can only grow: 1200 or a multiple of 2400; EFA file systems: a multiple "
        "of 4800 (1000 MB/s/TiB), 9600 (500), 19200 (250) or 38400 (125)"))
    deployment_type: Literal["PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2"] = Field(
        default="PERSISTENT_2", description="PERSISTENT_2 (SSD), PERSISTENT_1 or SCRATCH_2")
    throughput_per_tib: Optional[int] = Field(default=None, description=(
        "throughput in MB/s per TiB of storage: PERSISTENT_2 125, 250, 500 or 1000 (default 250); "
        "PERSISTENT_1 50, 100 or 200 (default 200); SCRATCH_2 fixed"))
    compression: Literal["LZ4", "NONE"] = Field(default="LZ4", description="data compression: LZ4 or NONE")
    metadata_iops: MetadataIops = Field(default="auto", description=(
        "PERSISTENT_2 only: auto, or 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000"))
    efa: bool = Field(default=False, description=(
        "an EFA-enabled file system: PERSISTENT_2 only, needs an EFA node group, set at creation"))
    mount_path: AbsPath = Field(default="/fsx", description="where the nodes mount the file system")
    links: list[LustreLink] = Field(default=[], description="data repository associations, at most 8")

    @model_validator(mode="after")
    def _resolve_throughput(self) -> "LustreSpec":
        if self.throughput_per_tib is None:
            default = fsx.DEFAULT_THROUGHPUT_PER_TIB.get(self.deployment_type)
            object.__setattr__(self, "throughput_per_tib", default)
        return self

    @property
    def throughput_mbps(self) -> float:
        return fsx.throughput_mbps(self.storage_capacity_gib, self.deployment_type, self.throughput_per_tib)


class HomeSpec(Model):
    """A shared home: an FSx for OpenZFS file system in NAME-storage, mounted at /home on every
    node (Slurm: compute and login nodes, the HyperPod controller; Kubernetes: a PersistentVolume
    and its claim `home`). Retained like the other data."""

    storage_capacity_gib: int = Field(default=512, ge=openzfs.MIN_CAPACITY_GIB, le=openzfs.MAX_CAPACITY_GIB,
                                      description=(
        "SSD storage in GiB, 64 to 524288; it can grow later but never shrink (default 512: about 20 GiB "
        "of code, environments and results for each of some 25 users; data sets belong on Lustre or S3)"))
    deployment_type: Literal["SINGLE_AZ_2", "SINGLE_AZ_HA_2", "SINGLE_AZ_1", "SINGLE_AZ_HA_1"] = Field(
        default="SINGLE_AZ_2", description=(
            "SINGLE_AZ_2 (NVMe read cache; one file server, replaced on failure), SINGLE_AZ_HA_2 (a standby "
            "server in the same AZ takes over within seconds; twice the price), SINGLE_AZ_1 or SINGLE_AZ_HA_1"))
    throughput_mbps: Optional[int] = Field(default=None, description=(
        "throughput capacity in MB/s: SINGLE_AZ_2 and SINGLE_AZ_HA_2 160, 320, 640, 1280, 2560, 3840, 5120, "
        "7680 or 10240 (default 160); SINGLE_AZ_1 and SINGLE_AZ_HA_1 64, 128, 256, 512, 1024, 2048, 3072 or "
        "4096 (default 64); it can change later"))
    compression: Literal["LZ4", "ZSTD", "NONE"] = Field(default="LZ4", description=(
        "data compression of the root volume: LZ4 (fast), ZSTD (smaller, more server CPU) or NONE"))

    @model_validator(mode="after")
    def _resolve_throughput(self) -> "HomeSpec":
        if self.throughput_mbps is None:
            object.__setattr__(self, "throughput_mbps", openzfs.default_throughput(self.deployment_type))
        return self


class StorageSpec(Model):
    """What holds data, in NAME-storage: retained and protected, so compute can be rebuilt freely."""

    buckets: list[BucketSpec] = Field(default=[], description="S3 buckets (datasets, checkpoints, ...)")
    lustre: Optional[LustreSpec] = Field(default=None, description="an FSx for Lustre file system (none by default)")
    home: Optional[HomeSpec] = Field(default=None, description=(
        "a shared home: FSx for OpenZFS mounted at /home on every node (none by default); or set "
        "storage.lustre.mount_path to /home instead, not both"))
    kms: bool = Field(default=False, description=(
        "a customer-managed KMS key in NAME-storage for the buckets and the file system"))
