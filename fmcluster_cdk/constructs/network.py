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
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from fmcluster_cdk.errors import ConstructError

ANYWHERE = "0.0.0.0/0"
ALL_PROTOCOLS = "-1"
# An egress rule that matches no traffic (ICMP type 252, code 86): declaring it inline removes
# the default allow-all egress rule EC2 gives every new VPC security group (what the L2
# SecurityGroup does for allow_all_outbound=False).
NO_TRAFFIC_EGRESS = ec2.CfnSecurityGroup.EgressProperty(
    ip_protocol="icmp", cidr_ip="255.255.255.255/32", from_port=252, to_port=86,
    description="Disallow all traffic")


def name_tag(name: str) -> list[cdk.CfnTag]:
    return [cdk.CfnTag(key="Name", value=name)]


class AzSubnet(Construct):
    """One subnet placed by AZ ID (`AvailabilityZoneId`, the same physical zone in every
    account), associated with a route table: the given one, or a new one of its own. Instances
    launched in it get no public IPv4 address (`MapPublicIpOnLaunch: false`).

    Props:
        vpc_id: the VPC of the subnet (``vpc-...``).
            @default required
        az_id: the AZ ID of the subnet, such as ``use1-az4`` (AZ IDs differ by Region and are not
            contiguous: docs/research-notes.md, section 5).
            @default required
        cidr: the subnet's IPv4 range, inside the VPC's (AWS reserves 5 addresses of each
            subnet; the smallest subnet is a /28: `fmcluster.facts.network`).
            @default required
        name: the subnet's `Name` tag (and its own route table's): at most 256 characters.
            @default required
        route_table_id: the route table to associate (``rtb-...``).
            @default None: a new route table of the subnet's own

    Attributes:
        vpc_id: the VPC id, as given.
        az_id: the AZ ID, as given.
        name: the name, as given.
        subnet: the `ec2.CfnSubnet`.
        subnet_id: the subnet's id.
        route_table_id: the id of the subnet's route table (given or its own).
        association: the `ec2.CfnSubnetRouteTableAssociation`.
    """

    def __init__(self, scope: Construct, construct_id: str, *, vpc_id: str, az_id: str, cidr: str,
                 name: str, route_table_id: str | None = None) -> None:
        super().__init__(scope, construct_id)
        self.vpc_id, self.az_id, self.name = vpc_id, az_id, name
        self.subnet = ec2.CfnSubnet(self, "Subnet", vpc_id=vpc_id, availability_zone_id=az_id,
                                    cidr_block=cidr, map_public_ip_on_launch=False, tags=name_tag(name))
        if route_table_id is None:
            route_table_id = ec2.CfnRouteTable(self, "RouteTable", vpc_id=vpc_id, tags=name_tag(name)).ref
        self.route_table_id = route_table_id
        self.association = ec2.CfnSubnetRouteTableAssociation(
            self, "RouteTableAssociation", subnet_id=self.subnet.ref, route_table_id=route_table_id)

    @property
    def subnet_id(self) -> str:
        return self.subnet.ref

    def add_default_route(self, *, nat_gateway_id: str | None = None, gateway_id: str | None = None) -> ec2.CfnRoute:
        """0.0.0.0/0 to one target: a NAT gateway (``nat-...``) or an internet gateway (``igw-...``)."""
        if (nat_gateway_id is None) == (gateway_id is None):
            raise ConstructError(self, "a default route goes to one target: a NAT gateway or an internet gateway")
        return ec2.CfnRoute(self, "DefaultRoute", route_table_id=self.route_table_id,
                            destination_cidr_block=ANYWHERE, nat_gateway_id=nat_gateway_id, gateway_id=gateway_id)

    def add_nat_gateway(self, *, depends_on: Iterable[cdk.CfnResource] = ()) -> ec2.CfnNatGateway:
        """A public NAT gateway with its Elastic IP in this (public) subnet."""
        eip = ec2.CfnEIP(self, "NatEip", domain="vpc", tags=name_tag(f"{self.name}-nat"))
        nat = ec2.CfnNatGateway(self, "NatGateway", subnet_id=self.subnet_id, allocation_id=eip.attr_allocation_id,
                                tags=name_tag(f"{self.name}-nat"))
        nat.add_resource_dependency(self.association)  # the subnet must route to the internet first
        for dependency in depends_on:
            nat.add_resource_dependency(dependency)
        return nat


