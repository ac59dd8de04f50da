"""`fmcluster capacity find`, `buy` and `extend`, step by step: each reads AWS through the
client factory it is given (fmcluster.deploy.capacity.aws), decides with the pure modules
(offerings, placement, purchase, spec_edit) and returns a CapacityReport. Nothing is bought
before the offering was read again at its current price, the spec was tried with what the
purchase writes, and the question was answered (or --yes given within --max-price); what was
bought is in the report whatever happens after."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Optional

from fmcluster.deploy.capacity import aws
from fmcluster.deploy.capacity.aws import Failure
from fmcluster.deploy.capacity.offerings import (
    BLOCK,
    BLOCK_EXTENSION,
    PLAN_EXTENSION,
    Offer,
    Window,
    block_duration_problem,
    block_extension,
    block_offer,
    cheapest_first,
    iso,
    plan_extension,
    plan_offer,
    search,
    unfit,
    window,
)
from fmcluster.deploy.capacity.placement import AzMove, az_move, new_errors
from fmcluster.deploy.capacity.purchase import (
    after_buy,
    after_extend,
    buy_command,
    changes,
    extend_command,
    plan_name,
    price_refusal,
    question,
    refusal,
    trial_value,
)
from fmcluster.deploy.capacity.report import Bought, CapacityReport, GroupResult, Held, Request, Row
from fmcluster.deploy.capacity.spec_edit import EditError, apply
from fmcluster.deploy.preflight.context import ClientFactory
from fmcluster.facts import naming
from fmcluster.facts.controlplanes import CAPACITY_BLOCK
from fmcluster.spec import loader, placeholders
from fmcluster.spec.diagnostics import dotted
from fmcluster.spec.models import ClusterSpec, NodeGroupSpec

Confirm = Callable[[str], bool]  # asks the question on a terminal: whether the answer was yes
# The states of a Capacity Block (ec2 CapacityReservationState) and a training plan (sagemaker
# TrainingPlanStatus) that can be extended: EC2 User Guide, "Extend Capacity Blocks"
EXTENDABLE_BLOCK = ("active", "scheduled")
ENDED_PLAN = ("Expired", "Failed")


def _report(spec: ClusterSpec, request: Request, **fields: Any) -> CapacityReport:
    return CapacityReport(request.action, spec.name, spec.region, request.spec_path, spec.availability_zone_id,
                          **fields)


def _invalid(spec: ClusterSpec, request: Request, message: str, hint: Optional[str] = None) -> CapacityReport:
    return _report(spec, request, error=message, hint=hint, invalid=True)


def _stopped(spec: ClusterSpec, request: Request, failed: Failure, **fields: Any) -> CapacityReport:
    return _report(spec, request, error=failed.message, hint=failed.hint, **fields)


def _group(spec: ClusterSpec, name: Optional[str]) -> NodeGroupSpec | str:
    """The GPU node group `name`, or why there is none."""
    found = next((g for g in spec.node_groups if g.name == name), None)
    if found is None:
        return f"the spec has no node group {name!r}; its groups: {', '.join(g.name for g in spec.node_groups)}"
    if not found.instance.is_gpu:
        return f"node group {name} is of {found.instance_type}, no GPU type: reserved GPU capacity is for GPU groups"
    return found


def _allowed(spec: ClusterSpec, request: Request, confirm: Optional[Confirm],
             buying: bool) -> NodeGroupSpec | CapacityReport:
    """The request's GPU group, or the report of why the command goes no further: a purchase that
    may not be made on this command line (purchase.refusal), a group that is not there."""
    refused = refusal(request, confirm is not None) if buying else None
    if refused is not None:
        message, hint, invalid = refused
        return _report(spec, request, error=message, hint=hint, invalid=invalid)
    chosen = _group(spec, request.group)
    return _invalid(spec, request, chosen) if isinstance(chosen, str) else chosen


# ---- find ----------------------------------------------------------------------------------------

def find(spec: ClusterSpec, request: Request, client: ClientFactory, now: datetime) -> CapacityReport:
    """The offerings of each GPU group (or of `request.group`) in the window asked for."""
    if request.group is not None:
        chosen = _group(spec, request.group)
        if isinstance(chosen, str):
            return _invalid(spec, request, chosen)
        groups = [chosen]
    else:
        groups = [g for g in spec.node_groups if g.instance.is_gpu]
        if not groups:
            return _invalid(spec, request, "the spec has no GPU node group")
    win = window(request.start, request.end, request.hours, now)
    if isinstance(win, str):
        return _invalid(spec, request, win)
    hyperpod = spec.orchestrator.control_plane.hyperpod
    if not hyperpod and (problem := block_duration_problem(win.hours)) is not None:
        return _invalid(spec, request, problem)
    try:
        zones = aws.zones(client)
        types = aws.plan_types(client) if hyperpod else ()
    except aws.ERRORS as exc:
        return _stopped(spec, request, aws.failure(exc, "DescribeAvailabilityZones"), window=win)
    moves: dict[str, AzMove] = {}
    results = tuple(_search(spec, g, win, client, zones, types, moves) for g in groups)
    stop = next((r.failure for r in results if r.failure and r.failure.kind == "credentials"), None)
    if stop is not None:
        return _stopped(spec, request, stop, window=win)
    steps = tuple(step for r in results for step in _buy_commands(request.spec_path, r, win.hours))
    return _report(spec, request, window=win, groups=results, next=steps)


def _buy_commands(spec_path: str, result: GroupResult, hours: int) -> list[str]:
    """How to buy the cheapest usable offering of a group in the spec's AZ, and the cheapest in
    another AZ where it costs less an hour (rows are cheapest first)."""
    here = next((r for r in result.rows if r.usable and r.move is None), None)
    there = next((r for r in result.rows if r.usable and r.move is not None), None)
    found = [buy_command(spec_path, result.group, here.offer, hours)] if here else []
    if there is not None and (here is None or result.rows.index(there) < result.rows.index(here)):
        found.append(buy_command(spec_path, result.group, there.offer, hours, move_az=True))
    return found


def _search(spec: ClusterSpec, group: NodeGroupSpec, win: Window, client: ClientFactory, zones: dict[str, str],
            types: tuple[str, ...], moves: dict[str, AzMove]) -> GroupResult:
    """One group's offerings, each with what keeps it from the group and what taking it moves."""
    plan = search(spec, group, win, types)
    wanted = plan.need
    result = GroupResult(group.name, group.instance_type, wanted.instances, plan.kind,
                         ultraserver=wanted.ultraserver, ultraservers=wanted.ultraservers)
    if plan.skipped:
        return replace(result, skipped=plan.skipped)
    operation = "DescribeCapacityBlockOfferings" if plan.kind == BLOCK else "SearchTrainingPlanOfferings"
    try:
        if plan.kind == BLOCK:
            offers = [block_offer(raw, zones) for raw in aws.block_offerings(client, plan.kwargs)]
        else:
            offers = [plan_offer(raw, zones) for raw in aws.plan_offerings(client, plan.kwargs)]
    except aws.ERRORS as exc:
        return replace(result, failure=aws.failure(exc, operation))
    rows = []
    for offer in cheapest_first(offers):
        move = None
        if offer.zone_id is not None and offer.zone_id != spec.availability_zone_id:
            if offer.zone_id not in moves:
                moves[offer.zone_id] = az_move(spec, offer.zone_id, group.name)
            move = moves[offer.zone_id]
        why = unfit(offer, wanted) or (None if offer.zone_id else f"EC2 names no AZ ID for {offer.zone or 'it'}")
        rows.append(Row(offer, why, move))
    needs = tuple(new_errors(spec, changes(spec, group.name, trial_value(spec, f"{spec.name}-{group.name}"))))
    return replace(result, rows=tuple(rows), needs=needs)


