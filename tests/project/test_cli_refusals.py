"""The command line refusing what it cannot do, as a user meets it: an environment where the CDK
app's Node.js cannot run (a HOME or TMPDIR it cannot write), an empty -o, a directory of the user's
files given to `jobs -o`, a spec given where a report or a pipeline file goes, a mistyped region
or name given to `init`. The contract: one `error:` line that names what is wrong, a hint that
leads somewhere (never to writing over the user's file), exit 2, nothing run and nothing written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from fmcluster.cli import COMMANDS, main
from fmcluster.deploy import synth
from tests.support.paths import ROOT

SPEC = str(ROOT / "examples/p6-b300-pcs.yaml")  # an example without placeholders, which validate warns of


def refusal(capsys) -> tuple[str, str]:
    """(error, hint) of a refusal printed as two lines on stderr, nothing on stdout."""
    captured = capsys.readouterr()
    assert captured.out == ""
    error, hint = captured.err.splitlines()
    assert error.startswith("error: ") and hint.startswith("  hint: "), captured.err
    return error, hint


@pytest.fixture
def no_app(monkeypatch):
    """The CDK app must not start: with a HOME under /proc, Node.js's recursive mkdir of jsii's
    package cache never returns."""
    monkeypatch.setattr(synth, "run_app", lambda *a, **k: pytest.fail("the CDK app ran"))
    monkeypatch.setattr(synth, "apart", lambda *a, **k: pytest.fail("the CDK app ran"))


# ---- the environment of jsii's Node.js -------------------------------------------------------

@pytest.mark.parametrize("args", [["synth", SPEC, "-o", "{tmp}/o"], ["diff", SPEC, SPEC], ["diff", "--deployed", SPEC]])
def test_a_home_node_cannot_write_is_refused_before_the_app_runs(args, tmp_path, monkeypatch, capsys, no_app):
    monkeypatch.setenv("HOME", "/proc/x")
    monkeypatch.delenv("JSII_RUNTIME_PACKAGE_CACHE_ROOT", raising=False)
    monkeypatch.delenv("JSII_RUNTIME_PACKAGE_CACHE", raising=False)
    monkeypatch.setattr("fmcluster.deploy.deployed.read", lambda *a, **k: pytest.fail("read the account"))
    assert main([a.format(tmp=tmp_path) for a in args]) == 2
    error, hint = refusal(capsys)
    assert error == ("error: HOME=/proc/x: jsii cannot make its package cache there "
                     "(/proc/x/.cache/aws/jsii/package-cache: No such file or directory)")
    assert "HOME" in hint and "JSII_RUNTIME_PACKAGE_CACHE_ROOT" in hint
    assert not (tmp_path / "o").exists()


def test_jsii_s_own_cache_settings_are_honoured(tmp_path, monkeypatch):
    """A cache root of the user's own, or no cache, takes HOME out of it."""
    monkeypatch.setenv("HOME", "/proc/x")
    monkeypatch.setenv("JSII_RUNTIME_PACKAGE_CACHE_ROOT", str(tmp_path / "cache"))
    assert synth.environment_problem() is None
    monkeypatch.setenv("JSII_RUNTIME_PACKAGE_CACHE_ROOT", "/proc/y")
    assert synth.environment_problem()[0].startswith("JSII_RUNTIME_PACKAGE_CACHE_ROOT=/proc/y: ")
    monkeypatch.setenv("JSII_RUNTIME_PACKAGE_CACHE", "disabled")
    assert synth.environment_problem() is None


@pytest.mark.parametrize("args", [["synth", SPEC, "-o", "{tmp}/o"], ["diff", SPEC, SPEC], ["diff", "--deployed", SPEC]])
def test_a_tmpdir_node_cannot_use_is_refused_before_the_app_runs(args, tmp_path, monkeypatch, capsys, no_app):
    """Node.js takes TMPDIR as it is (Python's tempfile would pass over it to /tmp): jsii's
    mkdtemp there would fail the app with a long JavaScriptError."""
    monkeypatch.setenv("TMPDIR", "/proc/x")
    monkeypatch.setattr("fmcluster.deploy.deployed.read", lambda *a, **k: pytest.fail("read the account"))
    assert main([a.format(tmp=tmp_path) for a in args]) == 2
    error, hint = refusal(capsys)
    assert error == "error: TMPDIR=/proc/x: cannot create a temporary directory there (No such file or directory)"
    assert hint == "  hint: set TMPDIR to a directory you can write, such as /tmp"


