"""NAME-cluster for `orchestrator.type: pcs`: Slurm on AWS Parallel Computing Service.

Sources and details: docs/research-notes.md, "fmcluster_cdk/stacks/pcs.py"."""

from __future__ import annotations

from typing import Any, Optional

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from fmcluster.facts.controlplanes import pcs_ami_parameter
from fmcluster.facts.images import PCS, slurm_prefix
from fmcluster.model.cluster import COMPUTE, LOGIN, ClusterModel, NodeGroup
from fmcluster.node import accounting, topology
from fmcluster.node import pcs as pcs_node
from fmcluster_cdk.constructs.compute.launch_template import LaunchTemplateProps, NodeLaunchTemplate
from fmcluster_cdk.constructs.compute.node_replacer import NodeReplacer
from fmcluster_cdk.constructs.compute.node_role import NodeRole
from fmcluster_cdk.constructs.compute.node_scripts import NodeScripts
from fmcluster_cdk.constructs.pcs import ComputeNodeGroup, LifecycleAction, SlurmCluster, SlurmQueue
from fmcluster_cdk.errors import ConstructError
from fmcluster_cdk.stacks import node_groups
from fmcluster_cdk.stacks.images import IDENTITY_TAG
from fmcluster_cdk.stacks.reference import reference_repository_arns
from fmcluster_cdk.stacks.refs import ImagesRefs, NetworkRefs, ObservabilityRefs, StorageRefs


def default_ami(architecture: str) -> str:
    """The PCS-ready Deep Learning AMI (Ubuntu 24.04: NVIDIA driver, CUDA, EFA, Lustre client, PCS
    agent and Slurm) of the architecture. A CloudFormation dynamic reference, resolved at deploy
    time (no lookup at synth); cfn-lint and the CDK template validation accept it for
    AWS::PCS::ComputeNodeGroup AmiId. CloudFormation resolves it again on every update: pin
    `ami_id` in the spec for a fixed image. Used by a node group with neither an `ami_id` nor a
    baked node image (NAME-images)."""
    return "{{resolve:ssm:" + pcs_ami_parameter(architecture) + "}}"


SCALE_DOWN_IDLE_SECONDS = 600
# A job in a container with bridge networking (Docker, Enroot/Pyxis with a network namespace) is one
# hop further from the instance metadata service than the host: with a hop limit of 1 it cannot
# get the node role's credentials (e.g. to read checkpoints from S3). 2 is the least that lets it;
# AWS's reference PCS launch templates use 4.
IMDS_HOP_LIMIT = 2
PURCHASE_OPTIONS = {"on-demand": "ONDEMAND", "reservation": "ONDEMAND", "capacity-block": "CAPACITY_BLOCK",
                    "spot": "SPOT"}  # a reservation is on-demand capacity the launch template targets


class PcsClusterStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, *, model: ClusterModel, network: NetworkRefs,
                 storage: StorageRefs, observability: Optional[ObservabilityRefs] = None,
                 images: Optional[ImagesRefs] = None, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        spec = model.spec
        self.model = model
        self.observability = observability
        if model.images and images is None:
            keys = ", ".join(i.key for i in model.images)
            raise ConstructError(self, f"the cluster's node groups launch from baked node images ({keys}), "
                                       "but no NAME-images refs were given")
        self.images = images
        self.network = network
        if model.pcs_size is None:
            raise ConstructError(self, f"{model.total_nodes} nodes exceed the largest AWS PCS cluster size")
        self.size = model.pcs_size
        assert spec.orchestrator.version is not None  # the spec resolves it (its default: the newest)
        self.slurm_version: str = spec.orchestrator.version
        # what the nodes name of the other stacks (the file system, the home, the workspace)
        self.refs = node_groups.node_refs(self, model, storage, observability)
        self.cluster = SlurmCluster(
            self, "Cluster", name=spec.name, slurm_version=self.slurm_version, size=self.size.name,
            # the region's first subnet: PCS refuses a Local Zone's for the cluster (its Networking);
            # the GPU subnet in every other case
            subnet_id=network.region_subnet_ids[0], security_group_ids=[network.node_security_group_id],
            scale_down_idle_seconds=SCALE_DOWN_IDLE_SECONDS,
            slurm_settings={**model.slurm_settings, **(accounting.pcs_settings() if model.teams else {})},
            accounting=bool(model.teams))
        buckets = storage.bucket_arns or {}
        self.node_role = NodeRole(self, "NodeRole", cluster_arn=self.cluster.cluster_arn,
                                  bucket_arns=[buckets[name] for name in sorted(buckets)],
                                  kms_key_arn=storage.kms_key_arn,
                                  workspace_arn=observability.workspace_arn if observability else None,
                                  instance_topology=any(topology.publishes_network_features(model, g)
                                                        for g in model.node_groups),
                                  capacity_blocks=any(model.node(g).capacity_end is not None
                                                      for g in model.node_groups),
                                  image_repository_arns=reference_repository_arns(self, model))
        # Nodes drained for a hardware fault ask to be replaced (health.replace; GPU compute groups)
        self.replacer = self._replacer() if model.health.replace and any(
            g.instance.is_gpu for g in model.node_groups) else None

        self.teams_parameter = self._teams_parameter() if model.teams else None
        self.node_groups: dict[str, ComputeNodeGroup] = {}
        self.queues: dict[str, SlurmQueue] = {}
        if model.login is not None:
            self._add_node_group(model.login, Construct(self, "Login"))
        for group in model.node_groups:
            self._add_node_group(group, node_groups.node_group_stack(self, group.name, cluster_name=spec.name))

        cdk.CfnOutput(self, "ClusterId", value=self.cluster.cluster_id, description="AWS PCS cluster id")
        if self.replacer is not None:
            cdk.CfnOutput(self, "NodeReplacementLog", value=self.replacer.log_group.log_group_name,
                          description="the node replacer's record of every decision (aws logs tail)")
        if model.login is not None:
            cdk.CfnOutput(self, "LoginNodeGroupId", value=self.node_groups[model.login.name].node_group_id,
                          description="compute node group of the login nodes")
        cdk.CfnOutput(self, "QueueNames", value=",".join(self.queues), description="Slurm partitions (PCS queues)")

    def _replacer(self) -> NodeReplacer:
        """The cluster's node replacer, the nodes' role allowed to send it requests. On AWS PCS it
        ends no instance: PCS documents no replacement of a static node's instance, so a static
        node's request is logged as kept and the node stays drained for a person (docs/health.md);
        a dynamic node never asks (Slurm powers it down, and the node's next job gets a new one)."""
        health = self.model.health
        replacer = NodeReplacer(self, "NodeReplacer", cluster_name=self.model.name, plane="pcs",
                                max_replacing=health.max_replacing, window_minutes=health.replace_window_minutes,
                                block_guard_minutes=health.block_guard_minutes)
        replacer.grant_send(self.node_role.role)
        return replacer

    def _teams_parameter(self) -> ssm.StringParameter:
        """The teams' Slurm accounting data (fmcluster.node.accounting), which the login nodes'
        timer applies whenever it changes; readable by the nodes' role."""
        data = accounting.data(self.model.teams)
        parameter = ssm.StringParameter(
            self, "SlurmTeams", parameter_name=accounting.parameter_name(self.model.name), string_value=data,
            tier=ssm.ParameterTier.STANDARD if len(data) <= 4096 else ssm.ParameterTier.ADVANCED,
            description=f"the teams of {self.model.name} as Slurm accounting (applied by the login nodes)")
        iam.Policy(self, "SlurmTeamsRead", roles=[self.node_role.role], statements=[iam.PolicyStatement(
            sid="SlurmTeamsRead", actions=["ssm:GetParameter"], resources=[parameter.parameter_arn])])
        return parameter

    def _accounting_action(self, group: NodeGroup) -> list[pcs_node.LifecycleScript]:
        """On the login nodes of a cluster with teams: fmcluster-accounting and its timer, which
        apply the teams from the SSM parameter at boot and on every change (sacctmgr talks to PCS's
        slurmdbd from a login node)."""
        if self.teams_parameter is None or group.role != LOGIN:
            return []
        text = accounting.install_script(parameter=accounting.parameter_name(self.model.name),
                                         region=self.model.spec.region,
                                         slurm_bin=slurm_prefix(PCS, self.slurm_version) + "/bin")
        return [pcs_node.LifecycleScript("fmcluster accounting", pcs_node.NODE_READY, pcs_node.FIRST_BOOT_ONLY,
                                        pcs_node.CONTINUE, text)]

    def _ami(self, group: NodeGroup) -> str:
        """The group's `ami_id`, else its baked node image's AMI, else the PCS-ready DLAMI."""
        if group.ami_id:
            return group.ami_id
        if group.image is None:
            return default_ami(group.instance.architecture)
        assert self.images is not None  # checked in __init__
        if group.image not in self.images.image_ids:
            raise ConstructError(self, f"node group {group.name}: NAME-images has no image {group.image}")
        return self.images.image_ids[group.image]

    def _add_node_group(self, group: NodeGroup, scope: Construct) -> None:
        # compute nodes in the GPU subnet; login nodes in the region's first (the same subnet
        # unless the GPU nodes are in a Local Zone)
        subnet_id = self.network.gpu_subnet_id if group.role == COMPUTE else self.network.region_subnet_ids[0]
        template = NodeLaunchTemplate(scope, "LaunchTemplate", props=LaunchTemplateProps(
            interfaces=group.interfaces, network_cards=group.instance.network_cards, subnet_id=subnet_id,
            security_group_ids=[self.network.node_security_group_id],
            efa_security_group_id=self.network.efa_security_group_id if group.efa else None,
            root_volume_gib=group.root_volume_gib, instance_type=group.instance_type,
            placement_group_name=node_groups.placement_group_name(scope, group, cluster_name=self.model.name),
            capacity=node_groups.capacity_target(group.capacity), http_put_response_hop_limit=IMDS_HOP_LIMIT,
            tags=self.model.instance_tags(group), local_zone=group.local_zone, user_data=pcs_node.user_data()))
        scripts = pcs_node.node_actions(self.model, group, self.refs)
        scripts += tuple(self._accounting_action(group))
        published = NodeScripts(scope, "NodeScripts", scripts={s.file_name: s.text for s in scripts},
                                role=self.node_role.role)
        made = ComputeNodeGroup(
            scope, "NodeGroup", cluster_id=self.cluster.cluster_id, name=group.name,
            instance_type=group.instance_type, subnet_ids=[subnet_id],
            launch_template_id=template.launch_template_id,
            launch_template_version=template.latest_version_number,
            instance_profile_arn=self.node_role.instance_profile_arn, min_count=group.min_count,
            max_count=group.max_count, purchase_option=PURCHASE_OPTIONS[group.capacity.type],
            ami_id=self._ami(group), script_caching_policy=pcs_node.CACHE_ONCE,
            lifecycle_actions=[LifecycleAction(
                s.name, s.stage, published.locations[s.file_name], published.checksums[s.file_name], s.arguments,
                s.execution_policy, s.on_error) for s in scripts])
        made.node.add_dependency(published.policy)  # the nodes read the scripts as soon as they launch
        if group.image is not None and not group.ami_id:
            # The AMI comes from NAME-images by a weak reference, which CloudFormation reads only
            # when this stack changes: the image's identity on the group changes it with the image.
            assert self.images is not None  # checked in __init__
            cdk.Tags.of(made).add(IDENTITY_TAG, self.images.identities[group.image])
        self.node_groups[group.name] = made
        if group.role == COMPUTE:  # a queue (Slurm partition) per spec node group, none for the login nodes
            # a node group dedicated to a team lets only its account in (AllowAccounts, a queue setting PCS takes)
            settings = {**group.partition_settings,
                        **accounting.partition_settings(self.model.teams).get(group.name, {})}
            self.queues[group.name] = SlurmQueue(scope, "Queue", cluster_id=self.cluster.cluster_id, name=group.name,
                                                 node_group_ids=[made.node_group_id], slurm_settings=settings)
