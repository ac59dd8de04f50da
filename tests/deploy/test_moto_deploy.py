"""Deploy every template of an example, in order and with their cross-stack exports, into
moto's CloudFormation, and read back with boto3 what moto builds. What moto skips (and why), and
how nested stacks are published: tests/support/moto_stacks.py."""

from __future__ import annotations

import ast
import json
import re

import pytest

from tests.support.moto_stacks import ASSET_BUCKET_PREFIX, deploy
from tests.support.paths import EXAMPLES, ROOT

REGION = "us-east-1"
# as CloudFormation must create them
STACK_ORDER = ("network", "storage", "observability", "images", "cluster", "reference")


@pytest.fixture(scope="module", params=EXAMPLES)
def deployed(request, corpus, monkeypatch_module):
    """Deploy the example's stacks (its assembly in the run's corpus) into moto, network first."""
    from fmcluster.deploy import assembly
    from fmcluster.spec import loader
    from tests.support.moto_aws import mocked_aws

    spec = loader.load(ROOT / request.param).spec
    loaded = assembly.load(corpus.assembly(request.param))
    templates = {name: t.body for name, t in loaded.items()}  # nested stacks as PARENT/ID
    for var, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_SESSION_TOKEN", "testing"), ("AWS_DEFAULT_REGION", REGION)):
        monkeypatch_module.setenv(var, value)
    monkeypatch_module.delenv("AWS_PROFILE", raising=False)
    with mocked_aws():
        region = spec.region
        deploy([f"{spec.name}-{x}" for x in STACK_ORDER if f"{spec.name}-{x}" in templates], loaded, region)
        yield spec, region, templates


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_all_stacks_created(deployed):
    import boto3

    spec, region, templates = deployed
    cfn = boto3.client("cloudformation", region_name=region)
    stacks = cfn.describe_stacks()["Stacks"]
    top = {f"{spec.name}-{x}" for x in STACK_ORDER} & set(templates)
    nested = {nested_stack_name(cfn, templates, name) for name in templates if "/" in name}
    assert {s["StackName"] for s in stacks} == top | nested  # moto lists nested stacks beside the others
    assert all(s["StackStatus"] == "CREATE_COMPLETE" for s in stacks)


def nested_stack_name(cfn, templates: dict, name: str) -> str:
    """The physical name of nested stack `PARENT/ID`, from its parent's stack resources."""
    parent, child_id = name.rsplit("/", 1)
    from fmcluster.deploy.assembly import nested_id

    (logical_id,) = [lid for lid, r in templates[parent]["Resources"].items()
                     if r["Type"] == "AWS::CloudFormation::Stack" and nested_id(lid, r) == child_id]
    return physical_ids(cfn, parent)[logical_id]


def physical_ids(cfn, stack: str) -> dict[str, str]:
    return {r["LogicalResourceId"]: r["PhysicalResourceId"]
            for r in cfn.list_stack_resources(StackName=stack)["StackResourceSummaries"] if "LogicalResourceId" in r}


def test_vpc_and_subnets(deployed):
    import boto3

    from fmcluster.facts import network as network_plan

    spec, region, _ = deployed
    ec2 = boto3.client("ec2", region_name=region)
    vpcs = [v for v in ec2.describe_vpcs()["Vpcs"]
            if v["CidrBlock"] == spec.network.vpc_cidr and not v.get("IsDefault")]
    assert len(vpcs) == 1
    in_vpc = [{"Name": "vpc-id", "Values": [vpcs[0]["VpcId"]]}]
    cidrs = {s["CidrBlock"] for s in ec2.describe_subnets(Filters=in_vpc)["Subnets"]}
    expected = {s.cidr for s in network_plan.layout(spec.network.vpc_cidr, spec.availability_zone_ids)}
    assert cidrs == expected  # moto ignores AvailabilityZoneId: placement by AZ ID is asserted on the template


