"""NAME-pipeline: the GitOps pipeline (CDK Pipelines) that deploys the clusters of a pipeline file.

Sources and details: docs/research-notes.md, "fmcluster_cdk/stacks/pipeline.py"."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_iam as iam
from aws_cdk import pipelines
from constructs import Construct

from fmcluster.facts import nodejs
from fmcluster.model.cluster import CLUSTER, STORAGE, resolve
from fmcluster.spec.models import ClusterSpec
from fmcluster.spec.pipeline import Deployment, Pipeline, deployed_parameter
from fmcluster_cdk.errors import ConstructError
from fmcluster_cdk.stacks.app import build
from fmcluster_cdk.stacks.pipeline_assets import publish_with_cdk_cli

# The step programs (fmcluster/deploy/steps/*.sh), run from the installed package: a project of
# one's own has no copy of them (`fmcluster step`, fmcluster.deploy.steps).
STEP = "fmcluster step"
CHANGE_SET = "PipelineChange"  # the change set CDK Pipelines' Prepare action creates (and Deploy executes)
# What the Makefile exports for quiet CDK runs.
QUIET = {"CDK_DISABLE_VERSION_CHECK": "true", "CDK_DISABLE_CLI_TELEMETRY": "true"}
# aws/codebuild/standard:7.0 has both (its runtimes: Node.js 18, 20, 22 and 24). The Makefile needs
# Python 3.11+, and Node.js only to run npm: it runs the Node LTS pinned in package.json itself;
# the image's Node is of the same major version (.nvmrc), for the CDK CLI steps of CDK Pipelines.
PYTHON_RUNTIME = "3.12"
# A clone of fmcluster pins its tools in these files (`Pins`)...
PIN_FILES = (".nvmrc", "package.json")
# ... and a project of one's own (`fmcluster init`) pins fmcluster here; the CDK CLI and Node.js
# are then the installed fmcluster's own (fmcluster.facts.nodejs).
REQUIREMENTS = "requirements.txt"


@dataclass(frozen=True)
class Pins:
    """What the pipeline's steps install and run, as the repository it deploys pins it: the
    pipeline is synthesized at that repository's root (`cdk synth -c pipeline=FILE`, where the
    pipeline file's spec paths are read from too). Either a clone of fmcluster (its Makefile,
    package.json and .nvmrc: `make install` for the synthesis) or a project made by `fmcluster
    init` (requirements.txt: the fmcluster it runs, pinned; the CDK CLI that fmcluster pins).

    node_major: the Node.js major version (.nvmrc; for a project, the newest line jsii and the CDK
        support): the CodeBuild image's runtime.
    cdk_cli_version: the CDK CLI (package.json's devDependencies; for a project, the one this
        fmcluster pins): the synthesis, the self-mutation step and the asset publishing
        (fmcluster_cdk/stacks/pipeline_assets.py) run it.
    clone: a clone of fmcluster, not a project of one's own.
    """

    node_major: str
    cdk_cli_version: str
    clone: bool = True

    @classmethod
    def of(cls, root: Path) -> Pins | None:
        """The pins of the repository at `root`; None when it is neither kind."""
        if all((root / name).is_file() for name in PIN_FILES):
            package = json.loads((root / "package.json").read_text())
            return cls((root / ".nvmrc").read_text().strip(), str(package["devDependencies"]["aws-cdk"]))
        if (root / REQUIREMENTS).is_file():
            return cls(str(max(nodejs.SUPPORTED_MAJORS)), nodejs.CDK_CLI_VERSION, clone=False)
        return None

    @property
    def runtimes(self) -> dict[str, str]:
        """The CodeBuild install phase's `runtime-versions`."""
        return {"python": PYTHON_RUNTIME, "nodejs": self.node_major}

    @property
    def synth_install(self) -> list[str]:
        """What the synthesis installs: a clone's development environment (its pinned Node.js and
        CDK CLI), or the project's fmcluster and the CDK CLI it pins."""
        if self.clone:
            return ["make install"]
        return [f"python -m pip install -r {REQUIREMENTS}", f"npm install -g aws-cdk@{self.cdk_cli_version}"]

    def synth_commands(self, pipeline_file: str) -> list[str]:
        """Every spec of the pipeline file validated, then the cloud assembly of this pipeline app
        with cdk-nag on (an unsuppressed finding fails it). Never fmcluster's own test suite: that
        is fmcluster's CI, not a deploy's."""
        fmcluster, cdk_cli = (".venv/bin/fmcluster", "npx --no -- cdk") if self.clone else ("fmcluster", "cdk")
        return [f"{fmcluster} validate --pipeline {pipeline_file}",
                f"{cdk_cli} synth -q -c nag=true -c pipeline={pipeline_file}"]

    @property
    def step_install(self) -> list[str]:
        """What Diff, Guard and Record install: fmcluster only, from the same pin (a clone's own
        package; the project's requirements.txt), in seconds; not the development environment."""
        return ["python -m pip install ." if self.clone else f"python -m pip install -r {REQUIREMENTS}"]


