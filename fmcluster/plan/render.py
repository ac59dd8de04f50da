"""`fmcluster plan`: text, markdown and JSON renderings of a `Plan` (fmcluster.plan.report, whose
`build` is the command's `run`). Deterministic: no dates or times other than the price table's
own date, so the output of a spec never changes between runs.

Markdown fits a pull-request comment: tables, a Mermaid diagram of the cluster and the resolved
spec in a collapsed block.
"""

from __future__ import annotations

import textwrap
from itertools import zip_longest
from typing import Any, Callable, Iterable, Mapping

import yaml

from fmcluster.plan import first_deploy
from fmcluster.plan.cost import CostLine
from fmcluster.plan.images import image_rows, images_line, own_image_lines, reference_line, reference_rows
from fmcluster.plan.report import ControlPlanePlan, NodeGroupPlan, Plan, Resources, ServingFit, TeamPlan, build
from fmcluster.spec.models import ClusterSpec, is_everyone

Table = list[list[str]]


# ---- numbers -------------------------------------------------------------------------------

def num(value: float, digits: int = 2) -> str:
    """1234.5 -> '1,234.5'; whole numbers without decimals; at most `digits` decimals."""
    text = f"{value:,.{digits}f}".rstrip("0").rstrip(".") if digits else f"{value:,.0f}"
    return text if text != "-0" else "0"


def usd(value: float | None) -> str:
    if value is None:
        return "unknown"
    if value < 1:
        return "$" + (f"{value:.3f}".rstrip("0").rstrip(".") if value else "0")
    return f"${value:,.2f}"


def gbps(value: float) -> str:
    return f"{num(value / 1000, 2)} Tbps" if value >= 1000 else f"{num(value)} Gbps"


def gbytes(value: float) -> str:
    """GB/s (bytes: NVLink), as NVIDIA's datasheets give it: '1,800 GB/s'."""
    return f"{num(value, 0)} GB/s"


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{num(seconds, 1)} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def params(value: float) -> str:
    for scale, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if value >= scale:
            return f"{num(value / scale, 2)}{unit}"
    return num(value, 0)


def _count(low: int, high: int) -> str:
    return str(high) if low == high else f"{low} to {high}"


# ---- tables --------------------------------------------------------------------------------

WIDTH = 100  # the text plan's lines fit a terminal or a review tool this wide
NARROWEST = 12  # a column is wrapped no narrower than this (or its longest word)


def wrap(text: str, width: int, hanging: str = "", break_words: bool = False) -> list[str]:
    """`text` in lines of at most `width`, the lines after the first indented by `hanging`; [""]
    for empty text. A word longer than `width` stays whole, or with `break_words` is broken after
    a `:` or `/` where it can (ARNs, paths), so that the lines joined give the word back."""
    words = text.split()
    if not break_words or all(len(word) <= width for word in words):
        return textwrap.wrap(text, width, subsequent_indent=hanging, break_on_hyphens=False,
                             break_long_words=False) or [""]
    lines: list[str] = []
    line = ""
    for word in words:
        for k, piece in enumerate(_pieces(word, width)):
            glue = "" if k else " "
            if line and len(line) + len(glue) + len(piece) <= width:
                line += glue + piece
            else:
                lines += [line] if line else []
                line = piece
    return lines + [line]


def _pieces(word: str, width: int) -> list[str]:
    """`word` cut into pieces of at most `width`, each after the last `:` or `/` that fits."""
    pieces = []
    while len(word) > width:
        cut = max(word.rfind(":", 0, width), word.rfind("/", 0, width)) + 1 or width
        pieces.append(word[:cut])
        word = word[cut:]
    return [*pieces, word]


def paragraph(text: str, indent: str = "  ", width: int = WIDTH) -> list[str]:
    """A line of prose, indented, wrapped to `width`."""
    return [indent + line for line in wrap(text, width - len(indent))]


def _shrunk(natural: list[int], floors: list[int], budget: int) -> list[int] | None:
    """Column widths within `budget`: the widest column narrowed first, none below its floor;
    None when the floors alone exceed it."""
    widths = list(natural)
    while sum(widths) > budget:
        narrowable = [i for i, w in enumerate(widths) if w > floors[i]]
        if not narrowable:
            return None
        widest = max(narrowable, key=lambda i: widths[i])
        widths[widest] -= 1
    return widths


