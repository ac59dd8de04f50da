"""AWS Parallel Computing Service (Slurm): cluster, compute node group, queue.

Thin constructs over the `aws_pcs` L1 resources, with plain props. There are a handful of each
per cluster, so the typed L1 property structs cost nothing that matters here (unlike the
launch templates' interface lists).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import aws_cdk as cdk
from aws_cdk import aws_pcs as pcs
from constructs import Construct

from fmcluster_cdk.errors import ConstructError

PURCHASE_OPTIONS = ("ONDEMAND", "SPOT", "CAPACITY_BLOCK")
SIZES = ("SMALL", "MEDIUM", "LARGE")
# NodeLifecycleActions (the AWS::PCS::ComputeNodeGroup resource schema; PCS API Reference,
# "NodeLifecycleScript", "ScriptSource", "NodeLifecycleStages")
LIFECYCLE_STAGES = ("NodeBootstrapped", "NodeReady")
EXECUTION_POLICIES = ("FIRST_BOOT_ONLY", "EVERY_BOOT")
ON_ERROR = ("TERMINATE", "STOP_SEQUENCE", "CONTINUE")
SCRIPT_CACHING_POLICIES = ("CACHE_ONCE", "REFRESH_ON_REBOOT")
SCRIPT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _-]{0,63}")
SCRIPT_CHECKSUM = re.compile(r"[0-9a-f]{64}")
SCRIPTS_PER_STAGE = 20
SCRIPT_ARGUMENTS = 20
SCRIPT_ARGUMENT_LENGTH = 256


@dataclass(frozen=True)
class LifecycleAction:
    """One node lifecycle script of a compute node group.

    Props:
        name: the script's name (letters, digits, spaces, '_' and '-', a letter or digit first; at
            most 64 characters), unique in the node group.
            @default required
        stage: ``NodeBootstrapped`` (before slurmd starts) or ``NodeReady`` (once slurmd has registered).
            @default required
        location: ``s3://BUCKET/KEY`` or an HTTPS URL (may be a token).
            @default required
        checksum: the SHA-256 of the script, 64 lowercase hex digits.
            @default required
        arguments: its arguments (at most 20, each at most 256 characters; may hold tokens, whose
            deployed length the caller answers for).
            @default none
        execution_policy: ``FIRST_BOOT_ONLY`` or ``EVERY_BOOT``.
            @default ``FIRST_BOOT_ONLY``
        on_error: ``TERMINATE`` (the node), ``STOP_SEQUENCE`` (the stage's later scripts) or ``CONTINUE``.
            @default ``TERMINATE``
    """

    name: str
    stage: str
    location: str
    checksum: str
    arguments: Sequence[str] = ()
    execution_policy: str = "FIRST_BOOT_ONLY"
    on_error: str = "TERMINATE"

    def problems(self) -> list[str]:
        found = []
        if not SCRIPT_NAME.fullmatch(self.name):
            found.append(f"name {self.name!r}: letters, digits, spaces, '_' and '-', at most 64")
        if self.stage not in LIFECYCLE_STAGES:
            found.append(f"stage {self.stage!r} is not one of {', '.join(LIFECYCLE_STAGES)}")
        if not SCRIPT_CHECKSUM.fullmatch(self.checksum):
            found.append("checksum: 64 lowercase hex digits (SHA-256)")
        if self.execution_policy not in EXECUTION_POLICIES:
            found.append(f"execution policy {self.execution_policy!r} is not one of {', '.join(EXECUTION_POLICIES)}")
        if self.on_error not in ON_ERROR:
            found.append(f"on error {self.on_error!r} is not one of {', '.join(ON_ERROR)}")
        if len(self.arguments) > SCRIPT_ARGUMENTS:
            found.append(f"{len(self.arguments)} arguments: at most {SCRIPT_ARGUMENTS}")
        found += [f"an argument of {len(a)} characters: at most {SCRIPT_ARGUMENT_LENGTH}" for a in self.arguments
                  if len(a) > SCRIPT_ARGUMENT_LENGTH and not cdk.Token.is_unresolved(a)]
        return found

    def property(self) -> pcs.CfnComputeNodeGroup.NodeLifecycleScriptProperty:
        return pcs.CfnComputeNodeGroup.NodeLifecycleScriptProperty(
            name=self.name, arguments=list(self.arguments) or None, execution_policy=self.execution_policy,
            on_error=self.on_error, script_source=pcs.CfnComputeNodeGroup.ScriptSourceProperty(
                script_location=self.location, checksum=self.checksum))


class SlurmCluster(Construct):
    """An AWS PCS cluster running Slurm. PCS takes one subnet for its controller's interface.

    Slurm accounting is off unless `accounting` (PCS default `NONE`): on, PCS runs slurmdbd and
    its database itself, for an hourly fee (PCS User Guide, "Slurm accounting in AWS PCS"). PCS
    cannot turn accounting off on a cluster that has it: only a new cluster can.
    The cluster's name, networking and size cannot change without replacing it.

    Props:
        name: the cluster's name (`Name`; the resource schema gives it no pattern or length).
            @default required
        slurm_version: the Slurm version (`Scheduler.Version`): 24.05, 24.11, 25.05 or 25.11
            (the versions fmcluster offers, `fmcluster.facts.controlplanes`; the PCS API also lists 23.11).
            @default required
        size: ``SMALL`` (up to 32 compute nodes and 256 jobs), ``MEDIUM`` (512 and 8,192) or
            ``LARGE`` (2,048 and 16,384).
            @default required
        subnet_id: the subnet of the controller's interface (PCS takes exactly one).
            @default required
        security_group_ids: the controller interface's security groups (``sg-...``).
            @default required
        scale_down_idle_seconds: how long a node stays idle before PCS scales it down, in seconds
            (`ScaleDownIdleTimeInSeconds`: at least 1).
            @default 600
        slurm_settings: custom Slurm settings of the cluster, name -> value (`SlurmCustomSettings`:
            PCS takes a subset of slurm.conf's, such as ``Prolog`` and ``PrologFlags``), in order.
            @default none
        accounting: Slurm accounting managed by PCS (`Accounting.Mode` ``STANDARD``), its records
            kept as long as the cluster (`DefaultPurgeTimeInDays` -1).
            @default False

    Attributes:
        resource: the `pcs.CfnCluster`.
        cluster_id: the cluster's id.
        cluster_arn: the cluster's ARN.
    """

    def __init__(self, scope: Construct, construct_id: str, *, name: str, slurm_version: str, size: str,
                 subnet_id: str, security_group_ids: Sequence[str], scale_down_idle_seconds: int = 600,
                 slurm_settings: Optional[Mapping[str, str]] = None, accounting: bool = False) -> None:
        super().__init__(scope, construct_id)
        if size not in SIZES:
            raise ConstructError(self, f"PCS cluster size {size!r} is not one of {', '.join(SIZES)}")
        self.resource = pcs.CfnCluster(
            self, "Resource", name=name, size=size,
            scheduler=pcs.CfnCluster.SchedulerProperty(type="SLURM", version=slurm_version),
            networking=pcs.CfnCluster.NetworkingProperty(subnet_ids=[subnet_id],
                                                         security_group_ids=list(security_group_ids)),
            slurm_configuration=pcs.CfnCluster.SlurmConfigurationProperty(
                scale_down_idle_time_in_seconds=scale_down_idle_seconds,
                accounting=pcs.CfnCluster.AccountingProperty(mode="STANDARD", default_purge_time_in_days=-1)
                if accounting else None,
                slurm_custom_settings=[pcs.CfnCluster.SlurmCustomSettingProperty(parameter_name=k, parameter_value=v)
                                       for k, v in (slurm_settings or {}).items()] or None))

    @property
    def cluster_id(self) -> str:
        return self.resource.attr_id

    @property
    def cluster_arn(self) -> str:
        return self.resource.attr_arn


class ComputeNodeGroup(Construct):
    """A PCS compute node group of one instance type, launched from a custom launch template.

    Props:
        cluster_id: the PCS cluster's id.
            @default required
        name: the node group's name (`Name`; no pattern or length in the resource schema).
            @default required
        instance_type: the EC2 instance type (`InstanceConfigs`), such as ``p5.48xlarge``.
            @default required
        subnet_ids: the subnets of the instances, in the cluster's VPC.
            @default required
        launch_template_id: the launch template (``lt-...``).
            @default required
        launch_template_version: the launch template's version (a number, as a string).
            @default required
        instance_profile_arn: the instances' instance profile; its role needs
            pcs:RegisterComputeNodeGroupInstance and a name starting with ``AWSPCS`` or the path
            ``/aws-pcs/`` (`NodeRole.instance_profile_arn`).
            @default required
        min_count: the fewest instances (`MinInstanceCount`: at least 0).
            @default required
        max_count: the most instances (`MaxInstanceCount`: at least `min_count`; for a Capacity
            Block, at most its size).
            @default required
        purchase_option: ``ONDEMAND``, ``SPOT`` or ``CAPACITY_BLOCK`` (`PurchaseOption`).
            @default ``ONDEMAND``
        ami_id: the AMI (`AmiId`: ``ami-`` and lowercase letters or digits).
            @default None: the launch template's AMI
        lifecycle_actions: the node lifecycle scripts (`NodeLifecycleActions`), each stage's in
            order (at most 20 a stage; names unique). They need the PCS agent 1.5.0-1 or later in
            the AMI; changing them drains and replaces the group's nodes.
            @default none
        script_caching_policy: ``CACHE_ONCE`` (each script downloaded once) or ``REFRESH_ON_REBOOT``.
            @default ``CACHE_ONCE``

    Attributes:
        resource: the `pcs.CfnComputeNodeGroup`.
        node_group_id: the node group's id.
    """

    def __init__(self, scope: Construct, construct_id: str, *, cluster_id: str, name: str, instance_type: str,
                 subnet_ids: Sequence[str], launch_template_id: str, launch_template_version: str,
                 instance_profile_arn: str, min_count: int, max_count: int, purchase_option: str = "ONDEMAND",
                 ami_id: Optional[str] = None, lifecycle_actions: Sequence[LifecycleAction] = (),
                 script_caching_policy: str = "CACHE_ONCE") -> None:
        super().__init__(scope, construct_id)
        if purchase_option not in PURCHASE_OPTIONS:
            raise ConstructError(self, f"purchase option {purchase_option!r} is not one of "
                                       f"{', '.join(PURCHASE_OPTIONS)}")
        if not 0 <= min_count <= max_count:
            raise ConstructError(self, f"scaling {min_count}..{max_count} is not a range")
        self.resource = pcs.CfnComputeNodeGroup(
            self, "Resource", cluster_id=cluster_id, name=name, ami_id=ami_id, subnet_ids=list(subnet_ids),
            purchase_option=purchase_option, iam_instance_profile_arn=instance_profile_arn,
            instance_configs=[pcs.CfnComputeNodeGroup.InstanceConfigProperty(instance_type=instance_type)],
            custom_launch_template=pcs.CfnComputeNodeGroup.CustomLaunchTemplateProperty(
                template_id=launch_template_id, version=launch_template_version),
            scaling_configuration=pcs.CfnComputeNodeGroup.ScalingConfigurationProperty(
                min_instance_count=min_count, max_instance_count=max_count),
            node_lifecycle_actions=self._lifecycle_actions(lifecycle_actions, script_caching_policy))

    def _lifecycle_actions(self, actions: Sequence[LifecycleAction],
                           caching: str) -> Optional[pcs.CfnComputeNodeGroup.NodeLifecycleActionsProperty]:
        if caching not in SCRIPT_CACHING_POLICIES:
            raise ConstructError(self, f"script caching policy {caching!r} is not one of "
                                       f"{', '.join(SCRIPT_CACHING_POLICIES)}")
        problems = [f"lifecycle action {a.name!r}: {p}" for a in actions for p in a.problems()]
        names = [a.name for a in actions]
        problems += [f"lifecycle action {n!r} named twice" for n in sorted(set(names)) if names.count(n) > 1]
        stages = {stage: [a.property() for a in actions if a.stage == stage] for stage in LIFECYCLE_STAGES}
        problems += [f"{len(s)} {stage} scripts: at most {SCRIPTS_PER_STAGE}" for stage, s in stages.items()
                     if len(s) > SCRIPTS_PER_STAGE]
        if problems:
            raise ConstructError(self, "; ".join(problems))
        if not actions:
            return None
        return pcs.CfnComputeNodeGroup.NodeLifecycleActionsProperty(
            script_caching_policy=caching, stages=pcs.CfnComputeNodeGroup.NodeLifecycleStagesProperty(
                node_bootstrapped=stages["NodeBootstrapped"] or None, node_ready=stages["NodeReady"] or None))

    @property
    def node_group_id(self) -> str:
        return self.resource.attr_id


class SlurmQueue(Construct):
    """A PCS queue (a Slurm partition) over compute node groups.

    Props:
        cluster_id: the PCS cluster's id.
            @default required
        name: the queue's name, the Slurm partition's (`Name`; no pattern or length in the
            resource schema).
            @default required
        node_group_ids: ids of the compute node groups the queue sends jobs to.
            @default required
        slurm_settings: custom Slurm settings of the partition, name -> value (`SlurmCustomSettings`
            of the queue: PCS takes a subset, such as ``OverSubscribe``).
            @default none

    Attributes:
        resource: the `pcs.CfnQueue`.
    """

    def __init__(self, scope: Construct, construct_id: str, *, cluster_id: str, name: str,
                 node_group_ids: Sequence[str], slurm_settings: Optional[Mapping[str, str]] = None) -> None:
        super().__init__(scope, construct_id)
        settings = [pcs.CfnQueue.SlurmCustomSettingProperty(parameter_name=k, parameter_value=v)
                    for k, v in (slurm_settings or {}).items()]
        self.resource = pcs.CfnQueue(
            self, "Resource", cluster_id=cluster_id, name=name,
            compute_node_group_configurations=[
                pcs.CfnQueue.ComputeNodeGroupConfigurationProperty(compute_node_group_id=group_id)
                for group_id in node_group_ids],
            slurm_configuration=pcs.CfnQueue.SlurmConfigurationProperty(slurm_custom_settings=settings)
            if settings else None)
