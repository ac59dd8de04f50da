"""`fmcluster change-set STACK NAME`: the guard between creating a CloudFormation change set and
executing it. It reads the change set (DescribeChangeSet, read-only, with property values and the
change sets of nested stacks) and refuses it (exit 1) when a stateful resource (one that holds
users' data: fmcluster.deploy.cfn_schemas.DATA_TYPES, the same as `fmcluster diff`'s) would be
replaced, may be replaced, or removed, unless the change is allowed (--allow-data-loss).

Sources and details: docs/research-notes.md, "fmcluster/deploy/change_set.py"."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator

from fmcluster.deploy import cfn_schemas

NESTED_STACK = "AWS::CloudFormation::Stack"
UNKNOWN_UNTIL_APPLIED = "{{changeSet:KNOWN_AFTER_APPLY}}"
# A change set that changes nothing ends FAILED, with one of these reasons (CloudFormation's words)
NO_CHANGES = ("didn't contain changes", "No updates are to be performed")
DONE = ("CREATE_COMPLETE", "FAILED", "DELETE_COMPLETE", "DELETE_FAILED")


class Unreadable(Exception):
    """The change set cannot be read: missing, failed for another reason than 'no changes', or
    still being created when the wait ran out."""


@dataclass
class Finding:
    stack: str
    logical_id: str
    type: str
    what: str  # "removed", "replaced", "may be replaced"
    reasons: list[str] = field(default_factory=list)

    def line(self) -> str:
        because = f": {'; '.join(self.reasons)}" if self.reasons else ""
        return f"{self.stack} {self.logical_id} ({self.type}) {self.what}{because}"


@dataclass
class Verdict:
    stack: str
    change_set: str
    status: str  # "changes", "no changes"
    changes: int = 0  # resource changes read, nested change sets included
    findings: list[Finding] = field(default_factory=list)


Sleep = Callable[[float], None]


def describe(client: Any, stack: str, name: str, *, wait_s: float = 600, poll_s: float = 5,
             sleep: Sleep = time.sleep) -> tuple[str, list[dict[str, Any]]]:
    """The change set's status ('changes' or 'no changes') and every page of its Changes,
    waiting while it is being created."""
    from botocore.exceptions import BotoCoreError, ClientError

    waited = 0.0
    while True:
        try:
            first = client.describe_change_set(StackName=stack, ChangeSetName=name, IncludePropertyValues=True)
        except (BotoCoreError, ClientError) as exc:  # credentials, permissions, no such change set
            raise Unreadable(str(exc)) from None
        status = first.get("Status", "")
        if status in DONE or waited >= wait_s:
            break
        sleep(poll_s)
        waited += poll_s
    if status == "FAILED" and any(words in first.get("StatusReason", "") for words in NO_CHANGES):
        return "no changes", []
    if status != "CREATE_COMPLETE":
        reason = first.get("StatusReason") or ("still being created" if status not in DONE else "")
        raise Unreadable(f"change set {name} of {stack} is {status or 'unknown'}" + (f": {reason}" if reason else ""))
    return "changes", list(_pages(client, stack, name, first))


def _pages(client: Any, stack: str, name: str, page: dict[str, Any]) -> Iterator[dict[str, Any]]:
    from botocore.exceptions import BotoCoreError, ClientError

    while True:
        yield from page.get("Changes", [])
        token = page.get("NextToken")
        if not token:
            return
        try:
            page = client.describe_change_set(StackName=stack, ChangeSetName=name, IncludePropertyValues=True,
                                              NextToken=token)
        except (BotoCoreError, ClientError) as exc:
            raise Unreadable(str(exc)) from None


def judge(client: Any, stack: str, name: str, **wait: Any) -> Verdict:
    """Read the change set (and those of its nested stacks) and find what would lose data."""
    status, changes = describe(client, stack, name, **wait)
    verdict = Verdict(stack, name, status)
    _judge(client, stack, changes, verdict, wait)
    return verdict


def _judge(client: Any, stack: str, changes: list[dict[str, Any]], verdict: Verdict, wait: dict[str, Any]) -> None:
    for change in changes:
        resource = change.get("ResourceChange", {})
        verdict.changes += 1
        kind = resource.get("ResourceType", "")
        if kind == NESTED_STACK and resource.get("ChangeSetId"):
            nested = f"{stack}/{resource.get('LogicalResourceId')}"
            status, inner = describe(client, resource.get("PhysicalResourceId") or stack,
                                     resource["ChangeSetId"], **wait)
            if status == "changes":
                _judge(client, nested, inner, verdict, wait)
        if cfn_schemas.holds_data(kind):
            finding = _finding(stack, resource)
            if finding:
                verdict.findings.append(finding)


def _finding(stack: str, resource: dict[str, Any]) -> Finding | None:
    action, replacement = resource.get("Action"), resource.get("Replacement")
    found = Finding(stack, resource.get("LogicalResourceId", "?"), resource.get("ResourceType", "?"), "")
    if action == "Remove":
        found.what = "removed"
        if resource.get("PolicyAction") in ("Retain", "Snapshot"):
            found.reasons.append(f"DeletionPolicy {resource['PolicyAction']}: kept in the account, outside the "
                                 "stack, no longer the cluster's")
        return found
    if action not in ("Modify", "Dynamic") or replacement not in ("True", "Conditional"):
        return None
    details = [d for d in resource.get("Details", [])
               if d.get("Target", {}).get("RequiresRecreation") in ("Always", "Conditionally")]
    if replacement == "Conditional":
        details = [d for d in details if not _same_value(d.get("Target", {}))]
        if not details:
            return None  # every recreating property keeps its value: nothing is replaced
    found.what = "replaced" if replacement == "True" else "may be replaced"
    found.reasons = [_detail_text(d) for d in details]
    return found


def _same_value(target: dict[str, Any]) -> bool:
    before, after = target.get("BeforeValue"), target.get("AfterValue")
    return before is not None and before == after and UNKNOWN_UNTIL_APPLIED not in str(after)


def _detail_text(detail: dict[str, Any]) -> str:
    target = detail.get("Target", {})
    name = target.get("Name") or target.get("Attribute", "?")
    text = f"{name} {'requires' if target.get('RequiresRecreation') == 'Always' else 'may require'} replacement"
    before, after = target.get("BeforeValue"), target.get("AfterValue")
    if before is not None or after is not None:
        text += f" ({before if before is not None else '?'} -> {after if after is not None else '?'})"
    if detail.get("CausingEntity"):
        text += f", caused by {detail['CausingEntity']}"
    return text


# ---- output --------------------------------------------------------------------------------

def render_text(verdict: Verdict, allowed: bool) -> str:
    head = f"fmcluster change-set: {verdict.change_set} of {verdict.stack}"
    if verdict.status == "no changes":
        return f"{head}: no changes\n"
    lines = [f"{head}: {verdict.changes} resource change{'s' if verdict.changes != 1 else ''}"]
    if not verdict.findings:
        lines.append("no stateful resource is replaced or removed")
        return "\n".join(lines) + "\n"
    lines.append(f"DATA LOSS: {len(verdict.findings)} stateful resource{'s' if len(verdict.findings) != 1 else ''} "
                 "replaced or removed:")
    lines += [f"  {f.line()}" for f in verdict.findings]
    lines.append("allowed by --allow-data-loss" if allowed else
                 "refusing (exit 1): do not execute this change set; copy or back up the data first, then allow "
                 "it for this one change (--allow-data-loss; in a pipeline, the merge commit's trailer "
                 "'Allow-Data-Loss: NAME')")
    return "\n".join(lines) + "\n"


def render_json(verdict: Verdict, allowed: bool) -> str:
    return json.dumps({**asdict(verdict), "allow_data_loss": allowed,
                       "ok": allowed or not verdict.findings}, indent=2) + "\n"


# ---- the command ---------------------------------------------------------------------------

FORMATS = ("text", "json")


@dataclass(frozen=True)
class ChangeSetReport:
    stack: str
    change_set: str
    allow_data_loss: bool
    verdict: Verdict | None = None  # None when the change set could not be read
    error: str | None = None
    hint: str | None = None


def run(stack: str, name: str, *, client: Any = None, region: str | None = None, role_arn: str | None = None,
        allow_data_loss: bool = False, delete: bool = False, **wait: Any) -> ChangeSetReport:
    """Judge the change set. `client` is a CloudFormation client (default: client_for `region` and
    `role_arn`). With `delete`, the change set is deleted after it is judged (the GitHub Actions
    workflow deploys with `cdk deploy` afterwards)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        client = client or client_for(region, role_arn)
    except (BotoCoreError, ClientError) as exc:  # no credentials or region, a role that cannot be assumed
        return ChangeSetReport(stack, name, allow_data_loss, error=f"cannot read CloudFormation: {exc}",
                               hint="it reads with the default credentials (AWS_PROFILE); --role-arn is assumed "
                                    "with them")
    try:
        verdict = judge(client, stack, name, **wait)
    except Unreadable as exc:
        return ChangeSetReport(stack, name, allow_data_loss, error=f"cannot judge the change set: {exc}",
                               hint="it must have been created (cdk deploy --method=prepare-change-set, or the "
                                    "pipeline's Prepare action) and be readable with cloudformation:DescribeChangeSet")
    if delete:  # an empty one too: CloudFormation keeps failed change sets
        client.delete_change_set(StackName=stack, ChangeSetName=name)
    return ChangeSetReport(stack, name, allow_data_loss, verdict)


def render(report: ChangeSetReport, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr): the verdict (text or JSON), or on stderr why there is none."""
    if report.verdict is None:
        return "", f"error: {report.error}\n  hint: {report.hint}\n"
    return (render_json if fmt == "json" else render_text)(report.verdict, report.allow_data_loss), ""


def exit_code(report: ChangeSetReport) -> int:
    """1 on data loss not allowed, or when the change set cannot be read."""
    if report.verdict is None:
        return 1
    return 1 if report.verdict.findings and not report.allow_data_loss else 0


def client_for(region: str | None, role_arn: str | None = None) -> Any:
    """A CloudFormation client of the default credentials, or of `role_arn` assumed with them
    (the target account's CDK deploy role, for a cluster in another account than the pipeline)."""
    import boto3

    if not role_arn:
        return boto3.client("cloudformation", region_name=region)
    credentials = boto3.client("sts", region_name=region).assume_role(
        RoleArn=role_arn, RoleSessionName="fmcluster-change-set")["Credentials"]
    return boto3.client("cloudformation", region_name=region, aws_access_key_id=credentials["AccessKeyId"],
                        aws_secret_access_key=credentials["SecretAccessKey"],
                        aws_session_token=credentials["SessionToken"])
