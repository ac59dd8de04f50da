"""`fmcluster plan`: what a spec will build, what it can do and what it costs, before anyone deploys.

Sources and details: docs/research-notes.md, "fmcluster/plan/report.py"."""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Optional

from pydantic import Field

from fmcluster.facts import fsx, inference, naming, prices, regions
from fmcluster.facts import health as health_facts
from fmcluster.facts import network as network_plan
from fmcluster.kubernetes import kueue
from fmcluster.model import cluster as model
from fmcluster.node import topology
from fmcluster.plan import images as images_plan
from fmcluster.plan.cost import Cost, Model, cost
from fmcluster.plan.first_deploy import FirstDeployPlan
from fmcluster.plan.first_deploy import build as first_deploy
from fmcluster.plan.images import ImagesPlan, OwnImagePlan, ReferenceImagesPlan
from fmcluster.spec import addresses
from fmcluster.spec.models import ONLY_FOR, ClusterSpec, NodeGroupSpec

SCHEMA_VERSION = "fmcluster.plan/v1"
DEFAULT_CHECKPOINT_PARAMS = 70e9
# bytes per parameter of a checkpoint with mixed-precision Adam state: bf16 weights (2) + fp32
# master weights (4) + fp32 Adam first and second moments (4 + 4)
CHECKPOINT_BYTES_PER_PARAM = 2 + 4 + 4 + 4
CHECKPOINT_FORMULA = ("14 bytes per parameter: bf16 weights 2 + fp32 master weights 4 + fp32 Adam moments 4 + 4; "
                      "written at the file system's aggregate baseline throughput")


class Resources(Model):
    """What some nodes add up to. Throughput is peak dense tensor PFLOPS; FP8 and FP4 only where the
    GPU has them (None: none of these GPUs has it; a total counts the GPUs that have it). `hbm_gib`
    and `hbm_tbps` are the GPUs' memory and its bandwidth, HBM or (L40S) GDDR6: the group's
    `gpu_memory` says which. `nvlink_tbps`: the GPUs' NVLink bandwidth added up (GPUs x NVLink per
    GPU, TB/s both directions; 0 without NVLink)."""

    instances: int
    vcpus: int
    gpus: int
    bf16_pflops: float
    fp8_pflops: Optional[float]
    fp4_pflops: Optional[float]
    hbm_gib: float
    hbm_tbps: float
    efa_interfaces: int
    efa_gbps: float
    nvme_tb: float
    nvlink_tbps: float


class NvlinkDomain(Model):
    """A node group's NVLink domain: the GPUs that reach one another over NVLink. An UltraServer's
    instances where the group runs on an UltraServer Capacity Block (u-p6e-gb200x72: 18 instances,
    72 GPUs), else one instance. The counts are at the group's maximum, its instances filling each
    UltraServer before the next."""

    ultraserver_type: Optional[str] = Field(description="the UltraServer type; null: the domain is one instance")
    instances: int = Field(description="instances in one domain")
    gpus: int = Field(description="GPUs in one domain")
    nvlink_gbps_per_gpu: float = Field(description="NVLink bandwidth per GPU, GB/s, both directions")
    domain_nvlink_tbps: float = Field(description="the domain's aggregate NVLink bandwidth, TB/s: gpus x per GPU")
    ultraservers: Optional[int] = Field(description=(
        "the UltraServers of the Capacity Block (capacity.ultraserver_count); null: not an UltraServer group"))
    domains: int = Field(description="the domains the group spans at its maximum, a partial last one included")
    whole_domains: int = Field(description="of those, the domains all of whose instances the group runs")
    partial_domain_instances: int = Field(description=(
        "the group's instances in its last domain where that one is not whole; 0: every domain whole"))


class ServingFit(Model):
    """How a model of one size is served on a node group with vLLM (fmcluster.facts.inference): a replica
    is `tensor_parallel` GPUs of a node times `pipeline_parallel` nodes; it fits where its weights
    leave at least the KV-cache floor of the replica's GPU memory within vLLM's share of it."""

    model: str = Field(description="the standard size and data type (such as '70B bf16'), or the served model's name")
    parameters_billions: float
    dtype: str
    weights_gib: float = Field(description="parameters x bytes per parameter, GiB")
    fits: bool = Field(description="a replica fits in the group at its maximum size")
    tensor_parallel: int = Field(description="GPUs of a node per replica (vLLM --tensor-parallel-size)")
    pipeline_parallel: int = Field(description=(
        "nodes per replica (vLLM --pipeline-parallel-size); where it does not fit, the nodes it would need"))
    gpus_per_replica: int
    kv_cache_gib: float = Field(description=(
        "per replica: what vLLM's share of its GPU memory keeps beside the weights, for the KV cache and activations"))
    replicas_fit: int = Field(description="replicas the group holds at its maximum size")
    served: bool = Field(default=False, description="the model of the spec's serving section")
    replicas_served: Optional[int] = Field(default=None, description="the served model: the replicas served")


