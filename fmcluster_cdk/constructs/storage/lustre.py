"""An FSx for Lustre file system, its security group, and its links to S3 (data repository associations).

Sources and details: docs/research-notes.md, "fmcluster_cdk/constructs/storage/lustre.py"."""

from __future__ import annotations

from typing import Any, Sequence

import aws_cdk as cdk
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from fmcluster_cdk.constructs.storage.file_servers import allow_ports, file_server_security_group, name_tags

LUSTRE_PORTS = ((988, 988), (1018, 1023))  # TCP, between clients and file servers, and among servers
FILE_SYSTEM_TYPE_VERSION = "2.15"  # required for EFA; the newest client line for AL2023 and Ubuntu 22.04+
PERSISTENT = ("PERSISTENT_1", "PERSISTENT_2")
# Maintenance: Sunday 05:00 UTC (d:HH:MM, 1 = Monday). Backups: daily at 02:00 UTC, kept 7 days, on
# persistent types only (scratch file systems cannot be backed up). The S3 links hold only what
# is imported from or exported to S3; backups also cover what lives on the file system alone
# (home directories, outputs not yet exported), at the price of backup storage.
WEEKLY_MAINTENANCE_START = "7:05:00"
DAILY_BACKUP_START = "02:00"
BACKUP_RETENTION_DAYS = 7
FSX_S3_ACCESS_ROLE = "role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_fs-*"
S3_KMS_ACTIONS = ["kms:Encrypt", "kms:Decrypt", "kms:ReEncryptFrom", "kms:ReEncryptTo", "kms:GenerateDataKey",
                  "kms:GenerateDataKeyWithoutPlaintext", "kms:DescribeKey"]


def data_repository_path(bucket_name: str, prefix: str = "") -> str:
    """`s3://BUCKET` for a whole bucket, `s3://BUCKET/PREFIX/` for a prefix (a trailing slash,
    so that prefix `ckpt` never also matches `ckpt-old/`)."""
    prefix = prefix.strip("/")
    return f"s3://{bucket_name}/{prefix}/" if prefix else f"s3://{bucket_name}"


def link_id(file_system_path: str) -> str:
    """Construct id of the association of a file-system path: from the path, never from a list
    position, so adding or reordering links never replaces another one. (`:` cannot occur in a
    path, so distinct paths such as /a/b and /a-b keep distinct ids.)"""
    return "Link" + file_system_path.replace("/", ":")


