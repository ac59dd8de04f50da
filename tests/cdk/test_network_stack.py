"""NAME-network: CDK assertions, logical-ID stability, determinism, cfn-lint and a moto deployment.

Every synthesis is shared by the whole module: one app holds the stacks of all spec variants
(one synth), a second app synthesizes the p5 example again for the determinism test. Both skip
CDK's built-in CloudFormation validation (about 10 s a synth here, whatever the number of
stacks, and it changes nothing in the output): cfn-lint checks the templates instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk.assertions import Match, Template

from fmcluster.facts import network as network_plan
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from fmcluster_cdk.stacks.app import environment
from fmcluster_cdk.stacks.network import NetworkStack
from tests.support.paths import EXAMPLES_DIR

pytestmark = [pytest.mark.synth,  # moto says which resource types it skips; the tests say so too
              pytest.mark.filterwarnings("ignore:Tried to parse AWS..EC2..(SecurityGroupEgress|PlacementGroup) ")]

BOOTSTRAP_VERSION_PARAMETER = "/cdk-bootstrap/hnb659fds/version"

# Two AZ IDs (EKS needs two) and one node group per placement case.
EKS_SPEC = """\
name: eks-train
region: us-east-1
availability_zone_id: use1-az4
network:
  extra_availability_zone_ids: [use1-az6]
orchestrator:
  type: eks
node_groups:
  - name: train             # on-demand + EFA: a new cluster placement group
    instance_type: p5.48xlarge
    count: 2
  - name: block             # Capacity Block: placed already
    instance_type: p5.48xlarge
    count: 2
    capacity: {type: capacity-block, reservation_id: cr-0123456789abcdef0}
  - name: reserved          # reservation: placed where it was made
    instance_type: p5.48xlarge
    count: 2
    capacity: {type: reservation, reservation_id: cr-0fedcba9876543210}
  - name: pinned            # an existing placement group: passed through by name
    instance_type: p5.48xlarge
    count: 2
    placement_group: my-existing-pg
  - name: unplaced
    instance_type: p5.48xlarge
    count: 1
    capacity: {type: spot}
    placement_group: none
  - name: cpu               # no EFA: no placement group
    instance_type: c7i.8xlarge
    min_count: 0
    max_count: 4
"""
ONE_MORE_GROUP = """\
  - name: extra
    instance_type: p5.48xlarge
    count: 2
