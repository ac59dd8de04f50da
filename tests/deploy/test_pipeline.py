"""The GitOps pipeline: the pipeline file (validated with located errors), the NAME-pipeline stack
synthesized once from examples/pipeline/pipeline.yaml (source, synth, waves, approvals, the diff
and record steps and their roles, cfn-lint), the step scripts run against stubs, and the GitHub
Actions alternative (workflow and OIDC role)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fmcluster.deploy.pipeline import run as validate_pipelines
from fmcluster.spec import loader, pipeline, placeholders
from fmcluster.spec.diagnostics import dotted
from tests.support import iam_lint
from tests.support.paths import EXAMPLES_DIR, ROOT
from tests.support.tools import actionlint, assert_shellcheck_clean

EXAMPLE = "examples/pipeline/pipeline.yaml"
WORKFLOW = ROOT / "examples/github-actions/deploy.yml"
OIDC_ROLE = ROOT / "examples/github-actions/oidc-role.yaml"
STEPS = ROOT / "fmcluster/deploy/steps"
CONNECTION = "arn:aws:codeconnections:us-east-1:111122223333:connection/0123abcd-4567-89ef-0123-456789abcdef"

GOOD = f"""\
name: gpu-clusters
account: "111122223333"
region: us-east-1
source:
  connection_arn: {CONNECTION}
  repository: my-org/gpu-clusters
waves:
  - name: staging
    clusters:
      - spec: examples/p5en-reservation-pcs.yaml
  - name: production
    clusters:
      - spec: examples/p5-pcs.yaml
        protected: true
"""


def load(tmp_path: Path, text: str) -> pipeline.PipelineLoad:
    path = tmp_path / "pipeline.yaml"
    path.write_text(text)
    return pipeline.load(path, root=ROOT)


def errors(result: pipeline.PipelineLoad) -> list[str]:
    """The errors as printed, without the check's id and the line of the file under each."""
    return [dataclasses.replace(d, source=None, rule="").format() for d in result.diagnostics if d.is_error]


# ---- the pipeline file -----------------------------------------------------------------------

def test_example_pipeline_file_is_valid():
    result = pipeline.load(ROOT / EXAMPLE, root=ROOT)
    assert result.ok, [d.format() for d in result.diagnostics]
    assert result.pipeline.file == EXAMPLE
    assert [(name, [(d.path, d.name, d.protected) for d in wave]) for name, wave in result.pipeline.waves] == [
        ("staging", [("examples/p5en-reservation-pcs.yaml", "p5en-train", False)]),
        ("production", [("examples/p5-pcs.yaml", "llm-pretrain", True),
                        ("examples/p6-b300-pcs.yaml", "b300-research", True)])]


def test_defaults(tmp_path):
    result = load(tmp_path, GOOD)
    assert result.ok, errors(result)
    config = result.pipeline.config
    assert config.source.branch == "main"
    assert [d.allow_data_loss for d in result.pipeline.deployments] == [False, False]


@pytest.mark.parametrize("change, located", [
    # a typo in a key: pointed at the key, with the field it was meant to be
    (("  repository: my-org/gpu-clusters\n", "  repository: my-org/gpu-clusters\n  brnach: main\n"),
     r":7:3: error: source.brnach: unknown field `brnach`\n  hint: did you mean `branch`\?"),
    ((f"connection_arn: {CONNECTION}", "connection_arn: arn:aws:codestar:us-east-1:1:x"),
     r":5:19: error: source.connection_arn: 'arn:aws:codestar:us-east-1:1:x' is not a valid "
     r"CodeConnections connection ARN"),
    (('account: "111122223333"', "account: 111122223333"),
     r":2:10: error: account: expected a string, got 111122223333 \(a number\)\n  hint: quote it"),
    (("region: us-east-1\n", ""), r":1:1: error: region: required field `region` is missing"),
    (("repository: my-org/gpu-clusters", "repository: gpu-clusters"),
     r":6:15: error: source.repository: 'gpu-clusters' is not a valid repository\n  hint: owner/name"),
    (("examples/p5-pcs.yaml", "examples/missing.yaml"),
     r":13:15: error: waves\[1\].clusters\[0\].spec: no spec file examples/missing.yaml in the repository"),
    (("examples/p5-pcs.yaml", "../examples/p5-pcs.yaml"),
     r":13:15: error: waves\[1\].clusters\[0\].spec: '../examples/p5-pcs.yaml' leaves the repository"),
    (("examples/p5-pcs.yaml", "examples/p5en-reservation-pcs.yaml"),
     r":13:15: error: waves\[1\].clusters\[0\].spec: examples/p5en-reservation-pcs.yaml is listed twice\n"
     r"  hint: it is already at waves\[0\].clusters\[0\]"),
    (("- name: production", "- name: staging"), r":11:11: error: waves\[1\].name: wave `staging` is named twice"),
    (("        protected: true", "        protected: yes please"),
     r":14:20: error: waves\[1\].clusters\[0\].protected: expected true or false"),
])
def test_errors_are_located(tmp_path, change, located):
    old, new = change
    assert old in GOOD
    result = load(tmp_path, GOOD.replace(old, new, 1))
    assert not result.ok
    assert any(re.search(located, e) for e in errors(result)), errors(result)
    assert all(e.startswith(str(tmp_path / "pipeline.yaml")) for e in errors(result))


def test_no_waves(tmp_path):
    result = load(tmp_path, GOOD.split("waves:")[0] + "waves: []\n")
    assert any(":7:8: error: waves: " in e for e in errors(result)), errors(result)


def test_two_specs_of_one_cluster_clash(tmp_path):
    shutil.copytree(EXAMPLES_DIR, tmp_path / "examples")
    shutil.copy(ROOT / "examples/p5-pcs.yaml", tmp_path / "examples/copy.yaml")
    (tmp_path / "pipeline.yaml").write_text(GOOD.replace(
        "        protected: true\n", "        protected: true\n      - spec: examples/copy.yaml\n"))
    result = pipeline.load(tmp_path / "pipeline.yaml", root=tmp_path)
    assert any(":15:15: error: waves[1].clusters[1].spec: cluster `llm-pretrain` is already deployed by "
               "waves[1].clusters[0]" in e for e in errors(result)), errors(result)


def with_edited_spec(tmp_path: Path, old: str, new: str) -> pipeline.PipelineLoad:
    """GOOD in a repository of its own, whose production spec (edited.yaml) is examples/p5-pcs.yaml
    with `old` replaced by `new`."""
    (tmp_path / "edited.yaml").write_text((ROOT / "examples/p5-pcs.yaml").read_text().replace(old, new))
    shutil.copy(ROOT / "examples/p5en-reservation-pcs.yaml", tmp_path / "staging.yaml")
    (tmp_path / "pipeline.yaml").write_text(GOOD.replace("examples/p5-pcs.yaml", "edited.yaml")
                                            .replace("examples/p5en-reservation-pcs.yaml", "staging.yaml"))
    return pipeline.load(tmp_path / "pipeline.yaml", root=tmp_path)


