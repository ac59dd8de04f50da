"""The cluster spec (v1): pydantic models with every default resolved.

Field-level formats (names, AZ IDs, CIDRs, reservation ids, instance types) are checked here,
so they are reported together with type errors. Rules that relate several fields live in
`fmcluster.rules`.

No `from __future__ import annotations` here: with it every field annotation is a string that
pydantic must evaluate when it builds the models, about a third of the time `fmcluster validate`
spends in this module.
"""

import ipaddress
import re
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, PlainValidator,
                      model_validator)
from pydantic_core import PydanticCustomError

from fmcluster import catalog, controlplanes, fsx, regions

SPEC_VERSION = "v1"


def _fail(kind: str, message: str, hint: str | None = None) -> PydanticCustomError:
    return PydanticCustomError(kind, message, {"hint": hint} if hint else None)


def _pattern(kind: str, regex: str, what: str, hint: str | None = None):
    # re compiles (and caches) the pattern on first use: most specs use few of these formats,
    # and compiling them all on import would cost every `fmcluster validate` run
    def check(value: str) -> str:
        if not re.fullmatch(regex, value):
            raise _fail(kind, f"'{value}' is not a valid {what}", hint)
        return value

    return AfterValidator(check)


def _az_id(value: str) -> str:
    if re.match(regions.AZ_ID, value):
        return value
    name = re.match(regions.AZ_NAME, value)
    if name:
        example = regions.example_az_id(name.group(1))
        raise _fail("az_id", f"'{value}' looks like an Availability Zone name, not an AZ ID",
                    f"use the AZ ID, such as {example}: AZ names differ between accounts, "
                    "AZ IDs do not (aws ec2 describe-availability-zones shows both)")
    raise _fail("az_id", f"'{value}' is not an Availability Zone ID",
                "AZ IDs look like use1-az4")


def _region(value: str) -> str:
    if regions.is_supported(value):
        return value
    if value in regions.region_names():
        raise _fail("region", f"fmcluster cannot name the Availability Zone IDs of region '{value}' "
                              f"(partition {regions.partition(value)})",
                    "its name does not follow AWS's rule for AZ ID prefixes (us-east-1: use1); add the "
                    "prefix that `aws ec2 describe-availability-zones` shows as ZoneId to "
                    "fmcluster.regions.AZ_ID_PREFIX_EXCEPTIONS")
    if re.match(regions.AZ_NAME, value):
        raise _fail("region", f"'{value}' is an Availability Zone name, not a region",
                    f"a region has no zone letter: {value[:-1]}")
    supported = [r for r in regions.region_names() if regions.is_supported(r)]
    raise _fail("region", f"'{value}' is not an AWS region fmcluster knows",
                "known regions (botocore's list: a newer botocore knows newer regions): " + ", ".join(supported))


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


def _instance_type(value: str) -> str:
    if catalog.get(value):
        return value
    close = catalog.closest(value)
    hint = f"did you mean {close}? " if close else ""
    raise _fail("instance_type", f"unknown instance type '{value}'",
                hint + catalog.describe_known())


def _mount_path(value: str) -> str:
    parts = value.strip("/").split("/")
    if not re.fullmatch(r"/[A-Za-z0-9._/-]*", value) or "//" in value or value == "/" or \
            any(p in (".", "..") for p in parts):
        raise _fail("path", f"'{value}' is not an absolute directory path", "such as /fsx")
    return value.rstrip("/") or value


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
InstanceTypeName = Annotated[str, AfterValidator(_instance_type)]
AbsPath = Annotated[str, AfterValidator(_mount_path)]
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
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _fail("metadata_iops", f"expected 'auto' or a number of IOPS, got {value!r}",
                "auto, or 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000")


MetadataIops = Annotated[Union[int, str], PlainValidator(_metadata_iops,
                                                         json_schema_input_type=Union[
    Literal["auto"], Annotated[int, Field(ge=1500, le=192000)]])]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)


class NetworkSpec(Model):
    vpc_cidr: Cidr = "10.0.0.0/16"
    extra_availability_zone_ids: list[AzId] = []


class BucketSpec(Model):
    name: BucketName
    versioned: bool = False


class LustreLink(Model):
    """A data repository association: a file-system path linked to an S3 bucket (and prefix)."""

    bucket: str
    path: AbsPath
    prefix: str = ""  # S3 key prefix inside the bucket
    import_: list[S3Event] = Field(default=[], alias="import")
    export: list[S3Event] = []