def text_table(rows: Table, indent: str = "  ", records: bool = False, width: int = WIDTH) -> list[str]:
    """Aligned columns within `width`: cells too long for their column wrap onto more lines, the
    widest column narrowed first. A table whose long words (paths, ARNs) cannot fit so is shown as
    records with `records` (the first row names the columns), else its long words are broken."""
    return [line for row in _table_rows(rows, indent, records, width) for line in row]


def _table_rows(rows: Table, indent: str, records: bool, width: int) -> list[list[str]]:
    """The lines of `text_table`, a list for each row (one list of them all for records)."""
    columns = range(len(rows[0]))
    natural = [max(len(row[i]) for row in rows) for i in columns]
    budget = width - len(indent) - 2 * (len(natural) - 1)
    longest_word = [max((len(word) for row in rows for word in row[i].split()), default=0) for i in columns]
    widths = _shrunk(natural, [min(n, max(w, NARROWEST)) for n, w in zip(natural, longest_word, strict=True)],
                     budget)
    if widths is None and records:
        return [_records(rows, indent, width)]
    widths = widths or _shrunk(natural, [min(n, NARROWEST) for n in natural], budget) or natural
    lines = []
    for row in rows:
        cells = [wrap(cell, w, break_words=True) for cell, w in zip(row, widths, strict=True)]
        lines.append([(indent + "  ".join(p.ljust(w) for p, w in zip(parts, widths, strict=True))).rstrip()
                      for parts in zip_longest(*cells, fillvalue="")])
    return lines


def noted_table(rows: Table, notes: list[str], indent: str = "  ", width: int = WIDTH) -> list[str]:
    """`text_table` of `rows` with each row's note (if any) on lines of its own under it: a
    column of free text would squeeze the others."""
    lines = []
    for row, note in zip(_table_rows(rows, indent, False, width), notes, strict=True):
        lines += row + (paragraph(note, indent + "    ", width) if note else [])
    return lines


def _records(rows: Table, indent: str, width: int) -> list[str]:
    """A table too wide for columns: each row its first cell, then each other cell under its
    column's name, wrapped."""
    names, *body = rows
    label = max(len(name) for name in names[1:])
    lines = []
    for row in body:
        lines += paragraph(row[0], indent, width)
        for name, cell in zip(names[1:], row[1:], strict=True):
            room = width - len(indent) - 4 - label
            if not cell:
                continue
            if max(len(word) for word in cell.split()) <= room:
                first, *more = wrap(cell, room)
                lines.append(f"{indent}  {name.ljust(label)}  {first}")
                lines += [f"{indent}  {' ' * label}  {line}" for line in more]
            else:  # a word too long to follow the name: the value on lines of its own
                lines.append(f"{indent}  {name}")
                lines += [f"{indent}    {line}" for line in wrap(cell, width - len(indent) - 4, break_words=True)]
    return lines


def md_table(rows: Table) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [line(rows[0]), "|" + "|".join("---" for _ in rows[0]) + "|", *map(line, rows[1:])]


def _gpu_cells(r: Resources, gpu: str | None, memory: str | None) -> list[str]:
    if not r.gpus:
        return ["-"] * 6
    fp8 = num(r.fp8_pflops) if r.fp8_pflops is not None else "-"
    fp4 = num(r.fp4_pflops) if r.fp4_pflops is not None else "-"
    return [f"{r.gpus} x {gpu}" if gpu else str(r.gpus), num(r.bf16_pflops), fp8, fp4,
            f"{num(r.hbm_gib, 0)} GiB" + (f" {memory}" if memory else ""), f"{num(r.hbm_tbps, 1)} TB/s"]


def _no_nvlink(g: NodeGroupPlan) -> str:
    """Why a GPU group has no NVLink domain: one GPU a node (p5.4xlarge), or GPUs on PCIe (L40S)."""
    return "one GPU" if g.per_node.gpus == 1 else "PCIe"


