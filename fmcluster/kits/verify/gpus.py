"""Whether a log ran on a node group's GPUs: the GPU names nccl-tests prints and the PCI device IDs
dcgmi diag prints, held to the catalog's GPU and the group's GPU count. Pure.

Sources and details: docs/research-notes.md, "fmcluster/kits/verify/verdicts.py"."""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING, Iterable

from fmcluster.facts import catalog
from fmcluster.kits.verify.dcgm import DcgmResult
from fmcluster.kits.verify.judging import Verdict
from fmcluster.kits.verify.nccl import NcclResult

if TYPE_CHECKING:
    from fmcluster.model.cluster import NodeGroup


def gpu_named(gpu: catalog.Gpu, name: str) -> bool:
    """Whether a GPU's name as a tool prints it is the catalog's GPU. nccl-tests prints the
    driver's name ("NVIDIA H100 80GB HBM3", "NVIDIA GB200", "NVIDIA B300 SXM6 AC"; older drivers
    without "NVIDIA ": "A100-SXM4-40GB"): the catalog's model must be one of its words (so GB200 is
    not B200, GH200 not H200, H800 not H100), a memory size it states must be the catalog's within
    15% (A100 40GB is not A100 80GB), and a GPU the catalog gives NVLink (SXM) is not a PCIe or NVL
    card of the same model."""
    words = [w for w in re.split(r"[^A-Z0-9]+", name.upper()) if w]
    if gpu.name.upper() not in words:
        return False
    sizes = [int(size) for size in re.findall(r"(?<![0-9])([0-9]+)\s*GB\b", name, re.IGNORECASE)]
    if any(abs(size - gpu.memory_gib) > 0.15 * gpu.memory_gib for size in sizes):
        return False
    return gpu.nvlink_gbps is None or not {"PCIE", "NVL"} & set(words)


def group_gpus(group: NodeGroup) -> str:
    gpu = group.instance.gpu
    model = (gpu.product_name or f"NVIDIA {gpu.name}") if gpu is not None else "no GPU"
    return f"group {group.name} is {group.instance_type}: {group.gpus} x {model}"


def ran_on(per_node: Counter[str], names: Iterable[str]) -> str:
    counts = " or ".join(str(c) for c in sorted(set(per_node.values())))
    return f"{counts} x {' and '.join(dict.fromkeys(names))}" + (
        f" a node, {len(per_node)} nodes" if len(per_node) > 1 else "")


def nccl_gpus(group: NodeGroup, result: NcclResult) -> tuple[Verdict, str]:
    """The GPUs an nccl-tests run names (its `# Rank` lines) held to the group's: (PASS, "") where
    every rank's GPU is the group's and each node ran the group's GPU count, FAIL naming both
    where not, WARN where the output names none."""
    named = [rank for rank in result.ranks if rank.name]
    if not named:
        return Verdict.WARN, "the output names no GPU (no '# Rank' lines): its GPU model and count are not checked"
    per_node = Counter(rank.host for rank in result.ranks)
    gpu = group.instance.gpu
    if gpu is not None and all(gpu_named(gpu, rank.name) for rank in named) \
            and set(per_node.values()) == {group.gpus}:
        return Verdict.PASS, ""
    return Verdict.FAIL, f"log ran on {ran_on(per_node, (rank.name for rank in named))}; {group_gpus(group)}"


def dcgm_gpus(group: NodeGroup, result: DcgmResult) -> tuple[Verdict, str]:
    """The GPUs `dcgmi diag` names (their PCI device IDs) held to the group's, as nccl_gpus."""
    if not result.device_ids:
        return Verdict.WARN, ("the output names no GPU (DCGM 3's JSON lists no device IDs): its GPU model and "
                              "count are not checked")
    gpu = group.instance.gpu
    ids = [int(device, 16) for device in result.device_ids]
    if gpu is not None and all(device in gpu.pci_device_ids for device in ids) and len(ids) == group.gpus:
        return Verdict.PASS, ""

    def name(device: int) -> str:
        known = catalog.gpu_of_pci_device(device)
        return f"{known.product_name} (PCI device {device:04X})" if known else f"PCI device {device:04X}"

    counts = Counter(map(name, ids))
    ran = " and ".join(f"{count} x {model}" for model, count in counts.items())
    return Verdict.FAIL, f"dcgmi diag ran on {ran}; {group_gpus(group)}"
