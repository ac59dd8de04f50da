"""An FSx for OpenZFS file system (the cluster's shared home) and its security group.

Facts: fmcluster.facts.openzfs (FSx API Reference; FSx for OpenZFS User Guide, "File system access
control with Amazon VPC" and "Mounting from Linux clients")."""

from __future__ import annotations

from typing import Sequence

import aws_cdk as cdk
from aws_cdk import aws_fsx as fsx
from constructs import Construct

from fmcluster_cdk.constructs.storage.file_servers import allow_ports, file_server_security_group, name_tags
from fmcluster_cdk.constructs.storage.lustre import BACKUP_RETENTION_DAYS, DAILY_BACKUP_START, WEEKLY_MAINTENANCE_START

# TCP and UDP: rpcbind, NFS, and the file server's mount, lock and status daemons
NFS_PORTS = ((111, 111), (2049, 2049), (20001, 20003))
EXPORT_OPTIONS = ("rw", "crossmnt", "no_root_squash")


class OpenZfsFileSystem(Construct):
    """An FSx for OpenZFS file system in one subnet, with its own security group, its root volume
    exported over NFS to `export_cidr` only.

    The security group admits the clients (`client_security_group_id`) on the NFS ports, TCP and
    UDP 111, 2049 and 20001-20003, by security-group reference: nothing else reaches the file
    servers. The file system and its security group are retained when the stack is deleted or the
    file system replaced; the rules that name the client group are not, so that the clients' stack
    can still be deleted.

    The root volume's export: `export_cidr` with `rw`, `crossmnt` (child volumes and snapshots
    visible, FSx's default) and `no_root_squash` (root on a node creates and seeds users' home
    directories with their owners; a squashed root writes as nobody). Always set: daily automatic
    backups at 02:00 UTC kept 7 days (tags copied to backups and volumes), weekly maintenance on
    Sunday at 05:00 UTC, as the Lustre file system's.

    Props:
        vpc_id: the VPC of the file system's security group.
            @default required
        subnet_id: the one subnet of the file system (a single-AZ file system; changing it
            replaces the file system).
            @default required
        client_security_group_id: the clients' security group, allowed in on the NFS ports.
            @default required
        export_cidr: the IPv4 CIDR block the root volume is exported to (the VPC's).
            @default required
        storage_capacity_gib: SSD storage, 64 to 524,288 GiB (it can grow, never shrink).
            @default required
        deployment_type: ``SINGLE_AZ_2``, ``SINGLE_AZ_HA_2``, ``SINGLE_AZ_1`` or ``SINGLE_AZ_HA_1``
            (`OpenZFSConfiguration.DeploymentType`, set at creation).
            @default required
        throughput_mbps: throughput capacity in MB/s (`ThroughputCapacity`): the 2 types 160 to
            10,240, the 1 types 64 to 4,096, in the steps of fmcluster.facts.openzfs.
            @default required
        compression: ``LZ4``, ``ZSTD`` or ``NONE``, of the root volume (`DataCompressionType`).
            @default ``LZ4``
        kms_key_id: the KMS key of the data at rest (`KmsKeyId`: changing it replaces the file
            system).
            @default None: the FSx-managed key
        name: the `Name` tag of the file system and its security group.
            @default None: no `Name` tag
        export_options: the NFS export options of the root volume (exports(5)).
            @default ``rw``, ``crossmnt``, ``no_root_squash`` (`EXPORT_OPTIONS`)

    Attributes:
        security_group: the file servers' `ec2.CfnSecurityGroup` (retained).
        security_group_id: its id.
        file_system: the `fsx.CfnFileSystem` (retained).
        file_system_id: the file system's id (``fs-...``).
        dns_name: the file system's DNS name (clients mount ``DNS:/fsx``).
        root_volume_id: the root volume's id (``fsvol-...``), the parent of `add_volume`'s.
    """

    def __init__(self, scope: Construct, construct_id: str, *, vpc_id: str, subnet_id: str,
                 client_security_group_id: str, export_cidr: str, storage_capacity_gib: int, deployment_type: str,
                 throughput_mbps: int, compression: str = "LZ4", kms_key_id: str | None = None,
                 name: str | None = None, export_options: Sequence[str] = EXPORT_OPTIONS) -> None:
        super().__init__(scope, construct_id)
        tags = name_tags(name)
        self.security_group = file_server_security_group(
            self, vpc_id=vpc_id, tags=tags,
            description="FSx for OpenZFS file servers: NFS (TCP and UDP 111, 2049, 20001-20003) from clients")
        for protocol in ("tcp", "udp"):
            allow_ports(self, f"Clients{protocol.upper()}", group_id=self.security_group.attr_group_id,
                        source_group_id=client_security_group_id, protocol=protocol, ports=NFS_PORTS,
                        what=f"NFS {protocol.upper()}", who="cluster nodes")

        self.file_system = fsx.CfnFileSystem(
            self, "FileSystem",
            file_system_type="OPENZFS",
            storage_type="SSD",
            storage_capacity=storage_capacity_gib,
            subnet_ids=[subnet_id],
            security_group_ids=[self.security_group.attr_group_id],
            kms_key_id=kms_key_id,
            open_zfs_configuration=fsx.CfnFileSystem.OpenZFSConfigurationProperty(
                deployment_type=deployment_type,
                throughput_capacity=throughput_mbps,
                automatic_backup_retention_days=BACKUP_RETENTION_DAYS,
                daily_automatic_backup_start_time=DAILY_BACKUP_START,
                weekly_maintenance_start_time=WEEKLY_MAINTENANCE_START,
                copy_tags_to_backups=True,
                copy_tags_to_volumes=True,
                root_volume_configuration=fsx.CfnFileSystem.RootVolumeConfigurationProperty(
                    data_compression_type=compression,
                    nfs_exports=[fsx.CfnFileSystem.NfsExportsProperty(client_configurations=[
                        fsx.CfnFileSystem.ClientConfigurationsProperty(clients=export_cidr,
                                                                       options=list(export_options))])]),
            ),
            tags=tags,
        )
        self.file_system.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
        self.file_system_id: str = self.file_system.ref
        self.dns_name: str = self.file_system.attr_dns_name
        self.security_group_id: str = self.security_group.attr_group_id
        self.root_volume_id: str = self.file_system.attr_root_volume_id
        self._export_cidr = export_cidr
        self._compression = compression
        self._tags = tags

    def add_volume(self, construct_id: str, *, name: str, export_options: Sequence[str]) -> fsx.CfnVolume:
        """A child volume of the root volume, `name` (letters, digits, underscores), exported at
        ``/fsx/NAME`` to the root volume's CIDR with `export_options`, compressed as the root
        volume, with no quota of its own (it shares the file system's storage); retained like the
        file system (changing its parent or type replaces it)."""
        volume = fsx.CfnVolume(
            self, construct_id, name=name, volume_type="OPENZFS",
            open_zfs_configuration=fsx.CfnVolume.OpenZFSConfigurationProperty(
                parent_volume_id=self.root_volume_id,
                data_compression_type=self._compression,
                copy_tags_to_snapshots=True,
                nfs_exports=[fsx.CfnVolume.NfsExportsProperty(client_configurations=[
                    fsx.CfnVolume.ClientConfigurationsProperty(clients=self._export_cidr,
                                                               options=list(export_options))])]),
            tags=self._tags)
        volume.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
        return volume
