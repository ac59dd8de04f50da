"""fmcluster diff --deployed: the deployed stacks, read from CloudFormation, against the spec.

CloudFormation is botocore's Stubber (GetTemplate, DescribeStackResource) for the reads, and moto
for a stack deployed from a template and read back."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber

from fmcluster.deploy import deployed, diff
from tests.support.moto_aws import mocked_aws
from tests.support.specs import base_spec, validated
from tests.support.templates import fsx

NESTED = {"Type": "AWS::CloudFormation::Stack", "Metadata": {
    "aws:cdk:path": "c-cluster/NodeGroup-gpu.NestedStack/NodeGroup-gpu.NestedStackResource"},
    "Properties": {"TemplateURL": "https://s3.amazonaws.com/b/x.json"}}
CHILD_ARN = "arn:aws:cloudformation:us-east-1:111122223333:stack/c-cluster-NodeGroupgpu-1/abc"


@pytest.fixture(autouse=True)
def credentials(monkeypatch):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(key, "testing")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def stubbed():
    client = boto3.client("cloudformation", region_name="us-east-1")
    stub = Stubber(client)
    stub.activate()
    return client, stub


def test_stacks_and_their_nested_stacks_are_read_and_named_as_an_assembly_names_them():
    client, stub = stubbed()
    parent = {"Resources": {"NodeGroupStack": NESTED}}
    child = {"Resources": {"Lt": {"Type": "AWS::EC2::LaunchTemplate", "Properties": {"LaunchTemplateData": {}}}}}
    stub.add_response("get_template", {"TemplateBody": json.dumps(parent)},
                      {"StackName": "c-cluster", "TemplateStage": "Original"})
    stub.add_response("describe_stack_resource", {"StackResourceDetail": {
        "LogicalResourceId": "NodeGroupStack", "PhysicalResourceId": CHILD_ARN,
        "ResourceType": "AWS::CloudFormation::Stack", "LastUpdatedTimestamp": "2026-12-01T00:00:00Z",
        "ResourceStatus": "CREATE_COMPLETE"}}, {"StackName": "c-cluster", "LogicalResourceId": "NodeGroupStack"})
    stub.add_response("get_template", {"TemplateBody": json.dumps(child)},
                      {"StackName": CHILD_ARN, "TemplateStage": "Original"})
    stub.add_client_error("get_template", "ValidationError", "Stack with id c-storage does not exist")
    found = deployed.templates(["c-cluster", "c-cluster/NodeGroup-gpu", "c-storage"], client)
    assert found == {"c-cluster": parent, "c-cluster/NodeGroup-gpu": child}  # c-storage: not deployed
    stub.assert_no_pending_responses()


def test_other_errors_are_not_taken_for_a_missing_stack():
    from botocore.exceptions import ClientError

    client, stub = stubbed()
    stub.add_client_error("get_template", "AccessDenied", "not authorized to perform cloudformation:GetTemplate")
    with pytest.raises(ClientError):
        deployed.templates(["c-storage"], client)


def test_a_stack_deployed_with_moto_is_read_back():
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic", "Properties": {"TopicName": "t"}}}}
    with mocked_aws():
        boto3.client("cloudformation", region_name="us-east-1").create_stack(
            StackName="c-observability", TemplateBody=json.dumps(template))
        assert deployed.read(["c-observability", "c-network"], "us-east-1") == {"c-observability": template}


def test_diff_against_the_deployed_stacks_sees_a_change_from_the_code():
    """The spec is the same; the template this code makes replaces the deployed file system."""
    spec = validated(base_spec(name="c"))
    deployed_now = {"c-storage": {"Resources": {"Fs": fsx("subnet-1", DeploymentType="PERSISTENT_1")}}}
    synthesized = {"c-storage": {"Resources": {"Fs": fsx("subnet-1")}}}
    report = diff.run_deployed(spec, synthesize=lambda s: synthesized, read=lambda names, region: deployed_now)
    assert diff.exit_code(report) == 1  # data loss, not allowed
    shown = json.loads(diff.render(report, "json")[0])
    assert shown["old"] == "deployed c (us-east-1)"
    assert [c["logical_id"] for c in shown["data_loss"]] == ["Fs"]


def test_nothing_deployed_is_all_new_and_unreadable_stacks_are_one_clear_error():
    spec = validated(base_spec(name="c"))
    synthesized = {"c-storage": {"Resources": {"Fs": fsx("subnet-1")}}}
    report = diff.run_deployed(spec, synthesize=lambda s: synthesized, read=lambda names, region: {})
    assert diff.exit_code(report) == 0
    assert "no stack of c is deployed in us-east-1" in diff.render(report, "text")[0]

    def unreadable(names, region):
        raise deployed.NotReadable("Unable to locate credentials")

    report = diff.run_deployed(spec, synthesize=lambda s: synthesized, read=unreadable)
    assert diff.exit_code(report) == 1
    out, err = diff.render(report, "text")
    assert out == ""
    assert "cannot read the deployed stacks of c in us-east-1: Unable to locate credentials" in err


def test_the_command_line_takes_one_spec_with_deployed_and_two_without(capsys):
    from fmcluster.cli import main

    assert main(["diff", "--deployed", "examples/p5-pcs.yaml", "examples/p5-pcs.yaml"]) == 2
    assert "takes one SPEC" in capsys.readouterr().err
    assert main(["diff", "examples/p5-pcs.yaml"]) == 2
    assert "takes OLD and NEW" in capsys.readouterr().err
