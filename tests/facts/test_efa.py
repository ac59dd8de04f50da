"""EFA interface layout: the EC2 rule for every GPU type, and the `efa` mode."""

import pytest

from fmcluster.facts import catalog
from fmcluster.facts.efa import InterfaceMode, addresses_per_node, efa_layout

# instance type: (EFA-only interfaces, cards used by EFA)
EXPECTED = {
    "p5.4xlarge": (1, [0]),
    "p5.48xlarge": (32, list(range(32))),
    "p5e.48xlarge": (32, list(range(32))),
    "p5en.48xlarge": (16, list(range(16))),
    "p6-b200.48xlarge": (8, list(range(8))),
    "p6-b300.48xlarge": (16, list(range(1, 17))),
}


def _triples(layout):
    return [(i.network_card_index, i.device_index, i.interface_type) for i in layout]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_primary_is_ena_on_card0_device0(name):
    layout = efa_layout(catalog.get(name))
    assert _triples(layout)[0] == (0, 0, "interface")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_one_efa_only_interface_per_efa_card(name):
    count, cards = EXPECTED[name]
    layout = efa_layout(catalog.get(name))
    efa = [i for i in layout if i.interface_type == "efa-only"]
    assert len(efa) == count
    assert [i.network_card_index for i in efa] == cards
    assert len(layout) == count + 1


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_device_indices(name):
    """Card 0's EFA is device 1 (behind the primary); every other card's is device 0."""
    for i in efa_layout(catalog.get(name))[1:]:
        assert i.device_index == (1 if i.network_card_index == 0 else 0)


def test_p5_full_layout():
    layout = _triples(efa_layout(catalog.get("p5.48xlarge")))
    assert layout[:3] == [(0, 0, "interface"), (0, 1, "efa-only"), (1, 0, "efa-only")]
    assert layout[-1] == (31, 0, "efa-only")


def test_p6_b300_card0_has_no_efa():
    layout = _triples(efa_layout(catalog.get("p6-b300.48xlarge")))
    assert layout[0] == (0, 0, "interface")
    assert layout[1] == (1, 0, "efa-only")
    assert not any(card == 0 and kind != "interface" for card, _, kind in layout)


@pytest.mark.parametrize("mode", list(InterfaceMode))
def test_no_two_interfaces_share_a_slot(mode):
    for entry in catalog.catalog().values():
        slots = [(i.network_card_index, i.device_index) for i in efa_layout(entry, mode)]
        assert len(slots) == len(set(slots)), entry.name


@pytest.mark.parametrize("mode", list(InterfaceMode))
def test_every_catalog_type_follows_the_ec2_rule(mode):
    """For every type in the catalog: the primary is card 0 device 0 and never efa-only; an
    efa-only interface sits at device 0 on a further card (1 on card 0, behind the primary); an
    interface that carries ENA on a further card sits at device 1, or at device 0 where card 0
    carries no EFA (PCS's validated p6-b300 template); an EFA-only card carries efa-only only; no
    device index reaches the card's interface count; one EFA interface per EFA card the layout
    uses, on EFA-capable cards only."""
    for entry in catalog.catalog().values():
        layout = efa_layout(entry, mode)
        primary, rest = layout[0], layout[1:]
        assert (primary.network_card_index, primary.device_index) == (0, 0), entry.name
        assert primary.interface_type != "efa-only", entry.name
        for i in rest:
            card = entry.network_cards[i.network_card_index]
            if i.interface_type == "efa-only":
                assert i.device_index == (1 if i.network_card_index == 0 else 0), entry.name
            else:
                assert i.interface_type == "efa" and i.network_card_index != 0, entry.name
                assert i.device_index == (1 if entry.card0_efa else 0), entry.name
                assert not card.efa_only, entry.name
            assert card.max_interfaces is None or i.device_index < card.max_interfaces, entry.name
        efa_cards = [i.network_card_index for i in layout if i.is_efa]
        assert efa_cards == [c.index for c in entry.efa_layout_cards], entry.name
        assert all(entry.network_cards[card].efa for card in efa_cards), entry.name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_efa_mode(name):
    """`efa` mode: the primary itself is EFA where card 0 supports it, one efa per further card, at
    device index 1 where card 0 carries EFA: an interface that carries ENA on a further card (the
    EC2 User Guide; AWS PCS's example launch template and AWS's PCS templates for P5 and P6-B200);
    at device index 0 where it does not (p6-b300: AWS's PCS template validated on two p6-b300,
    awsome-distributed-ai architectures/aws-pcs/assets/add-cng-p6-b300.yaml)."""
    count, cards = EXPECTED[name]
    layout = _triples(efa_layout(catalog.get(name), InterfaceMode.EFA))
    card0 = catalog.get(name).card0_efa
    assert layout[0] == (0, 0, "efa" if card0 else "interface")
    assert all(kind == "efa" and device == (1 if card0 else 0) for _, device, kind in layout[1:])
    assert [card for card, _, kind in layout if kind == "efa"] == cards
    assert len(layout) == (count if card0 else count + 1)


def test_p6_b300_efa_mode_as_awss_validated_pcs_template():
    """add-cng-p6-b300.yaml: an ENA primary, efa on cards 1 to 16 at device index 0."""
    layout = _triples(efa_layout(catalog.get("p6-b300.48xlarge"), InterfaceMode.EFA))
    assert layout == [(0, 0, "interface")] + [(card, 0, "efa") for card in range(1, 17)]


def test_p6e_gb200_efa_mode_keeps_efa_only_on_its_efa_only_cards():
    """GB200's cards 1, 5, 9, 13 are EFA-only with one interface slot: no efa interface (it carries
    ENA) and nothing at device index 1 there; the EC2 guide's efa-only at device index 0 instead."""
    layout = _triples(efa_layout(catalog.get("p6e-gb200.36xlarge"), InterfaceMode.EFA))
    assert layout == [(0, 0, "interface"), (1, 0, "efa-only"), (5, 0, "efa-only"), (9, 0, "efa-only"),
                      (13, 0, "efa-only")]
    assert addresses_per_node(catalog.get("p6e-gb200.36xlarge"), InterfaceMode.EFA) == 1


@pytest.mark.parametrize("name,efa_only,efa", [
    ("p5.48xlarge", 1, 32), ("p5en.48xlarge", 1, 16), ("p6-b200.48xlarge", 1, 8), ("p6-b300.48xlarge", 1, 17)])
def test_addresses_per_node(name, efa_only, efa):
    entry = catalog.get(name)
    assert addresses_per_node(entry, InterfaceMode.EFA_ONLY) == efa_only
    assert addresses_per_node(entry, InterfaceMode.EFA) == efa


def test_without_efa_only_the_primary():
    assert _triples(efa_layout(catalog.get("p5.48xlarge"), efa=False)) == [(0, 0, "interface")]
    assert _triples(efa_layout(catalog.get("c7i.8xlarge"))) == [(0, 0, "interface")]


def test_cpu_48xlarge_gets_one_efa():
    assert _triples(efa_layout(catalog.get("c7i.48xlarge"))) == [(0, 0, "interface"), (0, 1, "efa-only")]
