"""The plan's records of the node groups: what they add up to, their NVLink domains, network
interfaces and the models that fit for serving (fmcluster.plan.compute builds them)."""

from __future__ import annotations

from typing import Optional

from pydantic import Field

from fmcluster.plan.shape.base import Model


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
