"""Bad props raise one error, fmcluster_cdk.errors.ConstructError, that names the construct by its
path (as the CDK's ValidationError does): every `raise` of the CDK side is one, and it reads
`PATH: message` for a construct, a construct's props and a stack alike."""

from __future__ import annotations

import ast
from pathlib import Path

import aws_cdk as cdk
import pytest

from fmcluster.facts.efa import Interface
from fmcluster.spec import pipeline
from fmcluster_cdk.constructs.compute.launch_template import (
    CAPACITY_BLOCK_MARKET,
    CapacityTarget,
    LaunchTemplateProps,
    NodeLaunchTemplate,
)
from fmcluster_cdk.constructs.network import ClusterVpc
from fmcluster_cdk.constructs.pcs import SlurmCluster
from fmcluster_cdk.errors import ConstructError
from fmcluster_cdk.stacks.pipeline import pipeline_stack
from tests.support.paths import ROOT

PRIMARY = Interface(0, 0, "interface")


@pytest.fixture
def stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(), "demo-cluster")


def test_the_message_starts_with_the_construct_path(stack):
    with pytest.raises(ConstructError) as raised:
        SlurmCluster(stack, "Cluster", name="demo", slurm_version="24.11", size="HUGE", subnet_id="subnet-1",
                     security_group_ids=["sg-1"])
    assert raised.value.path == "demo-cluster/Cluster"
    assert str(raised.value) == "demo-cluster/Cluster: PCS cluster size 'HUGE' is not one of SMALL, MEDIUM, LARGE"
    assert isinstance(raised.value, ValueError)  # bad values, as before


def test_a_nested_construct_is_named_by_its_whole_path(stack):
    vpc = ClusterVpc(stack, "Network", name="demo", cidr="10.0.0.0/16", private_subnets={"use1-az4": "10.0.0.0/20"},
                     public_subnets={"use1-az4": "10.0.16.0/24"}, nat_az_id="use1-az4")
    with pytest.raises(ConstructError) as raised:
        vpc.private_subnets[0].add_default_route(nat_gateway_id="nat-1", gateway_id="igw-1")
    assert str(raised.value) == ("demo-cluster/Network/PrivateSubnet-use1-az4: a default route goes to one target: "
                                 "a NAT gateway or an internet gateway")


@pytest.mark.parametrize(("props", "message"), [
    (LaunchTemplateProps(interfaces=[], security_group_ids=["sg-1"], root_volume_gib=100),
     "a launch template needs at least the primary network interface"),
    (LaunchTemplateProps(interfaces=[PRIMARY, Interface(1, 0, "efa-only")], security_group_ids=["sg-1"],
                         root_volume_gib=100),
     "EFA interfaces need the EFA security group"),
    (LaunchTemplateProps(interfaces=[PRIMARY], security_group_ids=["sg-1"], root_volume_gib=100,
                         instance_type="p5.48xlarge", capacity=CapacityTarget(market_type=CAPACITY_BLOCK_MARKET)),
     "a Capacity Block needs its reservation id"),
    (LaunchTemplateProps(interfaces=[PRIMARY], security_group_ids=["sg-1"], root_volume_gib=100,
                         capacity=CapacityTarget(reservation_id="cr-1", reservation_resource_group_arn="arn:x")),
     "target a capacity reservation by id or by resource group ARN, not both"),
    (LaunchTemplateProps(interfaces=[PRIMARY], security_group_ids=["sg-1"], root_volume_gib=100,
                         capacity=CapacityTarget(market_type="spot")),
     "unsupported market type 'spot'"),
    (LaunchTemplateProps(interfaces=[PRIMARY], security_group_ids=["sg-1"], root_volume_gib=100,
                         capacity=CapacityTarget(market_type=CAPACITY_BLOCK_MARKET, reservation_id="cr-1")),
     "a Capacity Block launch template must name the instance type"),
])
def test_bad_props_are_refused_by_the_construct_that_takes_them(stack, props, message):
    with pytest.raises(ConstructError) as raised:
        NodeLaunchTemplate(stack, "LaunchTemplate", props=props)
    assert str(raised.value) == f"demo-cluster/LaunchTemplate: {message}"


def test_good_props_make_the_template(stack):
    template = NodeLaunchTemplate(stack, "LaunchTemplate", props=LaunchTemplateProps(
        interfaces=[PRIMARY], security_group_ids=["sg-1"], root_volume_gib=100, instance_type="p5.48xlarge",
        capacity=CapacityTarget(market_type=CAPACITY_BLOCK_MARKET, reservation_id="cr-1")))
    assert template.resource.node.path == "demo-cluster/LaunchTemplate/Resource"


def test_a_stack_names_itself(tmp_path):
    """The pipeline stack reads the pins of the repository it deploys (where it is synthesized):
    elsewhere it says so, as NAME-pipeline."""
    loaded = pipeline.load(ROOT / "examples/pipeline/pipeline.yaml", root=ROOT)
    assert loaded.ok and loaded.pipeline is not None
    with pytest.raises(ConstructError) as raised:
        pipeline_stack(cdk.App(), loaded.pipeline, root=tmp_path)
    assert str(raised.value) == (
        f"gpu-clusters-pipeline: {tmp_path} has no requirements.txt (fmcluster init writes it: the fmcluster the "
        "pipeline installs) and no .nvmrc or package.json of a clone of fmcluster: synthesize the pipeline at the "
        "root of the repository it deploys")


def raised_calls(path: Path) -> list[tuple[int, str]]:
    """(line, what is raised) of every `raise X(...)` in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Raise) and node.exc is not None:
            call = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            found.append((node.lineno, ast.unparse(call)))
    return found


def test_every_raise_of_the_cdk_side_is_a_construct_error():
    """Lambda handlers are left out: they run in AWS Lambda, not in the app."""
    files = [p for p in (ROOT / "fmcluster_cdk").rglob("*.py") if "handlers" not in p.parts]
    others = {f"{p.relative_to(ROOT)}:{line}": what for p in files for line, what in raised_calls(p)
              if what != "ConstructError"}
    assert not others, others
    assert sum(len(raised_calls(p)) for p in files) >= 20  # the check reads them


@pytest.mark.parametrize("groups, message", [
    ([], "an access entry of groups needs at least one Kubernetes group"),
    (["system:masters"], "Kubernetes groups ['system:masters'] start with system:, which Kubernetes keeps"),
])
def test_a_group_access_entry_refuses_no_group_or_a_system_group(stack, groups, message):
    from fmcluster_cdk.constructs.eks.cluster import GroupAccessEntry

    with pytest.raises(ConstructError) as raised:
        GroupAccessEntry(stack, "Member", cluster_name="demo", principal_arn="arn:aws:iam::111122223333:role/x",
                         kubernetes_groups=groups)
    assert str(raised.value) == f"demo-cluster/Member: {message}"
    entry = GroupAccessEntry(stack, "Good", cluster_name="demo", principal_arn="arn:aws:iam::111122223333:role/x",
                             kubernetes_groups=["fmcluster:team:a"])
    assert entry.resource.kubernetes_groups == ["fmcluster:team:a"] and entry.resource.type == "STANDARD"