def storage_stack(deployment: Deployment) -> str:
    """NAME-storage, as the cluster's model names it (the stage deploys the same stacks)."""
    storage = resolve(deployment.spec).stack(STORAGE)
    assert storage is not None  # every cluster has its storage stack
    return storage.name


def _standing(deployment: Deployment) -> str:
    """The pipeline file's standing `allow_data_loss: true` (kept working), as a flag of the steps."""
    return " --allow-data-loss" if deployment.allow_data_loss else ""


def allowance(deployment: Deployment) -> str:
    """The shell words that set $allow to --allow-data-loss when this deploy may lose data: the
    commit's `Allow-Data-Loss: NAME` trailer (per merge), or the pipeline file's standing switch."""
    return f"allow=$({STEP} allowance {deployment.name}{_standing(deployment)})"


def diff_commands(deployment: Deployment, protect: bool = True) -> list[str]:
    """Diff against the spec as last deployed; when data loss is allowed for this deploy, lift the
    storage stack's policy (Record sets it again)."""
    lift = (f" && if [ -n \"$allow\" ]; then {STEP} protect-storage {storage_stack(deployment)} --lift; fi"
            if protect else "")
    return [f"{allowance(deployment)} && {STEP} diff-deployed {deployed_parameter(deployment.name)} "
            f"{deployment.path} $allow{lift}"]


def change_set_commands(deployment: Deployment, role_arn: str | None) -> list[str]:
    """Between the Prepare and Deploy actions of NAME-storage: judge the change set CDK Pipelines
    made (PipelineChange) and stop before it is executed when it would lose data."""
    role = f" --role-arn {role_arn}" if role_arn else ""
    return [f"{STEP} guard-change-set {deployment.name} {storage_stack(deployment)} {CHANGE_SET}"
            f"{_standing(deployment)} --region {deployment.spec.region}{role}"]


def record_commands(deployment: Deployment, protect: bool = True) -> list[str]:
    record = [f"{STEP} record-deployed {deployed_parameter(deployment.name)} {deployment.path}"]
    return record + ([f"{STEP} protect-storage {storage_stack(deployment)}"] if protect else [])