class ServingPlan(Model):
    """The spec's `serving` section: the model served, where and how (its placement is the served row of
    its node group's `serving` table)."""

    name: str
    path: str
    node_group: str
    engine: str
    image: str
    gpu_memory_utilization: float
    max_model_len: Optional[int]
    tensor_parallel: int
    pipeline_parallel: int
    replicas: int
    units: int = Field(description="units of pipeline_parallel nodes the replicas take (Slurm jobs, LWS groups)")
    port: int


class InterfacePlan(Model):
    """One network interface of a node's launch layout (fmcluster.facts.efa.efa_layout)."""

    network_card_index: int
    device_index: int
    interface_type: str = Field(description='"interface" (ENA), "efa" (EFA with ENA) or "efa-only"')


class NodeGroupPlan(Model):
    name: str
    instance_type: str
    gpu: Optional[str]
    min_count: int
    max_count: int
    capacity_type: str
    reservation_id: Optional[str]
    reservation_resource_group_arn: Optional[str]
    training_plan_arn: Optional[str]
    placement: str  # "new cluster placement group", "existing placement group NAME", "none (why)" or HyperPod's
    efa: bool
    interface_type: Optional[str]  # the EFA interface type the control plane uses: "efa" or "efa-only"
    interfaces: list[InterfacePlan] = Field(description="a node's network interfaces, primary first")
    interface_addresses: int = Field(description="private IPv4 addresses a node's interfaces take in its subnet "
                                                 "(efa-only interfaces take none; pods' come on top)")
    nvme_disks: int
    root_volume_gib: int
    volume: str  # what root_volume_gib sizes: the root volume, or HyperPod's volume at /opt/sagemaker
    per_node: Resources
    at_max: Resources
    gpu_memory: Optional[str] = None  # the kind of GPU memory: HBM, or GDDR6 (L40S); None: no GPU
    # None: no NVLink (a CPU group, or an L40S group: its GPUs are on PCIe), or no NVLink peer (a
    # one-GPU type: p5.4xlarge)
    nvlink_domain: Optional[NvlinkDomain] = None
    # how the node count follows a Capacity Block (EKS managed node groups on one), else None
    scaling: Optional[str] = None
    # the Capacity Block's or reservation's window, as `fmcluster preflight` read it (plan --preflight)
    window: Optional[str] = None
    # GPU groups: how many replicas of models of standard sizes (and of the served model) fit; None
    # for a CPU group
    serving: Optional[list[ServingFit]] = None
    # how the group's jobs are placed in the network (Slurm node features, HyperPod's or PCS's
    # topology, a Kueue Topology), or "none: why"
    topology: Optional[str] = None


class Link(Model):
    path: str
    bucket: str
    prefix: str
    import_events: list[str]
    export_events: list[str]


class Checkpoint(Model):
    parameters: float
    bytes_per_parameter: int
    gigabytes: float
    seconds: float
    formula: str


class LustrePlan(Model):
    deployment_type: str
    storage_capacity_gib: int
    throughput_per_tib: Optional[int]
    throughput_gbps: float  # aggregate baseline, GB/s
    metadata_iops: str  # "automatic", a number, or "not configurable"
    efa: bool
    compression: str
    mount_path: str
    file_servers: int
    links: list[Link]
    checkpoint: Checkpoint


class BucketPlan(Model):
    name: str
    s3_name: str
    versioned: bool


class HomePlan(Model):
    """The shared home: FSx for OpenZFS (storage.home), or the Lustre file system at /home."""

    file_system: str  # "FSx for OpenZFS" or "FSx for Lustre"
    mount_path: str
    deployment_type: Optional[str] = None  # OpenZFS only, as the four below
    storage_capacity_gib: Optional[int] = None
    throughput_mbps: Optional[int] = None
    compression: Optional[str] = None


class StoragePlan(Model):
    buckets: list[BucketPlan]
    kms: bool
    lustre: Optional[LustrePlan]
    home: Optional[HomePlan] = None


class SubnetPlan(Model):
    az_id: str
    cidr: str
    public: bool
    usable_addresses: int
    gpu_subnet: bool
    nat_gateway: bool  # the NAT gateway's: the public subnet of the region's first AZ ID (not a Local Zone)
    local_zone: bool = False  # in a Local Zone (the GPU subnet only)


class AddressNeed(Model):
    what: str
    addresses: int


class NetworkPlan(Model):
    vpc_cidr: str
    subnets: list[SubnetPlan]
    address_needs: list[AddressNeed]
    addresses_needed: int
    gpu_subnet_usable: int
    nat_gateways: int


class ControlPlanePlan(Model):
    type: str
    scheduler: str
    version_label: str
    version: str
    login_instance_type: str
    login_count: int
    pcs_size: Optional[str]
    endpoint_access: Optional[str]
    # Kubernetes with a public endpoint: the CIDR blocks that may reach it (0.0.0.0/0: everyone)
    public_access_cidrs: Optional[list[str]]
    admin_role_arn: Optional[str]


