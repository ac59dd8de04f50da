"""The cluster spec (v1): pydantic models with every default resolved.

Field-level formats (names, AZ IDs, CIDRs, reservation ids, instance types) are checked here,
so they are reported together with type errors. Rules that relate several fields live in
`fmcluster.spec.rules`.

No `from __future__ import annotations` here: with it every field annotation is a string that
pydantic must evaluate when it builds the models, about a third of the time `fmcluster validate`
spends in this module.
"""

import ipaddress
import re
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainValidator, model_validator
from pydantic_core import PydanticCustomError

from fmcluster.facts import catalog, controlplanes, fsx, health, openzfs, regions, software, teams


def _fail(kind: str, message: str, hint: str | None = None) -> PydanticCustomError:
    """A format error; its rule id (README, "What validate checks") is the kind, with '-'."""
    context = {"rule": kind.replace("_", "-")}
    if hint:
        context["hint"] = hint
    return PydanticCustomError(kind, message, context)


def _pattern(kind: str, regex: str, what: str, hint: str | None = None) -> AfterValidator:
    # re compiles (and caches) the pattern on first use: most specs use few of these formats,
    # and compiling them all on import would cost every `fmcluster validate` run
    def check(value: str) -> str:
        if not re.fullmatch(regex, value):
            raise _fail(kind, f"'{value}' is not a valid {what}", hint)
        return value

    return AfterValidator(check)


def _az_id(value: str) -> str:
    if re.match(regions.AZ_ID, value) or re.match(regions.LOCAL_ZONE_ID, value):
        return value
    name = re.match(regions.AZ_NAME, value)
    if name:
        example = regions.example_az_id(name.group(1))
        raise _fail("az_id", f"'{value}' looks like an Availability Zone name, not an AZ ID",
                    f"use the AZ ID, such as {example}: AZ names differ between accounts, "
                    "AZ IDs do not (aws ec2 describe-availability-zones shows both)")
    raise _fail("az_id", f"'{value}' is not an Availability Zone ID",
                "AZ IDs look like use1-az4; Local Zone IDs like use1-dfw2-az1")


def _region(value: str) -> str:
    if regions.is_supported(value):
        return value
    if value in regions.region_names():
        raise _fail("region", f"fmcluster cannot name the Availability Zone IDs of region '{value}' "
                              f"(partition {regions.partition(value)})",
                    "its name does not follow AWS's rule for AZ ID prefixes (us-east-1: use1); add the "
                    "prefix that `aws ec2 describe-availability-zones` shows as ZoneId to "
                    "fmcluster.facts.regions.AZ_ID_PREFIX_EXCEPTIONS")
    if re.match(regions.AZ_NAME, value):
        raise _fail("region", f"'{value}' is an Availability Zone name, not a region",
                    f"a region has no zone letter: {value[:-1]}")
    supported = [r for r in regions.region_names() if regions.is_supported(r)]
    close = _close_regions(value, supported)
    if close:
        raise _fail("region", f"'{value}' is not an AWS region fmcluster knows",
                    "did you mean " + ", ".join(f"'{r}'" for r in close[:-1]) + (" or " if len(close) > 1 else "")
                    + f"'{close[-1]}'?")
    raise _fail("region", f"'{value}' is not an AWS region fmcluster knows",
                "known regions (botocore's list: a newer botocore knows newer regions): " + ", ".join(supported))


def region_problem(value: str) -> tuple[str, str | None] | None:
    """(message, hint) of a region a spec could not name (a typo gets its did-you-mean), as
    validate words it; None for a supported region. For `fmcluster init --region`."""
    try:
        _region(value)
    except PydanticCustomError as exc:
        hint = exc.context.get("hint") if exc.context else None
        return exc.message(), str(hint) if hint else None
    return None


