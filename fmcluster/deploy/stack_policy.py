"""The CloudFormation stack policy of NAME-storage: no update may replace or delete a resource
that holds data (the file system, the buckets, the key) nor the file system's links and security
group, whatever the template says.

Sources and details: docs/research-notes.md, "fmcluster/deploy/stack_policy.py"."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fmcluster.deploy import cfn_schemas
from fmcluster.spec import update_policy

# What holds users' data (cfn_schemas.DATA_TYPES, which `fmcluster diff` and `change-set` judge
# by), and more: what the update policy says a change of a storage field replaces or removes
# together with the data (fmcluster.spec.update_policy.table.lost_with_data), which would disrupt the
# file system though it holds none. Its links (a replaced one stops the imports and exports of its
# path) and its security group (retained with it: a new one would replace the file system, whose
# SecurityGroupIds are create-only).
GUARDED_TYPES = (*cfn_schemas.DATA_TYPES,
                 *(t for t in update_policy.lost_with_data("storage") if not cfn_schemas.holds_data(t)))
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
