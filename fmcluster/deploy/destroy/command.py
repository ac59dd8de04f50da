"""`fmcluster destroy`'s run: the plan, the guards (the account, CloudFormation at work, nodes up,
the confirmation of --with-data), then the deletion."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from fmcluster.deploy.destroy.deleting import execute
from fmcluster.deploy.destroy.reading import plan
from fmcluster.deploy.destroy.records import Clients, DestroyReport, Failure, Plan, Say, Sleep
from fmcluster.model import cluster as model
from fmcluster.spec.models import ClusterSpec


def client_factory(region: str) -> Clients:
    """boto3 clients of the default credentials in `region`, one per service."""
    import boto3

    made: dict[str, Any] = {}

    def client(service: str) -> Any:
        if service not in made:
            made[service] = boto3.client(service, region_name=region)  # type: ignore[call-overload]
        return made[service]

    return client


def run(spec: ClusterSpec, path: str = "SPEC", *, with_data: bool = False, yes: Optional[str] = None,
        force: bool = False, dry_run: bool = False, clients: Optional[Clients] = None,
        shown: Optional[Callable[[Plan], None]] = None, confirm: Optional[Callable[[Plan], Optional[str]]] = None,
        say: Say = lambda text: None, sleep: Sleep = time.sleep) -> DestroyReport:
    """Plan, check the guards, and (unless `dry_run`) delete. `shown` is called with the plan
    before anything is deleted (the command line prints it); `confirm`, where `with_data` has no
    `yes`, asks for the cluster's name; `say` hears each step; `sleep` waits between polls."""
    from botocore.exceptions import BotoCoreError, ClientError

    m = model.resolve(spec)
    clients = clients or client_factory(m.region)
    try:
        p = plan(m, clients, with_data)
    except (BotoCoreError, ClientError) as exc:
        return DestroyReport(path, None, dry_run, refused=Failure(
            m.name, f"cannot read the cluster's stacks in {m.region}: {exc}",
            "destroy reads with the default credentials (AWS_PROFILE), and needs cloudformation:Describe*, List* "
            "and GetTemplate, and the Describe and List calls of the services it deletes from"))
    if shown is not None:
        shown(p)
    report = DestroyReport(path, p, dry_run, plan_shown=shown is not None)
    refused = _guard(p, spec, force, with_data, yes, dry_run, confirm)
    if refused is not None:
        return DestroyReport(path, p, dry_run, refused=refused, plan_shown=report.plan_shown)
    if dry_run or not (p.deleting or p.removed):
        return report
    done, failed = execute(p, clients, say, sleep)
    return DestroyReport(path, p, dry_run, failed=failed, done=done, plan_shown=report.plan_shown)


def _guard(p: Plan, spec: ClusterSpec, force: bool, with_data: bool, yes: Optional[str], dry_run: bool,
           confirm: Optional[Callable[[Plan], Optional[str]]]) -> Optional[Failure]:
    if spec.account and spec.account != p.account:
        return Failure(p.cluster, f"the spec's account is {spec.account}, the credentials' {p.account}",
                       "use credentials of the cluster's account (AWS_PROFILE)")
    if p.busy:
        names = ", ".join(f"{s.name} ({s.status})" for s in p.busy)
        return Failure(names, "CloudFormation is working on it", "wait until it is done, then run fmcluster destroy "
                                                                  "again")
    if p.nodes_unread and not force:
        return Failure(p.cluster, f"cannot tell whether nodes are up: {p.nodes_unread}",
                       "destroy reads them with ec2:DescribeInstances and the control plane's List and Describe "
                       "calls; or pass --force to delete the cluster whatever runs on it")
    if p.compute_nodes and not force:
        groups: dict[str, list[str]] = {}
        for node in p.compute_nodes:
            groups.setdefault(node.group, []).append(node.instance_id)
        up = "; ".join(f"{len(ids)} of node group {group} ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''})"
                       for group, ids in groups.items())
        cluster = next((s.name for s in p.deleting if s.key == model.CLUSTER), p.cluster)
        return Failure(cluster, f"nodes are up: {up}; deleting the stack ends the jobs on them",
                       "let the jobs end and scale the groups to 0 (or drain them), then run destroy again; "
                       "or pass --force to delete the nodes as they are")
    if not with_data or not (p.deleting or p.removed):
        return None
    typed = yes if yes is not None or dry_run or confirm is None else confirm(p)
    if typed is None and not dry_run:
        return Failure(p.cluster, "--with-data deletes the data, and nobody confirmed it",
                       f"type the cluster's name at the prompt (on a terminal), or pass --yes={p.cluster}")
    if typed is not None and typed.strip() != p.cluster:
        return Failure(p.cluster, f"{typed.strip()!r} is not the cluster's name: nothing was deleted",
                       f"the name is {p.cluster}, as the spec's `name` says")
    return None