class ClusterVpc(Construct):
    """A VPC with one private subnet per AZ ID (or Local Zone ID) and a public one per AZ ID of
    `public_subnets`, an internet gateway, one NAT gateway
    (in `nat_az_id`'s public subnet) for every private subnet's egress, and an S3
    gateway endpoint on the private route tables.

    `private_subnets` and `public_subnets` map AZ ID -> CIDR; subnet ids keep that order.
    DNS resolution and DNS hostnames are on. The S3 endpoint's service name takes the stack's
    region (a literal with an explicit environment, else a token).

    Props:
        name: prefix of the `Name` tags (``NAME-vpc``, ``NAME-igw``, ``NAME-public``,
            ``NAME-public-AZID``, ``NAME-private-AZID``, ...; a tag value holds at most 256 characters).
            @default required
        cidr: the VPC's IPv4 range (`CidrBlock`), such as ``10.0.0.0/16``.
            @default required
        private_subnets: AZ ID -> CIDR of the private subnets (each with its own route table, its
            default route through the NAT gateway, and the S3 endpoint).
            @default required
        public_subnets: AZ ID -> CIDR of the public subnets (one route table, default route
            through the internet gateway).
            @default required
        nat_az_id: the AZ ID whose public subnet holds the NAT gateway; must be a key of
            `public_subnets`.
            @default required

    Attributes:
        vpc: the `ec2.CfnVPC`.
        vpc_id: the VPC's id.
        public_subnets: the public `AzSubnet`s, in the order given.
        private_subnets: the private `AzSubnet`s, in the order given.
        public_subnet_ids: the public subnets' ids, in that order.
        private_subnet_ids: the private subnets' ids, in that order.
        nat_gateway_id: the NAT gateway's id.
        s3_endpoint: the S3 gateway endpoint (`ec2.CfnVPCEndpoint`).
    """

    def __init__(self, scope: Construct, construct_id: str, *, name: str, cidr: str,
                 private_subnets: Mapping[str, str], public_subnets: Mapping[str, str], nat_az_id: str) -> None:
        super().__init__(scope, construct_id)
        if nat_az_id not in public_subnets:
            raise ConstructError(self, f"the NAT gateway's AZ ID {nat_az_id} has no public subnet")
        self.vpc = ec2.CfnVPC(self, "Vpc", cidr_block=cidr, enable_dns_support=True, enable_dns_hostnames=True,
                              tags=name_tag(f"{name}-vpc"))
        vpc_id = self.vpc.ref

        igw = ec2.CfnInternetGateway(self, "InternetGateway", tags=name_tag(f"{name}-igw"))
        attachment = ec2.CfnVPCGatewayAttachment(self, "InternetGatewayAttachment", vpc_id=vpc_id,
                                                 internet_gateway_id=igw.ref)
        public_routes = ec2.CfnRouteTable(self, "PublicRouteTable", vpc_id=vpc_id, tags=name_tag(f"{name}-public"))
        public_default = ec2.CfnRoute(self, "PublicDefaultRoute", route_table_id=public_routes.ref,
                                      destination_cidr_block=ANYWHERE, gateway_id=igw.ref)
        public_default.add_resource_dependency(attachment)
        self.public_subnets = [
            AzSubnet(self, f"PublicSubnet-{az}", vpc_id=vpc_id, az_id=az, cidr=subnet_cidr,
                     name=f"{name}-public-{az}", route_table_id=public_routes.ref)
            for az, subnet_cidr in public_subnets.items()]

        nat_subnet = next(s for s in self.public_subnets if s.az_id == nat_az_id)
        nat = nat_subnet.add_nat_gateway(depends_on=[public_default])
        self.nat_gateway_id: str = nat.ref

        self.private_subnets = [
            AzSubnet(self, f"PrivateSubnet-{az}", vpc_id=vpc_id, az_id=az, cidr=subnet_cidr,
                     name=f"{name}-private-{az}")
            for az, subnet_cidr in private_subnets.items()]
        for subnet in self.private_subnets:
            subnet.add_default_route(nat_gateway_id=nat.ref)

        region = cdk.Stack.of(self).region  # a literal with an explicit env, else a token
        self.s3_endpoint = ec2.CfnVPCEndpoint(
            self, "S3Endpoint", vpc_id=vpc_id, service_name=f"com.amazonaws.{region}.s3",
            vpc_endpoint_type="Gateway", route_table_ids=[s.route_table_id for s in self.private_subnets])

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
    to that log group (trust: VPC Flow Logs of this account only).

    Props:
        vpc_id: the VPC whose traffic is logged (``vpc-...``).
            @default required
        name: the VPC's name, in the role's description and the flow log's `Name` tag
            (``NAME-flow-log``).
            @default required
        retention_days: how long the log group keeps the records, in days: one of 1, 3, 5, 7, 14,
            30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653
            (`AWS::Logs::LogGroup` RetentionInDays).
            @default 365

    Attributes:
        log_group: the `logs.CfnLogGroup` (retained).
        role: the delivery role (`iam.CfnRole`).
        flow_log: the `ec2.CfnFlowLog`.
    """

    def __init__(self, scope: Construct, construct_id: str, *, vpc_id: str, name: str,
                 retention_days: int = 365) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.log_group = logs.CfnLogGroup(self, "LogGroup", retention_in_days=retention_days)
        self.log_group.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
        trust = iam.PolicyDocument(statements=[iam.PolicyStatement(
            actions=["sts:AssumeRole"], principals=[iam.ServicePrincipal("vpc-flow-logs.amazonaws.com")],
            conditions={
                "StringEquals": {"aws:SourceAccount": stack.account},
                "ArnLike": {"aws:SourceArn": stack.format_arn(service="ec2", resource="vpc-flow-log",
                                                              resource_name="*")},
            })])
        write = iam.PolicyDocument(statements=[iam.PolicyStatement(
            actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            resources=[self.log_group.attr_arn])])  # the Arn attribute ends in ':*': its streams
        self.role = iam.CfnRole(self, "Role", assume_role_policy_document=trust,
                                description=f"VPC flow logs of {name} to CloudWatch Logs",
                                policies=[iam.CfnRole.PolicyProperty(policy_name="write-flow-logs",
                                                                     policy_document=write)])
        self.flow_log = ec2.CfnFlowLog(
            self, "FlowLog", resource_id=vpc_id, resource_type="VPC", traffic_type="ALL",
            log_destination_type="cloud-watch-logs", log_group_name=self.log_group.ref,
            deliver_logs_permission_arn=self.role.attr_arn, tags=name_tag(f"{name}-flow-log"))


class SelfReferencingSecurityGroup(Construct):
    """A security group that allows all traffic from its own members, with either egress to
    anywhere or egress only to its own members (`egress_anywhere=False`).

    The self rules are separate resources (SecurityGroupIngress/Egress with the group's own id
    as source and destination), since an inline rule cannot name its own group.

    Props:
        vpc_id: the VPC of the group (``vpc-...``).
            @default required
        name: the group's `Name` tag (at most 256 characters).
            @default required
        description: the group's description (`GroupDescription`: at most 255 characters of
            letters, digits, spaces and ``._-:/()#,@[]+=&;{}!$*``; changing it replaces the group).
            @default required
        egress_anywhere: allow all outbound traffic; False allows outbound traffic to members only
            (the default allow-all egress rule of a new group is replaced by one that matches nothing).
            @default required

    Attributes:
        group: the `ec2.CfnSecurityGroup`.
        security_group_id: the group's id (``sg-...``).
        self_ingress: the rule that allows all traffic from members (`ec2.CfnSecurityGroupIngress`).
        self_egress: the rule that allows all traffic to members (`ec2.CfnSecurityGroupEgress`),
            None with egress to anywhere.
    """

    def __init__(self, scope: Construct, construct_id: str, *, vpc_id: str, name: str, description: str,
                 egress_anywhere: bool) -> None:
        super().__init__(scope, construct_id)
        egress = (ec2.CfnSecurityGroup.EgressProperty(ip_protocol=ALL_PROTOCOLS, cidr_ip=ANYWHERE,
                                                      description="All outbound traffic")
                  if egress_anywhere else NO_TRAFFIC_EGRESS)
        self.group = ec2.CfnSecurityGroup(self, "SecurityGroup", vpc_id=vpc_id, group_description=description,
                                          security_group_egress=[egress], tags=name_tag(name))
        group_id = self.group.attr_group_id
        self.self_ingress = ec2.CfnSecurityGroupIngress(
            self, "SelfIngress", group_id=group_id, source_security_group_id=group_id,
            ip_protocol=ALL_PROTOCOLS, description="All traffic from members of this group")
        self.self_egress = None
        if not egress_anywhere:
            self.self_egress = ec2.CfnSecurityGroupEgress(
                self, "SelfEgress", group_id=group_id, destination_security_group_id=group_id,
                ip_protocol=ALL_PROTOCOLS, description="All traffic to members of this group")

    @property
    def security_group_id(self) -> str:
        return self.group.attr_group_id


class EfaSecurityGroup(SelfReferencingSecurityGroup):
    """The EFA security group: all traffic from and to itself, and nothing else. EFA needs the
    self egress rule even where another rule allows egress to anywhere; outbound traffic of the
    nodes goes through their node security group.

    Props:
        vpc_id: the VPC of the group: the nodes' and the EFA-enabled file system's.
            @default required
        name: the group's `Name` tag, such as ``CLUSTER-efa`` (at most 256 characters).
            @default required

    Attributes: those of `SelfReferencingSecurityGroup` (`self_egress` is always set).
    """

    def __init__(self, scope: Construct, construct_id: str, *, vpc_id: str, name: str) -> None:
        super().__init__(scope, construct_id, vpc_id=vpc_id, name=name, egress_anywhere=False,
                         description="EFA: all traffic from and to members of this group only")


class NodeSecurityGroup(SelfReferencingSecurityGroup):
    """The security group of every node and of the control plane: all traffic from its own
    members, egress to anywhere, and no inbound traffic from outside the group.

    Props:
        vpc_id: the cluster's VPC.
            @default required
        name: the group's `Name` tag, such as ``CLUSTER-nodes`` (at most 256 characters).
            @default required

    Attributes: those of `SelfReferencingSecurityGroup` (`self_egress` is None).
    """

    def __init__(self, scope: Construct, construct_id: str, *, vpc_id: str, name: str) -> None:
        super().__init__(scope, construct_id, vpc_id=vpc_id, name=name, egress_anywhere=True,
                         description="Cluster nodes and control plane: all traffic between members, egress anywhere")


class ClusterPlacementGroups(Construct):
    """One cluster placement group (`Strategy: cluster`) per key, named by CloudFormation.

    Props:
        keys: one key per placement group: its construct id (so a key must stay stable for its
            group to stay) and the end of its `Name` tag.
            @default required
        name_prefix: start of the groups' `Name` tags (``PREFIX-KEY``, at most 256 characters).
            @default required

    Attributes:
        group_names: key -> the placement group's name (a token: its `Ref`).
    """

    def __init__(self, scope: Construct, construct_id: str, *, keys: Iterable[str], name_prefix: str) -> None:
        super().__init__(scope, construct_id)
        self.group_names: dict[str, str] = {}
        for key in keys:
            group = ec2.CfnPlacementGroup(self, key, strategy="cluster", tags=name_tag(f"{name_prefix}-{key}"))
            self.group_names[key] = group.ref
