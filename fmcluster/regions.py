"""Regions and the prefix of their Availability Zone IDs (use1-az4 is in us-east-1).

AZ IDs name the same physical zone in every account, unlike AZ names (us-east-1a), which are
shuffled per account; capacity reservations and Capacity Blocks are bound to an AZ ID.
"""

from __future__ import annotations

import re

AZ_ID_PREFIX = {
    "af-south-1": "afs1", "ap-east-1": "ape1", "ap-east-2": "ape2",
    "ap-northeast-1": "apne1", "ap-northeast-2": "apne2", "ap-northeast-3": "apne3",
    "ap-south-1": "aps1", "ap-south-2": "aps2",
    "ap-southeast-1": "apse1", "ap-southeast-2": "apse2", "ap-southeast-3": "apse3",
    "ap-southeast-4": "apse4", "ap-southeast-5": "apse5", "ap-southeast-6": "apse6", "ap-southeast-7": "apse7",
    "ca-central-1": "cac1", "ca-west-1": "caw1",
    "eu-central-1": "euc1", "eu-central-2": "euc2", "eu-north-1": "eun1",
    "eu-south-1": "eus1", "eu-south-2": "eus2",
    "eu-west-1": "euw1", "eu-west-2": "euw2", "eu-west-3": "euw3",
    "il-central-1": "ilc1", "me-central-1": "mec1", "me-south-1": "mes1",
    "mx-central-1": "mxc1", "sa-east-1": "sae1",
    "us-east-1": "use1", "us-east-2": "use2", "us-west-1": "usw1", "us-west-2": "usw2",
}

# Patterns for re.match, which compiles each on first use (most runs need one at most).
AZ_ID = r"^([a-z]{2,5}[0-9])-az([0-9]{1,2})$"
AZ_NAME = r"^([a-z]{2}(-gov)?-[a-z]+-[0-9])([a-z])$"
REGION = r"^[a-z]{2}(-gov)?-[a-z]+-[0-9]$"


def region_of_az_id(az_id: str) -> str | None:
    """The region an AZ ID belongs to, or None when its prefix is unknown."""
    match = re.match(AZ_ID, az_id)
    if not match:
        return None
    prefix = match.group(1)
    return next((region for region, p in AZ_ID_PREFIX.items() if p == prefix), None)


def example_az_id(region: str | None) -> str:
    return f"{AZ_ID_PREFIX.get(region or '', 'use1')}-az1"