"""
ONE_MORE_AZ = EKS_SPEC.replace("[use1-az6]", "[use1-az6, use1-az1]")
assert ONE_MORE_AZ != EKS_SPEC


def spec_of(text: str):
    result = loader.load_text(text, "x.yaml")
    assert result.ok, [d.format() for d in result.diagnostics]
    return result.spec


P5 = loader.load(EXAMPLES_DIR / "p5-pcs.yaml").spec
EKS = spec_of(EKS_SPEC)
VARIANTS = {  # stack id -> spec; ids differ, cluster names (and so every Name tag) do not
    f"{P5.name}-network": P5,
    "eks-network": EKS,
    "eks-group-network": spec_of(EKS_SPEC + ONE_MORE_GROUP),
    "eks-az-network": spec_of(ONE_MORE_AZ),
}


def synth(outdir: Path, specs: dict) -> SimpleNamespace:
    app = cdk.App(outdir=str(outdir), builtin_cloud_formation_validation=False)
    stacks = {sid: NetworkStack(app, sid, model=resolve(spec), env=environment(spec)) for sid, spec in specs.items()}
    assembly = app.synth()
    files = {sid: Path(assembly.get_stack_by_name(s.stack_name).template_full_path) for sid, s in stacks.items()}
    templates = {sid: json.loads(f.read_text()) for sid, f in files.items()}
    return SimpleNamespace(stacks=stacks, files=files, templates=templates)


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    return synth(tmp_path_factory.mktemp("cdk.out"), VARIANTS)


@pytest.fixture(scope="module")
def eks(synthesized):
    return SimpleNamespace(stack=synthesized.stacks["eks-network"], json=synthesized.templates["eks-network"],
                           template=Template.from_json(synthesized.templates["eks-network"]))


@pytest.fixture(scope="module")
def p5(synthesized):
    sid = f"{P5.name}-network"
    return SimpleNamespace(stack=synthesized.stacks[sid], json=synthesized.templates[sid],
                           template=Template.from_json(synthesized.templates[sid]), file=synthesized.files[sid])


# ---- helpers --------------------------------------------------------------------------------

def resources(template: dict, kind: str) -> dict[str, dict]:
    return {lid: r for lid, r in template["Resources"].items() if r["Type"] == kind}


def props(template: dict, kind: str) -> list[dict]:
    return [r.get("Properties", {}) for r in resources(template, kind).values()]


def logical_id(stack: cdk.Stack, token: str) -> str:
    """The logical id a Ref / GetAtt token points at."""
    resolved = stack.resolve(token)
    return resolved["Ref"] if "Ref" in resolved else resolved["Fn::GetAtt"][0]


def ref(lid: str) -> dict:
    return {"Ref": lid}


def group_id(lid: str) -> dict:
    return {"Fn::GetAtt": [lid, "GroupId"]}


def name_tag(value: str) -> list[dict]:
    return [{"Key": "Name", "Value": value}]


# ---- subnets and attributes -----------------------------------------------------------------

def test_subnets_are_placed_by_az_id_with_the_planned_cidrs(eks):
    planned = network_plan.layout(EKS.network.vpc_cidr, EKS.availability_zone_ids)
    assert len(planned) == 4  # a private and a public subnet for each of the two AZ IDs
    eks.template.resource_count_is("AWS::EC2::Subnet", len(planned))
    for subnet in planned:
        kind = "public" if subnet.public else "private"
        eks.template.has_resource_properties("AWS::EC2::Subnet", {
            "AvailabilityZoneId": subnet.az_id, "CidrBlock": subnet.cidr,
            "Tags": name_tag(f"{EKS.name}-{kind}-{subnet.az_id}")})
    assert all("AvailabilityZone" not in p for p in props(eks.json, "AWS::EC2::Subnet"))  # AZ names differ per account
    eks.template.has_resource_properties("AWS::EC2::VPC", {
        "CidrBlock": "10.0.0.0/16", "EnableDnsSupport": True, "EnableDnsHostnames": True})


def test_subnet_attributes_follow_the_az_id_order(eks):
    stack, subnets = eks.stack, eks.json["Resources"]

    def az_of(tokens):
        return [subnets[logical_id(stack, t)]["Properties"]["AvailabilityZoneId"] for t in tokens]

    assert az_of(stack.private_subnet_ids) == ["use1-az4", "use1-az6"]  # GPU AZ first
    assert az_of(stack.public_subnet_ids) == ["use1-az4", "use1-az6"]
    assert stack.gpu_subnet_id == stack.private_subnet_ids[0]
    assert stack.vpc_cidr == "10.0.0.0/16"
    assert list(resources(eks.json, "AWS::EC2::VPC")) == [logical_id(stack, stack.vpc_id)]


# ---- security groups ------------------------------------------------------------------------

def test_efa_security_group_allows_all_traffic_from_and_to_itself_only(eks):
    efa = logical_id(eks.stack, eks.stack.efa_security_group_id)
    eks.template.has_resource_properties("AWS::EC2::SecurityGroupIngress", {
        "GroupId": group_id(efa), "SourceSecurityGroupId": group_id(efa), "IpProtocol": "-1"})
    eks.template.has_resource_properties("AWS::EC2::SecurityGroupEgress", {
        "GroupId": group_id(efa), "DestinationSecurityGroupId": group_id(efa), "IpProtocol": "-1"})
    # no other egress: the inline rule only replaces EC2's default allow-all rule
    inline = eks.json["Resources"][efa]["Properties"]["SecurityGroupEgress"]
    assert [rule["CidrIp"] for rule in inline] == ["255.255.255.255/32"]


def test_node_security_group_allows_itself_in_and_anything_out(eks):
    nodes = logical_id(eks.stack, eks.stack.node_security_group_id)
    assert nodes != logical_id(eks.stack, eks.stack.efa_security_group_id)
    eks.template.has_resource_properties("AWS::EC2::SecurityGroupIngress", {
        "GroupId": group_id(nodes), "SourceSecurityGroupId": group_id(nodes), "IpProtocol": "-1"})
    eks.template.has_resource_properties("AWS::EC2::SecurityGroup", {
        "SecurityGroupEgress": [Match.object_like({"CidrIp": "0.0.0.0/0", "IpProtocol": "-1"})]})


def test_no_ingress_from_anywhere(synthesized):
    for sid, template in synthesized.templates.items():
        rules = props(template, "AWS::EC2::SecurityGroupIngress")
        rules += [rule for group in props(template, "AWS::EC2::SecurityGroup")
                  for rule in group.get("SecurityGroupIngress", [])]
        assert rules, sid
        for rule in rules:
            assert rule.get("CidrIp") != "0.0.0.0/0" and rule.get("CidrIpv6") != "::/0", (sid, rule)


# ---- internet, NAT, routes, S3 endpoint, flow logs ------------------------------------------

def test_one_nat_gateway_in_the_gpu_az_and_default_routes(eks):
    t, stack = eks.template, eks.stack
    t.resource_count_is("AWS::EC2::InternetGateway", 1)
    t.resource_count_is("AWS::EC2::VPCGatewayAttachment", 1)
    t.resource_count_is("AWS::EC2::NatGateway", 1)
    t.has_resource_properties("AWS::EC2::NatGateway", {"SubnetId": ref(logical_id(stack, stack.public_subnet_ids[0]))})
    igw = next(iter(resources(eks.json, "AWS::EC2::InternetGateway")))
    nat = next(iter(resources(eks.json, "AWS::EC2::NatGateway")))
    attachment = next(iter(resources(eks.json, "AWS::EC2::VPCGatewayAttachment")))
    t.has_resource("AWS::EC2::Route", {
        "Properties": {"DestinationCidrBlock": "0.0.0.0/0", "GatewayId": ref(igw)},
        "DependsOn": [attachment]})
    private_tables = private_route_tables(eks)
    assert len(private_tables) == 2
    for table in private_tables:
        t.has_resource_properties("AWS::EC2::Route", {
            "RouteTableId": ref(table), "DestinationCidrBlock": "0.0.0.0/0", "NatGatewayId": ref(nat)})
    t.resource_count_is("AWS::EC2::Route", 1 + len(private_tables))


def private_route_tables(view) -> list[str]:
    """Route tables associated with the private subnets, in subnet order."""
    associations = props(view.json, "AWS::EC2::SubnetRouteTableAssociation")
    by_subnet = {a["SubnetId"]["Ref"]: a["RouteTableId"]["Ref"] for a in associations}
    return [by_subnet[logical_id(view.stack, s)] for s in view.stack.private_subnet_ids]


def test_s3_gateway_endpoint_on_the_private_route_tables(eks):
    eks.template.has_resource_properties("AWS::EC2::VPCEndpoint", {
        "ServiceName": "com.amazonaws.us-east-1.s3", "VpcEndpointType": "Gateway",
        "RouteTableIds": [ref(table) for table in private_route_tables(eks)]})


def test_flow_logs_to_a_retained_log_group_with_a_least_privilege_role(eks):
    t = eks.template
    log_group, = resources(eks.json, "AWS::Logs::LogGroup")
    role, = resources(eks.json, "AWS::IAM::Role")
    vpc = logical_id(eks.stack, eks.stack.vpc_id)
    t.has_resource_properties("AWS::EC2::FlowLog", {
        "ResourceId": ref(vpc), "ResourceType": "VPC", "TrafficType": "ALL",
        "LogDestinationType": "cloud-watch-logs", "LogGroupName": ref(log_group),
        "DeliverLogsPermissionArn": {"Fn::GetAtt": [role, "Arn"]}})
    t.has_resource("AWS::Logs::LogGroup", {"Properties": {"RetentionInDays": 365},
                                           "DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"})
    role_props = eks.json["Resources"][role]["Properties"]
    trust, = role_props["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "vpc-flow-logs.amazonaws.com"}
    assert set(trust["Condition"]) == {"StringEquals", "ArnLike"}  # no confused deputy
    statements = [s for p in role_props["Policies"] for s in p["PolicyDocument"]["Statement"]]
    assert [s["Resource"] for s in statements] == [{"Fn::GetAtt": [log_group, "Arn"]}]
    assert all(action.startswith("logs:") and "*" not in action for s in statements for action in s["Action"])


# ---- placement groups -----------------------------------------------------------------------

def test_placement_groups_are_not_in_the_network_stack(eks, p5):
    """Each cluster placement group belongs to its node group, in the group's nested stack of
    NAME-cluster (tests/cdk/test_pcs_stack.py): the network stack has none, exports none."""
    for built in (eks, p5):
        built.template.resource_count_is("AWS::EC2::PlacementGroup", 0)
        assert not hasattr(built.stack, "placement_group_names")
        assert len(built.json.get("Outputs", {})) < 20


def test_the_ids_other_stacks_hold_are_always_exported(eks, synthesized):
    """The VPC, every private subnet and both security groups are exports (which CloudFormation
    will not let change while imported), in this stack alone, with no consumer: a stack that stops
    importing one never leaves this stack unable to remove it."""
    outputs = eks.json["Outputs"]
    exported = {json.dumps(o["Value"], sort_keys=True) for o in outputs.values() if "Export" in o}
    subnets = [lid for lid, r in resources(eks.json, "AWS::EC2::Subnet").items()
               if not r["Properties"]["MapPublicIpOnLaunch"] and "Private" in lid]
    assert len(subnets) == 2
    wanted = [{"Ref": lid} for lid in [*resources(eks.json, "AWS::EC2::VPC"), *subnets]]
    wanted += [{"Fn::GetAtt": [lid, "GroupId"]} for lid in resources(eks.json, "AWS::EC2::SecurityGroup")]
    assert len(wanted) == 5
    assert all(json.dumps(w, sort_keys=True) in exported for w in wanted)
    # an AZ more is an export more, and none of the old ones changes
    more = synthesized.templates["eks-az-network"]["Outputs"]
    old = {k: v["Value"] for k, v in outputs.items() if k.startswith("ExportsOutput")}
    assert all(more[k]["Value"] == value for k, value in old.items()) and len(more) > len(outputs)


# ---- stable logical IDs, determinism --------------------------------------------------------

def test_adding_a_node_group_leaves_the_network_stack_alone(synthesized):
    before, after = synthesized.templates["eks-network"], synthesized.templates["eks-group-network"]
    assert after["Resources"] == before["Resources"]  # (export names carry the stack name, which differs here)


def test_adding_an_az_renames_no_resource(synthesized):
    before, after = synthesized.templates["eks-network"], synthesized.templates["eks-az-network"]
    assert set(before["Resources"]) <= set(after["Resources"])


def test_adding_an_az_keeps_the_existing_subnets(synthesized):
    before, after = synthesized.templates["eks-network"], synthesized.templates["eks-az-network"]
    for lid in resources(before, "AWS::EC2::Subnet"):
        assert after["Resources"][lid] == before["Resources"][lid], lid


def test_synthesis_is_deterministic(p5, tmp_path):
    again = synth(tmp_path, {f"{P5.name}-network": P5})
    assert again.files[f"{P5.name}-network"].read_bytes() == p5.file.read_bytes()


# ---- cfn-lint -------------------------------------------------------------------------------

@pytest.mark.parametrize("sid", [f"{P5.name}-network", "eks-network"])
def test_cfn_lint_reports_no_errors(synthesized, sid):
    from cfnlint.api import lint_all

    matches = lint_all(synthesized.files[sid].read_text())
    for match in matches:
        if match.rule.severity != "informational":
            print(f"cfn-lint {match.rule.severity}: {match}")
    assert [str(m) for m in matches if m.rule.severity == "error"] == []


# ---- moto -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def deployed(synthesized):
    """The p5 and EKS network templates, as synthesized, created in moto's CloudFormation."""
    from tests.support.moto_aws import mocked_aws

    with pytest.MonkeyPatch.context() as env, mocked_aws():
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            env.setenv(key, "testing")
        region = "us-east-1"
        assert P5.region == EKS.region == region
        # the template's CheckBootstrapVersion rule reads the bootstrap version from SSM
        boto3.client("ssm", region).put_parameter(Name=BOOTSTRAP_VERSION_PARAMETER, Value="30", Type="String")
        cfn, ec2 = boto3.client("cloudformation", region), boto3.client("ec2", region)
        outputs = {}
        for sid in (f"{P5.name}-network", "eks-network"):
            cfn.create_stack(StackName=sid, TemplateBody=synthesized.files[sid].read_text())
            stack, = cfn.describe_stacks(StackName=sid)["Stacks"]
            assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
            outputs[sid] = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
        yield SimpleNamespace(ec2=ec2, outputs=outputs)


