"""The resolved cluster: every fact that `plan`, `diff`, the stacks and the node scripts need,
derived from a validated spec once.

Sources and details: docs/research-notes.md, "fmcluster/model/cluster.py"."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping, Optional

from fmcluster.facts import controlplanes, inference, kubernetes, naming
from fmcluster.facts import health as health_facts
from fmcluster.facts import images as image_facts
from fmcluster.facts import network as network_plan
from fmcluster.facts import node as node_facts
from fmcluster.facts.catalog import ULTRASERVERS, InstanceType, UltraServer, catalog
from fmcluster.facts.controlplanes import CAPACITY_BLOCK, ControlPlane, PcsSize
from fmcluster.facts.efa import Interface, efa_layout, lnet_efa_interfaces
from fmcluster.facts.placement import Placement, placement_for
from fmcluster.model import node
from fmcluster.model.node import COMPUTE as COMPUTE
from fmcluster.model.node import CONTROLLER as CONTROLLER
from fmcluster.model.node import LOGIN as LOGIN
from fmcluster.model.node import LUSTRE as LUSTRE
from fmcluster.model.node import OPENZFS as OPENZFS
from fmcluster.model.node import SYSTEM as SYSTEM
from fmcluster.model.node import Health as Health
from fmcluster.model.node import Home as Home
from fmcluster.model.node import NodeSetup
from fmcluster.model.node import health_of as health_of
from fmcluster.model.node import home_of as home_of
from fmcluster.model.reference_image import ReferenceImage, reference_images
from fmcluster.model.teams import Team, resolve_teams
from fmcluster.spec.models import CapacitySpec, ClusterSpec, NodeGroupSpec

if TYPE_CHECKING:
    from typing import TypedDict, Unpack

    class _OwnExtra(TypedDict, total=False):
        """What a control plane's own group may set besides `_own`'s arguments."""

        labels: Mapping[str, str]

PCS_LOGIN_ROOT_VOLUME_GIB = 256  # the PCS login nodes' root volume
SYSTEM_ROOT_VOLUME_GIB = 256  # the EKS system nodes' root volume
HYPERPOD_SYSTEM_VOLUME_GIB = 256  # /opt/sagemaker of the HyperPod Slurm controller and login nodes
NETWORK, STORAGE, OBSERVABILITY, IMAGES, CLUSTER = "network", "storage", "observability", "images", "cluster"
REFERENCE = "reference"  # NAME-reference: the reference GPU images, after the cluster (nothing waits for it)
NO_PLACEMENT = Placement(create=False)
ON_DEMAND = CapacitySpec()


@dataclass(frozen=True)
class NodeGroup:
    """One node group as it is built: a spec node group (`role` compute), or the control plane's
    own (PCS login nodes, EKS system nodes: `role` login or system)."""

    name: str
    role: str
    instance: InstanceType
    min_count: int
    max_count: int
    capacity: CapacitySpec
    efa: bool  # the nodes get EFA interfaces (the spec asks for EFA and the type has it)
    interfaces: tuple[Interface, ...]  # the full layout, primary first (fmcluster.facts.efa)
    placement: Placement
    root_volume_gib: int
    ami_id: Optional[str] = None
    labels: Mapping[str, str] = field(default_factory=dict)  # Kubernetes labels (eks, hyperpod-eks)
    taints: tuple[Mapping[str, str], ...] = ()  # Kubernetes taints
    lnet_efa_interfaces: int = 0  # LNet's EFA devices for an EFA-enabled file system (0: TCP)
    # Created with no node and kept at max_count while its Capacity Block is active, at 0 before
    # and near its end (EKS managed node groups on a Capacity Block:
    # fmcluster_cdk/constructs/compute/capacity_blocks.py)
    follows_block: bool = False
    # Its nodes run in a Local Zone (the spec's groups where the GPU zone is one; the control
    # plane's own groups run in the region's first AZ ID)
    local_zone: bool = False
    # The key of the baked node image it launches from (ClusterModel.images); None: its own `ami_id`,
    # or a Kubernetes group (EKS's images)
    image: Optional[str] = None

    @property
    def instance_type(self) -> str:
        return self.instance.name

    @property
    def sagemaker_instance_type(self) -> str:
        """The type as SageMaker names it (HyperPod's instance groups, a training plan's capacities)."""
        return f"ml.{self.instance.name}"

    @property
    def efa_interfaces(self) -> int:
        """EFA interfaces per node (what the EFA device plugin advertises on Kubernetes)."""
        return sum(1 for i in self.interfaces if i.is_efa)

    @property
    def interface_addresses(self) -> int:
        """Private IPv4 addresses one node's interfaces take in its subnet: one per ENA or ``efa``
        interface, none for ``efa-only`` (pods' addresses on Kubernetes come on top:
        `ControlPlane.pod_addresses_per_node`)."""
        return sum(1 for i in self.interfaces if i.takes_ip)

    @property
    def gpus(self) -> int:
        return self.instance.gpu_count

    @property
    def ultraserver(self) -> bool:
        """Its instances are UltraServer nodes (NVLink across instances, IMEX per job)."""
        return self.instance.ultraserver

    @property
    def nvlink_domain(self) -> Optional[UltraServer]:
        """The UltraServer that is one NVLink domain of the group (capacity.ultraserver_type); None:
        each instance is its own."""
        kind = self.capacity.ultraserver_type
        return ULTRASERVERS[kind] if kind else None

    @property
    def one_nvlink_domain(self) -> bool:
        """Every node of the group fits in one NVLink domain: one UltraServer holds them all."""
        server = self.nvlink_domain
        return server is not None and self.ultraserver and self.max_count <= server.instances

    @property
    def network_placed(self) -> bool:
        """Its jobs are placed by EC2's network topology (Slurm node features on AWS PCS, a Kueue
        Topology of the network layers on Kubernetes): a compute group of GPUs over EFA, of more
        than one node, on a type EC2's instance topology covers (the catalog's network_layers), and
        not an UltraServer group (placed by NVLink domain)."""
        return (self.role == COMPUTE and not self.ultraserver and self.instance.is_gpu and self.efa_interfaces > 0
                and self.max_count > 1 and self.instance.network_layers > 0)

    @property
    def drain_minutes(self) -> int:
        """How long before its Capacity Block ends a group that follows the block goes to 0: EC2
        terminates the instances from 30 minutes before the end, or 60 for an UltraServer block."""
        return (controlplanes.ULTRASERVER_BLOCK_DRAIN_MINUTES if self.ultraserver
                else controlplanes.CAPACITY_BLOCK_DRAIN_MINUTES)

    @property
    def partition_settings(self) -> Mapping[str, str]:
        """Slurm settings of its partition: UltraServer partitions are exclusive, so that every
        job gets whole nodes and its own IMEX domain (the AWS PCS User Guide: UltraServer jobs
        run --exclusive, in queues of their own)."""
        return MappingProxyType(dict(controlplanes.ULTRASERVER_PARTITION_SETTINGS) if self.ultraserver else {})

    @property
    def created_size(self) -> int:
        """The nodes it is created with (and its floor): 0 for a group that follows its Capacity
        Block (it is scaled to max_count while the block is active), else min_count."""
        return 0 if self.follows_block else self.min_count


@dataclass(frozen=True)
class NodeImage:
    """One baked node image of NAME-images: the control plane's base image of an architecture with
    what every node needs installed (Enroot, Pyxis built against `slurm_prefix`'s Slurm, the
    exporters' packages), used by `groups`. Built and tested once per change by EC2 Image Builder."""

    key: str  # PLANE-ARCHITECTURE, such as pcs-x86_64: construct ids, NodeGroup.image
    plane: str  # pcs | hyperpod-slurm
    architecture: str  # x86_64 | arm64
    base: image_facts.Base
    slurm_version: str  # the cluster's (AWS PCS); "" where the base image's Slurm is the plane's own
    slurm_prefix: str
    build_instance_type: str
    revision: int  # the spec's images.revision: a new one bakes from the newest base image
    # encrypted with the storage key (storage.kms on AWS PCS); SageMaker HyperPod takes only
    # unencrypted custom AMIs
    encrypted: bool
    groups: tuple[str, ...]  # the node groups that launch from it, in model order
    # the image test checks that the tools of the deep check of new GPU nodes are there (AWS PCS, with
    # health.deep_check): a base image without them fails the image, before any node is launched
    deep_check_tools: bool = False


@dataclass(frozen=True)
class Stack:
    """One CloudFormation stack of the cluster, NAME-KEY."""

    key: str  # network | storage | observability | images | cluster | reference
    cluster: str
    contents: str  # what it holds, in a phrase
    termination_protection: bool

    @property
    def name(self) -> str:
        return f"{self.cluster}-{self.key}"

    @property
    def description(self) -> str:
        """The stack's CloudFormation description."""
        return f"fmcluster {self.cluster}: {self.contents}"


@dataclass(frozen=True)
class ClusterModel:
    spec: ClusterSpec
    control_plane: ControlPlane
    node_groups: tuple[NodeGroup, ...]  # the spec's, in its order
    login: Optional[NodeGroup]  # login nodes (Slurm) or system nodes (Kubernetes); None with count 0
    controller: Optional[NodeGroup]  # the Slurm controller group (SageMaker HyperPod Slurm only)
    total_nodes: int
    pcs_size: Optional[PcsSize]  # AWS PCS only
    subnets: tuple[network_plan.Subnet, ...]  # private first by AZ ID (GPU AZ first), then public
    tags: Mapping[str, str]  # on every resource: fmcluster:cluster and the spec's tags
    stacks: tuple[Stack, ...]
    observed: bool  # NAME-observability exists (Prometheus or Grafana on)
    lustre_efa: bool  # the file system is EFA-enabled
    # the spec's `serving` section resolved: the served model, its group and its placement (TP x PP,
    # replicas; fmcluster.facts.inference); None without one
    serving: Optional[inference.Serving] = None
    images: tuple[NodeImage, ...] = ()  # NAME-images' node images (Slurm planes), by key
    # NAME-reference's reference GPU images (the acceptance kit's), one per architecture of the GPU groups
    reference_images: tuple[ReferenceImage, ...] = ()
    teams: tuple[Team, ...] = ()  # the teams that share the cluster (fmcluster.model.teams), in the spec's order

    home: Optional[Home] = None  # the shared home (storage.home, or Lustre at /home); None without one
    health: Health = Health(check_minutes=health_facts.CHECK_MINUTES, replace=True,
                            max_replacing=health_facts.MAX_REPLACING, deep_check=True)
    # what runs on the nodes of each group (fmcluster.model.node), by group name: `node(group)`
    nodes: Mapping[str, NodeSetup] = field(default_factory=lambda: MappingProxyType({}))

    def node(self, group: NodeGroup) -> NodeSetup:
        """What runs on `group`'s nodes, as resolved once: what every node renderer reads."""
        return self.nodes[group.name]

    def team(self, name: str) -> Team:
        return next(t for t in self.teams if t.name == name)

    def image(self, key: str) -> NodeImage:
        return next(i for i in self.images if i.key == key)

    def reference_image(self, group: NodeGroup) -> Optional[ReferenceImage]:
        """The reference image a group's acceptance jobs run; None where NAME-reference builds none."""
        return next((r for r in self.reference_images if group.name in r.groups), None)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def region(self) -> str:
        return self.spec.region

    def stack(self, key: str) -> Optional[Stack]:
        return next((s for s in self.stacks if s.key == key), None)

    @property
    def all_groups(self) -> tuple[NodeGroup, ...]:
        """The control plane's own groups (controller, login or system) first, then the spec's."""
        return tuple(g for g in (self.controller, self.login) if g is not None) + self.node_groups

    def group(self, name: str) -> NodeGroup:
        return next(g for g in self.all_groups if g.name == name)

    def instance_tags(self, group: NodeGroup) -> dict[str, str]:
        """The tags a node group's instances and volumes carry (its launch template's). On a cluster
        with teams, the team tag too: the team a group is dedicated to, else `shared` (the cost
        allocation tag that splits the bill by team)."""
        tags = {**self.spec.tags, naming.CLUSTER_TAG: self.name, naming.NODE_GROUP_TAG: group.name}
        if self.teams:
            owner = next((t.name for t in self.teams if group.name in t.dedicated), naming.SHARED)
            tags[naming.TEAM_TAG] = owner
        return tags

    def runs_containers(self, group: NodeGroup) -> bool:
        """The group's nodes run Slurm jobs in containers (fmcluster.model.node.runs_containers)."""
        return node.runs_containers(self.control_plane, group)

    def checks_health(self, group: NodeGroup) -> bool:
        """The group's nodes run fmcluster's continuous health check (fmcluster.model.node.checks_health)."""
        return node.checks_health(self.control_plane, group)

    def deep_checks(self, group: NodeGroup) -> bool:
        """A new node of the group runs fmcluster's deep check (fmcluster.model.node.deep_checks)."""
        return node.deep_checks(self.control_plane, self.health, group)

    @property
    def imex_prolog(self) -> bool:
        """Slurm runs the IMEX prolog: a Slurm cluster with an UltraServer node group (installed on
        every compute node, since Prolog is cluster-wide)."""
        return _imex_prolog(self.control_plane, self.node_groups)

    @property
    def slurm_settings(self) -> Mapping[str, str]:
        """The cluster's custom Slurm settings (the IMEX prolog's, where it runs)."""
        return MappingProxyType(dict(node_facts.IMEX_PROLOG_SETTINGS) if self.imex_prolog else {})

    @property
    def efa_groups(self) -> dict[str, bool]:
        return {g.name: g.efa for g in self.node_groups}

    @property
    def ultraserver_groups(self) -> tuple[NodeGroup, ...]:
        """The spec's node groups of UltraServer instances (P6e-GB200: NVLink across instances).
        On Kubernetes they bring the NVIDIA DRA driver (ComputeDomains), GPU feature discovery (the
        nvidia.com/gpu.clique label) and the Kueue Topology of their flavors."""
        return tuple(g for g in self.node_groups if g.ultraserver)


def _imex_prolog(cp: ControlPlane, groups: tuple[NodeGroup, ...]) -> bool:
    return cp.scheduler == "slurm" and any(g.ultraserver for g in groups)


def _node_group(spec: ClusterSpec, group: NodeGroupSpec, cp: ControlPlane, lustre_efa: bool) -> NodeGroup:
    instance = group.instance
    efa = bool(group.efa) and instance.efa_supported
    interfaces = efa_layout(instance, cp.interface_mode, efa)
    made = NodeGroup(
        name=group.name, role=COMPUTE, instance=instance, min_count=group.min_nodes, max_count=group.max_nodes,
        capacity=group.capacity, efa=efa, interfaces=interfaces,
        placement=NO_PLACEMENT if cp.hyperpod else placement_for(group), root_volume_gib=group.root_volume_gib,
        ami_id=group.ami_id,
        lnet_efa_interfaces=lnet_efa_interfaces(instance, efa=efa, lustre_efa=lustre_efa),
        follows_block=cp.type == "eks" and group.capacity.type == CAPACITY_BLOCK, local_zone=spec.local_zone)
    if cp.scheduler != "kubernetes":
        return made
    labels = dict(group.labels)
    labels[kubernetes.NODE_GROUP_LABEL] = group.name
    if instance.is_gpu:
        labels[kubernetes.GPU_LABEL] = kubernetes.TRUE
    if made.efa_interfaces:
        labels[kubernetes.EFA_LABEL] = kubernetes.TRUE
    taints = ({"key": kubernetes.GPU_TAINT_KEY, "value": kubernetes.TRUE, "effect": kubernetes.GPU_TAINT_EFFECT},) \
        if instance.is_gpu else ()
    return NodeGroup(**{**made.__dict__, "labels": MappingProxyType(labels), "taints": taints})


def _own(name: str, role: str, instance_type: str, count: int, root_volume_gib: int,
         **extra: Unpack[_OwnExtra]) -> NodeGroup:
    instance = catalog()[instance_type]
    return NodeGroup(name=name, role=role, instance=instance, min_count=count, max_count=count, capacity=ON_DEMAND,
                     efa=False, interfaces=efa_layout(instance, efa=False), placement=NO_PLACEMENT,
                     root_volume_gib=root_volume_gib, **extra)


def _login(spec: ClusterSpec, cp: ControlPlane) -> Optional[NodeGroup]:
    """The control plane's own nodes from `orchestrator.login`: the EKS system nodes (every
    private subnet of the region's AZs; also on HyperPod EKS), the PCS or HyperPod Slurm login
    nodes (no queue, no EFA); None with `count: 0`."""
    login = spec.orchestrator.login
    if not login.count:
        return None
    if cp.scheduler == "kubernetes":
        return _own(kubernetes.SYSTEM_NODE_GROUP, SYSTEM, login.instance_type, login.count, SYSTEM_ROOT_VOLUME_GIB,
                    labels=MappingProxyType(kubernetes.system_node_selector()))
    volume = HYPERPOD_SYSTEM_VOLUME_GIB if cp.hyperpod else PCS_LOGIN_ROOT_VOLUME_GIB
    return _own(LOGIN, LOGIN, login.instance_type, login.count, volume)


def _controller(cp: ControlPlane, nodes: int) -> Optional[NodeGroup]:
    """The Slurm controller of SageMaker HyperPod Slurm (an instance group of its own, sized by
    the nodes it manages); AWS PCS runs its controller itself."""
    if cp.type != "hyperpod-slurm":
        return None
    return _own(CONTROLLER, CONTROLLER, controlplanes.hyperpod_controller_type(nodes), 1, HYPERPOD_SYSTEM_VOLUME_GIB)


def _stacks(spec: ClusterSpec, cp: ControlPlane, observed: bool, baked: bool,
            reference: bool) -> tuple[Stack, ...]:
    name = spec.name
    scheduler = "Slurm" if cp.scheduler == "slurm" else "Kubernetes"
    placed = any(placement_for(g).create for g in spec.node_groups)
    nested = (" (a nested stack each" + (", with its placement group where it has one" if placed else "") + ")"
              if not cp.hyperpod else "")
    stacks = [
        Stack(NETWORK, name, "VPC, subnets by AZ ID, NAT gateway, S3 endpoint, flow logs, EFA and node "
                                          "security groups", spec.protect),
        Stack(STORAGE, name, "S3 buckets" + (", FSx for Lustre and its links" if spec.storage.lustre else "")
              + (", FSx for OpenZFS (the shared home)" if spec.storage.home else "")
              + (", KMS key" if spec.storage.kms else "") + " (retained)", True),
    ]
    if observed:
        stacks.append(Stack(OBSERVABILITY, name,
                            "Managed Prometheus workspace, GPU-health alert rules, alert manager to SNS"
                            + (", Managed Grafana with dashboards" if spec.observability.grafana else "")
                            + ", CloudWatch alarms and dashboard", spec.protect))
    if baked:
        stacks.append(Stack(IMAGES, name, "EC2 Image Builder node images (Enroot, Pyxis, exporters baked into "
                                          "the control plane's base image), their build role and logs", spec.protect))
    stacks.append(Stack(CLUSTER, name,
                        f"{scheduler} control plane ({cp.type}), its node groups{nested} and "
                        f"{'login' if cp.scheduler == 'slurm' else 'system'} nodes", spec.protect))
    # Last: nothing waits for it, and it waits for the cluster (fmcluster_cdk/stacks/app.py), so that
    # neither `cdk deploy --all` nor the pipeline holds the cluster back for its builds, and a failed
    # build leaves the cluster and its node images as they are.
    if reference:
        stacks.append(Stack(REFERENCE, name, "EC2 Image Builder: the reference GPU image of the acceptance jobs "
                                             "(nccl-tests, fio) in ECR, its build role and logs",
                            False))  # no data: never termination-protected, so a failed first build can go
    return tuple(stacks)


def _serving(spec: ClusterSpec, groups: tuple[NodeGroup, ...]) -> Optional[inference.Serving]:
    """The served model placed on its group (fmcluster.facts.inference.place, as the rules placed it)."""
    serving = spec.serving
    if serving is None:
        return None
    group = next(g for g in groups if g.name == serving.node_group)
    model = serving.model
    placed = inference.place(group.instance, group.max_count, model.parameters_billions, model.dtype,
                             serving.gpu_memory_utilization)
    return inference.Serving(name=model.name, path=model.path, group=group.name, engine=serving.engine,
                             image=serving.image, max_model_len=serving.max_model_len, placement=placed,
                             replicas=serving.replicas or placed.replicas_fit)


def _images(spec: ClusterSpec, cp: ControlPlane,
            groups: tuple[NodeGroup, ...]) -> tuple[tuple[NodeImage, ...], tuple[NodeGroup, ...]]:
    """The node images of a Slurm plane's groups (one per architecture among the groups without an
    `ami_id` of their own), and the groups with their image's key; none on Kubernetes."""
    if cp.type not in (image_facts.PCS, image_facts.HYPERPOD_SLURM):
        return (), groups
    slurm_version = (spec.orchestrator.version or "") if cp.type == image_facts.PCS else ""
    users: dict[tuple[str, str], list[str]] = {}
    placed = []
    for group in groups:
        if group.ami_id:
            placed.append(group)
            continue
        arch = group.instance.architecture
        key = f"{cp.type}-{arch}"
        users.setdefault((key, arch), []).append(group.name)
        placed.append(NodeGroup(**{**group.__dict__, "image": key}))
    made = tuple(NodeImage(
        key=key, plane=cp.type, architecture=arch, base=image_facts.base(cp.type, arch), slurm_version=slurm_version,
        slurm_prefix=image_facts.slurm_prefix(cp.type, slurm_version),
        build_instance_type=image_facts.BUILD_INSTANCE_TYPES[arch], revision=spec.images.revision,
        encrypted=cp.type == image_facts.PCS and spec.storage.kms, groups=tuple(names),
        deep_check_tools=cp.type == image_facts.PCS and spec.health.deep_check
        and any(g.name in names and g.instance.is_gpu for g in groups))
        for (key, arch), names in sorted(users.items()))
    return made, tuple(placed)


def resolve(spec: ClusterSpec) -> ClusterModel:
    """The model of a valid spec (docs/research-notes.md)."""
    cp = spec.orchestrator.control_plane
    lustre = spec.storage.lustre
    lustre_efa = bool(lustre and lustre.efa)
    nodes = spec.managed_nodes
    observed = spec.observability.prometheus or spec.observability.grafana
    controller, login = _controller(cp, nodes), _login(spec, cp)
    own = tuple(g for g in (controller, login) if g is not None)
    images, placed = _images(spec, cp, own + tuple(_node_group(spec, g, cp, lustre_efa) for g in spec.node_groups))
    if controller is not None:
        controller, placed = placed[0], placed[1:]
    if login is not None:
        login, placed = placed[0], placed[1:]
    references = reference_images(spec, tuple(g for g in placed if g.role == COMPUTE and g.instance.is_gpu))
    home, health = home_of(spec), health_of(spec)
    setups = {g.name: node.resolve_node(spec, cp, health, home, g, imex_prolog=_imex_prolog(cp, placed))
              for g in (*(g for g in (controller, login) if g is not None), *placed)}
    return ClusterModel(
        spec=spec, control_plane=cp, node_groups=placed, login=login, controller=controller, total_nodes=nodes,
        pcs_size=controlplanes.pcs_size_for(nodes) if cp.type == "pcs" else None,
        subnets=tuple(network_plan.layout(spec.network.vpc_cidr, spec.availability_zone_ids)),
        tags=MappingProxyType({naming.CLUSTER_TAG: spec.name, **spec.tags}),
        stacks=_stacks(spec, cp, observed, bool(images), bool(references)), observed=observed, lustre_efa=lustre_efa,
        serving=_serving(spec, placed), images=images, reference_images=references, teams=resolve_teams(spec),
        home=home, health=health, nodes=MappingProxyType(setups))
