"""The pipeline's Assets stage: the cluster stages' file assets (nested stack templates, node scripts,
Lambda code) published by the CDK CLI that package.json pins (`cdk publish-assets` of each stage's
assembly), not by cdk-assets, in the one file asset project of CDK Pipelines.

Sources and details: docs/research-notes.md, "fmcluster_cdk/stacks/pipeline_assets.py"."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_iam as iam
from aws_cdk import pipelines

from fmcluster_cdk.errors import ConstructError

# `cdk publish-assets` is unstable in the pinned CLI: it runs only when asked for by name
UNSTABLE = "publish-assets"


def install_commands(cli_version: str) -> list[str]:
    """The install phase: the CDK CLI of package.json (`Pins.cdk_cli_version`), never `latest`."""
    return [f"npm install -g aws-cdk@{cli_version}"]


def publish_commands(assemblies: Sequence[str]) -> list[str]:
    """The build phase: every asset of each stage assembly's stacks (their nested stacks' templates
    are assets of the parent's manifest), published where its template looks for it."""
    return [f"cdk publish-assets --unstable={UNSTABLE} --no-notices --app {assembly} --all"
            for assembly in assemblies]


def publish_with_cdk_cli(pipeline: pipelines.CodePipeline, stages: Sequence[cdk.Stage], *, cli_version: str,
                         runtimes: Mapping[str, str], env: Mapping[str, str]) -> None:
    """After `pipeline.build_pipeline()` (with publish_assets_in_parallel=False): the file asset
    project's buildspec made the CDK CLI's, and its role allowed the stages' deploy roles."""
    assets = pipeline.node.try_find_child("Assets")
    if assets is None:  # no stage has a file asset
        return
    if assets.node.try_find_child("DockerAsset") is not None:
        raise ConstructError(pipeline, "a stage has a container image asset: the Assets stage publishes files only "
                                       "(fmcluster_cdk/stacks/pipeline_assets.py)")
    project = assets.node.try_find_child("FileAsset")
    if not isinstance(project, codebuild.Project):
        raise ConstructError(pipeline, "CDK Pipelines made no single FileAsset project: is publish_assets_in_parallel "
                                       "False?")
    cfn = project.node.default_child
    assert isinstance(cfn, codebuild.CfnProject)
    spec = {
        "version": "0.2",
        "env": {"variables": dict(env)},
        "phases": {"install": {"runtime-versions": dict(runtimes), "commands": install_commands(cli_version)},
                   "build": {"commands": publish_commands([stage.artifact_id for stage in stages])}}}
    cfn.source = codebuild.CfnProject.SourceProperty(type="CODEPIPELINE", build_spec=json.dumps(spec, indent=2))
    deploy_roles = sorted({role for stage in stages for role in _deploy_roles(stage)})
    if deploy_roles:
        project.add_to_role_policy(iam.PolicyStatement(actions=["sts:AssumeRole"],
                                                       resources=[cdk.Fn.sub(arn) for arn in deploy_roles]))


def _deploy_roles(stage: cdk.Stage) -> list[str]:
    """The deploy role ARNs (with ${AWS::Partition}) of the stage's top-level stacks."""
    found = []
    for child in stage.node.children:
        if isinstance(child, cdk.Stack) and isinstance(child.synthesizer, cdk.DefaultStackSynthesizer):
            found.append(child.synthesizer.deploy_role_arn)
    return found