@pytest.mark.parametrize("sid,spec", [(f"{P5.name}-network", P5), ("eks-network", EKS)], ids=["p5", "eks"])
def test_moto_creates_the_vpc_and_subnets(deployed, sid, spec):
    ec2, outputs = deployed.ec2, deployed.outputs[sid]
    vpc, = ec2.describe_vpcs(VpcIds=[outputs["VpcId"]])["Vpcs"]
    assert vpc["CidrBlock"] == spec.network.vpc_cidr
    subnets = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc["VpcId"]]}])["Subnets"]
    by_name = {tag["Value"]: s for s in subnets for tag in s.get("Tags", []) if tag["Key"] == "Name"}
    planned = network_plan.layout(spec.network.vpc_cidr, spec.availability_zone_ids)
    assert {by_name[f"{spec.name}-{'public' if p.public else 'private'}-{p.az_id}"]["CidrBlock"]
            for p in planned} == {p.cidr for p in planned}
    assert len(subnets) == len(planned)
    private = outputs["PrivateSubnetIds"].split(",")
    assert [by_name[f"{spec.name}-private-{az}"]["SubnetId"] for az in spec.availability_zone_ids] == private
    # moto 5.2 ignores AvailabilityZoneId on AWS::EC2::Subnet (every subnet lands in us-east-1a),
    # so the AZ ID placement is asserted on the template above, not here.