class ObservabilityPlan(Model):
    prometheus: bool
    grafana: bool
    alert_email: Optional[str]
    built: bool
    note: str


class TeamGroupPlan(Model):
    node_group: str
    guaranteed_gpus: int  # its nominal quota (Kubernetes) or fair share (Slurm) there
    burst_gpus: int  # the most it may hold at once: the guarantee and what it may borrow
    lendable_gpus: int  # of its guarantee, what others may use while it is idle
    gpu_hourly_usd: Optional[float]  # On-Demand list price of one GPU-hour of the group's type


class TeamPlan(Model):
    name: str
    priority: str  # its jobs' default priority class, the highest it may use
    priorities: list[str]
    members: int
    groups: list[str]
    dedicated: list[str]  # the node groups that are its alone
    fair_share: int  # Slurm: its account's Fairshare
    node_groups: list[TeamGroupPlan]  # every GPU node group
    guaranteed_gpus: int
    burst_gpus: int
    guaranteed_hourly_usd: Optional[float]  # at On-Demand list prices; None where a group has no price
    burst_hourly_usd: Optional[float]


class HealthPlan(Model):
    """How the cluster keeps its GPU nodes healthy: the spec's `health`, resolved per control plane."""

    check_minutes: int = Field(description="how often each GPU node in service is checked")
    checks: list[str] = Field(description="what the check looks at (fmcluster/facts/health.py FAULTS), 'SLUG: what'")
    checked_by: str = Field(description="what runs the check on this control plane")
    out_of_pool: str = Field(description="what takes a faulty node out of the pool, and what the operator sees")
    replace: bool
    replaced_by: str = Field(description="what replaces a node with a hardware fault, with its limits")
    max_replacing: int = Field(description="nodes replaced at once (per cluster on Slurm, per node group on EKS)")
    replace_window_minutes: int = Field(description="how long a replacement counts against max_replacing (Slurm)")
    block_guard_minutes: int = Field(description="no replacement in a Capacity Block's last this many minutes")
    deep_check: bool
    new_nodes: str = Field(description="what a new node runs before its first job")
    deep_check_minutes: Optional[int] = Field(description=(
        "about how long the deep check adds to a new node's first boot; null: none, or the service's own"))


class StackPlan(Model):
    name: str
    contents: str
    termination_protection: bool


class Plan(Model):
    schema_version: str
    name: str
    region: str
    account: Optional[str]
    availability_zone_id: str
    node_groups: list[NodeGroupPlan]
    total: Resources
    nvlink_domains: int  # the NVLink domains of all node groups at their maximum (each group's `domains`)
    largest_nvlink_domain_gpus: int  # the GPUs of the largest of them; 0: no NVLink
    storage: StoragePlan
    network: NetworkPlan
    control_plane: ControlPlanePlan
    observability: ObservabilityPlan
    stacks: list[StackPlan]
    cost: Cost
    resolved_spec: dict[str, Any]
    defaulted: list[str]  # dotted paths of the resolved spec that the file leaves to defaults
    # the serving rule's figures: vLLM's share of GPU memory the standard sizes are placed at, and
    # fmcluster's KV-cache floor (fmcluster.facts.inference)
    serving_gpu_memory_utilization: float = inference.GPU_MEMORY_UTILIZATION
    serving_kv_cache_floor: float = inference.KV_CACHE_RESERVE
    serving: Optional[ServingPlan] = None  # the spec's serving section; None without one
    images: Optional[ImagesPlan] = None  # NAME-images; None where the nodes launch from no baked image
    own_images: list[OwnImagePlan] = []  # the Slurm groups with an ami_id of their own
    reference_images: Optional[ReferenceImagesPlan] = None  # NAME-reference; None where it builds none
    teams: list[TeamPlan] = []  # the teams that share the cluster (fmcluster.model.teams)
    health: Optional[HealthPlan] = None  # how the GPU nodes are kept healthy; None without GPU nodes
    first_deploy: FirstDeployPlan  # how long a first deploy takes, stack by stack, and the first node


def json_schema() -> dict[str, Any]:
    schema = Plan.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://fmcluster.dev/schema/plan-v1.json"
    return schema


# ---- compute -------------------------------------------------------------------------------


def _resources(group: model.NodeGroup, count: int) -> Resources:
    it = group.instance
    gpu, gpus = it.gpu, it.gpu_count
    return Resources(
        instances=count, vcpus=it.vcpus * count, gpus=gpus * count,
        bf16_pflops=round(gpus * count * gpu.bf16_pflops, 4) if gpu else 0.0,
        fp8_pflops=(round(gpus * count * gpu.fp8_pflops, 4) if gpu.fp8_pflops is not None else None) if gpu else 0.0,
        fp4_pflops=round(gpus * count * gpu.fp4_pflops, 4) if gpu and gpu.fp4_pflops else None,
        hbm_gib=gpus * count * gpu.memory_gib if gpu else 0.0,
        hbm_tbps=round(gpus * count * gpu.hbm_tbps, 4) if gpu else 0.0,
        efa_interfaces=group.efa_interfaces * count,
        efa_gbps=(it.efa_gbps if group.efa else 0.0) * count,
        nvme_tb=round(it.nvme_total_gb * count / 1000, 3),
        nvlink_tbps=round(gpus * count * it.nvlink_gbps / 1000, 4) if it.nvlink_gbps else 0.0,
    )


