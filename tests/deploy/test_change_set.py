"""fmcluster change-set: the guard between a change set's creation and its execution, against
DescribeChangeSet answers in the shapes CloudFormation gives (botocore's Stubber checks every
request and response against the service model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone

import boto3
import pytest
from botocore.stub import Stubber

from fmcluster.deploy import cfn_schemas, change_set, stack_policy
from fmcluster.spec import update_policy
from tests.support.paths import ROOT

STACK = "llm-pretrain-storage"
NAME = "PipelineChange"
STACK_ID = f"arn:aws:cloudformation:us-east-1:111122223333:stack/{STACK}/0a1b2c3d-4e5f-6789-abcd-ef0123456789"
CHANGE_SET_ID = f"arn:aws:cloudformation:us-east-1:111122223333:changeSet/{NAME}/11111111-2222-3333-4444-555555555555"
FS = "LustreFileSystem4AFDAE78"


def page(changes: list[dict], status: str = "CREATE_COMPLETE", reason: str | None = None,
         token: str | None = None) -> dict:
    """A DescribeChangeSet answer."""
    answer = {"ChangeSetName": NAME, "ChangeSetId": CHANGE_SET_ID, "StackId": STACK_ID, "StackName": STACK,
              "CreationTime": datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc), "ExecutionStatus": "AVAILABLE",
              "Status": status, "Capabilities": ["CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
              "Changes": [{"Type": "Resource", "ResourceChange": c} for c in changes]}
    if reason:
        answer["StatusReason"] = reason
        answer["ExecutionStatus"] = "UNAVAILABLE"
    if token:
        answer["NextToken"] = token
    return answer


def detail(name: str, recreation: str, before: str | None = None, after: str | None = None,
           evaluation: str = "Static", source: str = "DirectModification", causing: str | None = None) -> dict:
    target = {"Attribute": "Properties", "Name": name, "RequiresRecreation": recreation, "Path": f"/Properties/{name}",
              "AttributeChangeType": "Modify"}
    if before is not None:
        target["BeforeValue"] = before
    if after is not None:
        target["AfterValue"] = after
    out = {"Target": target, "Evaluation": evaluation, "ChangeSource": source}
    if causing:
        out["CausingEntity"] = causing
    return out


def modify(logical_id: str, kind: str, replacement: str, *details: dict, physical: str = "fs-0123456789abcdef0",
           policy: str | None = None) -> dict:
    change = {"Action": "Modify", "LogicalResourceId": logical_id, "PhysicalResourceId": physical,
              "ResourceType": kind, "Replacement": replacement, "Scope": ["Properties"], "Details": list(details)}
    if policy:
        change["PolicyAction"] = policy
    return change


def removed(logical_id: str, kind: str, policy: str = "Retain") -> dict:
    return {"Action": "Remove", "LogicalResourceId": logical_id, "PhysicalResourceId": "llm-pretrain-datasets",
            "ResourceType": kind, "PolicyAction": policy, "Scope": [], "Details": []}


def request(token: str | None = None, stack: str = STACK, name: str = NAME) -> dict:
    params = {"StackName": stack, "ChangeSetName": name, "IncludePropertyValues": True}
    if token:
        params["NextToken"] = token
    return params


@pytest.fixture
def cfn():
    client = boto3.client("cloudformation", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def run(client, *, allow: bool = False, fmt: str = "text", delete: bool = False) -> tuple[int, str, str]:
    """`fmcluster change-set STACK NAME` with `client`: exit code, stdout, stderr."""
    report = change_set.run(STACK, NAME, client=client, allow_data_loss=allow, delete=delete, sleep=lambda s: None)
    out, err = change_set.render(report, fmt)
    return change_set.exit_code(report), out, err


NEW_SUBNET = detail("SubnetIds", "Always", '["subnet-0aaa"]', '["subnet-0bbb"]')


def test_a_replaced_file_system_is_refused_and_allowed_only_by_the_switch(cfn):
    client, stub = cfn
    answer = page([modify(FS, "AWS::FSx::FileSystem", "True", NEW_SUBNET, policy="ReplaceAndRetain")])
    stub.add_response("describe_change_set", answer, request())
    code, out, _ = run(client)
    assert code == 1
    assert out.splitlines() == [
        f"fmcluster change-set: {NAME} of {STACK}: 1 resource change",
        "DATA LOSS: 1 stateful resource replaced or removed:",
        f'  {STACK} {FS} (AWS::FSx::FileSystem) replaced: SubnetIds requires replacement '
        '(["subnet-0aaa"] -> ["subnet-0bbb"])',
        "refusing (exit 1): do not execute this change set; copy or back up the data first, then allow it for "
        "this one change (--allow-data-loss; in a pipeline, the merge commit's trailer 'Allow-Data-Loss: NAME')"]
    stub.add_response("describe_change_set", answer, request())
    code, out, _ = run(client, allow=True, fmt="json")
    report = json.loads(out)
    assert code == 0 and report["ok"] and report["findings"][0]["logical_id"] == FS


def test_the_same_subnet_written_as_an_import_replaces_nothing(cfn):
    """The upgrade from Fn::GetStackOutput to Fn::ImportValue: CloudFormation says Conditional,
    but the value before and after is the same subnet."""
    client, stub = cfn
    same = detail("SubnetIds", "Always", '["subnet-0aaa"]', '["subnet-0aaa"]', evaluation="Dynamic")
    stub.add_response("describe_change_set", page([modify(FS, "AWS::FSx::FileSystem", "Conditional", same)]),
                      request())
    code, out, _ = run(client)
    assert code == 0 and out.splitlines()[-1] == "no stateful resource is replaced or removed"


def test_a_value_known_only_during_the_update_may_replace_it(cfn):
    client, stub = cfn
    later = detail("SecurityGroupIds", "Always", '["sg-0aaa"]', "{{changeSet:KNOWN_AFTER_APPLY}}",
                   evaluation="Dynamic", source="ResourceReference", causing="FileSystemSecurityGroup")
    stub.add_response("describe_change_set", page([modify(FS, "AWS::FSx::FileSystem", "Conditional", later)]),
                      request())
    code, out, _ = run(client)
    assert code == 1
    assert (f"{FS} (AWS::FSx::FileSystem) may be replaced: SecurityGroupIds requires replacement "
            "([\"sg-0aaa\"] -> {{changeSet:KNOWN_AFTER_APPLY}}), caused by FileSystemSecurityGroup") in out


def test_a_removed_bucket_is_refused_even_when_retained(cfn):
    client, stub = cfn
    stub.add_response("describe_change_set", page([removed("DatasetsBucket", "AWS::S3::Bucket")]), request())
    code, out, _ = run(client)
    assert code == 1
    assert "DatasetsBucket (AWS::S3::Bucket) removed: DeletionPolicy Retain: kept in the account" in out


def test_in_place_changes_and_stateless_replacements_pass(cfn):
    client, stub = cfn
    throughput = detail("LustreConfiguration", "Never", '{"PerUnitStorageThroughput":125}',
                        '{"PerUnitStorageThroughput":250}')
    ingress = detail("SourceSecurityGroupId", "Always", "sg-0aaa", "sg-0bbb")
    stub.add_response("describe_change_set", page([
        modify(FS, "AWS::FSx::FileSystem", "False", throughput),
        modify("LustreIngress988", "AWS::EC2::SecurityGroupIngress", "True", ingress, physical="sgr-0123"),
        {"Action": "Add", "LogicalResourceId": "NewBucket", "ResourceType": "AWS::S3::Bucket", "Scope": [],
         "Details": []}]), request())
    code, out, _ = run(client)
    assert code == 0 and out.splitlines() == [f"fmcluster change-set: {NAME} of {STACK}: 3 resource changes",
                                              "no stateful resource is replaced or removed"]


def test_what_holds_no_data_passes_whatever_goes(cfn):
    """The one list of what holds data, `fmcluster diff`'s: a link (the files are in the file
    system and the bucket), a handler's log group or a security group leaving is no finding."""
    client, stub = cfn
    stub.add_response("describe_change_set", page([
        removed("LinkDatasets", "AWS::FSx::DataRepositoryAssociation"),
        removed("ScalerLogs", "AWS::Logs::LogGroup", policy="Delete"),
        removed("LustreSecurityGroup", "AWS::EC2::SecurityGroup")]), request())
    code, out, _ = run(client)
    assert code == 0 and out.splitlines()[-1] == "no stateful resource is replaced or removed"


