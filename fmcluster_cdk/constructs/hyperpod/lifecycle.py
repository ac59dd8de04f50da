"""A folder of SageMaker HyperPod lifecycle scripts, published as CDK file assets.

Sources and details: docs/research-notes.md, "fmcluster_cdk/constructs/hyperpod/lifecycle.py"."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Protocol

import aws_cdk as cdk
from constructs import Construct

from fmcluster_cdk.errors import ConstructError

PREFIX_ROOT = "fmcluster-lifecycle"


class ScriptBundle(Protocol):
    """The files of one lifecycle folder (`fmcluster.node.hyperpod.Bundle` is one).

    Members: `files` (relative path -> the file's text) and `digest` (a content hash of the
    names and texts, hex: it names the folder in S3).
    """

    @property
    def files(self) -> Mapping[str, str]: ...

    @property
    def digest(self) -> str: ...


class LifecycleScripts(Construct):
    """One lifecycle folder, published by the CDK CLI as file assets under one S3 prefix.

    Props:
        bundle: the folder's files (at least one) and their digest. HyperPod runs one of them by
            name (`LifeCycleConfig.OnInitComplete` or `OnCreate`: 1 to 128 characters).
            @default required
        cluster: the cluster's name: the folder is under ``fmcluster-lifecycle/<cluster>/``
            (letters, digits and '-'; S3 keys are at most 1,024 bytes).
            @default required

    Attributes:
        bucket_name: the stack synthesizer's asset bucket (a token).
        prefix: the folder's key prefix, ``fmcluster-lifecycle/<cluster>/<digest>/``.
        scope_prefix: the prefix of every folder of the cluster, ``fmcluster-lifecycle/<cluster>/``.
        s3_uri: ``s3://<bucket>/<prefix>``, the instance groups' `LifeCycleConfig.SourceS3Uri`
            (CloudFormation: at most 1,024 characters).
        object_keys: file name -> the S3 key it is published under.
    """

    def __init__(self, scope: Construct, construct_id: str, *, bundle: ScriptBundle, cluster: str) -> None:
        super().__init__(scope, construct_id)
        if not bundle.files:
            raise ConstructError(self, "a lifecycle bundle needs at least one file")
        digest = bundle.digest
        self.scope_prefix = f"{PREFIX_ROOT}/{cluster}/"
        self.prefix = f"{self.scope_prefix}{digest}/"
        stage = cdk.Stage.of(self)
        assert stage is not None  # every construct of an app is in a Stage (the App is one)
        staged = Path(stage.asset_outdir) / f"asset.{PREFIX_ROOT}.{digest}"
        synthesizer = cdk.Stack.of(self).synthesizer
        outdir = stage.outdir  # a round trip to the jsii runtime: once, not per file
        self.object_keys: dict[str, str] = {}
        location = None
        for name, text in sorted(bundle.files.items()):
            path = staged / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
            stem, _ = os.path.splitext(name)
            location = synthesizer.add_file_asset(
                file_name=os.path.relpath(path, outdir), packaging=cdk.FileAssetPackaging.FILE,
                source_hash=f"{self.prefix}{stem}", display_name=f"lifecycle {name} ({digest[:12]})")
            self.object_keys[name] = location.object_key
        assert location is not None  # the bundle has a file (checked above)
        self.bucket_name: str = location.bucket_name
        self.s3_uri = f"s3://{self.bucket_name}/{self.prefix}"

    def object_arns(self, partition: str = cdk.Aws.PARTITION) -> str:
        """ARN pattern of the objects of every folder of the cluster (for s3:GetObject)."""
        return f"arn:{partition}:s3:::{self.bucket_name}/{self.scope_prefix}*"

    def bucket_arn(self, partition: str = cdk.Aws.PARTITION) -> str:
        return f"arn:{partition}:s3:::{self.bucket_name}"

