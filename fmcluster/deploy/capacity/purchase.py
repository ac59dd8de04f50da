"""The rules of a purchase, apart from the calls that make it: when fmcluster may buy (asked on a
terminal, or told `--yes` with a `--max-price`), the price it holds an offering to, the question
it asks, what it writes into the spec (the group's capacity field: `reservation_id`, the block's
cr-... id that the launch templates' CapacityReservationSpecification target, or on SageMaker
HyperPod `training_plan_arn`; `type: capacity-block` with it; `availability_zone_id` where the
capacity lies in another AZ), and what to run next. Pure."""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal
from typing import Optional

from fmcluster.deploy.capacity.offerings import BLOCK_EXTENSION, PLAN, PLAN_EXTENSION, Offer, argument, iso
from fmcluster.deploy.capacity.report import Request
from fmcluster.deploy.capacity.spec_edit import Change
from fmcluster.facts.controlplanes import CAPACITY_BLOCK
from fmcluster.spec.models import ClusterSpec

STDIN = "-"
WHAT = {PLAN: "training plan", PLAN_EXTENSION: "training plan extension", BLOCK_EXTENSION: "Capacity Block extension"}
# A value of the right form for each field, to try the spec with before anything is bought
TRIAL_RESERVATION = "cr-" + "0" * 17
PLAN_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}")  # sagemaker TrainingPlanName
PLAN_NAME_MAX = 64


def what(offer: Offer) -> str:
    return WHAT.get(offer.kind, "Capacity Block")


def refusal(request: Request, can_ask: bool) -> Optional[tuple[str, str, bool]]:
    """Why a purchase may not go ahead on this command line, with a hint and whether the command
    line itself is invalid (exit 2); None: it may (the price aside)."""
    if request.yes and request.max_price is None:
        return ("--yes buys without asking, so it needs --max-price: the most the offering may cost up front",
                "give --max-price PRICE, in the offering's currency (`fmcluster capacity find` shows it)", True)
    if request.plan_name is not None and not PLAN_NAME.fullmatch(request.plan_name):
        return (f"--plan-name {request.plan_name!r} is no training plan name",
                "1 to 64 letters and digits, hyphens between them (SageMaker's TrainingPlanName)", True)
    if request.action != "extend" and request.spec_path == STDIN:
        return ("buy writes the reservation into the spec file: give its path, not -",
                "fmcluster capacity buy cluster.yaml GROUP OFFERING ...", True)
    if not request.yes and not can_ask:
        return ("nothing bought: there is no terminal to ask on",
                "run it on a terminal to be asked, or give --yes with --max-price PRICE", False)
    return None


def fee(value: Optional[Decimal], currency: str) -> str:
    """`USD 258,048.00`; the unknown price says so."""
    return f"{currency} {value:,.2f}".strip() if value is not None else "an unknown price"


def price_refusal(offer: Offer, max_price: Optional[Decimal]) -> Optional[str]:
    """Why `offer` is not bought at its price (read again just before): unknown, or above
    `max_price`."""
    if offer.upfront is None:
        return f"{offer.id} has no price fmcluster can read (UpfrontFee): nothing bought"
    if max_price is not None and offer.upfront > max_price:
        return (f"{offer.id} costs {fee(offer.upfront, offer.currency)} up front, above --max-price "
                f"{max_price:,.2f}: nothing bought")
    return None


def question(offer: Offer, group: str) -> str:
    """What the terminal asks before buying."""
    hourly = fee(offer.hourly, offer.currency)
    span = f"{iso(offer.start)} to {iso(offer.end)}"
    return (f"Buy {what(offer)} {offer.id} for node group {group}: {offer.instances} x {offer.instance_type} in "
            f"{offer.where}, {span}, for {fee(offer.upfront, offer.currency)} up front ({hourly} an hour)? "
            "Type yes to buy: ")


def field(spec: ClusterSpec) -> str:
    """The capacity field the purchase goes into."""
    return "training_plan_arn" if spec.orchestrator.control_plane.hyperpod else "reservation_id"


def trial_value(spec: ClusterSpec, plan_name: str) -> str:
    """A value of the form of what will be written, to try the spec with before buying."""
    if spec.orchestrator.control_plane.hyperpod:
        return f"arn:aws:sagemaker:{spec.region}:{spec.account or '0' * 12}:training-plan/{plan_name}"
    return TRIAL_RESERVATION