def test_moto_creates_the_efa_security_group_self_ingress(deployed):
    # moto skips AWS::EC2::SecurityGroupEgress (and inline egress rules), so only ingress is read back.
    ec2, outputs = deployed.ec2, deployed.outputs["eks-network"]
    for key in ("EfaSecurityGroupId", "NodeSecurityGroupId"):
        group, = ec2.describe_security_groups(GroupIds=[outputs[key]])["SecurityGroups"]
        assert group["VpcId"] == outputs["VpcId"]
        rule, = group["IpPermissions"]
        assert rule["IpProtocol"] == "-1" and rule["IpRanges"] == []
        assert [pair["GroupId"] for pair in rule["UserIdGroupPairs"]] == [group["GroupId"]]


def test_moto_creates_nat_routes_endpoint_and_flow_log(deployed):
    # moto skips AWS::EC2::PlacementGroup: the EKS stack deploys, but its placement group is not read back.
    ec2, outputs = deployed.ec2, deployed.outputs["eks-network"]
    vpc_filter = [{"Name": "vpc-id", "Values": [outputs["VpcId"]]}]
    nat, = ec2.describe_nat_gateways(Filters=vpc_filter)["NatGateways"]
    tables = ec2.describe_route_tables(Filters=vpc_filter)["RouteTables"]
    private = outputs["PrivateSubnetIds"].split(",")
    for table in tables:
        subnets = {a.get("SubnetId") for a in table["Associations"]} - {None}
        defaults = [r for r in table["Routes"] if r.get("DestinationCidrBlock") == "0.0.0.0/0"]
        if subnets & set(private):
            assert [r.get("NatGatewayId") for r in defaults] == [nat["NatGatewayId"]]
        elif subnets:
            assert defaults[0]["GatewayId"].startswith("igw-")
    endpoint, = ec2.describe_vpc_endpoints(Filters=vpc_filter)["VpcEndpoints"]
    assert endpoint["ServiceName"] == "com.amazonaws.us-east-1.s3" and endpoint["VpcEndpointType"] == "Gateway"
    flow_log, = ec2.describe_flow_logs(Filters=[{"Name": "resource-id", "Values": [outputs["VpcId"]]}])["FlowLogs"]
    assert flow_log["TrafficType"] == "ALL" and flow_log["LogDestinationType"] == "cloud-watch-logs"
