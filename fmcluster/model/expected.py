"""What a healthy cluster measures in the acceptance jobs (`fmcluster jobs`), from the model: the
figures `fmcluster verify` holds each result to. Pure: no AWS call.

Sources and details: docs/research-notes.md, "fmcluster/model/expected.py"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from fmcluster.facts import fsx

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


# ---- physical limits: above them a figure is impossible -------------------------------------

# A measured figure is held impossible only above its path's physical limit plus this share of
# it. The limits are line rates (NVLink's, EFA's, the file servers' network): what the hardware
# signals, above what a collective or fio can move, so a healthy run stays below them; the
# margin covers what a measurement adds on top of that: nccl-tests' time is one CUDA-event or
# host-clock interval averaged over its iterations and printed to two decimals, fio's bandwidth
# the bytes of a run over its runtime in milliseconds, and datasheets round their figures.
MEASUREMENT_MARGIN = 0.10


@dataclass(frozen=True)
class Ceiling:
    """The most a path can carry: a measured figure above `value` x (1 + MEASUREMENT_MARGIN) is
    impossible on it."""

    value: float  # the physical limit, in the test's unit
    unit: str  # GB/s (nccl-tests' busbw), MB/s (fio)
    path: str  # what carries the traffic: "NVLink", "EFA", "ENA", "the file system", ...
    basis: str  # the figures it comes from and where they are from

    @property
    def above(self) -> float:
        """The figure above which a measurement is impossible: the limit plus the margin."""
        return round(self.value * (1 + MEASUREMENT_MARGIN), 3)

    def exceeded_by(self, measured: Optional[float]) -> bool:
        return measured is not None and measured > self.above

    def describe(self) -> str:
        return (f"{self.value:,.1f} {self.unit}, the most {self.path} can carry ({self.basis}; "
                f"{self.above:,.1f} with the {MEASUREMENT_MARGIN:.0%} margin for measurement)")


# Bus bandwidth (nccl-tests doc/PERFORMANCE.md) is algbw x 2(n-1)/n for all_reduce and algbw x
# (n-1)/n for all_gather and reduce_scatter, n ranks (S: the size nccl-tests prints, t: the time):
# - over links of P GB/s per GPU and direction (NVLink, PCIe): an all_gather GPU receives
#   (n-1)/n x S and a reduce_scatter GPU sends as much, so busbw <= P; an all_reduce GPU must
#   receive every element of the result once and send its share of the others' once (even with
#   the reduction in the NVSwitch, NVLink SHARP), so algbw <= P and busbw <= 2(n-1)/n x P;
# - across N nodes of E GB/s of network each (no reduction in the network: EFA has none), each
#   node must receive (all_gather) or send (reduce_scatter) (N-1)/N x S of the other nodes' data,
#   and an all_reduce moves each element at least 2(N-1) times between nodes (a reduction to one
#   node and back: the fewest one-way messages that share N values), 2(N-1)/N x S a node; each
#   way, busbw <= E x N/(N-1) x (n-1)/n. With the ranks and nodes not known (no rank lines), the
#   bound for any n and N: 2 x P, 2 x E.
def _link_busbw(per_direction: float, operation: str, ranks: int) -> float:
    if operation != "all_reduce":
        return per_direction
    return per_direction * (2 * (ranks - 1) / ranks if ranks >= 2 else 2)


def _network_busbw(per_direction: float, nodes: int, ranks: int) -> float:
    if nodes < 2 or ranks < 2:
        return 2 * per_direction
    return per_direction * nodes / (nodes - 1) * (ranks - 1) / ranks


def gpu_link_ceiling(group: NodeGroup, operation: str, ranks: int) -> Optional[Ceiling]:
    """The busbw the GPUs' own links can carry (NVLink; PCIe where the GPU has no NVLink), `ranks`
    GPUs taking part (0: not known); None without a figure."""
    gpu = group.instance.gpu
    if gpu is None:
        return None
    if group.instance.nvlink_gbps:
        both, path, source = group.instance.nvlink_gbps, "NVLink", "NVIDIA's datasheet"
    elif gpu.pcie_gbps:
        both, path, source = gpu.pcie_gbps, "PCIe", "NVIDIA's datasheet, no NVLink"
    else:
        return None
    per_direction = both / 2
    value = _link_busbw(per_direction, operation, ranks)
    if operation != "all_reduce":
        shape = f"{operation} busbw at most that"
    else:
        shape = "all_reduce busbw at most 2(n-1)/n of it" + (f", n = {ranks}" if ranks >= 2 else ", any n")
    return Ceiling(value, "GB/s", path, f"{group.instance_type}: {gpu.name} at {both:g} GB/s {path} per GPU, "
                   f"{per_direction:g} each way ({source}); {shape}")


def _network_ceiling(group: NodeGroup, path: str, where: str, gbps: float, source: str, nodes: int,
                     ranks: int) -> Ceiling:
    per_direction = gbps / 8
    value = _network_busbw(per_direction, nodes, ranks)
    shape = (f"busbw at most N/(N-1) x (n-1)/n of it, N = {nodes} nodes, n = {ranks} ranks"
             if nodes >= 2 and ranks >= 2 else "busbw at most twice it, any N and n")
    return Ceiling(value, "GB/s", path, f"{group.instance_type}: {path}{where} {gbps:,g} Gbps ({source}), "
                   f"{per_direction:,g} GB/s a node each way; {shape}")


def efa_ceiling(group: NodeGroup, nodes: int, ranks: int) -> Optional[Ceiling]:
    """The busbw EFA can carry across `nodes` nodes of `ranks` GPUs (0: not known): the catalog's
    EFA bandwidth of the node (EC2's NetworkPerformance); None without EFA."""
    if not group.efa:
        return None
    return _network_ceiling(group, "EFA", "", group.instance.efa_gbps, "EC2's NetworkPerformance", nodes, ranks)


def ena_cards(group: NodeGroup) -> tuple[int, ...]:
    """The network cards that carry an ENA interface in the group's layout (fmcluster.facts.efa):
    card 0 only beside `efa-only` EFA interfaces; every EFA card with PCS's `efa` interfaces, which
    carry ENA too."""
    return tuple(sorted({i.network_card_index for i in group.interfaces if i.interface_type in ("interface", "efa")}))


def ena_gbps(group: NodeGroup) -> float:
    """The bandwidth of the cards that carry ENA (`ena_cards`), within the instance's (EC2's
    NetworkPerformance)."""
    cards = ena_cards(group)
    total = sum(card.peak for card in group.instance.network_cards if card.index in cards)
    return min(total, group.instance.network_gbps)


def ena_ceiling(group: NodeGroup, nodes: int, ranks: int) -> Ceiling:
    """The busbw TCP over the group's ENA interfaces can carry across `nodes` nodes: NCCL's
    socket transport, the path when it does not use EFA."""
    cards = ena_cards(group)
    where = f"card {cards[0]}" if len(cards) == 1 else f"{len(cards)} cards"
    return _network_ceiling(group, "ENA", f" on {where}", ena_gbps(group), "EC2's card bandwidth", nodes, ranks)


def nccl_ceiling(group: NodeGroup, test: str, nodes: int, ranks: int) -> Optional[Ceiling]:
    """The physical limit of an nccl-tests figure of `test` (nccl-OPERATION-node or -nodes) on
    `nodes` nodes of `ranks` GPUs (0: not known): the GPUs' links inside a node or an NVLink
    domain (an UltraServer group), the network across nodes (EFA, else ENA), both on an
    UltraServer group larger than one domain. None without a figure."""
    operation = test[len("nccl-"):].rsplit("-", 1)[0]
    link = gpu_link_ceiling(group, operation, ranks)
    if test.endswith("-node") or nodes == 1 or group.one_nvlink_domain:
        return link
    network = efa_ceiling(group, nodes, ranks) or ena_ceiling(group, nodes, ranks)
    if group.ultraserver and link is not None:
        return Ceiling(link.value + network.value, "GB/s", f"NVLink and {network.path} together",
                       f"{link.basis}; plus {network.basis}")
    return network


def node_network_ceiling(group: NodeGroup) -> Ceiling:
    """What one node can send or receive, MB/s: the instance's network (EC2's NetworkPerformance)."""
    gbps = group.instance.network_gbps
    return Ceiling(gbps * 125, "MB/s", f"a {group.instance_type} node's network",
                   f"{gbps:,g} Gbps, EC2's NetworkPerformance")


def lustre_ceiling(model: ClusterModel) -> Optional[Ceiling]:
    """What the FSx for Lustre file system's servers can send or receive, MB/s; None without one."""
    spec = model.spec.storage.lustre
    if spec is None:
        return None
    value = fsx.network_throughput_mbps(spec.storage_capacity_gib, spec.deployment_type, spec.throughput_per_tib)
    per_tib = value / (spec.storage_capacity_gib / 1024)
    return Ceiling(value, "MB/s", "the file system's servers",
                   f"{spec.storage_capacity_gib:,} GiB of {spec.deployment_type} at {per_tib:,.0f} MB/s/TiB of "
                   "network throughput, burst included (FSx for Lustre User Guide)")


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
