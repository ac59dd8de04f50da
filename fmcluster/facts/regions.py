"""Regions, their partitions, and the prefix of their Availability Zone IDs (use1-az4 is in us-east-1).

Which AZ IDs a region has is not known here: botocore's data (partitions.json, endpoints.json)
lists regions, not zones, and which zones an account may use differs (opt-in Local Zones). An AZ ID
is checked against its region's prefix here (validate), and against the account's zones by
`fmcluster preflight` (DescribeAvailabilityZones: `use1-az99` fails there).

Sources and details: docs/research-notes.md, "fmcluster/facts/regions.py"."""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

# Patterns for re.match, which compiles each on first use (most runs need one at most). Each ends
# in \Z, not $: `$` also matches before a last line break, and use1-az4\n is no AZ ID.
AZ_ID = r"^([a-z]{2,5}[0-9])-az([0-9]{1,2})\Z"
AZ_NAME = r"^([a-z]{2}(-gov)?-[a-z]+-[0-9])([a-z])\Z"
# A Local Zone's ID: the region's prefix, the zone group's location code and number, the zone
# (use1-dfw2-az1 is the Dallas Local Zone us-east-1-dfw-2a: DescribeAvailabilityZones, ZoneType
# local-zone; AWS::EC2::Subnet's AvailabilityZoneId takes it)
LOCAL_ZONE_ID = r"^([a-z]{2,5}[0-9])-([a-z]{3}[0-9]{1,2})-az([0-9]{1,2})\Z"
REGION = r"^[a-z]{2}(-gov)?-[a-z]+-[0-9]\Z"

# AWS's naming rule for AZ ID prefixes (prefix_by_rule).
AZ_ID_RULE = r"([a-z]{2})-(north|south|east|west|central|northeast|northwest|southeast|southwest)-([0-9]+)"
DIRECTION_INITIALS = {"north": "n", "south": "s", "east": "e", "west": "w", "central": "c",
                      "northeast": "ne", "northwest": "nw", "southeast": "se", "southwest": "sw"}
# Regions whose AZ IDs do not follow the rule (AWS GovCloud (US): usgw1-az1, usge1-az1).
AZ_ID_PREFIX_EXCEPTIONS = {"us-gov-east-1": "usge1", "us-gov-west-1": "usgw1"}


@dataclass(frozen=True)
class Partition:
    name: str  # the second field of an ARN: aws, aws-cn, aws-us-gov, ...
    region_regex: str  # the shape of its region names, including those not in `regions` yet
    regions: tuple[str, ...]
    dns_suffix: str = "amazonaws.com"  # of its service endpoints (amazonaws.com.cn in China)


@cache
def botocore_data(name: str) -> dict[str, Any]:
    """One of botocore's data files (botocore/data/NAME.json, or .json.gz as botocore may ship it)."""
    spec = importlib.util.find_spec("botocore")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("botocore is not installed (it comes with boto3, a dependency of fmcluster)")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / f"{name}.json"
    data: dict[str, Any]
    if path.is_file():
        data = json.loads(path.read_bytes())
        return data
    import gzip  # only for a compressed file

    with gzip.open(path.with_name(f"{name}.json.gz")) as compressed:
        data = json.load(compressed)
        return data


@cache
def partitions() -> tuple[Partition, ...]:
    """botocore's partitions, in its order (the first, aws, is the default). Each partition's
    pseudo-regions (aws-global, aws-cn-global, ...) are left out: they are not region names."""
    return tuple(Partition(p["id"], p["regionRegex"], tuple(r for r in p["regions"] if re.match(p["regionRegex"], r)),
                           p.get("outputs", {}).get("dnsSuffix", "amazonaws.com"))
                 for p in botocore_data("partitions")["partitions"])


@cache
def region_names() -> tuple[str, ...]:
    """Every region botocore knows, sorted."""
    return tuple(sorted(r for p in partitions() for r in p.regions))


def partition(region: str) -> str:
    """The partition of a region, as botocore resolves it: the partition that lists it, else the
    first whose region names it matches, else the first partition (aws), as botocore's endpoint
    rules default."""
    listed = next((p.name for p in partitions() if region in p.regions), None)
    return listed or next((p.name for p in partitions() if re.match(p.region_regex, region)), partitions()[0].name)


def dns_suffix(region: str) -> str:
    """The domain of a region's service endpoints (amazonaws.com; amazonaws.com.cn in China), from
    botocore's partitions: ECR's registry of an account is ACCOUNT.dkr.ecr.REGION.SUFFIX."""
    name = partition(region)
    return next(p.dns_suffix for p in partitions() if p.name == name)


def prefix_by_rule(region: str) -> str | None:
    """The prefix AWS's naming rule gives a region's AZ IDs: AREA-DIRECTION-N gives AREA, the
    initials of DIRECTION and N; None for a name of another shape."""
    match = re.fullmatch(AZ_ID_RULE, region)
    if not match:
        return None
    area, direction, number = match.groups()
    return area + DIRECTION_INITIALS[direction] + number


def az_id_prefix(region: str) -> str | None:
    """The prefix of the region's AZ IDs (its exception, else the rule's), or None where neither
    names it. Not checked against botocore's regions: see `is_supported`."""
    return AZ_ID_PREFIX_EXCEPTIONS.get(region) or prefix_by_rule(region)


def is_supported(region: str) -> bool:
    """A region botocore knows whose AZ IDs fmcluster can name."""
    return region in region_names() and az_id_prefix(region) is not None


@cache
def _region_of_prefix() -> dict[str, str]:
    return {prefix: r for r in region_names() if (prefix := az_id_prefix(r))}


def region_of_az_id(az_id: str) -> str | None:
    """The region an AZ ID (or Local Zone ID) belongs to, or None when its prefix is no supported region's."""
    match = re.match(AZ_ID, az_id) or re.match(LOCAL_ZONE_ID, az_id)
    return _region_of_prefix().get(match.group(1)) if match else None


def is_local_zone(az_id: str) -> bool:
    """An ID of a Local Zone (use1-dfw2-az1), not of an Availability Zone (use1-az4)."""
    return re.match(LOCAL_ZONE_ID, az_id) is not None


def example_az_id(region: str | None) -> str:
    """An AZ ID of the region, for hints and stand-ins; of us-east-1 where the region is not supported."""
    return f"{az_id_prefix(region) if region and is_supported(region) else 'use1'}-az1"
