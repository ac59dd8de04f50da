"""What the FSx file systems of NAME-storage (Lustre, OpenZFS) share: the `Name` tag of a file
system and its security group, the file servers' own security group, and its rules that admit
other security groups on a protocol's ports."""

from __future__ import annotations

from typing import Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from constructs import Construct


def name_tags(name: str | None) -> list[cdk.CfnTag] | None:
    """The `Name` tag of a file system and its security group; None without a name."""
    return [cdk.CfnTag(key="Name", value=name)] if name else None


def file_server_security_group(scope: Construct, *, vpc_id: str, description: str,
                               tags: list[cdk.CfnTag] | None) -> ec2.CfnSecurityGroup:
    """The file servers' security group (construct id `SecurityGroup` in `scope`): all outbound,
    no inbound until `allow_ports` adds it; retained, like the file system it guards."""
    group = ec2.CfnSecurityGroup(
        scope, "SecurityGroup", vpc_id=vpc_id, tags=tags, group_description=description,
        security_group_egress=[ec2.CfnSecurityGroup.EgressProperty(
            ip_protocol="-1", cidr_ip="0.0.0.0/0", description="all outbound")])
    group.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
    return group


def allow_ports(scope: Construct, prefix: str, *, group_id: str, source_group_id: str, protocol: str,
                ports: Sequence[tuple[int, int]], what: str, who: str, retain: bool = False) -> None:
    """An ingress rule of `group_id` per port range (LOW, HIGH) of `protocol` from the security group
    `source_group_id`, construct id PREFIX plus the range (``988``, ``1018-1023``), described
    "WHAT RANGE from WHO"; retained with `retain` (a rule among the file servers' own), else
    deleted with its stack, so that the stack of the group it names can be deleted."""
    for low, high in ports:
        span = str(low) if low == high else f"{low}-{high}"
        rule = ec2.CfnSecurityGroupIngress(
            scope, f"{prefix}{span}", group_id=group_id, ip_protocol=protocol, from_port=low, to_port=high,
            source_security_group_id=source_group_id, description=f"{what} {span} from {who}")
        if retain:
            rule.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
