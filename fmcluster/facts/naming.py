"""Names of AWS resources derived from the spec (pure; tokens are filled in by the stacks)."""

from __future__ import annotations

from fmcluster.facts import regions

S3_NAME_MAX = 63
ACCOUNT_ID_LENGTH = 12
S3_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")  # S3 rejects bucket names starting so
# Buckets per cluster: each bucket is two ARNs in the inline policies of the node role (and of
# HyperPod's execution role), which IAM caps at 10,240 characters per role; about 110 characters a
# bucket, on HyperPod's execution role of about 5,100 without buckets. 32 keeps every control plane
# under the cap with headroom (tests/facts/test_limits.py measures each role at 32).
MAX_BUCKETS = 32

# Tags. fmcluster puts its own on every resource (the cluster, and on a node group's instances
# and volumes the group) and a Name on most; the spec's `tags` come on top. EC2 and most services
# take at most 50 user tags on a resource (tags with the aws: prefix, AWS's own, do not count);
# keys 1 to 128 characters, values 0 to 256, of Unicode letters, digits, spaces and _ . : / = + - @
# ("Tag your Amazon EC2 resources": tag restrictions). The spec's tags go on every resource, so the
# strictest type decides: CloudWatch alarms and dashboards take values of 1 character at least.
CLUSTER_TAG = "fmcluster:cluster"
NODE_GROUP_TAG = "fmcluster:node-group"
TEAM_TAG = "fmcluster:team"  # a node group's instances on a cluster with teams: its team, or "shared"
SHARED = "shared"  # the team tag's value on the node groups the teams share
NAME_TAG = "Name"
OWN_TAGS = (NAME_TAG, CLUSTER_TAG, NODE_GROUP_TAG, TEAM_TAG)
MAX_TAGS = 50
TAG_KEY_MAX, TAG_VALUE_MAX = 128, 256
RESERVED_TAG_PREFIXES = ("aws:", "fmcluster:")  # AWS's own, and fmcluster's (any case)
TAG_PUNCTUATION = "_.:/=+-@"


def tag_text_problem(text: str) -> str | None:
    """Why `text` cannot be a tag key or value, or None: each character must be a letter, a
    digit, a space or one of _ . : / = + - @."""
    import unicodedata

    for char in text:
        category = unicodedata.category(char)
        if char not in TAG_PUNCTUATION and category[0] not in "LN" and category != "Zs":  # Zs: spaces
            return f"{ascii(char)} is not allowed"
    return None


def bucket_name(cluster: str, bucket: str, region: str, account: str) -> str:
    """`{cluster}-{bucket}-{account}-{region code}`: unique per account and region, so two
    clusters (or one cluster in two regions) never clash. `account` may be a CDK token."""
    return f"{cluster}-{bucket}-{account}-{regions.az_id_prefix(region)}"


def bucket_name_length(cluster: str, bucket: str, region: str) -> int:
    return len(bucket_name(cluster, bucket, region, "0" * ACCOUNT_ID_LENGTH))


def hold_parameter(cluster: str, node_group: str) -> str:
    """The SSM parameter whose existence holds a Capacity Block node group's scaling (an operator
    upgrading an EKS managed node group on a Capacity Block keeps it at 0: README)."""
    return f"/fmcluster/{cluster}/node-groups/{node_group}/hold"
