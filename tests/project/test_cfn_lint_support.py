"""tests/support/cfn_lint.py finds what cfn-lint's own lint_file finds, on templates with errors and
warnings of several kinds, in the default region and others: the suite lints every template through
it, its rules loaded once a process."""

from __future__ import annotations

import json

import pytest
from cfnlint.api import ManualArgs, lint_file

from tests.support.cfn_lint import findings

BROKEN = {
    "AWSTemplateFormatVersion": "2010-09-09",
    "Parameters": {"Unused": {"Type": "String"}},
    "Resources": {
        "Nothing": {"Type": "AWS::EC2::NoSuchThing"},
        "Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": 5, "Nope": 1}},
        "Queue": {"Type": "AWS::SQS::Queue", "Properties": {"VisibilityTimeout": "ten"}},
        "Instance": {"Type": "AWS::EC2::Instance", "Properties": {"ImageId": {"Ref": "Missing"},
                                                                   "InstanceType": "p5.48xlarge"}},
    },
    "Outputs": {"Arn": {"Value": {"Fn::GetAtt": ["Bucket", "NoAttribute"]}}},
}


def matches(found) -> list[tuple]:
    return sorted((m.rule.id, m.message, m.linenumber, tuple(map(str, m.path))) for m in found)


@pytest.mark.parametrize("form, regions", [("json", None), ("yaml", None), ("json", ["us-west-2", "eu-west-1"])])
def test_findings_are_lint_files(tmp_path, form, regions):
    import yaml

    path = tmp_path / f"broken.{form}"
    path.write_text(json.dumps(BROKEN, indent=1) if form == "json" else yaml.safe_dump(BROKEN))
    theirs = lint_file(path, config=ManualArgs(regions=regions) if regions else None)
    assert {m.rule.id[0] for m in theirs} >= {"E", "W"}
    assert matches(findings(path, regions)) == matches(theirs)
