"""Private, encrypted, retained S3 buckets and the customer-managed KMS key that may encrypt them.

Plain props only: these constructs know nothing of the cluster spec.
"""

from __future__ import annotations

from typing import Any, Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

# Interrupted multipart uploads (multi-GB checkpoints and shards) are billed until aborted.
ABORT_INCOMPLETE_UPLOADS_AFTER = cdk.Duration.days(7)
MINIMUM_TLS_VERSION = 1.2


class SecureBucket(s3.Bucket):
    """An S3 bucket that is never public and never silently lost.

    Encrypted with S3-managed keys, or with `encryption_key` (SSE-KMS, with an S3 Bucket Key so
    that reading millions of objects does not mean millions of KMS requests); all public access
    blocked; a bucket policy that denies any request not made over TLS 1.2 or later; ACLs off
    (bucket owner enforced); versioning as asked; retained when its stack is deleted or the
    bucket is replaced, and never emptied by CDK. Incomplete multipart uploads are aborted after
    7 days (`ABORT_INCOMPLETE_UPLOADS_AFTER`).

    Props:
        bucket_name: the bucket's name (`BucketName`): at most 63 lowercase letters, digits, dots
            and hyphens, starting and ending with a letter or digit, under S3's bucket naming rules.
            @default required
        versioned: keep every version of every object (`VersioningConfiguration: Enabled`).
            @default False
        encryption_key: the KMS key of SSE-KMS, with an S3 Bucket Key.
            @default None: SSE-S3 (S3-managed keys)

    Attributes: those of `s3.Bucket` (`bucket_name`, `bucket_arn`, ...).
    """

    def __init__(self, scope: Construct, construct_id: str, *, bucket_name: str, versioned: bool = False,
                 encryption_key: kms.IKey | None = None) -> None:
        encryption: dict[str, Any]
        if encryption_key is None:
            encryption = {"encryption": s3.BucketEncryption.S3_MANAGED}
        else:
            encryption = {"encryption": s3.BucketEncryption.KMS, "encryption_key": encryption_key,
                          "bucket_key_enabled": True}
        super().__init__(
            scope, construct_id,
            bucket_name=bucket_name,
            versioned=versioned,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            minimum_tls_version=MINIMUM_TLS_VERSION,
            removal_policy=cdk.RemovalPolicy.RETAIN,
            auto_delete_objects=False,
            lifecycle_rules=[s3.LifecycleRule(id="abort-incomplete-multipart-uploads",
                                              abort_incomplete_multipart_upload_after=ABORT_INCOMPLETE_UPLOADS_AFTER)],
            **encryption,
        )


class RetainedKey(kms.Key):
    """A customer-managed symmetric KMS key with yearly automatic rotation, retained when its
    stack is deleted (data it encrypted outlives the stack). The key policy is CDK's default:
    the account administers the key and IAM policies grant its use.

    Props:
        alias: the key's alias (`AliasName`: ``alias/`` followed by letters, digits and ``:/_-``;
            at most 256 characters in all).
            @default required
        description: the key's description (at most 8,192 characters).
            @default required
        volume_users: ARNs of service-linked roles that launch instances whose EBS volumes the key
            encrypts (AWS PCS, EC2 Image Builder): the key policy lets each use the key and create
            grants for AWS resources, as their predefined permissions cover AWS managed keys only.
            The roles must exist when the policy is set.
            @default none

    Attributes: those of `kms.Key` (`key_arn`, `key_id`, ...).
    """

    def __init__(self, scope: Construct, construct_id: str, *, alias: str, description: str,
                 volume_users: Sequence[str] = ()) -> None:
        super().__init__(scope, construct_id, alias=alias, description=description,
                         enable_key_rotation=True, removal_policy=cdk.RemovalPolicy.RETAIN)
        if volume_users:
            principals = [iam.ArnPrincipal(arn) for arn in volume_users]
            self.add_to_resource_policy(iam.PolicyStatement(
                sid="VolumesOfServiceLaunchedInstances", principals=principals, resources=["*"],
                # the documented policy's ReEncrypt* and GenerateDataKey*, named: what EBS calls
                actions=["kms:Encrypt", "kms:Decrypt", "kms:ReEncryptFrom", "kms:ReEncryptTo", "kms:GenerateDataKey",
                         "kms:GenerateDataKeyWithoutPlaintext", "kms:DescribeKey"]))
            self.add_to_resource_policy(iam.PolicyStatement(
                sid="GrantsForServiceLaunchedInstances", principals=principals, resources=["*"],
                actions=["kms:CreateGrant"], conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}}))