def _close_regions(value: str, supported: list[str]) -> list[str]:
    """The regions a mistyped one most likely meant (us-east1, US-EAST-1, eu-centrl-1): the same
    letters in lower case, else the closest names by difflib's ratio."""
    import difflib  # only for a spec with a wrong region

    typed = value.strip().lower().replace("_", "-")
    if typed in supported:
        return [typed]
    scored = sorted(((difflib.SequenceMatcher(None, typed, r).ratio(), r) for r in supported), reverse=True)
    best = scored[0][0] if scored else 0.0
    # the closest, and those as close (us-east-3: us-east-1 and us-east-2), not the next best
    return sorted(r for ratio, r in scored if ratio >= 0.8 and ratio >= best - 0.02)[:3]


def _cidr(value: str) -> str:
    try:
        net = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise _fail("cidr", f"'{value}' is not an IPv4 CIDR block ({exc})",
                    "write the network address and prefix, such as 10.0.0.0/16") from None
    if not 16 <= net.prefixlen <= 24:
        raise _fail("cidr", f"a VPC prefix of /{net.prefixlen} is out of range",
                    "use a prefix from /16 (largest VPC AWS allows) to /24")
    return value


def _access_cidr(value: str) -> str:
    """An IPv4 CIDR block of any size (a source of traffic, not a VPC's range)."""
    try:
        ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise _fail("cidr", f"'{value}' is not an IPv4 CIDR block ({exc})",
                    "write the network address and prefix, such as 203.0.113.0/24 (one address: /32)") from None
    return value


def _instance_type(value: str) -> str:
    if catalog.get(value):
        return value
    close = catalog.closest(value)
    hint = f"did you mean {close}? " if close else ""
    raise _fail("instance_type", f"unknown instance type '{value}'",
                hint + catalog.describe_known())


def _ultraserver_type(value: str) -> str:
    if value in catalog.ULTRASERVERS:
        return value
    raise _fail("ultraserver_type", f"unknown UltraServer type '{value}'",
                "UltraServer types: " + ", ".join(catalog.ULTRASERVERS))


def _mount_path(value: str) -> str:
    parts = value.strip("/").split("/")
    if not re.fullmatch(r"/[A-Za-z0-9._/-]*", value) or "//" in value or value == "/" or \
            any(p in (".", "..") for p in parts):
        raise _fail("path", f"'{value}' is not an absolute directory path", "such as /fsx")
    return value.rstrip("/") or value


def _link_path(value: str) -> str:
    # a data repository association may link the file system's root, `/`, as its only link
    return value if value == "/" else _mount_path(value)


def _s3_prefix(value: str) -> str:
    if any(ord(c) < 0x20 or c in "\x7f\x85\u2028\u2029" for c in value):
        raise _fail("prefix", "an S3 prefix cannot hold control characters or line breaks")
    if len(value.encode("utf-8")) > 1024:
        raise _fail("prefix", f"an S3 prefix is at most 1024 bytes (the longest S3 key), not {len(value.encode())}")
    return value


Name = Annotated[str, _pattern("name", r"[a-z][a-z0-9-]{0,31}", "name",
                               "lower-case letters, digits and '-', starting with a letter, at most 32")]
GroupName = Annotated[str, _pattern("name", r"[a-z][a-z0-9-]{0,24}", "node group name",
                                    "lower-case letters, digits and '-', starting with a letter, "
                                    "at most 25 (it names a Slurm partition or Kubernetes label)")]
BucketName = Annotated[str, _pattern("name", r"[a-z0-9][a-z0-9-]{0,19}", "bucket name",
                                     "lower-case letters, digits and '-', at most 20; the S3 name "
                                     "is derived from the cluster name and this")]
AzId = Annotated[str, AfterValidator(_az_id)]
Region = Annotated[str, AfterValidator(_region)]
Cidr = Annotated[str, AfterValidator(_cidr)]
AccessCidr = Annotated[str, AfterValidator(_access_cidr)]
InstanceTypeName = Annotated[str, AfterValidator(_instance_type)]
UltraServerType = Annotated[str, AfterValidator(_ultraserver_type)]
AbsPath = Annotated[str, AfterValidator(_mount_path)]
LinkPath = Annotated[str, AfterValidator(_link_path)]
S3Prefix = Annotated[str, AfterValidator(_s3_prefix)]
Account = Annotated[str, _pattern("account", r"[0-9]{12}", "AWS account id",
                                  "twelve digits, quoted: account: \"111122223333\"")]
