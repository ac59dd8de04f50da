"""The one catalog of instance-type facts.

Everything that depends on an instance type (EFA interface layout, validation, NVMe scratch
setup, the plan report, subnet sizing) reads it from here. The figures come from EC2
DescribeInstanceTypes (as shipped in moto's data, which a test holds this table against) and
from the GPU vendors' peak dense tensor throughput figures (docs/spec.md, "Instance catalog").

Nothing here imports aws_cdk or boto3.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING


@dataclass(frozen=True)
class Gpu:
    """One GPU model. Throughput is peak dense tensor PFLOPS per GPU; None where not supported.
    `hbm_tbps` is its memory bandwidth, of the memory `memory_type` names (GDDR6 on the L40S)."""

    name: str
    memory_gib: float
    hbm_tbps: float
    bf16_pflops: float
    fp8_pflops: float | None
    fp4_pflops: float | None = None
    # NVLink bandwidth per GPU, GB/s both directions together (NVIDIA's datasheet figure); None:
    # no NVLink (PCIe only)
    nvlink_gbps: float | None = None
    memory_type: str = "HBM"  # the kind of GPU memory: HBM, or GDDR6
    # The name the NVIDIA driver gives the GPU (what CUDA's device name, so nccl-tests' `# Rank`
    # lines, prints) and its PCI device IDs (what `dcgmi diag` lists as its "GPU Device IDs")
    product_name: str = ""
    pci_device_ids: tuple[int, ...] = ()
    # PCIe bandwidth per GPU, GB/s both directions together (NVIDIA's datasheet), for a GPU whose
    # peers in the instance are reached over PCIe only (no NVLink); None otherwise
    pcie_gbps: float | None = None


@dataclass(frozen=True)
class NetworkCard:
    """One network card as DescribeInstanceTypes gives it (NetworkInfo.NetworkCards[]). A card's
    bandwidth is its own limit: EC2's figures for the cards of a type do not add up to the
    instance's (g6e.48xlarge: 4 cards of 400 Gbps, 400 Gbps for the instance; p6-b200.48xlarge: 8 of
    200, 3,200 for the instance). The instance's is `InstanceType.network_performance`."""

    index: int  # the card's number
    bandwidth_gbps: float  # BaselineBandwidthInGbps
    efa: bool  # the card can carry an EFA (efa or efa-only) interface
    peak_gbps: float | None = None  # PeakBandwidthInGbps where above the baseline ("Up to" types); None: the baseline
    max_interfaces: int | None = None  # MaximumNetworkInterfaces of the card; None: not published
    # The card carries EFA-only interfaces and nothing else: no ENA, so no `efa` interface (EFA
    # with ENA) and no plain one (p6e-gb200's odd cards; DescribeInstanceTypes does not say it)
    efa_only: bool = False

    @property
    def peak(self) -> float:
        return self.bandwidth_gbps if self.peak_gbps is None else self.peak_gbps


@dataclass(frozen=True)
class VcpuQuota:
    """An EC2 quota on the vCPUs of the running instances of a group of families, one per market
    (Service Quotas, service code ec2): each is a (quota code, quota name)."""

    label: str  # the group, as preflight names its checks ("quota On-Demand P vCPUs")
    on_demand: tuple[str, str]
    spot: tuple[str, str]


# The codes and names Service Quotas gives these quotas (`aws service-quotas list-service-quotas
# --service-code ec2`; the AWS CLI User Guide's Service Quotas examples show L-1216C47A with its
# name, and public quota checkers list the P, G and VT codes of both markets beside these names).
P_VCPUS = VcpuQuota("P", ("L-417A185B", "Running On-Demand P instances"),
                    ("L-7212CCBC", "All P Spot Instance Requests"))
G_VCPUS = VcpuQuota("G and VT", ("L-DB2E81BA", "Running On-Demand G and VT instances"),
                    ("L-3819A6DF", "All G and VT Spot Instance Requests"))
STANDARD_VCPUS = VcpuQuota("Standard",
                           ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
                           ("L-34B43A08", "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"))