def _sum(parts: list[Resources]) -> Resources:
    def total(values: Iterable[float]) -> float:
        return round(sum(values), 4)

    fp4 = [p.fp4_pflops for p in parts if p.fp4_pflops is not None]
    fp8 = [p.fp8_pflops for p in parts if p.fp8_pflops is not None]
    return Resources(
        instances=sum(p.instances for p in parts), vcpus=sum(p.vcpus for p in parts),
        gpus=sum(p.gpus for p in parts), bf16_pflops=total(p.bf16_pflops for p in parts),
        fp8_pflops=round(sum(fp8), 4) if fp8 else None, fp4_pflops=round(sum(fp4), 4) if fp4 else None,
        hbm_gib=total(p.hbm_gib for p in parts), hbm_tbps=total(p.hbm_tbps for p in parts),
        efa_interfaces=sum(p.efa_interfaces for p in parts), efa_gbps=total(p.efa_gbps for p in parts),
        nvme_tb=total(p.nvme_tb for p in parts), nvlink_tbps=total(p.nvlink_tbps for p in parts),
    )


def _nvlink_domain(group: model.NodeGroup) -> Optional[NvlinkDomain]:
    """The group's NVLink domain: its UltraServer (capacity.ultraserver_type), else one instance;
    None without NVLink, or without an NVLink peer (one GPU: p5.4xlarge)."""
    it, nvlink = group.instance, group.instance.nvlink_gbps
    if nvlink is None:
        return None
    server = group.nvlink_domain
    per = server.instances if server else 1
    gpus = per * it.gpu_count
    whole, partial = divmod(group.max_count, per)
    return NvlinkDomain(
        ultraserver_type=server.name if server else None, instances=per, gpus=gpus,
        nvlink_gbps_per_gpu=nvlink, domain_nvlink_tbps=round(gpus * nvlink / 1000, 4),
        ultraservers=group.capacity.ultraserver_count if server else None,
        domains=whole + (1 if partial else 0), whole_domains=whole, partial_domain_instances=partial,
    )


_NOT_PLACED = {"capacity-block": "a Capacity Block is placed already",
               "reservation": "a reservation is placed where it was made"}


def _placement(group: model.NodeGroup, spec_group: NodeGroupSpec, hyperpod: bool) -> str:
    if hyperpod:
        return "by SageMaker HyperPod"
    placement = group.placement
    if placement.create:
        return "new cluster placement group"
    if placement.name:
        return f"existing placement group {placement.name}"
    if spec_group.placement_group != "auto":
        return "none (placement_group: none)"
    return f"none ({_NOT_PLACED.get(group.capacity.type, 'no EFA')})"


def _volume(gib: int, hyperpod: bool) -> str:
    """HyperPod sizes its own root volume; `root_volume_gib` is the EBS volume it mounts at
    /opt/sagemaker (ClusterEbsVolumeConfig)."""
    if hyperpod:
        return f"{gib} GiB at /opt/sagemaker, encrypted"
    return f"{gib} GiB gp3 root volume, encrypted"


def _scaling(group: model.NodeGroup) -> Optional[str]:
    """How a node group's count follows its Capacity Block (the node group's CapacityBlockScaler:
    README, "Capacity Blocks"), or None where its counts are all there is."""
    if not group.follows_block:
        return None
    return f"{group.max_count} while the block is active, else 0 ({group.drain_minutes} min before end)"


def _window(group: model.NodeGroup, read: Mapping[str, Any]) -> Optional[str]:
    found = read.get(group.capacity.reservation_id or "")
    if not found:
        return None
    span = f"{found.get('start') or '?'} to {found['end']}" if found.get("end") else \
        f"from {found.get('start') or '?'}, no end date"
    return f"{span} ({found.get('state') or 'unknown state'}, {found.get('instances', '?')} instances)"


def _fit(label: str, placed: inference.ServingPlacement) -> ServingFit:
    return ServingFit(
        model=label, parameters_billions=placed.parameters_billions, dtype=placed.dtype,
        weights_gib=round(placed.weights_gib, 1), fits=placed.fits, tensor_parallel=placed.tensor_parallel,
        pipeline_parallel=placed.pipeline_parallel, gpus_per_replica=placed.gpus_per_replica,
        kv_cache_gib=round(placed.kv_cache_gib, 1), replicas_fit=placed.replicas_fit)