ReservationId = Annotated[str, _pattern("reservation_id", r"cr-[0-9a-f]{17}", "capacity reservation id",
                                        "such as cr-0123456789abcdef0")]
ResourceGroupArn = Annotated[str, _pattern(
    "arn", r"arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:[0-9]{12}:group/[A-Za-z0-9._-]+",
    "resource group ARN", "arn:aws:resource-groups:REGION:ACCOUNT:group/NAME")]
TrainingPlanArn = Annotated[str, _pattern(
    "arn", r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:training-plan/[A-Za-z0-9-]+",
    "training plan ARN", "arn:aws:sagemaker:REGION:ACCOUNT:training-plan/NAME")]
RoleArn = Annotated[str, _pattern("arn", r"arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]+",
                                  "IAM role ARN", "arn:aws:iam::ACCOUNT:role/NAME")]
Email = Annotated[str, _pattern("email", r"[^@\s]+@[^@\s]+\.[^@\s]+", "e-mail address")]
AmiId = Annotated[str, _pattern("ami", r"ami-[0-9a-f]{8,17}", "AMI id", "such as ami-0123456789abcdef0")]
Version = Annotated[str, _pattern("version", r"[0-9]+\.[0-9]+", "version",
                                  "quote it, so YAML keeps it a string: version: \"25.05\"")]
S3Event = Literal["NEW", "CHANGED", "DELETED"]


def _metadata_iops(value: Any) -> int | str:
    if (isinstance(value, str) and value == "auto") or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _fail("metadata_iops", f"expected 'auto' or a number of IOPS, got {value!r}",
                "auto, or 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000")


MetadataIops = Annotated[Union[int, str], PlainValidator(_metadata_iops,
                                                         json_schema_input_type=Union[
    Literal["auto"], Annotated[int, Field(ge=1500, le=192000)]])]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)


class NetworkSpec(Model):
    """The VPC: a private subnet per AZ ID, a public subnet and NAT gateway for egress."""

    vpc_cidr: Cidr = Field(default="10.0.0.0/16", description=(
        "IPv4 CIDR block of the VPC, /16 to /24; the GPU AZ's private subnet is its first half"))
    extra_availability_zone_ids: list[AzId] = Field(default=[], description=(
        "more AZ IDs, each with its own subnet, for control planes that need two (eks, hyperpod-eks); "
        "Availability Zones of the region, not Local Zones"))


class BucketSpec(Model):
    """An S3 bucket of the cluster, in NAME-storage (retained when the stack is deleted)."""

    name: BucketName = Field(description=(
        "short name; the S3 name is NAME-BUCKET-ACCOUNT-REGIONCODE (REGIONCODE: the region's AZ ID prefix)"))
    versioned: bool = Field(default=False, description="S3 versioning")


class LustreLink(Model):
    """A data repository association: a file-system path linked to an S3 bucket (and prefix)."""

    bucket: str = Field(description="a bucket of storage.buckets, by name")
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


class LoginSpec(Model):
    """Login nodes (Slurm) or system nodes (Kubernetes)."""

    instance_type: InstanceTypeName = Field(default="m7i.2xlarge", description="a type of the instance catalog")
    count: int = Field(default=1, ge=0, le=16, description="how many, 0 to 16")


EVERYONE = "0.0.0.0/0"  # every IPv4 address: the default of the public API endpoint (EKS's, CDK's)


def written(model: BaseModel, *path: str) -> bool:
    """Whether the spec's file gives the field at `path` under `model` (else it holds its
    default): a rule reports on a field the user wrote where one causes the problem."""
    for name in path:
        if name not in model.model_fields_set:
            return False
        model = getattr(model, name)
    return True


