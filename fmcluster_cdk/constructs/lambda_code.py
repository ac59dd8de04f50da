"""The code of a Lambda handler of this package (fmcluster_cdk/constructs/GROUP/handlers/NAME), as an
asset without Python bytecode: a `__pycache__` left by tests or `make bytecode` would change
the asset's hash, and so its S3 key and the template, between a working tree and a fresh
clone (and ship .pyc files nobody asked for)."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import aws_lambda as lambda_

BYTECODE = ("__pycache__", "*.pyc")


def handler_code(directory: Path) -> lambda_.Code:
    return lambda_.Code.from_asset(str(directory), exclude=list(BYTECODE))
