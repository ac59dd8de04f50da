"""The IAM walk: every policy of a synthesized template, and the wildcards fmcluster allows.

Plain JSON, no aws_cdk: it reads templates as CloudFormation gets them (nested stacks' templates
too, `*.nested.template.json`). tests/cdk/test_security.py walks every template of every example.

A statement that allows an action on a wildcard resource fails the walk unless an entry of
ALLOWED_WILDCARDS names that action and that resource, with the reason (and, where the entry
says so, the condition key that must narrow it). Wildcard resources are `*`, an ARN of any
account or region, an ARN of every resource of a type (`...:network-interface/*`), and S3 ARNs
whose bucket name has a wildcard (`arn:aws:s3:::*`, `arn:aws:s3:::*/*`). Objects under a named
bucket (`arn:aws:s3:::BUCKET/*`) or versions of a named function (`FUNCTION_ARN:*`) are not
wildcards. In a KMS key policy `"Resource": "*"` means the key itself and is not checked; a
resource policy that allows everyone (`"Principal": "*"`) must pin the caller with a condition.

Whether IAM allows each granted call at all (resource types, actions without resource-level
permissions, typos) is the resource-type linter's question: tests/support/iam_lint.py.

To allow a new wildcard: add an Allowed entry with the exact actions, the resource as the walk
renders it (`${AWS::Region}` for a Ref, `${Logical.Attr}` for a GetAtt; `{*}` matches any
characters but `/`), and a reason that says why no narrower resource is possible (the Service
Authorization Reference lists which actions support resource-level permissions).
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Optional

EC2_ARN = "arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}"


@dataclass(frozen=True)
class Allowed:
    actions: tuple[str, ...]  # exact actions, or IAM-style patterns (ec2:Describe*)
    resource: str  # as rendered by `render`; `{*}` matches any characters but `/`
    reason: str
    condition: Optional[str] = None  # a condition key the statement must carry (any case)

    def allows(self, action: str, resource: str, condition_keys: set[str]) -> bool:
        if self.condition and self.condition.lower() not in condition_keys:  # keys are lower-cased
            return False
        pattern = "[^/]*".join(re.escape(part) for part in self.resource.split("{*}"))
        return (any(fnmatch.fnmatchcase(action, a) for a in self.actions)
                and re.fullmatch(pattern, resource) is not None)


NO_RESOURCE_TYPES = ("Listed in the Service Authorization Reference without resource types: "
                     "the action only accepts \"Resource\": \"*\".")

ALLOWED_WILDCARDS: tuple[Allowed, ...] = (
    Allowed(("ec2:Describe*",), "*",
            "EC2 Describe* actions support no resource-level permissions (Service Authorization Reference); "
            "read-only. HyperPod describes the cluster's VPC, subnets, security groups and interfaces."),
    Allowed(("ssmmessages:CreateControlChannel", "ssmmessages:CreateDataChannel",
             "ssmmessages:OpenControlChannel", "ssmmessages:OpenDataChannel"), "*",
            "Session Manager channels of the node itself (login without SSH). " + NO_RESOURCE_TYPES),
    Allowed(("ec2messages:AcknowledgeMessage", "ec2messages:DeleteMessage", "ec2messages:FailMessage",
             "ec2messages:GetEndpoint", "ec2messages:GetMessages", "ec2messages:SendReply"), "*",
            "The SSM agent of an Image Builder build or test instance takes Run Command messages (AWSTOE's "
            "runs) this way. " + NO_RESOURCE_TYPES),
    Allowed(("ssm:DescribeAssociation", "ssm:DescribeDocument", "ssm:GetDeployablePatchSnapshotForInstance",
             "ssm:GetDocument", "ssm:GetManifest", "ssm:ListAssociations", "ssm:ListInstanceAssociations",
             "ssm:PutComplianceItems", "ssm:PutConfigurePackageResult", "ssm:PutInventory",
             "ssm:UpdateAssociationStatus", "ssm:UpdateInstanceAssociationStatus"), "*",
            "The rest of what AWS's AmazonSSMManagedInstanceCore gives the SSM agent of an Image Builder build "
            "or test instance (its documents, associations and inventory; no parameter), as Image Builder's "
            "guide has build instances carry; the instances exist only during a build."),
    Allowed(("s3:GetObject",), "arn:{*}:s3:::ec2imagebuilder*/*",
            "EC2 Image Builder's own buckets (AWSTOE and its downloads), read only, as AWS's "
            "EC2InstanceProfileForImageBuilder grants."),
    Allowed(("ssm:UpdateInstanceInformation",), "arn:{*}:ec2:{*}:${AWS::AccountId}:instance/*",
            "The SSM agent of an Image Builder build or test instance registers its own instance; Image "
            "Builder launches it during the build, so its id is unknown at synth. This account's instances only."),
    Allowed(("ecr:GetAuthorizationToken",), "*",
            "The registry login token for image pulls (the GPU nodes' reference image on every plane, the "
            "add-ons on HyperPod EKS) and pushes (the reference image's build). " + NO_RESOURCE_TYPES),
    Allowed(("fsx:DescribeFileSystems",), "*",
            "The FSx CSI driver (EKS) reads its static volume's file system; HyperPod's FSx mount reads an "
            "EFA-enabled file system for its EFA set-up. " + NO_RESOURCE_TYPES + " Read-only."),
    Allowed(("cloudwatch:PutMetricData",), "*",
            "HyperPod node metrics. " + NO_RESOURCE_TYPES + " Limited to one namespace by the "
            "cloudwatch:namespace condition (CloudWatch User Guide, 'Using condition keys to limit "
            "access to CloudWatch namespaces').", condition="cloudwatch:namespace"),
    Allowed(("ec2:CreateNetworkInterface",), f"{EC2_ARN}:network-interface/*",
            "The interface HyperPod creates has no id before the call; the same statement names the "
            "cluster's subnets and security groups, and EC2 authorizes every resource of the request, so "
            "interfaces can only be created in the cluster's subnets with its groups."),
    Allowed(("ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
             "ec2:DeleteNetworkInterfacePermission", "ec2:DetachNetworkInterface",
             "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses",
             "ec2:ModifyNetworkInterfaceAttribute", "ec2:AttachNetworkInterface"),
            f"{EC2_ARN}:network-interface/*",
            "Interfaces HyperPod (and the VPC CNI on HyperPod EKS) created at run time, ids unknown at "
            "synth; the ec2:Vpc condition limits them to the cluster's VPC.", condition="ec2:Vpc"),
    Allowed(("ec2:CreateTags",), f"{EC2_ARN}:network-interface/*",
            "HyperPod tags the interfaces it creates (SageMaker Developer Guide, HyperPod IAM: "
            "network-interface/*); only network interfaces, only in this account and region."),
    Allowed(("ec2:DetachNetworkInterface", "ec2:AttachNetworkInterface"),
            "arn:${AWS::Partition}:ec2:${AWS::Region}:*:instance/*",
            "The instance side of detaching (HyperPod) and attaching (VPC CNI on HyperPod EKS) the cluster's "
            "interfaces: both actions require the instance resource type too (Service Authorization Reference), "
            "and HyperPod's instances belong to an account SageMaker owns, unknown at synth; the interface side "
            "of the same calls is limited to the cluster's VPC (ec2:Vpc)."),
    Allowed(("ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"),
            "arn:${AWS::Partition}:ecr:${AWS::Region}:*:repository/*",
            "Read-only image pulls of the EKS add-ons and HyperPod agents, which live in AWS-owned "
            "registries whose account differs by region."),
)

# Conditions that pin who may use a resource policy statement open to "Principal": "*".
CALLER_CONDITIONS = {"aws:sourceaccount", "aws:sourcearn", "aws:principalarn", "aws:principalaccount",
                     "aws:principalorgid", "kms:calleraccount"}
# Where policies live in a template: type -> property names of policy documents.
POLICY_PROPERTIES = {
    "AWS::IAM::Policy": ("PolicyDocument",),
    "AWS::IAM::ManagedPolicy": ("PolicyDocument",),
    "AWS::S3::BucketPolicy": ("PolicyDocument",),
    "AWS::SNS::TopicPolicy": ("PolicyDocument",),
    "AWS::SQS::QueuePolicy": ("PolicyDocument",),
    "AWS::Logs::ResourcePolicy": ("PolicyDocument",),
    "AWS::KMS::Key": ("KeyPolicy",),
}
INLINE_POLICIES = ("AWS::IAM::Role", "AWS::IAM::User", "AWS::IAM::Group")


@dataclass(frozen=True)
class Policy:
    logical_id: str
    type: str  # the resource type
    name: str  # the policy name, the property, or AssumeRolePolicyDocument
    document: dict[str, Any]  # the policy document, as parsed JSON

    @property
    def key_policy(self) -> bool:
        return self.type == "AWS::KMS::Key"


@dataclass(frozen=True)
class Problem:
    logical_id: str
    policy: str
    message: str

    def __str__(self) -> str:
        return f"{self.logical_id} ({self.policy}): {self.message}"


def render(value: Any, resolve: Optional[Callable[[str, Any], Optional[list[str]]]] = None) -> list[str]:
    """Every string a template value can take: Ref -> ${Name}, GetAtt -> ${Logical.Attr},
    Fn::Join concatenated, Fn::If both branches, other intrinsics -> ${Fn::Name}. `resolve(fn, arg)`,
    where given, renders an intrinsic first (None: as above)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in render(item, resolve)]
    if isinstance(value, dict) and len(value) == 1:
        (fn, arg), = value.items()
        resolved = resolve(fn, arg) if resolve else None
        if resolved is not None:
            return resolved
        if fn == "Ref":
            return [f"${{{arg}}}"]
        if fn == "Fn::GetAtt":
            return ["${" + (".".join(arg) if isinstance(arg, list) else str(arg)) + "}"]
        if fn == "Fn::Join":
            out = [""]
            for part in arg[1]:
                out = [o + p for o in out for p in render(part, resolve)]
            return out
        if fn == "Fn::Sub":
            return [arg if isinstance(arg, str) else arg[0]]
        if fn == "Fn::If":
            return render(arg[1], resolve) + render(arg[2], resolve)
        return [f"${{{fn}}}"]
    return [json.dumps(value, sort_keys=True)]


