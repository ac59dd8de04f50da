"""What the node groups name in EC2: their placement groups (each exists and is a cluster
group) and their AMIs (each exists, is available, fits the instance type's architecture and the
root volume)."""

from __future__ import annotations

from functools import partial
from typing import Any, Iterable

from fmcluster.deploy.preflight.context import FAIL, PASS, WARN, Check, Context
from fmcluster.deploy.preflight.guard import ec2_found, guard
from fmcluster.facts.placement import AUTO, NONE
from fmcluster.spec.models import NodeGroupSpec

PLACEMENT_GROUP_NOT_FOUND = {"InvalidPlacementGroup.Unknown", "InvalidGroup.NotFound"}
AMI_NOT_FOUND = {"InvalidAMIID.NotFound", "InvalidAMIID.Malformed", "InvalidAMIID.Unavailable"}


def placement_groups(ctx: Context) -> Iterable[Check]:
    """Each existing placement group a node group names: it exists, and is a cluster group."""
    if ctx.hyperpod:
        return  # HyperPod places its instances itself (the rule hyperpod_placement_group)
    for group in ctx.spec.node_groups:
        if group.placement_group not in (AUTO, NONE):
            name = f"placement group {group.placement_group}"
            yield from guard(ctx, name, partial(_placement_group, ctx, group, name))


def _placement_group(ctx: Context, group: NodeGroupSpec, name: str) -> Iterable[Check]:
    found = ec2_found(ctx, "describe_placement_groups", "PlacementGroups", PLACEMENT_GROUP_NOT_FOUND,
                       GroupNames=[group.placement_group])
    if not found:
        yield Check(name, FAIL, f"no placement group {group.placement_group} in {ctx.spec.region}; node group "
                    f"{group.name} names it", "create it (aws ec2 create-placement-group --strategy cluster), "
                    "or use placement_group: auto")
        return
    pg = found[0]
    if pg.get("State", "available") != "available":
        yield Check(name, FAIL, f"{group.placement_group} is {pg.get('State')}", "use an available group")
    elif pg.get("Strategy") != "cluster":
        yield Check(name, WARN, f"{group.placement_group} is a {pg.get('Strategy')} placement group: EFA "
                    "traffic is fastest in a cluster placement group", "use a cluster placement group")
    else:
        yield Check(name, PASS, f"cluster placement group, {pg.get('State', 'available')}")


def amis(ctx: Context) -> Iterable[Check]:
    """Each AMI a node group names: it exists and is available, is built for the instance
    type's architecture, and its root snapshot fits in the root volume."""
    for group in ctx.spec.node_groups:
        if group.ami_id:
            name = f"AMI {group.ami_id}"
            yield from guard(ctx, name, partial(_image, ctx, group, group.ami_id, name))


def _image(ctx: Context, group: NodeGroupSpec, ami: str, name: str) -> Iterable[Check]:
    found = ec2_found(ctx, "describe_images", "Images", AMI_NOT_FOUND, ImageIds=[ami])
    if not found:
        yield Check(name, FAIL, f"{ami} not found in {ctx.spec.region} (or not shared with the account)",
                    "AMIs are regional: copy it to the region (aws ec2 copy-image), or share it")
        return
    image = found[0]
    if image.get("State", "available") != "available":
        yield Check(name, FAIL, f"{ami} is {image.get('State')}", "wait until it is available, or use another")
        return
    wanted = group.instance.architecture
    if image.get("Architecture") != wanted:
        yield Check(name, FAIL, f"{ami} is built for {image.get('Architecture')}; {group.instance_type} "
                    f"(node group {group.name}) runs {wanted}", f"use an {wanted} image")
        return
    root: dict[str, Any] = next((m for m in image.get("BlockDeviceMappings", [])
                 if m.get("DeviceName") == image.get("RootDeviceName")), {})
    snapshot_gib = root.get("Ebs", {}).get("VolumeSize")
    if snapshot_gib is not None and snapshot_gib > group.root_volume_gib:
        yield Check(name, FAIL, f"{ami}'s root snapshot is {snapshot_gib} GiB; root_volume_gib of node group "
                    f"{group.name} is {group.root_volume_gib}", f"set root_volume_gib to {snapshot_gib} or more")
        return
    size = f", root snapshot {snapshot_gib} GiB" if snapshot_gib is not None else ""
    yield Check(name, PASS, f"{image.get('Name', ami)}: available, {wanted}{size}")
