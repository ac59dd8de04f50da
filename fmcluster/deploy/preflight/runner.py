"""Running preflight: the table of checks, in the order they run and print, each under the row
its failure is reported as; the spec's placeholders first (they need no account); the clients of
the credentials' session; and the report (fmcluster.deploy.preflight.report) it all gives."""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Any

from botocore.exceptions import ProfileNotFound

from fmcluster.deploy.preflight import account, capacity, ec2, images, quotas, services
from fmcluster.deploy.preflight.context import (
    FAIL,
    Check,
    CheckFn,
    ClientFactory,
    Context,
    CredentialsProblem,
    ServiceName,
)
from fmcluster.deploy.preflight.guard import guard
from fmcluster.deploy.preflight.report import PreflightReport
from fmcluster.spec import placeholders
from fmcluster.spec.diagnostics import dotted
from fmcluster.spec.models import ClusterSpec

# (the row a check's failure is reported as, the check), with the services each one calls
CHECKS: tuple[tuple[str, CheckFn], ...] = (
    ("credentials", account.identity),  # STS
    ("availability zones", account.zones),  # EC2
    ("instance types", account.offerings),  # EC2
    ("reservations", capacity.reservations),  # EC2, Resource Groups
    ("placement groups", ec2.placement_groups),  # EC2
    ("AMIs", ec2.amis),  # EC2
    ("node images", images.node_images),  # SSM, EC2, IAM, EC2 Image Builder
    ("quotas", quotas.instance_quotas),  # Service Quotas
    ("FSx for Lustre", services.lustre),  # FSx
    ("FSx for OpenZFS", services.home),  # FSx
    ("control plane", services.control_plane),  # AWS PCS, Amazon EKS, SageMaker
)
NO_CREDENTIALS_HINT = ("preflight reads the target account: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
                       "(aws sso login, aws configure), then run it again")


def session_clients(region: str) -> ClientFactory:
    """Clients of the default credential chain, one per service, in the spec's region."""
    import boto3  # start-up cost: loaded only where a command calls AWS
    from botocore.config import Config

    try:
        session = boto3.Session(region_name=region)
    except ProfileNotFound as exc:
        raise CredentialsProblem(str(exc)) from None
    config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=30)
    cache: dict[str, Any] = {}

    def client(service: ServiceName) -> Any:
        if service not in cache:
            cache[service] = session.client(service, config=config)
        return cache[service]

    return client


def checks(ctx: Context) -> list[Check]:
    """Every check of CHECKS, in order; CredentialsProblem where the credentials do not work."""
    found: list[Check] = []
    for name, check in CHECKS:
        found += guard(ctx, name, partial(check, ctx))
    return found


def placeholder_checks(spec: ClusterSpec) -> list[Check]:
    """A failed check for each placeholder of the spec (fmcluster.spec.placeholders: what `init`
    marks `put yours`, documentation values), which validate only warns of: none may reach AWS.
    Accepting the warning in the spec quiets validate, not this. None where there is none."""
    return [Check("placeholder", FAIL, f"{dotted(f.path)}: {f.message}", f.hint) for f in placeholders.found(spec)]


def run(spec: ClusterSpec, window: tuple[datetime, datetime] | None = None, client: ClientFactory | None = None,
        now: datetime | None = None) -> PreflightReport:
    """Run every check; `client` gives a client per service (default: the credentials' session).
    The spec's placeholders first: they need no account."""
    try:
        ctx = Context(spec, client or session_clients(spec.region), now, window)
        found = placeholder_checks(spec) + checks(ctx)
    except CredentialsProblem as exc:
        return PreflightReport(spec.name, spec.region, error=f"no usable AWS credentials: {exc}",
                               hint=NO_CREDENTIALS_HINT)
    read = ctx.read
    return PreflightReport(spec.name, spec.region, tuple(found), tuple(read[k] for k in sorted(read)))
