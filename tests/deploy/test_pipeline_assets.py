"""The pipeline's Assets stage, run: examples/pipeline/pipeline.yaml synthesized, the asset project's
commands taken from its synthesized buildspec and run with the pinned CDK CLI (node_modules/.bin/cdk,
the version the buildspec installs) against moto's server, then every file asset looked for in the
bucket and under the key the stage templates name. When the cloud assembly's schema and the tool
disagree ("Cloud assembly schema version mismatch"), this fails before a user's pipeline does.

moto's server is the endpoint of the CLI's AWS SDK (AWS_ENDPOINT_URL). Its fake credentials are of
moto's default account, not the clusters' (111122223333): the CLI reaches each stage's bootstrap
resources only by assuming that account's roles, as the asset project does from another account
(moto does not check the roles' policies: tests/deploy/test_pipeline.py holds those)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fmcluster.spec import pipeline
from tests.support import moto_aws
from tests.support.paths import ROOT

EXAMPLE = "examples/pipeline/pipeline.yaml"
ACCOUNT = "111122223333"  # the example pipeline's, and its clusters'
QUALIFIER = "hnb659fds"  # the CDK bootstrap's default
BIN = ROOT / "node_modules" / ".bin"
# an asset's object key: the hash of its source, and the extension of its packaging
KEY = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}\.[a-z]+")
BUCKET = re.compile(rf"cdk-{QUALIFIER}-assets-\d{{12}}-[a-z]+-[a-z]+-\d")


@pytest.fixture(scope="module")
def outdir(tmp_path_factory) -> Path:
    """The pipeline app's assembly (the Assets stage's input: the synth output)."""
    from fmcluster.deploy.synth import app_context, cdk_json
    from fmcluster_cdk.stacks.pipeline import pipeline_stack
    from fmcluster_cdk.synthesis import new_app

    loaded = pipeline.load(ROOT / EXAMPLE, root=ROOT)
    assert loaded.ok
    out = tmp_path_factory.mktemp("pipeline-assets.out")
    app = new_app(str(out), app_context(cdk_json(ROOT)))
    pipeline_stack(app, loaded.pipeline)
    app.synth()
    return out


def asset_buildspec(outdir: Path) -> dict[str, Any]:
    """The buildspec of the Assets stage's one action's project, as synthesized."""
    template = json.loads((outdir / "gpu-clusters-pipeline.template.json").read_text())
    (code_pipeline,) = [r["Properties"] for r in template["Resources"].values()
                        if r["Type"] == "AWS::CodePipeline::Pipeline"]
    (assets,) = [s for s in code_pipeline["Stages"] if s["Name"] == "Assets"]
    (action,) = assets["Actions"]
    project = template["Resources"][action["Configuration"]["ProjectName"]["Ref"]]["Properties"]
    return json.loads(project["Source"]["BuildSpec"])


@pytest.fixture
def moto_server() -> Iterator[str]:
    """moto's server on 127.0.0.1 (a free port), its URL."""
    with moto_aws.moto_server() as url:
        yield url


def account_session(url: str, account: str) -> Any:
    """A boto3 session of `account` in moto: a role of it, assumed (moto keeps each account's
    resources apart, by the account of the credentials)."""
    import boto3

    sts = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing").client(
        "sts", region_name="us-east-1", endpoint_url=url)
    found = sts.assume_role(RoleArn=f"arn:aws:iam::{account}:role/bootstrap", RoleSessionName="test")["Credentials"]
    return boto3.session.Session(aws_access_key_id=found["AccessKeyId"], aws_secret_access_key=found["SecretAccessKey"],
                                 aws_session_token=found["SessionToken"])


def bootstrap(url: str, regions: set[str]) -> Any:
    """What `cdk bootstrap` leaves in each region that the CLI reads or writes: the assets bucket and
    the bootstrap version parameter. A session of the account."""
    session = account_session(url, ACCOUNT)
    for region in sorted(regions):
        location = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
        session.client("s3", region_name=region, endpoint_url=url).create_bucket(Bucket=bucket(region), **location)
        session.client("ssm", region_name=region, endpoint_url=url).put_parameter(
            Name=f"/cdk-bootstrap/{QUALIFIER}/version", Value="30", Type="String")
    return session


