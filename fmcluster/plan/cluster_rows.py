"""The rows and lines of the plan's other sections that the text and markdown renderings lay
out: storage, network, cost, teams, node health, placement, the summary, the control plane,
observability, and the resolved spec as YAML with its defaults marked."""

from __future__ import annotations

import functools
from typing import Any

import yaml

from fmcluster.plan.figures import duration, gbps, num, params, usd
from fmcluster.plan.shape.cluster import ControlPlanePlan, TeamPlan
from fmcluster.plan.shape.estimates import CostLine
from fmcluster.plan.shape.plan import Plan
from fmcluster.spec.models import is_everyone
from fmcluster.text.table import Table


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
    """A value of the resolved spec as YAML on one line. A plan has a hundred and more of them, and
    the same few again and again (true, 0, a type name): each scalar is written once a process."""
    return _dumped(value) if isinstance(value, (list, dict)) else _dumped_scalar(value)


@functools.lru_cache(maxsize=1024, typed=True)  # typed: True and 1 are written apart
def _dumped_scalar(value: Any) -> str:
    return _dumped(value)


def _dumped(value: Any) -> str:
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
