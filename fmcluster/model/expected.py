"""What a healthy cluster measures in the acceptance jobs (`fmcluster jobs`), from the model: the
figures `fmcluster verify` holds each result to. Pure: no AWS call.

Sources and details: docs/research-notes.md, "fmcluster/model/expected.py"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from fmcluster.model.cluster import ClusterModel, NodeGroup

NCCL_OPERATIONS = ("all_reduce", "all_gather", "reduce_scatter")
ACROSS_NODES_RATIOS = (0.85, 0.6)
INSIDE_NODE_RATIOS = (0.8, 0.6)
LUSTRE_RATIOS = (0.8, 0.5)
AWS_MEASURED = ("awslabs/awsome-distributed-ai architectures/aws-pcs/tests/compute-test.md: 2 x p5 ~480 GB/s, "
                "2 x p6-b300 751 GB/s, 4 x p6-b200 377 GB/s (0.94 to 1.2 of the node's EFA bandwidth)")


@dataclass(frozen=True)
class Expected:
    """One figure a test is held to (None: measured, not judged)."""

    test: str  # such as nccl-all_reduce-nodes, nccl-all_reduce-node, fio-fsx, dcgm, smoke
    metric: str  # what is compared, such as "busbw at the largest size"
    unit: str  # GB/s, MB/s
    peak: Optional[float]  # the catalog's or the plan's figure
    basis: str  # where the peak comes from
    pass_ratio: float = 0.0
    warn_ratio: float = 0.0
    ratio_basis: str = ""

    @property
    def pass_at(self) -> Optional[float]:
        return None if self.peak is None else round(self.peak * self.pass_ratio, 3)

    @property
    def warn_at(self) -> Optional[float]:
        return None if self.peak is None else round(self.peak * self.warn_ratio, 3)

    def as_dict(self) -> dict[str, object]:
        return {"test": self.test, "metric": self.metric, "unit": self.unit, "peak": self.peak,
                "pass_at": self.pass_at, "warn_at": self.warn_at, "basis": self.basis,
                "ratio_basis": self.ratio_basis}


def nvlink_per_direction(group: NodeGroup) -> Optional[float]:
    """NVLink GB/s per GPU and direction (the catalog's figure is both directions together); None
    without NVLink or without an NVLink peer (one GPU)."""
    nvlink = group.instance.nvlink_gbps
    return nvlink / 2 if nvlink else None


def nccl_across_nodes(group: NodeGroup, operation: str) -> Expected:
    test = f"nccl-{operation}-nodes"
    metric = "busbw at the largest size, all nodes"
    if group.one_nvlink_domain:
        return Expected(test, metric, "GB/s", nvlink_per_direction(group),
                        f"NVLink per GPU and direction of {group.instance_type} (one UltraServer: the collective "
                        "stays on NVLink)", *INSIDE_NODE_RATIOS, ratio_basis="fmcluster's floor")
    # The node's EFA bandwidth (the catalog's efa_gbps) is EC2's figure for the instance
    # (NetworkPerformance), not its cards' added up: g6e.48xlarge 400 Gbps (50 GB/s), not 4 x 400
    efa = group.instance.efa_gbps / 8 if group.efa else 0.0
    return Expected(test, metric, "GB/s", efa or None,
                    f"EFA bandwidth of {group.instance_type} ({group.instance.efa_gbps:g} Gbps per node)",
                    *ACROSS_NODES_RATIOS, ratio_basis=AWS_MEASURED)


def nccl_inside_node(group: NodeGroup, operation: str) -> Expected:
    peak = nvlink_per_direction(group) if group.gpus > 1 else None
    return Expected(f"nccl-{operation}-node", "busbw at the largest size, one node", "GB/s", peak,
                    f"NVLink per GPU and direction of {group.instance.gpu.name if group.instance.gpu else '-'}"
                    if peak else f"{group.instance_type}: no NVLink figure (PCIe or one GPU)",
                    *INSIDE_NODE_RATIOS, ratio_basis="fmcluster's floor")


def lustre(model: ClusterModel) -> Optional[Expected]:
    spec = model.spec.storage.lustre
    if spec is None:
        return None
    return Expected("fio-fsx", "write and read, every node at once", "MB/s", spec.throughput_mbps,
                    f"aggregate baseline of {spec.storage_capacity_gib:,} GiB at {spec.throughput_per_tib} MB/s/TiB",
                    *LUSTRE_RATIOS, ratio_basis="fmcluster's floor: FSx serves at least its baseline")


def group_expectations(model: ClusterModel, group: NodeGroup) -> dict[str, Expected]:
    """Every figure of one GPU node group's acceptance jobs, by test name."""
    found: dict[str, Expected] = {}
    for operation in NCCL_OPERATIONS:
        found[f"nccl-{operation}-node"] = nccl_inside_node(group, operation)
        if group.max_count > 1:
            found[f"nccl-{operation}-nodes"] = nccl_across_nodes(group, operation)
    fsx = lustre(model)
    if fsx is not None:
        found[fsx.test] = fsx
    if group.instance.nvme_disks:
        found["fio-scratch"] = Expected("fio-scratch", "write and read, each node", "MB/s", None,
                                        "EC2 publishes no instance-store throughput per type")
    found["dcgm"] = Expected("dcgm", "dcgmi diag -r 2", "", None, "DCGM's own verdict per test")
    found["smoke"] = Expected("smoke", "a few FSDP steps on every GPU", "", None,
                              f"finite, falling loss; world size {group.max_count * group.gpus}")
    return found


def gpu_groups(model: ClusterModel) -> tuple[NodeGroup, ...]:
    return tuple(g for g in model.node_groups if g.instance.is_gpu)


def expectations(model: ClusterModel) -> dict[str, dict[str, Expected]]:
    """group name -> test -> figure, for every GPU node group of the cluster."""
    return {g.name: group_expectations(model, g) for g in gpu_groups(model)}