def is_everyone(cidr: str) -> bool:
    """Whether an access CIDR block (AccessCidr) admits every IPv4 address (a /0)."""
    return ipaddress.IPv4Network(cidr).prefixlen == 0


class OrchestratorSpec(Model):
    """The control plane."""

    type: Literal["pcs", "hyperpod-slurm", "eks", "hyperpod-eks"] = Field(description=(
        "pcs (AWS Parallel Computing Service, Slurm), hyperpod-slurm (SageMaker HyperPod, Slurm), "
        "eks (Amazon EKS) or hyperpod-eks (SageMaker HyperPod on EKS)"))
    version: Optional[Version] = Field(default=None, description=(
        "Slurm version (pcs, hyperpod-slurm) or Kubernetes version (eks, hyperpod-eks), quoted, such as "
        "\"25.05\"; default: the newest the control plane supports"))
    login: LoginSpec = Field(default=LoginSpec(), description="login nodes (Slurm) or system nodes (Kubernetes)")
    admin_role_arn: Optional[RoleArn] = Field(default=None, description=(
        "Kubernetes: an IAM role given cluster-admin access (an access entry)"))
    endpoint_access: Literal["public-and-private", "private"] = Field(
        default="public-and-private", description=(
            "Kubernetes: access to the API endpoint: public-and-private (from the VPC, and from the internet "
            "addresses of public_access_cidrs) or private (from the VPC only)"))
    public_access_cidrs: list[AccessCidr] = Field(default=[EVERYONE], min_length=1, description=(
        "Kubernetes, endpoint_access public-and-private: the IPv4 CIDR blocks that may reach the public API "
        "endpoint, such as your office's or VPN's; default everyone (0.0.0.0/0, which validate warns of)"))
    namespace: str = Field(default="default", description=(
        "Kubernetes: the namespace of the Lustre PersistentVolumeClaim and the Kueue LocalQueue"))

    @model_validator(mode="after")
    def _resolve_version(self) -> "OrchestratorSpec":
        if self.version is None:
            object.__setattr__(self, "version", controlplanes.get(self.type).default_version)
        return self

    @property
    def control_plane(self) -> controlplanes.ControlPlane:
        return controlplanes.get(self.type)


class CapacitySpec(Model):
    """How a node group's instances are bought."""

    type: Literal["on-demand", "reservation", "capacity-block", "spot"] = Field(default="on-demand", description=(
        "on-demand, reservation (an On-Demand Capacity Reservation), capacity-block (a Capacity Block for ML) "
        "or spot"))
    reservation_id: Optional[ReservationId] = Field(default=None, description=(
        "cr-... of an On-Demand Capacity Reservation or Capacity Block"))
    reservation_resource_group_arn: Optional[ResourceGroupArn] = Field(default=None, description=(
        "a resource group of capacity reservations, instead of one reservation_id"))
    training_plan_arn: Optional[TrainingPlanArn] = Field(default=None, description=(
        "HyperPod: reserved capacity from a SageMaker training plan"))
    ultraserver_type: Optional[UltraServerType] = Field(default=None, description=(
        "an UltraServer Capacity Block (or HyperPod training plan): its UltraServer type, such as u-p6e-gb200x72"))
    ultraserver_count: int = Field(default=1, ge=1, description=(
        "how many UltraServers the block holds; the group's count is at most this many UltraServers' instances"))


