"""The Slurm accounting database construct (fmcluster_cdk/constructs/storage/accounting_database.py)
on its own: its engine version is the major version RDS resolves to a current minor release."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_rds as rds

from fmcluster_cdk.constructs.storage.accounting_database import AccountingDatabase


def test_the_engine_version_is_one_cfn_lint_knows_with_automatic_minor_upgrades():
    """MariaDB 10.11 (LTS), at a minor release cfn-lint's RDS data lists (a bare major version is
    refused by its E3691), kept current by automatic minor upgrades."""
    app = cdk.App()
    stack = cdk.Stack(app, "s", env=cdk.Environment(account="111111111111", region="us-east-1"))
    AccountingDatabase(stack, "Db", vpc_id="vpc-1", subnet_ids=["subnet-a", "subnet-b"],
                       client_security_group_id="sg-1", name="t")
    (props,) = [r["Properties"] for r in app.synth().get_stack_by_name("s").template["Resources"].values()
                if r["Type"] == "AWS::RDS::DBInstance"]
    assert props["Engine"] == "mariadb"
    assert props["EngineVersion"].startswith(rds.MariaDbEngineVersion.VER_10_11.maria_db_major_version + ".")
    assert props["AutoMinorVersionUpgrade"] is True
