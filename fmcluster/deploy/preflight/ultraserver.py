"""An UltraServer group's Capacity Blocks (EC2): behind its reservations, a block of its
UltraServer type, in the cluster's AZ, in a state that takes instances (DescribeCapacityBlocks),
and the block's accelerator interconnect and capacity (DescribeCapacityBlockStatus), which any
block EC2 names by a CapacityBlockId reports too (block_statuses)."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial
from typing import Iterable, Mapping

from fmcluster.deploy.preflight.context import FAIL, PASS, WARN, Check, Context, when
from fmcluster.deploy.preflight.guard import guard
from fmcluster.deploy.preflight.shapes import CapacityBlock, CapacityBlockStatus, CapacityReservation
from fmcluster.facts import catalog
from fmcluster.facts.controlplanes import ULTRASERVER_BLOCK_TERMINATION_MINUTES
from fmcluster.spec.models import NodeGroupSpec

# CapacityBlock.State (botocore's CapacityBlockResourceState): the rest (expired, unavailable,
# cancelled, failed, payment-failed) take no instances
BLOCK_OK_STATES = {"active"}
BLOCK_WAIT_STATES = {"scheduled", "payment-pending"}


def ultraserver_blocks(ctx: Context, groups: list[NodeGroupSpec], found: list[CapacityReservation], name: str
                       ) -> Iterable[Check]:
    """The Capacity Blocks of an UltraServer group's reservations: each is an UltraServer block
    of the group's UltraServer type, in the cluster's zone, in a state that takes instances;
    then their accelerator interconnect. DescribeCapacityBlocks says nothing of how many
    UltraServers a block holds, so neither does preflight (the size check counts instances)."""
    loose = [r["CapacityReservationId"] for r in found if not r.get("CapacityBlockId")]
    if loose:
        wanted = groups[0].capacity.ultraserver_type
        yield Check(f"{name}: UltraServer block", FAIL, f"{', '.join(loose)} {'is' if len(loose) == 1 else 'are'} "
                    "not an UltraServer Capacity Block (no CapacityBlockId)",
                    f"buy a {wanted} block: aws ec2 describe-capacity-block-offerings --ultraserver-type {wanted} "
                    f"--ultraserver-count {groups[0].capacity.ultraserver_count} --capacity-duration-hours HOURS "
                    f"--region {ctx.spec.region}")
    ids = sorted({r["CapacityBlockId"] for r in found if r.get("CapacityBlockId")})
    if not ids:
        return
    # one call, as for the reservations: a spec names a few blocks
    answer = ctx.client("ec2").describe_capacity_blocks(CapacityBlockIds=ids)
    blocks: dict[str, CapacityBlock] = {b["CapacityBlockId"]: b for b in answer["CapacityBlocks"]}
    for block_id in ids:
        block = blocks.get(block_id)
        if block is None:
            yield Check(f"{name}: UltraServer block", FAIL, f"DescribeCapacityBlocks does not list {block_id}",
                        "check that the credentials are of the account that owns the block")
            continue
        for group in groups:
            yield from block_checks(group, block, ctx.spec.availability_zone_id, ctx.now, ctx.window)
    if blocks:
        yield from guard(ctx, f"{name}: interconnect", partial(_interconnect, ctx, blocks, name))


def _interconnect(ctx: Context, blocks: Mapping[str, CapacityBlock], name: str) -> Iterable[Check]:
    statuses = _statuses(ctx, sorted(blocks))
    for block_id, block in sorted(blocks.items()):
        found = statuses.get(block_id)
        status = found.get("InterconnectStatus") if found else None
        command = _status_command(ctx, block_id)
        if status == "ok":
            yield Check(f"{name}: interconnect", PASS, f"{block_id}: accelerator interconnect ok")
        elif status == "impaired":
            yield _impaired(name, block_id, command)
        elif block.get("State") not in BLOCK_OK_STATES:
            yield Check(f"{name}: interconnect", WARN, f"{block_id}: accelerator interconnect "
                        f"{status or 'not reported'} ({block.get('State') or 'unknown state'} block)",
                        f"EC2 reports it once the block is active: {command}")
        else:
            yield Check(f"{name}: interconnect", WARN, f"{block_id}: accelerator interconnect "
                        f"{status or 'not reported'}", f"run preflight again in a few minutes, or {command}")
        if found:
            yield capacity_check(name, found, command)


def block_statuses(ctx: Context, ids: list[str], name: str) -> Iterable[Check]:
    """The status of the Capacity Blocks a group's reservations belong to (not an UltraServer
    group's: ultraserver_blocks reads those): the capacity EC2 reports unavailable, and the
    accelerator interconnect where EC2 reports one."""
    statuses = _statuses(ctx, ids)
    for block_id in ids:
        command = _status_command(ctx, block_id)
        status = statuses.get(block_id)
        if status is None:
            yield Check(f"{name}: block status", WARN, f"DescribeCapacityBlockStatus does not list {block_id}",
                        f"run preflight again in a few minutes, or {command}")
            continue
        interconnect = status.get("InterconnectStatus")
        if interconnect == "ok":
            yield Check(f"{name}: interconnect", PASS, f"{block_id}: accelerator interconnect ok")
        elif interconnect == "impaired":
            yield _impaired(name, block_id, command)
        yield capacity_check(name, status, command)


def capacity_check(name: str, status: CapacityBlockStatus, command: str) -> Check:
    """What EC2 says of a block's capacity: some of it unavailable (a failed system status check)
    is a warning; TotalAvailableCapacity is what can still be launched, less what runs."""
    block_id, total = status["CapacityBlockId"], status.get("TotalCapacity", 0)
    unavailable, available = status.get("TotalUnavailableCapacity", 0), status.get("TotalAvailableCapacity", 0)
    if unavailable:
        return Check(f"{name}: block capacity", WARN, f"{block_id}: {unavailable} of its capacity of {total} "
                     "unavailable (a failed system status check): fewer nodes than the block holds can run",
                     f"{command}; if it stays unavailable, open an AWS Support case")
    return Check(f"{name}: block capacity", PASS, f"{block_id}: capacity {total}, none unavailable, {available} "
                 "free to launch")


def _statuses(ctx: Context, ids: list[str]) -> dict[str, CapacityBlockStatus]:
    # one call, as for the reservations: a spec names a few blocks
    answer = ctx.client("ec2").describe_capacity_block_status(CapacityBlockIds=ids)
    return {s["CapacityBlockId"]: s for s in answer["CapacityBlockStatuses"]}


def _status_command(ctx: Context, block_id: str) -> str:
    return f"aws ec2 describe-capacity-block-status --capacity-block-ids {block_id} --region {ctx.spec.region}"


def _impaired(name: str, block_id: str, command: str) -> Check:
    return Check(f"{name}: interconnect", WARN, f"{block_id}: accelerator interconnect impaired: NVLink "
                 "traffic between the block's instances may fail or slow down",
                 f"{command}; if it stays impaired, open an AWS Support case")


def block_checks(group: NodeGroupSpec, block: CapacityBlock, az_id: str, now: datetime,
                 window: tuple[datetime, datetime] | None) -> Iterable[Check]:
    """What one DescribeCapacityBlocks entry says about an UltraServer node group: its UltraServer
    type, AZ ID and state (EC2 terminates an UltraServer block's instances from
    ULTRASERVER_BLOCK_TERMINATION_MINUTES before its end)."""
    bid, name, wanted = block["CapacityBlockId"], f"reservation {group.name}", group.capacity.ultraserver_type
    kind = block.get("UltraserverType")
    if kind == wanted:
        yield Check(f"{name}: UltraServer type", PASS, f"{bid}: {kind}")
    else:
        server = catalog.ULTRASERVERS.get(kind or "")
        hint = (f"set capacity.ultraserver_type: {kind}" if server and server.instance_type == group.instance_type
                else f"target a {wanted} UltraServer Capacity Block")
        yield Check(f"{name}: UltraServer type", FAIL, f"{bid} is a block of "
                    f"{kind + ' UltraServers' if kind else 'instances, not of UltraServers'}; node group "
                    f"{group.name} says {wanted}", hint)
    if block.get("AvailabilityZoneId") != az_id:
        yield Check(f"{name}: block AZ ID", FAIL, f"{bid} is in {block.get('AvailabilityZoneId')} "
                    f"({block.get('AvailabilityZone')}), the cluster's GPU AZ ID is {az_id}",
                    f"set availability_zone_id: {block.get('AvailabilityZoneId')}")
    else:
        yield Check(f"{name}: block AZ ID", PASS, f"{bid}: {az_id}")
    start, end, state = block.get("StartDate"), block.get("EndDate"), block.get("State", "")
    span = f"{when(start)} to {when(end)}"
    minutes = ULTRASERVER_BLOCK_TERMINATION_MINUTES
    drain = (f"; EC2 terminates its instances from {when(end - timedelta(minutes=minutes))} ({minutes} minutes "
             "before the end)" if end else "")
    from_, until = window or (now, now)
    covers = (start is None or start <= from_) and (end is None or end >= until)
    if state in BLOCK_OK_STATES:
        yield Check(f"{name}: block state", PASS, f"{bid}: {state} UltraServer Capacity Block, {span}{drain}")
    elif state in BLOCK_WAIT_STATES:
        yield Check(f"{name}: block state", PASS if window and covers else WARN,
                    f"{bid}: {state} UltraServer Capacity Block, {span}{drain}",
                    None if window else "pass --window START/END to check the planned window")
    else:
        yield Check(f"{name}: block state", FAIL, f"{bid}: {state or 'unknown state'} UltraServer Capacity Block, "
                    f"{span}", "nodes cannot launch into it: buy a new UltraServer Capacity Block")