def test_every_page_and_every_nested_change_set_is_read(cfn):
    client, stub = cfn
    nested_id = CHANGE_SET_ID.replace("11111111", "99999999")
    nested_stack = STACK_ID.replace(STACK, f"{STACK}-Links-1ABC")
    stub.add_response("describe_change_set", page([modify(
        "Links", "AWS::CloudFormation::Stack", "False", physical=nested_stack) | {"ChangeSetId": nested_id}],
        token="page-2"), request())
    stub.add_response("describe_change_set", page([modify("Key", "AWS::KMS::Key", "True",
                                                          detail("KeySpec", "Always", "SYMMETRIC_DEFAULT",
                                                                 "RSA_2048"), physical="k")]),
                      request("page-2"))
    stub.add_response("describe_change_set", page([removed("Metrics", "AWS::APS::Workspace", policy="Delete")]),
                      request(stack=nested_stack, name=nested_id))
    code, out, _ = run(client)
    assert code == 1
    assert f"{STACK} Key (AWS::KMS::Key) replaced: KeySpec requires replacement" in out
    assert f"{STACK}/Links Metrics (AWS::APS::Workspace) removed\n" in out
    assert out.startswith(f"fmcluster change-set: {NAME} of {STACK}: 3 resource changes")


def test_a_change_set_being_created_is_waited_for(cfn):
    client, stub = cfn
    stub.add_response("describe_change_set", page([], status="CREATE_PENDING"), request())
    stub.add_response("describe_change_set", page([], status="CREATE_IN_PROGRESS"), request())
    stub.add_response("describe_change_set", page([modify(FS, "AWS::FSx::FileSystem", "True", NEW_SUBNET)]),
                      request())
    assert run(client)[0] == 1


