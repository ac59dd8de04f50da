"""`fmcluster destroy SPEC`: the way out of a cluster. It deletes the cluster's stacks that hold no
data, in the reverse of the deploy order, waiting for each, and says what it keeps and what that
costs a month; with `--with-data` (confirmed with the cluster's name) it deletes the rest too, and
what CloudFormation leaves behind.

- The stacks, their names and their deploy order are the model's (fmcluster.model.cluster: the CDK
  app builds them in that order, each on the ones before it). They are deleted in the reverse order.
- What each stack holds is read from the account: every stack's template as deployed and its
  resources (GetTemplate, ListStackResources, nested stacks included), also for a stack deleted
  before (by `cdk destroy`, or by hand), whose retained resources may still be there
  (CloudFormation keeps a deleted stack's records for 90 days).
- Without `--with-data`, a stack is kept when it holds data (cfn_schemas.DATA_TYPES, the list
  `diff` and `change-set` judge by: NAME-storage, and NAME-observability for its metrics
  workspace), and so is every stack deployed before a kept one (a kept stack may be built on it:
  NAME-storage's file system and security groups are in NAME-network's VPC), or before a stack whose
  retained file system, database or security group stays in that VPC. What CloudFormation leaves
  behind (DeletionPolicy Retain: the log groups) is kept and listed, with how to delete it; what
  holds no data and bills unseen (the AMIs NAME-images' builds made) is deleted after its stack.
  NAME-reference's ECR repositories (the reference GPU images, on every plane; the stack deployed
  last, so deleted first) hold no data either: CloudFormation deletes them with the stack, images
  and all (EmptyOnDelete), and retains nothing of them but their build logs.
- A stack with termination protection on (NAME-storage; every stack with the spec's `protect`) has
  it lifted just before it is deleted. A stack policy governs updates only ("A stack policy applies
  only during stack updates": CloudFormation User Guide, "Prevent updates to stack resources"):
  DeleteStack does not read it, and it is left as it is.
- With `--with-data`, every stack is deleted, and after each the resources it retained
  (fmcluster.deploy.retained: buckets emptied of every version first, file systems and the
  database waited for until they are gone).
- Nothing is deleted while compute nodes are up (fmcluster.deploy.nodes) unless `force`, nor while
  a stack is being created or updated, nor in another account than the spec names.

Run again after a failure, it goes on from where it stopped: what is gone is not deployed any more.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Optional, Sequence

from fmcluster.deploy import assembly, cfn_schemas, deployed, retained
from fmcluster.deploy.diff import data_keys
from fmcluster.deploy.nodes import Node
from fmcluster.deploy.retained import Cost, Resource
from fmcluster.facts import images as image_facts
from fmcluster.facts import naming, prices
from fmcluster.model import cluster as model
from fmcluster.spec.models import ClusterSpec

FORMATS = ("text",)
Clients = Callable[[str], Any]
Sleep = Callable[[float], None]
Say = Callable[[str], None]

DELETE, KEEP, ABSENT, DELETED = "delete", "keep", "absent", "deleted"  # a stack's part in the plan
RETAINED = ("Retain", "RetainExceptOnCreate")
DELETE_COMPLETE, DELETE_FAILED = "DELETE_COMPLETE", "DELETE_FAILED"
DELETABLE_WHILE = ("DELETE_IN_PROGRESS", "REVIEW_IN_PROGRESS")  # in progress, yet deleting is what it takes
STACK_POLL_S = 15.0
STACK_LIMIT_S = 4 * 3600.0  # how long a stack's deletion is waited for (a HyperPod or EKS cluster: tens of minutes)
SAY_EVERY_S = 300.0  # how often a long deletion says it is still going
# What a deleted stack may leave in the VPC of the stacks before it (their network interfaces, or
# the VPC itself): while one stays, the network cannot be deleted
IN_THE_VPC = ("AWS::FSx::FileSystem", "AWS::EC2::SecurityGroup", "AWS::RDS::DBInstance", "AWS::RDS::DBSubnetGroup")
HOW_TO_GO_ON = "fix the cause, then run fmcluster destroy again: it goes on from where it stopped"


@dataclass(frozen=True)
class Stack:
    """One stack of the cluster, as the account has it."""

    name: str
    key: str  # the model's (network, storage, ...)
    action: str  # DELETE, KEEP, ABSENT (never deployed) or DELETED (deleted before this run)
    why: str = ""  # why it is kept, or what deleting it involves
    status: str = ""  # CloudFormation's
    stack_id: str = ""
    protected: bool = False  # termination protection on
    data: tuple[Resource, ...] = ()  # what holds data in it
    left: tuple[Resource, ...] = ()  # what CloudFormation leaves (or left) in the account when it is deleted
    costs: tuple[Resource, ...] = ()  # what bills while the stack is kept


@dataclass(frozen=True)
class Plan:
    cluster: str
    region: str
    account: str
    with_data: bool
    stacks: tuple[Stack, ...]  # in the order they are deleted: the reverse of the deploy order
    nodes: tuple[Node, ...]  # up, compute groups' first (read when NAME-cluster is to be deleted)
    table: prices.PriceTable
    nodes_unread: str = ""  # why the nodes could not be read ("" where they were, or need not be)

    @property
    def deleting(self) -> tuple[Stack, ...]:
        return tuple(s for s in self.stacks if s.action == DELETE)

    @property
    def removed(self) -> tuple[Resource, ...]:
        """What is deleted after its stack, in order: what it left behind with `with_data`, else
        only what holds no data (its node images)."""
        return tuple(r for s in self.stacks if s.action in (DELETE, DELETED) for r in self.removed_after(s))

    def removed_after(self, stack: Stack) -> list[Resource]:
        return [r for r in retained.deletion_order(list(stack.left)) if self.with_data or r.swept]

    @property
    def kept(self) -> tuple[Resource, ...]:
        """What stays in the account and bills: the kept stacks' resources that cost, and what
        CloudFormation leaves behind."""
        out: list[Resource] = []
        for stack in self.stacks:
            if stack.action == KEEP:
                out += stack.costs
            elif not self.with_data:
                out += [r for r in stack.left if r.goes_with is None and not r.swept]
        return tuple(out)

    @property
    def compute_nodes(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.compute)

    @property
    def busy(self) -> tuple[Stack, ...]:
        """Stacks being created, updated or rolled back: not deleted under CloudFormation's feet."""
        return tuple(s for s in self.stacks if s.status.endswith("_IN_PROGRESS") and s.status not in DELETABLE_WHILE)