class LustreFileSystem(Construct):
    """An FSx for Lustre file system in one subnet, with its own security group.

    The security group lets clients (`client_security_group_id`) and the file servers themselves
    reach TCP 988 and 1018-1023, by security-group reference (EFA file systems accept no CIDR
    rules). With `efa_security_group_id` the file system is EFA-enabled and also carries that
    group, which allows all traffic to and from itself, as FSx requires for EFA.

    `metadata_iops` None means FSx sizes metadata IOPS itself (AUTOMATIC, PERSISTENT_2 only).
    The file system, its security group and the group's self-referencing rules are retained when
    the stack is deleted or the file system replaced; the rules that name the client group are not,
    so that the clients' stack can still be deleted.

    Always set: SSD storage, Lustre `FILE_SYSTEM_TYPE_VERSION` (2.15), weekly maintenance on
    Sunday at 05:00 UTC, import and export errors logged (`WARN_ERROR`), and, on persistent
    types, daily automatic backups at 02:00 UTC (none with `backup_retention_days` 0). Capacity
    and throughput grids: the FSx for Lustre User Guide and CreateFileSystem, as `fmcluster.facts.fsx`
    and docs/research-notes.md (section 4) record them.

    Props:
        vpc_id: the VPC of the file system's security group.
            @default required
        subnet_id: the one subnet of the file system (a Lustre file system lives in one subnet and
            AZ; changing it replaces the file system).
            @default required
        client_security_group_id: the clients' security group, allowed in on TCP 988 and 1018-1023.
            @default required
        storage_capacity_gib: storage capacity, in GiB (at least 1,200). SSD: 1,200, 2,400 or a
            multiple of 2,400 GiB (SCRATCH_1: 1,200, 2,400, then increments of 3,600 GiB);
            EFA-enabled PERSISTENT_2: a multiple of 4,800, 9,600, 19,200 or 38,400 GiB at 1,000,
            500, 250 or 125 MB/s per TiB.
            @default required
        deployment_type: ``PERSISTENT_2``, ``PERSISTENT_1``, ``SCRATCH_2`` or ``SCRATCH_1``
            (`LustreConfiguration.DeploymentType`). Metadata IOPS and EFA need PERSISTENT_2
            (and fmcluster's rules link S3 to PERSISTENT_2 only); backups and the KMS key need a
            persistent type.
            @default required
        throughput_per_tib: throughput per TiB of storage, in MB/s per TiB
            (`PerUnitStorageThroughput`): PERSISTENT_2 125, 250, 500 or 1,000; PERSISTENT_1 (SSD)
            50, 100 or 200; required with a persistent type. Not written for scratch types
            (SCRATCH_2 has a fixed baseline of 200 MB/s per TiB).
            @default None
        compression: ``LZ4`` or ``NONE`` (`DataCompressionType`).
            @default ``LZ4``
        metadata_iops: provisioned metadata IOPS of a PERSISTENT_2 file system (`USER_PROVISIONED`):
            1,500, 3,000, 6,000, 12,000, or a multiple of 12,000 up to 192,000; ignored by other
            deployment types.
            @default None: ``AUTOMATIC`` on PERSISTENT_2 (FSx scales them with the capacity)
        efa_security_group_id: the EFA security group (all traffic to and from itself): the file
            system is EFA-enabled (`EfaEnabled`, set at creation only) and carries that group too.
            @default None: not EFA-enabled
        kms_key_id: the KMS key of the data at rest, on persistent types (`KmsKeyId`: changing it
            replaces the file system); scratch types always use a key FSx manages, and a key
            given for them only adds a warning.
            @default None: the FSx-managed key
        name: the `Name` tag of the file system and its security group.
            @default None: no `Name` tag
        backup_retention_days: days daily automatic backups are kept, on persistent types
            (`AutomaticBackupRetentionDays`: 0 turns them off, at most 90).
            @default 7 (`BACKUP_RETENTION_DAYS`)

    Attributes:
        security_group: the file servers' `ec2.CfnSecurityGroup` (retained).
        security_group_id: its id.
        file_system: the `fsx.CfnFileSystem` (retained).
        file_system_id: the file system's id (``fs-...``).
        dns_name: the file system's DNS name (clients mount ``DNS@tcp:/MOUNT``).
        mount_name: the file system's Lustre mount name.
    """

    def __init__(self, scope: Construct, construct_id: str, *, vpc_id: str, subnet_id: str,
                 client_security_group_id: str, storage_capacity_gib: int, deployment_type: str,
                 throughput_per_tib: int | None = None, compression: str = "LZ4",
                 metadata_iops: int | None = None, efa_security_group_id: str | None = None,
                 kms_key_id: str | None = None, name: str | None = None,
                 backup_retention_days: int = BACKUP_RETENTION_DAYS) -> None:
        super().__init__(scope, construct_id)
        tags = name_tags(name)
        self.security_group = file_server_security_group(
            self, vpc_id=vpc_id, tags=tags,
            description="FSx for Lustre file servers: TCP 988 and 1018-1023 from clients and each other")
        group_id = self.security_group.attr_group_id
        allow_ports(self, "Servers", group_id=group_id, source_group_id=group_id, protocol="tcp", ports=LUSTRE_PORTS,
                    what="Lustre TCP", who="file servers", retain=True)
        allow_ports(self, "Clients", group_id=group_id, source_group_id=client_security_group_id, protocol="tcp",
                    ports=LUSTRE_PORTS, what="Lustre TCP", who="cluster nodes")

        persistent = deployment_type in PERSISTENT
        if kms_key_id and not persistent:
            cdk.Annotations.of(self).add_warning_v2(
                "fmcluster:lustre-scratch-kms",
                f"{deployment_type} file systems are always encrypted with a key FSx manages; the KMS key is not used")
        security_groups = [self.security_group.attr_group_id]
        if efa_security_group_id:
            security_groups.append(efa_security_group_id)
        self.file_system = fsx.CfnFileSystem(
            self, "FileSystem",
            file_system_type="LUSTRE",
            file_system_type_version=FILE_SYSTEM_TYPE_VERSION,
            storage_type="SSD",
            storage_capacity=storage_capacity_gib,
            subnet_ids=[subnet_id],
            security_group_ids=security_groups,
            kms_key_id=kms_key_id if persistent else None,
            lustre_configuration=self._configuration(
                deployment_type, throughput_per_tib, compression, metadata_iops,
                efa=bool(efa_security_group_id), backup_retention_days=backup_retention_days if persistent else None),
            tags=tags,
        )
        self.file_system.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
        self.file_system_id: str = self.file_system.ref
        self.dns_name: str = self.file_system.attr_dns_name
        self.mount_name: str = self.file_system.attr_lustre_mount_name
        self.security_group_id: str = self.security_group.attr_group_id

    @staticmethod
    def _configuration(deployment_type: str, throughput_per_tib: int | None, compression: str,
                       metadata_iops: int | None, *, efa: bool,
                       backup_retention_days: int | None) -> fsx.CfnFileSystem.LustreConfigurationProperty:
        metadata = None
        if deployment_type == "PERSISTENT_2":
            metadata = (fsx.CfnFileSystem.MetadataConfigurationProperty(mode="AUTOMATIC") if metadata_iops is None
                        else fsx.CfnFileSystem.MetadataConfigurationProperty(mode="USER_PROVISIONED",
                                                                             iops=metadata_iops))
        backups: dict[str, Any] = {}
        if backup_retention_days is not None:
            backups = {"automatic_backup_retention_days": backup_retention_days}
            if backup_retention_days:
                backups["daily_automatic_backup_start_time"] = DAILY_BACKUP_START
        return fsx.CfnFileSystem.LustreConfigurationProperty(
            deployment_type=deployment_type,
            # SCRATCH_2 has a fixed baseline (200 MB/s per TiB) and accepts no setting
            per_unit_storage_throughput=throughput_per_tib if deployment_type in PERSISTENT else None,
            data_compression_type=compression,
            metadata_configuration=metadata,
            efa_enabled=True if efa else None,
            weekly_maintenance_start_time=WEEKLY_MAINTENANCE_START,
            # import and export errors of the S3 links go to CloudWatch Logs (/aws/fsx/lustre)
            log_configuration=fsx.CfnFileSystem.LogConfigurationProperty(level="WARN_ERROR"),
            **backups,
        )

    def link(self, *, file_system_path: str, bucket_name: str, prefix: str = "",
             import_events: Sequence[str] = (), export_events: Sequence[str] = ()) -> fsx.CfnDataRepositoryAssociation:
        """Link `file_system_path` to an S3 bucket (and prefix): a data repository association,
        retained like the file system. Events: NEW, CHANGED, DELETED; an empty list leaves that
        direction off. With import events the existing objects' metadata is imported at creation.

        Limits: at most 8 associations per file system (`fmcluster.facts.fsx.MAX_LINKS`);
        `file_system_path` 1 to 4,096 characters, one bucket per directory; the S3
        path (``s3://BUCKET/PREFIX/``) 3 to 4,357 characters."""
        auto_import = (fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(events=list(import_events))
                       if import_events else None)
        auto_export = (fsx.CfnDataRepositoryAssociation.AutoExportPolicyProperty(events=list(export_events))
                       if export_events else None)
        association = fsx.CfnDataRepositoryAssociation(
            self, link_id(file_system_path),
            file_system_id=self.file_system_id,
            file_system_path=file_system_path,
            data_repository_path=data_repository_path(bucket_name, prefix),
            batch_import_meta_data_on_create=True if import_events else None,
            s3=fsx.CfnDataRepositoryAssociation.S3Property(auto_import_policy=auto_import,
                                                          auto_export_policy=auto_export)
            if (auto_import or auto_export) else None,
        )
        association.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
        return association


