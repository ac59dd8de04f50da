"""`fmcluster capacity`'s report as text (tables within 100 columns, fmcluster.text.table), as
Markdown (for a pull request or a ticket) and as JSON (for programs). Times are UTC, money is in
the offering's currency, each per hour the upfront fee over the offering's hours."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Optional

from fmcluster.deploy.capacity.offerings import PLAN, PLAN_EXTENSION, SEARCH, Offer, days, iso
from fmcluster.deploy.capacity.placement import AzMove
from fmcluster.deploy.capacity.purchase import fee, what
from fmcluster.deploy.capacity.report import FIND, Bought, CapacityReport, GroupResult, Row
from fmcluster.text.table import md_table, paragraph, text_table

FORMATS = ("text", "markdown", "json")
MOVED = "*"  # marks an AZ ID that is not the spec's


def _when(value: Optional[datetime]) -> str:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M") if value else "-"


def _money(value: Optional[Decimal]) -> str:
    return f"{value:,.2f}" if value is not None else "?"


def _title(report: CapacityReport) -> str:
    return (f"fmcluster capacity {report.action}: {report.cluster} in {report.region}, GPU capacity in AZ ID "
            f"{report.az_id}")


def _window(report: CapacityReport) -> Optional[str]:
    win = report.window
    if win is None:
        return None
    span = (f", starting from {iso(win.start)}" if win.start else ", starting from now") + \
           (f", ending by {iso(win.end)}" if win.end else "")
    return f"Offerings of {days(win.hours)}{span}; times in UTC, cheapest first"


def _currency(rows: tuple[Row, ...]) -> str:
    found = sorted({r.offer.currency for r in rows if r.offer.currency})
    return found[0] if len(found) == 1 else "/".join(found) or "?"


def _zone(row: Row) -> str:
    return row.offer.where + (MOVED if row.move is not None else "")


def _table(result: GroupResult) -> list[list[str]]:
    """The rows of a group's offerings: the header first."""
    currency = _currency(result.rows)
    if result.kind in (PLAN_EXTENSION, "block-extension"):
        head = ["OFFERING", "FROM (END NOW)", "NEW END", "HOURS", "AZ ID", f"UPFRONT {currency}", "PER HOUR"]
    else:
        head = ["OFFERING", "START", "END", "HOURS", "AZ ID", f"UPFRONT {currency}", "PER HOUR"]
    body = [[r.offer.id, _when(r.offer.start), _when(r.offer.end), _hours(r.offer), _zone(r), _money(r.offer.upfront),
             _money(r.offer.hourly)] for r in result.rows]
    return [head, *body]


def _hours(offer: Offer) -> str:
    return f"{offer.hours}" + (f"h{offer.minutes:02d}" if offer.minutes else "")


def _what(result: GroupResult) -> str:
    size = (f"{result.ultraservers} x {result.ultraserver} ({result.instances} x {result.instance_type})"
            if result.ultraserver else f"{result.instances} x {result.instance_type}")
    kind = {PLAN: "training plans", PLAN_EXTENSION: "training plan extensions",
            "block-extension": "Capacity Block extensions"}.get(result.kind, "Capacity Blocks")
    return f"{result.group}: {size}, {kind} ({SEARCH[result.kind]})"


def _move_text(move: AzMove) -> str:
    if not move.allowed:
        return (f"{MOVED} {move.new} is not the spec's AZ ID {move.old}, and the spec cannot move there: "
                + "; ".join(move.problems))
    by_stack: dict[str, list[str]] = {}
    for m in move.moved:
        by_stack.setdefault(m.stack, []).append(m.what)
    replaced = "; ".join(f"{stack}: {', '.join(items)}" for stack, items in by_stack.items())
    loss = (" The file systems are new and empty: `fmcluster diff` refuses that without --allow-data-loss."
            if move.data_loss else "")
    return (f"{MOVED} {move.new} is not the spec's AZ ID {move.old}: buying there (--move-az) sets "
            f"availability_zone_id: {move.new}, and a deploy then replaces {replaced}. `fmcluster diff OLD NEW` "
            f"shows each change before anything is deployed.{loss}")


def _group_lines(result: GroupResult, markdown: bool) -> list[str]:
    heading = f"### {_what(result)}" if markdown else _what(result)
    lines = [heading]
    if markdown:
        lines.append("")
    if result.skipped:
        return lines + _prose(f"not searched: {result.skipped}", markdown)
    if result.failure is not None:
        text = f"{result.failure.message}" + (f" (hint: {result.failure.hint})" if result.failure.hint else "")
        return lines + _prose(text, markdown)
    if not result.rows:
        return lines + _prose("no offering in this window: try other dates, or another duration", markdown)
    lines += md_table(_table(result)) if markdown else text_table(_table(result))
    for move in _moves(result):
        lines += _prose(_move_text(move), markdown)
    for row in result.rows:
        if row.unfit:
            lines += _prose(f"{row.offer.id} cannot serve {result.group}: {row.unfit}", markdown)
    if result.needs:
        lines += _prose("before a reservation can be written into the spec: " + "; ".join(result.needs), markdown)
    return lines


