"""`fmcluster capacity find | buy | extend`: run (a Request of a spec, its report), render and
exit_code, as every command has them (fmcluster.cli)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional

from fmcluster.deploy.capacity import actions
from fmcluster.deploy.capacity.actions import Confirm
from fmcluster.deploy.capacity.aws import failure
from fmcluster.deploy.capacity.render import FORMATS, exit_code, render
from fmcluster.deploy.capacity.report import BUY, EXTEND, FIND, CapacityReport, Request
from fmcluster.deploy.preflight.context import ClientFactory, CredentialsProblem
from fmcluster.deploy.preflight.runner import session_clients
from fmcluster.spec.models import ClusterSpec

__all__ = ["FORMATS", "Request", "exit_code", "render", "run"]


def run(spec: ClusterSpec, request: Request, client: Optional[ClientFactory] = None, now: Optional[datetime] = None,
        confirm: Optional[Confirm] = None) -> CapacityReport:
    """`request` on the spec: `client` gives a client per service (default: the credentials'
    session, in the spec's region), `now` the time (default: the clock's), `confirm` asks the
    question of a purchase on a terminal (None: there is none to ask on)."""
    when = now or datetime.now(timezone.utc)
    try:
        clients = client or session_clients(spec.region)
    except CredentialsProblem as exc:
        failed = failure(exc)
        return CapacityReport(request.action, spec.name, spec.region, request.spec_path, spec.availability_zone_id,
                              error=failed.message, hint=failed.hint)
    if request.action == FIND:
        return actions.find(spec, request, clients, when)
    if request.action == BUY:
        return actions.buy(spec, request, clients, when, confirm)
    if request.action == EXTEND:
        return actions.extend(spec, request, clients, when, confirm)
    raise ValueError(f"no capacity action {request.action!r}")
