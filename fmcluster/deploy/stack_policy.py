"""The CloudFormation stack policy of NAME-storage: no update may replace or delete a stateful
resource (the file system, its links, the buckets, the key), whatever the template says.

Sources and details: docs/research-notes.md, "fmcluster/deploy/stack_policy.py"."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fmcluster.deploy import cfn_schemas

# The stateful types, the file system's links, and its security group (retained with it: a new one
# would replace the file system, whose SecurityGroupIds are create-only).
GUARDED_TYPES = (*cfn_schemas.STATEFUL_TYPES, "AWS::FSx::DataRepositoryAssociation", "AWS::EC2::SecurityGroup")
_ALLOW_UPDATES = {"Effect": "Allow", "Action": "Update:*", "Principal": "*", "Resource": "*"}


def protecting() -> dict[str, Any]:
    """Every update allowed, but none that replaces or deletes a resource of GUARDED_TYPES."""
    return {"Statement": [
        _ALLOW_UPDATES,
        {"Effect": "Deny", "Action": ["Update:Replace", "Update:Delete"], "Principal": "*", "Resource": "*",
         "Condition": {"StringEquals": {"ResourceType": list(GUARDED_TYPES)}}},
    ]}


def lifting() -> dict[str, Any]:
    """The policy that allows every update: set it to lift the protection on purpose."""
    return {"Statement": [_ALLOW_UPDATES]}


# ---- `fmcluster stack-policy [--lift]` -------------------------------------------------------

FORMATS = ("json",)


@dataclass(frozen=True)
class StackPolicyReport:
    policy: dict[str, Any]


def run(lift: bool = False) -> StackPolicyReport:
    return StackPolicyReport(lifting() if lift else protecting())


def render(report: StackPolicyReport, fmt: str = "json") -> tuple[str, str]:
    """(stdout, stderr): the policy, as `aws cloudformation set-stack-policy --stack-policy-body` takes it."""
    return json.dumps(report.policy, indent=2) + "\n", ""


def exit_code(report: StackPolicyReport) -> int:
    return 0
