"""The markdown plan (`fmcluster plan --format markdown`), to fit a pull-request comment: tables,
a Mermaid diagram of the cluster and the resolved spec in a collapsed block."""

from __future__ import annotations

from fmcluster.plan import first_deploy
from fmcluster.plan.capacity import capacity_table
from fmcluster.plan.cluster_rows import (
    control_plane_line,
    cost_rows,
    health_rows,
    network_rows,
    observability_line,
    own_nodes,
    placement_rows,
    resolved_yaml,
    storage_rows,
    summary,
    team_rows,
    teams_note,
)
from fmcluster.plan.compute_rows import (
    compute_rows,
    no_nvlink,
    served_line,
    serving_group_line,
    serving_note,
    serving_rows,
)
from fmcluster.plan.figures import count_range, gbytes, num, usd
from fmcluster.plan.images import image_rows, images_line, own_image_lines, reference_line, reference_rows
from fmcluster.plan.shape.nodes import NodeGroupPlan
from fmcluster.plan.shape.plan import Plan
from fmcluster.text.table import md_table


def _id(prefix: str, index: int) -> str:
    return f"{prefix}{index}"


def _group_node(g: NodeGroupPlan, node: str, indent: str) -> list[str]:
    """A node group in the diagram: a node, its NVLink domain in its label; an UltraServer group
    a box of its UltraServers, one node per NVLink domain."""
    label = f"node group {g.name}<br/>{count_range(g.min_count, g.max_count)} x {g.instance_type}"
    if g.gpu:
        label += f"<br/>{g.at_max.gpus} x {g.gpu}"
    d = g.nvlink_domain
    if d is None or d.ultraserver_type is None:
        if d is not None:
            label += f"<br/>NVLink domain: 1 instance, {d.gpus} GPUs"
        elif g.gpu:
            label += f"<br/>no NVLink ({no_nvlink(g)})"
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
           *(["#### Reserved capacity", "", "Window and cost as `fmcluster preflight` reads them; what happens at "
              "the end.", "", *md_table(capacity_table(plan.capacity)), ""] if plan.capacity else []),
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