def test_the_temporary_directory_is_node_s_choice(tmp_path, monkeypatch):
    """TMPDIR, else TMP, else TEMP, else /tmp: the first set one is the one used, whatever the others."""
    for variable in ("TMPDIR", "TMP", "TEMP"):
        monkeypatch.delenv(variable, raising=False)
    assert synth.node_tmpdir() == ("", "/tmp")
    monkeypatch.setenv("TEMP", "/proc/t")
    monkeypatch.setenv("TMP", str(tmp_path) + "/")
    assert synth.node_tmpdir() == ("TMP", str(tmp_path))
    monkeypatch.setenv("TMPDIR", "/proc/x")
    assert synth.environment_problem()[0].startswith("TMPDIR=/proc/x: ")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("TMP", "/proc/y")  # not used while TMPDIR is set
    monkeypatch.setenv("HOME", str(tmp_path))
    assert synth.environment_problem() is None


# ---- synth's directories ---------------------------------------------------------------------

def test_an_empty_output_is_an_invalid_command_line(capsys, no_app):
    assert main(["synth", SPEC, "-o", ""]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == "error: -o names no directory: give one, such as -o cdk.out\n"


def test_an_empty_assembly_directory_says_there_is_no_manifest(tmp_path, capsys):
    assert main(["synth", "--assembly", str(tmp_path)]) == 2
    error, _ = refusal(capsys)
    assert error == f"error: {tmp_path}: no cloud assembly in it (no manifest.json)"


# ---- jobs -o: the user's own files -----------------------------------------------------------

def test_jobs_refuses_to_replace_files_it_did_not_write(tmp_path, monkeypatch, capsys):
    (tmp_path / "README.md").write_text("my project\n")
    (tmp_path / "smoke.py").write_text("print('mine')\n")
    monkeypatch.chdir(tmp_path)
    assert main(["jobs", SPEC, "-o", "."]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("warning")]
    assert err[0] == "fmcluster jobs: .: would replace files the kit did not write: README.md, smoke.py", err
    assert err[1].startswith("  hint: ") and "acceptance" in err[1]
    assert sorted(os.listdir(tmp_path)) == ["README.md", "smoke.py"]
    assert (tmp_path / "README.md").read_text() == "my project\n"


def test_jobs_updates_its_own_kit_and_keeps_the_rest(tmp_path, capsys):
    kit = tmp_path / "kit"
    assert main(["jobs", SPEC, "-o", str(kit)]) == 0
    listed = (kit / ".fmcluster-kit").read_text().splitlines()[1:]
    assert "README.md" in listed and "b300/nccl.sbatch" in listed
    (kit / "README.md").write_text("an older kit's\n")  # listed: the kit's to replace
    (kit / "results").mkdir()
    (kit / "results" / "nccl.out").write_text("measured\n")  # not the kit's: left alone
    assert main(["jobs", SPEC, "-o", str(kit)]) == 0
    assert (kit / "README.md").read_text() != "an older kit's\n"
    assert (kit / "results" / "nccl.out").read_text() == "measured\n"
    # a kit written before the list existed: files of the same bytes are the kit's
    (kit / ".fmcluster-kit").unlink()
    assert main(["jobs", SPEC, "-o", str(kit)]) == 0
    capsys.readouterr()


# ---- a file of the wrong kind ----------------------------------------------------------------

def test_a_spec_given_as_the_preflight_report_is_named_and_not_overwritten(tmp_path, monkeypatch, capsys):
    shutil.copy(SPEC, tmp_path / "preflight.json")
    monkeypatch.chdir(tmp_path)
    assert main(["plan", SPEC, "--preflight", "preflight.json"]) == 2
    error, hint = refusal(capsys)
    assert error.startswith("error: preflight.json: this is a cluster spec, not a preflight report")
    assert "> preflight.json" not in hint and "> preflight-report.json" in hint
    assert (tmp_path / "preflight.json").read_text() == Path(SPEC).read_text()
    assert main(["plan", SPEC, "--preflight", "other.json"]) == 2
    assert "> preflight.json" in refusal(capsys)[1]  # no collision: the usual name


def test_a_spec_given_as_a_pipeline_file_is_recognized(capsys):
    assert main(["validate", "--pipeline", SPEC]) == 2
    err = capsys.readouterr().err
    assert "this is a cluster spec (it has `node_groups`), not a GitOps pipeline file" in err
    assert f"fmcluster validate {SPEC}`" in err and "account" not in err


@pytest.mark.parametrize("examples", [True, False])
def test_an_empty_spec_points_at_init(examples, tmp_path, monkeypatch, capsys):
    """An installed user has no examples/: `fmcluster init` is where to start; the examples too where they are."""
    if examples:
        (tmp_path / "examples").mkdir()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.yaml").write_text("")
    assert main(["validate", "empty.yaml"]) == 2
    hint = next(line for line in capsys.readouterr().err.splitlines() if "hint:" in line)
    assert "fmcluster init DIR" in hint
    assert ("examples/" in hint) == examples


def test_a_group_too_big_for_pcs_is_pointed_at_its_count(tmp_path, capsys):
    data = yaml.safe_load(Path(SPEC).read_text())
    data["node_groups"][0]["count"] = 100001
    (tmp_path / "huge.yaml").write_text(yaml.safe_dump(data))
    assert main(["validate", str(tmp_path / "huge.yaml"), "--format", "json"]) == 2
    (report,) = json.loads(capsys.readouterr().out)
    (found,) = [d for d in report["diagnostics"] if "exceed the largest PCS cluster" in d["message"]]
    assert found["path"] == "node_groups[0].count"


# ---- init ------------------------------------------------------------------------------------

def test_init_suggests_a_region_and_a_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["init", "x", "--region", "us-est-1"]) == 2
    error, hint = refusal(capsys)
    assert "'us-est-1' is not an AWS region" in error and "did you mean 'us-east-1'" in hint
    assert main(["init", "My_Cluster"]) == 2
    assert refusal(capsys)[1].startswith("  hint: pass --name my-cluster")
    assert main(["init", "proj", "--name", "My_Cluster"]) == 2
    assert refusal(capsys)[1].startswith("  hint: pass --name my-cluster")
    assert main(["init", "/proc/fmcluster-init"]) == 2
    error, hint = refusal(capsys)
    assert error.startswith("error: cannot write /proc/fmcluster-init: ") and "fmcluster init DIR" in hint
    assert os.listdir(tmp_path) == []


