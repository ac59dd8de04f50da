"""The spec's control plane (`orchestrator`, its login or system nodes) and `node_groups`, with
how each group's instances are bought (`capacity`).

No `from __future__ import annotations` here (fmcluster.spec.models): pydantic must not
evaluate string annotations when it builds the models.
"""

import ipaddress
from typing import Literal, Optional

from pydantic import Field, model_validator

from fmcluster.facts import catalog, controlplanes
from fmcluster.spec.models.base import Model
from fmcluster.spec.models.formats import (
    AccessCidr,
    AmiId,
    GroupName,
    InstanceTypeName,
    ReservationId,
    ResourceGroupArn,
    RoleArn,
    SlurmSignal,
    Text,
    TrainingPlanArn,
    UltraServerType,
    Version,
)


class LoginSpec(Model):
    """Login nodes (Slurm) or system nodes (Kubernetes)."""

    instance_type: InstanceTypeName = Field(default="m7i.2xlarge", description="a type of the instance catalog")
    count: int = Field(default=1, ge=0, le=16, description="how many, 0 to 16")


EVERYONE = "0.0.0.0/0"  # every IPv4 address: the default of the public API endpoint (EKS's, CDK's)


def is_everyone(cidr: str) -> bool:
    """Whether an access CIDR block (AccessCidr) admits every IPv4 address (a /0)."""
    return ipaddress.IPv4Network(cidr).prefixlen == 0


class OrchestratorSpec(Model):
    """The control plane."""

    type: Literal["pcs", "hyperpod-slurm", "eks", "hyperpod-eks"] = Field(description=(
        "pcs (AWS Parallel Computing Service, Slurm), hyperpod-slurm (SageMaker HyperPod, Slurm), "
        "eks (Amazon EKS) or hyperpod-eks (SageMaker HyperPod on EKS)"))
    version: Optional[Version] = Field(default=None, description=(
        "Slurm version (pcs, hyperpod-slurm) or Kubernetes version (eks, hyperpod-eks), quoted, such as "
        "\"25.05\"; default: the newest the control plane supports"))
    login: LoginSpec = Field(default=LoginSpec(), description="login nodes (Slurm) or system nodes (Kubernetes)")
    admin_role_arn: Optional[RoleArn] = Field(default=None, description=(
        "Kubernetes: an IAM role given cluster-admin access (an access entry)"))
    endpoint_access: Literal["public-and-private", "private"] = Field(
        default="public-and-private", description=(
            "Kubernetes: access to the API endpoint: public-and-private (from the VPC, and from the internet "
            "addresses of public_access_cidrs) or private (from the VPC only)"))
    public_access_cidrs: list[AccessCidr] = Field(default=[EVERYONE], min_length=1, description=(
        "Kubernetes, endpoint_access public-and-private: the IPv4 CIDR blocks that may reach the public API "
        "endpoint, such as your office's or VPN's; default everyone (0.0.0.0/0, which validate warns of)"))
    namespace: Text = Field(default="default", description=(
        "Kubernetes: the namespace of the Lustre PersistentVolumeClaim and the Kueue LocalQueue"))

    @model_validator(mode="after")
    def _resolve_version(self) -> "OrchestratorSpec":
        if self.version is None:
            object.__setattr__(self, "version", controlplanes.get(self.type).default_version)
        return self

    @property
    def control_plane(self) -> controlplanes.ControlPlane:
        return controlplanes.get(self.type)


