"""What `fmcluster capacity` was asked (Request) and what it found or did (CapacityReport): each
group's offerings as shown, what was bought and written into the spec, and what to do next."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Optional

from fmcluster.deploy.capacity.aws import Failure
from fmcluster.deploy.capacity.offerings import Offer, Window
from fmcluster.deploy.capacity.placement import AzMove

FIND, BUY, EXTEND = "find", "buy", "extend"
ACTIONS = (FIND, BUY, EXTEND)


@dataclass(frozen=True)
class Request:
    """A command line of `fmcluster capacity ACTION`. find: `group` (None: every GPU group),
    `start`, `end`, `hours`. buy: the group, the `offering` and the window it was found in;
    `yes` with `max_price` instead of the question; `move_az` to take an offering in another AZ;
    `plan_name` (HyperPod). extend: the group, `hours`, and the `offering` to buy (None: list them)."""

    action: str
    spec_path: str
    group: Optional[str] = None
    start: Optional[datetime] = None
    end: Optional[datetime] = None
    hours: Optional[int] = None
    offering: Optional[str] = None
    yes: bool = False
    max_price: Optional[Decimal] = None
    move_az: bool = False
    plan_name: Optional[str] = None


@dataclass(frozen=True)
class Row:
    """An offering as a table shows it: why it cannot serve the group (`unfit`), and where it lies
    in another AZ than the spec's, what moving the spec there means (`move`)."""

    offer: Offer
    unfit: Optional[str] = None
    move: Optional[AzMove] = None

    @property
    def usable(self) -> bool:
        return self.unfit is None and (self.move is None or self.move.allowed)


@dataclass(frozen=True)
class GroupResult:
    """One node group's offerings (cheapest first), or why it was not searched (`skipped`) or
    what stopped the search (`failure`); `needs`: what the spec must change before a bought
    reservation can be written into it (the rules' errors of the spec with it)."""

    group: str
    instance_type: str
    instances: int
    kind: str
    rows: tuple[Row, ...] = ()
    skipped: Optional[str] = None
    failure: Optional[Failure] = None
    needs: tuple[str, ...] = ()
    ultraserver: Optional[str] = None
    ultraservers: int = 0


@dataclass(frozen=True)
class Held:
    """The block or training plan a group holds now (extend): its id, state and window."""

    id: str
    state: str
    start: Optional[datetime]
    end: Optional[datetime]
    instances: int = 0


@dataclass(frozen=True)
class Bought:
    """What was bought: the offering, what identifies it now (a block's cr-... id, a plan's ARN),
    its state as the purchase answered, and what was written into the spec."""

    offer: Offer
    id: str
    state: str
    written: tuple[str, ...] = ()
    end: Optional[datetime] = None  # an extension: the new end


@dataclass(frozen=True)
class CapacityReport:
    action: str
    cluster: str
    region: str
    spec_path: str
    az_id: str
    window: Optional[Window] = None
    groups: tuple[GroupResult, ...] = ()
    held: Optional[Held] = None
    bought: Optional[Bought] = None
    error: Optional[str] = None
    hint: Optional[str] = None
    invalid: bool = False  # the command line (or the spec) cannot be used: exit 2
    notes: tuple[str, ...] = ()
    next: tuple[str, ...] = ()  # what to run next

    @property
    def found(self) -> bool:
        """Some group has an offering it can use."""
        return any(r.usable for g in self.groups for r in g.rows)

    @property
    def ok(self) -> bool:
        if self.invalid or self.error is not None:
            return False
        if self.action == FIND or (self.action == EXTEND and self.bought is None):
            return self.found and not any(g.failure for g in self.groups)
        return self.bought is not None
