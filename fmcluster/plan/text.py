"""The text plan (`fmcluster plan`, the default format): sections of aligned tables and wrapped
prose within WIDTH columns (fmcluster.text.table)."""

from __future__ import annotations

from fmcluster.plan import first_deploy
from fmcluster.plan.capacity import capacity_rows
from fmcluster.plan.capacity import title as capacity_title
from fmcluster.plan.cluster_rows import (
    control_plane_line,
    cost_rows,
    health_rows,
    network_rows,
    observability_line,
    placement_rows,
    resolved_yaml,
    storage_rows,
    summary,
    team_rows,
    teams_note,
)
from fmcluster.plan.compute_rows import compute_rows, served_line, serving_group_line, serving_note, serving_rows
from fmcluster.plan.figures import usd
from fmcluster.plan.images import image_rows, images_line, own_image_lines, reference_line, reference_rows
from fmcluster.plan.shape.plan import Plan
from fmcluster.text.table import WIDTH, Table, noted_table, paragraph, text_table, wrap


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
    if plan.capacity:
        body = []
        for held in plan.capacity:
            body += [*paragraph(capacity_title(held)), *text_table(capacity_rows(held)[1:], indent="    ")]
        out += _section("Reserved capacity (window and cost as `fmcluster preflight` reads them; its end)", body)
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