def test_an_invalid_spec_is_reported_in_its_own_file_and_at_its_entry(tmp_path):
    found = errors(with_edited_spec(tmp_path, "instance_type: p5.48xlarge", "instance_type: p5.48xlarg"))
    assert any(e.startswith("edited.yaml:") and "unknown instance type 'p5.48xlarg'" in e for e in found), found
    assert any(":13:15: error: waves[1].clusters[0].spec: edited.yaml is not a valid spec (1 error)" in e
               for e in found), found


def test_a_spec_in_another_account_is_a_warning_with_the_bootstrap_command(tmp_path):
    result = with_edited_spec(tmp_path, "region: us-east-1", 'account: "444455556666"\nregion: us-east-1')
    assert result.ok, errors(result)
    (warning,) = [d for d in result.diagnostics if not d.is_error and d.rule != placeholders.RULE]
    assert "--trust 111122223333" in warning.hint and "aws://444455556666/us-east-1" in warning.hint


@pytest.mark.parametrize("text, message", [("", "the pipeline file is empty"),
                                           ("- a list\n", "the pipeline file must be a mapping"),
                                           ("name: [\n", "")])
def test_not_a_pipeline_file(tmp_path, text, message):
    result = load(tmp_path, text)
    assert not result.ok and result.pipeline is None
    assert message in result.diagnostics[0].message


def test_command_line_check(tmp_path):
    """`fmcluster validate --pipeline FILE`: a pipeline file and every spec it lists, reported as
    validate reports spec files."""
    ok = subprocess.run([sys.executable, "-m", "fmcluster", "validate", "--pipeline", EXAMPLE], cwd=ROOT,
                        capture_output=True, text=True)
    assert (ok.returncode, ok.stdout) == (0, f"{EXAMPLE}: ok\n"), ok.stderr
    path = tmp_path / "pipeline.yaml"
    path.write_text(GOOD.replace("branch", "x").replace("staging", "Staging"))
    bad = subprocess.run([sys.executable, "-m", "fmcluster", "validate", "--pipeline", str(path)], cwd=ROOT,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stdout == ""
    assert f"{path}:8:11: error: waves[0].name: 'Staging' is not a valid name" in bad.stderr
    assert bad.stderr.endswith(f"{path}: 1 error\n")


def test_command_line_check_in_json(tmp_path):
    path = tmp_path / "pipeline.yaml"
    path.write_text(GOOD.replace("staging", "Staging"))
    report = validate_pipelines([str(ROOT / EXAMPLE), str(path)], root=ROOT)
    shown = json.loads(loader.render(report, "json")[0])
    assert [(f["file"], f["ok"]) for f in shown] == [(str(ROOT / EXAMPLE), True), (str(path), False)]
    assert shown[1]["diagnostics"][0]["path"] == "waves[0].name" and loader.exit_code(report) == 2


def test_placeholders_are_warnings_to_validate_and_errors_to_a_deploy(tmp_path):
    """The example's account and connection are AWS's documentation account, and its specs hold
    placeholders: `validate --pipeline` warns of each; where the pipeline may be deployed, each is
    an error, in the file and at every spec entry that holds one."""
    read = pipeline.load(ROOT / EXAMPLE, root=ROOT)
    assert read.ok
    own = [(d.severity, dotted(d.path)) for d in read.diagnostics
           if d.rule == placeholders.RULE and d.file.endswith("pipeline.yaml")]
    assert own == [("warning", "account"), ("warning", "source.connection_arn")]
    deployed = pipeline.load(ROOT / EXAMPLE, root=ROOT, deploying=True)
    assert not deployed.ok
    entries = {dotted(d.path): d.message for d in deployed.diagnostics
               if d.is_error and d.file.endswith("pipeline.yaml") and d.rule != placeholders.RULE}
    assert entries == {"waves[0].clusters[0].spec": "examples/p5en-reservation-pcs.yaml holds 1 placeholder, and the "
                                                     "pipeline deploys it",
                       "waves[1].clusters[0].spec": "examples/p5-pcs.yaml holds 2 placeholders, and the pipeline "
                                                     "deploys it"}
    assert {d.severity for d in deployed.diagnostics if d.rule == placeholders.RULE} == {"error"}
    # each says once that the app refuses it, in the file and in the specs
    assert {d.hint.count(placeholders.DEPLOY_HINT) for d in deployed.diagnostics if d.rule == placeholders.RULE} == {1}
    # a pipeline of one's own values deploys
    mine = tmp_path / "mine.yaml"
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "p6-b300-pcs.yaml").write_text((EXAMPLES_DIR / "p6-b300-pcs.yaml").read_text())
    mine.write_text(GOOD.replace("111122223333", "381492756031").split("waves:")[0]
                    + "waves:\n  - name: one\n    clusters:\n      - spec: examples/p6-b300-pcs.yaml\n")
    assert pipeline.load(mine, root=tmp_path, deploying=True).ok


def test_cdk_app_refuses_a_pipeline_of_placeholders_where_it_may_deploy(tmp_path):
    """Run by the CDK CLI with credentials (CDK_DEFAULT_ACCOUNT: `cdk deploy`, the pipeline's own
    synthesis in CodeBuild), the app refuses the example pipeline, before Node.js starts."""
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps({"pipeline": EXAMPLE}), "CDK_OUTDIR": str(tmp_path / "out"),
           "CDK_DEFAULT_ACCOUNT": "381492756031", "JSII_NODE": str(tmp_path / "no-node")}
    result = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert f"{EXAMPLE}:5:10: error: account: 111122223333 is an example account of AWS's documentation" in result.stderr
    assert "Node.js" not in result.stderr and "Traceback" not in result.stderr and not (tmp_path / "out").exists()


def test_cdk_app_refuses_an_invalid_pipeline_file(tmp_path):
    path = tmp_path / "pipeline.yaml"
    path.write_text(GOOD.replace("us-east-1\nsource", "us-east-1a\nsource"))
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps({"pipeline": str(path)}),
           "CDK_OUTDIR": str(tmp_path / "out")}
    result = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert f"{path}:3:9: error: region: 'us-east-1a' is an Availability Zone name" in result.stderr
    assert "Traceback" not in result.stderr and not list(tmp_path.glob("out/*.template.json"))


# ---- the pipeline stack ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def assembly(tmp_path_factory):
    """examples/pipeline/pipeline.yaml synthesized once, in-process, with the CLI's context."""
    from fmcluster.deploy.synth import app_context, cdk_json
    from fmcluster_cdk.stacks.pipeline import pipeline_stack
    from fmcluster_cdk.synthesis import new_app

    loaded = pipeline.load(ROOT / EXAMPLE, root=ROOT)
    assert loaded.ok
    outdir = tmp_path_factory.mktemp("pipeline.out")
    app = new_app(str(outdir), app_context(cdk_json(ROOT)))
    pipeline_stack(app, loaded.pipeline)
    return loaded.pipeline, outdir, app.synth()


@pytest.fixture(scope="module")
def template(assembly):
    _, outdir, _ = assembly
    return json.loads((outdir / "gpu-clusters-pipeline.template.json").read_text())


def resources(template, kind):
    return {lid: r for lid, r in template["Resources"].items() if r["Type"] == kind}


