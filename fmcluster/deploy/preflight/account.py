"""The account and the region: the credentials' account (STS), the AZ IDs (EC2, Local Zones
opted in), and the instance types offered where the cluster runs them (EC2)."""

from __future__ import annotations

from typing import Iterable

from fmcluster.deploy.preflight.context import FAIL, PASS, WARN, Check, Context
from fmcluster.facts.controlplanes import CAPACITY_BLOCK, RESERVATION


def identity(ctx: Context) -> Iterable[Check]:
    me = ctx.client("sts").get_caller_identity()
    account = me["Account"]
    if ctx.spec.account and ctx.spec.account != account:
        yield Check("credentials", FAIL, f"credentials are for account {account}, the spec names "
                    f"{ctx.spec.account}", "use credentials of the spec's account (AWS_PROFILE)")
        return
    yield Check("credentials", PASS, f"{me['Arn']} in account {account}")


def zones(ctx: Context) -> Iterable[Check]:
    found = ctx.client("ec2").describe_availability_zones(AllAvailabilityZones=True)["AvailabilityZones"]
    by_id = {z["ZoneId"]: z for z in found}
    yield Check("region", PASS, f"{ctx.spec.region}: {len(found)} zones")
    for az_id in ctx.spec.availability_zone_ids:
        zone = by_id.get(az_id)
        if zone is None:
            yield Check(f"AZ ID {az_id}", FAIL, f"no zone {az_id} in {ctx.spec.region}",
                        "zones here: " + ", ".join(sorted(by_id)))
        elif zone.get("State", "available") != "available" or zone.get("OptInStatus") == "not-opted-in":
            local = zone.get("ZoneType") == "local-zone"
            hint = (f"aws ec2 modify-availability-zone-group --group-name {zone['GroupName']} --opt-in-status "
                    f"opted-in --region {ctx.spec.region}"
                    if local and zone.get("OptInStatus") == "not-opted-in" and zone.get("GroupName")
                    else "opt in to the zone, or choose another")
            yield Check(f"AZ ID {az_id}", FAIL, f"{az_id} ({zone['ZoneName']}) is "
                        f"{'a Local Zone, ' if local else ''}{zone.get('State')}, {zone.get('OptInStatus')}", hint)
        elif zone.get("ZoneType") == "local-zone":
            parent = zone.get("ParentZoneId")
            of = f", its parent zone {parent} ({zone.get('ParentZoneName')})" if parent else ""
            yield Check(f"AZ ID {az_id}", PASS, f"{az_id} is {zone['ZoneName']} in this account: a Local Zone"
                        f"{of}, opted in")
        else:
            yield Check(f"AZ ID {az_id}", PASS, f"{az_id} is {zone['ZoneName']} in this account")


def offerings(ctx: Context) -> Iterable[Check]:
    az = ctx.spec.availability_zone_id
    if ctx.hyperpod:
        yield Check("instance types", WARN, "SageMaker HyperPod runs ml.* instances: EC2 offerings do not "
                    "apply", "the SageMaker quotas below show what the account may run")
        return
    wanted = {g.instance_type: g for g in ctx.spec.node_groups}
    login = ctx.spec.orchestrator.login
    # where each type runs: the node groups' in the GPU zone; the login (system) nodes' in the
    # region's first AZ ID, which is the GPU zone unless that is a Local Zone
    places = sorted({(t, az) for t in wanted} | ({(login.instance_type, ctx.spec.region_zone_ids[0])}
                                                  if login.count else set()))
    pages = ctx.client("ec2").get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone-id",
        Filters=[{"Name": "location", "Values": sorted({zone for _, zone in places})},
                 {"Name": "instance-type", "Values": sorted({t for t, _ in places})}])
    offered = {(o["InstanceType"], o.get("Location")) for page in pages for o in page["InstanceTypeOfferings"]}
    for instance_type, zone in places:
        group = wanted.get(instance_type) if zone == az else None
        if (instance_type, zone) in offered:
            yield Check(f"offering {instance_type}", PASS, f"offered in {zone}")
        elif group is not None and group.capacity.type in (CAPACITY_BLOCK, RESERVATION):
            yield Check(f"offering {instance_type}", WARN, f"not listed as offered in {zone}; node group "
                        f"{group.name} runs on a {group.capacity.type}, checked below",
                        "types sold only as Capacity Blocks or reservations are often not listed")
        else:
            yield Check(f"offering {instance_type}", FAIL, f"not offered in {zone}",
                        f"aws ec2 describe-instance-type-offerings --location-type availability-zone-id "
                        f"--filters Name=instance-type,Values={instance_type} --region {ctx.spec.region}")
