"""A node launch template's network interfaces (fmcluster_cdk.constructs.compute.launch_template):
the EFA layout of every type in the catalog, in each mode a control plane takes, held to
CloudFormation's AWS::EC2::LaunchTemplate schema as cfn-lint ships it and to botocore's ec2 model,
and the EC2 rules the construct refuses to break."""

from __future__ import annotations

import json
import re
from pathlib import Path

import aws_cdk as cdk
import botocore.session
import cfnlint
import pytest
from jsonschema import Draft7Validator

from fmcluster.facts import catalog
from fmcluster.facts.efa import Interface, InterfaceMode, efa_layout
from fmcluster_cdk.constructs.compute.launch_template import (
    INTERFACE_TYPES,
    LaunchTemplateProps,
    NodeLaunchTemplate,
    network_interfaces,
    problems,
)

SCHEMAS = Path(cfnlint.__file__).parent / "data" / "schemas"
PRIMARY = Interface(0, 0, "interface")


def resource_schema(resource_type: str) -> dict:
    """cfn-lint's schema of a resource type (its us-east-1 provider's)."""
    digest = json.loads((SCHEMAS / "providers" / "us-east-1.json").read_text())[resource_type]
    return json.loads((SCHEMAS / "resources" / f"{digest}.json").read_text())


def _valid_values(documentation: str) -> set[str]:
    """The values a description lists after "Valid values:" (botocore's HTML, cfn-lint's markdown)."""
    listed = re.search(r"Valid values:(.*)", re.sub(r"<[^>]+>", "", documentation)).group(1)
    return set(re.findall(r"[a-z-]+", listed.split("\n")[0]))


def _props(interfaces, **extra) -> LaunchTemplateProps:
    return LaunchTemplateProps(interfaces=interfaces, security_group_ids=["sg-node"], root_volume_gib=100,
                               efa_security_group_id="sg-efa", subnet_id="subnet-1", **extra)


def test_interface_types_are_those_a_launch_template_takes():
    """cfn-lint's schema and botocore's LaunchTemplateInstanceNetworkInterfaceSpecificationRequest
    both list interface, efa and efa-only."""
    schema = resource_schema("AWS::EC2::LaunchTemplate")["definitions"]["NetworkInterface"]
    ec2 = botocore.session.get_session().get_service_model("ec2")
    request = ec2.shape_for("LaunchTemplateInstanceNetworkInterfaceSpecificationRequest")
    assert _valid_values(schema["properties"]["InterfaceType"]["description"]) == set(INTERFACE_TYPES)
    assert _valid_values(request.members["InterfaceType"].documentation) == set(INTERFACE_TYPES)
    assert set(INTERFACE_TYPES) <= set(ec2.shape_for("NetworkInterfaceType").enum)


@pytest.mark.parametrize("mode", list(InterfaceMode))
@pytest.mark.parametrize("name", sorted(catalog.catalog()))
def test_every_layout_is_a_launch_template_ec2_takes(name, mode):
    """Each interface validates against the schema's NetworkInterface; the cards are the type's own;
    the construct finds nothing to refuse."""
    schema = resource_schema("AWS::EC2::LaunchTemplate")
    validator = Draft7Validator({**schema["definitions"]["NetworkInterface"], "definitions": schema["definitions"]})
    instance = catalog.get(name)
    props = _props(efa_layout(instance, mode), network_cards=instance.network_cards)
    assert problems(props) == []
    written = network_interfaces(props)
    for interface in written:
        assert list(validator.iter_errors(interface)) == [], (name, interface)
        assert interface["NetworkCardIndex"] < len(instance.network_cards)
        assert interface.get("InterfaceType", "interface") in INTERFACE_TYPES
        assert interface["Groups"][0] == ("sg-efa" if instance.efa_supported else "sg-node")
    assert len({(i["NetworkCardIndex"], i["DeviceIndex"]) for i in written}) == len(written)


