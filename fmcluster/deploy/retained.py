"""What a cluster's stacks leave in the account when CloudFormation deletes them: the resources of
DeletionPolicy Retain (the buckets, file systems, keys, accounting database and its secret, their
security groups, the log groups), and how `fmcluster destroy --with-data` deletes each, checks
that it is there, says what it costs a month while it is kept, and how to delete it by hand.

Each resource type is one row of KINDS. Some go with another: a file system's data repository
associations and child volumes with the file system (FSx API Reference, DeleteFileSystem: an
OpenZFS file system's child volumes go with DELETE_CHILD_VOLUMES_AND_SNAPSHOTS), a security
group's rules with the group. The others are deleted in the order of their `rank`: the buckets
emptied first (every version and delete marker: S3 refuses to delete a bucket that holds any), the
file systems and the database waited for until they are gone (minutes: their network interfaces
hold their security groups), then those security groups, the subnet group, the secret, the keys
(scheduled for deletion after 7 days, the least AWS KMS allows; a key pending deletion is not
billed) and the log groups.

A file system is deleted without a final backup (an S3-linked Lustre file system cannot take one;
FSx for OpenZFS would otherwise take one and bill for it), the database without a final snapshot:
what `--with-data` asks for is that nothing of the cluster's data remains, nor bills.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Mapping, Optional

from fmcluster.facts.prices import PriceTable

Clients = Callable[[str], Any]  # a boto3 client by service name (moto- or Stubber-backed in the tests)
Sleep = Callable[[float], None]
NODE_IMAGE = "AWS::EC2::Image"  # an AMI NAME-images baked (not a CloudFormation resource: Image Builder's output)
KMS_PENDING_DAYS = 7  # the shortest waiting period AWS KMS allows (ScheduleKeyDeletion)
GONE_POLL_S, GONE_LIMIT_S = 30.0, 3 * 3600.0  # how often and how long to wait for a file system or database to go
IN_USE_POLL_S, IN_USE_LIMIT_S = 30.0, 1800.0  # a security group still held by the network interfaces of what went
BILLED_BY_USE = "billed by what it stores"


class DeleteFailed(Exception):
    """A resource could not be deleted: the reason, and a hint."""

    def __init__(self, reason: str, hint: str) -> None:
        super().__init__(reason)
        self.reason, self.hint = reason, hint


@dataclass(frozen=True)
class Resource:
    """One resource of a stack, as its template and CloudFormation name it."""

    stack: str  # the stack's name (a nested stack's: PARENT/ID)
    logical_id: str
    type: str
    physical_id: str
    properties: Mapping[str, Any]
    retained: bool  # DeletionPolicy Retain: CloudFormation leaves it in the account

    @property
    def kind(self) -> Optional[Kind]:
        return KINDS.get(self.type)

    @property
    def what(self) -> str:
        """What it is, without its id or details: "FSx for Lustre", "S3 bucket"."""
        return self._described[0]

    @property
    def name(self) -> str:
        """What it is and its id: "S3 bucket llm-pretrain-datasets-111122223333-use1"."""
        return " ".join(filter(None, [self.what, self.physical_id]))

    @property
    def label(self) -> str:
        """What it is, its id, then its details: "FSx for Lustre fs-0123 (4800 GiB PERSISTENT_2 ...)"."""
        details = self._described[1]
        return self.name + (f" ({details})" if details else "")

    @property
    def _described(self) -> tuple[str, str]:
        kind = self.kind
        what, _, details = (kind.describe(self) if kind else self.type).partition(" (")
        return what, details.removesuffix(")")

    @property
    def swept(self) -> bool:
        """Deleted after its stack even without --with-data (it holds no data)."""
        return self.kind is not None and self.kind.swept

    @property
    def goes_with(self) -> Optional[str]:
        """What it is deleted with (None: deleted on its own)."""
        return self.kind.goes_with if self.kind else None

    def how(self) -> str:
        """How to delete it by hand."""
        kind = self.kind
        return kind.how(self.physical_id) if kind else "delete it in the console of its service"


@dataclass(frozen=True)
class Cost:
    monthly_usd: Optional[float]  # None: no figure (billed by use, or not in the price table)
    note: str = ""  # why there is no figure
    by_use: bool = False  # billed by what it stores or takes in, not by the month


@dataclass(frozen=True)
class Kind:
    """How fmcluster handles one resource type that a stack may retain."""

    describe: Callable[[Resource], str]  # what it is, its details in parentheses: "FSx for Lustre (4800 GiB ...)"
    rank: int  # the order of deletion, lowest first
    how: Callable[[str], str]  # the command that deletes one by hand, for its id
    exists: Optional[Callable[[Clients, str], bool]] = None
    delete: Optional[Callable[[Clients, Resource, Sleep], None]] = None
    cost: Optional[Callable[[Resource, PriceTable], Cost]] = None  # None: no charge of its own
    goes_with: Optional[str] = None  # deleted with it, not on its own
    swept: bool = False  # holds no data: deleted after its stack without --with-data too


def _code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


def _gone_when(codes: set[str], call: Callable[[], Any]) -> bool:
    """True when `call` answers, False when it raises a ClientError of `codes` (not found)."""
    from botocore.exceptions import ClientError

    try:
        call()
    except ClientError as exc:
        if _code(exc) in codes:
            return False
        raise
    return True


def _wait_gone(clients: Clients, resource: Resource, sleep: Sleep, what: str) -> None:
    exists = resource.kind.exists if resource.kind else None
    waited = 0.0
    while exists is not None and exists(clients, resource.physical_id):
        if waited >= GONE_LIMIT_S:
            raise DeleteFailed(f"{what} {resource.physical_id} is still being deleted after {waited / 60:.0f} min",
                               "its deletion goes on: run fmcluster destroy again once it is gone")
        sleep(GONE_POLL_S)
        waited += GONE_POLL_S


# ---- S3 ----------------------------------------------------------------------------------------

def _bucket_exists(clients: Clients, name: str) -> bool:
    return _gone_when({"404", "NoSuchBucket", "NotFound"}, lambda: clients("s3").head_bucket(Bucket=name))


def _empty_and_delete_bucket(clients: Clients, resource: Resource, sleep: Sleep) -> None:
    """Every object version and delete marker deleted (a thousand a call, S3's most), the
    unfinished multipart uploads aborted, then the bucket."""
    s3, name = clients("s3"), resource.physical_id
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=name):
        found = [{"Key": v["Key"], "VersionId": v["VersionId"]}
                 for v in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]]
        for start in range(0, len(found), 1000):
            answer = s3.delete_objects(Bucket=name, Delete={"Objects": found[start:start + 1000], "Quiet": True})
            if answer.get("Errors"):
                first = answer["Errors"][0]
                raise DeleteFailed(f"cannot empty bucket {name}: {first.get('Key')}: {first.get('Message')}",
                                   "check the bucket's policy and Object Lock settings, empty it, then run "
                                   "fmcluster destroy again")
    for page in s3.get_paginator("list_multipart_uploads").paginate(Bucket=name):
        for upload in page.get("Uploads", []):
            s3.abort_multipart_upload(Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"])
    s3.delete_bucket(Bucket=name)


def _bucket_label(resource: Resource) -> str:
    return "S3 bucket" + (" (versioned)" if resource.properties.get("VersioningConfiguration", {}).get("Status")
                          == "Enabled" else "")


# ---- FSx -------------------------------------------------------------------------------------

def _file_system_exists(clients: Clients, file_system_id: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        found = clients("fsx").describe_file_systems(FileSystemIds=[file_system_id])["FileSystems"]
    except ClientError as exc:
        if _code(exc) == "FileSystemNotFound":
            return False
        raise
    return any(f.get("Lifecycle") != "DELETED" for f in found)


def _delete_file_system(clients: Clients, resource: Resource, sleep: Sleep) -> None:
    kind = str(resource.properties.get("FileSystemType", "LUSTRE")).upper()
    options: dict[str, Any] = {}
    if kind == "LUSTRE":
        options = {"LustreConfiguration": {"SkipFinalBackup": True}}
    elif kind == "OPENZFS":
        options = {"OpenZFSConfiguration": {"SkipFinalBackup": True,
                                            "Options": ["DELETE_CHILD_VOLUMES_AND_SNAPSHOTS"]}}
    from botocore.exceptions import ClientError

    try:
        clients("fsx").delete_file_system(FileSystemId=resource.physical_id, **options)
    except ClientError as exc:
        if _code(exc) != "FileSystemNotFound":
            raise
    _wait_gone(clients, resource, sleep, "file system")


def _file_system_label(resource: Resource) -> str:
    props = resource.properties
    kind = str(props.get("FileSystemType", "")).upper()
    if kind == "LUSTRE":
        lustre = props.get("LustreConfiguration", {})
        throughput = lustre.get("PerUnitStorageThroughput")
        return (f"FSx for Lustre ({props.get('StorageCapacity')} GiB {lustre.get('DeploymentType', '')}"
                + (f" at {throughput} MB/s/TiB" if throughput else "") + ")")
    if kind == "OPENZFS":
        zfs = props.get("OpenZFSConfiguration", {})
        return (f"FSx for OpenZFS ({props.get('StorageCapacity')} GiB {zfs.get('DeploymentType', '')}, "
                f"{zfs.get('ThroughputCapacity')} MB/s)")
    return "FSx file system"


def _file_system_cost(resource: Resource, table: PriceTable) -> Cost:
    props = resource.properties
    if str(props.get("FileSystemType", "")).upper() != "LUSTRE":
        return Cost(None, "FSx for OpenZFS prices are not in the price table")
    lustre = props.get("LustreConfiguration", {})
    throughput = lustre.get("PerUnitStorageThroughput")
    hourly = table.lustre_hourly(str(lustre.get("DeploymentType", "")), int(throughput) if throughput else None,
                                 int(props.get("StorageCapacity", 0)))
    if hourly is None:
        return Cost(None, "its tier is not in the price table")
    return Cost(round(hourly * table.hours_per_month, 2))


# ---- RDS and Secrets Manager -------------------------------------------------------------------

def _database_exists(clients: Clients, identifier: str) -> bool:
    return _gone_when({"DBInstanceNotFound", "DBInstanceNotFoundFault"},
                      lambda: clients("rds").describe_db_instances(DBInstanceIdentifier=identifier))


def _delete_database(clients: Clients, resource: Resource, sleep: Sleep) -> None:
    """Deletion protection off (fmcluster turns it on), then deleted without a final snapshot,
    with its automated backups."""
    rds = clients("rds")
    rds.modify_db_instance(DBInstanceIdentifier=resource.physical_id, DeletionProtection=False, ApplyImmediately=True)
    rds.delete_db_instance(DBInstanceIdentifier=resource.physical_id, SkipFinalSnapshot=True,
                           DeleteAutomatedBackups=True)
    _wait_gone(clients, resource, sleep, "database")


def _subnet_group_exists(clients: Clients, name: str) -> bool:
    return _gone_when({"DBSubnetGroupNotFoundFault", "DBSubnetGroupNotFound"},
                      lambda: clients("rds").describe_db_subnet_groups(DBSubnetGroupName=name))


def _secret_exists(clients: Clients, secret_id: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        found = clients("secretsmanager").describe_secret(SecretId=secret_id)
    except ClientError as exc:
        if _code(exc) == "ResourceNotFoundException":
            return False
        raise
    return "DeletedDate" not in found


# ---- EC2, KMS, CloudWatch Logs -----------------------------------------------------------------

def _group_exists(clients: Clients, group_id: str) -> bool:
    return _gone_when({"InvalidGroup.NotFound", "InvalidGroupId.NotFound"},
                      lambda: clients("ec2").describe_security_groups(GroupIds=[group_id]))


def _delete_group(clients: Clients, resource: Resource, sleep: Sleep) -> None:
    """Deleted once the network interfaces of what used it (a file system, a database) are gone:
    they outlive it by minutes."""
    from botocore.exceptions import ClientError

    waited = 0.0
    while True:
        try:
            clients("ec2").delete_security_group(GroupId=resource.physical_id)
            return
        except ClientError as exc:
            if _code(exc) != "DependencyViolation":
                raise
            if waited >= IN_USE_LIMIT_S:
                raise DeleteFailed(f"security group {resource.physical_id} is still in use after "
                                   f"{waited / 60:.0f} min: {exc}",
                                   "find what uses it (aws ec2 describe-network-interfaces --filters "
                                   f"Name=group-id,Values={resource.physical_id}), delete that, then run "
                                   "fmcluster destroy again") from None
        sleep(IN_USE_POLL_S)
        waited += IN_USE_POLL_S


def _key_exists(clients: Clients, key_id: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        state = clients("kms").describe_key(KeyId=key_id)["KeyMetadata"].get("KeyState")
    except ClientError as exc:
        if _code(exc) == "NotFoundException":
            return False
        raise
    return state not in ("PendingDeletion", "PendingReplicaDeletion")


def _log_group_exists(clients: Clients, name: str) -> bool:
    pages = clients("logs").get_paginator("describe_log_groups").paginate(logGroupNamePrefix=name)
    return any(group.get("logGroupName") == name for page in pages for group in page.get("logGroups", []))


def _log_group_label(resource: Resource) -> str:
    days = resource.properties.get("RetentionInDays")
    return "log group" + (f" (events expire after {days} days)" if days else "")


def _image_exists(clients: Clients, image_id: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        return bool(clients("ec2").describe_images(ImageIds=[image_id])["Images"])
    except ClientError as exc:
        if _code(exc) in ("InvalidAMIID.NotFound", "InvalidAMIID.Unavailable"):
            return False
        raise


def _delete_image(clients: Clients, resource: Resource, sleep: Sleep) -> None:
    """Deregistered, then its snapshots deleted (deregistering keeps them, and they bill)."""
    ec2 = clients("ec2")
    ec2.deregister_image(ImageId=resource.physical_id)
    for snapshot in resource.properties.get("Snapshots", []):
        _ignore_missing({"InvalidSnapshot.NotFound"}, partial(ec2.delete_snapshot, SnapshotId=snapshot))


def _image_label(resource: Resource) -> str:
    props = resource.properties
    return f"node image ({props.get('Name', '')}, {props.get('SnapshotGiB', 0)} GiB of snapshots)"


def _ignore_missing(codes: set[str], call: Callable[[], Any]) -> None:
    from botocore.exceptions import ClientError

    try:
        call()
    except ClientError as exc:
        if _code(exc) not in codes:
            raise


def _fixed(text: str) -> Callable[[Resource], str]:
    return lambda resource: text


def _usage(note: str) -> Callable[[Resource, PriceTable], Cost]:
    return lambda resource, table: Cost(None, note, by_use=True)


def _unpriced(what: str) -> Callable[[Resource, PriceTable], Cost]:
    return lambda resource, table: Cost(None, f"{what} prices are not in the price table")


KINDS: dict[str, Kind] = {
    "AWS::S3::Bucket": Kind(
        _bucket_label, 10, lambda name: f"empty every version of it, then aws s3api delete-bucket --bucket {name}",
        _bucket_exists, _empty_and_delete_bucket, _usage(BILLED_BY_USE)),
    "AWS::FSx::FileSystem": Kind(
        _file_system_label, 20, lambda fs: f"aws fsx delete-file-system --file-system-id {fs}",
        _file_system_exists, _delete_file_system, _file_system_cost),
    "AWS::RDS::DBInstance": Kind(
        _fixed("RDS database (deletion protection on)"), 20,
        lambda db: (f"aws rds modify-db-instance --db-instance-identifier {db} --no-deletion-protection "
                    f"--apply-immediately, then aws rds delete-db-instance --db-instance-identifier {db} "
                    "--skip-final-snapshot"),
        _database_exists, _delete_database, _unpriced("Amazon RDS")),
    "AWS::SecretsManager::Secret": Kind(
        _fixed("secret"), 30, lambda arn: f"aws secretsmanager delete-secret --secret-id {arn}",
        _secret_exists,
        lambda clients, r, sleep: _ignore_missing({"ResourceNotFoundException"}, lambda: clients(
            "secretsmanager").delete_secret(SecretId=r.physical_id, ForceDeleteWithoutRecovery=True)),
        _unpriced("AWS Secrets Manager")),
    "AWS::EC2::SecurityGroup": Kind(
        _fixed("security group"), 30, lambda group: f"aws ec2 delete-security-group --group-id {group}",
        _group_exists, _delete_group),
    "AWS::RDS::DBSubnetGroup": Kind(
        _fixed("DB subnet group"), 40, lambda name: f"aws rds delete-db-subnet-group --db-subnet-group-name {name}",
        _subnet_group_exists,
        lambda clients, r, sleep: _ignore_missing({"DBSubnetGroupNotFoundFault"}, lambda: clients(
            "rds").delete_db_subnet_group(DBSubnetGroupName=r.physical_id))),
    "AWS::KMS::Key": Kind(
        _fixed("KMS key"), 50,
        lambda key: f"aws kms schedule-key-deletion --key-id {key} --pending-window-in-days {KMS_PENDING_DAYS}",
        _key_exists,
        lambda clients, r, sleep: clients("kms").schedule_key_deletion(KeyId=r.physical_id,
                                                                       PendingWindowInDays=KMS_PENDING_DAYS),
        lambda resource, table: Cost(table.kms_key_month)),
    "AWS::Logs::LogGroup": Kind(
        _log_group_label, 60, lambda name: f"aws logs delete-log-group --log-group-name {name}",
        _log_group_exists,
        lambda clients, r, sleep: _ignore_missing({"ResourceNotFoundException"}, lambda: clients(
            "logs").delete_log_group(logGroupName=r.physical_id)),
        _usage(BILLED_BY_USE)),
    # the AMIs NAME-images' builds made: Image Builder leaves them, and their snapshots, when its
    # image resource is deleted ("This does not delete any EC2 AMIs": Image Builder API Reference,
    # DeleteImage). They hold no data: deleted with the stack, --with-data or not
    NODE_IMAGE: Kind(
        _image_label, 5, lambda ami: f"aws ec2 deregister-image --image-id {ami}, then aws ec2 delete-snapshot "
                                     "--snapshot-id ... for each of its snapshots",
        _image_exists, _delete_image, swept=True),
    "AWS::FSx::DataRepositoryAssociation": Kind(_fixed("data repository association"), 0, lambda x: "",
                                                goes_with="its file system"),
    "AWS::FSx::Volume": Kind(_fixed("FSx for OpenZFS volume"), 0, lambda x: "", goes_with="its file system"),
    "AWS::EC2::SecurityGroupIngress": Kind(_fixed("security group rule"), 0, lambda x: "",
                                           goes_with="its security group"),
    "AWS::EC2::SecurityGroupEgress": Kind(_fixed("security group rule"), 0, lambda x: "",
                                          goes_with="its security group"),
    # what bills in a kept stack without being retained: the network's NAT gateway and its address,
    # the metrics and dashboards workspaces (data, deleted with their stack)
    "AWS::EC2::NatGateway": Kind(_fixed("NAT gateway"), 0, lambda x: "", cost=lambda resource, table: Cost(
        round(table.nat_gateway_hourly * table.hours_per_month, 2))),
    "AWS::EC2::EIP": Kind(_fixed("public IPv4 address"), 0, lambda x: "", cost=lambda resource, table: Cost(
        round(table.public_ipv4_hourly * table.hours_per_month, 2))),
    "AWS::APS::Workspace": Kind(_fixed("Prometheus workspace (the metrics)"), 70, lambda x: "",
                                cost=_usage("billed by the samples it ingests and stores")),
    "AWS::Grafana::Workspace": Kind(_fixed("Grafana workspace (the dashboards)"), 70, lambda x: "",
                                    cost=_usage("billed by its active users")),
}


def exists(clients: Clients, resource: Resource) -> bool:
    """Whether the resource is still in the account (a type fmcluster cannot check: assumed so)."""
    kind = resource.kind
    return kind is None or kind.exists is None or kind.exists(clients, resource.physical_id)


def delete(clients: Clients, resource: Resource, sleep: Sleep) -> None:
    """Delete one retained resource (DeleteFailed, or botocore's errors, when it cannot be)."""
    kind = resource.kind
    if kind is None or kind.delete is None:
        raise DeleteFailed(f"fmcluster does not delete a {resource.type}", resource.how())
    kind.delete(clients, resource, sleep)


def cost(resource: Resource, table: PriceTable) -> Optional[Cost]:
    """What it costs a month while kept; None where it has no charge of its own, or fmcluster
    does not know the type."""
    kind = resource.kind
    return kind.cost(resource, table) if kind is not None and kind.cost is not None else None


def deletion_order(resources: list[Resource]) -> list[Resource]:
    """The resources deleted on their own, in the order they can be deleted."""
    return sorted((r for r in resources if r.goes_with is None),
                  key=lambda r: (r.kind.rank if r.kind else 99, r.stack, r.logical_id))