class NodeGroupSpec(Model):
    """A group of instances of one type: a Slurm partition or a Kubernetes node group, each in a
    nested stack of NAME-cluster with its launch template."""

    name: GroupName = Field(description=(
        "[a-z][a-z0-9-]*, at most 25: the Slurm partition or Kubernetes node-group label"))
    instance_type: InstanceTypeName = Field(description="a type of the instance catalog, such as p5.48xlarge")
    count: Optional[int] = Field(default=None, ge=0, description=(
        "fixed size; or min_count / max_count for an elastic group"))
    min_count: Optional[int] = Field(default=None, ge=0, description="elastic group: the fewest instances")
    max_count: Optional[int] = Field(default=None, ge=0, description="elastic group: the most instances")
    capacity: CapacitySpec = Field(default=CapacitySpec(), description="how the instances are bought")
    placement_group: str = Field(default="auto", description=(
        "auto (a cluster placement group for on-demand and spot EFA groups; none for Capacity Blocks and "
        "reservations, which are placed already), none, or the name of an existing group"))
    efa: Optional[bool] = Field(default=None, description=(
        "use EFA on this group; default: true where the instance type supports EFA"))
    root_volume_gib: int = Field(default=512, ge=32, le=16384, description="encrypted gp3 root volume, in GiB")
    ami_id: Optional[AmiId] = Field(default=None, description=(
        "an image instead of the control plane's published one"))
    labels: dict[str, str] = Field(default={}, description="Kubernetes node labels")
    team: Optional[str] = Field(default=None, description=(
        "a team of `teams` that has the group to itself: all its GPUs are that team's, and its instances "
        "carry the team's cost allocation tag; default: shared by the teams"))

    @model_validator(mode="after")
    def _resolve_efa(self) -> "NodeGroupSpec":
        if self.efa is None:
            entry = catalog.get(self.instance_type)
            object.__setattr__(self, "efa", bool(entry and entry.efa_supported))
        return self

    @property
    def instance(self) -> catalog.InstanceType:
        return catalog.catalog()[self.instance_type]

    @property
    def min_nodes(self) -> int:
        return self.count if self.count is not None else (self.min_count or 0)

    @property
    def max_nodes(self) -> int:
        if self.count is not None:
            return self.count
        return self.max_count if self.max_count is not None else self.min_nodes


class ImagesSpec(Model):
    """The node images of the Slurm control planes (NAME-images): built with EC2 Image Builder from
    the control plane's base image, with the software every node needs installed once."""

    revision: int = Field(default=0, ge=0, le=9999, description=(
        "raise it to bake new node images from the newest base image (pcs, hyperpod-slurm); node groups "
        "roll to them as their nodes are replaced. Images are also rebuilt when fmcluster's software "
        "pins or the Slurm version change; a new revision also builds the reference GPU image again"))
    reference: bool = Field(default=True, description=(
        "build the reference GPU image (CUDA, EFA, NCCL, nccl-tests, fio: the acceptance kit's jobs run it) "
        "in NAME-images with EC2 Image Builder, for each architecture of the GPU node groups, into an ECR "
        "repository of the stack's; false leaves it out (about an hour of a first deploy), and the kit's "
        "jobs then need IMAGE set to an image of yours"))


class ObservabilitySpec(Model):
    """Metrics, dashboards and alerts, in NAME-observability."""

    prometheus: bool = Field(default=True, description=(
        "an Amazon Managed Service for Prometheus workspace with the GPU-health alert rules"))
    grafana: bool = Field(default=False, description=(
        "an Amazon Managed Grafana workspace with fmcluster's dashboards (sign-in through IAM Identity Center)"))
    alert_email: Optional[Email] = Field(default=None, description=(
        "who is paged by the alerts: an e-mail subscription of the alert topic (confirm it after the first deploy)"))


class HealthSpec(Model):
    """Node health while the cluster runs: a check on every GPU node in service, faulty nodes drained
    and replaced without a person, and a deep check of new capacity before its first job."""

    check_minutes: int = Field(default=health.CHECK_MINUTES, ge=health.CHECK_MINUTES_RANGE[0],
                               le=health.CHECK_MINUTES_RANGE[1], description=(
        "how often each GPU node in service is checked (GPUs, XID errors, ECC, NVLink, EFA, file "
        "systems; a DCGM diagnostic when it is idle), in minutes"))
    replace: bool = Field(default=True, description=(
        "replace a node drained for a hardware fault once its jobs have ended (false: it stays drained "
        "for a person to look at)"))
    max_replacing: int = Field(default=health.MAX_REPLACING, ge=1, le=100, description=(
        "at most this many nodes of the cluster are being replaced at once; a replacement counts for "
        f"{health.REPLACE_WINDOW_MINUTES} minutes"))
    deep_check: bool = Field(default=True, description=(
        "a new node (a new Capacity Block, a scale-out, a replacement) runs a DCGM diagnostic and a "
        "node-local NCCL test before it takes jobs"))


