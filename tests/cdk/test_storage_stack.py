"""The NAME-storage stack: buckets, KMS key, FSx for Lustre file system, its security group and
its links to S3, synthesized from the example specs (and variants of them) against a stand-in
for the network stack.

Each synthesis takes seconds, so every spec is synthesized once per module (module fixtures);
the tests then read the template (CDK assertions), lint it (cfn-lint) or deploy it (moto).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from fmcluster.spec.models import ClusterSpec
from tests.support.paths import ROOT

pytestmark = pytest.mark.synth

P5 = "examples/p5-pcs.yaml"
P5EN = "examples/p5en-reservation-pcs.yaml"
VPC, GPU_SUBNET = "vpc-0123456789abcdef0", "subnet-0123456789abcdef0"
EFA_SG, NODE_SG = "sg-0123456789abcdef0", "sg-0fedcba9876543210"
RETAINED = ("AWS::S3::Bucket", "AWS::KMS::Key", "AWS::FSx::FileSystem", "AWS::FSx::DataRepositoryAssociation",
            "AWS::EC2::SecurityGroup", "AWS::FSx::Volume")


def network_stand_in() -> SimpleNamespace:
    """What NAME-network exposes, as plain ids (the storage stack only passes them through)."""
    return SimpleNamespace(vpc_id=VPC, vpc_cidr="10.0.0.0/16", gpu_subnet_id=GPU_SUBNET,
                           private_subnet_ids=[GPU_SUBNET], region_subnet_ids=[GPU_SUBNET],
                           efa_security_group_id=EFA_SG, node_security_group_id=NODE_SG)


def spec_of(example: str, edit=None) -> ClusterSpec:
    """An example spec, optionally edited (a function on its YAML data), checked by every rule."""
    data = yaml.safe_load((ROOT / example).read_text())
    if edit:
        edit(data)
    result = loader.load_text(yaml.safe_dump(data, sort_keys=False), example)
    assert result.ok, [d.format() for d in result.errors]
    return result.spec


def with_kms(data: dict) -> None:
    data["storage"]["kms"] = True


def with_home(data: dict) -> None:
    data["storage"]["kms"] = True
    data["storage"]["home"] = {"deployment_type": "SINGLE_AZ_HA_2", "throughput_mbps": 320}


def without_lustre(data: dict) -> None:
    del data["storage"]["lustre"]
    data["storage"]["kms"] = True


@dataclass
class Synth:
    stack: object  # StorageStack
    path: Path  # the synthesized template file

    @cached_property
    def text(self) -> str:
        return self.path.read_text()

    @cached_property
    def template(self) -> dict:
        return json.loads(self.text)

    @cached_property
    def assertions(self):
        from aws_cdk.assertions import Template

        return Template.from_json(self.template)

    def resources(self, kind: str) -> dict:
        return {k: r for k, r in self.template["Resources"].items() if r["Type"] == kind}

    def logical_id(self, construct) -> str:
        return self.stack.get_logical_id(construct.node.default_child)

    def bucket(self, name: str) -> dict:
        return self.template["Resources"][self.logical_id(self.stack.buckets[name])]

    def resolve(self, value):
        return self.stack.resolve(value)


def synthesize(spec: ClusterSpec, outdir: Path, *, moto: bool = False) -> Synth:
    """NAME-storage alone, in an app with the project's cdk.json context. For moto, without the
    bootstrap-version rule (it reads an SSM parameter that moto does not have)."""
    import aws_cdk as cdk

    from fmcluster_cdk.stacks.app import environment
    from fmcluster_cdk.stacks.storage import StorageStack
    from tests.support.stacks import new_app

    app = new_app(outdir)
    synthesizer = cdk.DefaultStackSynthesizer(generate_bootstrap_version_rule=False) if moto else None
    stack = StorageStack(app, f"{spec.name}-storage", model=resolve(spec), network=network_stand_in(),
                         env=environment(spec), synthesizer=synthesizer, termination_protection=True)
    artifact = app.synth().get_stack_by_name(stack.stack_name)
    return Synth(stack, outdir / artifact.template_file)


@pytest.fixture(scope="module")
def p5(tmp_path_factory) -> Synth:
    return synthesize(spec_of(P5), tmp_path_factory.mktemp("p5"))


@pytest.fixture(scope="module")
def p5en(tmp_path_factory) -> Synth:
    return synthesize(spec_of(P5EN), tmp_path_factory.mktemp("p5en"))


@pytest.fixture(scope="module")
def kms(tmp_path_factory) -> Synth:
    """examples/p5-pcs.yaml with storage.kms: true."""
    return synthesize(spec_of(P5, with_kms), tmp_path_factory.mktemp("kms"))


@pytest.fixture(scope="module")
def no_lustre(tmp_path_factory) -> Synth:
    """examples/p5-pcs.yaml without storage.lustre, with storage.kms: true; deployable to moto."""
    return synthesize(spec_of(P5, without_lustre), tmp_path_factory.mktemp("no-lustre"), moto=True)


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Synth:
    """examples/p5-pcs.yaml with storage.kms and a shared home (storage.home)."""
    return synthesize(spec_of(P5, with_home), tmp_path_factory.mktemp("home"))


@pytest.fixture(scope="module")
def eks_teams(tmp_path_factory) -> Synth:
    """examples/p5en-eks.yaml: a shared home and two teams on Kubernetes."""
    return synthesize(spec_of("examples/p5en-eks.yaml"), tmp_path_factory.mktemp("eks-teams"))


ALL = ("p5", "p5en", "kms", "no_lustre", "home", "eks_teams")


@pytest.fixture(params=ALL)
def any_synth(request) -> Synth:
    return request.getfixturevalue(request.param)


# ---- buckets -----------------------------------------------------------------------------------

def test_buckets_named_by_the_naming_rule(p5):
    """{cluster}-{bucket}-{account}-{region code} (fmcluster.facts.naming.bucket_name)."""
    assert sorted(p5.stack.bucket_names) == ["checkpoints", "datasets"]
    for name in ("datasets", "checkpoints"):
        joined = p5.bucket(name)["Properties"]["BucketName"]["Fn::Join"][1]
        assert joined == [f"llm-pretrain-{name}-", {"Ref": "AWS::AccountId"}, "-use1"]
        assert p5.resolve(p5.stack.bucket_names[name]) == {"Fn::Join": ["", joined]}
        assert p5.resolve(p5.stack.bucket_arns[name]) == {"Fn::Join": ["", [
            "arn:", {"Ref": "AWS::Partition"}, f":s3:::llm-pretrain-{name}-", {"Ref": "AWS::AccountId"}, "-use1"]]}


def test_buckets_private_and_acls_off(any_synth):
    buckets = any_synth.resources("AWS::S3::Bucket")
    assert buckets
    for bucket in buckets.values():
        props = bucket["Properties"]
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True}
        assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}


def test_buckets_s3_managed_encryption_without_kms(p5):
    for bucket in p5.resources("AWS::S3::Bucket").values():
        (rule,) = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert rule["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}


def test_bucket_policies_deny_requests_without_tls(any_synth):
    from aws_cdk.assertions import Match

    buckets = any_synth.resources("AWS::S3::Bucket")
    policies = any_synth.resources("AWS::S3::BucketPolicy")
    assert sorted(p["Properties"]["Bucket"]["Ref"] for p in policies.values()) == sorted(buckets)
    for logical_id in buckets:
        any_synth.assertions.has_resource_properties("AWS::S3::BucketPolicy", {
            "Bucket": {"Ref": logical_id},
            "PolicyDocument": {"Statement": Match.array_with([
                Match.object_like({"Effect": "Deny", "Action": "s3:*", "Principal": {"AWS": "*"},
                                   "Condition": {"Bool": {"aws:SecureTransport": "false"}}}),
                Match.object_like({"Effect": "Deny", "Condition": {"NumericLessThan": {"s3:TlsVersion": 1.2}}}),
            ])},
        })


def test_versioning_only_where_asked(p5):
    assert p5.bucket("checkpoints")["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}
    assert "VersioningConfiguration" not in p5.bucket("datasets")["Properties"]


def test_incomplete_multipart_uploads_aborted(p5):
    for bucket in p5.resources("AWS::S3::Bucket").values():
        (rule,) = bucket["Properties"]["LifecycleConfiguration"]["Rules"]
        assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 7}


def test_stateful_resources_retained(any_synth):
    for logical_id, resource in any_synth.template["Resources"].items():
        if resource["Type"] in RETAINED:
            assert resource.get("DeletionPolicy") == "Retain", logical_id
            assert resource.get("UpdateReplacePolicy") == "Retain", logical_id


def test_no_iam_resources_and_no_wildcard_allows(any_synth):
    """FSx uses its own service-linked roles: the stack creates no IAM. Every Allow names its
    actions, except the account's administration of its own key (CDK's default key policy)."""
    assert not [r for r in any_synth.template["Resources"].values() if r["Type"].startswith("AWS::IAM::")]
    documents = [r["Properties"]["PolicyDocument"] for r in any_synth.resources("AWS::S3::BucketPolicy").values()]
    documents += [r["Properties"]["KeyPolicy"] for r in any_synth.resources("AWS::KMS::Key").values()]
    for document in documents:
        for statement in document["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            account_root = json.dumps(statement["Principal"]).endswith('":root"]]}}')
            if statement["Effect"] == "Allow" and not account_root:
                assert not [a for a in actions if "*" in a], statement


# ---- FSx for Lustre ----------------------------------------------------------------------------

def file_system(synth: Synth) -> dict:
    (fs,) = synth.resources("AWS::FSx::FileSystem").values()
    return fs["Properties"]


def lustre_sg(synth: Synth) -> str:
    return synth.stack.get_logical_id(synth.stack.lustre.security_group)


def test_p5_file_system(p5):
    fs = file_system(p5)
    assert fs["FileSystemType"] == "LUSTRE" and fs["FileSystemTypeVersion"] == "2.15"
    assert fs["StorageCapacity"] == 4800 and fs["StorageType"] == "SSD"
    assert fs["SubnetIds"] == [GPU_SUBNET]
    assert fs["SecurityGroupIds"] == [{"Fn::GetAtt": [lustre_sg(p5), "GroupId"]}]
    assert "KmsKeyId" not in fs
    assert fs["LustreConfiguration"] == {
        "DeploymentType": "PERSISTENT_2",
        "PerUnitStorageThroughput": 250,
        "DataCompressionType": "LZ4",
        "MetadataConfiguration": {"Mode": "AUTOMATIC"},
        "WeeklyMaintenanceStartTime": "7:05:00",
        "AutomaticBackupRetentionDays": 7,
        "DailyAutomaticBackupStartTime": "02:00",
        "LogConfiguration": {"Level": "WARN_ERROR"},
    }


def test_p5en_file_system_uses_efa(p5en):
    fs = file_system(p5en)
    assert fs["StorageCapacity"] == 38400
    config = fs["LustreConfiguration"]
    assert config["EfaEnabled"] is True
    assert config["DeploymentType"] == "PERSISTENT_2" and config["PerUnitStorageThroughput"] == 500
    assert config["MetadataConfiguration"] == {"Mode": "USER_PROVISIONED", "Iops": 12000}
    assert fs["SecurityGroupIds"] == [{"Fn::GetAtt": [lustre_sg(p5en), "GroupId"]}, EFA_SG]


def test_lustre_security_group_ports(p5):
    sg = lustre_sg(p5)
    rules = sorted((r["Properties"]["FromPort"], r["Properties"]["ToPort"],
                    json.dumps(r["Properties"]["SourceSecurityGroupId"]))
                   for r in p5.resources("AWS::EC2::SecurityGroupIngress").values()
                   if r["Properties"]["GroupId"] == {"Fn::GetAtt": [sg, "GroupId"]}
                   and r["Properties"]["IpProtocol"] == "tcp")
    itself = json.dumps({"Fn::GetAtt": [sg, "GroupId"]})
    assert rules == sorted([(988, 988, itself), (988, 988, json.dumps(NODE_SG)),
                            (1018, 1023, itself), (1018, 1023, json.dumps(NODE_SG))])
    props = p5.template["Resources"][sg]["Properties"]
    assert props["VpcId"] == VPC
    assert props["SecurityGroupEgress"] == [{"IpProtocol": "-1", "CidrIp": "0.0.0.0/0", "Description": "all outbound"}]
    assert "SecurityGroupIngress" not in props  # every rule by SG reference, none by CIDR (EFA needs that)


def test_rules_naming_the_client_group_are_not_retained(p5):
    """So that NAME-network (which owns the node group) can be deleted after NAME-storage."""
    for logical_id, rule in p5.resources("AWS::EC2::SecurityGroupIngress").items():
        from_clients = rule["Properties"]["SourceSecurityGroupId"] == NODE_SG
        assert ("DeletionPolicy" in rule) is not from_clients, logical_id


def links(synth: Synth) -> dict[str, dict]:
    return {r["Properties"]["FileSystemPath"]: r["Properties"]
            for r in synth.resources("AWS::FSx::DataRepositoryAssociation").values()}


def test_p5_links(p5):
    (fs_id,) = p5.resources("AWS::FSx::FileSystem")
    found = links(p5)
    assert sorted(found) == ["/checkpoints", "/datasets"]
    datasets, checkpoints = found["/datasets"], found["/checkpoints"]
    for path, link in found.items():
        assert link["FileSystemId"] == {"Ref": fs_id}
        bucket = p5.logical_id(p5.stack.buckets[path.strip("/")])
        assert link["DataRepositoryPath"] == {"Fn::Join": ["", ["s3://", {"Ref": bucket}]]}
    assert datasets["S3"] == {"AutoImportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]}}
    assert datasets["BatchImportMetaDataOnCreate"] is True
    assert checkpoints["S3"] == {"AutoExportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]}}
    assert "BatchImportMetaDataOnCreate" not in checkpoints


def test_p5en_link_imports_and_exports(p5en):
    checkpoints = links(p5en)["/checkpoints"]
    assert checkpoints["S3"] == {"AutoImportPolicy": {"Events": ["NEW"]},
                                 "AutoExportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]}}
    assert checkpoints["BatchImportMetaDataOnCreate"] is True


def test_link_logical_ids_come_from_paths(p5):
    ids = sorted(p5.resources("AWS::FSx::DataRepositoryAssociation"))
    assert [i[:-8] for i in ids] == ["LustreLinkcheckpoints", "LustreLinkdatasets"]


def test_outputs(p5):
    outputs = p5.template["Outputs"]
    (fs_id,) = p5.resources("AWS::FSx::FileSystem")
    assert outputs["FileSystemId"]["Value"] == {"Ref": fs_id}
    assert outputs["FileSystemDnsName"]["Value"] == {"Fn::GetAtt": [fs_id, "DNSName"]}
    assert outputs["FileSystemMountName"]["Value"] == {"Fn::GetAtt": [fs_id, "LustreMountName"]}
    assert outputs["LustreSecurityGroupId"]["Value"] == {"Fn::GetAtt": [lustre_sg(p5), "GroupId"]}
    bucket_outputs = sorted(o["Value"]["Ref"] for o in outputs.values()
                            if "Ref" in o["Value"] and o["Value"]["Ref"] != fs_id)
    assert bucket_outputs == sorted(p5.resources("AWS::S3::Bucket"))


def test_stack_attributes(p5):
    (fs_id,) = p5.resources("AWS::FSx::FileSystem")
    stack = p5.stack
    assert p5.resolve(stack.file_system_id) == {"Ref": fs_id}
    assert p5.resolve(stack.file_system_dns_name) == {"Fn::GetAtt": [fs_id, "DNSName"]}
    assert p5.resolve(stack.file_system_mount_name) == {"Fn::GetAtt": [fs_id, "LustreMountName"]}
    assert p5.resolve(stack.lustre_security_group_id) == {"Fn::GetAtt": [lustre_sg(p5), "GroupId"]}
    assert stack.kms_key_arn is None


def test_without_lustre_no_file_system(no_lustre):
    types = {r["Type"] for r in no_lustre.template["Resources"].values()}
    assert not types & {"AWS::FSx::FileSystem", "AWS::FSx::DataRepositoryAssociation", "AWS::EC2::SecurityGroup",
                        "AWS::EC2::SecurityGroupIngress"}
    assert len(no_lustre.resources("AWS::S3::Bucket")) == 2
    stack = no_lustre.stack
    assert (stack.file_system_id, stack.file_system_dns_name, stack.file_system_mount_name,
            stack.lustre_security_group_id) == (None, None, None, None)
    assert not [o for o in no_lustre.template["Outputs"] if o.startswith(("FileSystem", "Lustre"))]


# ---- KMS ---------------------------------------------------------------------------------------

def test_kms_key(kms):
    (key_id,) = kms.resources("AWS::KMS::Key")
    key = kms.template["Resources"][key_id]
    assert key["Properties"]["EnableKeyRotation"] is True
    assert kms.resolve(kms.stack.kms_key_arn) == {"Fn::GetAtt": [key_id, "Arn"]}
    assert kms.template["Outputs"]["KmsKeyArn"]["Value"] == {"Fn::GetAtt": [key_id, "Arn"]}
    (alias,) = kms.resources("AWS::KMS::Alias").values()
    assert alias["Properties"]["AliasName"] == "alias/fmcluster/llm-pretrain"


def test_kms_encrypts_buckets_and_file_system(kms):
    (key_id,) = kms.resources("AWS::KMS::Key")
    for bucket in kms.resources("AWS::S3::Bucket").values():
        (rule,) = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert rule == {"BucketKeyEnabled": True, "ServerSideEncryptionByDefault": {
            "SSEAlgorithm": "aws:kms", "KMSMasterKeyID": {"Fn::GetAtt": [key_id, "Arn"]}}}
    assert file_system(kms)["KmsKeyId"] == {"Ref": key_id}


def test_kms_key_lets_fsx_reach_linked_buckets_through_s3(kms):
    (key,) = kms.resources("AWS::KMS::Key").values()
    (statement,) = [s for s in key["Properties"]["KeyPolicy"]["Statement"]
                    if s.get("Sid") == "FSxLinkedBucketsThroughS3"]
    assert statement["Effect"] == "Allow" and statement["Principal"] == {"AWS": "*"}
    assert "kms:CreateGrant" not in statement["Action"] and "kms:GenerateDataKey" in statement["Action"]
    equals = statement["Condition"]["StringEquals"]
    assert equals["kms:CallerAccount"] == {"Ref": "AWS::AccountId"}
    assert equals["kms:ViaService"] == {"Fn::Join": ["", ["s3.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]}
    arns = [kms.resolve(kms.stack.bucket_arns[b]) for b in ("checkpoints", "datasets")]
    assert equals["kms:EncryptionContext:aws:s3:arn"] == arns
    principal = json.dumps(statement["Condition"]["ArnLike"]["aws:PrincipalArn"])
    assert "s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_fs-*" in principal


# ---- whole templates ---------------------------------------------------------------------------

def test_synthesis_is_deterministic(p5, tmp_path):
    again = synthesize(spec_of(P5), tmp_path)
    assert again.text == p5.text


def test_cfn_lint_clean(any_synth):
    from tests.support.cfn_lint import findings

    errors = [m for m in findings(any_synth.path) if m.rule.id.startswith("E")]
    assert not errors, "; ".join(str(m) for m in errors)


def test_deploys_to_moto(no_lustre, monkeypatch):
    """Deploy the template into moto's CloudFormation and read the buckets back with boto3.

    A template without storage.lustre, on purpose: moto skips FSx resources, and an output that
    reads an attribute of a skipped resource (FileSystemDnsName, FileSystemMountName) fails the
    whole stack; the Lustre security group would need the real VPC of NAME-network as well.
    moto 5.2's CloudFormation applies only the default-encryption algorithm and key and the Tags
    of an AWS::S3::Bucket (not its Bucket Key, versioning, public access block, ownership controls
    or lifecycle) and skips AWS::S3::BucketPolicy, so those are checked on the template above, not here.
    """
    import boto3

    from tests.support.moto_aws import mocked_aws

    for var, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_SESSION_TOKEN", "testing"), ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mocked_aws():
        cfn = boto3.client("cloudformation", region_name="us-east-1")
        cfn.create_stack(StackName=no_lustre.stack.stack_name, TemplateBody=no_lustre.text)
        stack = cfn.describe_stacks(StackName=no_lustre.stack.stack_name)["Stacks"][0]
        assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
        account = boto3.client("sts").get_caller_identity()["Account"]

        kms_client, s3 = boto3.client("kms", region_name="us-east-1"), boto3.client("s3", region_name="us-east-1")
        key_arn = outputs["KmsKeyArn"]
        assert kms_client.get_key_rotation_status(KeyId=key_arn)["KeyRotationEnabled"] is True
        names = sorted(b["Name"] for b in s3.list_buckets()["Buckets"])
        assert names == [f"llm-pretrain-{b}-{account}-use1" for b in ("checkpoints", "datasets")]
        assert sorted(v for k, v in outputs.items() if k.startswith("Bucket")) == names
        for name in names:
            (rule,) = s3.get_bucket_encryption(Bucket=name)["ServerSideEncryptionConfiguration"]["Rules"]
            assert rule["ApplyServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key_arn}


# ---- constructs, without a synthesis -----------------------------------------------------------

@pytest.fixture(scope="module")
def app():
    import aws_cdk as cdk

    return cdk.App()


def lustre_in(app, stack_id: str, **props):
    """A LustreFileSystem (construct id "Fs") alone in a new stack of `app`, never synthesized."""
    import aws_cdk as cdk

    from fmcluster_cdk.constructs.storage.lustre import LustreFileSystem

    defaults = dict(vpc_id=VPC, subnet_id=GPU_SUBNET, client_security_group_id=NODE_SG,
                    storage_capacity_gib=1200, deployment_type="PERSISTENT_2", throughput_per_tib=125)
    stack = cdk.Stack(app, stack_id)
    return stack, LustreFileSystem(stack, "Fs", **{**defaults, **props})


def test_link_ids_keep_distinct_paths_apart():
    from fmcluster_cdk.constructs.storage.lustre import data_repository_path, link_id

    assert link_id("/a/b") != link_id("/a-b")
    assert data_repository_path("bkt") == "s3://bkt"
    assert data_repository_path("bkt", "/ckpt/run1/") == "s3://bkt/ckpt/run1/"


def test_adding_a_link_first_keeps_the_other_logical_ids(app):
    def logical_ids(stack_id, paths):
        stack, fs = lustre_in(app, stack_id)
        return {p: stack.get_logical_id(fs.link(file_system_path=p, bucket_name="b", import_events=["NEW"]))
                for p in paths}

    before = logical_ids("Before", ["/datasets", "/checkpoints"])
    after = logical_ids("After", ["/models", "/datasets", "/checkpoints"])
    assert {p: after[p] for p in before} == before


def test_scratch_file_system_has_no_persistent_settings(app):
    stack, fs = lustre_in(app, "Scratch", storage_capacity_gib=2400, deployment_type="SCRATCH_2",
                          throughput_per_tib=200, kms_key_id="key-id")
    config = stack.resolve(fs.file_system.lustre_configuration)
    assert config == {"deploymentType": "SCRATCH_2", "dataCompressionType": "LZ4",
                      "weeklyMaintenanceStartTime": "7:05:00", "logConfiguration": {"level": "WARN_ERROR"}}
    assert fs.file_system.kms_key_id is None


# ---- the shared home (storage.home) --------------------------------------------------------------

def home_file_system(synth: Synth) -> tuple[str, dict]:
    (found,) = [(k, r) for k, r in synth.resources("AWS::FSx::FileSystem").items()
                if r["Properties"]["FileSystemType"] == "OPENZFS"]
    return found


def test_home_is_an_encrypted_retained_openzfs_file_system(home):
    logical_id, fs = home_file_system(home)
    assert logical_id.startswith("Home")  # stable: from the construct path, never from a position
    assert fs["DeletionPolicy"] == fs["UpdateReplacePolicy"] == "Retain"
    props = fs["Properties"]
    (key,) = home.resources("AWS::KMS::Key")
    assert props["KmsKeyId"] == {"Ref": key}
    assert props["SubnetIds"] == [GPU_SUBNET] and props["StorageCapacity"] == 512 and props["StorageType"] == "SSD"
    config = props["OpenZFSConfiguration"]
    assert config["DeploymentType"] == "SINGLE_AZ_HA_2" and config["ThroughputCapacity"] == 320
    assert config["AutomaticBackupRetentionDays"] == 7
    root = config["RootVolumeConfiguration"]
    assert root["DataCompressionType"] == "LZ4"
    assert root["NfsExports"] == [{"ClientConfigurations": [
        {"Clients": "10.0.0.0/16", "Options": ["rw", "crossmnt", "no_root_squash"]}]}]
    assert {"Key": "Name", "Value": "llm-pretrain-home"} in props["Tags"]


def test_home_security_group_admits_nfs_from_the_nodes_only(home):
    _, fs = home_file_system(home)
    (sg,) = [g["Fn::GetAtt"][0] for g in fs["Properties"]["SecurityGroupIds"]]
    rules = sorted((r["Properties"]["IpProtocol"], r["Properties"]["FromPort"], r["Properties"]["ToPort"])
                   for r in home.resources("AWS::EC2::SecurityGroupIngress").values()
                   if r["Properties"]["GroupId"] == {"Fn::GetAtt": [sg, "GroupId"]}
                   and r["Properties"]["SourceSecurityGroupId"] == NODE_SG)
    assert rules == sorted((p, low, high) for p in ("tcp", "udp")
                           for low, high in ((111, 111), (2049, 2049), (20001, 20003)))
    others = [r for r in home.resources("AWS::EC2::SecurityGroupIngress").values()
              if r["Properties"]["GroupId"] == {"Fn::GetAtt": [sg, "GroupId"]}
              and r["Properties"]["SourceSecurityGroupId"] != NODE_SG]
    assert others == []
    props = home.template["Resources"][sg]["Properties"]
    assert "SecurityGroupIngress" not in props and home.template["Resources"][sg]["DeletionPolicy"] == "Retain"


def test_home_dns_name_is_an_attribute_and_an_output(home):
    logical_id, _ = home_file_system(home)
    assert home.resolve(home.stack.home_dns_name) == {"Fn::GetAtt": [logical_id, "DNSName"]}
    outputs = home.template["Outputs"]
    assert outputs["HomeDnsName"]["Value"] == {"Fn::GetAtt": [logical_id, "DNSName"]}


def test_without_home_no_openzfs(p5):
    assert all(r["Properties"]["FileSystemType"] != "OPENZFS" for r in p5.resources("AWS::FSx::FileSystem").values())
    assert p5.stack.home_dns_name is None


def test_each_team_on_kubernetes_has_its_own_root_squashed_volume(eks_teams):
    """Team members can run pods as root: each team namespace's home is a child volume of the root
    volume, exported with root squashed, retained like the file system."""
    logical_id, fs = home_file_system(eks_teams)
    volumes = eks_teams.resources("AWS::FSx::Volume")
    names = sorted(v["Properties"]["Name"] for v in volumes.values())
    assert names == ["pretrain", "research"]
    for volume in volumes.values():
        props = volume["Properties"]
        assert props["VolumeType"] == "OPENZFS" and volume["DeletionPolicy"] == "Retain"
        config = props["OpenZFSConfiguration"]
        assert config["ParentVolumeId"] == {"Fn::GetAtt": [logical_id, "RootVolumeId"]}
        (export,) = config["NfsExports"]
        assert export["ClientConfigurations"] == [{"Clients": "10.0.0.0/16",
                                                    "Options": ["rw", "crossmnt", "root_squash"]}]
    assert sorted(eks_teams.stack.home_team_volumes) == ["pretrain", "research"]
    root = fs["Properties"]["OpenZFSConfiguration"]["RootVolumeConfiguration"]["NfsExports"][0]
    assert "no_root_squash" in root["ClientConfigurations"][0]["Options"]  # the admins' root volume


def test_slurm_clusters_have_no_team_volumes(home):
    """On Slurm a user is a Unix user of the nodes: the root volume is the home."""
    assert not home.resources("AWS::FSx::Volume") and home.stack.home_team_volumes == {}
