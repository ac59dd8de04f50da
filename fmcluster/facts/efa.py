"""EFA network-interface layout of an instance type: one pure function of a catalog entry.

Sources and details: docs/research-notes.md, "fmcluster/facts/efa.py"."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from fmcluster.facts.catalog import InstanceType


class InterfaceMode(str, enum.Enum):
    EFA_ONLY = "efa-only"  # ENA primary + efa-only on every EFA card (maximum bandwidth, fewest IPs)
    EFA = "efa"  # efa (EFA with ENA) interfaces only, one address each


@dataclass(frozen=True)
class Interface:
    network_card_index: int
    device_index: int
    interface_type: str  # "interface" (ENA), "efa" or "efa-only"

    @property
    def takes_ip(self) -> bool:
        return self.interface_type != "efa-only"

    @property
    def is_efa(self) -> bool:
        return self.interface_type in ("efa", "efa-only")


def efa_layout(instance: InstanceType, mode: InterfaceMode = InterfaceMode.EFA_ONLY,
               efa: bool = True) -> tuple[Interface, ...]:
    """The network interfaces of one instance: primary first, then one per EFA-capable card.

    With ``efa=False`` (or an instance type without EFA) the layout is the single ENA primary.
    """
    if not (efa and instance.efa_supported):
        return (Interface(0, 0, "interface"),)
    efa_cards = instance.efa_layout_cards
    card0_efa = bool(efa_cards) and efa_cards[0].index == 0
    if mode is InterfaceMode.EFA:
        primary = Interface(0, 0, "efa" if card0_efa else "interface")
        return (primary,) + tuple(Interface(c.index, 0, "efa") for c in efa_cards if c.index != 0)
    interfaces = [Interface(0, 0, "interface")]
    for card in efa_cards:
        interfaces.append(Interface(card.index, 1 if card.index == 0 else 0, "efa-only"))
    return tuple(interfaces)


def addresses_per_node(instance: InstanceType, mode: InterfaceMode = InterfaceMode.EFA_ONLY,
                       efa: bool = True) -> int:
    """Private IPv4 addresses one node takes in its subnet (efa-only interfaces take none)."""
    return sum(1 for i in efa_layout(instance, mode, efa) if i.takes_ip)


def lnet_efa_interfaces(instance: InstanceType, *, efa: bool, lustre_efa: bool) -> int:
    """EFA devices LNet configures on a node: the catalog's number where the node has EFA and
    the file system is EFA-enabled; 0 (LNet over TCP only) otherwise."""
    return instance.lnet_efa_interfaces if efa and lustre_efa else 0
