"""The rows and lines of the plan's node groups that the text and markdown renderings lay out:
the compute table (a column per node group) and the serving tables."""

from __future__ import annotations

from typing import Callable

from fmcluster.plan.figures import count_range, gbps, gbytes, num
from fmcluster.plan.shape.nodes import NodeGroupPlan, Resources, ServingFit
from fmcluster.plan.shape.plan import Plan
from fmcluster.text.table import Table


def _gpu_cells(r: Resources, gpu: str | None, memory: str | None) -> list[str]:
    if not r.gpus:
        return ["-"] * 6
    fp8 = num(r.fp8_pflops) if r.fp8_pflops is not None else "-"
    fp4 = num(r.fp4_pflops) if r.fp4_pflops is not None else "-"
    return [f"{r.gpus} x {gpu}" if gpu else str(r.gpus), num(r.bf16_pflops), fp8, fp4,
            f"{num(r.hbm_gib, 0)} GiB" + (f" {memory}" if memory else ""), f"{num(r.hbm_tbps, 1)} TB/s"]


def no_nvlink(g: NodeGroupPlan) -> str:
    """Why a GPU group has no NVLink domain: one GPU a node (p5.4xlarge), or GPUs on PCIe (L40S)."""
    return "one GPU" if g.per_node.gpus == 1 else "PCIe"


def nvlink_domain_cell(g: NodeGroupPlan) -> str:
    """What one NVLink domain of the group is: 'u-p6e-gb200x72: 18 instances, 72 GPUs, ...'."""
    d = g.nvlink_domain
    if d is None:
        return f"none ({no_nvlink(g)})" if g.gpu else "-"
    what = f"{d.ultraserver_type}: {d.instances} instances" if d.ultraserver_type else "1 instance"
    return f"{what}, {d.gpus} GPUs, {gbytes(d.nvlink_gbps_per_gpu)} per GPU, {num(d.domain_nvlink_tbps, 1)} TB/s"


def nvlink_domains_cell(g: NodeGroupPlan) -> str:
    """How many domains the group spans at its maximum: '16', '2 x u-p6e-gb200x36',
    '1 x u-p6e-gb200x72: 1 with 17 of 18 instances'."""
    d = g.nvlink_domain
    if d is None:
        return "-"
    if d.ultraserver_type is None:
        return num(d.domains, 0)
    servers = d.ultraservers or d.domains
    parts = [f"{d.whole_domains} whole"] if d.whole_domains else []
    if d.partial_domain_instances:
        parts.append(f"1 with {d.partial_domain_instances} of {d.instances} instances")
    if servers > d.domains:
        parts.append(f"{servers - d.domains} unused")
    text = f"{servers} x {d.ultraserver_type}"
    return text if parts == [f"{servers} whole"] else f"{text}: {', '.join(parts)}"


def _efa_cell(r: Resources, kind: str | None) -> str:
    if not r.efa_interfaces:
        return "none"
    if kind:
        return f"{r.efa_interfaces} x {kind}, {gbps(r.efa_gbps)}"
    return f"{r.efa_interfaces} interfaces, {gbps(r.efa_gbps)}"


INTERFACE_NAMES = {"interface": "ENA", "efa": "efa", "efa-only": "efa-only"}  # by InterfaceType


def _addresses(count: int) -> str:
    return f"{num(count, 0)} IP address{'' if count == 1 else 'es'}"


def interfaces_cell(g: NodeGroupPlan) -> str:
    """A node's network interfaces by type, primary first, and the IP addresses they take."""
    kinds: dict[str, int] = {}
    for interface in g.interfaces:
        name = INTERFACE_NAMES[interface.interface_type]
        kinds[name] = kinds.get(name, 0) + 1
    return f"{' + '.join(f'{n} {name}' for name, n in kinds.items())}, {_addresses(g.interface_addresses)}"


def _interfaces_total(plan: Plan) -> str:
    return _addresses(sum(g.interface_addresses * g.max_count for g in plan.node_groups))