@dataclass(frozen=True)
class InstanceType:
    name: str
    vcpus: int
    memory_gib: int
    network_cards: tuple[NetworkCard, ...]
    # The instance's network bandwidth in EC2's words (NetworkInfo.NetworkPerformance: "400 Gigabit",
    # "4x 100 Gigabit", "Up to 12.5 Gigabit"); not the sum of its cards' figures
    network_performance: str = ""
    max_efa_interfaces: int = 0
    efa_generation: int | None = None
    gpu: Gpu | None = None
    gpu_count: int = 0
    nvme_disks: int = 0
    nvme_disk_gb: int = 0
    capacity_block: bool = False  # offered as Capacity Blocks for ML
    hyperpod: bool = False  # offered by SageMaker HyperPod as ml.<name>
    # EFA devices LNet uses to reach an EFA-enabled FSx for Lustre file system (the Amazon EKS
    # User Guide, "Optimize Amazon FSx for Lustre performance on nodes (EFA)", as the FSx guide's
    # client set-up does: 8 of the 32 on p5.48xlarge and p5e.48xlarge, one per PCIe switch; 2 on
    # other types with several EFA devices, 1 with one). 0: no EFA.
    lnet_efa_interfaces: int = 0
    architecture: str = "x86_64"  # of its processors, as DescribeImages names an AMI's (x86_64, arm64)
    # GPUDirect RDMA over EFA (FI_EFA_USE_DEVICE_RDMA=1): EFA reads and writes GPU memory directly.
    # p4d/p4de (EFA generation 1 with RDMA read: AWS's SageMaker SDK, SM_EFA_RDMA_INSTANCES) and the
    # generation-2-and-later P5 and P6 types; not the L40S types.
    device_rdma: bool = False
    # The network cards that get an EFA interface where AWS recommends a layout other than "one
    # per EFA card" (p6e-gb200: one card of each pair that shares a physical NIC and a GPU); ()
    # for every EFA card, up to max_efa_interfaces
    efa_cards: tuple[int, ...] = ()
    # The UltraServers the type is sold in (an NVLink domain of several instances each); () for a
    # type whose NVLink domain is the instance
    ultraservers: tuple[str, ...] = ()
    # The layers of the EC2 network its instances report (DescribeInstanceTopology's network nodes,
    # top first; on EKS and SageMaker HyperPod EKS the node labels
    # topology.k8s.aws/network-node-layer-1 .. -N): the EC2 User Guide, "Prerequisites for Amazon
    # EC2 topology", Instance types: 4 for p6-b200.48xlarge and p6-b300.48xlarge; 3 for g6e.*,
    # p4d, p4de, p5.48xlarge, p5e.48xlarge, p5en.48xlarge, p6e-gb200.36xlarge (and hpc, trn types).
    # 0: not a supported type (no topology; p5.4xlarge and the CPU types here).
    network_layers: int = 0
    # The EC2 vCPU quota its On-Demand and Spot instances count against (preflight's quota checks)
    vcpu_quota: VcpuQuota = field(kw_only=True)

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def efa_supported(self) -> bool:
        return self.max_efa_interfaces > 0

    @property
    def card0_efa(self) -> bool:
        """Card 0 carries EFA exactly when every network card can (docs/spec.md, "Instance catalog")."""
        return self.efa_supported and self.max_efa_interfaces == len(self.network_cards)

    @property
    def network_gbps(self) -> float:
        """The instance's network bandwidth, Gbps: EC2's NetworkPerformance figure ("Up to" types: the
        burst figure, their cards' baseline is lower)."""
        match = _PERFORMANCE.fullmatch(self.network_performance)
        if match is None:
            raise ValueError(f"{self.name}: no NetworkPerformance figure ({self.network_performance!r})")
        return int(match["times"] or 1) * float(match["gbps"])

    @property
    def efa_layout_cards(self) -> tuple[NetworkCard, ...]:
        """The cards an EFA layout uses: the recommended ones, else every EFA card up to the maximum."""
        cards = [c for c in self.network_cards if c.efa and (not self.efa_cards or c.index in self.efa_cards)]
        return tuple(cards[: self.max_efa_interfaces])

    @property
    def efa_gbps(self) -> float:
        """The node's EFA bandwidth, Gbps: the instance's (NetworkPerformance), which EC2 gives for
        its EFA cards (p6-b300: 6,400 Gigabit, the 16 EFA cards of 400 Gbps without the ENA-only card
        0). Where AWS recommends EFA on some of the cards only (`efa_cards`, p6e-gb200), those cards'
        bandwidth, within the instance's. The cards' own figures are not added up otherwise: they do
        not sum to the instance's (see NetworkCard). 0 without EFA."""
        if not self.efa_supported:
            return 0.0
        if self.efa_cards:
            return min(self.network_gbps, float(sum(card.bandwidth_gbps for card in self.efa_layout_cards)))
        return self.network_gbps

    @property
    def nvme_total_gb(self) -> int:
        return self.nvme_disks * self.nvme_disk_gb

    @property
    def is_gpu(self) -> bool:
        return self.gpu_count > 0

    @property
    def nvlink_gbps(self) -> float | None:
        """NVLink per GPU to the GPUs it reaches over NVLink, GB/s both directions; None where the GPU
        has no NVLink, or has no peer (one GPU in the instance and no UltraServer: p5.4xlarge)."""
        gpu = self.gpu
        if gpu is None or gpu.nvlink_gbps is None or (self.gpu_count < 2 and not self.ultraservers):
            return None
        return gpu.nvlink_gbps

    @property
    def ultraserver(self) -> bool:
        return bool(self.ultraservers)


