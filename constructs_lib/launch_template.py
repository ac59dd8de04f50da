"""A node launch template with every network card's interface (EC2 `AWS::EC2::LaunchTemplate`).

The L2 `ec2.LaunchTemplate` cannot express several network cards, so the template is a plain
CloudFormation resource. Its `LaunchTemplateData` is built as plain dictionaries with the
CloudFormation property names and handed to `cdk.CfnResource` in one call: the typed L1 structs
cost one jsii round trip each, and the interfaces x node groups loop is the hot one (measured:
the typed `CfnLaunchTemplate` structs take about 3x as long for the same template, byte for
byte). A plain dictionary passed to `CfnLaunchTemplate(launch_template_data=...)` would need the
camelCase struct keys, and a misspelt key is dropped without a word; CloudFormation names in a
`CfnResource` are written as given and checked by the template validation.

What it sets:

- `NetworkInterfaces`: one per interface of the layout (`fmcluster.efa.efa_layout`), with its
  network card and device index, `InterfaceType` for EFA interfaces (ENA interfaces leave it
  out), the security groups in each interface's `Groups` (the EFA group first where the
  template has EFA interfaces) and `DeleteOnTermination`; no top-level `SecurityGroupIds`
  (EC2 rejects it beside network interfaces).
- IMDSv2 only (`HttpTokens: required`), hop limit 1 by default.
- An encrypted gp3 root volume (on `/dev/sda1`, the root device of Ubuntu AMIs, unless
  `root_device_name` names another, such as `/dev/xvda` for Amazon Linux).
- `ImageId` when an AMI is given (otherwise the service that launches the nodes picks it).
- `Placement.GroupName` when a placement group is given.
- Capacity: a Capacity Block (`InstanceMarketOptions.MarketType: capacity-block`, the
  reservation id and the instance type, which a Capacity Block template must name), or a
  capacity reservation target by id or by resource group ARN; nothing for on-demand or spot.
- `TagSpecifications` for instances and volumes, and the user data (base64).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Protocol, Sequence

import aws_cdk as cdk
from constructs import Construct

CAPACITY_BLOCK_MARKET = "capacity-block"
ENA = "interface"  # the InterfaceType of a plain ENA interface, left out of the template
ROOT_DEVICE = "/dev/sda1"  # the root device of Ubuntu AMIs
AMAZON_LINUX_ROOT_DEVICE = "/dev/xvda"  # the root device of Amazon Linux (EKS AL2023) AMIs


class InterfaceLike(Protocol):
    """One network interface of a layout (`fmcluster.efa.Interface` is one)."""

    network_card_index: int
    device_index: int
    interface_type: str


@dataclass(frozen=True)
class CapacityTarget:
    """Where the instances' capacity comes from; the default (nothing) is on-demand or spot."""

    market_type: Optional[str] = None  # "capacity-block" for a Capacity Block for ML
    reservation_id: Optional[str] = None
    reservation_resource_group_arn: Optional[str] = None

    def __post_init__(self) -> None:
        if self.reservation_id and self.reservation_resource_group_arn:
            raise ValueError("target a capacity reservation by id or by resource group ARN, not both")
        if self.market_type == CAPACITY_BLOCK_MARKET and not self.reservation_id:
            raise ValueError("a Capacity Block needs its reservation id")


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


def _capacity(capacity: CapacityTarget, instance_type: Optional[str]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if capacity.market_type == CAPACITY_BLOCK_MARKET:
        if not instance_type:
            raise ValueError("a Capacity Block launch template must name the instance type")
        data["InstanceType"] = instance_type
        data["InstanceMarketOptions"] = {"MarketType": CAPACITY_BLOCK_MARKET}
    elif capacity.market_type is not None:
        raise ValueError(f"unsupported market type {capacity.market_type!r}")
    target = ({"CapacityReservationId": capacity.reservation_id} if capacity.reservation_id else
              {"CapacityReservationResourceGroupArn": capacity.reservation_resource_group_arn}
              if capacity.reservation_resource_group_arn else None)
    if target:
        data["CapacityReservationSpecification"] = {"CapacityReservationTarget": target}
    return data


def _tags(tags: Mapping[str, str]) -> list[dict[str, Any]]:
    tag_list = [{"Key": key, "Value": value} for key, value in tags.items()]
    return [{"ResourceType": kind, "Tags": tag_list} for kind in ("instance", "volume")]


def launch_template_data(*, interfaces: Sequence[InterfaceLike], security_group_ids: Sequence[str],
                         efa_security_group_id: Optional[str] = None, subnet_id: Optional[str] = None,
                         root_volume_gib: int, user_data: Optional[str] = None,
                         instance_type: Optional[str] = None, placement_group_name: Optional[str] = None,
                         capacity: CapacityTarget = CapacityTarget(), http_put_response_hop_limit: int = 1,
                         tags: Optional[Mapping[str, str]] = None, root_device_name: str = ROOT_DEVICE,
                         image_id: Optional[str] = None) -> dict[str, Any]:
    """`LaunchTemplateData` as plain dictionaries. `user_data` is already base64 (or a token)."""
    if not interfaces:
        raise ValueError("a launch template needs at least the primary network interface")
    uses_efa = any(i.interface_type != ENA for i in interfaces)
    if uses_efa and not efa_security_group_id:
        raise ValueError("EFA interfaces need the EFA security group")
    groups = ([efa_security_group_id] if uses_efa else []) + list(security_group_ids)
    data: dict[str, Any] = {
        "NetworkInterfaces": [_interface(i, groups, subnet_id) for i in interfaces],
        "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": http_put_response_hop_limit,
                            "HttpEndpoint": "enabled"},
        "BlockDeviceMappings": [{"DeviceName": root_device_name, "Ebs": {
            "VolumeType": "gp3", "VolumeSize": root_volume_gib, "Encrypted": True, "DeleteOnTermination": True}}],
    }
    if image_id:
        data["ImageId"] = image_id
    if placement_group_name:
        data["Placement"] = {"GroupName": placement_group_name}
    data.update(_capacity(capacity, instance_type))
    if tags:
        data["TagSpecifications"] = _tags(tags)
    if user_data is not None:
        data["UserData"] = user_data
    return data


class NodeLaunchTemplate(Construct):
    """An `AWS::EC2::LaunchTemplate` for one node group; props as in `launch_template_data`,
    with `user_data` as plain text (it is base64-encoded here)."""

    def __init__(self, scope: Construct, construct_id: str, *, user_data: Optional[str] = None,
                 **props: Any) -> None:
        super().__init__(scope, construct_id)
        encoded = cdk.Fn.base64(user_data) if user_data is not None else None
        self.resource = cdk.CfnResource(self, "Resource", type="AWS::EC2::LaunchTemplate", properties={
            "LaunchTemplateData": launch_template_data(user_data=encoded, **props)})

    @property
    def launch_template_id(self) -> str:
        return self.resource.ref

    @property
    def latest_version_number(self) -> str:
        return self.resource.get_att("LatestVersionNumber").to_string()