@pytest.fixture(scope="module")
def code_pipeline(template):
    (found,) = resources(template, "AWS::CodePipeline::Pipeline").values()
    return found["Properties"]


def actions(code_pipeline, stage):
    (found,) = [s for s in code_pipeline["Stages"] if s["Name"] == stage]
    return found["Actions"]


def buildspec(template, action) -> dict:
    project = template["Resources"][action["Configuration"]["ProjectName"]["Ref"]]
    return json.loads(project["Properties"]["Source"]["BuildSpec"])


def commands(spec: dict) -> list[str]:
    return [c for phase in ("install", "build") for c in spec["phases"].get(phase, {}).get("commands", [])]


def test_pipeline_stack_in_the_pipeline_files_account_and_region(assembly):
    _, _, cloud = assembly
    stack = cloud.get_stack_by_name("gpu-clusters-pipeline")
    assert (stack.environment.account, stack.environment.region) == ("111122223333", "us-east-1")


def test_code_pipeline_named_after_the_file(code_pipeline):
    assert code_pipeline["Name"] == "gpu-clusters"
    assert code_pipeline["PipelineType"] == "V2"


def test_source_is_the_connection_cloned_in_full(code_pipeline):
    (source,) = actions(code_pipeline, "Source")
    assert source["ActionTypeId"]["Provider"] == "CodeStarSourceConnection"
    assert source["Configuration"] == {
        "ConnectionArn": CONNECTION, "FullRepositoryId": "my-org/gpu-clusters", "BranchName": "main",
        "OutputArtifactFormat": "CODEBUILD_CLONE_REF"}


def test_synth_validates_then_synthesizes_this_pipeline_without_the_test_suite(template, code_pipeline):
    """A clone of fmcluster: its development environment, every spec validated, the assembly with
    cdk-nag; fmcluster's own tests are its CI's, never a deploy's."""
    (synth,) = actions(code_pipeline, "Build")
    spec = buildspec(template, synth)
    assert commands(spec) == [
        "make install", ".venv/bin/fmcluster validate --pipeline examples/pipeline/pipeline.yaml",
        "npx --no -- cdk synth -q -c nag=true -c pipeline=examples/pipeline/pipeline.yaml"]
    assert "make test" not in json.dumps(template)
    assert spec["artifacts"]["base-directory"] == "cdk.out"
    # the Node.js LTS of .nvmrc (and of package.json's pinned `node`), which standard:7.0 offers
    assert spec["phases"]["install"]["runtime-versions"] == {"python": "3.12", "nodejs": "24"}
    assert (ROOT / ".nvmrc").read_text().strip() == "24"
    project = template["Resources"][synth["Configuration"]["ProjectName"]["Ref"]]["Properties"]
    assert project["Environment"]["Image"] == "aws/codebuild/standard:7.0"


def test_self_mutating_with_the_pinned_cdk_cli(template, code_pipeline):
    (mutate,) = actions(code_pipeline, "UpdatePipeline")
    installs = " ".join(commands(buildspec(template, mutate)))
    version = json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    assert f"npm install -g aws-cdk@{version}" in installs


# CDK Pipelines names a wave of one stage after that stage: the staging wave is `p5en-train`.
STAGING = "p5en-train"


def test_waves_in_the_files_order(code_pipeline):
    names = [s["Name"] for s in code_pipeline["Stages"] if s["Name"] != "Assets"]  # Assets: when files need publishing
    assert names == ["Source", "Build", "UpdatePipeline", STAGING, "production"]


def cluster_actions(code_pipeline, wave, cluster, many):
    """Actions of one cluster's stage, by name without the cluster prefix (a wave of one stage
    has no prefix), in run order."""
    prefix = f"{cluster}." if many else ""
    found = [a for a in actions(code_pipeline, wave) if many is False or a["Name"].startswith(prefix)]
    return [(a["Name"][len(prefix):], a["ActionTypeId"]["Provider"], a["RunOrder"])
            for a in sorted(found, key=lambda a: a["RunOrder"])]


def deploy_order():
    """Each stack's Prepare (create the change set) and Deploy (execute it); the storage stack's
    change set is judged by Guard in between; Record right after the cluster, before the reference
    image's stack, which nothing waits for (a failed build leaves the cluster recorded, its storage
    protected)."""
    order = [(f"{s}.{step}", "CloudFormation")
             for s in ("network", "storage", "observability", "images", "cluster", "reference")
             for step in ("Prepare", "Deploy")]
    order.insert(order.index(("storage.Deploy", "CloudFormation")), ("storage.Guard", "CodeBuild"))
    order.insert(order.index(("cluster.Deploy", "CloudFormation")) + 1, ("cluster.Record", "CodeBuild"))
    return order


def test_one_stage_per_cluster_diff_first_record_last(code_pipeline):
    staging = cluster_actions(code_pipeline, STAGING, "p5en-train", False)
    assert [(n, p) for n, p, _ in staging] == [("Diff", "CodeBuild"), *deploy_order()]
    assert [o for *_, o in staging] == list(range(1, len(staging) + 1))  # one after the other


def test_manual_approval_only_before_protected_clusters(code_pipeline):
    assert not [a for a in actions(code_pipeline, STAGING) if a["ActionTypeId"]["Provider"] == "Manual"]
    for cluster in ("llm-pretrain", "b300-research"):
        found = cluster_actions(code_pipeline, "production", cluster, True)
        assert [(n, p) for n, p, _ in found] == [("Diff", "CodeBuild"), ("Approve", "Manual"), *deploy_order()]
        orders = [o for *_, o in found]
        assert orders == sorted(set(orders))  # diff, then approval, then deploy: never in parallel
    approvals = [a for a in actions(code_pipeline, "production") if a["ActionTypeId"]["Provider"] == "Manual"]
    custom_data = approvals[0]["Configuration"]["CustomData"]
    assert "llm-pretrain (examples/p5-pcs.yaml) to 111122223333/us-east-1" in custom_data


def test_stages_deploy_the_same_stacks_as_cdk_deploy_of_the_spec(assembly, code_pipeline):
    plan, _, cloud = assembly
    for deployment in plan.deployments:
        stage = cloud.get_nested_assembly(f"assembly-gpu-clusters-pipeline-{deployment.name}")
        stacks = {s.stack_name: s for s in stage.stacks}
        assert sorted(stacks) == sorted(f"{deployment.name}-{k}" for k in
                                        ("network", "storage", "observability", "images", "cluster", "reference"))
        for stack in stacks.values():
            assert stack.environment.account == (deployment.spec.account or "111122223333")
            assert stack.environment.region == deployment.spec.region
        cluster = stacks[f"{deployment.name}-cluster"].template["Resources"]
        assert any(r["Type"] == "AWS::PCS::Cluster" for r in cluster.values())
    deployed = {a["Configuration"]["StackName"] for s in code_pipeline["Stages"] for a in s["Actions"]
                if a["ActionTypeId"]["Provider"] == "CloudFormation"}
    assert "llm-pretrain-storage" in deployed and not any(n.startswith("gpu-clusters") for n in deployed)