class LustreSpec(Model):
    storage_capacity_gib: int = Field(default=4800, gt=0)
    deployment_type: Literal["PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2"] = "PERSISTENT_2"
    throughput_per_tib: Optional[int] = None  # resolved: 250 (PERSISTENT_2), 200 (PERSISTENT_1)
    compression: Literal["LZ4", "NONE"] = "LZ4"
    metadata_iops: MetadataIops = "auto"
    efa: bool = False
    mount_path: AbsPath = "/fsx"
    links: list[LustreLink] = []

    @model_validator(mode="after")
    def _resolve_throughput(self) -> "LustreSpec":
        if self.throughput_per_tib is None:
            default = fsx.DEFAULT_THROUGHPUT_PER_TIB.get(self.deployment_type)
            object.__setattr__(self, "throughput_per_tib", default)
        return self

    @property
    def throughput_mbps(self) -> float:
        return fsx.throughput_mbps(self.storage_capacity_gib, self.deployment_type, self.throughput_per_tib)


class StorageSpec(Model):
    buckets: list[BucketSpec] = []
    lustre: Optional[LustreSpec] = None
    kms: bool = False  # a customer-managed KMS key in NAME-storage for buckets and file system


class LoginSpec(Model):
    instance_type: InstanceTypeName = "m7i.2xlarge"
    count: int = Field(default=1, ge=0, le=16)


class OrchestratorSpec(Model):
    type: Literal["pcs", "hyperpod-slurm", "eks", "hyperpod-eks"]
    version: Optional[Version] = None  # resolved to the control plane's newest supported
    login: LoginSpec = LoginSpec()
    admin_role_arn: Optional[RoleArn] = None  # EKS: cluster-admin access entry
    endpoint_access: Literal["public-and-private", "private"] = "public-and-private"
    namespace: str = "default"  # EKS: where the Lustre PersistentVolumeClaim lives

    @model_validator(mode="after")
    def _resolve_version(self) -> "OrchestratorSpec":
        if self.version is None:
            object.__setattr__(self, "version", controlplanes.get(self.type).default_version)
        return self

    @property
    def control_plane(self) -> controlplanes.ControlPlane:
        return controlplanes.get(self.type)


class CapacitySpec(Model):
    type: Literal["on-demand", "reservation", "capacity-block", "spot"] = "on-demand"
    reservation_id: Optional[ReservationId] = None
    reservation_resource_group_arn: Optional[ResourceGroupArn] = None
    training_plan_arn: Optional[TrainingPlanArn] = None  # HyperPod: capacity from a training plan


class NodeGroupSpec(Model):
    name: GroupName
    instance_type: InstanceTypeName
    count: Optional[int] = Field(default=None, ge=0)
    min_count: Optional[int] = Field(default=None, ge=0)
    max_count: Optional[int] = Field(default=None, ge=0)
    capacity: CapacitySpec = CapacitySpec()
    placement_group: str = "auto"  # auto | none | NAME of an existing group
    efa: Optional[bool] = None  # resolved: true where the instance type supports EFA
    root_volume_gib: int = Field(default=512, ge=32, le=16384)
    ami_id: Optional[AmiId] = None  # default: the control plane's published image
    labels: dict[str, str] = {}

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


class ObservabilitySpec(Model):
    prometheus: bool = True
    grafana: bool = False
    alert_email: Optional[Email] = None


class ClusterSpec(Model):
    model_config = ConfigDict(title="fmcluster cluster spec (v1)")

    name: Name
    region: Region
    account: Optional[Account] = None
    availability_zone_id: AzId
    network: NetworkSpec = NetworkSpec()
    storage: StorageSpec = StorageSpec()
    orchestrator: OrchestratorSpec
    node_groups: list[NodeGroupSpec] = Field(min_length=1)
    observability: ObservabilitySpec = ObservabilitySpec()
    tags: dict[str, str] = {}
    protect: bool = False  # termination protection on every stack, not only NAME-storage

    @property
    def availability_zone_ids(self) -> list[str]:
        return [self.availability_zone_id, *self.network.extra_availability_zone_ids]

    def resolved(self) -> dict[str, Any]:
        """The spec with every default filled in, as a plain mapping (what `plan` shows)."""
        return self.model_dump(mode="json", by_alias=True)


def json_schema() -> dict[str, Any]:
    schema = ClusterSpec.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://fmcluster.dev/schema/cluster-spec-v1.json"
    return schema