def test_one_still_being_created_when_the_wait_ends_is_an_error(cfn):
    client, stub = cfn
    stub.add_response("describe_change_set", page([], status="CREATE_IN_PROGRESS"), request())
    report = change_set.run(STACK, NAME, client=client, wait_s=0, sleep=lambda s: None)
    code, err = change_set.exit_code(report), change_set.render(report, "text")[1]
    assert code == 1 and "is CREATE_IN_PROGRESS: still being created" in err


def test_no_changes_passes_and_another_failure_is_an_error(cfn):
    client, stub = cfn
    stub.add_response("describe_change_set", page([], status="FAILED", reason=(
        "The submitted information didn't contain changes. Submit different information to create a change set.")),
        request())
    stub.add_response("delete_change_set", {}, {"StackName": STACK, "ChangeSetName": NAME})  # it keeps failed ones
    code, out, _ = run(client, delete=True)
    assert code == 0 and out == f"fmcluster change-set: {NAME} of {STACK}: no changes\n"
    stub.add_response("describe_change_set", page([], status="FAILED", reason="No export named x found"), request())
    code, _, err = run(client)
    assert code == 1 and "is FAILED: No export named x found" in err and "hint:" in err


def test_a_missing_change_set_is_an_error(cfn):
    client, stub = cfn
    stub.add_client_error("describe_change_set", "ChangeSetNotFound", f"ChangeSet [{NAME}] does not exist",
                          http_status_code=404, expected_params=request())
    code, _, err = run(client)
    assert code == 1 and "does not exist" in err


def test_delete_after_judging(cfn):
    client, stub = cfn
    stub.add_response("describe_change_set", page([modify(FS, "AWS::FSx::FileSystem", "True", NEW_SUBNET)]),
                      request())
    stub.add_response("delete_change_set", {}, {"StackName": STACK, "ChangeSetName": NAME})
    assert run(client, allow=True, delete=True)[0] == 0


def test_command_line_without_credentials(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
               AWS_EC2_METADATA_DISABLED="true", AWS_DEFAULT_REGION="us-east-1")
    result = subprocess.run([sys.executable, "-m", "fmcluster", "change-set", STACK, NAME], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: cannot judge the change set: Unable to locate credentials")
    help_text = subprocess.run([sys.executable, "-m", "fmcluster", "change-set", "--help"], cwd=ROOT,
                               capture_output=True, text=True).stdout
    assert "--allow-data-loss" in help_text and "--role-arn" in help_text


# ---- the update policy (fmcluster.spec.update_policy) and the guards of NAME-storage --------

def _claimed(effect: str) -> set[str]:
    return {t for entry in update_policy.POLICIES.values() for case in entry.cases if case.effect == effect
            for t in case.resources}


@pytest.mark.parametrize("kind", sorted(_claimed(update_policy.DATA_LOSS) | _claimed(update_policy.REPLACE)))
def test_the_guard_refuses_the_replacement_of_what_holds_data_and_of_nothing_else(kind):
    """Each type the update policy says a change replaces or loses: the guard refuses a change set
    that replaces one exactly when it holds data."""
    verdict = change_set.Verdict(STACK, NAME, "changes")
    change = modify("Resource", kind, "True", detail("Property", "Always"))
    change_set._judge(None, STACK, [{"Type": "Resource", "ResourceChange": change}], verdict, {})
    assert verdict.changes == 1 and bool(verdict.findings) == cfn_schemas.holds_data(kind)


def test_what_the_update_policy_says_loses_data_the_guard_refuses_and_a_replacement_it_lets_through():
    for path, entry in update_policy.POLICIES.items():
        for case in entry.cases:
            if case.effect == update_policy.DATA_LOSS:
                assert any(cfn_schemas.holds_data(t) for t in case.resources), path
            if case.effect == update_policy.REPLACE:
                assert not any(cfn_schemas.holds_data(t) for t in case.resources), path


def test_the_stack_policy_denies_what_a_storage_change_loses_with_the_data():
    """The stack policy of NAME-storage guards what holds data, and what the update policy says a
    storage change replaces or removes with it: the file system's links and security group."""
    (deny,) = [s for s in stack_policy.protecting()["Statement"] if s["Effect"] == "Deny"]
    guarded = deny["Condition"]["StringEquals"]["ResourceType"]
    assert guarded == list(stack_policy.GUARDED_TYPES)
    assert set(update_policy.lost_with_data("storage")) <= set(guarded)
    assert guarded == [*cfn_schemas.DATA_TYPES, "AWS::FSx::DataRepositoryAssociation", "AWS::EC2::SecurityGroup"]
