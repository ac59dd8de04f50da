"""Whether a service runs in the region: botocore's endpoint data (no call), then a list call
that must answer (the control plane's, EC2 Image Builder's)."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterable

from fmcluster.deploy.preflight.context import PASS, Check, Context, ServiceName
from fmcluster.facts import regions

if TYPE_CHECKING:
    from botocore.session import Session

# A list call that answers where the service runs: (service, call, kwargs, the list its answer
# holds, what the service is called in the report)
ListCall = tuple[ServiceName, str, dict[str, Any], str, str]


@lru_cache(maxsize=1)
def _endpoint_session() -> Session:
    """One botocore session a process, for its endpoint data: each new session reads botocore's
    endpoints file again (a tenth of a second), and a preflight asks for each service it checks."""
    import botocore.session  # start-up cost: loaded only where a check reads the endpoint data

    return botocore.session.get_session()


def offered_in(service: str, region: str) -> bool | None:
    """Whether botocore's endpoint data lists `service` in `region`. None where the data cannot
    say: it lists no region for the service (services that ship only endpoint rules, such as AWS
    PCS), or does not list the region for EC2 either (a region newer than its endpoint list)."""
    session, partition = _endpoint_session(), regions.partition(region)
    listed = session.get_available_regions(service, partition_name=partition)
    if not listed or region not in session.get_available_regions("ec2", partition_name=partition):
        return None
    return region in listed


def answers(ctx: Context, service: ServiceName, call: str, kwargs: dict[str, Any], key: str, what: str
            ) -> Iterable[Check]:
    answer = getattr(ctx.client(service), call)(**kwargs)
    if key not in answer:  # parsed, but not the service's answer
        raise KeyError(key)
    yield Check(what, PASS, f"{what} answers in {ctx.spec.region}")