# ---- buy -----------------------------------------------------------------------------------------

def buy(spec: ClusterSpec, request: Request, client: ClientFactory, now: datetime,
        confirm: Optional[Confirm]) -> CapacityReport:
    """Buy `request.offering` for `request.group` and write it into the spec."""
    chosen = _allowed(spec, request, confirm, buying=True)
    if isinstance(chosen, CapacityReport):
        return chosen
    start = request.start if request.start is not None and request.start > now else None
    win = window(start, request.end, request.hours, now)
    if isinstance(win, str):
        return _invalid(spec, request, win, "give the window `fmcluster capacity find` printed with the offering")
    try:
        text = _read(request.spec_path)
    except OSError as exc:
        return _invalid(spec, request, f"{request.spec_path}: {exc.strerror or exc}")
    try:
        mismatch = _account_mismatch(spec, aws.account(client))
        zones = aws.zones(client)
        types = aws.plan_types(client) if spec.orchestrator.control_plane.hyperpod else ()
    except aws.ERRORS as exc:
        return _stopped(spec, request, aws.failure(exc, "GetCallerIdentity"))
    if mismatch is not None:
        return _report(spec, request, error=mismatch[0], hint=mismatch[1])
    found = _search(spec, chosen, win, client, zones, types, {})
    row = next((r for r in found.rows if r.offer.id == request.offering), None)
    shown = replace(found, rows=(row,) if row else ())
    if found.skipped or found.failure:
        failed = found.failure or Failure("skipped", str(found.skipped))
        return _stopped(spec, request, failed, window=win, groups=(shown,))
    if row is None:
        return _report(spec, request, window=win, groups=(shown,),
                       error=f"{request.offering} is not offered for node group {chosen.name} in this window (any "
                             "more: offerings are first come, first served); nothing bought",
                       hint=f"run `fmcluster capacity find {request.spec_path} {chosen.name} --duration "
                            f"{win.hours}h` again and choose another")
    return _buy_row(spec, request, chosen, row, text, client, confirm, win, shown)