def test_launch_templates_carry_the_efa_layout(deployed):
    """Each GPU group's launch template, as EC2 (moto) stored it: every interface of the layout,
    with the security groups the network stack really created."""
    import boto3

    from fmcluster.facts import controlplanes
    from fmcluster.facts.efa import efa_layout

    spec, region, templates = deployed
    ec2 = boto3.client("ec2", region_name=region)
    cfn = boto3.client("cloudformation", region_name=region)
    stack = f"{spec.name}-cluster"
    if controlplanes.get(spec.orchestrator.type).hyperpod:
        # SageMaker HyperPod launches its instances itself: no node group has a launch template
        # (hyperpod-eks keeps only its system node group's; the instance groups are asserted in
        # tests/cdk/test_hyperpod_stack.py).
        paths = [r["Metadata"]["aws:cdk:path"] for r in templates[stack]["Resources"].values()
                 if r["Type"] == "AWS::EC2::LaunchTemplate"]
        system = [f"{stack}/SystemNodes/LaunchTemplate/Resource"] if spec.orchestrator.type == "hyperpod-eks" else []
        assert paths == system
        assert len(ec2.describe_launch_templates()["LaunchTemplates"]) == len(system)
        return
    groups = {sg["GroupId"] for sg in ec2.describe_security_groups()["SecurityGroups"]}
    mode = controlplanes.get(spec.orchestrator.type).interface_mode
    for group in spec.node_groups:
        # Each node group is a nested stack of its own: its launch template is read back from it.
        nested = f"{stack}/NodeGroup-{group.name}"
        (logical_id,) = [lid for lid, r in templates[nested]["Resources"].items()
                         if r["Type"] == "AWS::EC2::LaunchTemplate"
                         and r["Metadata"]["aws:cdk:path"].endswith(f"/NodeGroup-{group.name}/LaunchTemplate/Resource")]
        physical = physical_ids(cfn, nested_stack_name(cfn, templates, nested))
        (version,) = ec2.describe_launch_template_versions(
            LaunchTemplateId=physical[logical_id])["LaunchTemplateVersions"]
        data = version["LaunchTemplateData"]
        expected = efa_layout(group.instance, mode, group.efa)
        interfaces = sorted(data["NetworkInterfaces"], key=lambda i: (i["NetworkCardIndex"], i["DeviceIndex"]))
        assert [(i["NetworkCardIndex"], i["DeviceIndex"]) for i in interfaces] == \
            [(e.network_card_index, e.device_index) for e in expected]
        assert [i.get("InterfaceType", "interface") for i in interfaces] == [e.interface_type for e in expected]
        for interface in interfaces:
            # Real ids, resolved across stacks; on EKS also the cluster security group, which EKS
            # creates (moto skips the cluster, so its reference is a placeholder).
            stubs = {g for g in interface["Groups"] if g.startswith("moto-skipped-")}
            assert stubs <= ({"moto-skipped-" + lid for lid, r in templates[stack]["Resources"].items()
                              if r["Type"] == "AWS::EKS::Cluster"})
            # (inside the nested stack, the parent passes that placeholder as a parameter)
            assert set(interface["Groups"]) - stubs and set(interface["Groups"]) - stubs <= groups
        assert data["MetadataOptions"]["HttpTokens"] == "required"


def test_buckets_encrypted(deployed):
    import boto3

    spec, region, _ = deployed
    s3 = boto3.client("s3", region_name=region)
    # (the CDK asset bucket holds the nested templates published for the deploy)
    names = [b["Name"] for b in s3.list_buckets()["Buckets"] if not b["Name"].startswith(ASSET_BUCKET_PREFIX)]
    assert len(names) == len(spec.storage.buckets)
    for name in names:
        assert name.startswith(f"{spec.name}-")
        rules = s3.get_bucket_encryption(Bucket=name)["ServerSideEncryptionConfiguration"]["Rules"]
        assert rules[0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] in ("AES256", "aws:kms")


NODE_PRINCIPALS = {"ec2.amazonaws.com", "sagemaker.amazonaws.com"}  # PCS node role, HyperPod execution role
LIFECYCLE_PREFIX = "/fmcluster-lifecycle/"  # HyperPod lifecycle scripts in the CDK asset bucket
# AWS PCS lifecycle scripts: single objects of the CDK asset bucket, named by their SHA-256
NODE_SCRIPT = re.compile(r"arn:aws:s3:::" + ASSET_BUCKET_PREFIX + r"[0-9]{12}-[a-z0-9-]+/[0-9a-f]{64}\.sh")
IMAGE_BUILD_PATH = "/fmcluster-image-build/"  # NAME-images' build roles (fmcluster_cdk/constructs/images/builder.py)


