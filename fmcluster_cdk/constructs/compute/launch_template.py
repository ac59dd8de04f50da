"""A node launch template with every network card's interface (EC2 `AWS::EC2::LaunchTemplate`).

Sources and details: docs/research-notes.md, "fmcluster_cdk/constructs/compute/launch_template.py"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Protocol, Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from fmcluster_cdk.errors import ConstructError

CAPACITY_BLOCK_MARKET = "capacity-block"
ENA = "interface"  # the InterfaceType of a plain ENA interface, left out of the template
EFA_ONLY = "efa-only"
# A launch template's `InterfaceType` (cfn-lint's AWS::EC2::LaunchTemplate schema and botocore's
# ec2 model, LaunchTemplateInstanceNetworkInterfaceSpecificationRequest: "Valid values: interface |
# efa | efa-only")
INTERFACE_TYPES = (ENA, "efa", EFA_ONLY)
ROOT_DEVICE = "/dev/sda1"  # the root device of Ubuntu AMIs
AMAZON_LINUX_ROOT_DEVICE = "/dev/xvda"  # the root device of Amazon Linux (EKS AL2023) AMIs


class InterfaceLike(Protocol):
    """One network interface of a layout (`fmcluster.facts.efa.Interface` is one).

    Members: `network_card_index` (the network card, 0 for the primary interface),
    `device_index` (the attachment's device index on that card, 0 for the primary interface) and
    `interface_type` (``interface`` for ENA, ``efa`` or ``efa-only``: the values EC2 accepts for a
    launch template's `InterfaceType`). Read-only: a NamedTuple or a frozen dataclass is one.

    The EC2 User Guide's layout ("Maximize network bandwidth on Amazon EC2 instances with multiple
    network cards"): the primary (card 0, device 0) is never ``efa-only``; an ``efa-only``
    interface goes on card 0 device 1, or device 0 of a further card; an interface that carries ENA
    on a further card goes on device 1. The construct refuses a layout whose primary is missing or
    ``efa-only``, or two interfaces on one card and device; given the cards (`NetworkCardLike`),
    also an interface the card cannot carry.
    """

    @property
    def network_card_index(self) -> int: ...

    @property
    def device_index(self) -> int: ...

    @property
    def interface_type(self) -> str: ...


class NetworkCardLike(Protocol):
    """One network card of the instance type (`fmcluster.facts.catalog.NetworkCard` is one).

    Members: `index` (the card's `NetworkCardIndex`), `efa` (the card can carry an EFA interface,
    ``efa`` or ``efa-only``), `efa_only` (the card carries EFA-only interfaces and nothing else:
    no ENA, so no ``efa`` and no plain interface; p6e-gb200's odd cards) and `max_interfaces`
    (DescribeInstanceTypes' `MaximumNetworkInterfaces` of the card: device indices 0 to one less;
    None where it is not known). Read-only: a NamedTuple or a frozen dataclass is one.
    """

    @property
    def index(self) -> int: ...

    @property
    def efa(self) -> bool: ...

    @property
    def efa_only(self) -> bool: ...

    @property
    def max_interfaces(self) -> Optional[int]: ...


@dataclass(frozen=True)
class CapacityTarget:
    """Where the instances' capacity comes from; the default (nothing) is on-demand or spot.

    At most one of `reservation_id` and `reservation_resource_group_arn`; a Capacity Block needs
    `reservation_id` (instance Capacity Blocks cannot be targeted through a resource group).

    Props:
        market_type: `InstanceMarketOptions.MarketType` of the template: ``capacity-block`` for a
            Capacity Block for ML, the only market type this construct writes (EC2 also knows
            ``on-demand``, ``spot`` and ``interruptible-capacity-reservation``; spot is the
            purchase option of the node group, not of its template).
            @default None: no market options (on-demand or spot)
        reservation_id: the capacity reservation (ODCR or Capacity Block) the instances must run
            in, `CapacityReservationTarget.CapacityReservationId` (``cr-`` and 17 hex digits in
            AWS's examples; EC2 documents no pattern).
            @default None
        reservation_resource_group_arn: a resource group of capacity reservations the instances
            may run in, with On-Demand backfill beyond it
            (`CapacityReservationTarget.CapacityReservationResourceGroupArn`,
            ``arn:PARTITION:resource-groups:REGION:ACCOUNT:group/NAME``).
            @default None
    """

    market_type: Optional[str] = None
    reservation_id: Optional[str] = None
    reservation_resource_group_arn: Optional[str] = None


# cfn-lint's "instance type offered in the region" (its data: the region's Availability Zones' offerings)
LOCAL_ZONE_LINT_RULE = "E3628"


@dataclass(frozen=True)
class LaunchTemplateProps:
    """The props of a `NodeLaunchTemplate` (and of `launch_template_data`).

    Props:
        interfaces: the network interfaces, primary first (`NetworkInterfaces`: one entry each,
            with its `NetworkCardIndex` and `DeviceIndex`); at least one. An instance type takes
            as many as its network cards allow (the instance catalog's EFA layout).
            @default required
        security_group_ids: security groups of every interface (each interface's `Groups`),
            after the EFA group.
            @default required
        network_cards: the instance type's network cards (`NetworkCardLike`), by index: an
            interface on a card the type lacks, an EFA interface on a card without EFA, an
            ``efa`` or plain interface on an EFA-only card, or a device index at or above the
            card's interface count is refused.
            @default (): the layout is checked without the cards' facts
        root_volume_gib: size of the encrypted gp3 root volume, in GiB (EBS gp3: 1 to 65,536 GiB).
            @default required
        efa_security_group_id: the EFA security group, first in every interface's `Groups`;
            needed when an interface is ``efa`` or ``efa-only``, unused otherwise.
            @default None
        subnet_id: the subnet of every interface (`SubnetId`); None leaves the subnet to the
            service that launches the nodes (EKS managed node groups take their subnets
            on the node group).
            @default None
        user_data: the user data, as plain text: base64-encoded here (`Fn::Base64`). EC2 limits
            user data to 16 KB; AWS PCS wants MIME multi-part, since it merges its own part.
            @default None: no user data
        instance_type: the instance type (`InstanceType`), such as ``p5.48xlarge``: written only
            for a Capacity Block, whose template must name it (the services take the instance
            type from the node group otherwise); required with a Capacity Block.
            @default None
        placement_group_name: name of the placement group of the instances (`Placement.GroupName`).
            @default None: no placement group
        capacity: the capacity reservation or Capacity Block to launch into.
            @default ``CapacityTarget()``: on-demand or spot, no reservation
        http_put_response_hop_limit: IMDSv2 PUT response hop limit (`MetadataOptions`): 1 to 64
            hops (EC2's range); a pod or container in its own network namespace is one hop further.
            @default 1
        tags: tags of the instances and their volumes (`TagSpecifications` for ``instance`` and
            ``volume``), key -> value (keys 1 to 128, values 0 to 256 characters).
            @default None: no tags
        root_device_name: device name of the root volume: the AMI's root device
            (``/dev/sda1`` on Ubuntu, ``/dev/xvda`` on Amazon Linux).
            @default ``/dev/sda1`` (`ROOT_DEVICE`)
        image_id: the AMI (`ImageId`): ``ami-...`` or ``resolve:ssm:PARAMETER``.
            @default None: the service that launches the nodes picks the AMI
        local_zone: the nodes launch in a Local Zone: cfn-lint's check of the instance type
            against the region's offerings (E3628, data of the region's Availability Zones) does
            not apply and is switched off on the template (`Metadata.cfn-lint`); `fmcluster
            preflight` checks the zone's offerings.
            @default False
    """

    interfaces: Sequence[InterfaceLike]
    security_group_ids: Sequence[str]
    root_volume_gib: int
    network_cards: Sequence[NetworkCardLike] = ()
    efa_security_group_id: Optional[str] = None
    subnet_id: Optional[str] = None
    user_data: Optional[str] = None
    instance_type: Optional[str] = None
    placement_group_name: Optional[str] = None
    capacity: CapacityTarget = CapacityTarget()
    http_put_response_hop_limit: int = 1
    tags: Optional[Mapping[str, str]] = None
    root_device_name: str = ROOT_DEVICE
    image_id: Optional[str] = None
    local_zone: bool = False


def _interface(interface: InterfaceLike, groups: list[str], subnet_id: Optional[str]) -> dict[str, Any]:
    entry: dict[str, Any] = {"DeviceIndex": interface.device_index,
                             "NetworkCardIndex": interface.network_card_index}
    if interface.interface_type != ENA:
        entry["InterfaceType"] = interface.interface_type
    if subnet_id is not None:
        entry["SubnetId"] = subnet_id
    entry["Groups"] = list(groups)
    entry["DeleteOnTermination"] = True
    return entry


def _card_problems(interface: InterfaceLike, cards: Mapping[int, NetworkCardLike]) -> list[str]:
    """What EC2 refuses of one interface on its card: EFA where the card has none (EC2 User Guide,
    "Maximize network bandwidth ..."), ENA on an EFA-only card (p6e-gb200's odd cards, EC2 User
    Guide "EFA configuration for P6e-GB200 instances"), a device index beyond the card's
    MaximumNetworkInterfaces."""
    index, kind, device = interface.network_card_index, interface.interface_type, interface.device_index
    card = cards.get(index)
    if card is None:
        return [f"card {index}: the instance type has no network card {index} (0 to {max(cards)})"]
    found = []
    if kind in ("efa", EFA_ONLY) and not card.efa:
        found.append(f"card {index} carries no EFA: no {kind} interface there")
    elif card.efa_only and kind != EFA_ONLY:
        found.append(f"card {index} is EFA-only: an efa-only interface fits there, not {kind}")
    if card.max_interfaces is not None and device >= card.max_interfaces:
        found.append(f"card {index} takes {card.max_interfaces} interface{'s' if card.max_interfaces > 1 else ''}: "
                     f"device index {device} is beyond it (0 to {card.max_interfaces - 1})")
    return found


def _layout_problems(interfaces: Sequence[InterfaceLike], cards: Sequence[NetworkCardLike] = ()) -> list[str]:
    """What EC2 refuses in a layout (the EC2 User Guide, "Maximize network bandwidth on Amazon EC2
    instances with multiple network cards"; the interface types of cfn-lint's schema), and given
    the instance type's cards, what a card cannot carry (`_card_problems`)."""
    found = []
    unknown = sorted({i.interface_type for i in interfaces} - set(INTERFACE_TYPES))
    if unknown:
        found.append(f"unknown interface type {', '.join(unknown)} (one of {', '.join(INTERFACE_TYPES)})")
    slots = [(i.network_card_index, i.device_index) for i in interfaces]
    if interfaces and slots[0] != (0, 0):
        found.append("the primary network interface (the first) must be network card 0, device 0")
    if any(slot == (0, 0) and i.interface_type == EFA_ONLY for slot, i in zip(slots, interfaces, strict=True)):
        found.append("an efa-only interface cannot be the primary network interface")
    doubled = sorted({slot for slot in slots if slots.count(slot) > 1})
    if doubled:
        found.append("two interfaces on one network card and device index: "
                     + ", ".join(f"card {card} device {device}" for card, device in doubled))
    by_index = {card.index: card for card in cards}
    if by_index:
        for interface in interfaces:
            found += _card_problems(interface, by_index)
    return found


def problems(props: LaunchTemplateProps) -> list[str]:
    """What is wrong with `props`: NodeLaunchTemplate raises them, with its path."""
    capacity, found = props.capacity, []
    if not props.interfaces:
        found.append("a launch template needs at least the primary network interface")
    found += _layout_problems(props.interfaces, props.network_cards)
    if any(i.interface_type != ENA for i in props.interfaces) and not props.efa_security_group_id:
        found.append("EFA interfaces need the EFA security group")
    if capacity.reservation_id and capacity.reservation_resource_group_arn:
        found.append("target a capacity reservation by id or by resource group ARN, not both")
    if capacity.market_type not in (None, CAPACITY_BLOCK_MARKET):
        found.append(f"unsupported market type {capacity.market_type!r}")
    if capacity.market_type == CAPACITY_BLOCK_MARKET and not capacity.reservation_id:
        found.append("a Capacity Block needs its reservation id")
    if capacity.market_type == CAPACITY_BLOCK_MARKET and not props.instance_type:
        found.append("a Capacity Block launch template must name the instance type")
    return found


def network_interfaces(props: LaunchTemplateProps) -> list[dict[str, Any]]:
    """`LaunchTemplateData.NetworkInterfaces` as plain dictionaries with the CloudFormation
    property names: one per interface of the layout, the EFA security group first in `Groups`
    where an interface is EFA (props without `problems`)."""
    uses_efa = any(i.interface_type != ENA for i in props.interfaces)
    efa_group = [props.efa_security_group_id] if uses_efa and props.efa_security_group_id else []
    groups = efa_group + list(props.security_group_ids)
    return [_interface(i, groups, props.subnet_id) for i in props.interfaces]


_Data = ec2.CfnLaunchTemplate


def _capacity_reservation(capacity: CapacityTarget) -> Optional[_Data.CapacityReservationSpecificationProperty]:
    if not (capacity.reservation_id or capacity.reservation_resource_group_arn):
        return None
    target = _Data.CapacityReservationTargetProperty(
        capacity_reservation_id=capacity.reservation_id,
        capacity_reservation_resource_group_arn=capacity.reservation_resource_group_arn)
    return _Data.CapacityReservationSpecificationProperty(capacity_reservation_target=target)


def _market(props: LaunchTemplateProps) -> tuple[Optional[str], Optional[_Data.InstanceMarketOptionsProperty]]:
    """(InstanceType, InstanceMarketOptions): both for a Capacity Block, neither otherwise."""
    if props.capacity.market_type is None:
        return None, None
    return props.instance_type, _Data.InstanceMarketOptionsProperty(market_type=CAPACITY_BLOCK_MARKET)


def launch_template_data(props: LaunchTemplateProps) -> _Data.LaunchTemplateDataProperty:
    """`LaunchTemplateData` in the L1's typed structs, without the network interfaces
    (`network_interfaces`), of props without `problems`."""
    instance_type, market_options = _market(props)
    tags = [cdk.CfnTag(key=key, value=value) for key, value in (props.tags or {}).items()]
    return _Data.LaunchTemplateDataProperty(
        metadata_options=_Data.MetadataOptionsProperty(
            http_tokens="required", http_put_response_hop_limit=props.http_put_response_hop_limit,
            http_endpoint="enabled"),
        block_device_mappings=[_Data.BlockDeviceMappingProperty(
            device_name=props.root_device_name,
            ebs=_Data.EbsProperty(volume_type="gp3", volume_size=props.root_volume_gib, encrypted=True,
                                  delete_on_termination=True))],
        image_id=props.image_id,
        placement=(_Data.PlacementProperty(group_name=props.placement_group_name)
                   if props.placement_group_name else None),
        instance_type=instance_type,
        instance_market_options=market_options,
        capacity_reservation_specification=_capacity_reservation(props.capacity),
        tag_specifications=([_Data.TagSpecificationProperty(resource_type=kind, tags=tags)
                             for kind in ("instance", "volume")] if tags else None),
        user_data=cdk.Fn.base64(props.user_data) if props.user_data is not None else None,
    )


class NodeLaunchTemplate(Construct):
    """An `AWS::EC2::LaunchTemplate` for one node group (what it sets: docs/research-notes.md).

    Props:
        props: the template's settings, one prop each (`LaunchTemplateProps`).
            @default required

    Attributes:
        resource: the `AWS::EC2::LaunchTemplate` (an `ec2.CfnLaunchTemplate`).
        launch_template_id: the template's id (``lt-...``, its `Ref`).
        latest_version_number: the template's latest version (`LatestVersionNumber`), as a string.
    """

    def __init__(self, scope: Construct, construct_id: str, *, props: LaunchTemplateProps) -> None:
        super().__init__(scope, construct_id)
        found = problems(props)
        if found:
            raise ConstructError(self, "; ".join(found))
        interfaces = network_interfaces(props)
        self.resource = ec2.CfnLaunchTemplate(self, "Resource", launch_template_data=launch_template_data(props))
        self.resource.add_property_override("LaunchTemplateData.NetworkInterfaces", interfaces)
        if props.local_zone:
            self.resource.add_metadata("cfn-lint", {"config": {"ignore_checks": [LOCAL_ZONE_LINT_RULE]}})

    @property
    def launch_template_id(self) -> str:
        return self.resource.ref

    @property
    def latest_version_number(self) -> str:
        return self.resource.attr_latest_version_number
