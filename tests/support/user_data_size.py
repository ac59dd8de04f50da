"""The size of a node's user data once deployed, with every value CloudFormation fills in at the
longest it can be (issue 24: real headroom under EC2's 16 KiB).

EC2 takes at most 16 KiB of user data (before base64), and AWS PCS merges its own part into the
node group's, so fmcluster keeps its own at or below USER_DATA_BUDGET. The values that arrive only
at deploy time are CDK tokens in the rendered script (another stack's outputs); they are measured
at the longest any region and id can have, from botocore's own data (endpoints and the FSx and
Amazon Managed Service for Prometheus service models), never from the example at hand:

- the region and its DNS suffix: the longest `REGION.SUFFIX` of any partition;
- the FSx for Lustre DNS name, `FILE-SYSTEM-ID.fsx.REGION.SUFFIX`, with the longest file-system
  id the FSx model allows, and its Lustre mount name (the model's LustreFileSystemMountName);
- the Prometheus workspace's endpoint, `https://aps-workspaces.REGION.SUFFIX/workspaces/ID/`, with
  the longest workspace id the AMP model allows.

`deployed_size` reads a launch template's `UserData` as synthesized; a token it does not know
fails the measurement, so a new deploy-time value must be given its longest length here.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import botocore.loaders

USER_DATA_BUDGET = 14 * 1024  # of EC2's 16 KiB: the rest is AWS PCS's own part
EC2_USER_DATA_MAX = 16 * 1024


def _shape_max(service: str, shape: str) -> int:
    model = botocore.loaders.create_loader().load_service_model(service, "service-2")
    return int(model["shapes"][shape]["max"])


def _regions() -> list[tuple[str, str]]:
    """(region, DNS suffix) of every region of every partition botocore knows."""
    partitions = botocore.loaders.create_loader().load_data("endpoints")["partitions"]
    return [(region, p["dnsSuffix"]) for p in partitions for region in p["regions"]]


@functools.cache
def longest_region() -> str:
    return max((region for region, _ in _regions()), key=len)


@functools.cache
def longest_region_host() -> str:
    """The longest REGION.DNS-SUFFIX of any partition (all letters 'x' but the dots)."""
    return re.sub(r"[^.]", "x", max((f"{region}.{suffix}" for region, suffix in _regions()), key=len))


@functools.cache
def longest_values() -> dict[str, str]:
    """Deploy-time value kind -> its longest text."""
    host = longest_region_host()
    file_system = "fs-" + "0" * (_shape_max("fsx", "FileSystemId") - len("fs-"))
    workspace = "w" * _shape_max("amp", "WorkspaceId")
    return {
        "DNSName": f"{file_system}.fsx.{host}",
        "LustreMountName": "m" * _shape_max("fsx", "LustreFileSystemMountName"),
        "PrometheusEndpoint": f"https://aps-workspaces.{host}/workspaces/{workspace}/",
    }


def token_kind(token: dict[str, Any]) -> str:
    """Which deploy-time value a token of the user data is: the attribute an output of another
    stack (Fn::GetStackOutput, or an import) carries, or the attribute read (Fn::GetAtt)."""
    (function, argument), = token.items()
    if function == "Fn::GetStackOutput":
        name = argument["OutputName"]
    elif function == "Fn::GetAtt":
        name = argument[1] if isinstance(argument, list) else argument.split(".", 1)[1]
    elif function == "Fn::ImportValue":
        name = json.dumps(argument)
    else:
        raise ValueError(f"a token the measurement does not know: {token}")
    for kind in longest_values():
        if kind in name:
            return kind
    raise ValueError(f"a token the measurement does not know: {token}")


def resolved(value: Any) -> str:
    """A synthesized string expression with every token at its longest."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(resolved(part) for part in parts)
    if isinstance(value, dict):
        return longest_values()[token_kind(value)]
    raise ValueError(f"not a string expression: {value!r}")


def deployed_size(user_data: Any) -> int:
    """The bytes of a launch template's UserData (`{"Fn::Base64": ...}`) before base64, deployed
    with every token at its longest."""
    return len(resolved(user_data["Fn::Base64"]).encode("utf-8"))


def with_longest_values(text: str, placeholders: dict[str, str]) -> str:
    """A rendered script whose deploy-time values are `placeholders` (kind -> a CDK-token-like
    string standing in for it), with each at its longest."""
    for kind, placeholder in placeholders.items():
        text = text.replace(placeholder, longest_values()[kind])
    return text

# AWS PCS node groups run their program as node lifecycle scripts (fmcluster.node.pcs): their
# user data is only the slurmd guard, the same for every group, and must stay under a kilobyte.
PCS_USER_DATA_BUDGET = 1024