# IAM's size quotas, in characters without whitespace (IAM User Guide, "IAM and AWS STS quotas"):
# every inline policy of a role together, and the trust policy (its default, raisable to 4,096).
INLINE_POLICIES_MAX = 10_240
TRUST_POLICY_MAX = 2_048
# What a token of a template stands for once deployed, at its longest: a pseudo parameter, or a
# reference to a resource (an ARN, a name or an id).
TOKEN_LENGTHS = {"AWS::Partition": len("aws-us-gov"), "AWS::AccountId": 12, "AWS::Region": len("ap-southeast-5"),
                 "AWS::URLSuffix": len("amazonaws.com.cn"), "AWS::StackName": 128}
OTHER_TOKEN_LENGTH = 100


def deployed_size(document: Any) -> int:
    """The characters IAM counts in a policy document once deployed (no whitespace), with every
    token at the longest it can be (TOKEN_LENGTHS)."""

    def resolved(value: Any) -> Any:
        if isinstance(value, dict) and len(value) == 1 and next(iter(value)).startswith(("Ref", "Fn::")):
            text = render(value)[0]
            return re.sub(r"\$\{([^}]*)\}", lambda m: "x" * TOKEN_LENGTHS.get(m.group(1), OTHER_TOKEN_LENGTH), text)
        if isinstance(value, dict):
            return {k: resolved(v) for k, v in value.items()}
        if isinstance(value, list):
            return [resolved(v) for v in value]
        return value

    return len(re.sub(r"\s", "", json.dumps(resolved(document), separators=(",", ":"))))