ServedModelName = Annotated[str, _pattern("name", r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}", "served model name",
                                          "letters, digits and '.', '_', ':', '/', '-', at most 128, such as "
                                          "Llama-3.1-70B-Instruct: the name clients ask the API for")]
ImageRef = Annotated[str, _pattern("name", r"[A-Za-z0-9][A-Za-z0-9._/:@#+-]{0,254}", "container image",
                                   "a registry reference, such as vllm/vllm-openai:v0.33.0 (no spaces or quotes)")]


class ServedModelSpec(Model):
    """The model a `serving` section serves: its weights on the shared file system and their size."""

    name: ServedModelName = Field(description=(
        "the name it is served as (vLLM --served-model-name), such as Llama-3.1-70B-Instruct"))
    path: AbsPath = Field(description=(
        "the directory of its weights (a Hugging Face checkpoint) on the FSx for Lustre file system, under "
        "storage.lustre.mount_path, such as /fsx/models/Llama-3.1-70B-Instruct"))
    parameters_billions: float = Field(gt=0, le=100000, description=(
        "its parameter count in billions, such as 70: with the dtype, the size of its weights"))
    dtype: Literal["bf16", "fp16", "fp8", "fp4"] = Field(default="bf16", description=(
        "the weights' data type: bf16 or fp16 (2 bytes a parameter), fp8 (1), fp4 (0.5: on GPUs with FP4 "
        "only, B200, B300, GB200)"))


class ServingSpec(Model):
    """Inference on the cluster: one model served by vLLM on a GPU node group, in replicas of
    tensor-parallel x pipeline-parallel GPUs that `fmcluster plan` shows and `fmcluster jobs` writes
    the jobs of."""

    model: ServedModelSpec = Field(description="the model: its name, weights, size and data type")
    node_group: str = Field(description="the GPU node group it is served on, by name")
    replicas: Optional[int] = Field(default=None, ge=1, description=(
        "how many replicas to serve; default: as many as fit in the group at its maximum size"))
    engine: Literal["vllm"] = Field(default="vllm", description="the serving engine: vllm")
    image: ImageRef = Field(default=software.VLLM_IMAGE, description=(
        "the engine's container image (Enroot/Pyxis on Slurm, the pods' on Kubernetes); default: the vLLM "
        "release fmcluster.facts.software pins"))
    gpu_memory_utilization: float = Field(default=0.9, ge=0.5, le=0.98, description=(
        "the share of each GPU's memory vLLM takes (--gpu-memory-utilization, passed explicitly): the "
        "weights, the KV cache and activations; weights must leave at least 10% of the GPUs' memory"))
    max_model_len: Optional[int] = Field(default=None, ge=128, description=(
        "the longest context in tokens (vLLM --max-model-len); default: the model's own, which vLLM "
        "refuses to start with when the KV cache cannot hold one sequence of it"))


TeamName = Annotated[str, _pattern(
    "name", r"[a-z][a-z0-9-]{0,%d}[a-z0-9]|[a-z]" % (teams.TEAM_NAME_MAX - 2), "team name",
    "lower-case letters, digits and '-', starting with a letter, not ending with '-', at most "
    f"{teams.TEAM_NAME_MAX}: it names a Slurm account, a Kubernetes namespace and ClusterQueue")]
Member = Annotated[str, _pattern(
    "member", r"[^\s,:=]{1,64}|arn:aws[a-z-]*:iam::[0-9]{12}:[A-Za-z0-9+=,.@_/-]{1,512}", "team member",
    "a Linux user name (Slurm), or an IAM role or user ARN (Kubernetes)")]