def test_p5_templates_as_the_guides_write_them():
    """EKS (efa-only): the EC2 User Guide's 1 ENA + 32 EFA-only; PCS (efa): its guide's efa
    interfaces, the primary included, the further cards' at device index 1."""
    p5 = catalog.get("p5.48xlarge")
    efa_only = network_interfaces(_props(efa_layout(p5, InterfaceMode.EFA_ONLY)))
    assert [(i["NetworkCardIndex"], i["DeviceIndex"], i.get("InterfaceType")) for i in efa_only[:3]] == [
        (0, 0, None), (0, 1, "efa-only"), (1, 0, "efa-only")]
    assert len(efa_only) == 33
    efa = network_interfaces(_props(efa_layout(p5, InterfaceMode.EFA)))
    assert [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in efa[:3]] == [
        (0, 0, "efa"), (1, 1, "efa"), (2, 1, "efa")]
    assert len(efa) == 32


def test_a_synthesized_template_validates_against_the_schema():
    stack = cdk.Stack(cdk.App(), "demo")
    NodeLaunchTemplate(stack, "LaunchTemplate", props=_props(
        efa_layout(catalog.get("p6-b300.48xlarge"), InterfaceMode.EFA_ONLY), tags={"team": "ml"}))
    template = cdk.assertions.Template.from_stack(stack).to_json()
    (resource,) = template["Resources"].values()
    schema = resource_schema("AWS::EC2::LaunchTemplate")
    assert list(Draft7Validator(schema).iter_errors(resource["Properties"])) == []
    interfaces = resource["Properties"]["LaunchTemplateData"]["NetworkInterfaces"]
    assert [(i["NetworkCardIndex"], i["DeviceIndex"]) for i in interfaces[:3]] == [(0, 0), (1, 0), (2, 0)]


@pytest.mark.parametrize(("interfaces", "message"), [
    ([Interface(0, 0, "efa-only")], "an efa-only interface cannot be the primary network interface"),
    ([Interface(0, 1, "efa-only"), PRIMARY],
     "the primary network interface (the first) must be network card 0, device 0"),
    ([PRIMARY, Interface(1, 0, "efa-only"), Interface(1, 0, "efa")],
     "two interfaces on one network card and device index: card 1 device 0"),
    ([PRIMARY, Interface(1, 1, "trunk")], "unknown interface type trunk (one of interface, efa, efa-only)"),
])
def test_layouts_ec2_refuses_are_refused(interfaces, message):
    assert problems(_props(interfaces)) == [message]


GB200 = catalog.get("p6e-gb200.36xlarge")


def test_the_old_gb200_pcs_layout_is_refused():
    """efa interfaces (EFA with ENA) at device index 1 on GB200's cards 1, 5, 9, 13: EFA-only cards
    of one interface slot each (aws-parallelcluster PR #6930), so EC2 would refuse it."""
    old = [PRIMARY] + [Interface(card, 1, "efa") for card in (1, 5, 9, 13)]
    found = problems(_props(old, network_cards=GB200.network_cards))
    assert found == [message for card in (1, 5, 9, 13) for message in (
        f"card {card} is EFA-only: an efa-only interface fits there, not efa",
        f"card {card} takes 1 interface: device index 1 is beyond it (0 to 0)")]
    assert problems(_props(efa_layout(GB200, InterfaceMode.EFA), network_cards=GB200.network_cards)) == []


@pytest.mark.parametrize(("interface", "message"), [
    (Interface(0, 1, "efa-only"), "card 0 carries no EFA: no efa-only interface there"),
    (Interface(2, 1, "efa"), None),  # an even card: ENA or EFA, two slots
    (Interface(2, 2, "efa"), "card 2 takes 2 interfaces: device index 2 is beyond it (0 to 1)"),
    (Interface(3, 0, "interface"), "card 3 is EFA-only: an efa-only interface fits there, not interface"),
    (Interface(17, 0, "efa-only"), "card 17: the instance type has no network card 17 (0 to 16)"),
])
def test_interfaces_a_gb200_card_cannot_carry_are_refused(interface, message):
    assert problems(_props([PRIMARY, interface], network_cards=GB200.network_cards)) == (
        [message] if message else [])


def test_p6_b300s_card_0_carries_no_efa():
    b300 = catalog.get("p6-b300.48xlarge")
    assert problems(_props([Interface(0, 0, "efa")], network_cards=b300.network_cards)) == [
        "card 0 carries no EFA: no efa interface there"]

