"""Facts about each control plane that the spec can choose (orchestrator.type).

Static service limits live here (hard limits are spec errors); quotas that can be raised are
account facts for `fmcluster preflight`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fmcluster.efa import InterfaceMode

ON_DEMAND, RESERVATION, CAPACITY_BLOCK, SPOT = "on-demand", "reservation", "capacity-block", "spot"
CAPACITY_TYPES = (ON_DEMAND, RESERVATION, CAPACITY_BLOCK, SPOT)


@dataclass(frozen=True)
class PcsSize:
    name: str
    max_nodes: int
    max_jobs: int


# AWS PCS cluster sizes (PCS User Guide, "Cluster size"): managed instances and jobs.
PCS_SIZES = (PcsSize("SMALL", 32, 256), PcsSize("MEDIUM", 512, 8192), PcsSize("LARGE", 2048, 16384))


def pcs_size_for(nodes: int) -> PcsSize | None:
    """The smallest PCS cluster size that manages `nodes` instances (login nodes included)."""
    return next((size for size in PCS_SIZES if nodes <= size.max_nodes), None)


@dataclass(frozen=True)
class ControlPlane:
    type: str
    scheduler: str  # "slurm" or "kubernetes"
    versions: tuple[str, ...]  # supported, oldest first; the last is the default
    interface_mode: InterfaceMode  # the EFA interface layout its nodes get
    min_availability_zones: int
    capacity_types: tuple[str, ...]
    hyperpod: bool  # instance groups are SageMaker HyperPod ml.* instances
    version_label: str
    pod_addresses_per_node: int = 0  # VPC CNI gives pods addresses from the node's subnet

    @property
    def default_version(self) -> str:
        return self.versions[-1]


CONTROL_PLANES = {
    cp.type: cp
    for cp in (
        ControlPlane("pcs", "slurm", ("24.05", "24.11", "25.05", "25.11"), InterfaceMode.EFA, 1,
                     CAPACITY_TYPES, False, "Slurm version"),
        ControlPlane("hyperpod-slurm", "slurm", ("24.11",), InterfaceMode.EFA, 1,
                     (ON_DEMAND, RESERVATION, CAPACITY_BLOCK), True, "Slurm version"),
        ControlPlane("eks", "kubernetes", ("1.32", "1.33", "1.34", "1.35"), InterfaceMode.EFA_ONLY, 2,
                     CAPACITY_TYPES, False, "Kubernetes version", pod_addresses_per_node=32),
        ControlPlane("hyperpod-eks", "kubernetes", ("1.32", "1.33", "1.34", "1.35"), InterfaceMode.EFA, 2,
                     (ON_DEMAND, RESERVATION, CAPACITY_BLOCK), True, "Kubernetes version",
                     pod_addresses_per_node=32),
    )
}

ORCHESTRATOR_TYPES = tuple(CONTROL_PLANES)


def get(type_: str) -> ControlPlane:
    return CONTROL_PLANES[type_]