def test_node_role_reaches_only_cluster_buckets(deployed):
    """The roles the nodes assume (PCS: under /aws-pcs/; HyperPod: trusted by SageMaker) reach
    only the cluster's buckets, and besides HyperPod's only its lifecycle-script folders, PCS's only
    its node scripts (single objects of the asset bucket), the image build roles only EC2 Image
    Builder's own buckets (objects, read)."""
    import boto3

    spec, region, _ = deployed
    iam = boto3.client("iam", region_name=region)

    def principals(role):
        document = role["AssumeRolePolicyDocument"]
        if isinstance(document, str):
            document = json.loads(document)
        services = [s.get("Principal", {}).get("Service", []) for s in document["Statement"]]
        return {name for service in services for name in ([service] if isinstance(service, str) else service)}

    roles = [r for r in iam.list_roles()["Roles"] if r["Path"] == "/aws-pcs/" or principals(r) & NODE_PRINCIPALS]
    assert roles, "the cluster stack creates the role its nodes assume"
    if spec.orchestrator.type == "pcs":  # (besides the image build roles of NAME-images, checked below too)
        assert all(r["Path"] in ("/aws-pcs/", IMAGE_BUILD_PATH) for r in roles), "PCS node roles: /aws-pcs/"
    for role in roles:
        for policy_name in iam.list_role_policies(RoleName=role["RoleName"])["PolicyNames"]:
            document = iam.get_role_policy(RoleName=role["RoleName"], PolicyName=policy_name)["PolicyDocument"]
            if isinstance(document, str):  # moto returns inline policies of a CFN role as a Python repr
                document = ast.literal_eval(document)
            for statement in document["Statement"]:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                if any(a.startswith("s3:") for a in actions):
                    resource = statement["Resource"]
                    resources = resource if isinstance(resource, list) else [resource]
                    assert "*" not in resources
                    prefixes = statement.get("Condition", {}).get("StringLike", {}).get("s3:prefix", [])
                    listing_lifecycle = bool(prefixes) and all(p.startswith(LIFECYCLE_PREFIX[1:]) for p in prefixes)
                    image_builder = role["Path"] == IMAGE_BUILD_PATH and actions == ["s3:GetObject"]
                    assert all(spec.name in json.dumps(r) or LIFECYCLE_PREFIX in json.dumps(r) or listing_lifecycle
                               or NODE_SCRIPT.fullmatch(r) or (image_builder and r.endswith(":s3:::ec2imagebuilder*/*"))
                               for r in resources), statement


def test_capacity_block_groups_get_their_scaler_rules(deployed):
    """An EKS node group on a Capacity Block: EventBridge (moto) holds the rules that run its
    scaler, on the block's events and every 5 minutes; no other plane or group has them."""
    import boto3

    spec, region, _ = deployed
    rules = boto3.client("events", region_name=region).list_rules()["Rules"]
    scalers = [r for r in rules if "CapacityBlockScaler" in r["Name"]]
    blocks = [g for g in spec.node_groups if g.capacity.type == "capacity-block"]
    if spec.orchestrator.type != "eks":
        assert scalers == []
        return
    assert len(scalers) == 2 * len(blocks) and blocks
    assert sorted(r.get("ScheduleExpression", "pattern") for r in scalers) == ["pattern", "rate(5 minutes)"]
    (pattern,) = [json.loads(r["EventPattern"]) for r in scalers if "EventPattern" in r]
    assert pattern["detail"] == {"capacity-reservation-id": [blocks[0].capacity.reservation_id]}


def test_image_build_roles_and_logs(deployed):
    """NAME-images and NAME-reference, where the model bakes node images and builds reference GPU
    images: per image, its build role (no bucket, no managed policy) in an instance profile, and its log group under
    /aws/imagebuilder/, with a retention, as IAM and CloudWatch Logs (moto) hold them; and each
    reference image's ECR repository, its tags immutable (moto's CloudFormation skips the Image
    Builder types it does not know, and creates the repository)."""
    import boto3

    from fmcluster.model.cluster import resolve

    spec, region, templates = deployed
    model = resolve(spec)
    images = model.images + model.reference_images
    iam = boto3.client("iam", region_name=region)
    roles = [r for r in iam.list_roles()["Roles"] if r["Path"] == IMAGE_BUILD_PATH]
    assert len(roles) == len(images)
    profiles = iam.list_instance_profiles()["InstanceProfiles"]
    for role in roles:
        assert iam.list_attached_role_policies(RoleName=role["RoleName"])["AttachedPolicies"] == []
        assert [p for p in profiles if [r["RoleName"] for r in p["Roles"]] == [role["RoleName"]]]
    groups = boto3.client("logs", region_name=region).describe_log_groups(
        logGroupNamePrefix="/aws/imagebuilder/")["logGroups"]
    assert len(groups) == len(images)
    assert all(g["logGroupName"].startswith(f"/aws/imagebuilder/{spec.name}-") and g["retentionInDays"]
               for g in groups)
    repositories = boto3.client("ecr", region_name=region).describe_repositories()["repositories"]
    assert sorted(r["repositoryName"] for r in repositories) == sorted(i.repository for i in model.reference_images)
    # (moto's CloudFormation takes the scanning configuration but its answer leaves it out)
    assert all(r["imageTagMutability"] == "IMMUTABLE" for r in repositories)
