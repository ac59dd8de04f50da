"""The NAME-storage stack: the cluster's S3 buckets, its FSx for Lustre file system and the links
between them (data repository associations), and the KMS key when the spec asks for one.

Everything stateful here is retained when the stack is deleted (the model turns on termination
protection), so NAME-cluster can be torn down and rebuilt freely.
"""

from __future__ import annotations

from typing import Any, Optional

import aws_cdk as cdk
from aws_cdk import aws_fsx as fsx
from constructs import Construct

from fmcluster.facts import images as image_facts
from fmcluster.facts import naming, openzfs
from fmcluster.kubernetes import kueue
from fmcluster.model.cluster import ClusterModel
from fmcluster.spec.models import ClusterSpec, HomeSpec, LustreSpec
from fmcluster_cdk.constructs.storage.accounting_database import AccountingDatabase
from fmcluster_cdk.constructs.storage.buckets import RetainedKey, SecureBucket
from fmcluster_cdk.constructs.storage.lustre import LustreFileSystem, allow_fsx_s3_access
from fmcluster_cdk.constructs.storage.openzfs import OpenZfsFileSystem
from fmcluster_cdk.stacks.refs import NetworkRefs


class StorageStack(cdk.Stack):
    """Buckets, file system and key of one cluster.

    `network` is the NAME-network stack, or anything with `vpc_id`, `gpu_subnet_id` and
    `node_security_group_id` (and `efa_security_group_id` for an EFA file system).

    Attributes the cluster stack uses:
      bucket_names / bucket_arns  spec bucket name -> S3 bucket name / ARN. Derived from the
                                  naming rule, not read from the bucket, so using them creates no
                                  cross-stack reference; add a dependency on this stack where the
                                  bucket must exist first.
      kms_key_arn                 the customer-managed key (storage.kms), else None
      file_system_id, file_system_dns_name, file_system_mount_name, lustre_security_group_id
                                  None without storage.lustre
      accounting_database         the Slurm accounting database of a SageMaker HyperPod Slurm
                                  cluster with teams (AccountingDatabase), else None
      home_dns_name               the shared home's DNS name (FSx for OpenZFS), None without
                                  storage.home
      home_team_volumes           on Kubernetes with teams, each team namespace's OpenZFS volume
                                  (a child of the home's root volume, root squashed, retained)
    """

    def __init__(self, scope: Construct, construct_id: str, *, model: ClusterModel, network: NetworkRefs,
                 **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        spec = model.spec
        storage = spec.storage
        key = None
        self.kms_key_arn: str | None = None
        if storage.kms:
            # node images encrypted with the key (AWS PCS): the services that build them and launch
            # nodes from them may use it
            users = sorted(image_facts.KEY_USERS) if any(i.encrypted for i in model.images) else []
            roles = [image_facts.service_linked_role_arn(cdk.Aws.PARTITION, cdk.Aws.ACCOUNT_ID, u) for u in users]
            key = RetainedKey(self, "Key", alias=f"alias/fmcluster/{spec.name}",
                              description=f"fmcluster {spec.name}: S3 buckets"
                                          + (", FSx for Lustre and node images" if users else " and FSx for Lustre"),
                              volume_users=roles)
            self.kms_key_arn = key.key_arn
            cdk.CfnOutput(self, "KmsKeyArn", value=key.key_arn, description="customer-managed KMS key")

        self.buckets = {}
        self.bucket_names: dict[str, str] = {}
        self.bucket_arns: dict[str, str] = {}
        for spec_bucket in storage.buckets:
            name = naming.bucket_name(spec.name, spec_bucket.name, spec.region, cdk.Aws.ACCOUNT_ID)
            bucket = SecureBucket(self, f"Bucket-{spec_bucket.name}", bucket_name=name,
                                  versioned=spec_bucket.versioned, encryption_key=key)
            cdk.CfnOutput(bucket, "Name", value=bucket.bucket_name,
                          description=f"S3 bucket '{spec_bucket.name}'")
            self.buckets[spec_bucket.name] = bucket
            self.bucket_names[spec_bucket.name] = name
            self.bucket_arns[spec_bucket.name] = f"arn:{cdk.Aws.PARTITION}:s3:::{name}"

        self.lustre: LustreFileSystem | None = None
        self.file_system_id: str | None = None
        self.file_system_dns_name: str | None = None
        self.file_system_mount_name: str | None = None
        self.lustre_security_group_id: str | None = None
        if storage.lustre:
            self._lustre(spec, storage.lustre, network, key)

        self.accounting_database: AccountingDatabase | None = None
        if model.teams and model.control_plane.type == "hyperpod-slurm":
            # HyperPod's slurmdbd keeps the teams' accounting in a database of the account's own
            database = self.accounting_database = AccountingDatabase(
                self, "SlurmAccounting", vpc_id=network.vpc_id, subnet_ids=network.private_subnet_ids,
                client_security_group_id=network.node_security_group_id, name=spec.name, key=key)
            for output_id, value, description in (
                    ("AccountingDatabaseEndpoint", database.endpoint, "Slurm accounting database (RDS for MariaDB)"),
                    ("AccountingDatabaseSecretArn", database.secret.secret_arn, "its credentials")):
                cdk.CfnOutput(self, output_id, value=value, description=description)
        self.home: OpenZfsFileSystem | None = None
        self.home_dns_name: str | None = None
        self.home_team_volumes: dict[str, fsx.CfnVolume] = {}
        if storage.home:
            self._home(model, storage.home, network, key)

    def _home(self, model: ClusterModel, fs: HomeSpec, network: NetworkRefs, key: Optional[RetainedKey]) -> None:
        """The shared home: FSx for OpenZFS in the GPU AZ's subnet, exported to the VPC."""
        spec = model.spec
        assert fs.throughput_mbps is not None  # the spec resolves it
        home = OpenZfsFileSystem(
            self, "Home",
            vpc_id=network.vpc_id,
            subnet_id=network.gpu_subnet_id,
            client_security_group_id=network.node_security_group_id,
            export_cidr=network.vpc_cidr,
            storage_capacity_gib=fs.storage_capacity_gib,
            deployment_type=fs.deployment_type,
            throughput_mbps=fs.throughput_mbps,
            compression=fs.compression,
            kms_key_id=key.key_id if key else None,
            name=f"{spec.name}-home",
        )
        self.home = home
        self.home_dns_name = home.dns_name
        if model.control_plane.scheduler == "kubernetes":
            # each team's namespace mounts a volume of its own, root squashed: its members can run
            # pods as root, and the root volume (no_root_squash) holds every team's homes
            for namespace in kueue.team_namespaces(model):
                if namespace == spec.orchestrator.namespace:
                    continue  # the admins' namespace: the root volume
                volume = home.add_volume(f"TeamVolume-{namespace}", name=openzfs.team_volume_name(namespace),
                                         export_options=openzfs.TEAM_EXPORT_OPTIONS)
                self.home_team_volumes[namespace] = volume
                cdk.CfnOutput(self, f"HomeVolume-{namespace}", value=volume.attr_volume_id,
                              description=f"FSx for OpenZFS volume of team namespace {namespace}: "
                                          f"DNS:{openzfs.team_volume_path(namespace)}")
        for output_id, value, description in (
                ("HomeFileSystemId", home.file_system_id, "FSx for OpenZFS file system id (the shared home)"),
                ("HomeDnsName", home.dns_name, "FSx for OpenZFS DNS name: mount DNS:/fsx /home"),
                ("HomeSecurityGroupId", home.security_group_id, "security group of the home file servers")):
            cdk.CfnOutput(self, output_id, value=value, description=description)

    def _lustre(self, spec: ClusterSpec, fs: LustreSpec, network: NetworkRefs, key: Optional[RetainedKey]) -> None:
        lustre = LustreFileSystem(
            self, "Lustre",
            vpc_id=network.vpc_id,
            subnet_id=network.gpu_subnet_id,
            client_security_group_id=network.node_security_group_id,
            storage_capacity_gib=fs.storage_capacity_gib,
            deployment_type=fs.deployment_type,
            throughput_per_tib=fs.throughput_per_tib,
            compression=fs.compression,
            metadata_iops=fs.metadata_iops if isinstance(fs.metadata_iops, int) else None,  # or "auto"
            efa_security_group_id=network.efa_security_group_id if fs.efa else None,
            kms_key_id=key.key_id if key else None,
            name=f"{spec.name}-lustre",
        )
        for link in fs.links:
            lustre.link(file_system_path=link.path, bucket_name=self.buckets[link.bucket].bucket_name,
                        prefix=link.prefix, import_events=link.import_, export_events=link.export)
        if key:
            linked = sorted({link.bucket for link in fs.links})
            allow_fsx_s3_access(key, [self.bucket_arns[b] for b in linked])

        self.lustre = lustre
        self.file_system_id = lustre.file_system_id
        self.file_system_dns_name = lustre.dns_name
        self.file_system_mount_name = lustre.mount_name
        self.lustre_security_group_id = lustre.security_group_id
        for output_id, value, description in (
                ("FileSystemId", lustre.file_system_id, "FSx for Lustre file system id"),
                ("FileSystemDnsName", lustre.dns_name, "FSx for Lustre DNS name"),
                ("FileSystemMountName", lustre.mount_name, f"mount DNS@tcp:/MOUNTNAME {fs.mount_path}"),
                ("LustreSecurityGroupId", lustre.security_group_id, "security group of the file servers")):
            cdk.CfnOutput(self, output_id, value=value, description=description)