# ---- what the plan and the help say ----------------------------------------------------------

def test_the_plan_names_login_nodes_on_slurm_and_system_nodes_on_kubernetes(capsys):
    assert main(["plan", str(ROOT / "examples/p5en-eks.yaml")]) == 0
    out = capsys.readouterr().out
    assert "system nodes: 2 x 33" in out and "login" not in out.split("addresses", 1)[-1].split("\n\n")[0]
    assert main(["plan", SPEC]) == 0
    assert "  login nodes: 1 x 1" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["", *sorted(COMMANDS)])
def test_every_help_line_fits_in_100_columns(name, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "100")  # argparse wraps to this; the examples and exit codes are fixed
    with pytest.raises(SystemExit):
        main([name, "--help"] if name else ["--help"])
    wide = [line for line in capsys.readouterr().out.splitlines() if len(line) > 100]
    assert wide == []


def test_stack_policy_help_names_no_argument_it_does_not_take(capsys):
    with pytest.raises(SystemExit):
        main(["stack-policy", "--help"])
    assert "NAME" not in capsys.readouterr().out


@pytest.mark.parametrize("spec, example", [("mine.yaml", False), ("examples/p5-pcs.yaml", True)])
def test_make_synth_calls_the_examples_for_reading_only_for_an_example(spec, example):
    if shutil.which("make") is None:
        pytest.skip("no make")
    dry = subprocess.run(["make", "-n", "-o", "install", "synth", f"SPEC={spec}"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    said = next(line for line in dry.splitlines() if "Templates of" in line)
    assert f"Templates of {spec} written to cdk.out/." in said
    assert ("The examples are for reading" in said) == example