def _serving_fits(m: model.ClusterModel, group: model.NodeGroup) -> Optional[list[ServingFit]]:
    """The standard sizes (inference.STANDARD_MODELS) on a GPU group, then the served model on its own."""
    if not group.instance.is_gpu:
        return None
    fits = [_fit(f"{params:g}B {dtype}", inference.place(group.instance, group.max_count, params, dtype))
            for params, dtype in inference.STANDARD_MODELS]
    served = m.serving
    if served is not None and served.group == group.name:
        fits.append(_fit(served.name, served.placement).model_copy(
            update={"served": True, "replicas_served": served.replicas}))
    return fits


def _served(m: model.ClusterModel) -> Optional[ServingPlan]:
    s = m.serving
    if s is None:
        return None
    return ServingPlan(name=s.name, path=s.path, node_group=s.group, engine=s.engine, image=s.image,
                       gpu_memory_utilization=s.gpu_memory_utilization, max_model_len=s.max_model_len,
                       tensor_parallel=s.tensor_parallel, pipeline_parallel=s.pipeline_parallel, replicas=s.replicas,
                       units=s.units, port=inference.PORT)


def _node_group(m: model.ClusterModel, group: model.NodeGroup, spec_group: NodeGroupSpec,
                read: Mapping[str, Any]) -> NodeGroupPlan:
    cp = m.control_plane
    it = group.instance
    capacity = group.capacity
    return NodeGroupPlan(
        name=group.name, instance_type=group.instance_type, gpu=it.gpu.name if it.gpu else None,
        min_count=group.min_count, max_count=group.max_count, capacity_type=capacity.type,
        reservation_id=capacity.reservation_id,
        reservation_resource_group_arn=capacity.reservation_resource_group_arn,
        training_plan_arn=capacity.training_plan_arn, placement=_placement(group, spec_group, cp.hyperpod),
        efa=group.efa, interface_type=cp.interface_mode.value if group.efa else None,
        interfaces=[InterfacePlan(network_card_index=i.network_card_index, device_index=i.device_index,
                                  interface_type=i.interface_type) for i in group.interfaces],
        interface_addresses=group.interface_addresses, nvme_disks=it.nvme_disks,
        root_volume_gib=group.root_volume_gib, volume=_volume(group.root_volume_gib, cp.hyperpod),
        per_node=_resources(group, 1), at_max=_resources(group, group.max_count),
        gpu_memory=it.gpu.memory_type if it.gpu else None, nvlink_domain=_nvlink_domain(group),
        scaling=_scaling(group), window=_window(group, read), serving=_serving_fits(m, group),
        topology=_topology(m, group),
    )


def _topology(m: model.ClusterModel, group: model.NodeGroup) -> str:
    """How the group's jobs are placed in the network: by the control plane's means where the group
    is placed (fmcluster.kubernetes.kueue, fmcluster.node.topology), else why nothing places them."""
    placed = (kueue.group_placement(m, group) if m.control_plane.scheduler == "kubernetes"
              else topology.slurm_group_placement(m, group))
    if placed:
        return placed
    if not group.instance.is_gpu:
        return "none: a CPU group"
    if group.max_count <= 1:
        return "none: one node"
    if not group.efa:
        return "none: no EFA, so jobs stay inside one node"
    return f"none: EC2's instance topology does not cover {group.instance_type}; jobs go where nodes are free"


def checkpoint(params: float, throughput_mbps: float) -> Checkpoint:
    size = params * CHECKPOINT_BYTES_PER_PARAM
    return Checkpoint(parameters=params, bytes_per_parameter=CHECKPOINT_BYTES_PER_PARAM,
                      gigabytes=round(size / 1e9, 3), seconds=round(size / (throughput_mbps * 1e6), 1),
                      formula=CHECKPOINT_FORMULA)


def _lustre(spec: ClusterSpec, params: float) -> LustrePlan | None:
    fs = spec.storage.lustre
    if fs is None:
        return None
    if fs.deployment_type != "PERSISTENT_2":
        metadata = "not configurable"
    else:
        metadata = "automatic" if fs.metadata_iops == "auto" else str(fs.metadata_iops)
    links = [Link(path=link.path, bucket=link.bucket, prefix=link.prefix, import_events=list(link.import_),
                  export_events=list(link.export)) for link in fs.links]
    return LustrePlan(
        deployment_type=fs.deployment_type, storage_capacity_gib=fs.storage_capacity_gib,
        throughput_per_tib=fs.throughput_per_tib, throughput_gbps=round(fs.throughput_mbps / 1000, 6),
        metadata_iops=metadata, efa=fs.efa, compression=fs.compression, mount_path=fs.mount_path,
        file_servers=fsx.file_servers(fs.storage_capacity_gib, fs.efa, fs.throughput_per_tib), links=links,
        checkpoint=checkpoint(params, fs.throughput_mbps),
    )