def step_policy(template, code_pipeline, wave, name) -> list[dict]:
    (action,) = [a for a in actions(code_pipeline, wave) if a["Name"] == name]
    role = template["Resources"][action["Configuration"]["ProjectName"]["Ref"]]["Properties"]["ServiceRole"]
    role_id = role["Fn::GetAtt"][0]
    (policy,) = [p for p in resources(template, "AWS::IAM::Policy").values()
                 if {"Ref": role_id} in p["Properties"]["Roles"]]
    return policy["Properties"]["PolicyDocument"]["Statement"]


def parameter_arn(cluster):
    return f"arn:aws:ssm:us-east-1:111122223333:parameter/fmcluster/{cluster}/deployed-spec"


def ssm_statements(statements):
    return [s for s in statements if any(str(a).startswith("ssm:") for a in
                                         (s["Action"] if isinstance(s["Action"], list) else [s["Action"]]))]


@pytest.mark.parametrize("wave, action, cluster, path, verb", [
    (STAGING, "Diff", "p5en-train", "examples/p5en-reservation-pcs.yaml", "ssm:GetParameter"),
    ("production", "llm-pretrain.Diff", "llm-pretrain", "examples/p5-pcs.yaml", "ssm:GetParameter"),
    (STAGING, "cluster.Record", "p5en-train", "examples/p5en-reservation-pcs.yaml", "ssm:PutParameter"),
    ("production", "b300-research.cluster.Record", "b300-research", "examples/p6-b300-pcs.yaml", "ssm:PutParameter"),
])
def test_diff_and_record_steps_and_their_least_privilege_roles(template, code_pipeline, wave, action, cluster,
                                                                 path, verb):
    (found,) = [a for a in actions(code_pipeline, wave) if a["Name"] == action]
    run = commands(buildspec(template, found))
    parameter = f"/fmcluster/{cluster}/deployed-spec"
    step = "fmcluster step"  # the installed programs (fmcluster/deploy/steps/*.sh)
    install = "python -m pip install ."  # fmcluster alone, from the clone: not its development environment
    if verb == "ssm:GetParameter":  # with the per-merge allowance, which lifts the stack policy too
        assert run == [install, f"allow=$({step} allowance {cluster}) && {step} diff-deployed "
                                f"{parameter} {path} $allow && if [ -n \"$allow\" ]; then "
                                f"{step} protect-storage {cluster}-storage --lift; fi"]
    else:  # the same account as the pipeline: Record sets the storage stack's policy too
        assert run == [install, f"{step} record-deployed {parameter} {path}",
                       f"{step} protect-storage {cluster}-storage"]
    statements = step_policy(template, code_pipeline, wave, action)
    assert ssm_statements(statements) == [{"Action": verb, "Effect": "Allow", "Resource": parameter_arn(cluster)}]
    stack_policy = [s for s in statements if "cloudformation:SetStackPolicy" in s["Action"]]
    (statement,) = stack_policy  # only that one stack's policy: Record sets it, Diff may lift it
    assert statement["Action"] == ["cloudformation:DescribeStacks", "cloudformation:SetStackPolicy"]
    region = loader.load(ROOT / path).spec.region
    assert statement["Resource"] == f"arn:aws:cloudformation:{region}:111122223333:stack/{cluster}-storage/*"
    for statement in statements:  # the rest: logs, reports, artifacts, the connection; no wildcard resource
        assert statement["Resource"] != "*"
        assert not any(a in ("*", "ssm:*") for a in
                       (statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]))


def test_allow_data_loss_reaches_the_diff_and_guard_steps():
    """The pipeline file's standing allow_data_loss is passed to allowance.sh (which also reads the
    per-merge trailer); the guard gets it too; in another account nothing lifts the stack policy."""
    from fmcluster_cdk.stacks.pipeline import change_set_commands, diff_commands

    result = pipeline.load(ROOT / EXAMPLE, root=ROOT)
    deployment = result.pipeline.deployments[0]
    allowed = pipeline.Deployment(deployment.path, deployment.spec, allow_data_loss=True)
    step = "fmcluster step"
    assert diff_commands(allowed)[0].startswith(f"allow=$({step} allowance {deployment.name} "
                                                "--allow-data-loss) && ")
    assert diff_commands(deployment)[0].startswith(f"allow=$({step} allowance {deployment.name}) && ")
    assert "protect-storage" not in diff_commands(allowed, protect=False)[0]  # another account
    guard = f"{step} guard-change-set {deployment.name} {deployment.name}-storage PipelineChange"
    assert change_set_commands(deployment, None) == [f"{guard} --region {deployment.spec.region}"]
    role = "arn:aws:iam::444455556666:role/cdk-hnb659fds-deploy-role-444455556666-us-west-2"
    assert change_set_commands(allowed, role) == [
        f"{guard} --allow-data-loss --region {deployment.spec.region} --role-arn {role}"]


def test_guard_step_judges_the_storage_change_set_with_a_least_privilege_role(template, code_pipeline):
    for wave, name, cluster in ((STAGING, "storage.Guard", "p5en-train"),
                                ("production", "llm-pretrain.storage.Guard", "llm-pretrain")):
        (found,) = [a for a in actions(code_pipeline, wave) if a["Name"] == name]
        spec = next(d.spec for d in pipeline.load(ROOT / EXAMPLE, root=ROOT).pipeline.deployments
                    if d.name == cluster)
        assert commands(buildspec(template, found)) == [
            "python -m pip install .", f"fmcluster step guard-change-set {cluster} "
                                       f"{cluster}-storage PipelineChange --region {spec.region}"]
        statements = step_policy(template, code_pipeline, wave, name)
        (describe,) = [s for s in statements if "cloudformation:DescribeChangeSet" in str(s["Action"])]
        assert describe == {"Action": "cloudformation:DescribeChangeSet", "Effect": "Allow",
                            "Resource": f"arn:aws:cloudformation:{spec.region}:111122223333:stack/{cluster}-storage/*"}
        assert not [s for s in statements if "sts:AssumeRole" in str(s["Action"])]


