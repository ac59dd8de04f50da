"""NAME-cluster for `orchestrator.type: eks`: an Amazon EKS cluster ready for multi-node GPU
training. Inside the cluster it installs the rows of fmcluster.kubernetes.charts.INSTALLS that
hold for the model, in the table's order.

Sources and details: docs/research-notes.md, "fmcluster_cdk/stacks/eks.py"."""

from __future__ import annotations

import hashlib
from typing import Any, Optional

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer
from constructs import Construct

from fmcluster import observability as observability_content
from fmcluster.facts import health as health_facts
from fmcluster.facts import kubernetes as k8s
from fmcluster.facts import naming
from fmcluster.facts.controlplanes import EKS_AMI_TYPES
from fmcluster.kubernetes import capacity_end, charts
from fmcluster.kubernetes import kueue as kueue_queues
from fmcluster.kubernetes import manifests as kubernetes
from fmcluster.model.cluster import SYSTEM, ClusterModel, NodeGroup
from fmcluster.node import eks as eks_node
from fmcluster.node.refs import ClusterDetails
from fmcluster.spec.models import EVERYONE, ClusterSpec, OrchestratorSpec
from fmcluster_cdk.constructs.compute.capacity_blocks import CapacityBlockScaler
from fmcluster_cdk.constructs.compute.capacity_end import KubernetesCapacityEnd
from fmcluster_cdk.constructs.compute.launch_template import (
    AMAZON_LINUX_ROOT_DEVICE,
    LaunchTemplateProps,
    NodeLaunchTemplate,
)
from fmcluster_cdk.constructs.eks.cluster import ClusterAddon, GroupAccessEntry, ManagedNodeGroup, NodeRepair
from fmcluster_cdk.constructs.eks.iam import EksNodeRole, PodIdentityRole
from fmcluster_cdk.constructs.hyperpod.dependencies import HyperPodChart, subchart_path
from fmcluster_cdk.constructs.observability.scraper import ManagedScraper
from fmcluster_cdk.errors import ConstructError
from fmcluster_cdk.stacks import node_groups
from fmcluster_cdk.stacks.reference import reference_repository_arns
from fmcluster_cdk.stacks.refs import NetworkRefs, ObservabilityRefs, StorageRefs

CAPACITY_TYPES = {"on-demand": "ON_DEMAND", "reservation": "ON_DEMAND", "capacity-block": "CAPACITY_BLOCK",
                  "spot": "SPOT"}  # a reservation is on-demand capacity the launch template targets
IMDS_HOP_LIMIT = 2  # pods reach the instance metadata service through one more hop (their network namespace)
LOG_TYPES = (eks.ClusterLoggingTypes.API, eks.ClusterLoggingTypes.AUDIT, eks.ClusterLoggingTypes.AUTHENTICATOR,
             eks.ClusterLoggingTypes.CONTROLLER_MANAGER, eks.ClusterLoggingTypes.SCHEDULER)
ENDPOINT_ACCESS = {"public-and-private": eks.EndpointAccess.PUBLIC_AND_PRIVATE, "private": eks.EndpointAccess.PRIVATE}
# What the cluster role does with the key of secrets encryption (storage.kms)
SECRETS_KEY_ACTIONS = ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:ListGrants"]
ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
CNI_POLICY = "AmazonEKS_CNI_Policy"
# The FSx CSI controller, for a static volume: describe the file system, and grow it on a
# volume expansion (this file system only). It never creates or deletes file systems here.
# fsx:DescribeFileSystems has no resource types (Service Authorization Reference): only
# "Resource": "*" allows it, a file-system ARN would leave it denied.
FSX_CSI_DESCRIBE = "fsx:DescribeFileSystems"
FSX_CSI_ACTIONS = ["fsx:UpdateFileSystem"]


def endpoint_access(orchestrator: OrchestratorSpec) -> eks.EndpointAccess:
    """The API endpoint: private, or public and private with the public side open to
    `public_access_cidrs` only (everyone, the default: no PublicAccessCidrs in the template)."""
    access = ENDPOINT_ACCESS[orchestrator.endpoint_access]
    if orchestrator.endpoint_access == "private" or orchestrator.public_access_cidrs == [EVERYONE]:
        return access
    return access.only_from(*orchestrator.public_access_cidrs)