def changes(spec: ClusterSpec, group: str, value: str, az_id: Optional[str] = None) -> list[Change]:
    """What buying for `group` writes into the spec: `type: capacity-block` where it is not,
    the reservation id (or plan ARN), and the GPU AZ ID where the capacity lies in another."""
    index = next(i for i, g in enumerate(spec.node_groups) if g.name == group)
    base = ("node_groups", index, "capacity")
    found: list[Change] = []
    if az_id is not None and az_id != spec.availability_zone_id:
        found.append(Change(("availability_zone_id",), az_id))
    if spec.node_groups[index].capacity.type != CAPACITY_BLOCK:
        found.append(Change(base + ("type",), CAPACITY_BLOCK))
    found.append(Change(base + (field(spec),), value))
    return found


def plan_name(spec: ClusterSpec, group: str, start: datetime, given: Optional[str] = None) -> str:
    """The training plan's name: `given`, else CLUSTER-GROUP-YYYYMMDD (its start), cut to 64
    characters (SageMaker's TrainingPlanName)."""
    if given:
        return given
    name = f"{spec.name}-{group}-{start:%Y%m%d}"
    return name[:PLAN_NAME_MAX].rstrip("-")


def duration(hours: int) -> str:
    """`--duration`'s value for `hours`: days where they are whole (`7d`), else hours."""
    return f"{hours // 24}d" if hours % 24 == 0 else f"{hours}h"


def _price(offer: Offer) -> str:
    return f"{offer.upfront:.2f}" if offer.upfront is not None else "PRICE"


def buy_command(spec_path: str, group: str, offer: Offer, hours: int, move_az: bool = False) -> str:
    """The command line that buys `offer` (found in a window of `hours`)."""
    return (f"fmcluster capacity buy {spec_path} {group} {offer.id} --start {argument(offer.start)} "
            f"--end {argument(offer.end)} --duration {duration(hours)} --max-price {_price(offer)}"
            + (" --move-az" if move_az else ""))


def extend_command(spec_path: str, group: str, offer: Offer, hours: int) -> str:
    return (f"fmcluster capacity extend {spec_path} {group} {offer.id} --duration {duration(hours)} "
            f"--max-price {_price(offer)}")


def after_buy(spec: ClusterSpec, spec_path: str, group: str, moved: bool) -> tuple[str, ...]:
    """What to run after a purchase was written into the spec."""
    cp = spec.orchestrator.control_plane
    steps = []
    if moved:
        steps.append(f"fmcluster diff --deployed {spec_path}: what moving the GPU AZ replaces, the file systems "
                     "among it, before anything is deployed (a cluster not deployed yet has nothing to lose)")
    steps.append(f"fmcluster preflight {spec_path}: the {'training plan' if cp.hyperpod else 'Capacity Block'}'s "
                 "state and window as the account sees them")
    steps.append(f"npx cdk deploy -c spec={spec_path} {spec.name}-cluster (the node group's stack; --all for a "
                 "first deploy), or merge the spec for the GitOps pipeline")
    if cp.type == "eks":
        steps.append(f"node group {group} is created with 0 nodes and scaled up when the block becomes active "
                     "(its CapacityBlockScaler)")
    elif cp.type == "pcs":
        steps.append(f"AWS PCS takes node group {group} while the block is scheduled or active; its nodes "
                     "launch once it is active")
    else:
        steps.append(f"SageMaker HyperPod launches instance group {group} when the plan's capacity is there")
    return tuple(steps)


def after_extend(spec: ClusterSpec, spec_path: str) -> tuple[str, ...]:
    """What follows an extension: nothing to deploy."""
    if spec.orchestrator.control_plane.hyperpod:
        return ("nothing to deploy: the training plan keeps its ARN, and its end is SageMaker's",
                f"fmcluster preflight {spec_path}: the plan as the account sees it")
    return ("nothing to deploy: the block keeps its reservation id, and fmcluster reads its end from EC2 at run "
            "time (the EKS Capacity Block scaler, the node replacer's last-hour guard)",
            f"fmcluster preflight {spec_path}: the new end, once the payment has succeeded")
