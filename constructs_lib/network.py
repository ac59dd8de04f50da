"""Network constructs built from L1 resources: a VPC whose subnets are placed by AZ ID, VPC flow
logs, the EFA and node security groups, and cluster placement groups.

The L2 `ec2.Vpc` cannot place subnets by AZ ID, and its `max_azs` makes the CDK CLI look the
AZs up in the account; these constructs need no lookup, so synthesis stays pure.
They know nothing of the cluster spec: they take CIDRs, AZ IDs and names.

Construct IDs come from AZ IDs and names, never from list positions, so adding an AZ or a
placement group never renames an existing resource.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from constructs_lib import cfn

ANYWHERE = "0.0.0.0/0"
ALL_PROTOCOLS = "-1"
# An egress rule that matches no traffic (ICMP type 252, code 86): declaring it inline removes
# the default allow-all egress rule EC2 gives every new VPC security group (what the L2
# SecurityGroup does for allow_all_outbound=False).
NO_TRAFFIC_EGRESS = {"IpProtocol": "icmp", "CidrIp": "255.255.255.255/32", "FromPort": 252, "ToPort": 86,
                     "Description": "Disallow all traffic"}


class AzSubnet(Construct):
    """One subnet placed by AZ ID (`AvailabilityZoneId`, the same physical zone in every
    account), associated with a route table: the given one, or a new one of its own."""

    def __init__(self, scope: Construct, construct_id: str, *, vpc_id: str, az_id: str, cidr: str,
                 name: str, tags: Mapping[str, str], route_table_id: str | None = None) -> None:
        super().__init__(scope, construct_id)
        self.vpc_id, self.az_id, self.name, self.cluster_tags = vpc_id, az_id, name, tags
        self.subnet = cfn.resource(self, "Subnet", "AWS::EC2::Subnet", {
            "VpcId": vpc_id, "AvailabilityZoneId": az_id, "CidrBlock": cidr, "MapPublicIpOnLaunch": False,
            "Tags": cfn.tags(tags, name)})
        if route_table_id is None:
            route_table_id = cfn.resource(self, "RouteTable", "AWS::EC2::RouteTable",
                                          {"VpcId": vpc_id, "Tags": cfn.tags(tags, name)}).ref
        self.route_table_id = route_table_id
        self.association = cfn.resource(self, "RouteTableAssociation", "AWS::EC2::SubnetRouteTableAssociation",
                                        {"SubnetId": self.subnet.ref, "RouteTableId": route_table_id})

    @property
    def subnet_id(self) -> str:
        return self.subnet.ref

    def add_default_route(self, **target: str) -> cdk.CfnResource:
        """0.0.0.0/0 to a target, such as NatGatewayId=... or GatewayId=..."""
        return cfn.resource(self, "DefaultRoute", "AWS::EC2::Route", {
            "RouteTableId": self.route_table_id, "DestinationCidrBlock": ANYWHERE, **target})

    def add_nat_gateway(self, *, depends_on: Iterable[cdk.CfnResource] = ()) -> cdk.CfnResource:
        """A public NAT gateway with its Elastic IP in this (public) subnet."""
        name_tags = cfn.tags(self.cluster_tags, f"{self.name}-nat")
        eip = cfn.resource(self, "NatEip", "AWS::EC2::EIP", {"Domain": "vpc", "Tags": name_tags})
        nat = cfn.resource(self, "NatGateway", "AWS::EC2::NatGateway", {
            "SubnetId": self.subnet_id, "AllocationId": cfn.attribute(eip, "AllocationId"), "Tags": name_tags})
        nat.add_resource_dependency(self.association)  # the subnet must route to the internet first
        for dependency in depends_on:
            nat.add_resource_dependency(dependency)
        return nat


class ClusterVpc(Construct):
    """A VPC with one private and one public subnet per AZ ID, an internet gateway, one NAT
    gateway (in `nat_az_id`'s public subnet) for every private subnet's egress, and an S3
    gateway endpoint on the private route tables.

    `private_subnets` and `public_subnets` map AZ ID -> CIDR; subnet ids keep that order.
    `tags`: the cluster's tags, on every resource that takes tags (over its Name tag).
    """

    def __init__(self, scope: Construct, construct_id: str, *, name: str, cidr: str,
                 private_subnets: Mapping[str, str], public_subnets: Mapping[str, str], nat_az_id: str,
                 tags: Mapping[str, str]) -> None:
        super().__init__(scope, construct_id)
        if nat_az_id not in public_subnets:
            raise ValueError(f"the NAT gateway's AZ ID {nat_az_id} has no public subnet")
        self.vpc = cfn.resource(self, "Vpc", "AWS::EC2::VPC", {
            "CidrBlock": cidr, "EnableDnsSupport": True, "EnableDnsHostnames": True,
            "Tags": cfn.tags(tags, f"{name}-vpc")})
        vpc_id = self.vpc.ref

        igw = cfn.resource(self, "InternetGateway", "AWS::EC2::InternetGateway",
                           {"Tags": cfn.tags(tags, f"{name}-igw")})
        attachment = cfn.resource(self, "InternetGatewayAttachment", "AWS::EC2::VPCGatewayAttachment",
                                  {"VpcId": vpc_id, "InternetGatewayId": igw.ref})
        public_routes = cfn.resource(self, "PublicRouteTable", "AWS::EC2::RouteTable",
                                     {"VpcId": vpc_id, "Tags": cfn.tags(tags, f"{name}-public")})
        public_default = cfn.resource(self, "PublicDefaultRoute", "AWS::EC2::Route", {
            "RouteTableId": public_routes.ref, "DestinationCidrBlock": ANYWHERE, "GatewayId": igw.ref})
        public_default.add_resource_dependency(attachment)
        self.public_subnets = [
            AzSubnet(self, f"PublicSubnet-{az}", vpc_id=vpc_id, az_id=az, cidr=subnet_cidr,
                     name=f"{name}-public-{az}", tags=tags, route_table_id=public_routes.ref)
            for az, subnet_cidr in public_subnets.items()]

        nat_subnet = next(s for s in self.public_subnets if s.az_id == nat_az_id)
        nat = nat_subnet.add_nat_gateway(depends_on=[public_default])
        self.nat_gateway_id: str = nat.ref

        self.private_subnets = [
            AzSubnet(self, f"PrivateSubnet-{az}", vpc_id=vpc_id, az_id=az, cidr=subnet_cidr,
                     name=f"{name}-private-{az}", tags=tags)
            for az, subnet_cidr in private_subnets.items()]
        for subnet in self.private_subnets:
            subnet.add_default_route(NatGatewayId=nat.ref)

        region = cdk.Stack.of(self).region  # a literal with an explicit env, else a token
        self.s3_endpoint = cfn.resource(self, "S3Endpoint", "AWS::EC2::VPCEndpoint", {
            "VpcId": vpc_id, "ServiceName": f"com.amazonaws.{region}.s3", "VpcEndpointType": "Gateway",
            "RouteTableIds": [s.route_table_id for s in self.private_subnets], "Tags": cfn.tags(tags)})

    @property
    def vpc_id(self) -> str:
        return self.vpc.ref

    @property
    def private_subnet_ids(self) -> list[str]:
        return [s.subnet_id for s in self.private_subnets]

    @property
    def public_subnet_ids(self) -> list[str]:
        return [s.subnet_id for s in self.public_subnets]


class VpcFlowLog(Construct):
    """Flow logs of every interface in a VPC (accepted and rejected traffic) to a CloudWatch log
    group that is retained when the stack is deleted, delivered by a role that may only write
    to that log group."""

    def __init__(self, scope: Construct, construct_id: str, *, vpc_id: str, name: str, tags: Mapping[str, str],
                 retention_days: int = 365) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.log_group = cfn.resource(self, "LogGroup", "AWS::Logs::LogGroup",
                                      {"RetentionInDays": retention_days, "Tags": cfn.tags(tags)}, retain=True)
        trust = iam.PolicyDocument(statements=[iam.PolicyStatement(
            actions=["sts:AssumeRole"], principals=[iam.ServicePrincipal("vpc-flow-logs.amazonaws.com")],
            conditions={
                "StringEquals": {"aws:SourceAccount": stack.account},
                "ArnLike": {"aws:SourceArn": stack.format_arn(service="ec2", resource="vpc-flow-log",
                                                              resource_name="*")},
            })])
        write = iam.PolicyDocument(statements=[iam.PolicyStatement(
            actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            # the Arn attribute ends in ':*': its streams
            resources=[cfn.attribute(self.log_group, "Arn")])])
        self.role = iam.CfnRole(self, "Role", assume_role_policy_document=trust,
                                description=f"VPC flow logs of {name} to CloudWatch Logs",
                                policies=[iam.CfnRole.PolicyProperty(policy_name="write-flow-logs",
                                                                     policy_document=write)])
        self.flow_log = cfn.resource(self, "FlowLog", "AWS::EC2::FlowLog", {
            "ResourceId": vpc_id, "ResourceType": "VPC", "TrafficType": "ALL",
            "LogDestinationType": "cloud-watch-logs", "LogGroupName": self.log_group.ref,
            "DeliverLogsPermissionArn": self.role.attr_arn, "Tags": cfn.tags(tags, f"{name}-flow-log")})


class SelfReferencingSecurityGroup(Construct):
    """A security group that allows all traffic from its own members, with either egress to
    anywhere or egress only to its own members (`egress_anywhere=False`).

    The self rules are separate resources (SecurityGroupIngress/Egress with the group's own id
    as source and destination), since an inline rule cannot name its own group."""

    def __init__(self, scope: Construct, construct_id: str, *, vpc_id: str, name: str, description: str,
                 egress_anywhere: bool, tags: Mapping[str, str]) -> None:
        super().__init__(scope, construct_id)
        egress = ({"IpProtocol": ALL_PROTOCOLS, "CidrIp": ANYWHERE, "Description": "All outbound traffic"}
                  if egress_anywhere else NO_TRAFFIC_EGRESS)
        self.group = cfn.resource(self, "SecurityGroup", "AWS::EC2::SecurityGroup", {
            "VpcId": vpc_id, "GroupDescription": description, "SecurityGroupEgress": [egress],
            "Tags": cfn.tags(tags, name)})
        self.security_group_id: str = cfn.attribute(self.group, "GroupId")
        group_id = self.security_group_id
        self.self_ingress = cfn.resource(self, "SelfIngress", "AWS::EC2::SecurityGroupIngress", {
            "GroupId": group_id, "SourceSecurityGroupId": group_id, "IpProtocol": ALL_PROTOCOLS,
            "Description": "All traffic from members of this group"})
        self.self_egress = None
        if not egress_anywhere:
            self.self_egress = cfn.resource(self, "SelfEgress", "AWS::EC2::SecurityGroupEgress", {
                "GroupId": group_id, "DestinationSecurityGroupId": group_id, "IpProtocol": ALL_PROTOCOLS,
                "Description": "All traffic to members of this group"})


class EfaSecurityGroup(SelfReferencingSecurityGroup):
    """The EFA security group: all traffic from and to itself, and nothing else. EFA needs the
    self egress rule even where another rule allows egress to anywhere; outbound traffic of the
    nodes goes through their node security group."""

    def __init__(self, scope: Construct, construct_id: str, *, vpc_id: str, name: str,
                 tags: Mapping[str, str]) -> None:
        super().__init__(scope, construct_id, vpc_id=vpc_id, name=name, egress_anywhere=False, tags=tags,
                         description="EFA: all traffic from and to members of this group only")


class NodeSecurityGroup(SelfReferencingSecurityGroup):
    """The security group of every node and of the control plane: all traffic from its own
    members, egress to anywhere, and no inbound traffic from outside the group."""

    def __init__(self, scope: Construct, construct_id: str, *, vpc_id: str, name: str,
                 tags: Mapping[str, str]) -> None:
        super().__init__(scope, construct_id, vpc_id=vpc_id, name=name, egress_anywhere=True, tags=tags,
                         description="Cluster nodes and control plane: all traffic between members, egress anywhere")


class ClusterPlacementGroups(Construct):
    """One cluster placement group per key; `group_names` maps key -> placement group name (a token)."""

    def __init__(self, scope: Construct, construct_id: str, *, keys: Iterable[str], name_prefix: str,
                 tags: Mapping[str, str]) -> None:
        super().__init__(scope, construct_id)
        self.group_names: dict[str, str] = {}
        for key in keys:
            group = cfn.resource(self, key, "AWS::EC2::PlacementGroup",
                                 {"Strategy": "cluster", "Tags": cfn.tags(tags, f"{name_prefix}-{key}")})
            self.group_names[key] = group.ref
