"""CloudFormation resources as `cdk.CfnResource` with CloudFormation's own property names.

The network and file-system constructs use only L1 resources. Made through the typed classes of
`aws_cdk.aws_ec2` and `aws_cdk.aws_fsx`, they would import those modules, the biggest of
aws-cdk-lib (about half a second in Python, and a first-use load in the Node process) in every
synthesis, for a dozen resource types. As plain resources, their properties read as in the
CloudFormation reference; cfn-lint checks them on every template of every example
(tests/test_examples_synth.py). The same choice as constructs_lib/launch_template.py.

Two things the typed classes did that a plain resource must be told:

- Property keys are written in alphabetical order at every level, as the typed classes write
  them, so a template is byte for byte the one they made (a nested stack's template hash is in
  its parent's TemplateURL).
- `cdk.Tags.of(scope).add(...)` tags only typed resources. A plain resource carries its tags in
  its properties (`tags`): the cluster's tags (stacks/tagging.py) over its Name tag, in the
  order CDK's tag manager writes them.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping, Optional

import aws_cdk as cdk
from constructs import Construct


def compact(value: Any) -> Any:
    """`value` without the None entries of its dictionaries, at any depth (a property left out),
    and with their keys in alphabetical order."""
    if isinstance(value, Mapping):
        return {key: compact(value[key]) for key in sorted(value) if value[key] is not None}
    if isinstance(value, list):
        return [compact(item) for item in value]
    return value


def resource(scope: Construct, construct_id: str, resource_type: str, properties: Mapping[str, Any],
             *, retain: bool = False) -> cdk.CfnResource:
    """An `AWS::...` resource; None-valued properties are left out. `retain`: kept when the stack
    is deleted or the resource replaced (DeletionPolicy and UpdateReplacePolicy Retain)."""
    made = cdk.CfnResource(scope, construct_id, type=resource_type, properties=compact(properties))
    if retain:
        made.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
    return made


def attribute(made: cdk.CfnResource, name: str) -> str:
    """A `Fn::GetAtt` of the resource, as a string token."""
    return made.get_att(name).to_string()


@lru_cache(maxsize=None)
def _tag_order(keys: frozenset[str]) -> tuple[str, ...]:
    """`keys` in the order CDK's tag manager writes them (JavaScript's `localeCompare`, which
    no Python sort reproduces for every key): asked of a tag manager once per set of keys."""
    manager = cdk.TagManager(cdk.TagType.STANDARD, "fmcluster::TagOrder", [{"key": k, "value": ""} for k in keys])
    return tuple(tag["key"] for tag in manager.render_tags())


def tags(cluster_tags: Mapping[str, str], name: Optional[str] = None) -> Optional[list[dict[str, str]]]:
    """The `Tags` property of a taggable resource: its Name tag (if any) and the cluster's tags,
    which win over it as `cdk.Tags.of` tags win over a typed resource's own; None for no tags."""
    merged = {**({"Name": name} if name else {}), **cluster_tags}
    if not merged:
        return None
    return [{"Key": key, "Value": merged[key]} for key in _tag_order(frozenset(merged))]
