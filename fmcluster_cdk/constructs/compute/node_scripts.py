"""Node scripts published as CDK file assets, readable by the nodes' role and nothing else.

AWS PCS downloads a node lifecycle script onto the node before it runs it; the node's role is
given s3:GetObject on exactly the script objects (each one's ARN), not on the whole asset bucket
(which holds every stack's assets).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Mapping

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster_cdk.errors import ConstructError

PREFIX = "fmcluster-node-script"


class NodeScripts(Construct):
    """Scripts published as S3 file assets (the CDK CLI uploads them at deploy), each under the
    SHA-256 of its text: the same text gives the same object and the same template.

    The file staged in the cloud assembly (``asset.fmcluster-node-script.<sha256>.sh``) is written
    only where it is missing or differs, so a synthesis is byte-identical to the one before it.

    Props:
        scripts: file name (letters, digits, '.', '_', '-'; the name's extension is the object's)
            -> the script's text (UTF-8). At least one.
            @default required
        role: the role that reads them (s3:GetObject on each object, in the policy ``Read`` of
            this construct, in this construct's stack).
            @default required

    Attributes:
        locations: file name -> ``s3://<bucket>/<key>`` (tokens: the stack synthesizer's asset bucket).
        checksums: file name -> the SHA-256 of the text, hex.
        object_arns: file name -> the object's ARN.
        policy: the `iam.Policy` attached to `role`; resources that need the scripts depend on it.
    """

    def __init__(self, scope: Construct, construct_id: str, *, scripts: Mapping[str, str], role: iam.IRole) -> None:
        super().__init__(scope, construct_id)
        if not scripts:
            raise ConstructError(self, "no node script to publish")
        stage = cdk.Stage.of(self)
        assert stage is not None  # every construct of an app is in a Stage (the App is one)
        synthesizer = cdk.Stack.of(self).synthesizer
        # each read of a construct's property is a round trip to the jsii runtime: once, not per script
        asset_outdir, outdir, partition = Path(stage.asset_outdir), stage.outdir, cdk.Aws.PARTITION
        self.locations: dict[str, str] = {}
        self.checksums: dict[str, str] = {}
        self.object_arns: dict[str, str] = {}
        for name, text in sorted(scripts.items()):
            if not name or not all(c.isalnum() or c in "._-" for c in name):
                raise ConstructError(self, f"node script name {name!r}: letters, digits, '.', '_' and '-' only")
            data = text.encode("utf-8")
            digest = hashlib.sha256(data).hexdigest()
            _, extension = os.path.splitext(name)
            path = asset_outdir / f"asset.{PREFIX}.{digest}{extension}"
            if not path.exists() or path.read_bytes() != data:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            location = synthesizer.add_file_asset(
                file_name=os.path.relpath(path, outdir), packaging=cdk.FileAssetPackaging.FILE,
                source_hash=digest, display_name=f"node script {name} ({digest[:12]})")
            self.locations[name] = f"s3://{location.bucket_name}/{location.object_key}"
            self.checksums[name] = digest
            self.object_arns[name] = f"arn:{partition}:s3:::{location.bucket_name}/{location.object_key}"
        self.policy = iam.Policy(self, "Read", roles=[role], statements=[iam.PolicyStatement(
            sid="NodeScriptsRead", actions=["s3:GetObject"], resources=sorted(self.object_arns.values()))])