# GPU memory as DescribeInstanceTypes gives it (GpuInfo.Gpus[].MemoryInfo.SizeInMiB / 1024, to 0.1
# GiB; moto's data): H100 81,920 MiB, H200 144,384, B200 183,359, B300 275,040.
# NVLink per GPU (NVIDIA datasheets): NVLink 3 (A100 SXM4) 600 GB/s, NVLink 4 (H100/H200 SXM) 900 GB/s,
# NVLink 5 (Blackwell) 1,800 GB/s; the L40S has none.
# Product names and PCI device IDs: NVIDIA's open-gpu-kernel-modules README, "Compatible GPUs"
# (driver 595.45.04; the names nvidia-smi and CUDA give the GPUs): NVIDIA A100-SXM4-40GB 20B0,
# NVIDIA A100-SXM4-80GB 20B2, NVIDIA H100 80GB HBM3 2330, NVIDIA H200 2335, NVIDIA L40S 26B9,
# NVIDIA B200 2901, NVIDIA GB200 2941, NVIDIA B300 SXM6 AC 3182.
H100 = Gpu("H100", memory_gib=80, hbm_tbps=3.35, bf16_pflops=0.9895, fp8_pflops=1.979, nvlink_gbps=900,
           product_name="NVIDIA H100 80GB HBM3", pci_device_ids=(0x2330,))
H200 = Gpu("H200", memory_gib=141, hbm_tbps=4.8, bf16_pflops=0.9895, fp8_pflops=1.979, nvlink_gbps=900,
           product_name="NVIDIA H200", pci_device_ids=(0x2335,))
B200 = Gpu("B200", memory_gib=179.1, hbm_tbps=8.0, bf16_pflops=2.25, fp8_pflops=4.5, fp4_pflops=9.0, nvlink_gbps=1800,
           product_name="NVIDIA B200", pci_device_ids=(0x2901,))
B300 = Gpu("B300", memory_gib=268.6, hbm_tbps=8.0, bf16_pflops=2.25, fp8_pflops=4.5, fp4_pflops=13.5,
           nvlink_gbps=1800, product_name="NVIDIA B300 SXM6 AC", pci_device_ids=(0x3182,))
# The Blackwell GPU of a GB200 superchip: 185 GiB (EC2 instance-type specifications, p6e-gb200);
# dense BF16 2.5, FP8 5 and FP4 10 PFLOPS, derived from NVIDIA's GB200 NVL72 rack figures (360,
# 720 and 1,440 PFLOPS with sparsity, for 72 GPUs) halved for dense; HBM3e 8 TB/s; NVLink 5. Not
# in moto's data (docs/research-notes.md 9a, 9e).
GB200 = Gpu("GB200", memory_gib=185, hbm_tbps=8.0, bf16_pflops=2.5, fp8_pflops=5.0, fp4_pflops=10.0,
            nvlink_gbps=1800, product_name="NVIDIA GB200", pci_device_ids=(0x2941,))
