"""The GitOps pipeline of a project of one's own, rehearsed (issue 39): `fmcluster init` in a git
repository of its own, its pipeline synthesized once as its owner does (`cdk synth -c
pipeline=pipeline.yaml`, the pinned CDK CLI, no credentials), then four pushes, each through the
stages in order, every CodeBuild action running the commands of its synthesized buildspec with
moto's server as AWS (tests/support/pipeline_rehearsal.py):

1. the first commit: Diff (nothing recorded: the first deploy), the storage stack's change set
   judged by Guard, Record (the SSM parameter and the stack policy);
2. a data-losing change (the checkpoints bucket and its file-system link removed, which
   `fmcluster diff` calls data loss): Build (`fmcluster validate --pipeline`, then `cdk synth -c
   nag=true` with the account's credentials, as in CodeBuild) passes, Diff stops the pipeline,
   comparing with what Record wrote; the Guard would have refused the change set too;
3. the same change pushed again in a commit whose message carries `Allow-Data-Loss: NAME`: Diff
   passes and lifts the stack policy, Guard allows the change set, Record writes the new commit and
   sets the policy again;
4. a commit that leaves the spec alone: Diff compares with the commit run 3 recorded, and the
   allowance has ended with that commit.

What is not run as written, and why:
- The install phase: `python -m pip install -r requirements.txt` (the project's one pin,
  fmcluster) and `npm install -g aws-cdk@VERSION` would reach the internet; this installation's
  fmcluster (on PATH beside the interpreter, with the AWS CLI) and the pinned CDK CLI in
  node_modules run in their place. The test checks that these are exactly the buildspecs'
  install lines, and that the CDK CLI here is that release.
- CodePipeline's own actions, which no buildspec holds: UpdatePipeline (the Build's pipeline
  template must give the same actions), Assets (tests/deploy/test_pipeline_assets.py runs its
  commands against moto), Approve (a person), and the stacks' Prepare and Deploy, done here in
  moto's CloudFormation for NAME-network (created whole: moto's change sets make no exports) and
  NAME-storage (the change set PipelineChange, which Guard reads, then executed). The other
  stacks are not deployed: no step reads them.
- moto's change sets say each change's Action, logical id and type, not Replacement, Details or
  PolicyAction: the data-losing change here is therefore a removal, which moto's change set shows
  as CloudFormation does. Guard's reading of replacements is tests/deploy/test_change_set.py's,
  against DescribeChangeSet answers in CloudFormation's shape (botocore's Stubber).
- Two runs have no Build of their own, to synthesize twice only (the owner's synthesis, and
  run 2's Build): run 1's output is the owner's synthesis of the same commit, less cdk-nag's
  check, which run 2's Build makes; run 3's commit has run 2's tree, and so its templates.

Run it alone: `.venv/bin/python -m pytest tests/deploy/test_pipeline_rehearsal.py -q`."""

from __future__ import annotations

import json
import subprocess
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

import fmcluster
from fmcluster.deploy import assembly, stack_policy
from fmcluster.facts import nodejs
from fmcluster.spec.pipeline import deployed_parameter
from tests.support import pipeline_rehearsal as rehearsal
from tests.support.moto_aws import moto_server
from tests.support.paths import ROOT

# what moto's CloudFormation makes nothing of (the templates keep them; nothing here reads them), and
# so cannot delete when the data-losing change removes them
pytestmark = [pytest.mark.filterwarnings("ignore:Tried to parse AWS..(EC2..SecurityGroupEgress|CDK..Metadata|"
                                         "S3..BucketPolicy) "),
              pytest.mark.filterwarnings("ignore:Unable to delete (BucketcheckpointsPolicy|LustreLinkcheckpoints)")]

NAME = "gpu-lab"  # the project's directory, and so its cluster's and pipeline's name
REGION = "us-east-1"  # init's default
PARAMETER = deployed_parameter(NAME)
NETWORK, STORAGE = f"{NAME}-network", f"{NAME}-storage"
PIP_INSTALL = "python -m pip install -r requirements.txt"
CDK_INSTALL = f"npm install -g aws-cdk@{nodejs.CDK_CLI_VERSION}"


class Synthesized:
    """A cloud assembly of the pipeline app (the Build's output, cdk.out): the pipeline's template,
    from which it updates itself, and the templates of the stage's stacks."""

    def __init__(self, out: Path) -> None:
        self.pipeline = json.loads((out / f"{NAME}-pipeline.template.json").read_text())
        (stage,) = out.glob(f"assembly-{NAME}-pipeline-*")
        self.templates = {name: t.body for name, t in assembly.load(stage).items()}