def _storage(spec: ClusterSpec, params: float) -> StoragePlan:
    account = spec.account or "ACCOUNT"
    buckets = [BucketPlan(name=b.name, s3_name=naming.bucket_name(spec.name, b.name, spec.region, account),
                          versioned=b.versioned) for b in spec.storage.buckets]
    return StoragePlan(buckets=buckets, kms=spec.storage.kms, lustre=_lustre(spec, params), home=_home(spec))


def _home(spec: ClusterSpec) -> HomePlan | None:
    home = model.home_of(spec)
    if home is None:
        return None
    fs = spec.storage.home
    if fs is None:  # the Lustre file system at /home
        return HomePlan(file_system="FSx for Lustre", mount_path=home.mount_path)
    return HomePlan(file_system="FSx for OpenZFS", mount_path=home.mount_path, deployment_type=fs.deployment_type,
                    storage_capacity_gib=fs.storage_capacity_gib, throughput_mbps=fs.throughput_mbps,
                    compression=fs.compression)


def _network(spec: ClusterSpec) -> NetworkPlan:
    subnets = network_plan.layout(spec.network.vpc_cidr, spec.availability_zone_ids)
    needs = addresses.address_needs(spec)
    gpu = subnets[0]
    nat_az = spec.region_zone_ids[0]
    return NetworkPlan(
        vpc_cidr=spec.network.vpc_cidr,
        subnets=[SubnetPlan(az_id=s.az_id, cidr=s.cidr, public=s.public, usable_addresses=s.usable,
                            gpu_subnet=s is gpu, nat_gateway=s.public and s.az_id == nat_az,
                            local_zone=regions.is_local_zone(s.az_id))
                 for s in subnets],
        address_needs=[AddressNeed(what=n.what, addresses=n.addresses) for n in needs],
        addresses_needed=network_plan.total(needs), gpu_subnet_usable=gpu.usable, nat_gateways=1,
    )


def _control_plane(m: model.ClusterModel) -> ControlPlanePlan:
    orch = m.spec.orchestrator
    cp = m.control_plane
    kubernetes = cp.scheduler == "kubernetes"
    if orch.version is None:  # OrchestratorSpec resolves it when the spec is validated
        raise ValueError("orchestrator.version is not resolved: the plan is of a validated spec")
    return ControlPlanePlan(
        type=orch.type, scheduler=cp.scheduler, version_label=cp.version_label, version=orch.version,
        login_instance_type=orch.login.instance_type, login_count=orch.login.count,
        pcs_size=m.pcs_size.name if m.pcs_size else None,
        endpoint_access=orch.endpoint_access if kubernetes else None,
        public_access_cidrs=list(orch.public_access_cidrs)
        if kubernetes and orch.endpoint_access != "private" else None,
        admin_role_arn=orch.admin_role_arn if kubernetes else None,
    )


def _stacks(m: model.ClusterModel) -> list[StackPlan]:
    return [StackPlan(name=s.name, contents=s.contents, termination_protection=s.termination_protection)
            for s in m.stacks]


def _teams(m: model.ClusterModel, table: prices.PriceTable) -> list[TeamPlan]:
    """Each team's GPUs per GPU node group and what they cost an hour at On-Demand list prices:
    the rate a team is charged back at, whatever the capacity was bought as (Capacity Blocks and
    reservations are bought at their own price)."""
    per_gpu = {}
    for group in m.node_groups:  # SageMaker HyperPod bills ml.* instances, not in the table (fmcluster.plan.cost)
        unit = None if m.control_plane.hyperpod else table.instance_hourly(group.instance_type)
        per_gpu[group.name] = None if unit is None or not group.gpus else round(unit / group.gpus, 4)
    plans = []
    for team in m.teams:
        rows = [TeamGroupPlan(node_group=group, guaranteed_gpus=team.guaranteed[group], burst_gpus=team.burst(group),
                              lendable_gpus=team.lendable(group), gpu_hourly_usd=per_gpu[group])
                for group in team.group_gpus]

        def hourly(gpus: dict[str, int]) -> Optional[float]:
            if any(n and per_gpu[group] is None for group, n in gpus.items()):
                return None
            return round(sum(n * (per_gpu[group] or 0.0) for group, n in gpus.items()), 2)

        plans.append(TeamPlan(
            name=team.name, priority=team.priority, priorities=list(team.priorities), members=len(team.members),
            groups=list(team.groups), dedicated=list(team.dedicated), fair_share=team.fair_share, node_groups=rows,
            guaranteed_gpus=team.guaranteed_gpus, burst_gpus=team.burst_gpus,
            guaranteed_hourly_usd=hourly(dict(team.guaranteed)),
            burst_hourly_usd=hourly({group: team.burst(group) for group in team.group_gpus})))
    return plans