@dataclass(frozen=True)
class Failure:
    where: str  # a stack, or a resource and its stack
    reason: str
    hint: str


@dataclass(frozen=True)
class DestroyReport:
    path: str  # the spec's file, as the command line named it
    plan: Optional[Plan]
    dry_run: bool = False
    refused: Optional[Failure] = None  # nothing was deleted: a guard, or the account could not be read
    failed: Optional[Failure] = None  # a step failed, after those in `done`
    done: tuple[str, ...] = ()  # what was deleted, in order
    plan_shown: bool = False  # the plan was printed before anything was done (render leaves it out)


# ---- reading the account -----------------------------------------------------------------------

def _live(cfn: Any, name: str) -> Optional[dict[str, Any]]:
    from botocore.exceptions import ClientError

    try:
        return dict(cfn.describe_stacks(StackName=name)["Stacks"][0])
    except ClientError as exc:
        if deployed.NOT_DEPLOYED in str(exc.response.get("Error", {}).get("Message", "")):
            return None
        raise


def _deleted(cfn: Any, names: set[str]) -> dict[str, str]:
    """Name -> id of the last deleted stack of each name (CloudFormation lists them for 90 days)."""
    found: dict[str, tuple[Any, str]] = {}
    for page in cfn.get_paginator("list_stacks").paginate(StackStatusFilter=[DELETE_COMPLETE]):
        for summary in page.get("StackSummaries", []):
            name, when = summary["StackName"], summary.get("DeletionTime") or summary.get("CreationTime")
            if name in names and (name not in found or str(when) > str(found[name][0])):
                found[name] = (when, summary["StackId"])
    return {name: stack_id for name, (_, stack_id) in found.items()}


