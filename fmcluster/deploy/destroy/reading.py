"""The plan of a destroy, read from the account: each stack of the model, deployed, deleted before
or never deployed, what it holds and leaves behind, whether it is deleted or kept, and the nodes
that are up where NAME-cluster is deleted."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Optional

from fmcluster.deploy import assembly, cfn_schemas, deployed, retained
from fmcluster.deploy.destroy.records import (
    ABSENT,
    DELETE,
    DELETE_COMPLETE,
    DELETED,
    IN_THE_VPC,
    KEEP,
    RETAINED,
    Clients,
    Plan,
    Stack,
)
from fmcluster.deploy.diff import data_keys
from fmcluster.deploy.nodes import Node
from fmcluster.deploy.retained import Resource
from fmcluster.facts import images as image_facts
from fmcluster.facts import naming, prices
from fmcluster.model import cluster as model


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