def test_guard_step_in_another_account_assumes_its_cdk_deploy_role(tmp_path):
    from fmcluster.deploy.synth import app_context, cdk_json
    from fmcluster_cdk.stacks.pipeline import pipeline_stack
    from fmcluster_cdk.synthesis import new_app

    text = (ROOT / EXAMPLE).read_text().replace("      - spec: examples/p5en-reservation-pcs.yaml",
                                                "      - spec: other.yaml")
    spec = (ROOT / "examples/p5en-reservation-pcs.yaml").read_text().replace(
        "region: us-west-2", 'region: us-west-2\naccount: "444455556666"')
    assert 'account: "444455556666"' in spec
    (tmp_path / "examples").mkdir()
    (tmp_path / "other.yaml").write_text(spec)
    for name in ("p5-pcs.yaml", "p6-b300-pcs.yaml"):
        (tmp_path / "examples" / name).write_text((EXAMPLES_DIR / name).read_text())
    (tmp_path / "pipeline.yaml").write_text(text)
    loaded = pipeline.load(tmp_path / "pipeline.yaml", root=tmp_path)
    assert loaded.ok, loaded.diagnostics
    app = new_app(str(tmp_path / "out"), app_context(cdk_json(ROOT)))
    pipeline_stack(app, loaded.pipeline)
    app.synth()
    built = json.loads((tmp_path / "out/gpu-clusters-pipeline.template.json").read_text())
    (stages,) = resources(built, "AWS::CodePipeline::Pipeline").values()
    (guard,) = [a for a in actions(stages["Properties"], STAGING) if a["Name"] == "storage.Guard"]
    role = "arn:aws:iam::444455556666:role/cdk-hnb659fds-deploy-role-444455556666-us-west-2"
    assert commands(buildspec(built, guard))[-1] == (
        "fmcluster step guard-change-set p5en-train p5en-train-storage PipelineChange "
        f"--region us-west-2 --role-arn {role}")
    statements = step_policy(built, stages["Properties"], STAGING, "storage.Guard")
    (assume,) = [s for s in statements if "sts:AssumeRole" in str(s["Action"])]
    assert assume == {"Action": "sts:AssumeRole", "Effect": "Allow", "Resource": role}
    assert not [s for s in statements if "cloudformation:DescribeChangeSet" in str(s["Action"])]
    # Record runs the installed step program there too, without the stack policy (another account)
    (record,) = [a for a in actions(stages["Properties"], STAGING) if a["Name"] == "cluster.Record"]
    assert commands(buildspec(built, record)) == [
        "python -m pip install .", "fmcluster step record-deployed /fmcluster/p5en-train/deployed-spec other.yaml"]


def test_resource_types_of_every_policy(assembly):
    """The resource-type linter (tests/support/iam_lint.py) on every template of the pipeline's assembly,
    the clusters' stages included. The one finding it leaves is CDK Pipelines' own statement
    codestar-connections:UseConnection on the connection, in each role that uses it: the example's
    connection has the new codeconnections ARN, which IAM policies of the old prefix do not reach
    (Developer Tools console User Guide, troubleshooting connections). fmcluster_cdk/stacks/pipeline.py gives each
    of those roles codeconnections:UseConnection on it."""
    _, outdir, cloud = assembly
    stacks = {s.stack_name: s.template for s in cloud.stacks_recursively}
    templates = list(stacks.values()) + [json.loads(p.read_text()) for p in outdir.rglob("*.nested.template.json")]
    found = [f for t in templates for f in iam_lint.findings(t, stacks)]
    assert found and {(f.action, f.message.split(";")[0]) for f in found} == {
        ("codestar-connections:UseConnection", "needs a resource of type Connection* (SAR)")}
    pipeline_template = stacks["gpu-clusters-pipeline"]
    for finding in found:
        role = finding.logical_id.strip("${}")
        granted = [s for r in pipeline_template["Resources"].values()
                   if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
                   for s in r["Properties"]["PolicyDocument"]["Statement"]]
        assert any("codeconnections:UseConnection" in json.dumps(s["Action"]) and s["Resource"] == CONNECTION
                   for s in granted), role


def test_cfn_lint_clean(assembly):
    from tests.support.cfn_lint import findings

    _, outdir, _ = assembly
    templates = sorted(outdir.glob("*.template.json"))
    assert len(templates) == 3  # the pipeline, and its replication buckets in us-east-2 and us-west-2
    for path in templates:
        found = [m for m in findings(path) if m.rule.id.startswith("E")]
        assert not found, f"{path.name}: " + "; ".join(str(m) for m in found)


# ---- the step scripts ---------------------------------------------------------------------------

def test_step_scripts_are_shellcheck_clean(tmp_path):
    assert_shellcheck_clean(tmp_path, {p.stem: p.read_text() for p in STEPS.glob("*.sh")})


AWS_STUB = """#!/bin/bash
echo "aws $*" >> "$LOG"
case "$2" in
  get-parameter)
    if [ -n "${FAIL:-}" ]; then
      echo "An error occurred (AccessDeniedException) when calling the GetParameter operation" >&2; exit 254
    fi
    if [ -z "${DEPLOYED:-}" ]; then
      echo "An error occurred (ParameterNotFound) when calling the GetParameter operation: " >&2; exit 254
    fi
    echo "$DEPLOYED" ;;
  describe-stacks)
    if [ -n "${NO_STACK:-}" ]; then
      echo "An error occurred (ValidationError) when calling DescribeStacks: Stack with id $4 does not exist" >&2
      exit 254
    fi
    if [ -n "${FAIL:-}" ]; then
      echo "An error occurred (AccessDenied) when calling the DescribeStacks operation" >&2; exit 254
    fi ;;
esac
"""
FMCLUSTER_STUB = """#!/bin/bash
echo "fmcluster $*" >> "$LOG"
cp "$2" "$LOG.old"
exit "${DIFF_STATUS:-0}"
"""


@pytest.fixture
def repo(tmp_path):
    """A git repository with two commits of a spec, a stub `aws` on PATH and a stub fmcluster."""
    work = tmp_path / "repo"
    (work / "examples").mkdir(parents=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("aws", AWS_STUB), ("fmcluster", FMCLUSTER_STUB)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(tmp_path / "log"), "HOME": str(tmp_path),
           "FMCLUSTER": str(bin_dir / "fmcluster"), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}
    git = lambda *args: subprocess.run(["git", *args], cwd=work, env=env, check=True,  # noqa: E731
                                       capture_output=True, text=True).stdout.strip()
    git("init", "-q")
    commits = []
    for version in ("first", "second"):
        (work / "examples/c.yaml").write_text(f"name: {version}\n")
        git("add", ".")
        git("commit", "-q", "-m", version)
        commits.append(git("rev-parse", "HEAD"))
    return work, env, commits


def step(repo, script, *args, **extra):
    work, env, _ = repo
    return subprocess.run(["bash", str(STEPS / script), *args], cwd=work, env={**env, **extra},
                          capture_output=True, text=True)


def log(repo) -> str:
    path = Path(repo[1]["LOG"])
    return path.read_text() if path.exists() else ""


def test_diff_step_passes_on_first_deploy(repo):
    result = step(repo, "diff-deployed.sh", "/fmcluster/c/deployed-spec", "examples/c.yaml")
    assert result.returncode == 0, result.stderr
    assert "first deploy" in result.stdout
    assert log(repo) == ("aws ssm get-parameter --name /fmcluster/c/deployed-spec "
                         "--query Parameter.Value --output text\n")


@pytest.mark.parametrize("status", [0, 1, 2])
def test_diff_step_compares_with_the_spec_as_last_deployed(repo, status):
    _, _, (first, _) = repo
    result = step(repo, "diff-deployed.sh", "/fmcluster/c/deployed-spec", "examples/c.yaml",
                  DEPLOYED=f"{first}:examples/c.yaml", DIFF_STATUS=str(status))
    assert result.returncode == status  # 1 (data loss) or 2 (invalid) stops the pipeline
    calls = log(repo).splitlines()
    assert re.fullmatch(rf"fmcluster diff /\S+/{first[:12]}/examples/c\.yaml examples/c\.yaml", calls[-1])
    assert Path(repo[1]["LOG"] + ".old").read_text() == "name: first\n"