def _read(cfn: Any, stack_id: str, name: str, templates: dict[str, dict[str, Any]]) -> list[Resource]:
    """The resources of a stack's template and of its nested stacks' (named PARENT/ID, as
    fmcluster.deploy.assembly names them; their templates into `templates`), each with its
    physical id ("" where CloudFormation made none). One that CloudFormation deleted is left out."""
    body = templates[name] = deployed.template(cfn, stack_id) or {}
    summaries: dict[str, dict[str, Any]] = {}
    for page in cfn.get_paginator("list_stack_resources").paginate(StackName=stack_id):
        summaries.update({s["LogicalResourceId"]: s for s in page.get("StackResourceSummaries", [])})
    found: list[Resource] = []
    for logical, resource in body.get("Resources", {}).items():
        summary = summaries.get(logical, {})
        physical = str(summary.get("PhysicalResourceId") or "")
        if resource.get("Type") == assembly.NESTED_STACK:  # deleted too, it may have left resources
            if physical:
                found += _read(cfn, physical, f"{name}/{assembly.nested_id(logical, resource)}", templates)
            continue
        if summary.get("ResourceStatus") == DELETE_COMPLETE:
            continue
        found.append(Resource(name, logical, str(resource.get("Type")), physical, resource.get("Properties", {}),
                              resource.get("DeletionPolicy") in RETAINED))
    return found


def _holds_data(resource: Resource, keys: set[tuple[str, str]]) -> bool:
    """Data as `fmcluster diff` counts it: a key only where it encrypts what holds data."""
    if resource.type == "AWS::KMS::Key":
        return (resource.stack, resource.logical_id) in keys
    return cfn_schemas.holds_data(resource.type)


def _contents(data: Iterable[Resource]) -> str:
    counts: dict[str, int] = {}
    for resource in data:
        counts[resource.what] = counts.get(resource.what, 0) + 1
    return ", ".join(f"{n} {what}{'s' if n > 1 and not what.endswith('s') else ''}" if n > 1 else what
                     for what, n in counts.items())


def _pin(resources: Iterable[Resource], stack: str, verb: str) -> str:
    """Why the stacks before `stack` stay: what it leaves in their VPC ("" where nothing)."""
    pins = [r for r in resources if r.type in IN_THE_VPC]
    return f"{pins[0].label}, which {stack} {verb} behind, is in its VPC" if pins else ""


def plan(m: model.ClusterModel, clients: Clients, with_data: bool) -> Plan:
    """What destroy would do, read from the account (botocore's errors when it cannot be read)."""
    from fmcluster.deploy import nodes

    cfn = clients("cloudformation")
    table = prices.table()
    account = str(clients("sts").get_caller_identity()["Account"])
    order = list(reversed(m.stacks))  # the deletion order
    live = {s.name: _live(cfn, s.name) for s in order}
    deleted = _deleted(cfn, {s.name for s in order if live[s.name] is None})
    templates: dict[str, dict[str, Any]] = {}
    resources: dict[str, list[Resource]] = {}
    for s in order:
        stack_id = (live[s.name] or {}).get("StackId") or deleted.get(s.name)
        if stack_id:
            resources[s.name] = _read(cfn, stack_id, s.name, templates)
    keys = data_keys(templates)
    stacks: list[Stack] = []
    pinned = ""  # why the stacks deployed before the first kept one stay (what it is)
    for s in order:
        found = resources.get(s.name, [])
        info = live[s.name]
        if info is None:
            left = tuple(r for r in found if r.retained and r.physical_id and retained.exists(clients, r))
            was = s.name in deleted
            stacks.append(Stack(s.name, s.key, DELETED if was else ABSENT, "deleted before" if was else "not deployed",
                                left=left))
            pinned = pinned or ("" if with_data else _pin(left, s.name, "left"))
            continue
        data = tuple(r for r in found if _holds_data(r, keys))
        left = tuple(r for r in found if r.retained and r.physical_id)
        action, why = DELETE, f"it holds data: {_contents(data)}" if data else ""
        if not with_data and (s.key == model.STORAGE or data):
            action = KEEP
            pinned = pinned or f"the kept {s.name} is built on it"
        elif not with_data and pinned:
            action, why = KEEP, pinned
        elif not with_data:
            pinned = _pin(left, s.name, "leaves")
        stacks.append(Stack(s.name, s.key, action, why, status=str(info.get("StackStatus", "")),
                            stack_id=str(info["StackId"]), protected=bool(info.get("EnableTerminationProtection")),
                            data=data, left=left,
                            costs=tuple(r for r in found if retained.cost(r, table) is not None)))
    stacks = _with_node_images(m, clients, stacks)
    cluster = m.stack(model.CLUSTER)
    deleting_cluster = cluster is not None and any(s.action == DELETE and s.name == cluster.name for s in stacks)
    found_nodes: tuple[Node, ...] = ()
    nodes_unread = ""
    if deleting_cluster:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            found_nodes = nodes.up(m, clients)
        except (BotoCoreError, ClientError) as exc:
            nodes_unread = str(exc)
    return Plan(m.name, m.region, account, with_data, tuple(stacks), found_nodes, table, nodes_unread)