def _moves(result: GroupResult) -> list[AzMove]:
    seen: dict[str, AzMove] = {}
    for row in result.rows:
        if row.move is not None:
            seen.setdefault(row.move.new, row.move)
    return list(seen.values())


def _prose(text: str, markdown: bool) -> list[str]:
    return ["", text] if markdown else paragraph(text, "  ")


def _bought_line(bought: Bought) -> str:
    offer = bought.offer
    return (f"bought {what(offer)} {offer.id}: {bought.id} ({bought.state or 'state unknown'}), {offer.instances} x "
            f"{offer.instance_type} in {offer.where}, {iso(offer.start)} to {iso(bought.end or offer.end)}, "
            f"{fee(offer.upfront, offer.currency)} up front")


def render_text(report: CapacityReport, markdown: bool = False) -> str:
    lines = [f"## {_title(report)}"] if markdown else paragraph(_title(report), "")
    if markdown:
        lines.append("")
    if report.held is not None:
        held = report.held
        lines.append(f"{held.id}: {held.state}, {iso(held.start)} to {iso(held.end)}"
                     + (f", {held.instances} instances" if held.instances else ""))
    if (said := _window(report)) is not None:
        lines += [said] if markdown else paragraph(said, "")
    for result in report.groups:
        lines += ["", *_group_lines(result, markdown)]
    if report.bought is not None:
        lines += ["", _bought_line(report.bought)]
    for note in report.notes:
        lines += _prose(note, markdown) if markdown else paragraph(note, "")
    if report.next:
        lines += ["", "next:" if report.action != FIND else "to buy the cheapest:"]
        lines += [f"- `{step}`" if markdown and step.startswith(("fmcluster ", "npx ")) else
                  f"- {step}" if markdown else f"  {step}" for step in report.next]
    return "\n".join(lines) + "\n"


def _offer_json(row: Row) -> dict[str, Any]:
    o = row.offer
    found: dict[str, Any] = {
        "id": o.id, "kind": o.kind, "instance_type": o.instance_type, "instances": o.instances,
        "start": _iso(o.start), "end": _iso(o.end), "hours": o.hours, "minutes": o.minutes,
        "availability_zone": o.zone or None, "availability_zone_id": o.zone_id,
        "upfront_fee": _decimal(o.upfront), "currency": o.currency or None, "hourly": _decimal(o.hourly),
        "instance_hourly": _decimal(o.instance_hourly), "usable": row.usable, "unfit": row.unfit,
    }
    if o.ultraserver:
        found.update(ultraserver_type=o.ultraserver, ultraserver_count=o.ultraservers)
    if row.move is not None:
        found["move"] = {"availability_zone_id": row.move.new, "allowed": row.move.allowed,
                         "problems": list(row.move.problems), "data_loss": row.move.data_loss,
                         "replaced": [{"stack": m.stack, "what": m.what, "data": m.data} for m in row.move.moved]}
    return found


def _iso(value: Optional[datetime]) -> Optional[str]:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def _decimal(value: Optional[Decimal]) -> Optional[str]:
    return f"{value:.2f}" if value is not None else None


def render_json(report: CapacityReport) -> str:
    win = report.window
    held = report.held
    bought = report.bought
    document = {
        "action": report.action, "cluster": report.cluster, "region": report.region, "spec": report.spec_path,
        "availability_zone_id": report.az_id, "ok": report.ok, "error": report.error, "hint": report.hint,
        "window": {"hours": win.hours, "start": _iso(win.start), "end": _iso(win.end)} if win else None,
        "held": {"id": held.id, "state": held.state, "start": _iso(held.start), "end": _iso(held.end),
                 "instances": held.instances} if held else None,
        "groups": [{"group": g.group, "instance_type": g.instance_type, "instances": g.instances, "kind": g.kind,
                    "operation": SEARCH[g.kind], "skipped": g.skipped,
                    "failure": {"kind": g.failure.kind, "message": g.failure.message, "hint": g.failure.hint}
                    if g.failure else None, "needs": list(g.needs), "offerings": [_offer_json(r) for r in g.rows]}
                   for g in report.groups],
        "bought": {"offering": bought.offer.id, "id": bought.id, "state": bought.state,
                   "end": _iso(bought.end or bought.offer.end), "upfront_fee": _decimal(bought.offer.upfront),
                   "currency": bought.offer.currency or None, "written": list(bought.written)} if bought else None,
        "notes": list(report.notes), "next": list(report.next),
    }
    return json.dumps(document, indent=2) + "\n"


def render(report: CapacityReport, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr): the report (JSON whatever happened), and on stderr what stopped it."""
    err = ""
    if report.error is not None and fmt != "json":
        err = f"error: {report.error}\n" + (f"  hint: {report.hint}\n" if report.hint else "")
    if fmt == "json":
        return render_json(report), err
    shown = report.groups or report.bought or report.held or (report.action == FIND and report.error is None)
    if report.invalid or not shown:
        return "", err
    return render_text(report, markdown=fmt == "markdown"), err


def exit_code(report: CapacityReport) -> int:
    """0: offerings found (find, extend's list) or bought and written; 1: nothing found, refused,
    not bought, or what was bought not written; 2: the command line or spec cannot be used."""
    if report.invalid:
        return 2
    return 0 if report.ok else 1