def test_diff_step_passes_allow_data_loss_on(repo):
    _, _, (first, _) = repo
    step(repo, "diff-deployed.sh", "/p", "examples/c.yaml", "--allow-data-loss", DEPLOYED=f"{first}:examples/c.yaml")
    assert log(repo).splitlines()[-1].endswith("examples/c.yaml --allow-data-loss")


def test_diff_step_reads_a_renamed_spec_from_its_old_path(repo):
    work, env, (_, second) = repo
    subprocess.run(["git", "mv", "examples/c.yaml", "examples/renamed.yaml"], cwd=work, env=env, check=True)
    result = step(repo, "diff-deployed.sh", "/p", "examples/renamed.yaml", DEPLOYED=f"{second}:examples/c.yaml")
    assert result.returncode == 0, result.stderr
    assert Path(repo[1]["LOG"] + ".old").read_text() == "name: second\n"


@pytest.mark.parametrize("extra, message", [
    ({"FAIL": "1"}, "cannot read /p"),  # no silent pass when the parameter cannot be read
    ({"DEPLOYED": "0123456789abcdef0123456789abcdef01234567:examples/c.yaml"}, "is not in this clone"),
])
def test_diff_step_fails_when_it_cannot_compare(repo, extra, message):
    result = step(repo, "diff-deployed.sh", "/p", "examples/c.yaml", **extra)
    assert result.returncode == 1 and message in result.stderr
    assert "fmcluster diff" not in log(repo)


def test_record_step_writes_commit_and_path(repo):
    _, _, (_, second) = repo
    result = step(repo, "record-deployed.sh", "/fmcluster/c/deployed-spec", "examples/c.yaml")
    assert result.returncode == 0, result.stderr
    assert log(repo) == ("aws ssm put-parameter --name /fmcluster/c/deployed-spec --type String --overwrite "
                         f"--value {second}:examples/c.yaml\n")


REAL_FMCLUSTER = str(ROOT / ".venv" / "bin" / "fmcluster")
REVIEW_STUB = """#!/bin/bash
case "$1 $*" in
  diff*) echo "stack c-storage: 1 replace"; exit "${DIFF_STATUS:-0}" ;;
  *json*) if grep -q first "$2"; then echo '{"cost": {"hourly_usd_max": 10.5}}'
          else echo '{"cost": {"hourly_usd_max": 21.0}}'; fi ;;
  *markdown*) echo "# fmcluster plan: c" ;;
esac
"""


@pytest.mark.parametrize("status", [0, 1])
def test_review_comment_shows_the_change_and_the_cost_above_the_plan_and_keeps_the_verdict(repo, status, tmp_path):
    _, _, (first, _) = repo
    stub = tmp_path / "review-fmcluster"
    stub.write_text(REVIEW_STUB)
    stub.chmod(0o755)
    result = step(repo, "review-comment.sh", first, "examples/c.yaml", str(tmp_path / "status"),
                  FMCLUSTER=str(stub), PYTHON=sys.executable, DIFF_STATUS=str(status))
    assert result.returncode == 0, result.stderr  # the comment is written whatever the guard says
    comment = result.stdout
    assert comment.startswith("<!-- fmcluster-review -->\n")  # the marker the post step updates by
    assert comment.index("stack c-storage: 1 replace") < comment.index("# fmcluster plan: c")
    assert "$10.5 before, $21.0 after" in comment
    assert ("The guard fails (exit 1)" in comment) == bool(status)
    assert (tmp_path / "status").read_text().strip() == str(status)


def test_review_comment_of_a_new_spec(repo, tmp_path):
    stub = tmp_path / "review-fmcluster"
    stub.write_text(REVIEW_STUB)
    stub.chmod(0o755)
    result = step(repo, "review-comment.sh", "0" * 40, "examples/c.yaml", str(tmp_path / "status"),
                  FMCLUSTER=str(stub), PYTHON=sys.executable)
    assert "is new on this branch" in result.stdout and "# fmcluster plan: c" in result.stdout
    assert (tmp_path / "status").read_text().strip() == "0"


def commit(repo, message: str) -> None:
    work, env, _ = repo
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", message], cwd=work, env=env, check=True)


@pytest.mark.parametrize("message, allowed", [
    ("Move the file system\n\nAllow-Data-Loss: c", True),
    ("Two clusters\n\nAllow-Data-Loss: other, c", True),
    ("Squashed\n\nSigned-off-by: t <t@e>\nAllow-Data-Loss: c\nCo-authored-by: u <u@e>", True),
    ("Another cluster\n\nAllow-Data-Loss: c-2", False),
    ("Only in the body: Allow-Data-Loss: c, not a trailer\n\nmore text", False),
    ("Nothing said", False),
])
def test_allowance_is_the_trailer_of_the_commit_being_deployed(repo, message, allowed):
    commit(repo, message)
    result = step(repo, "allowance.sh", "c")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ("--allow-data-loss\n" if allowed else "")
    if allowed:
        assert "allowed for this deploy by the trailer" in result.stderr
    # the next merge is guarded again
    commit(repo, "The next change")
    assert step(repo, "allowance.sh", "c").stdout == ""


def test_allowance_passes_on_the_pipeline_files_standing_switch(repo):
    result = step(repo, "allowance.sh", "c", "--allow-data-loss")
    assert result.stdout == "--allow-data-loss\n" and "allow_data_loss: true" in result.stderr


@pytest.mark.parametrize("message, standing, flag", [
    ("Nothing said", (), ""), ("Allowed\n\nAllow-Data-Loss: c", (), " --allow-data-loss"),
    ("Nothing said", ("--allow-data-loss",), " --allow-data-loss")])
def test_guard_step_runs_fmcluster_change_set_with_the_allowance(repo, message, standing, flag):
    commit(repo, message)
    result = step(repo, "guard-change-set.sh", "c", "c-storage", "PipelineChange", *standing,
                  "--region", "us-east-1", DIFF_STATUS="1")
    assert result.returncode == 1  # fmcluster change-set's status
    assert log(repo).splitlines()[-1] == f"fmcluster change-set c-storage PipelineChange{flag} --region us-east-1"


@pytest.mark.parametrize("flag, policy", [((), "protecting"), (("--lift",), "lifting")])
def test_protect_step_sets_the_storage_stack_policy(repo, flag, policy):
    from fmcluster.deploy import stack_policy

    result = step(repo, "protect-storage.sh", "c-storage", *flag, FMCLUSTER=REAL_FMCLUSTER)
    assert result.returncode == 0, result.stderr
    calls = log(repo).splitlines()
    assert calls[0] == "aws cloudformation describe-stacks --stack-name c-storage --query Stacks[0].StackName " \
                       "--output text"
    prefix = "aws cloudformation set-stack-policy --stack-name c-storage --stack-policy-body "
    assert calls[1].startswith(prefix)
    body = json.loads(calls[1].removeprefix(prefix) + "\n".join(calls[2:]))  # the JSON spans lines
    assert body == getattr(stack_policy, policy)()