def _with_node_images(m: model.ClusterModel, clients: Clients, stacks: list[Stack]) -> list[Stack]:
    """The stacks, NAME-images with the AMIs its builds made (tagged with the cluster and an image
    key) among what it leaves behind, where it is deleted or gone."""
    images = m.stack(model.IMAGES)
    at = next((i for i, s in enumerate(stacks) if images is not None and s.name == images.name), None)
    if at is None or stacks[at].action == KEEP:
        return stacks
    found = []
    tagged = [{"Name": f"tag:{naming.CLUSTER_TAG}", "Values": [m.name]},
              {"Name": "tag-key", "Values": [image_facts.IMAGE_TAG]}]
    for page in clients("ec2").get_paginator("describe_images").paginate(Owners=["self"], Filters=tagged):
        for image in page.get("Images", []):
            disks = [d["Ebs"] for d in image.get("BlockDeviceMappings", []) if d.get("Ebs", {}).get("SnapshotId")]
            about = {"Name": image.get("Name", ""), "Snapshots": [d["SnapshotId"] for d in disks],
                     "SnapshotGiB": sum(int(d.get("VolumeSize", 0)) for d in disks)}
            found.append(Resource(stacks[at].name, image.get("Name", image["ImageId"]), retained.NODE_IMAGE,
                                  image["ImageId"], about, retained=True))
    if not found:
        return stacks
    stack = stacks[at]
    action = DELETED if stack.action == ABSENT else stack.action
    stacks[at] = replace(stack, action=action, why="deleted before" if action == DELETED else stack.why,
                         left=(*stack.left, *sorted(found, key=lambda r: r.logical_id)))
    return stacks


# ---- deleting ----------------------------------------------------------------------------------

def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _why_failed(cfn: Any, stack: Stack, status: dict[str, Any]) -> str:
    """The reasons of the resources that failed to delete, newest first, back to the deletion's start."""
    reasons: list[str] = []
    for event in cfn.describe_stack_events(StackName=stack.stack_id).get("StackEvents", []):
        if event.get("LogicalResourceId") == stack.name and event.get("ResourceStatus") == "DELETE_IN_PROGRESS":
            break
        if event.get("ResourceStatus") == DELETE_FAILED and event.get("LogicalResourceId") != stack.name:
            reasons.append(f"{event['LogicalResourceId']} ({event.get('ResourceType', '?')}): "
                           f"{event.get('ResourceStatusReason', '')}")
    return "; ".join(reasons) or str(status.get("StackStatusReason") or "no reason given")


def _hint(reason: str, stack: str) -> str:
    if "in use by" in reason:
        return ("another stack imports one of its exports: delete that stack (or its import) first, then run "
                "fmcluster destroy again")
    if "DependencyViolation" in reason or "has dependencies" in reason or "dependent object" in reason:
        return ("something outside the stack still uses its resources (the network interfaces of a file system, "
                "a load balancer or an instance someone launched): delete that, then run fmcluster destroy again")
    return f"read its events (aws cloudformation describe-stack-events --stack-name {stack}); {HOW_TO_GO_ON}"