# NVIDIA A100 datasheet (SXM4): BF16 tensor 312 TFLOPS dense (624 with sparsity), no FP8; HBM2 at
# 1,555 GB/s (40 GB) and HBM2e at 2,039 GB/s (80 GB). Memory as EC2 reports it (moto's data).
A100_40 = Gpu("A100", memory_gib=40, hbm_tbps=1.555, bf16_pflops=0.312, fp8_pflops=None, nvlink_gbps=600,
              product_name="NVIDIA A100-SXM4-40GB", pci_device_ids=(0x20B0,))
A100_80 = Gpu("A100", memory_gib=80, hbm_tbps=2.039, bf16_pflops=0.312, fp8_pflops=None, nvlink_gbps=600,
              product_name="NVIDIA A100-SXM4-80GB", pci_device_ids=(0x20B2,))
# NVIDIA L40S datasheet: BF16 tensor 362.05 TFLOPS dense (733 with sparsity), FP8 733 dense (1,466
# with sparsity), 48 GB GDDR6 at 864 GB/s, interconnect "PCIe Gen4 x16: 64GB/s bidirectional"; EC2
# reports 45,776 MiB.
L40S = Gpu("L40S", memory_gib=44.7, hbm_tbps=0.864, bf16_pflops=0.36205, fp8_pflops=0.733, memory_type="GDDR6",
           product_name="NVIDIA L40S", pci_device_ids=(0x26B9,), pcie_gbps=64)

GPUS = (H100, H200, B200, B300, GB200, A100_40, A100_80, L40S)


def gpu_of_pci_device(device_id: int) -> Gpu | None:
    """The catalog's GPU of a PCI device ID (0x2330: the H100), None for a GPU it does not know."""
    return next((gpu for gpu in GPUS if device_id in gpu.pci_device_ids), None)


def _cards(count: int, gbps: float, *, interfaces: int | None, peak: float | None = None,
           first_gbps: float | None = None, first_efa: bool = True, efa: bool = True) -> tuple[NetworkCard, ...]:
    """`count` cards of `gbps` baseline (`peak`: burst) and `interfaces` interfaces each; card 0
    may differ in bandwidth (`first_gbps`) and in carrying EFA."""
    cards = [NetworkCard(i, gbps, efa, peak, interfaces) for i in range(count)]
    if first_gbps is not None or not first_efa:
        cards[0] = NetworkCard(0, first_gbps if first_gbps is not None else gbps, efa and first_efa, peak, interfaces)
    return tuple(cards)


# NetworkPerformance: "[Up to ][Nx ]G Gigabit"
_PERFORMANCE = re.compile(r"(?:Up to )?(?:(?P<times>\d+)x )?(?P<gbps>\d+(?:\.\d+)?) Gigabit")


def _performance(gbps: float, peak: float | None = None) -> str:
    """NetworkPerformance of a one-card type: "Up to PEAK Gigabit" where the card bursts, else its figure."""
    return f"Up to {peak:g} Gigabit" if peak is not None and peak > gbps else f"{gbps:g} Gigabit"


if TYPE_CHECKING:
    from typing import TypedDict

    class _Shared(TypedDict):
        """What the 8-GPU 48xlarge types share (keywords of InstanceType)."""

        vcpus: int
        nvme_disks: int
        nvme_disk_gb: int
        capacity_block: bool
        hyperpod: bool
        gpu_count: int
        lnet_efa_interfaces: int
        device_rdma: bool
        vcpu_quota: VcpuQuota


