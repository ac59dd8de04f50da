"""`fmcluster preflight`: read-only checks of the target account and region, in seconds, before a
deploy that would otherwise fail after 40 minutes.

This package owns every AWS call preflight makes: one check a function, as the spec rules are
(each takes the Context and yields Checks), in a module per service (account: STS and the zones
and offerings of EC2; capacity and ultraserver: reservations and Capacity Blocks; ec2: placement
groups and AMIs; images: what NAME-images needs; quotas: Service Quotas; services: FSx and the
control plane). runner holds the table of checks and runs it, guard turns what stops a check
into its FAIL row, report renders the result, saved reads a saved report back for `fmcluster
plan --preflight`. It imports facts, spec and model, and botocore; boto3 only where it makes
clients. Its modules import one another directly, never through this package.

Sources and details: docs/research-notes.md, "fmcluster/deploy/preflight/"."""

from fmcluster.deploy.preflight.capacity import reservation_checks, size_check
from fmcluster.deploy.preflight.context import (
    FAIL,
    PASS,
    WARN,
    Check,
    ClientFactory,
    Context,
    CredentialsProblem,
)
from fmcluster.deploy.preflight.endpoints import offered_in
from fmcluster.deploy.preflight.report import FORMATS, PreflightReport, exit_code, render
from fmcluster.deploy.preflight.runner import CHECKS, checks, placeholder_checks, run, session_clients
from fmcluster.deploy.preflight.shapes import ReadReservation
from fmcluster.deploy.preflight.ultraserver import block_checks

__all__ = ["CHECKS", "FAIL", "FORMATS", "PASS", "WARN", "Check", "ClientFactory", "Context", "CredentialsProblem",
           "PreflightReport", "ReadReservation", "block_checks", "checks", "exit_code", "offered_in",
           "placeholder_checks", "render", "reservation_checks", "run", "session_clients", "size_check"]