def bucket(region: str) -> str:
    return f"cdk-{QUALIFIER}-assets-{ACCOUNT}-{region}"


def stage_assemblies(outdir: Path) -> list[Path]:
    manifest = json.loads((outdir / "manifest.json").read_text())
    return [outdir / a["properties"]["directoryName"] for a in manifest["artifacts"].values()
            if a["type"] == "cdk:cloud-assembly"]


def file_assets(assembly: Path) -> list[tuple[Path, str, dict[str, Any]]]:
    """(source path, packaging, destination) of every file asset of the stage's stacks."""
    found = []
    for manifest in sorted(assembly.glob("*.assets.json")):
        for asset in json.loads(manifest.read_text()).get("files", {}).values():
            for destination in asset["destinations"].values():
                found.append((assembly / asset["source"]["path"], asset["source"]["packaging"], destination))
    return found


def named_objects(assembly: Path) -> set[tuple[str, str]]:
    """(bucket, key) of every asset a template of the stage names (nested stacks' templates, node
    scripts, Lambda code): each template names one bucket, its region's, and asset keys in it."""
    found = set()
    for template in sorted(assembly.glob("*.template.json")):
        text = template.read_text()
        keys = set(KEY.findall(text))
        if keys:
            (name,) = set(BUCKET.findall(text))
            found |= {(name, key) for key in keys}
    return found


def run_build_commands(spec: dict[str, Any], cwd: Path, url: str, home: Path) -> None:
    """Each build command of the buildspec, in a shell of its own in the input's root, as CodeBuild
    runs them: with its variables, the pinned CLI on PATH, moto as every service's endpoint."""
    env = {"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "HOME": str(home), "AWS_ENDPOINT_URL": url,
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true", **spec.get("env", {}).get("variables", {})}
    for command in spec["phases"]["build"]["commands"]:
        result = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                                timeout=300)
        assert result.returncode == 0, f"{command}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"


def test_the_asset_stage_publishes_every_file_asset_with_the_pinned_cdk_cli(outdir, moto_server, tmp_path):
    spec = asset_buildspec(outdir)
    pinned = json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    assert spec["phases"]["install"]["commands"] == [f"npm install -g aws-cdk@{pinned}"]
    # what runs here instead of that install: the same release
    assert json.loads((ROOT / "node_modules/aws-cdk/package.json").read_text())["version"] == pinned
    assemblies = stage_assemblies(outdir)
    assert len(assemblies) == 3  # the example's clusters
    assets = [a for assembly in assemblies for a in file_assets(assembly)]
    regions = {destination["region"] for _, _, destination in assets}
    assert regions == {"us-east-1", "us-east-2", "us-west-2"}
    session = bootstrap(moto_server, regions)

    run_build_commands(spec, outdir, moto_server, tmp_path)  # each command bounded by its timeout

    published = {}
    for region in regions:
        s3 = session.client("s3", region_name=region, endpoint_url=moto_server)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket(region)):
            for item in page.get("Contents", []):
                published[(bucket(region), item["Key"])] = s3.get_object(Bucket=bucket(region), Key=item["Key"])[
                    "Body"].read()
    named = {n for assembly in assemblies for n in named_objects(assembly)}
    assert {key.rsplit(".", 1)[1] for _, key in named} == {"json", "sh", "zip"}  # nested stacks, scripts, Lambda
    assert named - set(published) == set(), "named by a template, not published"
    for source, packaging, destination in assets:
        body = published.get((destination["bucketName"], destination["objectKey"]))
        assert body is not None, f"{source.name}: not published"
        if packaging == "file":
            assert body == source.read_bytes(), source.name
        else:  # zip_directory: the directory's files
            assert packaging == "zip"
            names = {p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file()}
            assert set(zipfile.ZipFile(io.BytesIO(body)).namelist()) >= names, source.name
