"""The NAME-network stack: VPC with subnets placed by AZ ID, NAT egress, S3 gateway endpoint,
flow logs, the EFA and node security groups.

Sources and details: docs/research-notes.md, "fmcluster_cdk/stacks/network.py"."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from fmcluster.model.cluster import ClusterModel
from fmcluster_cdk.constructs.network import ClusterVpc, EfaSecurityGroup, NodeSecurityGroup, VpcFlowLog


class NetworkStack(cdk.Stack):
    """Attributes other stacks use: vpc_id, vpc_cidr, private_subnet_ids (in the order of
    spec.availability_zone_ids, GPU AZ first), gpu_subnet_id, region_subnet_ids (those in the
    region's Availability Zones: all but a Local Zone's), public_subnet_ids,
    nat_gateway_id, efa_security_group_id and node_security_group_id."""

    def __init__(self, scope: Construct, construct_id: str, *, model: ClusterModel, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        spec, subnets = model.spec, model.subnets
        vpc = ClusterVpc(self, "Network", name=spec.name, cidr=spec.network.vpc_cidr,
                         private_subnets={s.az_id: s.cidr for s in subnets if not s.public},
                         public_subnets={s.az_id: s.cidr for s in subnets if s.public},
                         nat_az_id=spec.region_zone_ids[0])
        VpcFlowLog(self, "FlowLog", vpc_id=vpc.vpc_id, name=spec.name)
        efa = EfaSecurityGroup(self, "EfaSecurityGroup", vpc_id=vpc.vpc_id, name=f"{spec.name}-efa")
        nodes = NodeSecurityGroup(self, "NodeSecurityGroup", vpc_id=vpc.vpc_id, name=f"{spec.name}-nodes")

        # Create-only properties of the other stacks hold these ids (FSx SubnetIds and
        # SecurityGroupIds, PCS Networking, SageMaker VpcConfig, EKS node group Subnets, security
        # groups' VpcId): references to them are exports (Fn::ImportValue), which CloudFormation
        # does not let change or vanish while another stack imports them. A weak reference
        # (Fn::GetStackOutput) would let a replaced subnet slide under a running file system.
        # Each is exported whether or not a stack uses it today, so that a consumer that stops
        # using one (another control plane, no file system) never leaves this stack unable to
        # remove an export still imported (CDK deploys this stack first).
        protected = [(vpc.vpc, vpc.vpc_id), *((s.subnet, s.subnet_id) for s in vpc.private_subnets),
                     (efa.group, efa.security_group_id), (nodes.group, nodes.security_group_id)]
        for resource, resource_id in protected:
            cdk.CrossStackReferences.of(resource).produce(cdk.ReferenceStrength.STRONG)
            self.export_value(resource_id)
        self.vpc_id: str = vpc.vpc_id
        self.vpc_cidr: str = spec.network.vpc_cidr
        self.private_subnet_ids: list[str] = vpc.private_subnet_ids
        self.gpu_subnet_id: str = self.private_subnet_ids[0]
        self.region_subnet_ids: list[str] = [s.subnet_id for s in vpc.private_subnets
                                             if s.az_id in spec.region_zone_ids]
        self.public_subnet_ids: list[str] = vpc.public_subnet_ids
        self.nat_gateway_id: str = vpc.nat_gateway_id
        self.efa_security_group_id: str = efa.security_group_id
        self.node_security_group_id: str = nodes.security_group_id

        for output_id, value, what in (
                ("VpcId", self.vpc_id, "VPC"),
                ("PrivateSubnetIds", cdk.Fn.join(",", self.private_subnet_ids), "private subnets, GPU AZ first"),
                ("EfaSecurityGroupId", self.efa_security_group_id, "EFA security group"),
                ("NodeSecurityGroupId", self.node_security_group_id, "node security group")):
            cdk.CfnOutput(self, output_id, value=value, description=f"{spec.name}: {what}",
                          export_name=f"{self.stack_name}-{output_id}")
