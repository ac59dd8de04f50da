"""The plan's records of what the cluster holds besides its node groups: storage, network,
control plane, observability, teams, node health and stacks (fmcluster.plan.cluster and
fmcluster.plan.health build them)."""

from __future__ import annotations

from typing import Optional

from pydantic import Field

from fmcluster.plan.shape.base import Model


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