def _health(m: model.ClusterModel) -> Optional[HealthPlan]:
    """What checks, takes out and replaces faulty GPU nodes on the cluster's control plane, and
    what new nodes run before their first job (fmcluster/facts/health.py, docs/health.md)."""
    if not any(g.instance.is_gpu for g in m.node_groups):
        return None
    h, plane = m.health, m.control_plane.type
    slurm = m.control_plane.scheduler == "slurm"
    limits = (f"at most {h.max_replacing} at once (each counts {h.replace_window_minutes} minutes), never in a "
              f"Capacity Block's last {h.block_guard_minutes} minutes; every decision is logged (the stack "
              "output NodeReplacementLog)")
    if slurm:
        checked_by = (f"a systemd timer on each GPU node, every {h.check_minutes} minutes (fmcluster node-health; "
                      "AWS PCS takes no HealthCheckProgram setting)" if plane == "pcs" else
                      f"a systemd timer on each GPU node, every {h.check_minutes} minutes (fmcluster node-health), "
                      "besides SageMaker HyperPod's own health-monitoring agent")
        out_of_pool = ("drained in Slurm with the fault as the reason (sinfo -R: 'fmcluster-health: FAULT: ...'); "
                       "a file-system fault is resumed once the check passes again; a node drained by anyone "
                       "else is left alone")
        reset = (f"an XID asking for a GPU reset ({', '.join(map(str, health_facts.RESET_XIDS))}), or the "
                 "uncorrected ECC count or row remap it leaves pending, reboots the node through Slurm once its "
                 "jobs end (scontrol reboot ASAP nextstate=RESUME: Slurm resumes it when it is back), and replaces "
                 "it only if the same fault comes back on the same GPU right after; where Slurm has no "
                 "RebootProgram the reboot is not asked (Slurm 24.11 to 25.11 would accept it and do nothing, "
                 "26.05 refuses it): a dynamic node is powered down instead, a static one stays drained for a "
                 "person; fmcluster replaces at once only for XIDs "
                 f"{', '.join(map(str, health_facts.REPLACE_XIDS))} (its policy: NVIDIA's catalog gives a "
                 "reset or reboot as their first action)")
        if not h.replace:
            replaced_by = "no one: a drained node waits for a person (health.replace: false)"
        elif plane == "pcs":
            replaced_by = ("a dynamic node (above the group's minimum count), by Slurm's power saving once its jobs "
                           "have ended: scontrol update state=POWER_DOWN_ASAP, AWS PCS's SuspendProgram ends the "
                           "instance, Slurm clears the drain and the node's next job gets a new instance; a static "
                           "node (the minimum count, every Capacity Block node): no one, it stays drained for a "
                           "person: AWS PCS documents no replacement of a static node's instance except its own "
                           "instance health checks (instanceHealthChecks.healthMonitoring.repairAction "
                           "AUTO|REPLACE|ISOLATE|NONE, Slurm 26.05: the documented route), which are not in "
                           "CloudFormation and which fmcluster does not set yet (changing them replaces every "
                           "instance of the group); fmcluster's replacer logs the request (NodeReplacementLog); "
                           + reset)
        else:
            replaced_by = (f"fmcluster's replacer (in {m.name}-cluster), once the node's jobs have ended, "
                           "through SageMaker HyperPod's BatchReplaceClusterNodes; " + limits
                           + "; HyperPod's automatic node recovery also replaces what its own agent finds; " + reset)
    else:
        agent = ("the EKS node monitoring agent (node conditions AcceleratedHardwareReady, NetworkingReady, "
                 "StorageReady, KernelReady)" if plane == "eks" else
                 "SageMaker HyperPod's health-monitoring agent")
        checked_by = f"{agent}, and fmcluster node-health every {h.check_minutes} minutes for the metrics and alerts"
        out_of_pool = ("EKS node auto repair cordons a node whose condition fails: no new pod is scheduled there"
                       if plane == "eks" else
                       "SageMaker HyperPod marks a faulty node unschedulable and drains it")
        if not h.replace:
            replaced_by = "no one: a faulty node waits for a person (health.replace: false)"
        elif plane == "eks":
            replaced_by = (f"EKS node auto repair, after 10 minutes for GPU faults: at most {h.max_replacing} "
                           "nodes of a node group at once, halted while a fifth of the group is unhealthy, and off"
                           f" in a Capacity Block's last {h.block_guard_minutes} minutes")
        else:
            replaced_by = "SageMaker HyperPod's automatic node recovery (NodeRecovery: Automatic)"
    if not h.deep_check:
        new_nodes, minutes = "the readiness check only (health.deep_check: false)", None
    elif m.control_plane.hyperpod:
        new_nodes, minutes = ("SageMaker HyperPod's deep health checks (InstanceStress, InstanceConnectivity) when a "
                              "GPU group is created or grows; a node that fails is replaced"), None
    elif plane == "pcs":
        new_nodes = (f"a DCGM diagnostic (level {health_facts.DEEP_DCGM_LEVEL}) and a node-local NCCL all-reduce, "
                     "once per instance, before slurmd starts; a node that fails them takes no job")
        minutes = health_facts.DEEP_CHECK_MINUTES
    else:
        new_nodes, minutes = "the readiness check (the node monitoring agent's DCGM checks follow)", None
    return HealthPlan(
        check_minutes=h.check_minutes, checks=[f"{f.slug}: {f.what}" for f in health_facts.FAULTS],
        checked_by=checked_by, out_of_pool=out_of_pool, replace=h.replace, replaced_by=replaced_by,
        max_replacing=h.max_replacing, replace_window_minutes=h.replace_window_minutes,
        block_guard_minutes=h.block_guard_minutes, deep_check=h.deep_check, new_nodes=new_nodes,
        deep_check_minutes=minutes)


