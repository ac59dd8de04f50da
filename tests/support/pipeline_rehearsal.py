"""The GitOps pipeline run here, stage by stage, as CodePipeline and CodeBuild would run it, with moto's
server as AWS: what tests/deploy/test_pipeline_rehearsal.py needs. Not a test module.

- `init_project`: a project as `fmcluster init` writes it, its `put yours` values replaced (the
  pipeline's own synthesis refuses them where it has credentials, as in CodeBuild).
- `Repository`: the project's git repository; `checkout` gives each action a clone of one commit,
  as CodeBuild gets the source (a full clone: the Diff step reads old specs from its history).
- `actions`: the CodeBuild actions of a synthesized pipeline template, with their buildspecs.
- `run_action`: one action's commands, as CodeBuild runs them: each command in a shell of its own,
  in the source's root, with the project's variables and the buildspec's, and moto as every
  service's endpoint; the first that fails ends the action.
- `Aws`: the credentials of a role in the pipeline's account in moto's server
  (tests/support/moto_aws.py, `moto_server`; moto keeps each account's resources apart by the
  credentials' account).
- `Stacks`: the stage's CloudFormation actions, which no buildspec holds (Prepare: a change set
  named PipelineChange; Deploy: executing it), done in moto's CloudFormation with the templates of
  the Build's output, prepared as tests/support/moto_stacks.py prepares them for moto.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fmcluster.spec import placeholders
from tests.support import moto_stacks
from tests.support.paths import ROOT

BIN = Path(sys.executable).parent  # this installation's fmcluster, fmcluster-cdk-app, python and aws
NODE_BIN = ROOT / "node_modules" / ".bin"  # the pinned Node.js and CDK CLI
CHANGE_SET = "PipelineChange"  # the change set CDK Pipelines' Prepare action makes (and Deploy executes)
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "Rehearsal", "GIT_AUTHOR_EMAIL": "rehearsal@example.com",
                "GIT_COMMITTER_NAME": "Rehearsal", "GIT_COMMITTER_EMAIL": "rehearsal@example.com"}


# where jsii's Node.js side keeps the packages it has unpacked (aws-cdk-lib: seconds each time), by
# default under HOME: the machine's, not the rehearsal's empty one
JSII_CACHE = os.environ.get("JSII_RUNTIME_PACKAGE_CACHE_ROOT") or str(Path.home() / ".cache/aws/jsii/package-cache")


def base_env(home: Path) -> dict[str, str]:
    """A shell's environment with nothing of this machine's AWS or git configuration (HOME is
    `home`): this installation's programs and the pinned Node.js first on PATH."""
    return {"PATH": os.pathsep.join([str(BIN), str(NODE_BIN), "/usr/bin", "/bin"]), "HOME": str(home),
            "LANG": "C.UTF-8", "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true", "JSII_RUNTIME_PACKAGE_CACHE_ROOT": JSII_CACHE, **GIT_IDENTITY}


# ---- the project and its repository ------------------------------------------------------------

@dataclass(frozen=True)
class Yours:
    """What replaces init's `put yours` values."""

    account: str = "381492756031"
    connection_id: str = "5e1c4a7b-2f3d-4e6a-9b8c-0d1e2f3a4b5c"
    repository: str = "acme/gpu-lab"
    reservation_id: str = "cr-07f3c91e5a2b8d604"