def nvlink_domain_cell(g: NodeGroupPlan) -> str:
    """What one NVLink domain of the group is: 'u-p6e-gb200x72: 18 instances, 72 GPUs, ...'."""
    d = g.nvlink_domain
    if d is None:
        return f"none ({_no_nvlink(g)})" if g.gpu else "-"
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
            row("instances", lambda g: f"{_count(g.min_count, g.max_count)} x {g.instance_type}",
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


def storage_rows(plan: Plan) -> Table:
    s = plan.storage
    rows = [["", ""]]
    for b in s.buckets:
        rows.append([f"bucket {b.name}", b.s3_name + (" (versioned)" if b.versioned else "")])
    rows.append(["KMS key", "customer-managed" if s.kms else "none (SSE-S3 and FSx-managed keys)"])
    home = s.home
    if home is None:
        pass  # each node's own /home
    elif home.storage_capacity_gib is None:
        rows.append(["shared home", f"the FSx for Lustre file system, mounted at {home.mount_path} on every node"])
    else:
        rows.append(["shared home", f"FSx for OpenZFS, {num(home.storage_capacity_gib, 0)} GiB "
                                    f"{home.deployment_type}, {home.throughput_mbps} MB/s, {home.compression}, "
                                    f"mounted at {home.mount_path} on every node (retained)"])
    fs = s.lustre
    if fs is None:
        rows.append(["FSx for Lustre", "none"])
        return rows
    tier = f", {fs.throughput_per_tib} MB/s/TiB" if fs.throughput_per_tib else ""
    rows += [
        ["FSx for Lustre", f"{num(fs.storage_capacity_gib, 0)} GiB {fs.deployment_type}{tier}, "
                           f"{fs.file_servers} file server{'s' if fs.file_servers != 1 else ''}, "
                           f"mounted at {fs.mount_path}"],
        ["throughput", f"{num(fs.throughput_gbps, 2)} GB/s aggregate baseline"],
        ["metadata IOPS", fs.metadata_iops],
        ["EFA", "enabled" if fs.efa else "off"],
        ["compression", fs.compression],
    ]
    names = {b.name: b.s3_name for b in s.buckets}
    for link in fs.links:
        target = f"s3://{names[link.bucket]}" + (f"/{link.prefix}" if link.prefix else "")
        events = [f"import {', '.join(link.import_events)}" if link.import_events else "",
                  f"export {', '.join(link.export_events)}" if link.export_events else ""]
        automatic = "; ".join(e for e in events if e) or "no auto import/export"
        rows.append([f"link {link.path}", f"{target}: {automatic}"])
    c = fs.checkpoint
    rows.append(["checkpoint", f"{params(c.parameters)} parameters x {c.bytes_per_parameter} bytes = "
                               f"{num(c.gigabytes, 1)} GB: {duration(c.seconds)} at {num(fs.throughput_gbps, 2)} GB/s"])
    rows.append(["", c.formula])
    return rows


def serving_note(plan: Plan) -> str:
    """The rule the serving tables follow, in a line."""
    share, floor = plan.serving_gpu_memory_utilization, plan.serving_kv_cache_floor
    return (f"vLLM at --gpu-memory-utilization {share:g}; a replica fits where its weights leave at least "
            f"{floor:.0%} of its GPU memory (fmcluster's KV-cache floor): weights <= {share - floor:.0%} of it")


def serving_group_line(g: NodeGroupPlan) -> str:
    gpu = g.gpu or "GPU"
    memory = num(g.per_node.hbm_gib / max(g.per_node.gpus, 1), 1)
    return f"{g.name}: {_count(g.min_count, g.max_count)} x {g.instance_type}, {g.per_node.gpus} x {gpu} " \
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


def network_rows(plan: Plan) -> tuple[Table, Table]:
    n = plan.network
    subnets = [["AZ ID", "subnet", "kind", "usable addresses"]]
    for s in n.subnets:
        kind = "public (NAT gateway)" if s.nat_gateway else (
            "public" if s.public else "private, GPU subnet" if s.gpu_subnet else "private") + (
            ", Local Zone" if s.local_zone else "")
        subnets.append([s.az_id, s.cidr, kind, num(s.usable_addresses, 0)])
    needs = [["addresses in the GPU subnet", ""], *[[a.what, str(a.addresses)] for a in n.address_needs],
             ["total", f"{n.addresses_needed} of {num(n.gpu_subnet_usable, 0)}"]]
    return subnets, needs


def cost_rows(plan: Plan) -> Table:
    rows = [["item", "per hour", "per day", "note"]]
    for line in plan.cost.lines:
        rows.append([line.item, *_cost_cells(line), line.note or ""])
    c = plan.cost
    rows.append(["total of priced items", _range(c.hourly_usd_min, c.hourly_usd_max),
                 _range(c.daily_usd_min, c.daily_usd_max), "" if c.complete else "plus the items not priced above"])
    return rows


def team_rows(plan: Plan) -> Table:
    """A row per team: its priority, its GPUs guaranteed and at most (per node group where the
    cluster has several GPU groups), what others may use of it, and the hourly cost of both."""
    several = len(plan.teams[0].node_groups) > 1 if plan.teams else False
    rows = [["team", "priority", "guaranteed GPUs", "at most", "lends", "$/h guaranteed", "$/h at most"]]
    def per_group(t: TeamPlan, field: str, total: int) -> str:
        if not several:
            return str(total)
        return f"{total} (" + ", ".join(f"{g.node_group} {getattr(g, field)}" for g in t.node_groups) + ")"

    for t in plan.teams:
        lends = sum(g.lendable_gpus for g in t.node_groups)
        rows.append([t.name + (" (dedicated: " + ", ".join(t.dedicated) + ")" if t.dedicated else ""),
                     t.priority, per_group(t, "guaranteed_gpus", t.guaranteed_gpus),
                     per_group(t, "burst_gpus", t.burst_gpus),
                     str(lends), usd(t.guaranteed_hourly_usd), usd(t.burst_hourly_usd)])
    return rows


TEAMS_NOTE = ("A team is guaranteed its GPUs (a Kueue nominal quota; on Slurm its fair share) and may use "
              "more that others leave idle, up to 'at most'; others may use what it 'lends' while it is idle, "
              "and give it back by preemption. Hourly figures are at On-Demand list prices, the rate to "
              "charge a team back at, whatever the capacity was bought as.")
# Slurm's GPU limit is GrpTRES, one per account: the sum of 'at most' over the team's GPU groups
SLURM_TEAMS_NOTE = ("On Slurm 'at most' is one limit per team, summed over its GPU groups (GrpTRES is per "
                    "account, not per node group).")
# fmcluster.node.accounting.PCS_SETTINGS: PCS lets fmcluster set neither PreemptType nor AccountingStorageTRES
# (SlurmCustomSetting.parameterName, PCS API Reference: "For clusters: Prolog, Epilog,
# SelectTypeParameters, AccountingStorageEnforce"). Whether PCS's own slurm.conf tracks gres/gpu
# no API says: GetCluster's slurmConfiguration (botocore's PCS model, 2023-02-10) returns only the
# cluster's own slurmCustomSettings, slurmdbdCustomSettings and cgroupCustomSettings, and PCS's
# guide documents GRES autodetection on GPU node groups ("AWS PCS enables Slurm GRES
# autodetection by default on compute node groups that have GPUs", release notes), not
# AccountingStorageTRES. So neither plan nor preflight can tell; a login node can (sacctmgr).
PCS_TEAMS_NOTE = ("On AWS PCS fmcluster cannot set PreemptType or AccountingStorageTRES: borrowed GPUs are "
                  "given back by preemption only where PCS's own slurm.conf preempts by QOS (else when the "
                  "borrowing jobs end), and 'at most' (GrpTRES=gres/gpu) holds only where it tracks gres/gpu "
                  "(AccountingStorageTRES). No PCS API reports PCS's slurm.conf, so neither plan nor preflight "
                  "can tell: on a login node `sacctmgr show tres` lists gres/gpu where the limits hold, and "
                  "fmcluster-accounting's log says when it made the teams without them.")


def teams_note(plan: Plan) -> str:
    """TEAMS_NOTE, with what Slurm, and AWS PCS in particular, changes of it."""
    kind = plan.control_plane.type
    note = TEAMS_NOTE
    if kind in ("pcs", "hyperpod-slurm"):
        note += " " + SLURM_TEAMS_NOTE
    if kind == "pcs":
        note += " " + PCS_TEAMS_NOTE
    return note


def health_rows(plan: Plan) -> Table:
    """What checks, takes out and replaces faulty GPU nodes, and what new nodes run first."""
    h = plan.health
    assert h is not None
    deep = h.new_nodes + (f" (about {h.deep_check_minutes} minutes on a new node)" if h.deep_check_minutes else "")
    return [["", ""], ["checked", f"{h.checked_by}: " + ", ".join(c.split(":")[0] for c in h.checks)],
            ["taken out", h.out_of_pool], ["replaced by", h.replaced_by], ["new nodes", deep]]


def placement_rows(plan: Plan) -> Table:
    """How each node group's jobs are placed in the network."""
    return [["node group", "placement"], *[[g.name, g.topology or "none"] for g in plan.node_groups]]


def _range(low: float, high: float) -> str:
    return usd(high) if low == high else f"{usd(low)} to {usd(high)}"


def _cost_cells(line: CostLine) -> list[str]:
    low, high = line.hourly_usd_min, line.hourly_usd_max
    if line.status != "priced" or low is None or high is None:  # a priced line has both (plan_cost)
        label = {"priced-at-purchase": "priced at purchase", "usage-based": "usage-based"}.get(line.status, "unknown")
        return [label, label]
    return [_range(low, high), _range(low * 24, high * 24)]


def summary(plan: Plan) -> str:
    t = plan.total
    parts = [f"{t.instances} instances"]
    if t.gpus:
        fp8 = f" / {num(t.fp8_pflops)} FP8" if t.fp8_pflops is not None else ""
        parts += [f"{t.gpus} GPUs", f"{num(t.bf16_pflops)} PFLOPS BF16{fp8} (dense peak)"]
    if plan.nvlink_domains:
        n, largest = plan.nvlink_domains, plan.largest_nvlink_domain_gpus
        sizes = {g.nvlink_domain.gpus for g in plan.node_groups if g.nvlink_domain and g.nvlink_domain.domains}
        noun = "NVLink domain" if n == 1 else "NVLink domains"
        parts.append(f"{n} {noun} of {largest} GPUs" if len(sizes) == 1 else f"{n} {noun} (largest {largest} GPUs)")
    if t.efa_gbps:
        parts.append(f"{gbps(t.efa_gbps)} EFA")
    if plan.storage.lustre:
        fs = plan.storage.lustre
        parts.append(f"{num(fs.storage_capacity_gib, 0)} GiB Lustre at {num(fs.throughput_gbps, 2)} GB/s")
    return " · ".join(parts)


def control_plane_line(plan: Plan) -> str:
    cp = plan.control_plane
    text = f"{cp.type} ({cp.version_label} {cp.version})"
    if cp.pcs_size:
        text += f", AWS PCS size {cp.pcs_size}"
    if cp.endpoint_access:
        text += f", API endpoint {cp.endpoint_access}"
    if cp.public_access_cidrs:
        everyone = any(is_everyone(c) for c in cp.public_access_cidrs)
        text += " (public from " + ("anywhere, 0.0.0.0/0" if everyone else ", ".join(cp.public_access_cidrs)) + ")"
    if cp.admin_role_arn:
        text += f", admin {cp.admin_role_arn}"
    return text + f"; {own_nodes(cp)}: {cp.login_count} x {cp.login_instance_type}"


def own_nodes(cp: ControlPlanePlan) -> str:
    """What the control plane's own nodes are: login nodes (Slurm) or system nodes (Kubernetes)."""
    return "login nodes" if cp.scheduler == "slurm" else "system nodes"


def observability_line(plan: Plan) -> str:
    o = plan.observability
    return (f"Prometheus {'on' if o.prometheus else 'off'}, Grafana {'on' if o.grafana else 'off'}, "
            f"alerts to {o.alert_email or 'nobody'}: {o.note}")


# ---- the resolved spec as YAML with the defaults marked ------------------------------------

def _scalar(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=1000).strip().removesuffix("\n...").strip()


def resolved_yaml(value: Any, defaulted: set[str], path: str = "", indent: str = "") -> list[str]:
    """YAML of the resolved spec, '# default' after every value the file leaves to defaults."""
    lines: list[str] = []
    for key, item in value.items():
        child = f"{path}.{key}" if path else key
        mark = "  # default" if child in defaulted else ""
        if isinstance(item, dict) and item:
            lines.append(f"{indent}{key}:{mark}")
            lines += resolved_yaml(item, defaulted, child, indent + "  ")
        elif isinstance(item, list) and item and isinstance(item[0], dict):
            lines.append(f"{indent}{key}:{mark}")
            for i, entry in enumerate(item):
                body = resolved_yaml(entry, defaulted, f"{child}[{i}]", indent + "    ")
                lines += [f"{indent}  - {body[0].lstrip()}", *body[1:]]
        else:
            lines.append(f"{indent}{key}: {_scalar(item)}{mark}")
    return lines


# ---- text ----------------------------------------------------------------------------------

def _section(title: str, body: list[str]) -> list[str]:
    return ["", title, *body]


def _pairs(rows: Table) -> list[str]:
    return text_table(rows[1:])


def _joined(parts: list[str], indent: str = "  ", sep: str = " · ", width: int = WIDTH) -> list[str]:
    """Parts on as few lines as fit `width`, a line broken only between two parts (and ending
    with the separator)."""
    lines = [indent + parts[0]]
    for part in parts[1:]:
        if len(lines[-1] + sep + part + sep.rstrip()) <= width:
            lines[-1] += sep + part
        else:
            lines[-1] += sep.rstrip()
            lines.append(indent + part)
    return lines


def render_text(plan: Plan) -> str:
    where = f"{plan.region}, GPU capacity in AZ ID {plan.availability_zone_id}"
    account = f"account {plan.account}" if plan.account else "any account (environment-agnostic stacks)"
    subnets, needs = network_rows(plan)
    c = plan.cost
    title = "fmcluster plan: "
    out = wrap(f"{title}{plan.name} ({where}, {account})", WIDTH, hanging=" " * len(title))
    out += _joined(summary(plan).split(" · "))
    out += _section("Compute (peak dense tensor PFLOPS; totals at each group's maximum size)",
                    text_table(compute_rows(plan)))
    out += _section("Storage", _pairs(storage_rows(plan)))
    serving = [g for g in plan.node_groups if g.serving]
    if serving:
        body = paragraph(serving_note(plan)) + (paragraph(served_line(plan)) if plan.serving else [])
        for g in serving:
            body += [*paragraph(serving_group_line(g)), *text_table(serving_rows(g), indent="    ")]
        out += _section("Serving (replicas that fit at each group's maximum size)", body)
    out += _section(f"Network: VPC {plan.network.vpc_cidr}, {plan.network.nat_gateways} NAT gateway",
                    text_table(subnets) + [""] + text_table(needs))
    out += _section("Control plane", paragraph(control_plane_line(plan)))
    out += _section("Observability", paragraph(observability_line(plan)))
    if plan.images or plan.own_images:
        title = f"Node images ({plan.images.stack}, EC2 Image Builder)" if plan.images else "Node images"
        body = text_table(image_rows(plan.images, usd), records=True) + paragraph(images_line(plan.images)) \
            if plan.images else []
        out += _section(title, body + [wrapped for line in own_image_lines(plan.own_images)
                                       for wrapped in paragraph(line)])
    if plan.reference_images:
        out += _section(f"Reference GPU images ({plan.reference_images.stack}, EC2 Image Builder)",
                        text_table(reference_rows(plan.reference_images, usd), records=True)
                        + paragraph(reference_line(plan.reference_images)))
    if plan.teams:
        out += _section("Teams (GPUs at each group's maximum size)", text_table(team_rows(plan))
                        + paragraph(teams_note(plan)))
    if plan.health:
        out += _section(f"Node health (every {plan.health.check_minutes} minutes on each GPU node)",
                        _pairs(health_rows(plan)))
    out += _section("Placement (how each group's jobs are placed in the network)", text_table(placement_rows(plan)))
    out += _section("Stacks", text_table([[s.name, s.contents + (" [termination protection]"
                                                                if s.termination_protection else "")]
                                          for s in plan.stacks]))
    title = f"Estimated cost ({c.prices_region} list prices of {c.prices_as_of}, {c.currency})"
    rows = cost_rows(plan)
    body = noted_table([row[:-1] for row in rows], [row[-1] if i else "" for i, row in enumerate(rows)])
    if c.region_note:
        body += paragraph(f"note: {c.region_note}")
    body.append("  sources: fmcluster/data/prices.json")
    out += _section(title, body)
    fd = plan.first_deploy
    out += _section(first_deploy.TITLE, noted_table(first_deploy.stack_rows(fd), ["", *map(first_deploy.stack_note,
                                                                                     fd.stacks)])
                    + [wrapped for line in first_deploy.lines(fd) for wrapped in paragraph(line)])
    out += _section("Resolved spec ('# default': not in the file)",
                    ["  " + line for line in resolved_yaml(plan.resolved_spec, set(plan.defaulted))])
    return "\n".join(out) + "\n"


# ---- markdown ------------------------------------------------------------------------------

def _id(prefix: str, index: int) -> str:
    return f"{prefix}{index}"


def _group_node(g: NodeGroupPlan, node: str, indent: str) -> list[str]:
    """A node group in the diagram: a node, its NVLink domain in its label; an UltraServer group
    a box of its UltraServers, one node per NVLink domain."""
    label = f"node group {g.name}<br/>{_count(g.min_count, g.max_count)} x {g.instance_type}"
    if g.gpu:
        label += f"<br/>{g.at_max.gpus} x {g.gpu}"
    d = g.nvlink_domain
    if d is None or d.ultraserver_type is None:
        if d is not None:
            label += f"<br/>NVLink domain: 1 instance, {d.gpus} GPUs"
        elif g.gpu:
            label += f"<br/>no NVLink ({_no_nvlink(g)})"
        return [f'{indent}{node}["{label}"]']
    lines = [f'{indent}subgraph {node}["{label}"]']
    nvlink = f"NVLink {gbytes(d.nvlink_gbps_per_gpu)} per GPU"
    for n in range(1, (d.ultraservers or d.domains) + 1):
        if n <= d.whole_domains:
            what = f"{d.instances} x {g.instance_type}, {d.gpus} GPUs, {nvlink}"
        elif n == d.whole_domains + 1 and d.partial_domain_instances:
            used = d.partial_domain_instances
            what = (f"{used} of {d.instances} x {g.instance_type}, {used * g.per_node.gpus} of {d.gpus} GPUs, "
                    f"{nvlink}")
        else:
            what = f"unused ({d.instances} x {g.instance_type})"
        lines.append(f'{indent}  {node}u{n}["{d.ultraserver_type} #{n}: {what}"]')
    return [*lines, f"{indent}end"]


def mermaid(plan: Plan) -> list[str]:
    """A flowchart: the VPC with a box per AZ ID and its subnets; node groups (an UltraServer
    group as a box of its NVLink domains), login nodes and the file system in the GPU subnet;
    buckets and the control plane outside."""
    lines = ["```mermaid", "flowchart LR", f'  subgraph vpc["VPC {plan.network.vpc_cidr}"]']
    azs = list(dict.fromkeys(s.az_id for s in plan.network.subnets))
    fs = plan.storage.lustre
    cp = plan.control_plane
    for a, az in enumerate(azs):
        lines.append(f'    subgraph {_id("az", a)}["AZ ID {az}"]')
        for s_index, s in enumerate(plan.network.subnets):
            if s.az_id != az:
                continue
            if s.gpu_subnet:
                lines.append(f'      subgraph {_id("sn", s_index)}["private {s.cidr}"]')
                for g_index, g in enumerate(plan.node_groups):
                    lines += _group_node(g, _id("ng", g_index), "        ")
                if cp.login_count:
                    lines.append(f'        login["{own_nodes(cp)}<br/>{cp.login_count} x {cp.login_instance_type}"]')
                if fs:
                    lines.append(f'        fsx[("FSx for Lustre<br/>{num(fs.storage_capacity_gib, 0)} GiB, '
                                 f'{num(fs.throughput_gbps, 2)} GB/s")]')
                lines.append("      end")
            else:
                kind = "public" if s.public else "private"
                nat = "<br/>NAT gateway" if s.nat_gateway else ""
                lines.append(f'      {_id("sn", s_index)}["{kind} {s.cidr}{nat}"]')
        lines.append("    end")
    lines.append("  end")
    lines.append(f'  cp{{{{"{cp.type}<br/>{cp.version_label} {cp.version}"}}}}')
    for b_index, b in enumerate(plan.storage.buckets):
        lines.append(f'  {_id("b", b_index)}[("S3 {b.name}")]')
    for g_index, _ in enumerate(plan.node_groups):
        lines.append(f"  cp --> {_id('ng', g_index)}")
        if fs:
            lines.append(f"  {_id('ng', g_index)} -.- fsx")
    if cp.login_count:
        lines.append("  cp --> login")
    if fs:
        index = {b.name: i for i, b in enumerate(plan.storage.buckets)}
        for link in fs.links:
            bucket = _id("b", index[link.bucket])
            if link.import_events and link.export_events:
                lines.append(f'  fsx <-->|"{link.path}"| {bucket}')
            elif link.export_events:
                lines.append(f'  fsx -->|"{link.path}"| {bucket}')
            else:
                lines.append(f'  {bucket} -->|"{link.path}"| fsx')
    lines.append("```")
    return lines


def _serving_markdown(plan: Plan) -> list[str]:
    groups = [g for g in plan.node_groups if g.serving]
    if not groups:
        return []
    out = ["#### Serving", "", f"Replicas that fit at each group's maximum size; {serving_note(plan)}.", ""]
    if plan.serving:
        out += [f"**{served_line(plan)}**", ""]
    for g in groups:
        out += [f"`{serving_group_line(g)}`", "", *md_table(serving_rows(g)), ""]
    return out


def _images_markdown(plan: Plan) -> list[str]:
    own = [f"- {line}" for line in own_image_lines(plan.own_images)] + ([""] if plan.own_images else [])
    references = plan.reference_images
    out = ([f"#### Reference GPU images (`{references.stack}`, EC2 Image Builder)", "",
            *md_table(reference_rows(references, usd)), "", f"{reference_line(references)}.", ""]
           if references else [])
    if plan.images is None:
        return (["#### Node images", "", *own] if own else []) + out
    return [f"#### Node images (`{plan.images.stack}`, EC2 Image Builder)", "", *md_table(image_rows(plan.images, usd)),
            "", f"{images_line(plan.images)}.", "", *own, *out]


def _first_deploy_markdown(plan: Plan) -> list[str]:
    fd = plan.first_deploy
    rows = [[*row, note] for row, note in zip(first_deploy.stack_rows(fd), ["what takes its time",
                                              *map(first_deploy.stack_note, fd.stacks)], strict=True)]
    return [f"#### {first_deploy.TITLE}", "", *md_table(rows), "", *(f"- {line}" for line in first_deploy.lines(fd)),
            ""]


def render_markdown(plan: Plan) -> str:
    c = plan.cost
    subnets, needs = network_rows(plan)
    account = f"account `{plan.account}`" if plan.account else "any account"
    out = [f"### fmcluster plan: `{plan.name}`", "",
           f"{plan.region}, GPU capacity in AZ ID `{plan.availability_zone_id}`, {account}. "
           f"**{summary(plan)}**", "",
           "#### Compute", "", "Peak dense tensor PFLOPS; totals at each group's maximum size.", "",
           *md_table(compute_rows(plan)), "",
           "#### Storage", "", *md_table([["", ""], *storage_rows(plan)[1:]]), "",
           *_serving_markdown(plan),
           f"#### Network: VPC `{plan.network.vpc_cidr}`", "", *md_table(subnets), "", *md_table(needs), "",
           "#### Control plane and observability", "", f"- {control_plane_line(plan)}",
           f"- {observability_line(plan)}", "",
           *_images_markdown(plan),
           *(["#### Teams", "", *md_table(team_rows(plan)), "", teams_note(plan), ""] if plan.teams else []),
           *(["#### Node health", "", *md_table(health_rows(plan)), ""] if plan.health else []),
           "#### Placement", "", *md_table(placement_rows(plan)), "",
           "#### Stacks", "", *md_table([["stack", "contents", "termination protection"],
                                         *[[f"`{s.name}`", s.contents, "yes" if s.termination_protection else "no"]
                                           for s in plan.stacks]]), "",
           f"#### Estimated cost ({c.prices_region} list prices of {c.prices_as_of}, {c.currency})", "",
           *md_table(cost_rows(plan)), ""]
    if c.region_note:
        out += [f"> {c.region_note}", ""]
    out += ["Prices and their sources: `fmcluster/data/prices.json`.", "", *_first_deploy_markdown(plan),
            "#### Diagram", "", *mermaid(plan), "",
            "<details><summary>Resolved spec (every default filled in)</summary>", "", "```yaml",
            *resolved_yaml(plan.resolved_spec, set(plan.defaulted)), "```", "", "</details>"]
    return "\n".join(out) + "\n"


def render_json(plan: Plan) -> str:
    return plan.model_dump_json(indent=2) + "\n"


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}
FORMATS = tuple(RENDERERS)


def run(spec: ClusterSpec, raw: dict[str, Any] | None = None, checkpoint_params: float | None = None,
        reservations: Iterable[Mapping[str, Any]] = ()) -> Plan:
    """The plan of a valid spec (fmcluster.plan.report.build): a frozen model, for its JSON Schema."""
    return build(spec, raw, checkpoint_params, reservations)


def render(report: Plan, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr)."""
    return RENDERERS[fmt](report), ""


def exit_code(report: Plan) -> int:
    return 0