def without_checkpoints(text: str) -> str:
    """The spec without its checkpoints bucket and that bucket's link to the file system."""
    spec = yaml.safe_load(text)
    storage = spec["storage"]
    assert [b["name"] for b in storage["buckets"]] == ["datasets", "checkpoints"]
    storage["buckets"] = [b for b in storage["buckets"] if b["name"] != "checkpoints"]
    storage["lustre"]["links"] = [link for link in storage["lustre"]["links"] if link["bucket"] != "checkpoints"]
    return yaml.safe_dump(spec, sort_keys=False)


def test_the_pipeline_of_an_init_project_stops_data_loss_at_diff_until_a_trailer_allows_it(tmp_path):
    yours = rehearsal.Yours()
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / NAME
    rehearsal.init_project(project, yours, home)
    repo = rehearsal.Repository(project, home)
    repo.init()
    first = repo.commit("Start the cluster")

    # The pipeline as its owner synthesizes it, to deploy it once: the pinned CDK CLI, no credentials.
    synth = subprocess.run(["cdk", "synth", "-q", "-c", "pipeline=pipeline.yaml"], cwd=project,
                           env=rehearsal.base_env(home), capture_output=True, text=True, timeout=300)
    assert synth.returncode == 0, synth.stderr[-4000:]
    owners = Synthesized(project / "cdk.out")
    steps = rehearsal.actions(owners.pipeline)
    assert sorted(steps) == sorted(["Build/Synth", "UpdatePipeline/SelfMutate", "Assets/FileAssets", f"{NAME}/Diff",
                                    f"{NAME}/storage.Guard", f"{NAME}/cluster.Record"])
    build_step, diff_step = steps["Build/Synth"], steps[f"{NAME}/Diff"]
    guard_step, record_step = steps[f"{NAME}/storage.Guard"], steps[f"{NAME}/cluster.Record"]

    # What the install phases hold, and what is on PATH here in their place: the project's one pin
    # (fmcluster: this installation's), the CDK CLI fmcluster pins (node_modules' release).
    assert build_step.install == [PIP_INSTALL, CDK_INSTALL]
    assert diff_step.install == guard_step.install == record_step.install == [PIP_INSTALL]
    pins = [Requirement(line.split("  #")[0]) for line in (project / "requirements.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    assert [pin.name for pin in pins] == ["fmcluster"]
    assert metadata.version("fmcluster") and Path(fmcluster.__file__).parent == ROOT / "fmcluster"  # this one
    assert (rehearsal.BIN / "fmcluster").is_file() and (rehearsal.BIN / "aws").is_file()
    cli = json.loads((ROOT / "node_modules" / "aws-cdk" / "package.json").read_text())["version"]
    assert cli == nodejs.CDK_CLI_VERSION
    installed = [PIP_INSTALL, CDK_INSTALL]

    with moto_server() as url:
        aws = rehearsal.Aws(url, yours.account, REGION)
        aws.bootstrap()
        env = aws.env(home)
        ssm = aws.client("ssm")
        stacks = rehearsal.Stacks(aws)

        def run(action: rehearsal.Action, commit: str, label: str) -> rehearsal.Outcome:
            """`action` on a clone of `commit` (its input is the source)."""
            assert action.input.endswith("_Source"), action.input
            return rehearsal.run_action(action, repo.checkout(commit, tmp_path / label), env, installed)

        def recorded() -> str:
            return ssm.get_parameter(Name=PARAMETER)["Parameter"]["Value"]

        def deploy_and_record(commit: str, label: str) -> None:
            """The storage stack's change set executed, the stacks after it deployed, then Record: the
            commit written where the next Diff reads it, the storage stack protected again."""
            stacks.deploy(STORAGE)
            record = run(record_step, commit, label)
            assert record.returncode == 0, record.describe()
            assert recorded() == f"{commit}:cluster.yaml"
            assert stacks.policy(STORAGE) == stack_policy.protecting()

        # ---- 1. the first commit: the cluster's first deploy (the stacks: the owner's synthesis)
        built = owners
        diff = run(diff_step, first, "1-diff")
        assert diff.returncode == 0, diff.describe()
        assert f"cluster.yaml: {PARAMETER} is not set: the first deploy of this cluster" in diff.stdout
        stacks.create(NETWORK, built.templates[NETWORK])
        assert {c["Action"] for c in stacks.prepare(STORAGE, built.templates[STORAGE])} == {"Add"}
        guard = run(guard_step, first, "1-guard")
        assert guard.returncode == 0, guard.describe()
        assert f"fmcluster change-set: PipelineChange of {STORAGE}: " in guard.stdout
        assert "no stateful resource is replaced or removed" in guard.stdout
        deploy_and_record(first, "1-record")

        # ---- 2. a change that loses data: stopped at Diff
        (project / "cluster.yaml").write_text(without_checkpoints((project / "cluster.yaml").read_text()))
        second = repo.commit("Drop the checkpoints bucket")
        clone = repo.checkout(second, tmp_path / "2-build")
        build = rehearsal.run_action(build_step, clone, env, installed)
        assert build.returncode == 0, build.describe()  # the spec is valid: Diff is what judges the change
        assert [c for c, _ in build.ran] == ["fmcluster validate --pipeline pipeline.yaml",
                                             "cdk synth -q -c nag=true -c pipeline=pipeline.yaml"]
        changed = Synthesized(clone / "cdk.out")
        # UpdatePipeline: the pipeline the Build synthesized has the same actions (nothing to update)
        assert rehearsal.actions(changed.pipeline) == steps
        assert changed.templates[NETWORK] == built.templates[NETWORK]  # (so NAME-network is deployed as it is)
        gone = {lid: r["Type"] for lid, r in built.templates[STORAGE]["Resources"].items()
                if lid not in changed.templates[STORAGE]["Resources"]}
        assert sorted(gone.values()) == ["AWS::FSx::DataRepositoryAssociation", "AWS::S3::Bucket",
                                         "AWS::S3::BucketPolicy"]
        (bucket,) = [lid for lid, kind in gone.items() if kind == "AWS::S3::Bucket"]
        diff = run(diff_step, second, "2-diff")
        assert diff.returncode == 1, diff.describe()  # the pipeline stops here
        assert f"cluster.yaml: comparing with {first}:cluster.yaml, as last deployed" in diff.stdout
        assert f"{STORAGE} {bucket} (AWS::S3::Bucket): removed" in diff.output  # the reason
        assert "DATA LOSS: 1 stateful resource replaced or removed; refusing (exit 1)" in diff.output
        assert [c for c, _ in diff.ran] == diff_step.commands  # one command: the allowance, the diff, the lift
        assert "stack policy lifted" not in diff.output
        assert recorded() == f"{first}:cluster.yaml" and stacks.policy(STORAGE) == stack_policy.protecting()
        # had Diff let it through, Guard would have stopped it before its change set ran
        changes = stacks.prepare(STORAGE, changed.templates[STORAGE])
        assert {c["LogicalResourceId"]: c["Action"] for c in changes if c["Action"] == "Remove"} == {
            lid: "Remove" for lid in gone}
        assert {c["LogicalResourceId"] for c in changes if c["Action"] != "Remove"} <= {"CDKMetadata"}
        guard = run(guard_step, second, "2-guard")
        assert guard.returncode == 1, guard.describe()
        assert f"{STORAGE} {bucket} (AWS::S3::Bucket) removed" in guard.stdout
        assert "refusing (exit 1): do not execute this change set" in guard.stdout

        # ---- 3. the same change, allowed by the trailer of the commit that is deployed
        third = repo.commit(f"Drop the checkpoints bucket, its data copied\n\nAllow-Data-Loss: {NAME}",
                            allow_empty=True)
        assert repo.git("rev-parse", f"{third}^{{tree}}") == repo.git("rev-parse", f"{second}^{{tree}}")
        diff = run(diff_step, third, "3-diff")
        assert diff.returncode == 0, diff.describe()
        assert f"cluster.yaml: comparing with {first}:cluster.yaml, as last deployed" in diff.stdout
        assert f"data loss allowed for this deploy by the trailer 'Allow-Data-Loss: {NAME}'" in diff.stderr
        assert f"{STORAGE} {bucket} (AWS::S3::Bucket): removed" in diff.output
        assert f"{STORAGE}: stack policy lifted for this deploy" in diff.stdout
        assert stacks.policy(STORAGE) == stack_policy.lifting()
        stacks.prepare(STORAGE, changed.templates[STORAGE])
        guard = run(guard_step, third, "3-guard")
        assert guard.returncode == 0, guard.describe()
        assert f"{STORAGE} {bucket} (AWS::S3::Bucket) removed" in guard.stdout
        assert "allowed by --allow-data-loss" in guard.stdout
        deploy_and_record(third, "3-record")

        # ---- 4. the next commit: Diff reads what Record wrote; the allowance ended with its commit
        (project / "README.md").write_text(f"# {NAME}\n\nThe team's training cluster.\n")
        fourth = repo.commit("Say what the cluster is for")
        diff = run(diff_step, fourth, "4-diff")
        assert diff.returncode == 0, diff.describe()
        assert f"cluster.yaml: comparing with {third}:cluster.yaml, as last deployed" in diff.stdout
        assert "allowed" not in diff.output and "DATA LOSS" not in diff.output
        assert stacks.policy(STORAGE) == stack_policy.protecting()
