"""Names of AWS resources derived from the spec (pure; tokens are filled in by the stacks)."""

from __future__ import annotations

from fmcluster import regions

S3_NAME_MAX = 63
ACCOUNT_ID_LENGTH = 12
S3_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")  # S3 rejects bucket names starting so


def bucket_name(cluster: str, bucket: str, region: str, account: str) -> str:
    """`{cluster}-{bucket}-{account}-{region code}`: unique per account and region, so two
    clusters (or one cluster in two regions) never clash. `account` may be a CDK token."""
    return f"{cluster}-{bucket}-{account}-{regions.az_id_prefix(region)}"


def bucket_name_length(cluster: str, bucket: str, region: str) -> int:
    return len(bucket_name(cluster, bucket, region, "0" * ACCOUNT_ID_LENGTH))
