"""Private, encrypted, retained S3 buckets and the customer-managed KMS key that may encrypt them.

Plain props only: these constructs know nothing of the cluster spec.

The bucket and its policy are plain `cdk.CfnResource`s (constructs_lib/cfn.py) at the paths an
`s3.Bucket` gives them (ID/Resource, ID/Policy/Resource): the same logical IDs and template as
the typed construct, without importing `aws_cdk.aws_s3` (and its `aws_events`) in every
synthesis. cdk-nag's S3 rules test for the typed `CfnBucket` and no longer see these buckets:
tests/test_security.py checks their encryption, public access block and TLS-only policy on the
templates instead.
"""

from __future__ import annotations

from typing import Mapping, Optional

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from constructs import Construct

from constructs_lib import cfn

# Interrupted multipart uploads (multi-GB checkpoints and shards) are billed until aborted.
ABORT_INCOMPLETE_UPLOADS_AFTER_DAYS = 7
MINIMUM_TLS_VERSION = 1.2
BLOCK_ALL_PUBLIC_ACCESS = {"BlockPublicAcls": True, "BlockPublicPolicy": True,
                           "IgnorePublicAcls": True, "RestrictPublicBuckets": True}


def _encryption(encryption_key: Optional[kms.IKey]) -> dict:
    """SSE-S3, or SSE-KMS with `encryption_key` and an S3 Bucket Key."""
    if encryption_key is None:
        rule = {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
    else:
        rule = {"BucketKeyEnabled": True,
                "ServerSideEncryptionByDefault": {"KMSMasterKeyID": encryption_key.key_arn,
                                                  "SSEAlgorithm": "aws:kms"}}
    return {"ServerSideEncryptionConfiguration": [rule]}


def _deny(condition: dict, resources: list[str]) -> dict:
    return {"Action": "s3:*", "Condition": condition, "Effect": "Deny", "Principal": {"AWS": "*"},
            "Resource": resources}


class SecureBucket(Construct):
    """An S3 bucket that is never public and never silently lost.

    Encrypted with S3-managed keys, or with `encryption_key` (SSE-KMS, with an S3 Bucket Key so
    that reading millions of objects does not mean millions of KMS requests); all public access
    blocked; a bucket policy that denies any request not made over TLS 1.2 or later; ACLs off
    (bucket owner enforced); versioning as asked; retained when its stack is deleted or the
    bucket is replaced, and never emptied by CDK. `tags`: the cluster's tags (`cdk.Tags.of`
    does not reach a plain resource).

    No server access logs: FSx imports and exports and training jobs make millions of requests,
    each would be a best-effort log record in another bucket; request auditing belongs to
    CloudTrail S3 data events, set up account- or organization-wide.

    `bucket_name` (a `Ref` of the bucket) and `bucket_arn` as an `s3.Bucket` gives them.
    """

    def __init__(self, scope: Construct, construct_id: str, *, bucket_name: str, versioned: bool = False,
                 encryption_key: Optional[kms.IKey] = None, tags: Optional[Mapping[str, str]] = None) -> None:
        super().__init__(scope, construct_id)
        self.resource = cfn.resource(self, "Resource", "AWS::S3::Bucket", {
            "BucketEncryption": _encryption(encryption_key),
            "BucketName": bucket_name,
            "LifecycleConfiguration": {"Rules": [{
                "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": ABORT_INCOMPLETE_UPLOADS_AFTER_DAYS},
                "Id": "abort-incomplete-multipart-uploads", "Status": "Enabled"}]},
            "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
            "PublicAccessBlockConfiguration": BLOCK_ALL_PUBLIC_ACCESS,
            "Tags": cfn.tags(tags or {}),
            "VersioningConfiguration": {"Status": "Enabled"} if versioned else None,
        }, retain=True)
        self.bucket_name = self.resource.ref
        self.bucket_arn = cfn.attribute(self.resource, "Arn")
        everything = [self.bucket_arn, f"{self.bucket_arn}/*"]
        self.policy = cfn.l2_resource(self, "Policy", "AWS::S3::BucketPolicy", {
            "Bucket": self.bucket_name,
            "PolicyDocument": {"Statement": [
                _deny({"Bool": {"aws:SecureTransport": "false"}}, everything),
                _deny({"NumericLessThan": {"s3:TlsVersion": MINIMUM_TLS_VERSION}}, everything),
            ], "Version": "2012-10-17"},
        })


class RetainedKey(kms.Key):
    """A customer-managed symmetric KMS key with yearly automatic rotation, retained when its
    stack is deleted (data it encrypted outlives the stack). The key policy is CDK's default:
    the account administers the key and IAM policies grant its use."""

    def __init__(self, scope: Construct, construct_id: str, *, alias: str, description: str) -> None:
        super().__init__(scope, construct_id, alias=alias, description=description,
                         enable_key_rotation=True, removal_policy=cdk.RemovalPolicy.RETAIN)
