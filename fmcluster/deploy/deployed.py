"""The templates of a cluster's deployed stacks, read from CloudFormation: what `fmcluster diff
--deployed SPEC` compares the spec's synthesized templates with, so that a change that comes from
fmcluster's code (an upgrade), and not from the spec, is seen too.

Read-only: GetTemplate (the template as deployed, `Original` stage) and DescribeStackResource (the
physical id of each nested stack). Templates are named as fmcluster.deploy.assembly names those of a
synthesized assembly: stacks by name, nested stacks `PARENT/ID`. A stack that is not deployed is
left out (its resources are new).
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from fmcluster.deploy import assembly

NOT_DEPLOYED = "does not exist"  # in the message of CloudFormation's ValidationError


class NotReadable(Exception):
    """The deployed stacks cannot be read (credentials, permissions, the network)."""


def templates(names: Iterable[str], client: Any) -> dict[str, dict[str, Any]]:
    """Name -> deployed template of each stack in `names` that exists, with its nested stacks.
    `client` is a CloudFormation client (boto3's, or a Stubber-backed one in the tests)."""
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        if "/" in name:
            continue  # nested stacks are read through their parent
        body = template(client, name)
        if body is not None:
            out[name] = body
            _nested(client, name, name, body, out)
    return out


def template(client: Any, stack: str) -> dict[str, Any] | None:
    """The template of `stack` (a name or a stack id) as deployed (GetTemplate, `Original` stage),
    parsed; None where CloudFormation has no such stack."""
    from botocore.exceptions import ClientError

    try:
        body = client.get_template(StackName=stack, TemplateStage="Original")["TemplateBody"]
    except ClientError as exc:
        if NOT_DEPLOYED in str(exc.response.get("Error", {}).get("Message", "")):
            return None
        raise
    parsed: dict[str, Any] = json.loads(body) if isinstance(body, str) else dict(body)
    return parsed


def _nested(client: Any, stack: str, name: str, body: dict[str, Any], out: dict[str, dict[str, Any]]) -> None:
    for logical_id, resource in sorted(body.get("Resources", {}).items()):
        if resource.get("Type") != assembly.NESTED_STACK:
            continue
        detail = client.describe_stack_resource(StackName=stack, LogicalResourceId=logical_id)["StackResourceDetail"]
        physical = detail.get("PhysicalResourceId")
        child = template(client, physical) if physical else None
        if child is not None:
            child_name = f"{name}/{assembly.nested_id(logical_id, resource)}"
            out[child_name] = child
            _nested(client, physical, child_name, child, out)


def read(names: Iterable[str], region: str) -> dict[str, dict[str, Any]]:
    """`templates` with a client of the default credential chain in `region`; NotReadable when
    the stacks cannot be read."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return templates(names, boto3.client("cloudformation", region_name=region))
    except (BotoCoreError, ClientError) as exc:
        raise NotReadable(str(exc)) from None
