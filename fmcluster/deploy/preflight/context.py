"""What every check of preflight reads and yields: the Context (the spec, a client per service,
the time it runs at, the planned window) and the Check, one row of the report."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Literal

from fmcluster.deploy.preflight.shapes import ReadReservation
from fmcluster.model import cluster as model
from fmcluster.spec.models import ClusterSpec

PASS, WARN, FAIL = "pass", "warn", "fail"
# The services preflight calls (boto3's service names).
ServiceName = Literal["sts", "ec2", "resource-groups", "service-quotas", "fsx", "pcs", "eks", "sagemaker", "ssm",
                      "imagebuilder", "iam"]
# A client of each service, by name: boto3's, or moto-backed and Stubber-backed ones in the tests.
ClientFactory = Callable[[ServiceName], Any]


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # pass | warn | fail
    reason: str
    hint: str | None = None


class CredentialsProblem(Exception):
    """No usable credentials: nothing can be checked."""


class Context:
    """What a check reads: the spec, a client per service, the time preflight runs at (`now`)
    and the window the cluster must run in (None: now); and what the checks keep of what they
    read (`read`: each reservation by id, for the report)."""

    def __init__(self, spec: ClusterSpec, client: ClientFactory, now: datetime | None = None,
                 window: tuple[datetime, datetime] | None = None) -> None:
        self.spec = spec
        self.client = client
        self.now = now or datetime.now(timezone.utc)
        self.window = window
        self.hyperpod = spec.orchestrator.control_plane.hyperpod
        self.images = model.resolve(spec).images  # NAME-images' node images; none on Kubernetes
        self.read: dict[str, ReadReservation] = {}  # what DescribeCapacityReservations said, by id


# A check: the rows it yields for the spec in the context (fmcluster.deploy.preflight.runner.CHECKS)
CheckFn = Callable[[Context], Iterable[Check]]


def when(value: datetime | None) -> str:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%MZ") if value else "no end date"