def _delete_stack(cfn: Any, stack: Stack, say: Say, sleep: Sleep) -> Optional[Failure]:
    if stack.protected:
        say(f"{stack.name}: lifting its termination protection")
        cfn.update_termination_protection(StackName=stack.stack_id, EnableTerminationProtection=False)
    say(f"{stack.name}: deleting")
    cfn.delete_stack(StackName=stack.stack_id)
    waited = 0.0
    while True:
        status = cfn.describe_stacks(StackName=stack.stack_id)["Stacks"][0]
        state = status.get("StackStatus", "")
        if state == DELETE_COMPLETE:
            say(f"{stack.name}: deleted" + (f" after {_minutes(waited)}" if waited else ""))
            return None
        if state == DELETE_FAILED:
            reason = _why_failed(cfn, stack, status)
            return Failure(stack.name, f"DELETE_FAILED: {reason}", _hint(reason, stack.name))
        if waited >= STACK_LIMIT_S:
            return Failure(stack.name, f"still {state} after {_minutes(waited)}",
                           "CloudFormation goes on: watch it in the console, then run fmcluster destroy again")
        sleep(STACK_POLL_S)
        waited += STACK_POLL_S
        if waited % SAY_EVERY_S == 0:
            say(f"{stack.name}: {state} for {_minutes(waited)}")


def _delete_resource(clients: Clients, resource: Resource, say: Say, sleep: Sleep) -> Optional[Failure]:
    from botocore.exceptions import BotoCoreError, ClientError

    where = f"{resource.name} ({resource.stack})"
    try:
        if not retained.exists(clients, resource):
            say(f"{resource.stack}: {resource.name} is gone already")
            return None
        say(f"{resource.stack}: deleting {resource.name}")
        retained.delete(clients, resource, sleep)
    except retained.DeleteFailed as exc:
        return Failure(where, exc.reason, exc.hint)
    except (BotoCoreError, ClientError) as exc:
        return Failure(where, str(exc), f"delete it by hand ({resource.how()}), or {HOW_TO_GO_ON}")
    return None


def execute(p: Plan, clients: Clients, say: Say, sleep: Sleep) -> tuple[tuple[str, ...], Optional[Failure]]:
    """Delete what the plan deletes, in its order: each stack (waited for), then what it left
    behind when the plan deletes data. Stops at the first failure."""
    from botocore.exceptions import BotoCoreError, ClientError

    cfn = clients("cloudformation")
    done: list[str] = []
    for stack in p.stacks:
        if stack.action == DELETE:
            try:
                failure = _delete_stack(cfn, stack, say, sleep)
            except (BotoCoreError, ClientError) as exc:
                failure = Failure(stack.name, str(exc), _hint(str(exc), stack.name))
            if failure:
                return tuple(done), failure
            done.append(stack.name)
        if stack.action in (DELETE, DELETED):
            for resource in p.removed_after(stack):
                failure = _delete_resource(clients, resource, say, sleep)
                if failure:
                    return tuple(done), failure
                done.append(resource.name)
    return tuple(done), None


# ---- the command -------------------------------------------------------------------------------

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


# ---- output ------------------------------------------------------------------------------------

def _money(value: float) -> str:
    return f"${value:,.2f}"