def _buy_row(spec: ClusterSpec, request: Request, group: NodeGroupSpec, row: Row, text: str, client: ClientFactory,
             confirm: Optional[Confirm], win: Window, shown: GroupResult) -> CapacityReport:
    offer = row.offer
    fields: dict[str, Any] = {"window": win, "groups": (shown,)}
    if row.unfit is not None:
        return _report(spec, request, error=f"{offer.id} does not fit node group {group.name}: {row.unfit}", **fields)
    if row.move is not None and not (request.move_az and row.move.allowed):
        why = "; ".join(row.move.problems)
        return _report(spec, request, **fields,
                       error=f"{offer.id} lies in {row.move.new}, not in the spec's AZ ID {row.move.old}"
                             + (f", and the spec cannot move there: {why}" if why else "") + "; nothing bought",
                       hint=None if why else "--move-az buys it and sets availability_zone_id with the reservation "
                                             "(`fmcluster capacity find` shows what that replaces)")
    if (priced := price_refusal(offer, request.max_price)) is not None:
        return _report(spec, request, error=priced, hint="raise --max-price, or choose another offering", **fields)
    name = plan_name(spec, group.name, offer.start, request.plan_name)
    az_id = row.move.new if row.move is not None else None
    try:
        trial = _tried(text, request.spec_path, changes(spec, group.name, trial_value(spec, name), az_id))
    except EditError as exc:
        return _report(spec, request, error=f"the spec cannot be written: {exc.message}; nothing bought",
                       hint=exc.hint, **fields)
    if trial:
        return _report(spec, request, error="the spec would not validate with the reservation; nothing bought: "
                                            + "; ".join(trial),
                       hint="change the spec first, then buy", **fields)
    if request.yes is False and (confirm is None or not confirm(question(offer, group.name))):
        return _report(spec, request, error="not confirmed: nothing bought", **fields)
    try:
        bought_id, state = _purchase(spec, client, offer, group.name, name)
    except aws.ERRORS as exc:
        failed = aws.failure(exc, "PurchaseCapacityBlock" if offer.kind == BLOCK else "CreateTrainingPlan")
        return _stopped(spec, request, replace(failed, message=failed.message + "; nothing bought"), **fields)
    written = changes(spec, group.name, bought_id, az_id)
    bought = Bought(offer, bought_id, state, tuple(str(c) for c in written))
    done = _write(request.spec_path, text, written)
    if done is not None:
        return _report(spec, request, bought=bought, error=f"bought {bought_id}, but {done[0]}",
                       hint=done[1] + "; " + "; ".join(f"write `{c}`" for c in written), **fields)
    return _report(spec, request, bought=bought,
                   notes=(f"{request.spec_path}: written and valid ({'; '.join(bought.written)})",),
                   next=after_buy(spec, request.spec_path, group.name, az_id is not None), **fields)


