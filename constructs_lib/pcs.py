"""AWS Parallel Computing Service (Slurm): cluster, compute node group, queue.

Thin constructs over the `aws_pcs` L1 resources, with plain props. There are a handful of each
per cluster, so the typed L1 property structs cost nothing that matters here (unlike the
launch templates' interface lists).
"""

from __future__ import annotations

from typing import Optional, Sequence

from aws_cdk import aws_pcs as pcs
from constructs import Construct

PURCHASE_OPTIONS = ("ONDEMAND", "SPOT", "CAPACITY_BLOCK")
SIZES = ("SMALL", "MEDIUM", "LARGE")


class SlurmCluster(Construct):
    """An AWS PCS cluster running Slurm. PCS takes one subnet for its controller's interface.

    Slurm accounting stays off (PCS default `NONE`): it needs slurmdbd and costs an hourly fee.
    """

    def __init__(self, scope: Construct, construct_id: str, *, name: str, slurm_version: str, size: str,
                 subnet_id: str, security_group_ids: Sequence[str], scale_down_idle_seconds: int = 600) -> None:
        super().__init__(scope, construct_id)
        if size not in SIZES:
            raise ValueError(f"PCS cluster size {size!r} is not one of {', '.join(SIZES)}")
        self.resource = pcs.CfnCluster(
            self, "Resource", name=name, size=size,
            scheduler=pcs.CfnCluster.SchedulerProperty(type="SLURM", version=slurm_version),
            networking=pcs.CfnCluster.NetworkingProperty(subnet_ids=[subnet_id],
                                                         security_group_ids=list(security_group_ids)),
            slurm_configuration=pcs.CfnCluster.SlurmConfigurationProperty(
                scale_down_idle_time_in_seconds=scale_down_idle_seconds))

    @property
    def cluster_id(self) -> str:
        return self.resource.attr_id

    @property
    def cluster_arn(self) -> str:
        return self.resource.attr_arn


class ComputeNodeGroup(Construct):
    """A PCS compute node group of one instance type, launched from a custom launch template."""

    def __init__(self, scope: Construct, construct_id: str, *, cluster_id: str, name: str, instance_type: str,
                 subnet_ids: Sequence[str], launch_template_id: str, launch_template_version: str,
                 instance_profile_arn: str, min_count: int, max_count: int, purchase_option: str = "ONDEMAND",
                 ami_id: Optional[str] = None) -> None:
        super().__init__(scope, construct_id)
        if purchase_option not in PURCHASE_OPTIONS:
            raise ValueError(f"purchase option {purchase_option!r} is not one of {', '.join(PURCHASE_OPTIONS)}")
        if not 0 <= min_count <= max_count:
            raise ValueError(f"scaling {min_count}..{max_count} is not a range")
        self.resource = pcs.CfnComputeNodeGroup(
            self, "Resource", cluster_id=cluster_id, name=name, ami_id=ami_id, subnet_ids=list(subnet_ids),
            purchase_option=purchase_option, iam_instance_profile_arn=instance_profile_arn,
            instance_configs=[pcs.CfnComputeNodeGroup.InstanceConfigProperty(instance_type=instance_type)],
            custom_launch_template=pcs.CfnComputeNodeGroup.CustomLaunchTemplateProperty(
                template_id=launch_template_id, version=launch_template_version),
            scaling_configuration=pcs.CfnComputeNodeGroup.ScalingConfigurationProperty(
                min_instance_count=min_count, max_instance_count=max_count))

    @property
    def node_group_id(self) -> str:
        return self.resource.attr_id


class SlurmQueue(Construct):
    """A PCS queue (a Slurm partition) over compute node groups."""

    def __init__(self, scope: Construct, construct_id: str, *, cluster_id: str, name: str,
                 node_group_ids: Sequence[str]) -> None:
        super().__init__(scope, construct_id)
        self.resource = pcs.CfnQueue(
            self, "Resource", cluster_id=cluster_id, name=name,
            compute_node_group_configurations=[
                pcs.CfnQueue.ComputeNodeGroupConfigurationProperty(compute_node_group_id=group_id)
                for group_id in node_group_ids])