def compute_rows(plan: Plan) -> Table:
    """Rows of metrics, a column per node group (per node and at its maximum) and the cluster total."""
    header = ["", *[f"{g.name} (per node)" for g in plan.node_groups], "total at max"]
    groups = plan.node_groups

    def row(label: str, per: Callable[[NodeGroupPlan], str], total: str) -> list[str]:
        return [label, *map(per, groups), total]

    gpu_names = {g.gpu for g in groups if g.gpu}
    memories = {g.gpu_memory for g in groups if g.gpu_memory}
    total_gpu = _gpu_cells(plan.total, gpu_names.pop() if len(gpu_names) == 1 else None,
                           memories.pop() if len(memories) == 1 else None)
    labels = ["GPUs", "BF16 PFLOPS", "FP8 PFLOPS", "FP4 PFLOPS", "GPU memory", "GPU memory bandwidth"]
    rows = [header,
            row("instances", lambda g: f"{count_range(g.min_count, g.max_count)} x {g.instance_type}",
                num(plan.total.instances, 0)),
            row("vCPUs", lambda g: num(g.per_node.vcpus, 0), num(plan.total.vcpus, 0))]
    for i, label in enumerate(labels):
        def gpu_cell(g: NodeGroupPlan, i: int = i) -> str:
            return _gpu_cells(g.per_node, g.gpu, g.gpu_memory)[i]

        rows.append(row(label, gpu_cell, total_gpu[i]))
    largest = plan.largest_nvlink_domain_gpus
    rows += [
        row("NVLink domain", nvlink_domain_cell, f"largest {largest} GPUs" if largest else "none"),
        row("NVLink domains", nvlink_domains_cell, num(plan.nvlink_domains, 0)),
        row("NVLink bandwidth", lambda g: f"{num(g.per_node.nvlink_tbps, 1)} TB/s" if g.nvlink_domain else "-",
            f"{num(plan.total.nvlink_tbps, 1)} TB/s" if plan.total.nvlink_tbps else "-"),
        row("EFA", lambda g: _efa_cell(g.per_node, g.interface_type), _efa_cell(plan.total, None)),
        row("interfaces", interfaces_cell, _interfaces_total(plan)),
        row("local NVMe", lambda g: f"{g.nvme_disks} x {num(g.per_node.nvme_tb / max(g.nvme_disks, 1), 2)} TB"
            if g.nvme_disks else "none", f"{num(plan.total.nvme_tb, 1)} TB"),
        row("capacity", lambda g: g.capacity_type, ""),
        row("reservation", lambda g: g.reservation_id or g.reservation_resource_group_arn or g.training_plan_arn
            or "-", ""),
        row("placement", lambda g: g.placement, ""),
        row("volume", lambda g: g.volume, ""),
    ]
    if any(g.window for g in groups):  # plan --preflight: as preflight read the reservations
        rows.append(row("window", lambda g: g.window or "-", ""))
    if any(g.scaling for g in groups):
        rows.append(row("scaling", lambda g: g.scaling or "fixed by its counts", ""))
    return rows


def serving_note(plan: Plan) -> str:
    """The rule the serving tables follow, in a line."""
    share, floor = plan.serving_gpu_memory_utilization, plan.serving_kv_cache_floor
    return (f"vLLM at --gpu-memory-utilization {share:g}; a replica fits where its weights leave at least "
            f"{floor:.0%} of its GPU memory (fmcluster's KV-cache floor): weights <= {share - floor:.0%} of it")


def serving_group_line(g: NodeGroupPlan) -> str:
    gpu = g.gpu or "GPU"
    memory = num(g.per_node.hbm_gib / max(g.per_node.gpus, 1), 1)
    return f"{g.name}: {count_range(g.min_count, g.max_count)} x {g.instance_type}, {g.per_node.gpus} x {gpu} " \
           f"of {memory} GiB a node"


def _parallel_cell(f: ServingFit, max_count: int) -> str:
    if f.fits:
        return f"{f.tensor_parallel} x {f.pipeline_parallel}"
    return f"needs {f.pipeline_parallel} nodes of {max_count}"


def serving_rows(g: NodeGroupPlan) -> Table:
    """The group's serving table: each standard size (and the served model) with its TP x PP,
    GPUs per replica, KV-cache room per replica and the replicas that fit."""
    rows = [["model", "weights", "TP x PP", "GPUs per replica", "KV cache per replica", "replicas"]]
    for f in g.serving or []:
        replicas = str(f.replicas_fit) if not f.served else f"{f.replicas_served} served of {f.replicas_fit}"
        rows.append([f"{f.model} (served)" if f.served else f.model, f"{num(f.weights_gib, 1)} GiB",
                     _parallel_cell(f, g.max_count), str(f.gpus_per_replica) if f.fits else "-",
                     f"{num(f.kv_cache_gib, 1)} GiB" if f.fits else "-", replicas])
    return rows


def served_line(plan: Plan) -> str:
    s = plan.serving
    if s is None:
        return ""
    context = f", --max-model-len {s.max_model_len}" if s.max_model_len else ""
    return (f"serving {s.name} from {s.path} on {s.node_group}: {s.replicas} replicas of {s.tensor_parallel} x "
            f"{s.pipeline_parallel} GPUs (tensor x pipeline parallel) in {s.units} unit"
            f"{'s' if s.units != 1 else ''} of {s.pipeline_parallel} node{'s' if s.pipeline_parallel != 1 else ''}, "
            f"{s.engine} {s.image} on port {s.port}{context}")