def policy_sizes(template: Mapping[str, Any]) -> dict[tuple[str, str], int]:
    """(role, "inline" | "trust") -> deployed size, for every role of a template: its inline
    policies and the AWS::IAM::Policy resources attached to it, together; and its trust policy."""
    sizes: dict[tuple[str, str], int] = {}
    resources = template.get("Resources", {})
    for policy in policies(template):
        if policy.type == "AWS::IAM::Role":
            owners = [(policy.logical_id, "trust" if policy.name == "AssumeRolePolicyDocument" else "inline")]
        elif policy.type == "AWS::IAM::Policy":
            roles = resources[policy.logical_id].get("Properties", {}).get("Roles", [])
            owners = [(str(r.get("Ref")) if isinstance(r, dict) else str(r), "inline") for r in roles]
        else:
            continue
        size = deployed_size(policy.document)
        for owner in owners:
            sizes[owner] = sizes.get(owner, 0) + size
    return sizes


def is_wildcard(resource: str) -> bool:
    """`*`, any account or region, every resource of a type, or an S3 bucket-name wildcard."""
    if resource == "*":
        return True
    if not resource.startswith("arn:"):
        return False
    parts = re.sub(r"\$\{[^}]*\}", "TOKEN", resource).split(":", 5)  # ${AWS::Region} has colons
    if len(parts) < 6:
        return True
    _, _, service, region, account, rest = parts
    if "*" in region or "*" in account:
        return True
    if service == "s3":
        return "*" in rest.split("/", 1)[0]
    return rest == "*" or re.fullmatch(r"[A-Za-z0-9_.-]+[/:]\*", rest) is not None