def allow_fsx_s3_access(key: kms.Key, bucket_arns: Sequence[str]) -> None:
    """Let FSx use `key` on objects of the given SSE-KMS buckets it is linked to.

    FSx reads and writes linked buckets as the role AWSServiceRoleForFSxS3Access_<fs-id>, and
    the FSx User Guide asks for that role in the key policy. It cannot be named there directly:
    KMS rejects a key policy whose principal does not exist yet (the role appears only with the
    first data repository association), and the file system, encrypted by this key, would have to
    exist before the key. So the statement admits any principal of this account whose ARN is an
    FSx S3-access role, only through S3 in this region, only for objects of these buckets (with
    S3 Bucket Keys the encryption context is the bucket ARN), and only the data-key actions S3 uses.
    """
    if not bucket_arns:
        return
    key.add_to_resource_policy(iam.PolicyStatement(
        sid="FSxLinkedBucketsThroughS3",
        principals=[iam.AnyPrincipal()],
        actions=S3_KMS_ACTIONS,
        resources=["*"],  # in a key policy: this key
        conditions={
            "StringEquals": {"kms:CallerAccount": cdk.Aws.ACCOUNT_ID,
                             "kms:ViaService": f"s3.{cdk.Aws.REGION}.amazonaws.com",
                             "kms:EncryptionContext:aws:s3:arn": list(bucket_arns)},
            "ArnLike": {"aws:PrincipalArn": f"arn:{cdk.Aws.PARTITION}:iam::{cdk.Aws.ACCOUNT_ID}:{FSX_S3_ACCESS_ROLE}"},
        },
    ))