def _gpu_types() -> list[InstanceType]:
    big: _Shared = {"vcpus": 192, "nvme_disks": 8, "nvme_disk_gb": 3800, "capacity_block": True, "hyperpod": True,
                    "gpu_count": 8, "lnet_efa_interfaces": 2, "device_rdma": True, "vcpu_quota": P_VCPUS}
    per_pcie_switch: _Shared = {**big, "lnet_efa_interfaces": 8}
    # Network figures as DescribeInstanceTypes gives them (moto's data): cards x baseline Gbps (no
    # burst), interfaces per card, NetworkPerformance. p6-b200's 8 cards are 200 Gbps each (EC2's
    # figure; the instance's 3,200), p6-b300's card 0 350 Gbps and ENA only, the instance 6,400.
    return [
        InstanceType("p5.4xlarge", vcpus=16, memory_gib=256, network_cards=_cards(1, 100, interfaces=4),
                     network_performance="100 Gigabit", max_efa_interfaces=1, efa_generation=2, gpu=H100,
                     gpu_count=1, nvme_disks=1, nvme_disk_gb=3800, capacity_block=True, hyperpod=True,
                     lnet_efa_interfaces=1, device_rdma=True, vcpu_quota=P_VCPUS),
        InstanceType("p5.48xlarge", memory_gib=2048, network_cards=_cards(32, 100, interfaces=2),
                     network_performance="3200 Gigabit", max_efa_interfaces=32, efa_generation=2, gpu=H100,
                     network_layers=3, **per_pcie_switch),
        InstanceType("p5e.48xlarge", memory_gib=2048, network_cards=_cards(32, 100, interfaces=2),
                     network_performance="3200 Gigabit", max_efa_interfaces=32, efa_generation=2, gpu=H200,
                     network_layers=3, **per_pcie_switch),
        InstanceType("p5en.48xlarge", memory_gib=2048, network_cards=_cards(16, 200, interfaces=4),
                     network_performance="3200 Gigabit", max_efa_interfaces=16, efa_generation=3, gpu=H200,
                     network_layers=3, **big),
        InstanceType("p6-b200.48xlarge", memory_gib=2048, network_cards=_cards(8, 200, interfaces=4),
                     network_performance="3200 Gigabit", max_efa_interfaces=8, efa_generation=4, gpu=B200,
                     network_layers=4, **big),
        InstanceType("p6-b300.48xlarge", memory_gib=4096,
                     network_cards=_cards(17, 400, interfaces=4, first_gbps=350, first_efa=False),
                     network_performance="6400 Gigabit", max_efa_interfaces=16, efa_generation=4, gpu=B300,
                     network_layers=4, **big),
        # A100: 4 x 100 Gbps cards of 15 interfaces, each with EFA (generation 1), "4x 100 Gigabit",
        # 8 x 1,000 GB NVMe
        *(InstanceType(name, vcpus=96, memory_gib=1152, network_cards=_cards(4, 100, interfaces=15),
                       network_performance="4x 100 Gigabit", max_efa_interfaces=4,
                       efa_generation=1, gpu=gpu, gpu_count=8, nvme_disks=8, nvme_disk_gb=1000,
                       capacity_block=True, hyperpod=True, lnet_efa_interfaces=2, device_rdma=True,
                       network_layers=3, vcpu_quota=P_VCPUS)
          for name, gpu in (("p4d.24xlarge", A100_40), ("p4de.24xlarge", A100_80))),
        *_g6e_types(),
        _p6e_gb200(),
    ]


@dataclass(frozen=True)
class UltraServer:
    """An UltraServer: instances of one type in one NVLink domain, sold as UltraServer Capacity
    Blocks (EC2 User Guide, Capacity Blocks; the EKS User Guide, "Use P6e-GB200 UltraServers")."""

    name: str  # as DescribeCapacityBlocks' UltraserverType and the Capacity Block offerings name it
    instance_type: str
    instances: int

    @property
    def gpus(self) -> int:
        return self.instances * catalog()[self.instance_type].gpu_count


ULTRASERVERS = {u.name: u for u in (UltraServer("u-p6e-gb200x36", "p6e-gb200.36xlarge", 9),
                                      UltraServer("u-p6e-gb200x72", "p6e-gb200.36xlarge", 18))}