def policies(template: Mapping[str, Any]) -> Iterator[Policy]:
    """Every policy document of a template: identity policies (inline or not), trust policies,
    resource policies (buckets, topics, queues, log groups) and key policies."""
    for lid, resource in sorted(template.get("Resources", {}).items()):
        kind, props = resource.get("Type", ""), resource.get("Properties", {}) or {}
        for prop in POLICY_PROPERTIES.get(kind, ()):
            if prop in props:
                yield Policy(lid, kind, prop, _document(props[prop]))
        if kind in INLINE_POLICIES:
            for inline in props.get("Policies", []) or []:
                yield Policy(lid, kind, str(inline.get("PolicyName")), _document(inline["PolicyDocument"]))
        if kind == "AWS::IAM::Role" and "AssumeRolePolicyDocument" in props:
            yield Policy(lid, kind, "AssumeRolePolicyDocument", _document(props["AssumeRolePolicyDocument"]))


def _document(document: Any) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(document) if isinstance(document, str) else document
    return parsed


def statements(policy: Policy) -> list[dict[str, Any]]:
    statement = policy.document.get("Statement", [])
    return statement if isinstance(statement, list) else [statement]


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _condition_keys(statement: Mapping[str, Any]) -> set[str]:
    return {key.lower() for block in (statement.get("Condition") or {}).values() for key in block}


def _everyone(principal: Any) -> bool:
    if principal == "*":
        return True
    return isinstance(principal, dict) and "*" in _listed(principal.get("AWS", []))


def problems(template: Mapping[str, Any]) -> list[Problem]:
    """What the walk rejects in one template (see the module docstring)."""
    found: list[Problem] = []
    for policy in policies(template):
        for statement in statements(policy):
            if statement.get("Effect") != "Allow":
                continue
            found += [Problem(policy.logical_id, policy.name, m) for m in _statement_problems(policy, statement)]
    return found


def _statement_problems(policy: Policy, statement: Mapping[str, Any]) -> Iterator[str]:
    sid = statement.get("Sid", "")
    if "NotAction" in statement or "NotResource" in statement:
        yield f"{sid}: NotAction / NotResource in an Allow statement"
    if "Principal" in statement and _everyone(statement["Principal"]) \
            and not _condition_keys(statement) & CALLER_CONDITIONS:
        yield f"{sid}: allows every principal without a condition on the caller"
    if policy.name == "AssumeRolePolicyDocument":
        return
    actions = [str(a) for a in _listed(statement.get("Action", []))]
    for action in actions:
        if action == "*" or (action.endswith(":*") and not _key_admin(policy, statement)):
            yield f"{sid}: every action ({action})"
    for action, resource, keys in _wildcard_grants(policy, statement):
        if not any(entry.allows(action, resource, keys) for entry in ALLOWED_WILDCARDS):
            yield f"{sid}: {action} on {resource} (not on the allow-list of tests/support/security.py)"


def _wildcard_grants(policy: Policy, statement: Mapping[str, Any]) -> Iterator[tuple[str, str, set[str]]]:
    """(action, wildcard resource, condition keys) of each grant of an Allow statement on a wildcard
    resource (none in a key policy: "Resource": "*" there is the key itself, nor in a trust policy)."""
    if policy.key_policy or policy.name == "AssumeRolePolicyDocument":
        return
    keys = _condition_keys(statement)
    for resource in sorted({r for value in _listed(statement.get("Resource", [])) for r in render(value)}):
        if is_wildcard(resource):
            for action in [str(a) for a in _listed(statement.get("Action", []))]:
                yield action, resource, keys


def allowances_used(template: Mapping[str, Any]) -> set[int]:
    """The ALLOWED_WILDCARDS entries (their indices) that some statement of `template` needs: an
    entry no synthesized template needs allows what nothing uses, and is stale."""
    return {i for policy in policies(template) for statement in statements(policy)
            if statement.get("Effect") == "Allow"
            for action, resource, keys in _wildcard_grants(policy, statement)
            for i, entry in enumerate(ALLOWED_WILDCARDS) if entry.allows(action, resource, keys)}


def _key_admin(policy: Policy, statement: Mapping[str, Any]) -> bool:
    """CDK's default key policy: the account (root) administers the key, IAM policies grant its use."""
    if not policy.key_policy or _listed(statement.get("Action")) != ["kms:*"]:
        return False
    principals = [p for value in _listed((statement.get("Principal") or {}).get("AWS", [])) for p in render(value)]
    return bool(principals) and all(p.endswith(":iam::${AWS::AccountId}:root") for p in principals)
