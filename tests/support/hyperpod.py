"""Reading a synthesized SageMaker HyperPod cluster stack: its cluster, instance groups and execution
role. Not a test module. Shared by tests/cdk/test_hyperpod_stack.py and
tests/cdk/test_hyperpod_observability.py."""

from __future__ import annotations

import json

from tests.support.stacks import resources


def cluster(template):
    (props,) = resources(template, "AWS::SageMaker::Cluster").values()
    return props


def groups(template):
    return {g["InstanceGroupName"]: g for g in cluster(template)["InstanceGroups"]}


def the_role(template):
    """The execution role (trusted by SageMaker; an EKS stack has other roles besides)."""
    (role_id, role), = [(lid, r) for lid, r in template["Resources"].items() if r["Type"] == "AWS::IAM::Role"
                        and "sagemaker.amazonaws.com" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])]
    return role_id, role["Properties"]


def statements(template):
    (policy,) = the_role(template)[1]["Policies"]
    return {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}
