"""Amazon EKS managed node groups and add-ons, as thin constructs over the L1 resources.

Sources and details: docs/research-notes.md, "fmcluster_cdk/constructs/eks/cluster.py"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from fmcluster_cdk.errors import ConstructError

CAPACITY_TYPES = ("ON_DEMAND", "SPOT", "CAPACITY_BLOCK")
# The taint effects of the EKS API, by their Kubernetes spelling.
TAINT_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}


@dataclass(frozen=True)
class NodeRepair:
    """EKS node auto repair of a managed node group (`NodeRepairConfig`; cfn-lint's
    AWS::EKS::Nodegroup schema, botocore's eks model). With it on, EKS cordons a node whose health
    check fails ("the node is automatically cordoned so that no new Pods are scheduled on the
    node") and replaces or reboots it after the condition has lasted 10 minutes
    (AcceleratedHardwareReady) or 30 (NetworkingReady, StorageReady, KernelReady,
    ContainerRuntimeReady, Ready) (EKS User Guide, "Enable node auto repair and investigate node
    health issues" and "Automatically repair nodes in EKS clusters").

    Props:
        enabled: repair the group's nodes (`Enabled`).
            @default True
        max_parallel: at most this many of the group's nodes repaired at once
            (`MaxParallelNodesRepairedCount`, 1 or more; the schema takes a count or a percentage,
            not both).
            @default None: EKS's default
        max_unhealthy: repair stops while more of the group's nodes than this are unhealthy
            (`MaxUnhealthyNodeThresholdCount`, 1 or more).
            @default None: EKS's default (halted above 5 nodes and 20% unhealthy)
    """

    enabled: bool = True
    max_parallel: Optional[int] = None
    max_unhealthy: Optional[int] = None

    def problems(self) -> list[str]:
        """What is wrong with these settings (the node group raises them as a ConstructError)."""
        return [f"node repair {name} must be 1 or more, not {value}"
                for name in ("max_parallel", "max_unhealthy")
                if (value := getattr(self, name)) is not None and value < 1]

    def api(self, enabled: Optional[bool] = None) -> dict[str, Any]:
        """As the EKS API's `nodeRepairConfig` (UpdateNodegroupConfig), optionally with `enabled`
        overridden (the Capacity Block scaler turns repair off and on with the limits kept)."""
        config: dict[str, Any] = {"enabled": self.enabled if enabled is None else enabled}
        if self.max_parallel is not None:
            config["maxParallelNodesRepairedCount"] = self.max_parallel
        if self.max_unhealthy is not None:
            config["maxUnhealthyNodeThresholdCount"] = self.max_unhealthy
        return config

    def properties(self) -> eks.CfnNodegroup.NodeRepairConfigProperty:
        return eks.CfnNodegroup.NodeRepairConfigProperty(
            enabled=self.enabled, max_parallel_nodes_repaired_count=self.max_parallel,
            max_unhealthy_node_threshold_count=self.max_unhealthy)


class ManagedNodeGroup(Construct):
    """One EKS managed node group on a launch template, with node auto repair (`NodeRepair`).

    `instance_type` is None when the launch template names it. `ami_type` is None when the
    launch template names a custom AMI. `taints` use Kubernetes spelling (`NoSchedule`).
    Updates never force pods out past their disruption budgets (`ForceUpdateEnabled: false`).
    The capacity type, AMI type, instance types, role and subnets cannot change without
    replacing the group.

    Props:
        cluster_name: the EKS cluster's name.
            @default required
        node_role_arn: ARN of the nodes' IAM role (`EksNodeRole.role_arn`).
            @default required
        subnet_ids: the subnets of the group's Auto Scaling group.
            @default required
        launch_template_id: the launch template (``lt-...``).
            @default required
        launch_template_version: the launch template's version (a number, as a string).
            @default required
        min_size: the fewest nodes (`ScalingConfig.MinSize`: at least 0).
            @default required
        max_size: the most nodes (`MaxSize`: at least 1, and at least `desired_size`).
            @default required
        desired_size: the nodes to start with (`DesiredSize`: from `min_size` to `max_size`).
            @default `min_size`
        instance_type: the group's instance type, such as ``p5.48xlarge``; None where the launch
            template names it (Capacity Blocks).
            @default None
        ami_type: the EKS AMI type (`AmiType`), such as ``AL2023_x86_64_NVIDIA``; None where the
            launch template names a custom AMI (EKS fails the group if both are set).
            @default None
        capacity_type: ``ON_DEMAND``, ``SPOT`` or ``CAPACITY_BLOCK`` (`CapacityType`).
            @default ``ON_DEMAND``
        labels: Kubernetes labels of the nodes, key -> value.
            @default None: none
        taints: Kubernetes taints of the nodes, each with keys ``key`` (1 to 317 characters),
            ``value`` (optional, at most 63) and ``effect`` (``NoSchedule``, ``PreferNoSchedule``
            or ``NoExecute``).
            @default ``()``: none
        tags: tags of the node group (they do not propagate to its instances), key -> value.
            @default None: none
        node_repair: EKS node auto repair of the group's nodes (`NodeRepairConfig`).
            @default ``NodeRepair()``: on, with EKS's default limits

    Attributes:
        resource: the `eks.CfnNodegroup`.
        nodegroup_name: the node group's name (assigned by CloudFormation).
        nodegroup_arn: the node group's ARN.
    """

    def __init__(self, scope: Construct, construct_id: str, *, cluster_name: str, node_role_arn: str,
                 subnet_ids: Sequence[str], launch_template_id: str, launch_template_version: str,
                 min_size: int, max_size: int, desired_size: Optional[int] = None,
                 instance_type: Optional[str] = None, ami_type: Optional[str] = None,
                 capacity_type: str = "ON_DEMAND", labels: Optional[Mapping[str, str]] = None,
                 taints: Sequence[Mapping[str, str]] = (), tags: Optional[Mapping[str, str]] = None,
                 node_repair: NodeRepair = NodeRepair()) -> None:
        super().__init__(scope, construct_id)
        if capacity_type not in CAPACITY_TYPES:
            raise ConstructError(self, f"capacity type {capacity_type!r} is not one of {', '.join(CAPACITY_TYPES)}")
        if node_repair.problems():
            raise ConstructError(self, "; ".join(node_repair.problems()))
        desired = min_size if desired_size is None else desired_size
        if not (0 <= min_size <= desired <= max_size and max_size >= 1):
            raise ConstructError(self, f"scaling {min_size}..{max_size} (desired {desired}) is not a range with a node")
        self.resource = eks.CfnNodegroup(
            self, "Resource", cluster_name=cluster_name, node_role=node_role_arn, subnets=list(subnet_ids),
            ami_type=ami_type, capacity_type=capacity_type,
            instance_types=[instance_type] if instance_type else None,
            launch_template=eks.CfnNodegroup.LaunchTemplateSpecificationProperty(
                id=launch_template_id, version=launch_template_version),
            scaling_config=eks.CfnNodegroup.ScalingConfigProperty(
                min_size=min_size, max_size=max_size, desired_size=desired),
            labels=dict(labels) if labels else None,
            taints=[eks.CfnNodegroup.TaintProperty(key=t["key"], value=t.get("value"),
                                                   effect=TAINT_EFFECTS[t["effect"]]) for t in taints] or None,
            node_repair_config=node_repair.properties(),
            force_update_enabled=False,  # never evict pods past their disruption budgets
            tags=dict(tags) if tags else None)

    @property
    def nodegroup_name(self) -> str:
        return self.resource.attr_nodegroup_name

    @property
    def nodegroup_arn(self) -> str:
        return self.resource.attr_arn


class ClusterAddon(Construct):
    """An EKS add-on, at the version EKS picks for the cluster's Kubernetes version unless one
    is given, taking over any self-managed copy (`OVERWRITE`), with an optional Pod Identity
    role for one service account.

    Props:
        cluster_name: the EKS cluster's name.
            @default required
        addon_name: the add-on's name, such as ``vpc-cni`` (changing it replaces the add-on).
            @default required
        version: the add-on's version (`AddonVersion`, as EKS lists it for the add-on).
            @default None: the version EKS picks for the cluster
        service_account: the Kubernetes service account of the Pod Identity association; needs
            `role_arn`.
            @default None: no Pod Identity association
        role_arn: ARN of the IAM role of that service account (`PodIdentityRole.role_arn`); needs
            `service_account`.
            @default None

    Attributes:
        resource: the `eks.CfnAddon`.
    """

    def __init__(self, scope: Construct, construct_id: str, *, cluster_name: str, addon_name: str,
                 version: Optional[str] = None, service_account: Optional[str] = None,
                 role_arn: Optional[str] = None) -> None:
        super().__init__(scope, construct_id)
        if (service_account is None) != (role_arn is None):
            raise ConstructError(self, "a Pod Identity association needs both a service account and a role")
        association = eks.CfnAddon.PodIdentityAssociationProperty
        associations = ([association(role_arn=role_arn, service_account=service_account)]
                        if service_account and role_arn is not None else None)
        self.resource = eks.CfnAddon(self, "Resource", cluster_name=cluster_name, addon_name=addon_name,
                                     addon_version=version, resolve_conflicts="OVERWRITE",
                                     pod_identity_associations=associations)


class GroupAccessEntry(Construct):
    """An EKS access entry (type STANDARD) that puts an IAM principal in Kubernetes groups and
    grants nothing else: what the principal may do is what RoleBindings give those groups. No
    access policy is associated. A principal has at most one access entry in a cluster (Amazon EKS
    User Guide, "Grant IAM users access to Kubernetes with EKS access entries"), so one entry
    carries all its groups. Group names starting ``system:`` are refused (the prefix Kubernetes keeps
    for its own groups: Kubernetes documentation, "Using RBAC Authorization").

    Props:
        cluster_name: the EKS cluster's name.
            @default required
        principal_arn: the IAM role or user ARN (changing it replaces the entry).
            @default required
        kubernetes_groups: the Kubernetes groups it is put in (at least one).
            @default required

    Attributes:
        resource: the `eks.CfnAccessEntry`.
    """

    def __init__(self, scope: Construct, construct_id: str, *, cluster_name: str, principal_arn: str,
                 kubernetes_groups: Sequence[str]) -> None:
        super().__init__(scope, construct_id)
        if not kubernetes_groups:
            raise ConstructError(self, "an access entry of groups needs at least one Kubernetes group")
        reserved = [g for g in kubernetes_groups if g.startswith("system:")]
        if reserved:
            raise ConstructError(self, f"Kubernetes groups {reserved} start with system:, which Kubernetes keeps")
        self.resource = eks.CfnAccessEntry(self, "Resource", cluster_name=cluster_name, principal_arn=principal_arn,
                                           kubernetes_groups=list(kubernetes_groups), type="STANDARD")
