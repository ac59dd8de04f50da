"""NAME-cluster for `orchestrator.type: hyperpod-slurm`: Slurm on Amazon SageMaker HyperPod.

Sources and details: docs/research-notes.md, "fmcluster_cdk/stacks/hyperpod.py"."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional, Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from fmcluster.facts.controlplanes import SPOT
from fmcluster.model.cluster import COMPUTE as COMPUTE_ROLE
from fmcluster.model.cluster import CONTROLLER as CONTROLLER_ROLE
from fmcluster.model.cluster import LOGIN as LOGIN_ROLE
from fmcluster.model.cluster import OPENZFS, ClusterModel, NodeGroup
from fmcluster.node import accounting
from fmcluster.node import hyperpod as hyperpod_node
from fmcluster.node.refs import NodeRefs
from fmcluster.spec.models import ClusterSpec
from fmcluster_cdk.constructs.compute.node_replacer import NodeReplacer
from fmcluster_cdk.constructs.hyperpod.cluster import (
    COMPUTE,
    CONTINUOUS,
    CONTROLLER,
    DEEP_HEALTH_CHECKS,
    LOGIN,
    NO_NODE_RECOVERY,
    NODE_RECOVERY,
    HyperPodCluster,
    InstanceGroup,
)
from fmcluster_cdk.constructs.hyperpod.lifecycle import LifecycleScripts
from fmcluster_cdk.constructs.hyperpod.role import ExecutionPolicyProps, HyperPodExecutionRole
from fmcluster_cdk.errors import ConstructError
from fmcluster_cdk.stacks import node_groups
from fmcluster_cdk.stacks.images import IDENTITY_TAG
from fmcluster_cdk.stacks.reference import reference_repository_arns
from fmcluster_cdk.stacks.refs import ImagesRefs, NetworkRefs, ObservabilityRefs, StorageRefs

# The Slurm node type of each of the model's groups (fmcluster.model.cluster roles).
SLURM_NODE_TYPES = {CONTROLLER_ROLE: CONTROLLER, LOGIN_ROLE: LOGIN, COMPUTE_ROLE: COMPUTE}
ACCOUNTING_DATABASE = "slurm_acct_db"  # slurmdbd's StorageLoc in the accounting database
SLURM_CONFIG_STRATEGY = "Managed"  # HyperPod owns the partition-node mapping of slurm.conf, with drift detection


def threads_per_core(group: NodeGroup) -> int:
    """GPU nodes run one thread per core (the usual HPC setting for training ranks and data
    loaders pinned to physical cores); CPU nodes keep SMT."""
    return 1 if group.instance.is_gpu else 2


class HyperPodGroups(Construct):
    """Lifecycle folders and the execution role for a set of instance groups, and the
    `InstanceGroup`s themselves. `model`: the cluster, whose setup of each group its lifecycle
    folder renders (fmcluster.node.hyperpod.bundle: the entry script and its hooks), under the
    cluster's prefix. `groups`: the instance groups without role and lifecycle
    (`execution_role_arn` and `lifecycle_uri` are filled in here). `refs`: what their scripts name
    of the other stacks (fmcluster.node.refs). `workspace_arn`, `metrics_parameter_arn`: the role's
    metrics permissions (HyperPodExecutionRole). `efa_file_system`: the groups mount an
    EFA-enabled file system through HyperPod (the role may describe file systems).
    `image_repository_arns`: the ECR repositories whose images the groups run (the role may pull
    from them)."""

    def __init__(self, scope: Construct, construct_id: str, *, model: ClusterModel, groups: Sequence[InstanceGroup],
                 refs: NodeRefs, network: NetworkRefs, storage: StorageRefs, subnet_ids: Sequence[str],
                 security_group_ids: Sequence[str],
                 eks_cluster_arn: Optional[str] = None, description: str, workspace_arn: Optional[str] = None,
                 metrics_parameter_arn: Optional[str] = None, teams_parameter_arn: Optional[str] = None,
                 accounting_secret_arn: Optional[str] = None, efa_file_system: bool = False,
                 image_repository_arns: Sequence[str] = ()) -> None:
        super().__init__(scope, construct_id)
        self.scripts: dict[str, LifecycleScripts] = {
            g.name: LifecycleScripts(self, f"Lifecycle-{g.name}", cluster=model.name,
                                     bundle=hyperpod_node.bundle(model, model.group(g.name), refs))
            for g in groups}
        buckets = storage.bucket_arns or {}
        self.role = HyperPodExecutionRole(self, "ExecutionRole", description=description, policy=ExecutionPolicyProps(
            lifecycle=list(self.scripts.values()),
            bucket_arns=[buckets[name] for name in sorted(buckets)], kms_key_arn=storage.kms_key_arn,
            vpc_id=network.vpc_id, subnet_ids=subnet_ids, security_group_ids=security_group_ids,
            eks_cluster_arn=eks_cluster_arn, workspace_arn=workspace_arn,
            metrics_parameter_arn=metrics_parameter_arn, teams_parameter_arn=teams_parameter_arn,
            accounting_secret_arn=accounting_secret_arn, efa_file_system=efa_file_system,
            volume_key_arn=storage.kms_key_arn, image_repository_arns=image_repository_arns))
        self.instance_groups = [replace(g, execution_role_arn=self.role.role_arn,
                                        lifecycle_uri=self.scripts[g.name].s3_uri,
                                        volume_kms_key_id=storage.kms_key_arn) for g in groups]


def image_id(group: NodeGroup, images: Optional[ImagesRefs]) -> Optional[str]:
    """The AMI a group launches from: its baked node image's (`group.image`, from NAME-images), its
    own `ami_id`, or None (HyperPod's default image)."""
    if group.image is not None and images is not None:
        return images.image_ids[group.image]
    return group.ami_id


def compute_group(m: ClusterModel, group: NodeGroup, images: Optional[ImagesRefs] = None,
                  **extra: Any) -> InstanceGroup:
    """The instance group of a spec node group (role and lifecycle left empty); `images`: NAME-images,
    where the group launches from a baked image; `extra`: the orchestrator's own fields (Slurm node
    type and partition, FSx, Kubernetes labels and taints)."""
    return InstanceGroup(
        name=group.name, instance_type=group.instance_type, count=group.max_count, execution_role_arn="",
        lifecycle_uri="", on_init_complete=hyperpod_node.ENTRYPOINT, threads_per_core=threads_per_core(group),
        volume_gib=group.root_volume_gib, deep_health_checks=deep_health_checks(m, group),
        interface_type=m.control_plane.interface_mode.value if group.efa else None,
        training_plan_arn=group.capacity.training_plan_arn, spot=group.capacity.type == SPOT,
        image_id=image_id(group, images),
        **extra)


def deep_health_checks(m: ClusterModel, group: NodeGroup) -> tuple[str, ...]:
    """The deep health checks HyperPod runs on a group's new nodes before they take jobs (stress and
    connectivity, `OnStartDeepHealthChecks`): on every GPU group while the spec's health.deep_check
    is on (HyperPod labels a node Unschedulable while they run, and replaces one that fails them
    under automatic node recovery)."""
    return DEEP_HEALTH_CHECKS if group.instance.is_gpu and m.health.deep_check else ()


def node_recovery(m: ClusterModel) -> str:
    """HyperPod's node recovery: automatic (it reboots or replaces a faulty node) unless the spec's
    health.replace is off (a faulty node waits for a person)."""
    return NODE_RECOVERY if m.health.replace else NO_NODE_RECOVERY


def provisioning_mode(spec: ClusterSpec) -> Optional[str]:
    """Continuous node provisioning where the spec needs it: a storage key for the instances' volumes
    (HyperPod takes a customer managed key only in that mode), or Spot groups on EKS
    (fmcluster_cdk/stacks/hyperpod_eks.py), or Slurm teams (HyperPod takes an accounting database
    only in that mode: AWS::SageMaker::Cluster ClusterAccountingDatabase)."""
    teams = bool(spec.teams) and spec.orchestrator.type == "hyperpod-slurm"
    return CONTINUOUS if spec.storage.kms or teams else None


def slurm_orchestrator(mode: Optional[str] = None, accounting: Optional[tuple[str, int, str, str]] = None
                       ) -> sagemaker.CfnCluster.OrchestratorProperty:
    """The Slurm orchestrator: `Managed` slurm.conf partitions, except in continuous provisioning,
    which takes no SlurmConfigStrategy (SageMaker Developer Guide, "Continuous provisioning for
    enhanced cluster operations with Slurm": any value is an API error; it merges partitions into
    slurm.conf, without drift detection). `accounting`: the accounting database slurmdbd uses
    (endpoint, port, database name, credentials secret ARN), continuous provisioning only."""
    strategy = None if mode == CONTINUOUS else SLURM_CONFIG_STRATEGY
    database = None
    if accounting is not None:
        endpoint, port, name, secret_arn = accounting
        database = sagemaker.CfnCluster.ClusterAccountingDatabaseProperty(
            endpoint=endpoint, port=port, name=name, secret_arn=secret_arn)
    return sagemaker.CfnCluster.OrchestratorProperty(
        slurm=sagemaker.CfnCluster.ClusterOrchestratorSlurmConfigProperty(slurm_config_strategy=strategy,
                                                                          accounting_database=database))


class HyperPodSlurmStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, *, model: ClusterModel, network: NetworkRefs,
                 storage: StorageRefs, observability: Optional[ObservabilityRefs] = None,
                 images: Optional[ImagesRefs] = None, **kwargs: Any) -> None:
        """`images`: NAME-images, where the model's groups launch from baked node images (NodeGroup.image)."""
        super().__init__(scope, construct_id, **kwargs)
        spec = model.spec
        self.model = model
        if model.images and images is None:
            keys = ", ".join(i.key for i in model.images)
            raise ConstructError(self, f"the node groups launch from node images ({keys}): no images stack")
        # what the nodes name of the other stacks (the file system, the home, the workspace)
        refs = node_groups.node_refs(self, model, storage, observability)
        fsx = self.fsx_lustre(spec, refs)
        home = self.fsx_openzfs(model, refs)
        common: dict[str, Any] = dict(execution_role_arn="", lifecycle_uri="",
                                      on_init_complete=hyperpod_node.ENTRYPOINT, fsx_lustre=fsx, fsx_openzfs=home)
        own = [g for g in (model.controller, model.login) if g is not None]  # the controller, the login nodes
        groups = [InstanceGroup(name=g.name, instance_type=g.instance_type, count=g.max_count,
                                threads_per_core=threads_per_core(g), volume_gib=g.root_volume_gib,
                                slurm_node_type=SLURM_NODE_TYPES[g.role], image_id=image_id(g, images), **common)
                  for g in own]
        groups += [compute_group(model, g, images, slurm_node_type=COMPUTE, partition=g.name, fsx_lustre=fsx,
                                 fsx_openzfs=home) for g in model.node_groups]

        subnets = [network.gpu_subnet_id]
        security_groups = [network.node_security_group_id]
        if any(g.efa for g in model.all_groups):
            security_groups.append(network.efa_security_group_id)
        metrics: dict[str, Any] = {}
        self.metrics_parameter: Optional[ssm.StringParameter] = None
        if observability is not None:
            metrics = self._metrics(spec, observability)
        database = getattr(storage, "accounting_database", None)  # NAME-storage's, with teams
        teams = self._teams(database) if model.teams else {}
        # What each group's lifecycle script does is its setup's (fmcluster.model.node): compute
        # nodes that are not ready (GPUs missing, the file system or the home not mounted) are
        # drained and GPU compute nodes check their health while in service; Enroot and Pyxis on
        # every group; the image's home directories copied into the shared home HyperPod mounts.
        self.groups = HyperPodGroups(self, "InstanceGroups", model=model, groups=groups, refs=refs,
                                     network=network, storage=storage,
                                     subnet_ids=subnets, security_group_ids=security_groups,
                                     description=f"SageMaker HyperPod instance groups of {spec.name}",
                                     efa_file_system=bool(fsx) and model.lustre_efa,
                                     image_repository_arns=reference_repository_arns(self, model), **metrics, **teams)
        mode = provisioning_mode(spec)
        accounting_database = (database.endpoint, database.port, ACCOUNTING_DATABASE, database.secret.secret_arn
                               ) if model.teams and database is not None else None
        self.cluster = HyperPodCluster(self, "Cluster", name=spec.name,
                                       orchestrator=slurm_orchestrator(mode, accounting_database),
                                       instance_groups=self.groups.instance_groups, subnet_ids=subnets,
                                       security_group_ids=security_groups, node_provisioning_mode=mode,
                                       node_recovery=node_recovery(model))
        self.plan_reads = self._training_plan_reads(model)
        # The AMIs come from NAME-images by weak references, which CloudFormation reads only when this
        # stack changes: each image's identity on the cluster changes it with the image.
        for image in model.images:
            assert images is not None  # checked above
            cdk.Tags.of(self.cluster).add(f"{IDENTITY_TAG}:{image.key}", images.identities[image.key])

        # Nodes drained for a hardware fault ask to be replaced (health.replace; GPU compute groups)
        self.replacer: Optional[NodeReplacer] = None
        if model.health.replace and any(g.instance.is_gpu for g in model.node_groups):
            wanted = model.health
            self.replacer = NodeReplacer(
                self, "NodeReplacer", cluster_name=spec.name, plane="hyperpod-slurm",
                max_replacing=wanted.max_replacing, window_minutes=wanted.replace_window_minutes,
                block_guard_minutes=wanted.block_guard_minutes, hyperpod_cluster_arn=self.cluster.cluster_arn,
                training_plan_arns={g.name: g.capacity.training_plan_arn for g in model.node_groups
                                    if g.capacity.training_plan_arn})
            self.replacer.grant_send(self.groups.role.role)
            cdk.CfnOutput(self, "NodeReplacementLog", value=self.replacer.log_group.log_group_name,
                          description="the node replacer's record of every decision (aws logs tail)")

        partitions = ",".join(g.name for g in model.node_groups)
        for output_id, value, description in (
                ("ClusterArn", self.cluster.cluster_arn, "SageMaker HyperPod cluster ARN"),
                ("ClusterName", spec.name, "aws sagemaker list-cluster-nodes --cluster-name NAME"),
                ("ExecutionRoleArn", self.groups.role.role_arn, "execution role of the instance groups"),
                ("Partitions", partitions, "Slurm partitions (one per node group)")):
            cdk.CfnOutput(self, output_id, value=value, description=description)

    def _training_plan_reads(self, model: ClusterModel) -> Optional[iam.Policy]:
        """The execution role's sagemaker:DescribeTrainingPlan on the plans of the compute groups that
        handle their plan's end (fmcluster.model.node.capacity_end_of: each node reads the end of its
        plan's reserved capacity, programs/capacity-end.sh), and nothing else: its resource type is
        training-plan (Service Authorization Reference). The cluster waits for it, so that a node never
        starts without it. None where no group does."""
        plans = sorted({end.training_plan_arn for end in (model.node(g).capacity_end for g in model.node_groups)
                        if end is not None and end.training_plan_arn})
        if not plans:
            return None
        policy = iam.Policy(self, "TrainingPlanReads", roles=[self.groups.role.role], statements=[
            iam.PolicyStatement(sid="ReadTrainingPlanEnds", actions=["sagemaker:DescribeTrainingPlan"],
                                resources=plans)])
        self.cluster.node.add_dependency(policy)
        return policy

    def _metrics(self, spec: ClusterSpec, observability: ObservabilityRefs) -> dict[str, Any]:
        """The SSM parameter with the remote-write URL, which every group's `50-metrics.sh` hook
        reads (fmcluster.node.hyperpod.metrics_hook), and HyperPodGroups' metrics arguments: the
        role's permissions on the workspace and the parameter."""
        parameter = self.metrics_parameter = ssm.StringParameter(
            self, "MetricsRemoteWriteUrl", parameter_name=hyperpod_node.metrics_parameter_name(spec.name),
            string_value=observability.remote_write_url,
            description=f"remote-write URL of the Prometheus workspace of {spec.name} (lifecycle hook 50-metrics.sh)")
        return {"workspace_arn": observability.workspace_arn, "metrics_parameter_arn": parameter.parameter_arn}

    def _teams(self, database: Any) -> dict[str, Any]:
        """The teams' SSM parameter, which the controller's hook applies (fmcluster.node.hyperpod.hooks:
        fmcluster.node.accounting's program and its timer), and the role's permissions on the
        parameter and the database's secret, which HyperPodGroups takes."""
        if database is None:
            raise ConstructError(self, "the spec has teams, but the storage stack gives no accounting database")
        name = self.model.name
        data = accounting.data(self.model.teams)
        parameter = ssm.StringParameter(
            self, "SlurmTeams", parameter_name=accounting.parameter_name(name), string_value=data,
            tier=ssm.ParameterTier.STANDARD if len(data) <= 4096 else ssm.ParameterTier.ADVANCED,
            description=f"the teams of {name} as Slurm accounting (applied by the controller)")
        return {"teams_parameter_arn": parameter.parameter_arn, "accounting_secret_arn": database.secret.secret_arn}

    def fsx_openzfs(self, model: ClusterModel, refs: NodeRefs) -> Optional[dict[str, str]]:
        """HyperPod's FsxOpenZfsConfig for the shared home (mounted at /home), or None without one."""
        if model.home is None or model.home.kind != OPENZFS:
            return None
        return {"dns_name": refs.home_dns_name, "mount_path": model.home.mount_path}

    def fsx_lustre(self, spec: ClusterSpec, refs: NodeRefs) -> Optional[dict[str, str]]:
        """HyperPod's FsxLustreConfig for the spec's file system, or None without one."""
        lustre = spec.storage.lustre
        if lustre is None:
            return None
        return {"dns_name": refs.lustre_dns_name, "mount_name": refs.lustre_mount_name,
                "mount_path": lustre.mount_path}