MemberGroup = Annotated[str, _pattern("member", r"[^\s,:=]{1,64}", "group",
                                      "a Linux group (Slurm) or a Kubernetes group (Kubernetes)")]
GpuCount = Annotated[int, Field(ge=0)]
Priority = Literal[teams.PRIORITY_NAMES]  # type: ignore[valid-type]


class TeamSpec(Model):
    """A team that shares the cluster: who is in it, the GPUs it is guaranteed, whether it may
    borrow idle GPUs and lend its own, and its priority. On Slurm a team is an account with fair
    share and limits; on Kubernetes a namespace with a LocalQueue and a ClusterQueue in the
    cluster's cohort."""

    name: TeamName = Field(description=(
        "the team's name: its Slurm account, or its Kubernetes namespace and ClusterQueue"))
    members: list[Member] = Field(default=[], description=(
        "who is in it: Linux user names on Slurm (the users of its account); IAM role or user ARNs on "
        "Kubernetes (given access to its namespace)"))
    groups: list[MemberGroup] = Field(default=[], description=(
        "groups whose members are in it: Linux groups on Slurm (their members, as the login node resolves "
        "them, join its account); Kubernetes groups on Kubernetes (bound to its namespace)"))
    gpus: dict[str, GpuCount] = Field(default={}, description=(
        "GPUs guaranteed to it per GPU node group, by the group's name, such as {gpu: 64}; or `share`"))
    share: Optional[float] = Field(default=None, gt=0, le=1, description=(
        "instead of `gpus`: the fraction of every shared GPU node group guaranteed to it, such as 0.25"))
    borrow: Union[bool, GpuCount] = Field(default=True, description=(
        "whether it may use idle GPUs beyond its guarantee: true (as many as are idle), false, or at most "
        "this many more per node group"))
    lend: Union[bool, GpuCount] = Field(default=True, description=(
        "whether others may use its idle guaranteed GPUs (taken back by preemption when it needs them): "
        "true, false, or at most this many per node group"))
    priority: Priority = Field(default="normal", description=(
        "its jobs' default priority and the highest it may use: high, normal or low (low jobs are "
        "preempted first; every team may run low jobs)"))


def _reason(value: str) -> str:
    if not value.strip():
        raise _fail("reason", "the reason is blank", "say why the team accepts the risk, for reviewers")
    if any(ord(c) < 0x20 for c in value):
        raise _fail("reason", "the reason is one line, without control characters")
    return value


RuleId = Annotated[str, _pattern("rule_id", r"[a-z][a-z0-9-]{0,63}", "rule id",
                                 "as printed in brackets after the warning, such as eks-admin-role")]
Reason = Annotated[str, Field(max_length=500), AfterValidator(_reason)]


class AcceptedWarning(Model):
    """A warning the team accepts on purpose: `validate` reports it as `accepted`, with the
    reason, instead of as a warning. Only warnings can be accepted, never errors."""

    rule: RuleId = Field(description=(
        "the id of a check that reports warnings, as printed in brackets after the warning (README, "
        "What validate checks)"))
    reason: Reason = Field(description="why the risk is accepted, in a line (shown with the finding, for reviewers)")
    path: Optional[str] = Field(default=None, description=(
        "only the finding at this dotted path, such as node_groups[1].placement_group; default: every finding "
        "of the check"))