def config_command(spec: ClusterSpec) -> str:
    """How a user reaches the cluster with kubectl."""
    command = f"aws eks update-kubeconfig --name {spec.name} --region {spec.region}"
    if spec.orchestrator.admin_role_arn:
        command += f" --role-arn {spec.orchestrator.admin_role_arn}"
    return command


def node_repair(model: ClusterModel, group: NodeGroup) -> NodeRepair:
    """EKS node auto repair of a group: the system nodes keep EKS's defaults; the spec's groups
    follow `health` (off where faulty nodes are not replaced; at most `max_replacing` of the group
    at once, and halted while more than health.repair_halt_count of its nodes are unhealthy, so that
    a cluster-wide fault does not replace them all). EKS applies the limits per node group: a
    cluster with several groups may repair `max_replacing` nodes in each."""
    if group.role == SYSTEM:
        return NodeRepair()
    health = model.health
    return NodeRepair(enabled=health.replace, max_parallel=health.max_replacing,
                      max_unhealthy=health_facts.repair_halt_count(group.max_count, health.max_replacing))


def ami_type(group: NodeGroup) -> Optional[str]:
    """The EKS AMI type of a node group; None with a custom AMI (the launch template names it)."""
    if group.ami_id:
        return None
    return EKS_AMI_TYPES[(group.instance.architecture, group.instance.is_gpu)]


class EksClusterStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, *, model: ClusterModel, network: NetworkRefs,
                 storage: StorageRefs, observability: Optional[ObservabilityRefs] = None, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        spec = model.spec
        self.model = model
        self.spec = spec
        self.network = network
        self.storage = storage
        self.observability = observability
        self.service_cidr = kubernetes.service_cidr(spec.network.vpc_cidr)
        self.cluster = self._cluster()
        # what the nodes name of the other stacks, and the cluster the nodes of a custom AMI join
        self.refs = node_groups.node_refs(self, model, storage, observability, eks_cluster=ClusterDetails(
            self.cluster.cluster_name, self.cluster.cluster_endpoint, self.cluster.cluster_certificate_authority_data,
            self.service_cidr) if any(g.ami_id for g in model.all_groups) else None)
        if spec.orchestrator.admin_role_arn:
            self.cluster.grant_access("AdminAccess", spec.orchestrator.admin_role_arn, [
                eks.AccessPolicy.from_access_policy_name(ADMIN_POLICY, access_scope_type=eks.AccessScopeType.CLUSTER)])
        self.team_access = self._team_access()
        buckets = storage.bucket_arns or {}
        # The GPU nodes that run the reference images: the managed node groups on EKS (on HyperPod
        # EKS these are the system nodes only; its instance groups' execution role pulls them)
        self.node_role = EksNodeRole(self, "NodeRole", bucket_arns=[buckets[name] for name in sorted(buckets)],
                                     kms_key_arn=storage.kms_key_arn,
                                     image_repository_arns=reference_repository_arns(self, model)
                                     if model.control_plane.type == "eks" else ())

        self.addons: dict[str, ClusterAddon] = {}
        for addon in (kubernetes.POD_IDENTITY_AGENT, kubernetes.VPC_CNI, kubernetes.KUBE_PROXY):
            self._add_addon(addon)
        self.node_groups: dict[str, ManagedNodeGroup] = {}
        self.launch_templates: dict[str, NodeLaunchTemplate] = {}
        self.capacity_ends: dict[str, KubernetesCapacityEnd] = {}  # by node group (_add_capacity_end)
        if model.login is None:
            raise ConstructError(self, "an EKS cluster needs its system nodes (orchestrator.login.count of 1 or more)")
        self._add_node_group(model.login, Construct(self, "SystemNodes"))
        self._add_compute()
        for addon in (kubernetes.COREDNS, kubernetes.NODE_MONITORING_AGENT):
            self._add_addon(addon)
        if spec.storage.lustre:
            self._add_addon(kubernetes.FSX_CSI, self._fsx_csi_statements())

        self.charts: dict[str, eks.HelmChart] = {}
        self.manifests: dict[str, eks.KubernetesManifest] = {}
        self.operators: dict[str, HyperPodChart] = {}
        self._operators_scope: Optional[Construct] = None
        self.installed: dict[str, Construct] = {}  # INSTALLS' rows by construct id, as they are made
        for row in charts.installs(model):
            self.installed[row.construct_id] = self._install(row)
        self.scraper: Optional[ManagedScraper] = None
        if observability is not None:
            self._add_scraper(observability.workspace_arn)
        self._outputs()

    # --- control plane ---------------------------------------------------------------------

    def _cluster(self) -> eks.Cluster:
        spec, network = self.spec, self.network
        # The VPC has no subnet groups of its own (the subnets are selected explicitly); its AZ
        # list is the region's, resolved by CloudFormation, and never read.
        vpc = ec2.Vpc.from_vpc_attributes(self, "Vpc", vpc_id=network.vpc_id, availability_zones=cdk.Fn.get_azs())
        cdk.Annotations.of(vpc).acknowledge_warning(
            "@aws-cdk/aws-ec2:vpcAttributeIsListTokenavailabilityZones", "no subnet is selected from the VPC itself")
        # The region's subnets only (network.region_subnet_ids: all of them unless the GPU zone
        # is a Local Zone), named by their AZ IDs
        self.cluster_subnets = [ec2.Subnet.from_subnet_attributes(self, f"PrivateSubnet-{az}", subnet_id=subnet_id)
                                for az, subnet_id in zip(spec.region_zone_ids, network.region_subnet_ids, strict=True)]
        for subnet in self.cluster_subnets:  # routes are the network stack's business
            cdk.Annotations.of(subnet).acknowledge_warning("@aws-cdk/aws-ec2:noSubnetRouteTableId",
                                                           "nothing here reads the subnet's route table")
        # With storage.kms: Kubernetes secrets envelope-encrypted with the storage key (imported by
        # ARN: its policy is CDK's default, so the account's IAM policies grant its use).
        key = kms.Key.from_key_arn(self, "StorageKey", self.storage.kms_key_arn) if self.storage.kms_key_arn else None
        assert spec.orchestrator.version is not None  # the spec resolves it (its default: the newest)
        cluster = eks.Cluster(
            self, "Cluster", cluster_name=spec.name, version=eks.KubernetesVersion.of(spec.orchestrator.version),
            vpc=vpc, vpc_subnets=[ec2.SubnetSelection(subnets=self.cluster_subnets)],
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP, default_capacity=0,
            endpoint_access=endpoint_access(spec.orchestrator), cluster_logging=list(LOG_TYPES),
            bootstrap_cluster_creator_admin_permissions=False, bootstrap_self_managed_addons=False,
            service_ipv4_cidr=self.service_cidr, secrets_encryption_key=key,
            kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV35Layer(self, "KubectlLayer")))
        if key is not None:
            self._grant_secrets_key(cluster, key)
        return cluster

    def _grant_secrets_key(self, cluster: eks.Cluster, key: kms.IKey) -> None:
        """aws_eks_v2 sets the cluster's encryptionConfig but grants nothing on the key. EKS uses the
        key as the cluster role (the deploying role, CloudFormation's, creates the grant EKS makes
        on it at creation): the role may encrypt, decrypt, describe the key and list its grants
        (the Amazon EKS User Guide's policy for secrets encryption). The cluster waits for it."""
        policy = iam.Policy(self, "SecretsKeyPolicy", roles=[cluster.role], statements=[iam.PolicyStatement(
            sid="KubernetesSecretsEncryption", actions=SECRETS_KEY_ACTIONS, resources=[key.key_arn])])
        resource = cluster.node.default_child
        assert resource is not None  # the cluster's own resource
        resource.node.add_dependency(policy)

    def _add_addon(self, addon: kubernetes.Addon, statements: Optional[list[iam.PolicyStatement]] = None) -> None:
        scope = Construct(self, f"Addon-{addon.name}")
        role_arn = None
        if addon.service_account:
            role = PodIdentityRole(scope, "PodIdentityRole", cluster_arn=self.cluster.cluster_arn,
                                   description=f"EKS add-on {addon.name} ({addon.service_account}) of {self.spec.name}",
                                   managed_policies=[CNI_POLICY] if addon is kubernetes.VPC_CNI else (),
                                   statements=statements or ())
            role_arn = role.role_arn
        resource = ClusterAddon(scope, "Addon", cluster_name=self.cluster.cluster_name, addon_name=addon.name,
                                service_account=addon.service_account, role_arn=role_arn)
        if addon.service_account:
            resource.node.add_dependency(self.addons[kubernetes.POD_IDENTITY_AGENT.name])
        if addon.needs_nodes:
            resource.node.add_dependency(self.node_groups[k8s.SYSTEM_NODE_GROUP])
        self.addons[addon.name] = resource

    def _fsx_csi_statements(self) -> list[iam.PolicyStatement]:
        file_system_arn = self.format_arn(service="fsx", resource="file-system",
                                          resource_name=self.storage.file_system_id)
        return [iam.PolicyStatement(sid="DescribeFileSystems", actions=[FSX_CSI_DESCRIBE], resources=["*"]),
                iam.PolicyStatement(sid="StaticLustreVolume", actions=FSX_CSI_ACTIONS, resources=[file_system_arn])]

    # --- node groups -----------------------------------------------------------------------

    def _add_compute(self) -> None:
        """The spec's node groups, as managed node groups (fmcluster_cdk/stacks/hyperpod_eks.py: as SageMaker
        HyperPod instance groups instead)."""
        for group in self.model.node_groups:
            self._add_node_group(group, node_groups.node_group_stack(self, group.name, cluster_name=self.spec.name))

    def _add_node_group(self, group: NodeGroup, scope: Construct) -> None:
        template = NodeLaunchTemplate(scope, "LaunchTemplate", props=LaunchTemplateProps(
            interfaces=group.interfaces, network_cards=group.instance.network_cards, subnet_id=None,
            security_group_ids=[self.network.node_security_group_id, self.cluster.cluster_security_group_id],
            efa_security_group_id=self.network.efa_security_group_id if group.efa else None,
            root_volume_gib=group.root_volume_gib, root_device_name=AMAZON_LINUX_ROOT_DEVICE,
            instance_type=group.instance_type, image_id=group.ami_id,
            placement_group_name=node_groups.placement_group_name(scope, group, cluster_name=self.spec.name),
            capacity=node_groups.capacity_target(group.capacity), http_put_response_hop_limit=IMDS_HOP_LIMIT,
            tags=self.model.instance_tags(group), local_zone=group.local_zone,
            user_data=eks_node.node_user_data(self.model, group, self.refs)))
        capacity_type = CAPACITY_TYPES[group.capacity.type]
        in_template = capacity_type == "CAPACITY_BLOCK"  # EKS wants a Capacity Block's type in the template
        subnets = tuple(self.network.region_subnet_ids) if group.role == SYSTEM else (self.network.gpu_subnet_id,)
        repair = node_repair(self.model, group)
        made = ManagedNodeGroup(
            scope, "NodeGroup", cluster_name=self.cluster.cluster_name, node_role_arn=self.node_role.role_arn,
            subnet_ids=subnets, launch_template_id=template.launch_template_id,
            launch_template_version=template.latest_version_number,
            # on a Capacity Block: no node until the block is active (CapacityBlockScaler below)
            min_size=group.created_size,
            max_size=group.max_count, instance_type=None if in_template else group.instance_type,
            ami_type=ami_type(group), capacity_type=capacity_type, labels=dict(group.labels),
            taints=[dict(t) for t in group.taints], tags={naming.NODE_GROUP_TAG: group.name}, node_repair=repair)
        for name in (kubernetes.POD_IDENTITY_AGENT.name, kubernetes.VPC_CNI.name, kubernetes.KUBE_PROXY.name):
            made.node.add_dependency(self.addons[name])
        if group.follows_block:
            CapacityBlockScaler(
                scope, "CapacityBlockScaler", cluster_name=self.cluster.cluster_name,
                nodegroup_name=made.nodegroup_name, nodegroup_arn=made.nodegroup_arn,
                reservation_id=str(group.capacity.reservation_id), size=group.max_count,
                hold_parameter=naming.hold_parameter(self.spec.name, group.name),
                drain_minutes=group.drain_minutes, node_repair=repair if repair.enabled else None,
                block_guard_minutes=self.model.health.block_guard_minutes)
        self._add_capacity_end(group, scope, "CapacityEnd")
        self.launch_templates[group.name] = template
        self.node_groups[group.name] = made

    def _add_capacity_end(self, group: NodeGroup, scope: Construct, construct_id: str) -> None:
        """The function that handles the end of the group's Capacity Block or training plan inside
        the cluster (fmcluster.kubernetes.capacity_end), where it has one: in the cluster's VPC and
        security group, which reach the API server's private endpoint whatever the public one admits."""
        end = capacity_end.kubernetes_end(self.model, group)
        if end is not None:
            self.capacity_ends[group.name] = KubernetesCapacityEnd(
                scope, construct_id, cluster_name=self.cluster.cluster_name, vpc=self.cluster.vpc,
                subnets=self.cluster_subnets, security_groups=[self.cluster.cluster_security_group],
                **capacity_end.handler_settings(end))

    def _team_access(self) -> dict[str, GroupAccessEntry]:
        """An access entry per IAM member of the teams, putting it in each of its teams' Kubernetes
        group (kueue.team_group), which the team's RoleBinding gives `edit` in its namespace. One
        entry a principal (EKS takes no more), its construct id from the principal's ARN (a digest:
        an ARN has slashes), so that adding or removing another member never replaces it (a new
        entry for a principal that still has one would fail); the admin role keeps its own entry."""
        groups: dict[str, list[str]] = {}
        for team in self.model.teams:
            for member in team.members:
                if member != self.spec.orchestrator.admin_role_arn:
                    groups.setdefault(member, []).append(kueue_queues.team_group(team))
        if not groups:
            return {}
        scope = Construct(self, "TeamAccess")
        return {member: GroupAccessEntry(
                    scope, "Member" + hashlib.sha256(member.encode()).hexdigest()[:16],
                    cluster_name=self.cluster.cluster_name, principal_arn=member, kubernetes_groups=team_groups)
                for member, team_groups in groups.items()}

    # --- inside Kubernetes -----------------------------------------------------------------

    def _install(self, row: charts.Install) -> Construct:
        """A row of the table INSTALLS, after what it names."""
        if isinstance(row, charts.Manifests):
            documents = row.documents(self.model, self._file_system())
            return self._add_manifest(row.construct_id, documents, *map(self._made, row.after))
        values = row.values(self.model)
        if isinstance(row.chart, charts.Subchart):
            return self._add_operator(row.chart, values, *map(self._made, row.after))
        helm = self._add_chart(row.construct_id, row.chart, values, wait=row.wait)
        for name in row.after:
            helm.node.add_dependency(self._made(name))
        return helm

    def _made(self, name: str) -> Construct:
        """What an `after` of INSTALLS names: a node group, an EKS add-on or an earlier row."""
        for made in (self.node_groups, self.addons, self.installed):
            if name in made:
                return made[name]
        raise ConstructError(self, f"nothing named {name} to install after")

    def _add_chart(self, construct_id: str, chart: charts.Chart, values: dict[str, Any],
                   wait: bool = False) -> eks.HelmChart:
        helm = self.cluster.add_helm_chart(
            construct_id, chart=chart.chart, repository=chart.repository, version=chart.version,
            release=chart.release, namespace=chart.namespace, create_namespace=True, values=values, wait=wait,
            timeout=cdk.Duration.minutes(15) if wait else None)
        self.charts[chart.release] = helm
        return helm

    def _namespace(self) -> Optional[eks.KubernetesManifest]:
        """The manifest of orchestrator.namespace (once), or None where Kubernetes has it already."""
        if "Namespace" not in self.manifests:
            document = kubernetes.namespace_manifest(self.spec.orchestrator.namespace)
            if document is None:
                return None
            self.manifests["Namespace"] = self.cluster.add_manifest("Namespace", document)
        return self.manifests["Namespace"]

    def _add_manifest(self, construct_id: str, documents: list[dict[str, Any]],
                      *after: Construct) -> eks.KubernetesManifest:
        manifest = self.cluster.add_manifest(construct_id, *documents)
        # the teams' namespaces (a row of its own, before any other manifest) come first
        for dependency in (self._namespace(), self.installed.get(charts.TEAM_NAMESPACES), *after):
            if dependency is not None:
                manifest.node.add_dependency(dependency)
        self.manifests[construct_id] = manifest
        return manifest

    def _file_system(self) -> Optional[kubernetes.FileSystem]:
        """The file systems the storage stack gives (the Lustre one, the shared home's DNS name),
        or None without either."""
        storage = self.storage
        home = ""
        if self.spec.storage.home:
            if not storage.home_dns_name:
                raise ConstructError(self, "the spec has a shared home, but the storage stack gives no DNS name")
            home = storage.home_dns_name
        if not self.spec.storage.lustre:
            return kubernetes.FileSystem("", "", "", home) if home else None
        if not (storage.file_system_id and storage.file_system_dns_name and storage.file_system_mount_name):
            raise ConstructError(self, "the spec has a Lustre file system, but the storage stack gives no id, DNS "
                                       "or mount name")
        return kubernetes.FileSystem(storage.file_system_id, storage.file_system_dns_name,
                                     storage.file_system_mount_name, home)

    def handler_placement(self) -> dict[str, Any]:
        """Where a custom-resource handler that talks to the API server runs: in the cluster's VPC,
        subnets and cluster security group when the endpoint is private; else outside any VPC."""
        if self.spec.orchestrator.endpoint_access != "private":
            return {}
        return dict(vpc=self.cluster.vpc, security_groups=[self.cluster.cluster_security_group],
                    subnets=self.cluster_subnets)

    def _add_operator(self, subchart: charts.Subchart, values: dict[str, Any], *after: Construct) -> HyperPodChart:
        """A sub-chart of the HyperPod dependencies chart as a release (the MPI and training
        operators, under `Operators`; one handler for all of them)."""
        first = self._operators_scope is None
        if self._operators_scope is None:
            self._operators_scope = Construct(self, "Operators")
        function = None if first else next(iter(self.operators.values())).function
        # jsii: the Python class aws_eks_v2.Cluster lacks the ICluster protocol's kubectl_provider_options
        chart = HyperPodChart(
            self._operators_scope, subchart.release, cluster=self.cluster,  # type: ignore[arg-type]
            release=subchart.release, namespace=subchart.namespace,
            values=values, chart_path=subchart_path(subchart.chart),
            node_selector=dict(subchart.node_selector) if subchart.node_selector is not None else None,
            function=function, **(self.handler_placement() if first else {}))
        for dependency in after:
            chart.resource.node.add_dependency(dependency)
        self.operators[subchart.release] = chart
        return chart

    def _add_scraper(self, workspace_arn: str) -> None:
        """The managed scraper of the exporters (INSTALLS, where observed)."""
        self.scraper = ManagedScraper(
            self, "MetricsScraper", alias=self.spec.name, cluster_arn=self.cluster.cluster_arn,
            subnet_ids=self.network.region_subnet_ids, security_group_ids=[self.cluster.cluster_security_group_id],
            workspace_arn=workspace_arn,
            scrape_configuration=observability_content.scrape_configuration(self.spec.name),
            tags=dict(self.model.tags))
        cdk.CfnOutput(self, "MetricsScraperArn", value=self.scraper.scraper_arn,
                      description="Amazon Managed Service for Prometheus managed scraper")

    def _outputs(self) -> None:
        spec = self.spec
        cluster_queue, local_queue = kueue_queues.queue_names(spec)
        cdk.CfnOutput(self, "ClusterName", value=self.cluster.cluster_name, description="Amazon EKS cluster")
        cdk.CfnOutput(self, "ConfigCommand", value=config_command(spec), description="kubectl access")
        cdk.CfnOutput(self, "NodeGroupNames", description="EKS managed node groups (system first)",
                      value=cdk.Fn.join(",", [g.nodegroup_name for g in self.node_groups.values()]))
        if self.model.teams:  # each team's namespace/LocalQueue, its ClusterQueue named after the team
            queues = [kueue_queues.team_queue(team) for team in self.model.teams]
            cdk.CfnOutput(self, "LocalQueue", value=",".join(f"{ns}/{local}" for ns, local, _ in queues),
                          description=f"Kueue LocalQueues (label kueue.x-k8s.io/queue-name) of the teams, "
                                      f"in cohort {kueue_queues.cohort_name(spec)}")
            return
        cdk.CfnOutput(self, "LocalQueue", value=f"{spec.orchestrator.namespace}/{local_queue}",
                      description=f"Kueue LocalQueue (label kueue.x-k8s.io/queue-name) of ClusterQueue {cluster_queue}")