def _p6e_gb200() -> InstanceType:
    """p6e-gb200.36xlarge, the instance of the P6e-GB200 UltraServers. Not in moto's data yet
    (tests/facts/test_catalog.py holds it to moto's as soon as moto has it): every figure is from the EC2
    documentation. The instance-type specifications: 144 vCPUs, 960 GiB, 4 x GB200 at 185 GiB,
    NVIDIA Grace (arm64), 3 x 7,500 GB NVMe, Capacity Blocks. The EC2 User Guide, "EFA configuration
    for P6e-GB200 instances": 17 network cards; card 0 ENA only, 100 Gbps; cards 1, 3, ..., 15
    EFA-only at 400 Gbps; cards 2, 4, ..., 16 ENA or EFA at 200 Gbps; pairs [1, 2] ... [15, 16]
    share a 400 Gbps NIC and pairs [1, 3], [5, 7], [9, 11], [13, 15] a GPU, so AWS recommends one
    EFA-only interface per GPU, on cards 1, 5, 9 and 13 (4 x 400 = 1,600 Gbps of EFA).
    MaximumEfaInterfaces is not published: 16, the cards that can carry EFA. The cards' interface
    counts (MaximumNetworkInterfaces) are 1 on the odd cards and 2 on the even ones, card 0
    included, as AWS ParallelCluster reads them from DescribeInstanceTypes (aws/aws-parallelcluster
    PR #6930, "Change network interface setup logic to account for gb200", 2025-08: odd cards take
    an efa-only interface only, at device index 0; even cards efa, at device index 1). The
    instance's network bandwidth: "3200 Gigabit" (the instance-type specifications,
    https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html; docs/research-notes.md 9a); the
    recommended layout's EFA is half of it, as AWS's Machine Learning blog counts it ("Train and
    deploy AI models at trillion-parameter scale with Amazon SageMaker HyperPod support for
    P6e-GB200 UltraServers", 2025-08: 28.8 Tbps of EFAv4 for the 18 instances of a u-p6e-gb200x72).
    SageMaker HyperPod offers ml.p6e-gb200.36xlarge. FSx for Lustre's EFA client set-up does not
    list it: LNet uses TCP."""
    def card(i: int) -> NetworkCard:
        if i % 2:  # EFA-only, 400 Gbps, one interface
            return NetworkCard(i, 400, True, max_interfaces=1, efa_only=True)
        return NetworkCard(i, 200, True, max_interfaces=2)

    cards = (NetworkCard(0, 100, False, max_interfaces=2),) + tuple(card(i) for i in range(1, 17))
    return InstanceType("p6e-gb200.36xlarge", vcpus=144, memory_gib=960, network_cards=cards,
                        network_performance="3200 Gigabit", max_efa_interfaces=16,
                        efa_generation=4, gpu=GB200, gpu_count=4, nvme_disks=3, nvme_disk_gb=7500,
                        capacity_block=True, hyperpod=True, architecture="arm64", device_rdma=True,
                        efa_cards=(1, 5, 9, 13), ultraservers=("u-p6e-gb200x36", "u-p6e-gb200x72"),
                        network_layers=3, vcpu_quota=P_VCPUS)


# g6e (L40S), inference: (size, vCPUs, GiB, GPUs, network cards, baseline and peak Gbps per card,
# interfaces per card, NetworkPerformance, EFA interfaces, NVMe disks, GB per disk), as
# DescribeInstanceTypes gives them (moto's data). The instance's bandwidth is NetworkPerformance,
# not cards x Gbps: 24xlarge 200 Gbps (2 cards of 200), 48xlarge 400 Gbps (4 cards of 400). EFA on
# 8xlarge and up; no Capacity Blocks; SageMaker HyperPod offers every size (ml.g6e.*).
_G6E = (
    ("xlarge", 4, 32, 1, 1, 2.5, 20.0, 4, "Up to 20 Gigabit", 0, 1, 250),
    ("2xlarge", 8, 64, 1, 1, 5.0, 20.0, 4, "Up to 20 Gigabit", 0, 1, 450),
    ("4xlarge", 16, 128, 1, 1, 20.0, 20.0, 8, "20 Gigabit", 0, 1, 600),
    ("8xlarge", 32, 256, 1, 1, 25.0, 25.0, 8, "25 Gigabit", 1, 2, 450),
    ("12xlarge", 48, 384, 4, 1, 100.0, 100.0, 10, "100 Gigabit", 1, 2, 1900),
    ("16xlarge", 64, 512, 1, 1, 35.0, 35.0, 15, "35 Gigabit", 1, 2, 950),
    ("24xlarge", 96, 768, 4, 2, 200.0, 200.0, 10, "200 Gigabit", 2, 2, 1900),
    ("48xlarge", 192, 1536, 8, 4, 400.0, 400.0, 10, "400 Gigabit", 4, 4, 1900),
)


