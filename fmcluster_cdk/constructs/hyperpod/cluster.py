"""A SageMaker HyperPod cluster (AWS::SageMaker::Cluster) and its instance groups.

Sources and details: docs/research-notes.md, "fmcluster_cdk/constructs/hyperpod/cluster.py"."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

import aws_cdk as cdk
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from fmcluster_cdk.errors import ConstructError

DEEP_HEALTH_CHECKS = ("InstanceStress", "InstanceConnectivity")
# The CDK's built-in CloudFormation validation (aws-cdk-lib 2.275) carries older regional
# instance-type data for AWS::SageMaker::Cluster than cfn-lint 1.58 (which the tests run on every
# example: ml.p6-b200.48xlarge and ml.p6-b300.48xlarge are valid in us-east-1 there). Offerings per
# region are account facts for `fmcluster preflight`.
REGIONAL_TYPE_RULE = "CloudFormation-Validate::E3644"
# NodeRecovery (cluster level, API and CFN): "Automatic: SageMaker HyperPod will automatically reboot
# or replace faulty nodes when issues are detected. None: cluster administrators will need to
# manually manage any faulty cluster instances" (botocore's sagemaker model, CreateClusterRequest).
NODE_RECOVERY = "Automatic"
NO_NODE_RECOVERY = "None"
CONTINUOUS = "Continuous"  # NodeProvisioningMode: partial capacity, retries; required for customer managed keys
CONTROLLER, LOGIN, COMPUTE = "Controller", "Login", "Compute"


@dataclass(frozen=True)
class InstanceGroup:
    """One HyperPod instance group (an `InstanceGroups` entry of `AWS::SageMaker::Cluster`).

    Limits are those of the resource schema (cfn-lint's copy of `AWS::SageMaker::Cluster`).

    Props:
        name: the group's name (`InstanceGroupName`): 1 to 63 letters, digits and hyphens,
            starting and ending with a letter or digit; unique in the cluster.
            @default required
        instance_type: the EC2 instance type without the ``ml.`` prefix (``p5.48xlarge``
            becomes ``ml.p5.48xlarge``); one of the schema's `InstanceType` values.
            @default required
        count: the number of instances (`InstanceCount`): 0 to 6,758.
            @default required
        execution_role_arn: ARN of the role the instances assume (`ExecutionRole`, 20 to 2,048
            characters; `HyperPodExecutionRole.role_arn`).
            @default required
        lifecycle_uri: the S3 folder of the lifecycle scripts (`LifeCycleConfig.SourceS3Uri`,
            ``s3://BUCKET/PREFIX/``, at most 1,024 characters; `LifecycleScripts.s3_uri`).
            @default required
        on_init_complete: file name, in that folder, of the script HyperPod runs after it has set
            up the instance (`LifeCycleConfig.OnInitComplete`, 1 to 128 characters).
            @default required
        threads_per_core: 1 turns simultaneous multithreading off, 2 leaves it on, on types that
            support it (`ThreadsPerCore`: 1 or 2).
            @default 2
        volume_gib: size of the secondary EBS volume HyperPod mounts at /opt/sagemaker
            (`EbsVolumeConfig.VolumeSizeInGB`: 1 to 16,384; the schema says gigabytes, GB).
            @default None: no secondary volume
        volume_kms_key_id: customer managed KMS key of the root and secondary volumes
            (`VolumeKmsKeyId`, at most 2,048 characters); only in the Continuous node provisioning
            mode, and never changed later (docs/research-notes.md).
            @default None: an AWS owned key
        deep_health_checks: deep health checks run when the group is created or updated
            (`OnStartDeepHealthChecks`: ``InstanceStress`` and/or ``InstanceConnectivity``).
            @default ``()``: none
        interface_type: the instances' network interfaces (`NetworkInterface.InterfaceType`):
            ``efa`` or ``efa-only``.
            @default None: no EFA interfaces set
        slurm_node_type: the group's Slurm role (`SlurmConfig.NodeType`): ``Controller``,
            ``Login`` or ``Compute``; Slurm orchestrator only.
            @default None: no Slurm configuration
        partition: the Slurm partition of a Compute group (`SlurmConfig.PartitionNames`, one at
            most; letters, digits and hyphens, at most 1,024 characters).
            @default None
        fsx_lustre: the FSx for Lustre file system HyperPod mounts (`FsxLustreConfig`), keys
            ``dns_name`` (16 to 275 characters), ``mount_name`` (1 to 8) and ``mount_path``
            (an absolute path, 1 to 1,024 characters).
            @default None: no file system mounted by HyperPod
        fsx_openzfs: the FSx for OpenZFS file system HyperPod mounts (`FsxOpenZfsConfig`), keys
            ``dns_name`` and ``mount_path`` (the shared home: /home).
            @default None: none
        training_plan_arn: ARN of the SageMaker training plan whose capacity the group uses
            (`TrainingPlanArn`, 50 to 2,048 characters).
            @default None
        spot: run on Spot capacity (`CapacityRequirements.Spot`).
            @default False: on-demand
        image_id: the AMI (`ImageId`): ``ami-`` and 8 to 17 hex digits, or ``default``.
            @default None: HyperPod's AMI
        kubernetes_labels: Kubernetes labels of the group's nodes (`KubernetesConfig.Labels`);
            EKS orchestrator only.
            @default empty: none
        kubernetes_taints: Kubernetes taints of the group's nodes (`KubernetesConfig.Taints`, at
            most 50), each with keys ``key`` (1 to 317 characters), ``value`` (optional, 1 to 63)
            and ``effect`` (``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``); EKS orchestrator only.
            @default ``()``: none
    """

    name: str
    instance_type: str
    count: int
    execution_role_arn: str
    lifecycle_uri: str
    on_init_complete: str
    threads_per_core: int = 2
    volume_gib: Optional[int] = None  # the secondary EBS volume HyperPod mounts at /opt/sagemaker
    volume_kms_key_id: Optional[str] = None  # customer managed key of the root and secondary volumes
    deep_health_checks: Sequence[str] = ()
    interface_type: Optional[str] = None  # "efa" or "efa-only" for EFA groups
    slurm_node_type: Optional[str] = None  # Controller | Login | Compute (Slurm orchestrator)
    partition: Optional[str] = None  # Slurm partition of a Compute group
    fsx_lustre: Optional[Mapping[str, str]] = None  # {"dns_name", "mount_name", "mount_path"}
    fsx_openzfs: Optional[Mapping[str, str]] = None  # {"dns_name", "mount_path"}
    training_plan_arn: Optional[str] = None
    spot: bool = False
    image_id: Optional[str] = None
    kubernetes_labels: Mapping[str, str] = field(default_factory=dict)
    kubernetes_taints: Sequence[Mapping[str, str]] = ()  # {"key", "value", "effect"} (EKS orchestrator)

    def properties(self) -> sagemaker.CfnCluster.ClusterInstanceGroupProperty:
        C = sagemaker.CfnCluster
        storage = []
        if self.volume_kms_key_id:
            storage.append(C.ClusterInstanceStorageConfigProperty(ebs_volume_config=C.ClusterEbsVolumeConfigProperty(
                root_volume=True, volume_kms_key_id=self.volume_kms_key_id)))
        if self.volume_gib:
            storage.append(C.ClusterInstanceStorageConfigProperty(ebs_volume_config=C.ClusterEbsVolumeConfigProperty(
                volume_size_in_gb=self.volume_gib, volume_kms_key_id=self.volume_kms_key_id)))
        if self.fsx_lustre:
            storage.append(C.ClusterInstanceStorageConfigProperty(
                fsx_lustre_config=C.ClusterFsxLustreConfigProperty(**self.fsx_lustre)))
        if self.fsx_openzfs:
            storage.append(C.ClusterInstanceStorageConfigProperty(
                fsx_open_zfs_config=C.ClusterFsxOpenZfsConfigProperty(**self.fsx_openzfs)))
        slurm = None
        if self.slurm_node_type:
            slurm = C.ClusterSlurmConfigProperty(node_type=self.slurm_node_type,
                                                 partition_names=[self.partition] if self.partition else None)
        return C.ClusterInstanceGroupProperty(
            instance_group_name=self.name, instance_type=f"ml.{self.instance_type}", instance_count=self.count,
            execution_role=self.execution_role_arn,
            life_cycle_config=C.ClusterLifeCycleConfigProperty(source_s3_uri=self.lifecycle_uri,
                                                               on_init_complete=self.on_init_complete),
            threads_per_core=self.threads_per_core, instance_storage_configs=storage or None,
            on_start_deep_health_checks=list(self.deep_health_checks) or None,
            network_interface=C.ClusterNetworkInterfaceProperty(interface_type=self.interface_type)
            if self.interface_type else None,
            slurm_config=slurm, training_plan_arn=self.training_plan_arn,
            capacity_requirements=C.ClusterCapacityRequirementsProperty(spot={}) if self.spot else None,
            image_id=self.image_id,
            kubernetes_config=self._kubernetes_config())

    def _kubernetes_config(self) -> Optional[sagemaker.CfnCluster.ClusterKubernetesConfigProperty]:
        if not (self.kubernetes_labels or self.kubernetes_taints):
            return None
        C = sagemaker.CfnCluster
        taints = [C.ClusterKubernetesTaintProperty(key=t["key"], value=t.get("value"), effect=t["effect"])
                  for t in self.kubernetes_taints]
        return C.ClusterKubernetesConfigProperty(labels=dict(self.kubernetes_labels) or None, taints=taints or None)


class HyperPodCluster(Construct):
    """A SageMaker HyperPod cluster, with automatic node recovery unless told otherwise.

    Props:
        name: the cluster's name (`ClusterName`): 1 to 63 letters, digits and hyphens, starting
            and ending with a letter or digit.
            @default required
        orchestrator: the orchestrator (`Orchestrator`): Slurm (`slurm`) or an EKS cluster
            (`eks` with its cluster ARN).
            @default required
        instance_groups: the instance groups (1 to 100, names unique).
            @default required
        subnet_ids: the subnets of the instances' interfaces (`VpcConfig.Subnets`: 1 to 16).
            @default required
        security_group_ids: their security groups (`VpcConfig.SecurityGroupIds`: 1 to 5).
            @default required
        node_provisioning_mode: ``Continuous`` (`NodeProvisioningMode`: partial capacity and
            retries; needed for customer managed volume keys), the only value the schema takes.
            @default None: HyperPod's standard provisioning
        node_recovery: ``Automatic`` (HyperPod reboots or replaces faulty nodes) or ``None`` (an
            administrator does) (`NodeRecovery`).
            @default ``Automatic``

    Attributes:
        resource: the `CfnCluster`.
        cluster_arn: the cluster's ARN.
        cluster_name: the cluster's name (as given).
    """

    def __init__(self, scope: Construct, construct_id: str, *, name: str,
                 orchestrator: sagemaker.CfnCluster.OrchestratorProperty,
                 instance_groups: Sequence[InstanceGroup], subnet_ids: Sequence[str],
                 security_group_ids: Sequence[str], node_provisioning_mode: Optional[str] = None,
                 node_recovery: str = NODE_RECOVERY) -> None:
        super().__init__(scope, construct_id)
        if node_recovery not in (NODE_RECOVERY, NO_NODE_RECOVERY):
            raise ConstructError(self, f"node recovery {node_recovery!r} is not {NODE_RECOVERY} or {NO_NODE_RECOVERY}")
        names = [g.name for g in instance_groups]
        if len(set(names)) != len(names):
            raise ConstructError(self, f"instance group names must be unique: {names}")
        self.resource = sagemaker.CfnCluster(
            self, "Resource", cluster_name=name, orchestrator=orchestrator, node_recovery=node_recovery,
            node_provisioning_mode=node_provisioning_mode,
            instance_groups=[g.properties() for g in instance_groups],
            vpc_config=sagemaker.CfnCluster.VpcConfigProperty(subnets=list(subnet_ids),
                                                              security_group_ids=list(security_group_ids)))
        cdk.Validations.of(self.resource).acknowledge(cdk.Acknowledgment(
            id=REGIONAL_TYPE_RULE, reason="instance types checked by cfn-lint and fmcluster preflight"))
        self.cluster_arn: str = self.resource.attr_cluster_arn
        self.cluster_name: str = name

    def add_dependency(self, *targets: Construct) -> None:
        for target in targets:
            self.resource.node.add_dependency(target)