def test_protect_step_on_a_stack_not_deployed_yet_passes_and_fails_on_other_errors(repo):
    result = step(repo, "protect-storage.sh", "c-storage", "--lift", FMCLUSTER=REAL_FMCLUSTER, NO_STACK="1")
    assert result.returncode == 0 and "no such stack yet" in result.stdout
    result = step(repo, "protect-storage.sh", "c-storage", FMCLUSTER=REAL_FMCLUSTER, FAIL="1")
    assert result.returncode == 1 and "cannot read the stack" in result.stderr
    assert "set-stack-policy" not in log(repo)


def test_the_stack_policy_guards_every_stateful_type_of_a_storage_stack(assembly):
    """Every resource type the storage stacks of the pipeline's clusters hold that holds data (the
    one list `fmcluster diff` and `change-set` judge by: file system, buckets, key) is one the
    policy denies replacing or deleting, and so are the file system's links and security group.
    Retained ingress rules are not: a new rule holds no data."""
    from fmcluster.deploy import cfn_schemas, stack_policy

    guarded = stack_policy.protecting()["Statement"][1]["Condition"]["StringEquals"]["ResourceType"]
    _, outdir, _ = assembly
    storage = list(outdir.rglob("*storage*.template.json"))  # artifact ids: the stage path, then NAME-storage
    assert len(storage) == 3
    for path in storage:
        for resource in json.loads(path.read_text())["Resources"].values():
            if cfn_schemas.holds_data(resource["Type"]) or resource["Type"] in (
                    "AWS::EC2::SecurityGroup", "AWS::FSx::DataRepositoryAssociation"):
                assert resource["Type"] in guarded, (path.name, resource["Type"])
    assert set(guarded) >= {"AWS::FSx::FileSystem", "AWS::S3::Bucket", "AWS::KMS::Key"}


# ---- GitHub Actions -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def workflow():
    return yaml.safe_load(WORKFLOW.read_text())


def run_lines(job) -> str:
    return "\n".join(s.get("run", "") for s in job["steps"])


def uses(job) -> list[str]:
    return [s["uses"] for s in job["steps"] if "uses" in s]


def test_workflow_triggers_and_jobs(workflow):
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert triggers == {"pull_request": {"branches": ["main"]}, "push": {"branches": ["main"]}}
    assert workflow["permissions"] == {"contents": "read"}
    assert workflow["jobs"]["review"]["if"] == "github.event_name == 'pull_request'"
    assert workflow["jobs"]["deploy"]["if"] == "github.event_name == 'push'"


def test_only_the_deploy_job_gets_an_oidc_token(workflow):
    review, deploy = workflow["jobs"]["review"], workflow["jobs"]["deploy"]
    assert deploy["permissions"] == {"contents": "read", "id-token": "write"}
    assert "id-token" not in review["permissions"]
    (credentials,) = [s for s in deploy["steps"]
                      if s.get("uses", "").startswith("aws-actions/configure-aws-credentials@")]
    assert set(credentials["with"]) == {"role-to-assume", "aws-region"}  # no stored keys
    assert not [s for s in review["steps"] if "configure-aws-credentials" in s.get("uses", "")]


def test_actions_pinned_to_versions(workflow):
    for job in workflow["jobs"].values():
        for action in uses(job):
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@v\d+\.\d+\.\d+", action), action


# The first major version of each action that runs on Node 24 (`runs.using: node24` in its
# action.yml); the majors before run on Node 20, which is past end of life.
NODE24_MAJOR = {"actions/checkout": 5, "actions/setup-python": 6, "actions/setup-node": 5,
                "actions/upload-artifact": 6, "aws-actions/configure-aws-credentials": 6}


def test_workflow_runs_on_the_node_lts_of_nvmrc(workflow):
    """setup-node installs the Node.js that .nvmrc names (the major of package.json's pinned `node`),
    and every action runs on Node 24 itself."""
    for job in workflow["jobs"].values():
        (setup,) = [s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-node@")]
        assert setup["with"]["node-version-file"] == ".nvmrc" and "node-version" not in setup["with"]
        for action in uses(job):
            name, version = action.split("@")
            assert int(version.lstrip("v").split(".")[0]) >= NODE24_MAJOR[name], action
    assert "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION" not in WORKFLOW.read_text()


def test_review_job_validates_synthesizes_diffs_and_publishes_the_plan(workflow):
    review = workflow["jobs"]["review"]
    script = run_lines(review)
    for command in ('make test', '.venv/bin/fmcluster validate "$SPEC"', '.venv/bin/fmcluster synth "$SPEC"',
                    'review-comment.sh "origin/$BASE" "$SPEC" "$RUNNER_TEMP/diff-status" > plan.md',
                    'gh pr comment "$PR" --body-file plan.md', '-X PATCH', 'startswith("<!-- fmcluster-review -->")',
                    'exit "$(cat "$RUNNER_TEMP/diff-status")"'):
        assert command in script, command
    (upload,) = [s for s in review["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert "plan.md" in upload["with"]["path"]
    assert review["permissions"]["pull-requests"] == "write"
    # posted even when the guard fails; the job fails after that, in its last step
    post = next(s for s in review["steps"] if s.get("name", "").startswith("Post the plan"))
    assert post["if"].startswith("always()") and upload["if"] == "always()"
    assert review["steps"][-1]["run"] == 'exit "$(cat "$RUNNER_TEMP/diff-status")"'


def test_deploy_job_diffs_then_deploys_then_records(workflow):
    script = run_lines(workflow["jobs"]["deploy"]) + "\n"
    order = ["make test", "allowance.sh", "diff-deployed.sh", 'protect-storage.sh "$CLUSTER-storage" --lift',
             'cdk deploy -c spec="$SPEC" "$CLUSTER-network" --exclusively',
             'cdk deploy -c spec="$SPEC" "$CLUSTER-storage" --exclusively --require-approval never '
             '--method=prepare-change-set --change-set-name fmcluster-guard',
             'guard-change-set.sh "$CLUSTER" "$CLUSTER-storage" fmcluster-guard \\\n  ${ALLOW:+"$ALLOW"} '
             '--region "$AWS_REGION" --format json > "$RUNNER_TEMP/verdict.json"',
             # the judged change set itself is executed (an empty one dropped), then the rest
             '--method=execute-change-set --change-set-name fmcluster-guard',
             'aws cloudformation delete-change-set --stack-name "$CLUSTER-storage" --change-set-name fmcluster-guard',
             'cdk deploy -c spec="$SPEC" --all', "record-deployed.sh", 'protect-storage.sh "$CLUSTER-storage"\n']
    assert [script.index(c) for c in order] == sorted(script.index(c) for c in order)
    assert workflow["env"]["SPEC"] == "examples/p5-pcs.yaml"
    assert workflow["env"]["CLUSTER"] == loader.load(ROOT / "examples/p5-pcs.yaml").spec.name


def test_workflow_uses_the_commands_the_readme_documents(workflow):
    readme = (ROOT / "docs" / "gitops.md").read_text()
    for command in ("make test", "fmcluster validate", "fmcluster synth", "fmcluster plan", "--format markdown",
                    "fmcluster diff", "cdk deploy -c spec=", "examples/github-actions/deploy.yml",
                    "examples/github-actions/oidc-role.yaml"):
        assert command in readme, command
    assert "make tools" in run_lines(workflow["jobs"]["review"])  # promtool and shellcheck: CI=true needs them


def test_actionlint():
    """actionlint (tests.support.tools.actionlint) finds nothing in the example workflow:
    expressions, action inputs, job needs, shell scripts."""
    result = actionlint([WORKFLOW], cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passed" in result.stdout


def test_actionlint_catches_a_broken_workflow(tmp_path):
    """The linter above is live: an undefined context property and an unknown action input fail,
    each in its own file of one run, with a clean file beside them."""
    (tmp_path / "broken.yml").write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                                         "      - run: echo ${{ github.no_such_thing }}\n")
    (tmp_path / "input.yml").write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                                        "      - uses: actions/checkout@v4\n        with: {no-such-input: 1}\n")
    (tmp_path / "clean.yml").write_text(WORKFLOW.read_text())
    result = actionlint(sorted(tmp_path.glob("*.yml")), cwd=tmp_path)
    assert result.returncode != 0
    findings = [line for line in result.stdout.splitlines() if re.match(r"^\S+\.yml:\d+:\d+ ", line)]
    assert {line.split(":")[0] for line in findings} == {"broken.yml", "input.yml"}, result.stdout
    assert "no_such_thing" in result.stdout and "no-such-input" in result.stdout


def test_oidc_role_is_cfn_lint_clean_and_scoped_to_repository_and_branch():
    from tests.support.cfn_lint import findings

    found = [m for m in findings(OIDC_ROLE) if m.rule.id[0] in "EW"]
    assert not found, "; ".join(str(m) for m in found)
    from cfnlint.decode import decode

    template, problems = decode(str(OIDC_ROLE))
    assert not problems
    role = template["Resources"]["DeployRole"]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert set(trust["Condition"]) == {"StringEquals"}  # no StringLike wildcards
    conditions = trust["Condition"]["StringEquals"]
    assert conditions["token.actions.githubusercontent.com:aud"] == "sts.amazonaws.com"
    branch = {"Fn::Sub": "repo:${Repository}:ref:refs/heads/${Branch}"}
    assert conditions["token.actions.githubusercontent.com:sub"] == branch
    actions_allowed = {a for s in role["Policies"][0]["PolicyDocument"]["Statement"]
                       for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])}
    assert actions_allowed == {"sts:AssumeRole", "ssm:GetParameter", "ssm:PutParameter",
                               "cloudformation:DescribeStacks", "cloudformation:SetStackPolicy",
                               "cloudformation:DescribeChangeSet", "cloudformation:DeleteChangeSet"}
    assert iam_lint.findings(json.loads(json.dumps(template))) == []  # every call allowed as granted