class CapacitySpec(Model):
    """How a node group's instances are bought."""

    type: Literal["on-demand", "reservation", "capacity-block", "spot"] = Field(default="on-demand", description=(
        "on-demand, reservation (an On-Demand Capacity Reservation), capacity-block (a Capacity Block for ML) "
        "or spot"))
    reservation_id: Optional[ReservationId] = Field(default=None, description=(
        "cr-... of an On-Demand Capacity Reservation or Capacity Block"))
    reservation_resource_group_arn: Optional[ResourceGroupArn] = Field(default=None, description=(
        "a resource group of capacity reservations, instead of one reservation_id"))
    training_plan_arn: Optional[TrainingPlanArn] = Field(default=None, description=(
        "HyperPod: reserved capacity from a SageMaker training plan"))
    ultraserver_type: Optional[UltraServerType] = Field(default=None, description=(
        "an UltraServer Capacity Block (or HyperPod training plan): its UltraServer type, such as u-p6e-gb200x72"))
    ultraserver_count: int = Field(default=1, ge=1, description=(
        "how many UltraServers the block holds; the group's count is at most this many UltraServers' instances"))
    end_signal_minutes: int = Field(default=15, ge=12, le=120, description=(
        "Slurm, a Capacity Block (AWS PCS) or a training plan (SageMaker HyperPod): the running jobs are "
        "signalled and the nodes drained this many minutes before the instances start to be terminated "
        "(EC2: 30 minutes before the block's end, 60 for an UltraServer block; SageMaker: 30 minutes before "
        "the end of the plan's reserved capacity); from then on nothing starts that the end would cut. "
        "At least 12: a node acts on the end up to about 3 minutes late (it looks 2 minutes after its last "
        "look ended, and up to a minute more at random), and a job whose first node is gone is signalled by "
        "another from 4 minutes after the signal time, so up to about 7 minutes late (8 where its read of the "
        "end takes the whole minute it may), which leaves it 4 minutes (at the worst 3) to write its "
        "checkpoint. "
        "Spot (AWS PCS) does not use it: there the jobs are signalled and the node drained at EC2's "
        "interruption notice, two minutes before the instance is interrupted. Kubernetes, a Capacity Block "
        "(EKS) or a training plan (HyperPod EKS): this many minutes before the nodes go (EKS: the node group "
        "is scaled to 0 45 minutes before the block's end, 75 for an UltraServer block; SageMaker: as above) "
        "the group's nodes are tainted NoSchedule, Kueue admits nothing more onto its flavor, its workloads "
        "are requeued and the other pods evicted: each pod gets SIGTERM and its terminationGracePeriodSeconds"))
    end_signal: SlurmSignal = Field(default="USR1", description=(
        "Slurm: the signal the jobs get then (on spot, at the interruption notice), as sbatch --signal names "
        "it: USR1 (every job step) or B:USR1 (the batch shell only). Kubernetes does not use it: a pod gets "
        "its container's stop signal (SIGTERM unless the image names another)"))


class NodeGroupSpec(Model):
    """A group of instances of one type: a Slurm partition or a Kubernetes node group, each in a
    nested stack of NAME-cluster with its launch template."""

    name: GroupName = Field(description=(
        "[a-z][a-z0-9-]*, at most 25: the Slurm partition or Kubernetes node-group label"))
    instance_type: InstanceTypeName = Field(description="a type of the instance catalog, such as p5.48xlarge")
    count: Optional[int] = Field(default=None, ge=0, description=(
        "fixed size; or min_count / max_count for an elastic group"))
    min_count: Optional[int] = Field(default=None, ge=0, description="elastic group: the fewest instances")
    max_count: Optional[int] = Field(default=None, ge=0, description="elastic group: the most instances")
    capacity: CapacitySpec = Field(default=CapacitySpec(), description="how the instances are bought")
    placement_group: Text = Field(default="auto", description=(
        "auto (a cluster placement group for on-demand and spot EFA groups; none for Capacity Blocks and "
        "reservations, which are placed already), none, or the name of an existing group"))
    efa: Optional[bool] = Field(default=None, description=(
        "use EFA on this group; default: true where the instance type supports EFA"))
    root_volume_gib: int = Field(default=512, ge=32, le=16384, description="encrypted gp3 root volume, in GiB")
    ami_id: Optional[AmiId] = Field(default=None, description=(
        "an image instead of the control plane's published one"))
    labels: dict[Text, Text] = Field(default={}, description="Kubernetes node labels")
    team: Optional[Text] = Field(default=None, description=(
        "a team of `teams` that has the group to itself: all its GPUs are that team's, and its instances "
        "carry the team's cost allocation tag; default: shared by the teams"))

    @model_validator(mode="after")
    def _resolve_efa(self) -> "NodeGroupSpec":
        if self.efa is None:
            entry = catalog.get(self.instance_type)
            object.__setattr__(self, "efa", bool(entry and entry.efa_supported))
        return self

    @property
    def instance(self) -> catalog.InstanceType:
        return catalog.catalog()[self.instance_type]

    @property
    def min_nodes(self) -> int:
        return self.count if self.count is not None else (self.min_count or 0)

    @property
    def max_nodes(self) -> int:
        if self.count is not None:
            return self.count
        return self.max_count if self.max_count is not None else self.min_nodes