class ClusterStage(cdk.Stage):
    """One cluster: the stacks `fmcluster_cdk/stacks/app.py build()` makes for its spec, in a Stage."""

    def __init__(self, scope: Construct, construct_id: str, *, spec: ClusterSpec, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.stacks = build(self, spec)


class PipelineStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, *, pipeline: Pipeline, root: Path,
                 **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        found = Pins.of(root)
        if found is None:
            raise ConstructError(self, f"{root} has no {REQUIREMENTS} (fmcluster init writes it: the fmcluster the "
                                       f"pipeline installs) and no {' or '.join(PIN_FILES)} of a clone of fmcluster: "
                                       "synthesize the pipeline at the root of the repository it deploys")
        self.pins = pins = found
        config = pipeline.config
        self.source = pipelines.CodePipelineSource.connection(
            config.source.repository, config.source.branch, connection_arn=config.source.connection_arn,
            code_build_clone_output=True)  # a full clone: the diff step reads old specs from history
        synth = pipelines.ShellStep("Synth", input=self.source, env=QUIET, install_commands=pins.synth_install,
                                    commands=pins.synth_commands(pipeline.file))
        cross_account = any(self._account(d) != config.account for d in pipeline.deployments)
        self.pipeline = pipelines.CodePipeline(
            self, "Pipeline", pipeline_name=config.name, synth=synth,
            cross_account_keys=cross_account, enable_key_rotation=cross_account or None,
            cli_version=pins.cdk_cli_version,
            publish_assets_in_parallel=False,  # one file asset project: its buildspec runs the CDK CLI (below)
            code_build_defaults=pipelines.CodeBuildOptions(
                build_environment=codebuild.BuildEnvironment(build_image=codebuild.LinuxBuildImage.STANDARD_7_0),
                partial_build_spec=codebuild.BuildSpec.from_object(
                    {"phases": {"install": {"runtime-versions": pins.runtimes}}})),
            # the synthesis of every cluster of the file, with cdk-nag: give it room
            synth_code_build_defaults=pipelines.CodeBuildOptions(
                build_environment=codebuild.BuildEnvironment(compute_type=codebuild.ComputeType.LARGE)))
        self.stages: dict[str, ClusterStage] = {}
        for wave_name, deployments in pipeline.waves:
            wave = self.pipeline.add_wave(wave_name)
            for deployment in deployments:
                stage = ClusterStage(self, deployment.name, spec=deployment.spec, env=cdk.Environment(
                    account=self._account(deployment), region=deployment.spec.region))
                self.stages[deployment.name] = stage
                pre: list[pipelines.Step] = [self._diff_step(deployment)]
                if deployment.protected:
                    pre.append(pipelines.ManualApprovalStep(
                        "Approve", comment=f"Deploy {deployment.name} ({deployment.path}) to "
                                           f"{self._account(deployment)}/{deployment.spec.region}? "
                                           "The Diff step's log says what changes."))
                model = resolve(deployment.spec)
                storage = stage.stacks[storage_stack(deployment)]
                guard = pipelines.StackSteps(stack=storage, change_set=[self._change_set_step(deployment)])
                # Record (and the storage stack's policy) right after NAME-cluster, not after the stage:
                # NAME-reference, the reference image's build, deploys after the cluster and nothing
                # waits for it, so a failed build leaves the cluster recorded as deployed and its
                # storage protected again
                cluster = model.stack(CLUSTER)
                assert cluster is not None  # every cluster has its cluster stack
                record = pipelines.StackSteps(stack=stage.stacks[cluster.name], post=[self._record_step(deployment)])
                wave.add_stage(stage, pre=pipelines.Step.sequence(pre), stack_steps=[guard, record])
        self.pipeline.build_pipeline()
        publish_with_cdk_cli(self.pipeline, list(self.stages.values()), cli_version=pins.cdk_cli_version,
                             runtimes=pins.runtimes, env=QUIET)
        self._grant_codeconnections(config.source.connection_arn)
        self._scope_asset_roles()

    def _scope_asset_roles(self) -> None:
        """The asset publishing roles (Pipeline/Assets/FileRole, DockerRole) without the statement
        CDK Pipelines gives them up front: codebuild:StartBuild, StopBuild and BatchGetBuilds on
        every project of the account ("Resource": "*"). The role is the asset projects' own service
        role; what runs there (`cdk publish-assets`) starts no build, and CodePipeline starts the asset
        projects through another role, the CodeBuild action role, which has those actions on each
        project. CDK offers no option for it: the escape hatch of the typed L1 (the policy's
        CfnPolicy) takes the policy document as resolved, less that statement."""
        assets = self.pipeline.node.try_find_child("Assets")
        for role in (c for c in (assets.node.children if assets else []) if isinstance(c, iam.Role)):
            policy = role.node.try_find_child("DefaultPolicy")
            if not isinstance(policy, iam.Policy):
                continue
            cfn = policy.node.default_child
            assert isinstance(cfn, iam.CfnPolicy)
            cfn.policy_document = _WithoutStatement(policy, ASSET_ROLE_CODEBUILD)

    def _grant_codeconnections(self, connection_arn: str) -> None:
        """codeconnections:UseConnection on a connection whose ARN has the new service prefix, for every
        role CDK Pipelines gives codestar-connections:UseConnection (the source action, and the
        CodeBuild projects that clone the repository). Since CodeStar Connections became
        CodeConnections, "IAM policies with the codestar-connections service prefix will not work for
        resources with the new service prefix" (Developer Tools console User Guide, troubleshooting
        connections), and the connections made since July 2024 have it; CDK grants the old one only."""
        if ":codeconnections:" not in connection_arn:
            return
        grant = iam.PolicyStatement(actions=["codeconnections:UseConnection"], resources=[connection_arn])
        for policy in (c for c in self.node.find_all() if isinstance(c, iam.Policy)):
            statements = self.resolve(policy.document).get("Statement", [])
            if any("codestar-connections:UseConnection" in iam_actions(s) for s in statements):
                policy.add_statements(grant)

    def _account(self, deployment: Deployment) -> str:
        return deployment.spec.account or self.account

    def _parameter_arn(self, deployment: Deployment) -> str:
        return self.format_arn(service="ssm", resource="parameter",
                               resource_name=deployed_parameter(deployment.name).lstrip("/"))

    def _protects(self, deployment: Deployment) -> bool:
        """The steps run in the pipeline's account: they set the stack policy of clusters there."""
        return self._account(deployment) == self.account

    def _stack_policy_statement(self, deployment: Deployment) -> iam.PolicyStatement:
        return iam.PolicyStatement(
            actions=["cloudformation:DescribeStacks", "cloudformation:SetStackPolicy"],
            resources=[self.format_arn(service="cloudformation", resource="stack",
                                       region=deployment.spec.region,
                                       resource_name=f"{storage_stack(deployment)}/*")])

    def _diff_step(self, deployment: Deployment) -> pipelines.CodeBuildStep:
        protect = self._protects(deployment)
        statements = [iam.PolicyStatement(actions=["ssm:GetParameter"], resources=[self._parameter_arn(deployment)])]
        if protect:  # to lift it for a deploy allowed to lose data (known only at run time: the trailer)
            statements.append(self._stack_policy_statement(deployment))
        return pipelines.CodeBuildStep(
            "Diff", input=self.source, env=QUIET, install_commands=self.pins.step_install,
            commands=diff_commands(deployment, protect), role_policy_statements=statements)

    def _deploy_role_arn(self, deployment: Deployment) -> str:
        """The CDK bootstrap deploy role of the cluster's account and region (it trusts the pipeline's
        account: `cdk bootstrap --trust`), which may read change sets there."""
        account, region = self._account(deployment), deployment.spec.region
        return (f"arn:{self.partition}:iam::{account}:role/"
                f"cdk-{cdk.DefaultStackSynthesizer.DEFAULT_QUALIFIER}-deploy-role-{account}-{region}")

    def _change_set_step(self, deployment: Deployment) -> pipelines.CodeBuildStep:
        """Guard: between NAME-storage's Prepare and Deploy, the change set judged (change_set_commands).
        In the pipeline's account it reads the change set itself (cloudformation:DescribeChangeSet on
        that one stack); in another account it assumes that account's CDK deploy role."""
        role = None if self._protects(deployment) else self._deploy_role_arn(deployment)
        if role is None:
            statement = iam.PolicyStatement(
                actions=["cloudformation:DescribeChangeSet"],
                resources=[self.format_arn(service="cloudformation", resource="stack", region=deployment.spec.region,
                                           resource_name=f"{storage_stack(deployment)}/*")])
        else:
            statement = iam.PolicyStatement(actions=["sts:AssumeRole"], resources=[role])
        return pipelines.CodeBuildStep(
            "Guard", input=self.source, env=QUIET, install_commands=self.pins.step_install,
            commands=change_set_commands(deployment, role), role_policy_statements=[statement])

    def _record_step(self, deployment: Deployment) -> pipelines.CodeBuildStep:
        protect = self._protects(deployment)
        statements = [iam.PolicyStatement(actions=["ssm:PutParameter"], resources=[self._parameter_arn(deployment)])]
        if protect:
            statements.append(self._stack_policy_statement(deployment))
        # fmcluster installed in every account: `fmcluster step record-deployed` runs from it too
        return pipelines.CodeBuildStep(
            "Record", input=self.source, env=QUIET, install_commands=self.pins.step_install,
            commands=record_commands(deployment, protect), role_policy_statements=statements)


# What CDK Pipelines' asset role (AssetSingletonRole) allows on "*" (the statement removed above)
ASSET_ROLE_CODEBUILD = {"codebuild:BatchGetBuilds", "codebuild:StartBuild", "codebuild:StopBuild"}


@jsii.implements(cdk.IResolvable)
class _WithoutStatement:
    """A policy's document, resolved when the template is written, less its statement that allows
    exactly `actions` on "*"."""

    def __init__(self, policy: iam.Policy, actions: set[str]) -> None:
        self.policy = policy
        self.actions = actions
        self.creation_stack: list[str] = []
        self.type_hint = None

    def resolve(self, context: cdk.IResolveContext) -> Any:
        resolved = context.resolve(self.policy.document)
        resolved["Statement"] = [s for s in resolved.get("Statement", [])
                                 if not (set(iam_actions(s)) == self.actions and s.get("Resource") == "*")]
        return resolved

    def to_string(self) -> str:
        return cdk.Token.as_string(self)


def iam_actions(statement: dict[str, Any]) -> list[str]:
    actions = statement.get("Action", [])
    return [str(a) for a in actions] if isinstance(actions, list) else [str(actions)]


def pipeline_stack(app: cdk.App, pipeline: Pipeline, root: Path | None = None) -> PipelineStack:
    """NAME-pipeline, in the account and region the pipeline file names, of the repository at
    `root` (default: the working directory, as for the pipeline file's spec paths)."""
    config = pipeline.config
    return PipelineStack(app, f"{config.name}-pipeline", pipeline=pipeline, root=root or Path.cwd(),
                         env=cdk.Environment(account=config.account, region=config.region),
                         description=f"fmcluster GitOps pipeline {config.name}: deploys "
                                     + ", ".join(d.name for d in pipeline.deployments)
                                     + f" from {config.source.repository}@{config.source.branch}")