# ---- the README ---------------------------------------------------------------------------------

def test_readme_section_and_its_pipeline_file_example():
    readme = (ROOT / "docs" / "gitops.md").read_text()
    assert readme.startswith("# Deploying with GitOps\n")
    section = readme
    assert f"-c pipeline={EXAMPLE}" in section
    (block,) = re.findall(r"```yaml\n(.*?)```", section, re.S)[:1]
    config = pipeline.PipelineSpec.model_validate(yaml.safe_load(block))  # the documented format parses
    assert config.waves[-1].clusters[0].protected


# ---- the asset publishing steps -----------------------------------------------------------------

def asset_roles(template) -> dict[str, list[dict]]:
    """Role logical id -> the statements of its policies, for CDK Pipelines' asset roles."""
    roles = [lid for lid, r in resources(template, "AWS::IAM::Role").items() if lid.startswith("PipelineAssets")]
    return {role: [s for r in resources(template, "AWS::IAM::Policy").values()
                   if {"Ref": role} in r["Properties"]["Roles"]
                   for s in r["Properties"]["PolicyDocument"]["Statement"]] for role in roles}


def test_asset_roles_start_no_codebuild_project(template, code_pipeline):
    """CDK Pipelines gives its asset role codebuild:StartBuild/StopBuild/BatchGetBuilds on every
    project of the account; fmcluster_cdk/stacks/pipeline.py takes it out (the asset builds start none, and
    CodePipeline starts them through the CodeBuild action role, on each project only)."""
    roles = asset_roles(template)
    assert roles  # the example's node groups' nested stacks are file assets
    for role, statements in roles.items():
        assert not [s for s in statements if "codebuild:StartBuild" in json.dumps(s["Action"])], role
        assert all(s["Resource"] != "*" for s in statements), role
    (assets,) = [s for s in code_pipeline["Stages"] if s["Name"] == "Assets"]
    action_roles = {json.dumps(a["RoleArn"]) for a in assets["Actions"]}
    assert not action_roles & {json.dumps({"Fn::GetAtt": [role, "Arn"]}) for role in roles}
    for role_arn in action_roles:
        role = json.loads(role_arn)["Fn::GetAtt"][0]
        starts = [s for r in resources(template, "AWS::IAM::Policy").values()
                  if {"Ref": role} in r["Properties"]["Roles"]
                  for s in r["Properties"]["PolicyDocument"]["Statement"] if "codebuild:StartBuild" in json.dumps(s)]
        assert starts and all(s["Resource"] != "*" for s in starts)


def test_assets_are_published_by_the_pinned_cdk_cli(assembly, template, code_pipeline):
    """One asset project (publish_assets_in_parallel=False), its buildspec the CDK CLI's: the pinned
    release installed, then `cdk publish-assets` of each stage's assembly (cdk-assets 4.7.3, what CDK
    Pipelines installs, reads no assembly of schema 55). tests/deploy/test_pipeline_assets.py runs it."""
    _, outdir, _ = assembly
    (action,) = actions(code_pipeline, "Assets")
    assert action["InputArtifacts"] == [{"Name": "Synth_Output"}]  # the assembly root
    spec = buildspec(template, action)
    version = json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    stages = [f"assembly-gpu-clusters-pipeline-{name}" for name in ("p5en-train", "llm-pretrain", "b300-research")]
    assert sorted(p.name for p in outdir.glob("assembly-*")) == sorted(stages)  # each cluster's assembly
    assert commands(spec) == [f"npm install -g aws-cdk@{version}"] + [
        f"cdk publish-assets --unstable=publish-assets --no-notices --app {stage} --all" for stage in stages]
    assert spec["phases"]["install"]["runtime-versions"] == {"python": "3.12", "nodejs": "24"}
    assert "cdk-assets" not in json.dumps(template)


def test_asset_role_assumes_the_stages_publishing_and_deploy_roles_only(template):
    """The CLI writes with each stage environment's file-publishing role, as cdk-assets did, and reads
    the bootstrap version (SSM) through the stack's deploy role first, as `cdk deploy` does."""
    from fmcluster_cdk.stacks.pipeline import iam_actions

    ((role, statements),) = asset_roles(template).items()
    assumed = [json.dumps(r) for s in statements if "sts:AssumeRole" in iam_actions(s)
               for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])]
    expected = [json.dumps({"Fn::Sub": f"arn:${{AWS::Partition}}:iam::111122223333:role/cdk-hnb659fds-{kind}-role-"
                                       f"111122223333-{region}"})
                for kind in ("deploy", "file-publishing") for region in ("us-east-1", "us-east-2", "us-west-2")]
    assert sorted(assumed) == sorted(expected), role
