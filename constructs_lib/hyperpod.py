"""A SageMaker HyperPod cluster (AWS::SageMaker::Cluster) and its instance groups.

Knows nothing of the spec: the stacks (stacks/hyperpod.py) translate node groups into
`InstanceGroup`s (a few per cluster, so typed L1 structs cost little).

EBS volumes: HyperPod encrypts each instance's root volume, and the secondary volume it mounts at
/opt/sagemaker, with an AWS owned key unless an instance group names a customer managed key
(`volume_kms_key_id`: one EbsVolumeConfig with RootVolume true for the root volume, and the key on
the secondary volume's). SageMaker Developer Guide, "Customer managed AWS KMS key encryption for
SageMaker HyperPod": only clusters in the continuous node provisioning mode (CONTINUOUS) take such a
key; the key of an instance group cannot be changed later; the execution role needs
kms:CreateGrant and kms:DescribeKey on it (constructs_lib/hyperpod_role.py), and the key policy must
not require an encryption context (HyperPod passes none).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

import aws_cdk as cdk
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

DEEP_HEALTH_CHECKS = ("InstanceStress", "InstanceConnectivity")
# The CDK's built-in CloudFormation validation (aws-cdk-lib 2.275) carries older regional
# instance-type data for AWS::SageMaker::Cluster than cfn-lint 1.58 (which the tests run on every
# example: ml.p6-b200.48xlarge and ml.p6-b300.48xlarge are valid in us-east-1 there). Offerings per
# region are account facts for `fmcluster preflight`.
REGIONAL_TYPE_RULE = "CloudFormation-Validate::E3644"
NODE_RECOVERY = "Automatic"
CONTINUOUS = "Continuous"  # NodeProvisioningMode: partial capacity, retries; required for customer managed keys
CONTROLLER, LOGIN, COMPUTE = "Controller", "Login", "Compute"


@dataclass(frozen=True)
class InstanceGroup:
    """One HyperPod instance group. `instance_type` without the ``ml.`` prefix."""

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
    """`orchestrator`: a CfnCluster.OrchestratorProperty (slurm or eks). Attributes:
    `cluster_arn`, `cluster_name`, `resource` (the CfnCluster)."""

    def __init__(self, scope: Construct, construct_id: str, *, name: str, orchestrator: sagemaker.CfnCluster.OrchestratorProperty,
                 instance_groups: Sequence[InstanceGroup], subnet_ids: Sequence[str],
                 security_group_ids: Sequence[str], node_provisioning_mode: Optional[str] = None) -> None:
        super().__init__(scope, construct_id)
        names = [g.name for g in instance_groups]
        if len(set(names)) != len(names):
            raise ValueError(f"instance group names must be unique: {names}")
        self.resource = sagemaker.CfnCluster(
            self, "Resource", cluster_name=name, orchestrator=orchestrator, node_recovery=NODE_RECOVERY,
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
