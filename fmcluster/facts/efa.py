"""EFA network-interface layout of an instance type: one pure function of a catalog entry.

Sources and details: docs/research-notes.md, "fmcluster/facts/efa.py"."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from fmcluster.facts.catalog import InstanceType


class InterfaceMode(str, enum.Enum):
    """The EFA layout a control plane's nodes get (which plane takes which: `fmcluster.facts.controlplanes`).

    EFA_ONLY: the layout the EC2 User Guide recommends ("Maximize network bandwidth on Amazon EC2
    instances with multiple network cards",
    https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html): an ENA primary
    interface (card 0, device 0; "You can't use an EFA-only network interface as the primary network
    interface"), an ``efa-only`` interface on card 0 device 1 where card 0 supports EFA, and an
    ``efa-only`` interface at device index 0 on every further EFA card. Only the primary takes an
    IP address. Amazon EKS managed node groups take it in their launch templates (EKS User Guide,
    "Manage EFA devices on Amazon EKS", the example launch template for P6-B200: 1 ENA and 8
    EFA-only interfaces); SageMaker HyperPod takes ``efa-only`` for its instance groups
    (`ClusterNetworkInterface.InterfaceType`: efa | efa-only, SageMaker API Reference).

    EFA: ``efa`` interfaces (EFA with ENA) only, one IP address each, for AWS PCS: its guide
    documents no other ("Create or update an EC2 launch template",
    https://docs.aws.amazon.com/pcs/latest/userguide/working-with_networking_efa_create-lt.html:
    ``efa`` on card 0 device 0 and on card 1 device 1; no PCS page mentions ``efa-only``) and PCS
    launches nodes from a launch template it derives from the given one. The primary is ``efa``
    where card 0 supports EFA (an ENA ``interface`` otherwise, as on p6-b300), and every further
    EFA card gets an ``efa`` interface: at device index 1 where card 0 carries EFA (p5, p5e, p5en,
    p6-b200), the index the EC2 guide gives an interface that carries ENA on a further card, as
    PCS's page and AWS's PCS launch template for P5 (aws-samples/aws-hpc-recipes,
    recipes/pcs/enable_efa/assets/pcs-lt-efa-p5.yaml: cards 1-31 at device index 1) do; at device
    index 0 where card 0 carries no EFA, as AWS's PCS template for p6-b300, validated on two
    p6-b300 nodes, does (awslabs/awsome-distributed-ai, architectures/aws-pcs/assets/
    add-cng-p6-b300.yaml: ENA primary, ``efa`` on cards 1-16 at device index 0, "PCS requires
    InterfaceType: efa (not efa-only)"; docs/OPERATIONS.md, section 5).

    An EFA-only card (`NetworkCard.efa_only`: p6e-gb200's cards 1, 5, 9, 13) cannot carry ``efa``,
    and PCS documents no layout for one (its guide has no P6e-GB200 launch template; AWS's PCS
    reference architecture lists P6e-GB200 as not yet supported, docs/ROADMAP.md): such a card gets
    the EC2 guide's ``efa-only`` interface at device index 0 in this mode too, the one form EC2
    takes there, and validate warns (rule pcs-efa-only-interfaces).
    """

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
    """The network interfaces of one instance: primary first, then one EFA interface per EFA card
    in use: an ``efa-only`` one at device index 0 (1 on card 0, behind the primary), an ``efa`` one
    (it carries ENA) at device index 1 (0 where card 0 carries no EFA: `InterfaceMode`).

    With ``efa=False`` (or an instance type without EFA) the layout is the single ENA primary.
    """
    if not (efa and instance.efa_supported):
        return (Interface(0, 0, "interface"),)
    efa_cards = instance.efa_layout_cards
    card0_efa = bool(efa_cards) and efa_cards[0].index == 0
    if mode is InterfaceMode.EFA:
        primary = Interface(0, 0, "efa" if card0_efa else "interface")
        further = 1 if card0_efa else 0  # device index of an efa interface on a further card
        return (primary,) + tuple(Interface(c.index, 0, "efa-only") if c.efa_only
                                  else Interface(c.index, further, "efa") for c in efa_cards if c.index != 0)
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
