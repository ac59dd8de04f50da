"""The Slurm accounting database of a SageMaker HyperPod Slurm cluster: Amazon RDS for MariaDB,
which slurmdbd on the cluster's controller uses (`Orchestrator.Slurm.AccountingDatabase`).

SageMaker HyperPod takes an external MySQL-compatible database, its endpoint and port, and a
Secrets Manager secret with its credentials (AWS::SageMaker::Cluster ClusterAccountingDatabase).
Everything here is retained and protected as the other stateful resources of NAME-storage are.
"""

from __future__ import annotations

from typing import Optional, Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from fmcluster_cdk.errors import ConstructError

PORT = 3306
DATABASE = "slurm_acct_db"  # slurmdbd's default StorageLoc, and HyperPod's default Name
USER = "slurm"
# the LTS release slurmdbd is tested against here, at the newest minor release cfn-lint's RDS data
# lists (its E3691 refuses a bare major version). The automatic minor upgrades keep it current; a
# template naming a minor RDS has retired would fail to create, so this moves with cfn-lint.
ENGINE, ENGINE_VERSION = "mariadb", "10.11.19"
INSTANCE_CLASS = "db.t4g.small"  # 2 vCPUs, 2 GiB: slurmdbd's database of one cluster
STORAGE_GIB = 20
BACKUP_RETENTION_DAYS = 7


class AccountingDatabase(Construct):
    """A small RDS for MariaDB instance, encrypted, retained and deletion-protected, in private
    subnets, reachable on 3306 from the clients' security group only, with credentials generated
    into Secrets Manager.

    Props:
        vpc_id: the VPC of its security group.
            @default required
        subnet_ids: private subnets in at least two Availability Zones (an RDS DB subnet group
            needs two).
            @default required
        client_security_group_id: the security group allowed in on 3306 (the cluster's nodes).
            @default required
        name: a name for its tags and the secret's description.
            @default required
        key: the KMS key of its storage and of the secret.
            @default None: RDS's and Secrets Manager's AWS managed keys

    Attributes:
        instance: the `rds.CfnDBInstance` (retained).
        secret: the `secretsmanager.Secret` of the credentials (username, password; retained).
        endpoint: the instance's endpoint address.
        port: the port (3306).
        security_group_id: the database's security group.
    """

    def __init__(self, scope: Construct, construct_id: str, *, vpc_id: str, subnet_ids: Sequence[str],
                 client_security_group_id: str, name: str, key: Optional[kms.IKey] = None) -> None:
        super().__init__(scope, construct_id)
        if len(subnet_ids) < 2:
            raise ConstructError(self, "an RDS DB subnet group needs subnets in at least two Availability Zones")
        retain = cdk.RemovalPolicy.RETAIN
        self.secret = secretsmanager.Secret(
            self, "Credentials", description=f"fmcluster {name}: Slurm accounting database credentials",
            encryption_key=key, removal_policy=retain,
            generate_secret_string=secretsmanager.SecretStringGenerator(
                secret_string_template=f'{{"username": "{USER}"}}', generate_string_key="password",
                exclude_punctuation=True, password_length=32))
        group = ec2.CfnSecurityGroup(
            self, "SecurityGroup", vpc_id=vpc_id, group_description=f"Slurm accounting database of {name}: "
                                                                    "MariaDB from the cluster nodes",
            # no outbound rule but this one, which matches nothing (the CDK's own way to deny all
            # egress): the database starts no connection
            security_group_egress=[ec2.CfnSecurityGroup.EgressProperty(
                ip_protocol="icmp", cidr_ip="255.255.255.255/32", from_port=252, to_port=86,
                description="Disallow all traffic")],
            tags=[cdk.CfnTag(key="Name", value=f"{name}-slurm-accounting")])
        group.apply_removal_policy(retain)
        ingress = ec2.CfnSecurityGroupIngress(
            self, "FromClients", group_id=group.attr_group_id, ip_protocol="tcp", from_port=PORT, to_port=PORT,
            source_security_group_id=client_security_group_id, description="slurmdbd on the controller")
        subnets = rds.CfnDBSubnetGroup(self, "Subnets", db_subnet_group_description=f"{name}: private subnets",
                                       subnet_ids=list(subnet_ids))
        subnets.apply_removal_policy(retain)
        self.instance = rds.CfnDBInstance(
            self, "Instance", engine=ENGINE, engine_version=ENGINE_VERSION, db_instance_class=INSTANCE_CLASS,
            allocated_storage=str(STORAGE_GIB), storage_type="gp3", storage_encrypted=True,
            kms_key_id=key.key_arn if key else None, db_name=DATABASE,
            master_username=self.secret.secret_value_from_json("username").unsafe_unwrap(),
            master_user_password=self.secret.secret_value_from_json("password").unsafe_unwrap(),
            db_subnet_group_name=subnets.ref, vpc_security_groups=[group.attr_group_id], port=str(PORT),
            publicly_accessible=False, deletion_protection=True, backup_retention_period=BACKUP_RETENTION_DAYS,
            copy_tags_to_snapshot=True, auto_minor_version_upgrade=True, delete_automated_backups=False,
            enable_cloudwatch_logs_exports=["error"])
        self.instance.apply_removal_policy(retain, apply_to_update_replace_policy=True)
        self.instance.add_resource_dependency(ingress)
        self.endpoint = self.instance.attr_endpoint_address
        self.port = PORT
        self.security_group_id = group.attr_group_id