def _table(rows: Sequence[tuple[str, ...]], indent: str = "  ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)] if rows else []
    return [indent + "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]]).rstrip()
            for row in rows]


def render_plan(p: Plan, dry_run: bool = False) -> str:
    """What destroy finds and will do, in words."""
    head = f"fmcluster destroy: {p.cluster} in {p.region}, account {p.account}"
    lines = [head + (" (dry run: nothing is deleted)" if dry_run else "")]
    if not any(s.action in (DELETE, KEEP) or s.left for s in p.stacks):
        return "\n".join([*lines, f"nothing of {p.cluster} is deployed in {p.region}"]) + "\n"
    rows = []
    for s in p.stacks:
        notes = [s.why] if s.why else []
        if s.action == DELETE and s.protected:
            notes.append("its termination protection is lifted")
        if s.status and s.status not in ("CREATE_COMPLETE", "UPDATE_COMPLETE"):
            notes.append(f"now {s.status}")
        rows.append((s.action, s.name, "; ".join(notes)))
    lines += ["stacks, in the order they are deleted (the reverse of the deploy order):", *_table(rows)]
    lines += _render_nodes(p)
    if p.removed:
        lines.append("deleted after their stack" + (", the data with them:" if p.with_data else
                                                     " (they hold no data):"))
        lines += _table([(r.stack, r.label) for r in p.removed])
    lines += _render_costs(p)
    left = [r for s in p.stacks if s.action != KEEP and not p.with_data for r in s.left
            if r.goes_with is None and not r.swept]
    if left:
        lines.append("of which CloudFormation leaves behind the stacks it deletes (DeletionPolicy Retain), to "
                     "delete by hand:")
        lines += [f"  {r.how()}" for r in left]
    if not p.with_data and p.kept:
        lines.append("--with-data deletes what is kept too (after the cluster's name is typed)")
    return "\n".join(lines) + "\n"


def _render_nodes(p: Plan) -> list[str]:
    if not any(s.key == model.CLUSTER for s in p.deleting):
        return []
    counts: dict[tuple[bool, str], int] = {}
    for node in p.nodes:
        counts[(node.compute, node.group)] = counts.get((node.compute, node.group), 0) + 1
    compute = ", ".join(f"{group}: {n}" for (is_compute, group), n in counts.items() if is_compute)
    own = ", ".join(f"{group}: {n}" for (is_compute, group), n in counts.items() if not is_compute)
    text = f"nodes up: {compute or 'none in the compute groups'}"
    if own:
        text += f"; the control plane's own ({own}) go with its stack"
    return [text]


def _render_costs(p: Plan) -> list[str]:
    """What is kept, a line each: its stack, what it costs a month (or `by use`, or `unpriced`), what
    it is; then the total of what has a figure."""
    kept = p.kept
    if not kept:
        return [f"nothing of {p.cluster} is kept"] if p.with_data else []
    t = p.table
    where = f"{t.region} list prices of {t.as_of}, {t.currency}" + (
        f"; {p.region}'s may differ" if p.region != t.region else "")
    rows, total, by_use, unpriced = [], 0.0, False, []
    for resource in kept:
        cost = retained.cost(resource, t) or Cost(None, "no charge of its own")
        if cost.monthly_usd is not None:
            total += cost.monthly_usd
        by_use |= cost.by_use
        if cost.monthly_usd is None and not cost.by_use and cost.note not in unpriced:
            unpriced.append(cost.note)
        text = _money(cost.monthly_usd) if cost.monthly_usd is not None else "by use" if cost.by_use else "unpriced"
        rows.append((resource.stack, text, resource.label))
    stack_width = max(len(row[0]) for row in rows)
    cost_width = max(len(row[1]) for row in rows + [("", _money(total), "")])
    lines = [f"kept, and what it costs a month ({where}):"]
    lines += [f"  {stack.ljust(stack_width)}  {text.rjust(cost_width)}  {label}" for stack, text, label in rows]
    lines.append(f"  {'total'.ljust(stack_width)}  {_money(total).rjust(cost_width)}  a month"
                 + (", and what is billed by use (what it stores, takes in or serves)" if by_use else ""))
    if unpriced:
        lines.append(f"  unpriced: {'; '.join(unpriced)}")
    return lines


def render(report: DestroyReport, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr): the plan (unless it was printed before) and what was done; on stderr the
    refusal or the failure, with its hint."""
    out = ""
    if report.plan is not None and not report.plan_shown:
        out = render_plan(report.plan, report.dry_run)
    problem = report.refused or report.failed
    err = ""
    if problem is not None:
        err = f"error: {report.path}: {problem.where}: {problem.reason}\n  hint: {problem.hint}\n"
    if report.plan is None:
        return out, err
    if report.refused is not None:
        out += "refused: nothing was deleted\n"
    elif report.dry_run:
        out += "dry run: nothing was deleted\n"
    elif report.done or report.failed:
        names = {s.name for s in report.plan.stacks}
        stacks = [d for d in report.done if d in names]
        others = len(report.done) - len(stacks)
        out += (f"deleted: {len(stacks)} stack{'s' if len(stacks) != 1 else ''}"
                + (f" ({', '.join(stacks)})" if stacks else "")
                + (f" and {others} resource{'s' if others != 1 else ''} they left behind" if others else "") + "\n")
        if report.failed:
            out += f"stopped at {report.failed.where}: what comes after it in the plan is still there\n"
        elif report.plan.kept:
            out += f"kept: what the list above names (fmcluster destroy {report.path} --with-data deletes it)\n"
        else:
            out += f"nothing of {report.plan.cluster} is left in {report.plan.region}\n"
    elif any(s.action == KEEP for s in report.plan.stacks):
        out += "nothing to delete: what is deployed is kept\n"
    return out, err


def exit_code(report: DestroyReport) -> int:
    """1 when refused (a guard, the account unreadable) or when a deletion failed."""
    return 1 if report.refused is not None or report.failed is not None else 0
