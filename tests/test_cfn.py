"""constructs_lib.cfn: plain CfnResources tagged as `cdk.Tags.of` tags typed resources."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_logs as logs

from constructs_lib import cfn

pytestmark = pytest.mark.synth

# Keys whose order a plain Python sort gets wrong (JavaScript's localeCompare: case-insensitive
# first, punctuation before digits before letters, accents after their letter).
CLUSTER_TAGS = {"fmcluster:cluster": "c", "team": "t", "Team2": "u", "cost-center": "1", "cost_center": "2",
                "CostCenter": "3", "a:b": "4", "a1": "5", "ab": "6", "é": "7", "e": "8", "Z": "9"}


def test_tags_as_the_tag_aspect_writes_them():
    """The same Tags list as a typed resource with a Name tag of its own under `cdk.Tags.of`,
    whose tags win over its Name tag."""
    app = cdk.App()
    stack = cdk.Stack(app, "Tags")
    for name in ("mine", None):
        typed = logs.CfnLogGroup(stack, f"Typed-{name}", tags=[cdk.CfnTag(key="Name", value=name)] if name else None)
        plain = cfn.resource(stack, f"Plain-{name}", "AWS::Logs::LogGroup", {"Tags": cfn.tags(CLUSTER_TAGS, name)})
        with_name = cfn.resource(stack, f"Spec-{name}", "AWS::Logs::LogGroup",
                                 {"Tags": cfn.tags({**CLUSTER_TAGS, "Name": "spec"}, name)})
        del typed, plain, with_name
    for key, value in CLUSTER_TAGS.items():
        cdk.Tags.of(stack).add(key, value, include_resource_types=["AWS::Logs::LogGroup"])
    resources = app.synth().get_stack_by_name("Tags").template["Resources"]

    def tags_of(prefix: str, name) -> list:
        (resource,) = [r for lid, r in resources.items() if lid.startswith(f"{prefix}{name}")]
        return resource["Properties"]["Tags"]

    assert tags_of("Plain", "mine") == tags_of("Typed", "mine")
    assert {"Key": "Name", "Value": "mine"} in tags_of("Plain", "mine")
    assert tags_of("Plain", "None") == tags_of("Typed", "None")
    assert {"Key": "Name", "Value": "spec"} in tags_of("Spec", "mine")


def test_no_tags_leave_the_property_out():
    assert cfn.tags({}) is None
    assert cfn.tags({}, "x") == [{"Key": "Name", "Value": "x"}]


def test_compact_drops_none_and_orders_keys():
    assert cfn.compact({"b": 1, "a": None, "c": [{"z": None, "y": {"k": 2, "j": None}}]}) == {
        "b": 1, "c": [{"y": {"k": 2}}]}
    assert list(cfn.compact({"b": 1, "a": 2})) == ["a", "b"]