class ClusterSpec(Model):
    """One GPU cluster for foundation-model training and inference: its network, storage,
    control plane, node groups and observability."""

    model_config = ConfigDict(title="fmcluster cluster spec (v1)")

    name: Name = Field(description=(
        "[a-z][a-z0-9-]*, at most 32; prefixes every stack (NAME-network, NAME-storage, NAME-cluster, "
        "NAME-observability) and bucket"))
    region: Region = Field(description=(
        "AWS region, such as us-east-1: one of botocore's regions whose AZ IDs fmcluster can name"))
    account: Optional[Account] = Field(default=None, description=(
        "12-digit AWS account id, quoted; without it the stacks are environment-agnostic"))
    availability_zone_id: AzId = Field(description=(
        "AZ ID of the GPU capacity, such as use1-az4, not an AZ name: names differ between accounts, "
        "reservations are bound to the ID; or a Local Zone ID (use1-dfw2-az1), with the control plane in "
        "the extra AZ IDs"))
    network: NetworkSpec = Field(default=NetworkSpec(), description="the VPC")
    storage: StorageSpec = Field(default=StorageSpec(), description="S3 buckets and an FSx for Lustre file system")
    images: ImagesSpec = Field(default=ImagesSpec(), description=(
        "the baked node images of the Slurm control planes (Kubernetes node groups use EKS's own images)"))
    orchestrator: OrchestratorSpec = Field(description="the control plane")
    node_groups: list[NodeGroupSpec] = Field(min_length=1, description="the node groups, at least one")
    observability: ObservabilitySpec = Field(default=ObservabilitySpec(), description="metrics, dashboards and alerts")
    tags: dict[str, str] = Field(default={}, description="tags on every resource")
    protect: bool = Field(default=False, description=(
        "termination protection on every stack, not only NAME-storage (which always has it)"))
    serving: Optional[ServingSpec] = Field(default=None, description=(
        "a model served on a GPU node group (none by default)"))
    health: HealthSpec = Field(default=HealthSpec(), description=(
        "continuous node health checks, automatic replacement of faulty nodes and deep checks of new ones"))
    teams: list[TeamSpec] = Field(default=[], description=(
        "the teams that share the cluster, each with its guaranteed GPUs and priority (none: every user "
        "shares one queue, first come, first served)"))
    accepted_warnings: list[AcceptedWarning] = Field(default=[], description=(
        "warnings the team accepts on purpose, each with its check's id and a reason"))

    @property
    def availability_zone_ids(self) -> list[str]:
        return [self.availability_zone_id, *self.network.extra_availability_zone_ids]

    @property
    def local_zone(self) -> bool:
        """The GPU nodes are in a Local Zone: the control plane, NAT gateway and public subnets are
        in the extra (regular) AZ IDs."""
        return regions.is_local_zone(self.availability_zone_id)

    @property
    def region_zone_ids(self) -> list[str]:
        """The cluster's AZ IDs that are Availability Zones of the region (not Local Zones)."""
        return [az for az in self.availability_zone_ids if not regions.is_local_zone(az)]

    @property
    def managed_nodes(self) -> int:
        """Every node the control plane manages: the node groups at their maximum and the login
        nodes (what sizes an AWS PCS cluster and a HyperPod Slurm controller)."""
        return sum(g.max_nodes for g in self.node_groups) + self.orchestrator.login.count

    def resolved(self) -> dict[str, Any]:
        """The spec with every default filled in, as a plain mapping (what `plan` shows)."""
        return self.model_dump(mode="json", by_alias=True)


KUBERNETES_PLANES = ("eks", "hyperpod-eks")
# Fields only some control planes read (dotted paths, `[]` for every item of a list), as their
# descriptions say: a plan of another plane leaves them out of the resolved spec where the file
# does not set them.
ONLY_FOR: dict[str, tuple[str, ...]] = {
    "images": ("pcs", "hyperpod-slurm"),
    "orchestrator.admin_role_arn": KUBERNETES_PLANES,
    "orchestrator.endpoint_access": KUBERNETES_PLANES,
    "orchestrator.public_access_cidrs": KUBERNETES_PLANES,
    "orchestrator.namespace": KUBERNETES_PLANES,
    "node_groups[].labels": KUBERNETES_PLANES,
    "node_groups[].capacity.training_plan_arn": ("hyperpod-slurm", "hyperpod-eks"),
}


def json_schema() -> dict[str, Any]:
    schema = ClusterSpec.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://fmcluster.dev/schema/cluster-spec-v1.json"
    return schema