def _observability(m: model.ClusterModel) -> ObservabilityPlan:
    obs = m.spec.observability
    note = (f"in {m.name}-observability; node exporters and remote write are set up per control plane"
            if m.observed else "off: no Prometheus and no Grafana")
    return ObservabilityPlan(prometheus=obs.prometheus, grafana=obs.grafana, alert_email=obs.alert_email,
                             built=m.observed, note=note)


def _for_plane(resolved: dict[str, Any], defaulted: list[str], plane: str) -> tuple[dict[str, Any], list[str]]:
    """The resolved spec without the fields `plane` does not read (spec.models.ONLY_FOR) that the
    file leaves to defaults, and the defaulted paths left."""
    gone: list[str] = []

    def prune(value: Any, path: str) -> Any:
        if isinstance(value, list):
            return [prune(item, f"{path}[{i}]") for i, item in enumerate(value)]
        if not isinstance(value, dict):
            return value
        kept = {}
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            general = re.sub(r"\[\d+\]", "[]", child)
            if plane not in ONLY_FOR.get(general, (plane,)) and _all_defaulted(item, child, set(defaulted)):
                gone.append(child)
                continue
            kept[key] = prune(item, child)
        return kept

    pruned = prune(resolved, "")
    return pruned, [d for d in defaulted if not any(d == g or d.startswith((g + ".", g + "[")) for g in gone)]


def _all_defaulted(value: Any, path: str, defaulted: set[str]) -> bool:
    """Whether the file leaves `value` (at `path`), and everything in it, to defaults."""
    if path in defaulted:
        return True
    if isinstance(value, dict) and value:
        return all(_all_defaulted(v, f"{path}.{k}", defaulted) for k, v in value.items())
    return False


def _defaulted(resolved: Any, raw: Any, path: str = "") -> list[str]:
    """Dotted paths of the leaves of `resolved` that `raw` (the file as written) does not give."""
    if isinstance(resolved, dict):
        out: list[str] = []
        for key, value in resolved.items():
            child = f"{path}.{key}" if path else key
            if not isinstance(raw, dict) or key not in raw:
                out += _defaulted(value, None, child) if isinstance(value, dict) and value else [child]
            else:
                out += _defaulted(value, raw[key], child)
        return out
    if isinstance(resolved, list) and isinstance(raw, list):
        return [p for i, item in enumerate(resolved)
                for p in _defaulted(item, raw[i] if i < len(raw) else None, f"{path}[{i}]")]
    return []


def build(spec: ClusterSpec, raw: dict[str, Any] | None = None, checkpoint_params: float | None = None,
          reservations: Iterable[Mapping[str, Any]] = ()) -> Plan:
    """The plan of a valid spec, from its resolved model (fmcluster.model.cluster). `raw` is the spec
    file as written (to tell defaults apart); `reservations` what `fmcluster preflight` read of
    its reservations and Capacity Blocks (its JSON's "reservations"), for their windows."""
    m = model.resolve(spec)
    params = checkpoint_params or DEFAULT_CHECKPOINT_PARAMS
    read = {str(r.get("id")): r for r in reservations}
    groups = [_node_group(m, g, s, read) for g, s in zip(m.node_groups, spec.node_groups, strict=True)]
    resolved = spec.resolved()
    defaulted = _defaulted(resolved, raw if raw is not None else resolved)
    resolved, defaulted = _for_plane(resolved, defaulted, spec.orchestrator.type)
    domains = [g.nvlink_domain for g in groups if g.nvlink_domain]
    table = prices.table()
    return Plan(
        schema_version=SCHEMA_VERSION, name=spec.name, region=spec.region, account=spec.account,
        availability_zone_id=spec.availability_zone_id, node_groups=groups,
        total=_sum([g.at_max for g in groups]), nvlink_domains=sum(d.domains for d in domains),
        largest_nvlink_domain_gpus=max((d.gpus for d in domains if d.domains), default=0),
        storage=_storage(spec, params), network=_network(spec),
        control_plane=_control_plane(m), observability=_observability(m), stacks=_stacks(m),
        cost=cost(m, table), resolved_spec=resolved,
        defaulted=defaulted, serving=_served(m),
        images=images_plan.images(m, table), own_images=images_plan.own_images(m),
        reference_images=images_plan.reference_images(m, table), teams=_teams(m, table),
        health=_health(m),
        first_deploy=first_deploy(m),
    )
