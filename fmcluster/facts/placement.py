"""Which cluster placement group a node group gets: one pure rule, shared by the network stack
(which creates the groups) and the launch templates (which name them).

Sources and details: docs/research-notes.md, "fmcluster/facts/placement.py"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fmcluster.facts.controlplanes import ON_DEMAND, SPOT

if TYPE_CHECKING:
    from typing import Protocol

    class _Capacity(Protocol):
        @property
        def type(self) -> str: ...

    class Placeable(Protocol):
        """What placement_for reads of a node group (a NodeGroupSpec has it)."""

        @property
        def placement_group(self) -> str: ...
        @property
        def efa(self) -> bool | None: ...
        @property
        def capacity(self) -> _Capacity: ...

AUTO, NONE = "auto", "none"
PLACED_BY_AUTO = (ON_DEMAND, SPOT)  # capacity types that `auto` puts in a new placement group


@dataclass(frozen=True)
class Placement:
    create: bool  # the network stack creates a cluster placement group for the node group
    name: str | None = None  # an existing group's name (never set when create is true)


def placement_for(group: Placeable) -> Placement:
    """The placement of a node group (a `NodeGroupSpec`, or anything with `placement_group`,
    `efa` and `capacity.type`)."""
    choice = group.placement_group
    if choice == NONE:
        return Placement(create=False)
    if choice == AUTO:
        return Placement(create=bool(group.efa) and group.capacity.type in PLACED_BY_AUTO)
    return Placement(create=False, name=choice)