def _account_mismatch(spec: ClusterSpec, account: str) -> Optional[tuple[str, str]]:
    if spec.account is None or spec.account == account:
        return None
    example = " (an example account)" if placeholders.placeholder(spec.account) else ""
    return (f"the credentials are of account {account}, the spec names {spec.account}{example}: nothing bought",
            "use credentials of the spec's account (AWS_PROFILE), or put yours in the spec's account")


def _tried(text: str, path: str, trial: list[Any]) -> list[str]:
    """The errors of the spec file with `trial` written into it (none: it would validate)."""
    result = loader.load_text(apply(text, trial), path)
    return [f"{dotted(d.path)}: {d.message}" for d in result.errors]


def _purchase(spec: ClusterSpec, client: ClientFactory, offer: Offer, group: str, name: str) -> tuple[str, str]:
    """Buy `offer`: the id of what was bought and its state."""
    if offer.kind == BLOCK:
        reservation = aws.purchase_block(client, offer.id)
        return str(reservation["CapacityReservationId"]), str(reservation.get("State", ""))
    tags = {naming.CLUSTER_TAG: spec.name, naming.NODE_GROUP_TAG: group}
    return aws.create_plan(client, name, offer.id, tags), "bought"


def _read(path: str) -> str:
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def _write(path: str, before: str, written: list[Any]) -> Optional[tuple[str, str]]:
    """Write `written` into the spec file, as it was read (`before`), and validate it; what went
    wrong and what to do, else None."""
    try:
        now = _read(path)
    except OSError as exc:
        return f"{path} cannot be read again: {exc.strerror or exc}", "check the file"
    if now != before:
        return f"{path} changed while buying: not written", "write the reservation into it by hand"
    try:
        text = apply(before, written)
    except EditError as exc:
        return exc.message, exc.hint
    target = Path(os.path.realpath(path))
    temporary = target.with_name(f".{target.name}.fmcluster-capacity")
    try:
        with open(temporary, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(temporary, target.stat().st_mode & 0o7777)
        os.replace(temporary, target)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        return f"{path} cannot be written: {exc.strerror or exc}", "check its permissions"
    result = loader.load(path)
    if not result.ok:
        return (f"{path} does not validate as written: "
                + "; ".join(f"{dotted(d.path)}: {d.message}" for d in result.errors), f"fmcluster validate {path}")
    return None


# ---- extend --------------------------------------------------------------------------------------

def extend(spec: ClusterSpec, request: Request, client: ClientFactory, now: datetime,
           confirm: Optional[Confirm]) -> CapacityReport:
    """The extension offerings of a group's block (or training plan), and with `request.offering`
    the purchase of one."""
    chosen = _allowed(spec, request, confirm, buying=request.offering is not None)
    if isinstance(chosen, CapacityReport):
        return chosen
    hyperpod = spec.orchestrator.control_plane.hyperpod
    held_id = chosen.capacity.training_plan_arn if hyperpod else chosen.capacity.reservation_id
    if chosen.capacity.type != CAPACITY_BLOCK or not held_id:
        kind = "training plan" if hyperpod else "Capacity Block"
        return _invalid(spec, request, f"node group {chosen.name} holds no {kind} to extend (capacity.type "
                                       f"{chosen.capacity.type})", "buy one first: fmcluster capacity find")
    if (example := placeholders.placeholder(held_id)) is not None:
        return _invalid(spec, request, f"{held_id}: {example}", "put the id of your block (or plan) in the spec")
    if request.hours is None:
        return _invalid(spec, request, "give --duration: how much longer, such as 2d")
    if not hyperpod and (problem := block_duration_problem(request.hours)) is not None:
        return _invalid(spec, request, problem.replace("a Capacity Block lasts", "an extension lasts"))
    try:
        held, ended = (_plan_held if hyperpod else _block_held)(client, held_id, now)
        if ended is None:
            zones = aws.zones(client) if hyperpod else {}
            offers = _extensions(client, held_id, request.hours, held, chosen, zones)
    except aws.ERRORS as exc:
        return _stopped(spec, request, aws.failure(exc, "DescribeCapacityReservations"))
    if ended is not None:
        return _report(spec, request, held=held, error=ended,
                       hint=f"buy a new one: fmcluster capacity find {request.spec_path} {chosen.name} --duration "
                            f"{request.hours}h")
    result = GroupResult(chosen.name, chosen.instance_type, held.instances or chosen.max_nodes,
                         PLAN_EXTENSION if hyperpod else BLOCK_EXTENSION,
                         rows=tuple(Row(o) for o in cheapest_first(offers)))
    fields: dict[str, Any] = {"held": held, "groups": (result,)}
    if request.offering is None:
        steps = tuple(extend_command(request.spec_path, chosen.name, r.offer, request.hours) for r in result.rows[:1])
        return _report(spec, request, next=steps, **fields)
    row = next((r for r in result.rows if r.offer.id == request.offering), None)
    if row is None:
        return _report(spec, request, **fields,
                       error=f"{request.offering} is not an extension offered for {held_id} now; nothing bought",
                       hint=f"run `fmcluster capacity extend {request.spec_path} {chosen.name} --duration "
                            f"{request.hours}h` again and choose another")
    return _extend_row(spec, request, chosen, held_id, row.offer, client, confirm, fields)


def _extend_row(spec: ClusterSpec, request: Request, group: NodeGroupSpec, held_id: str, offer: Offer,
                client: ClientFactory, confirm: Optional[Confirm], fields: dict[str, Any]) -> CapacityReport:
    fields["groups"] = (replace(fields["groups"][0], rows=(Row(offer),)),)
    if (priced := price_refusal(offer, request.max_price)) is not None:
        return _report(spec, request, error=priced, hint="raise --max-price, or choose another offering", **fields)
    if not request.yes and (confirm is None or not confirm(question(offer, group.name))):
        return _report(spec, request, error="not confirmed: nothing bought", **fields)
    try:
        if offer.kind == BLOCK_EXTENSION:
            bought = aws.purchase_extension(client, offer.id, held_id)
            state, end = bought.get("CapacityBlockExtensionStatus", ""), bought.get("CapacityBlockExtensionEndDate")
        else:
            bought = aws.extend_plan(client, offer.id)
            state, end = bought.get("PaymentStatus") or bought.get("Status", ""), bought.get("EndDate")
    except aws.ERRORS as exc:
        failed = aws.failure(exc, "PurchaseCapacityBlockExtension")
        return _stopped(spec, request, replace(failed, message=failed.message + "; nothing bought"), **fields)
    done = Bought(offer, held_id, str(state), end=end or offer.end)
    return _report(spec, request, bought=done, next=after_extend(spec, request.spec_path), **fields)


def _block_held(client: ClientFactory, reservation_id: str, now: datetime) -> tuple[Held, Optional[str]]:
    """The block as EC2 describes it, and why it cannot be extended (None: it can)."""
    found = aws.reservation(client, reservation_id)
    if found is None:
        return Held(reservation_id, "not found", None, None), f"EC2 has no capacity reservation {reservation_id}"
    state, start, end = str(found.get("State", "")), found.get("StartDate"), found.get("EndDate")
    held = Held(reservation_id, state, start, end, int(found.get("TotalInstanceCount", 0)))
    if found.get("ReservationType") != "capacity-block":
        return held, f"{reservation_id} is an On-Demand Capacity Reservation, not a Capacity Block: nothing to extend"
    if end is not None and end <= now:
        return held, f"the Capacity Block {reservation_id} ended at {iso(end)} ({state})"
    if state not in EXTENDABLE_BLOCK:
        return held, (f"the Capacity Block {reservation_id} is {state}: EC2 extends a block only while it is active "
                      "or scheduled")
    return held, None


def _plan_held(client: ClientFactory, arn: str, now: datetime) -> tuple[Held, Optional[str]]:
    plan = aws.training_plan(client, arn)
    state, start, end = str(plan.get("Status", "")), plan.get("StartTime"), plan.get("EndTime")
    held = Held(arn, state, start, end, int(plan.get("TotalInstanceCount", 0)))
    if state in ENDED_PLAN or (end is not None and end <= now):
        return held, f"the training plan {arn} ended{f' at {iso(end)}' if end else ''} ({state})"
    return held, None


def _extensions(client: ClientFactory, held_id: str, hours: int, held: Held, group: NodeGroupSpec,
                zones: dict[str, str]) -> list[Offer]:
    if held_id.startswith("arn:"):
        return [plan_extension(raw, zones, group.instance_type, held.instances or group.max_nodes)
                for raw in aws.plan_extensions(client, held_id, hours)]
    return [block_extension(raw) for raw in aws.block_extensions(client, held_id, hours)]
