"""`fmcluster init DIR`, as a user runs it: the project it writes validates, plans and synthesizes
from its own directory (not the repository's: no examples/, no cdk.json of the repository's);
every control plane and GPU instance type gives a spec that validates, or a refusal in one line
and a hint; nothing is ever written over. The wheel's own test (tests/project/test_wheel.py)
synthesizes such a project with the CDK CLI and the installed console script of cdk.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from fmcluster.deploy import init, init_workflows
from fmcluster.facts import catalog, controlplanes, nodejs
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader, placeholders
from fmcluster.spec.diagnostics import one_line
from tests.support import iam_lint
from tests.support.paths import ROOT
from tests.support.tools import actionlint

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "AWS_EC2_METADATA_DISABLED": "true"}


def fmcluster(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The repository's fmcluster, run in `cwd`."""
    return subprocess.run([sys.executable, "-m", "fmcluster", *args], cwd=cwd, env=ENV, capture_output=True,
                          text=True)


@pytest.mark.parametrize("orchestrator", init.ORCHESTRATORS)
def test_a_new_project_validates_and_plans_in_its_own_directory(tmp_path, orchestrator):
    made = fmcluster("init", "my-cluster", "--orchestrator", orchestrator, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    project = tmp_path / "my-cluster"
    written = ["cluster.yaml", "cdk.json", ".gitignore", ".github/workflows/fmcluster.yml", "requirements.txt",
               "pipeline.yaml", ".github/workflows/deploy.yml", ".github/oidc-role.yaml"]
    assert sorted(p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file()) == sorted(written)
    for name in written:
        assert f"wrote my-cluster/{name}" in made.stdout
    assert "fmcluster validate cluster.yaml" in made.stdout and "npx aws-cdk synth" in made.stdout
    # the next commands review; deploying is the user's own step, which the lines after them explain
    following = made.stdout.split("\nnext: ")[1].split("\nto deploy from GitHub Actions")[0]
    assert "deploy" not in following
    validated = fmcluster("validate", "cluster.yaml", cwd=project)
    assert (validated.returncode, validated.stdout) == (0, "cluster.yaml: ok\n")
    # what it warns of is the placeholders to replace, each on a line that says `put yours`
    warned = [line for line in validated.stderr.splitlines() if ": warning: " in line]
    assert warned and all(line.endswith(f"[{placeholders.RULE}]") for line in warned), validated.stderr
    lines = (project / "cluster.yaml").read_text().splitlines()
    assert all("put your" in lines[int(line.split(":")[1]) - 1] for line in warned)
    planned = fmcluster("plan", "cluster.yaml", cwd=project)
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout.startswith("fmcluster plan: my-cluster (us-east-1")
    spec = yaml.safe_load((project / "cluster.yaml").read_text())
    assert spec["orchestrator"]["type"] == orchestrator and spec["name"] == "my-cluster"


@pytest.mark.parametrize("orchestrator", init.ORCHESTRATORS)
@pytest.mark.parametrize("instance_type", init.instance_types())
def test_every_combination_validates_or_is_refused(tmp_path, orchestrator, instance_type):
    """Every spec init writes validates, without a warning but its placeholders' (the values it
    marks `put yours`: tests/spec/test_rules_placeholders.py) and the one validate gives P6e-GB200
    on AWS PCS (PCS documents no layout for its EFA-only cards), which init prints; a combination it
    refuses is one the spec rules refuse (P6e-GB200 on HyperPod Slurm), and then nothing is written."""
    report = init.run(str(tmp_path / "c"), orchestrator, instance_type, name="my-cluster")
    if report.error is None:
        result = loader.load(tmp_path / "c" / "cluster.yaml")
        warned = [d.rule for d in result.diagnostics if d.rule != placeholders.RULE]
        expected = ["pcs-efa-only-interfaces"] if (orchestrator, instance_type) == ("pcs", "p6e-gb200.36xlarge") else []
        assert result.ok and warned == expected, [d.format() for d in result.diagnostics]
        assert report.warnings == tuple(d.format() for d in result.diagnostics)
        assert init.render(report)[1] == "".join(f"{w}\n" for w in report.warnings)
        assert result.spec is not None and result.spec.node_groups[0].instance_type == instance_type
        assert init.exit_code(report) == 0
        return
    assert (orchestrator, instance_type) == ("hyperpod-slurm", "p6e-gb200.36xlarge"), report.error
    assert not (tmp_path / "c").exists()
    assert init.exit_code(report) == 2


def test_the_spec_has_a_comment_on_every_field(tmp_path):
    """Each line that holds a field (or a list item) says what it is, after `#`."""
    for orchestrator in init.ORCHESTRATORS:
        text = init.spec_text(orchestrator, "p5.48xlarge", "my-cluster", "us-east-1", "use1-az4")
        fields = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
        assert len(fields) > 30
        assert [line for line in fields if "  # " not in line] == []
        # the comment is no part of the value: the spec reads the same without them
        stripped = "\n".join(line.split("  # ")[0] for line in text.splitlines())
        assert yaml.safe_load(stripped) == yaml.safe_load(text)


def test_an_ultraserver_type_gets_its_block_and_local_zone():
    text = init.spec_text("pcs", "p6e-gb200.36xlarge", "gb200", "us-east-1",
                          init.default_az_id("us-east-1", "pcs", "p6e-gb200.36xlarge"))
    spec = yaml.safe_load(text)
    group = spec["node_groups"][0]
    server = catalog.ULTRASERVERS[group["capacity"]["ultraserver_type"]]
    assert group["count"] == server.instances and group["capacity"]["type"] == "capacity-block"
    assert spec["availability_zone_id"] == "use1-dfw2-az1"
    # HyperPod builds in Availability Zones only: its UltraServer groups go to the region's AZ
    assert init.default_az_id("us-east-1", "hyperpod-eks", "p6e-gb200.36xlarge") == "use1-az4"


def test_the_choices_are_the_facts():
    parser_choices = {a.dest: a.choices for a in _init_parser()._actions}
    assert tuple(parser_choices["orchestrator"]) == controlplanes.ORCHESTRATOR_TYPES
    assert list(parser_choices["instance_type"]) == catalog.known_names(gpu_only=True)


def _init_parser():
    from fmcluster.cli import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    return sub.choices["init"]


def test_help_says_what_it_writes_an_example_and_exit_codes():
    text = _init_parser().format_help()
    assert "cluster.yaml" in text and "examples:\n  fmcluster init " in text and "exit codes:" in text


def test_a_region_and_az_of_the_user_s(tmp_path):
    made = fmcluster("init", "c", "--region", "eu-north-1", "--az-id", "eun1-az2", "--name", "eu-train",
                     "--orchestrator", "eks", "--instance-type", "p5en.48xlarge", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    spec = yaml.safe_load((tmp_path / "c" / "cluster.yaml").read_text())
    assert (spec["name"], spec["region"], spec["availability_zone_id"]) == ("eu-train", "eu-north-1", "eun1-az2")
    assert spec["network"]["extra_availability_zone_ids"] == ["eun1-az1"]
    assert loader.load(tmp_path / "c" / "cluster.yaml").ok


def refusal(result: subprocess.CompletedProcess[str]) -> str:
    """The refusal's text, after checking its shape: exit 2, nothing on stdout, one line and a hint."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    error, hint = result.stderr.splitlines()
    assert error.startswith("error: ") and hint.startswith("  hint: ")
    return result.stderr


def test_a_directory_with_files_is_refused_and_left_alone(tmp_path):
    project = tmp_path / "mine"
    (project / ".github").mkdir(parents=True)
    (project / "cluster.yaml").write_text("my own\n")
    assert "mine is not empty" in refusal(fmcluster("init", "mine", cwd=tmp_path))
    assert (project / "cluster.yaml").read_text() == "my own\n"
    assert sorted(p.name for p in project.rglob("*")) == [".github", "cluster.yaml"]
    (tmp_path / "file").write_text("x")
    assert "not a directory" in refusal(fmcluster("init", "file", cwd=tmp_path))


def test_an_empty_directory_is_taken(tmp_path):
    (tmp_path / "empty").mkdir()
    assert fmcluster("init", "empty", cwd=tmp_path).returncode == 0
    assert (tmp_path / "empty" / "cluster.yaml").is_file()


def test_an_unsupported_combination_is_refused_with_the_rule_s_reason(tmp_path):
    text = refusal(fmcluster("init", "c", "--orchestrator", "hyperpod-slurm", "--instance-type",
                             "p6e-gb200.36xlarge", cwd=tmp_path))
    assert "p6e-gb200.36xlarge on hyperpod-slurm" in text
    assert not (tmp_path / "c").exists()


def test_a_bad_name_region_or_az_is_refused(tmp_path):
    assert "--name" in refusal(fmcluster("init", "ab", cwd=tmp_path))  # PCS names take 3 characters
    assert "--name" in refusal(fmcluster("init", "proj", "--name", "My_Cluster", cwd=tmp_path))
    assert "is not an AWS region" in refusal(fmcluster("init", "proj", "--region", "us-nowhere-1", cwd=tmp_path))
    assert "availability_zone_id" in refusal(fmcluster("init", "proj", "--az-id", "usw2-az1", cwd=tmp_path))
    assert sorted(os.listdir(tmp_path)) == []
    assert fmcluster("init", "proj", "--instance-type", "p9.huge", cwd=tmp_path).returncode == 2  # argparse


def test_an_empty_directory_name_is_refused(tmp_path):
    """Path("") is the working directory: `init ''` (an unset variable) must not write there."""
    assert "empty string" in refusal(fmcluster("init", "", cwd=tmp_path))
    assert os.listdir(tmp_path) == []
    assert init.run("").error is not None


@pytest.mark.parametrize("flag,value,where", [
    ("--az-id", "use1-az4\n", "availability_zone_id"), ("--name", "ab\ncd", "name"),
    ("--region", "us-east-1\n", "--region"), ("--name", "x\x1b[2Jy", "name"),
    ("--az-id", "use1-az4\u2028", "availability_zone_id"),
])
def test_a_value_with_a_control_character_is_refused_on_one_line(tmp_path, flag, value, where):
    text = refusal(fmcluster("init", "proj", flag, value, cwd=tmp_path))  # one line and a hint, exit 2
    assert f"error: {where}: '{one_line(value)}' holds control characters" in text
    assert "\x1b" not in text and "YAML" not in text  # the hint is about the flag, not a spec file
    assert os.listdir(tmp_path) == []


def test_init_escapes_a_value_as_validate_does(tmp_path):
    value = "use1-az4\n"
    text = refusal(fmcluster("init", "proj", "--az-id", value, cwd=tmp_path))
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: proj\nregion: us-east-1\navailability_zone_id: {json.dumps(value)}\n"
                    "orchestrator: {type: pcs}\nnode_groups: [{name: gpu, instance_type: p5.48xlarge, count: 2}]\n")
    validated = fmcluster("validate", str(spec), cwd=tmp_path)
    (message,) = [line for line in validated.stdout.splitlines() + validated.stderr.splitlines()
                  if "availability_zone_id:" in line and "error" in line]
    shown = message.split("availability_zone_id: ", 1)[1].split(" [control-character]")[0]
    assert text.splitlines()[0] == f"error: availability_zone_id: {shown}"


def test_a_directory_name_with_a_line_break_is_shown_on_one_line(tmp_path):
    (tmp_path / "a\nb").write_text("x")
    assert "error: a\\nb exists and is not a directory" in refusal(fmcluster("init", "a\nb", cwd=tmp_path))
    (tmp_path / "c\nd").mkdir()
    assert "error: name: 'c\\nd' holds control characters" in refusal(fmcluster("init", "c\nd", cwd=tmp_path))
    assert list((tmp_path / "c\nd").iterdir()) == []


def test_cdk_json_runs_the_installed_app_on_the_spec():
    """The app is a console script of the package (so any install puts it on PATH beside
    `fmcluster`) that runs the CDK app program; the repository's CDK settings are kept."""
    config = json.loads(init.cdk_json())
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts[config["app"]] == "fmcluster_cdk.synthesis:main"
    from fmcluster.deploy.synth import APP_MODULE

    assert scripts[config["app"]].split(":")[0] == APP_MODULE
    ours = json.loads((ROOT / "cdk.json").read_text())
    assert {k: v for k, v in config.items() if k not in ("app", "context")} == {
        k: v for k, v in ours.items() if k not in ("app", "context")}
    assert set(config["context"]) == set(ours["context"]) and config["context"]["spec"] == init.SPEC_FILE


def test_gitignore_keeps_build_outputs_out():
    ignored = init.GITIGNORE.splitlines()
    assert {"cdk.out/", "cdk.context.json", ".venv/", "node_modules/", "__pycache__/"} <= set(ignored)


def workflow_steps(text: str) -> list[dict[str, object]]:
    workflow = yaml.safe_load(text)
    assert set(workflow[True]) == {"pull_request"}  # `on:` reads as true in YAML 1.1
    (job,) = workflow["jobs"].values()
    steps: list[dict[str, object]] = job["steps"]
    return steps


def test_workflow_validates_plans_and_diffs_pull_requests():
    steps = workflow_steps(init.workflow(init.PLACEHOLDER_SOURCE))
    # bash -eo pipefail: the plan piped into the job summary still fails its step
    assert yaml.safe_load(init.workflow(init.PLACEHOLDER_SOURCE))["defaults"]["run"]["shell"] == "bash"
    runs = "\n".join(str(s.get("run", "")) for s in steps)
    for command in ('fmcluster validate "$SPEC"', 'fmcluster plan "$SPEC" --format markdown',
                    'git show "origin/$BASE:$SPEC"', 'fmcluster diff "$RUNNER_TEMP/base.yaml" "$SPEC"',
                    "pip install -r requirements.txt"):
        assert command in runs, command
    assert "cdk deploy" not in runs and "aws-cdk" not in runs  # review only: no credentials, no deploy
    # the actions at the versions of the repository's own example workflow
    ours = {s["uses"] for s in workflow_steps(init.workflow(init.PLACEHOLDER_SOURCE)) if "uses" in s}
    example = (ROOT / "examples/github-actions/deploy.yml").read_text()
    assert ours and all(f"uses: {action}\n" in example for action in ours)


def test_workflow_passes_actionlint(tmp_path):
    source = "git+https://github.com/example/fmcluster@" + "0" * 40
    for name, text in (("placeholder.yml", init.workflow(init.PLACEHOLDER_SOURCE)),
                       ("pinned.yml", init.workflow(source)),
                       ("deploy.yml", project_files()[init.DEPLOY_WORKFLOW_FILE]),
                       ("deploy-eu.yml", project_files("eks", "eu-train", "eu-north-1")[init.DEPLOY_WORKFLOW_FILE])):
        (tmp_path / name).write_text(text)
    result = actionlint(sorted(tmp_path.glob("*.yml")), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passed" in result.stdout


def test_the_project_pins_fmcluster_in_one_place():
    """requirements.txt is the one pin: the workflow installs it (and the pipeline's steps do)."""
    from packaging.requirements import Requirement

    source = "git+https://github.com/example/fmcluster@" + "0" * 40
    (pinned,) = [Requirement(line.split("  #")[0]) for line in init.requirements(source).splitlines()
                 if not line.startswith("#")]
    assert (pinned.name, pinned.url) == ("fmcluster", source)
    assert "put yours" in init.requirements(init.PLACEHOLDER_SOURCE)
    assert source not in init.workflow(source)  # read from requirements.txt, not repeated


def test_the_pipeline_file_deploys_the_project_and_marks_its_placeholders(tmp_path):
    assert fmcluster("init", "my-cluster", "--region", "us-west-2", "--az-id", "usw2-az2",
                     cwd=tmp_path).returncode == 0
    project = tmp_path / "my-cluster"
    pipeline = yaml.safe_load((project / "pipeline.yaml").read_text())
    assert pipeline["name"] == "my-cluster" and pipeline["region"] == "us-west-2"
    assert pipeline["waves"] == [{"name": "clusters", "clusters": [{"spec": "cluster.yaml", "protected": True}]}]
    checked = fmcluster("validate", "--pipeline", "pipeline.yaml", cwd=project)
    assert (checked.returncode, checked.stdout) == (0, "pipeline.yaml: ok\n"), checked.stderr
    warned = [line for line in checked.stderr.splitlines()
              if line.startswith("pipeline.yaml:") and ": warning: " in line]
    assert [line.split(": warning: ")[1].split(":")[0] for line in warned] == [
        "account", "source.connection_arn", "source.repository"]
    lines = (project / "pipeline.yaml").read_text().splitlines()
    assert all("put yours" in lines[int(line.split(":")[1]) - 1] for line in warned)


def project_files(orchestrator: str = "pcs", name: str = "my-cluster", region: str = "us-east-1") -> dict[str, str]:
    """The files init writes for a cluster of `orchestrator` (p5.48xlarge), by path."""
    text = init.spec_text(orchestrator, "p5.48xlarge", name, region,
                          init.default_az_id(region, orchestrator, "p5.48xlarge"))
    spec = loader.load_text(text).spec
    assert spec is not None
    return init.files(text, spec, init.PLACEHOLDER_SOURCE)


def run_script(job: dict) -> str:
    """The `run:` lines of a job's steps, one after the other."""
    return "\n".join(str(s.get("run", "")) for s in job["steps"]) + "\n"


@pytest.mark.parametrize("orchestrator", init.ORCHESTRATORS)
def test_the_deploy_workflow_runs_the_example_s_sequence_from_the_installed_package(orchestrator):
    """On a push to main (or by hand), in the protected environment of the cluster: fmcluster from
    requirements.txt and the CDK CLI fmcluster pins, the OIDC role, then the example's sequence
    (examples/github-actions/deploy.yml): the allowance, the diff against what was deployed, the
    storage stack's policy lifted where allowed, the network, the storage change set judged before
    it is executed, `cdk deploy --all` for the rest, Record, the stack policy. The step programs
    are the installed package's; no make, no path of a clone."""
    files = project_files(orchestrator)
    text = files[init.DEPLOY_WORKFLOW_FILE]
    workflow = yaml.safe_load(text)
    assert workflow[True] == {"push": {"branches": ["main"]}, "workflow_dispatch": None}  # `on:`
    assert workflow["defaults"]["run"]["shell"] == "bash" and workflow["permissions"] == {"contents": "read"}
    assert workflow["concurrency"]["cancel-in-progress"] is False
    (job,) = workflow["jobs"].values()
    assert job["environment"] == "my-cluster"  # required reviewers approve each deploy
    assert job["if"] == "github.ref == 'refs/heads/main'"
    assert job["permissions"] == {"contents": "read", "id-token": "write"}
    model = resolve(loader.load_text(files[init.SPEC_FILE]).spec)
    env = workflow["env"]
    assert (env["SPEC"], env["CLUSTER"], env["AWS_REGION"]) == ("cluster.yaml", model.name, model.region)
    assert (env["NETWORK_STACK"], env["STORAGE_STACK"]) == (model.stacks[0].name, model.stacks[1].name)
    assert [s.key for s in model.stacks[:2]] == ["network", "storage"]
    assert env["DEPLOYED"] == "/fmcluster/my-cluster/deployed-spec"
    assert env["CLUSTER_STACK"] == model.stack("cluster").name
    script = run_script(job)
    step = "fmcluster step"
    order = ["python -m pip install -r requirements.txt", f"npm install -g aws-cdk@{nodejs.CDK_CLI_VERSION}",
             'fmcluster validate "$SPEC"', f'{step} allowance "$CLUSTER"',
             f'{step} diff-deployed "$DEPLOYED" "$SPEC" ${{ALLOW:+"$ALLOW"}}',
             f'{step} protect-storage "$STORAGE_STACK" --lift',
             'cdk deploy -c spec="$SPEC" "$NETWORK_STACK" --exclusively --require-approval never',
             'cdk deploy -c spec="$SPEC" "$STORAGE_STACK" --exclusively --require-approval never '
             '--method=prepare-change-set --change-set-name fmcluster-guard',
             f'{step} guard-change-set "$CLUSTER" "$STORAGE_STACK" fmcluster-guard \\\n  ${{ALLOW:+"$ALLOW"}} '
             '--region "$AWS_REGION" --format json > "$RUNNER_TEMP/verdict.json"',
             '--method=execute-change-set --change-set-name fmcluster-guard',
             'aws cloudformation delete-change-set --stack-name "$STORAGE_STACK" --change-set-name fmcluster-guard',
             'cdk deploy -c spec="$SPEC" "$CLUSTER_STACK" --require-approval never',
             f'{step} record-deployed "$DEPLOYED" "$SPEC"', f'{step} protect-storage "$STORAGE_STACK"\n',
             # last, the reference image's stack: nothing waits for it, and a failed build comes
             # after the cluster is recorded and its storage protected
             'cdk deploy -c spec="$SPEC" --all --require-approval never']
    assert [script.index(c) for c in order] == sorted(script.index(c) for c in order)
    lift = next(s for s in job["steps"] if "--lift" in str(s.get("run", "")))
    assert lift["if"] == "steps.allowance.outputs.flag != ''"  # only for a merge allowed to lose data
    # credentials before the first step that calls AWS, after the install and validation
    names = [str(s.get("uses", s.get("run", ""))) for s in job["steps"]]
    credentials = next(i for i, n in enumerate(names) if n.startswith("aws-actions/configure-aws-credentials@"))
    assert names.index('fmcluster validate "$SPEC"') < credentials < next(i for i, n in enumerate(names)
                                                                          if "allowance" in n)
    assert job["steps"][credentials]["with"] == {"role-to-assume": "${{ vars.DEPLOY_ROLE_ARN }}",
                                                 "aws-region": "${{ env.AWS_REGION }}"}
    # nothing of a clone: no make, no step program by its path, no .venv, no npx of a local CLI
    assert "make " not in script and "fmcluster/deploy/steps/" not in text and ".venv" not in script
    assert "npx" not in script
    # the actions at the versions of the repository's own example workflow
    example = (ROOT / "examples/github-actions/deploy.yml").read_text()
    ours = {s["uses"] for s in job["steps"] if "uses" in s}
    assert len(ours) == 4 and all(f"uses: {action}\n" in example for action in ours)
    node = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/setup-node@"))
    assert node["with"]["node-version"] == str(max(nodejs.SUPPORTED_MAJORS))
    # how to make the role and the environment, in the workflow's own words
    assert "aws cloudformation deploy --template-file .github/oidc-role.yaml" in text
    assert "Allow-Data-Loss: my-cluster" in text and "required reviewers" in text


def test_every_step_the_deploy_workflow_runs_is_a_step_program_of_the_package():
    from fmcluster.deploy import steps as runner

    script = run_script(yaml.safe_load(project_files()[init.DEPLOY_WORKFLOW_FILE])["jobs"]["deploy"])
    used = {line.split("fmcluster step ")[1].split()[0]
            for line in script.splitlines() if "fmcluster step " in line}
    assert used == set(runner.steps()) - {"review-comment"}


def role_template(text: str, tmp_path: Path) -> dict:
    from cfnlint.decode import decode

    path = tmp_path / "oidc-role.yaml"
    path.write_text(text)
    template, problems = decode(str(path))
    assert not problems
    return json.loads(json.dumps(template))


@pytest.mark.parametrize("name, region", [("my-cluster", "us-east-1"), ("eu-train", "eu-north-1")])
def test_the_oidc_role_is_cfn_lint_clean_and_trusts_the_project_s_environment_alone(tmp_path, name, region):
    """The role of the example (examples/github-actions/oidc-role.yaml), with the same permissions;
    trusted only by jobs of one repository in the deploy job's environment: GitHub gives a job in
    an environment the subject repo:OWNER/NAME:environment:ENV (not the branch's), and the
    environment's required reviewers and deployment branches (main) are what the deploy passes."""
    from tests.support.cfn_lint import findings

    files = project_files("pcs", name, region)
    (tmp_path / "oidc-role.yaml").write_text(files[init.ROLE_FILE])
    found = [m for m in findings(tmp_path / "oidc-role.yaml") if m.rule.id[0] in "EW"]
    assert not found, "; ".join(str(m) for m in found)
    template = role_template(files[init.ROLE_FILE], tmp_path)
    parameters = template["Parameters"]
    job = yaml.safe_load(files[init.DEPLOY_WORKFLOW_FILE])["jobs"]["deploy"]
    assert parameters["Environment"]["Default"] == job["environment"] == name
    assert parameters["ClusterName"]["Default"] == name
    assert [p for p, v in parameters.items() if "Default" not in v] == ["Repository"]  # the one to give
    role = template["Resources"]["DeployRole"]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert set(trust["Condition"]) == {"StringEquals"}  # no StringLike wildcards
    conditions = trust["Condition"]["StringEquals"]
    assert conditions == {"token.actions.githubusercontent.com:aud": "sts.amazonaws.com",
                          "token.actions.githubusercontent.com:sub":
                              {"Fn::Sub": "repo:${Repository}:environment:${Environment}"}}
    # what the role may do is the example's, to the statement
    example = role_template((ROOT / "examples/github-actions/oidc-role.yaml").read_text(), tmp_path)
    assert role["Policies"] == example["Resources"]["DeployRole"]["Properties"]["Policies"]
    assert template["Resources"]["GitHubOidcProvider"] == example["Resources"]["GitHubOidcProvider"]
    assert template["Outputs"] == example["Outputs"] and template["Conditions"] == example["Conditions"]
    assert iam_lint.findings(template) == []  # every call allowed as granted
    # the deployed-spec parameter and the storage stack it grants are the workflow's
    env = yaml.safe_load(files[init.DEPLOY_WORKFLOW_FILE])["env"]
    statements = {s["Sid"]: s["Resource"]["Fn::Sub"] for s in role["Policies"][0]["PolicyDocument"]["Statement"]}
    assert statements["DeployedSpec"].endswith(":parameter" + env["DEPLOYED"].replace(name, "${ClusterName}"))
    assert statements["StoragePolicy"].endswith(":stack/" + env["STORAGE_STACK"].replace(name, "${ClusterName}")
                                                + "/*")


def test_init_says_how_to_make_the_role_and_the_environment(tmp_path):
    made = fmcluster("init", "proj", "--name", "eu-train", "--region", "eu-north-1", "--az-id", "eun1-az2",
                     cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    after = made.stdout.split("\nto deploy from GitHub Actions (.github/workflows/deploy.yml)")[1]
    command = after.split("\nthen ")[0].split("\n", 1)[1].replace("\\\n", "").split()
    assert command == ["aws", "cloudformation", "deploy", "--template-file", ".github/oidc-role.yaml",
                       "--stack-name", "eu-train-github-deploy", "--capabilities", "CAPABILITY_NAMED_IAM",
                       "--region", "eu-north-1", "--parameter-overrides", "Repository=OWNER/NAME"]
    assert (tmp_path / "proj" / command[4]).is_file()
    assert "DEPLOY_ROLE_ARN" in after and "environment eu-train with required reviewers" in after
    assert init_workflows.ROLE_VARIABLE == "DEPLOY_ROLE_ARN"
    assert "vars.DEPLOY_ROLE_ARN" in (tmp_path / "proj" / init.DEPLOY_WORKFLOW_FILE).read_text()


def test_ci_installs_from_the_git_commit_of_a_git_install(tmp_path):
    """pip records where a package came from (direct_url.json, PEP 610): a Git install pins CI to
    its commit; a wheel file or a local clone says nothing CI could fetch: the placeholder."""
    info = tmp_path / "fmcluster-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fmcluster\nVersion: 0.1.0\n")
    commit = "a" * 40
    (info / "direct_url.json").write_text(json.dumps(
        {"url": "https://github.com/acme/fmcluster", "vcs_info": {"vcs": "git", "commit_id": commit}}))
    assert init.install_source(metadata.PathDistribution(info)) == f"git+https://github.com/acme/fmcluster@{commit}"
    (info / "direct_url.json").write_text(json.dumps({"url": "file:///tmp/fmcluster-0.1.0-py3-none-any.whl",
                                                      "archive_info": {}}))
    assert init.install_source(metadata.PathDistribution(info)) == init.PLACEHOLDER_SOURCE
    (info / "direct_url.json").unlink()
    assert init.install_source(metadata.PathDistribution(info)) == init.PLACEHOLDER_SOURCE


@pytest.mark.synth
def test_fmcluster_synth_works_in_the_project(tmp_path):
    """In the project's directory, as its cdk.json and spec have it (no -o: cdk.out, as `npx
    aws-cdk synth` writes it)."""
    assert fmcluster("init", "my-cluster", cwd=tmp_path).returncode == 0
    project = tmp_path / "my-cluster"
    result = fmcluster("synth", "cluster.yaml", cwd=project)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "my-cluster-cluster:" in result.stdout
    assert (project / "cdk.out" / "my-cluster-network.template.json").is_file()
    assert not (project / "cdk.context.json").exists()