def init_project(directory: Path, yours: Yours, home: Path) -> subprocess.CompletedProcess[str]:
    """`fmcluster init DIRECTORY` with the installed fmcluster, then its placeholders replaced in the
    pipeline file and the spec (requirements.txt is left as init wrote it). Returns init's run."""
    made = subprocess.run([str(BIN / "fmcluster"), "init", directory.name], cwd=directory.parent,
                          env=base_env(home), capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    pipeline = directory / "pipeline.yaml"
    text = pipeline.read_text()
    for placeholder, value in ((placeholders.ACCOUNT, yours.account), (placeholders.CONNECTION_ID, yours.connection_id),
                               (placeholders.REPOSITORY, yours.repository)):
        assert placeholder in text, placeholder
        text = text.replace(placeholder, value)
    pipeline.write_text(text)
    spec = directory / "cluster.yaml"
    assert placeholders.RESERVATION_ID in spec.read_text()
    spec.write_text(spec.read_text().replace(placeholders.RESERVATION_ID, yours.reservation_id))
    return made


@dataclass
class Repository:
    path: Path
    home: Path

    def git(self, *args: str, cwd: Path | None = None) -> str:
        result = subprocess.run(["git", *args], cwd=cwd or self.path, env=base_env(self.home), capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
        return result.stdout.strip()

    def init(self) -> None:
        self.git("init", "-q", "-b", "main")

    def commit(self, message: str, *, allow_empty: bool = False) -> str:
        """Commit every file of the project (what .gitignore lets in); the commit's id."""
        self.git("add", "-A")
        self.git("commit", "-q", *(["--allow-empty"] if allow_empty else []), "-m", message)
        return self.git("rev-parse", "HEAD")

    def checkout(self, commit: str, into: Path) -> Path:
        """A full clone of the repository at `commit` (HEAD there), as CodeBuild gets the source."""
        self.git("clone", "-q", str(self.path), str(into), cwd=into.parent)
        self.git("checkout", "-q", "--detach", commit, cwd=into)
        return into


# ---- the pipeline's CodeBuild actions ----------------------------------------------------------

@dataclass(frozen=True)
class Action:
    """A CodeBuild action of the pipeline: its stage and name, its buildspec, and the variables of
    its project."""

    stage: str
    name: str
    buildspec: dict[str, Any]
    variables: dict[str, str]
    input: str  # the artifact it runs in: the source, or the Build's output

    def phase(self, name: str) -> list[str]:
        return list(self.buildspec["phases"].get(name, {}).get("commands", []))

    @property
    def install(self) -> list[str]:
        return self.phase("install")

    @property
    def commands(self) -> list[str]:
        return self.phase("pre_build") + self.phase("build") + self.phase("post_build")


def actions(template: dict[str, Any]) -> dict[str, Action]:
    """Every CodeBuild action of the pipeline template, by "STAGE/ACTION"."""
    (pipeline,) = [r["Properties"] for r in template["Resources"].values()
                   if r["Type"] == "AWS::CodePipeline::Pipeline"]
    found = {}
    for stage in pipeline["Stages"]:
        for action in stage["Actions"]:
            if action["ActionTypeId"]["Provider"] != "CodeBuild":
                continue
            project = template["Resources"][action["Configuration"]["ProjectName"]["Ref"]]["Properties"]
            buildspec = json.loads(project["Source"]["BuildSpec"])
            variables = {v["Name"]: v["Value"] for v in project["Environment"].get("EnvironmentVariables", [])}
            variables |= buildspec.get("env", {}).get("variables", {})
            (artifact,) = action["InputArtifacts"]
            found[f"{stage['Name']}/{action['Name']}"] = Action(stage["Name"], action["Name"], buildspec, variables,
                                                                artifact["Name"])
    return found


@dataclass
class Outcome:
    """What an action's commands did: each command run, and its exit status; the output of all."""

    ran: list[tuple[str, int]] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""

    @property
    def returncode(self) -> int:
        return self.ran[-1][1] if self.ran else 0

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def describe(self) -> str:
        ran = "\n".join(f"$ {c}  (exit {rc})" for c, rc in self.ran)
        return f"{ran}\n{self.stdout[-6000:]}\n{self.stderr[-6000:]}"


def run_action(action: Action, cwd: Path, env: Mapping[str, str], installed: Sequence[str]) -> Outcome:
    """Run `action` in `cwd` as CodeBuild would. Its install commands are not run: each must be one
    of `installed`, whose programs are on PATH here already (the caller checks they are the same
    releases); every other command runs as written, each in a shell of its own, until one fails."""
    outcome = Outcome()
    for command in action.install:
        assert command in installed, f"{action.stage}/{action.name} installs what this rehearsal has not: {command}"
    for command in action.commands:
        result = subprocess.run(["bash", "-c", command], cwd=cwd, env={**env, **action.variables},
                                capture_output=True, text=True, timeout=300)
        outcome.ran.append((command, result.returncode))
        outcome.stdout += result.stdout
        outcome.stderr += result.stderr
        if result.returncode != 0:
            break
    return outcome


# ---- AWS: the pipeline's account in moto's server -----------------------------------------------

@dataclass
class Aws:
    """A role of `account` in moto (a CodeBuild project's role, as far as moto cares: it checks no
    policy; tests/deploy/test_pipeline.py holds the roles' policies): its credentials in the
    environment of the actions, and a boto3 session of it."""

    url: str
    account: str
    region: str
    credentials: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        import boto3

        sts = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing").client(
            "sts", region_name=self.region, endpoint_url=self.url)
        found = sts.assume_role(RoleArn=f"arn:aws:iam::{self.account}:role/codebuild",
                                RoleSessionName="rehearsal")["Credentials"]
        self.credentials = {"AWS_ACCESS_KEY_ID": found["AccessKeyId"],
                            "AWS_SECRET_ACCESS_KEY": found["SecretAccessKey"],
                            "AWS_SESSION_TOKEN": found["SessionToken"]}

    def env(self, home: Path) -> dict[str, str]:
        """An action's environment: CodeBuild's region variables, the role's credentials, moto as the
        endpoint of every service (the AWS CLI, boto3 and the CDK CLI's SDK all read AWS_ENDPOINT_URL)."""
        return {**base_env(home), **self.credentials, "AWS_ENDPOINT_URL": self.url, "AWS_REGION": self.region,
                "AWS_DEFAULT_REGION": self.region}

    def client(self, service: str) -> Any:
        import boto3

        session = boto3.session.Session(aws_access_key_id=self.credentials["AWS_ACCESS_KEY_ID"],
                                        aws_secret_access_key=self.credentials["AWS_SECRET_ACCESS_KEY"],
                                        aws_session_token=self.credentials["AWS_SESSION_TOKEN"])
        return session.client(service, region_name=self.region, endpoint_url=self.url)

    def bootstrap(self) -> None:
        """What `cdk bootstrap` leaves that the stage's templates read: the bootstrap version."""
        self.client("ssm").put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String")


# ---- the stage's CloudFormation actions ------------------------------------------------------------

class Stacks:
    """Prepare (CreateChangeSet PipelineChange, of type CREATE for a new stack) and Deploy
    (ExecuteChangeSet) of a stage's stacks in moto, with their templates prepared for moto (the
    resources it cannot make kept under a false condition, so that a change set still lists them;
    cross-stack imports resolved from the outputs of the stacks made before). moto's change sets
    give each change's Action, logical id and type only (no Replacement, no Details, no
    PolicyAction), and the stacks they create have no outputs: a stack whose exports another
    reads is created with CreateStack (`create`)."""

    def __init__(self, aws: Aws) -> None:
        self.cfn = aws.client("cloudformation")
        self.outputs: dict[tuple[str, str], str] = {}

    def _body(self, template: dict[str, Any]) -> str:
        return json.dumps(moto_stacks.for_moto(copy.deepcopy(template), self.outputs,
                                               skipped_types=moto_stacks.SKIPPED_BY_MOTO, conditioned=True))

    def create(self, name: str, template: dict[str, Any]) -> None:
        self.cfn.create_stack(StackName=name, TemplateBody=self._body(template), Capabilities=["CAPABILITY_IAM"])
        stack = self.cfn.describe_stacks(StackName=name)["Stacks"][0]
        assert stack["StackStatus"] == "CREATE_COMPLETE", (name, stack.get("StackStatusReason"))
        moto_stacks.record_outputs(stack, self.outputs)

    def prepare(self, name: str, template: dict[str, Any]) -> list[dict[str, Any]]:
        """The Prepare action (CHANGE_SET_REPLACE): the change set PipelineChange, made anew; its changes."""
        exists = self._exists(name)
        for made in self.cfn.list_change_sets(StackName=name)["Summaries"] if exists else []:
            if (made["StackName"], made["ChangeSetName"]) == (name, CHANGE_SET):  # (moto lists every stack's)
                self.cfn.delete_change_set(StackName=name, ChangeSetName=made["ChangeSetId"])
        self.cfn.create_change_set(StackName=name, ChangeSetName=CHANGE_SET, TemplateBody=self._body(template),
                                   ChangeSetType="UPDATE" if exists else "CREATE",
                                   Capabilities=["CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"])
        described = self.cfn.describe_change_set(StackName=name, ChangeSetName=CHANGE_SET)
        assert described["Status"] == "CREATE_COMPLETE", described.get("StatusReason")
        return [c["ResourceChange"] for c in described["Changes"]]

    def _exists(self, name: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.cfn.describe_stacks(StackName=name)
        except ClientError:
            return False
        return True

    def deploy(self, name: str) -> None:
        """The Deploy action (CHANGE_SET_EXECUTE)."""
        self.cfn.execute_change_set(StackName=name, ChangeSetName=CHANGE_SET)
        status = self.cfn.describe_stacks(StackName=name)["Stacks"][0]["StackStatus"]
        assert status in ("CREATE_COMPLETE", "UPDATE_COMPLETE"), (name, status)

    def policy(self, name: str) -> dict[str, Any] | None:
        """The stack policy of stack `name` (None when it has none)."""
        body = self.cfn.get_stack_policy(StackName=name).get("StackPolicyBody")
        return json.loads(body) if body else None