def _g6e_types() -> list[InstanceType]:
    return [InstanceType(f"g6e.{size}", vcpus=vcpus, memory_gib=gib,
                         network_cards=_cards(cards, gbps, interfaces=interfaces, peak=peak if peak > gbps else None,
                                              efa=efa > 0),
                         network_performance=performance, max_efa_interfaces=efa, gpu=L40S, gpu_count=gpus,
                         nvme_disks=disks, nvme_disk_gb=disk_gb, hyperpod=True, lnet_efa_interfaces=min(efa, 2),
                         network_layers=3, vcpu_quota=G_VCPUS)
            for size, vcpus, gib, gpus, cards, gbps, peak, interfaces, performance, efa, disks, disk_gb in _G6E]


# CPU families a login, controller or CPU node group commonly uses. Sizes share one shape, as
# DescribeInstanceTypes gives it (moto's data): (size, vCPUs, the one card's baseline Gbps, its
# interfaces); sizes to 4xlarge burst to 12.5 Gbps ("Up to 12.5 Gigabit"). Memory is vCPUs x the
# family's GiB per vCPU. The 48xlarge sizes support one EFA interface.
_CPU_SIZES = (
    ("large", 2, 0.781, 3), ("xlarge", 4, 1.562, 4), ("2xlarge", 8, 3.125, 4), ("4xlarge", 16, 6.25, 8),
    ("8xlarge", 32, 12.5, 8), ("12xlarge", 48, 18.75, 8), ("16xlarge", 64, 25.0, 15),
    ("24xlarge", 96, 37.5, 15), ("48xlarge", 192, 50.0, 15),
)
_CPU_BURST_GBPS = 12.5
_CPU_FAMILIES = {"c7i": 2, "m7i": 4, "r7i": 8, "c7a": 2, "m7a": 4}  # GiB per vCPU
_HYPERPOD_CPU_FAMILIES = ("m7i", "r7i")  # SageMaker HyperPod offers ml.m7i.* and ml.r7i.*, not ml.c7i.*
_CPU_EXTRA_SIZES = {"c7a": (("32xlarge", 128, 50.0, 15),), "m7a": (("32xlarge", 128, 50.0, 15),)}


def _cpu_types() -> list[InstanceType]:
    types = []
    for family, gib_per_vcpu in _CPU_FAMILIES.items():
        for size, vcpus, gbps, interfaces in _CPU_SIZES + _CPU_EXTRA_SIZES.get(family, ()):
            efa = size == "48xlarge"
            peak = _CPU_BURST_GBPS if gbps < _CPU_BURST_GBPS else None
            types.append(InstanceType(
                f"{family}.{size}", vcpus=vcpus, memory_gib=vcpus * gib_per_vcpu,
                network_cards=_cards(1, gbps, interfaces=interfaces, peak=peak, efa=efa),
                network_performance=_performance(gbps, peak), max_efa_interfaces=1 if efa else 0,
                lnet_efa_interfaces=1 if efa else 0,
                hyperpod=family in _HYPERPOD_CPU_FAMILIES, vcpu_quota=STANDARD_VCPUS,
            ))
    return types


@cache
def catalog() -> dict[str, InstanceType]:
    return {t.name: t for t in _gpu_types() + _cpu_types()}


def get(name: str) -> InstanceType | None:
    return catalog().get(name)


def known_names(gpu_only: bool = False) -> list[str]:
    return [t.name for t in catalog().values() if t.is_gpu or not gpu_only]


def describe_known() -> str:
    """A short list of what the catalog knows, for error hints."""
    families = sorted({t.family for t in catalog().values() if not t.is_gpu})
    return ("GPU types: " + ", ".join(known_names(gpu_only=True))
            + "; CPU families " + ", ".join(families) + " (large to 48xlarge)")


def closest(name: str) -> str | None:
    import difflib  # only for an unknown name

    matches = difflib.get_close_matches(name, list(catalog()), n=1, cutoff=0.6)
    return matches[0] if matches else None
