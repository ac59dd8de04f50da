"""How the command line takes its inputs, as a user runs it: hints that never name the user's own
files as an output, `-` for standard input, JSON diagnostics under --format json, plain YAML
errors, did-you-mean for regions, a pipeline file given where a spec goes."""

import json
import re
import shutil

import pytest

from fmcluster.cli import main
from tests.support.paths import ROOT

EXAMPLE = ROOT / "examples/p5en-eks.yaml"
PCS = ROOT / "examples/p5-pcs.yaml"


# ---- plan --preflight: the hint names a new file ------------------------------------------------

def test_plan_with_the_spec_as_its_preflight_report_leaves_the_spec_alone(tmp_path, capsys):
    spec = tmp_path / "my-cluster.yaml"
    shutil.copy(EXAMPLE, spec)
    before = spec.read_text()
    assert main(["plan", str(spec), "--preflight", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "--preflight names the spec itself" in err
    hint = err.split("--preflight names the spec itself", 1)[1].split("hint:", 1)[1]
    assert "my-cluster.yaml" not in hint  # the hint never writes over the spec
    assert "> preflight.json" in err
    assert spec.read_text() == before


@pytest.mark.parametrize("text", ["name: x\n", '{"cluster": "p5en-eks"}'])
def test_the_preflight_hint_never_names_the_file_given(tmp_path, capsys, text):
    report = tmp_path / "notes.yaml"
    report.write_text(text)
    assert main(["plan", str(EXAMPLE), "--preflight", str(report)]) == 2
    err = capsys.readouterr().err
    hint = err.rsplit("hint:", 1)[1]  # the refusal's, after the example's warnings
    assert "notes.yaml" not in hint and "> preflight.json" in hint


# ---- `-`: the spec on standard input ---------------------------------------------------------

def fmcluster(*args, stdin=""):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "fmcluster", *args], cwd=ROOT, input=stdin, capture_output=True,
                          text=True, timeout=300)


def test_validate_dash_reads_standard_input_even_beside_a_file_named_dash(tmp_path):
    (tmp_path / "-").write_text("name: [unclosed\n")  # a file named `-` is not read
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "fmcluster", "validate", "-"], cwd=tmp_path,
                            input=EXAMPLE.read_text(), capture_output=True, text=True, timeout=120,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert (result.returncode, result.stdout) == (0, "<stdin>: ok\n"), result.stderr


def test_errors_on_standard_input_are_located_in_stdin():
    result = fmcluster("validate", "-", stdin=EXAMPLE.read_text().replace("count: 8", "count: eight", 1))
    assert result.returncode == 2
    assert "<stdin>:" in result.stderr and ": error: node_groups[0].count: " in result.stderr


@pytest.mark.parametrize("command", [["plan"], ["jobs", "-o", "{tmp}/kit"], ["verify"], ["preflight"]])
def test_every_command_that_takes_one_spec_reads_dash(tmp_path, command):
    command = [part.replace("{tmp}", str(tmp_path)) for part in command]
    # an invalid spec: each command stops at the spec, so no credentials or results are needed
    bad = EXAMPLE.read_text().replace("count: 8", "count: eight", 1)
    extra = [str(tmp_path / "results.txt")] if command[0] == "verify" else []
    (tmp_path / "results.txt").write_text("")
    result = fmcluster(*command, "-", *extra, stdin=bad)
    assert result.returncode == 2 and "<stdin>:" in result.stderr and "Traceback" not in result.stderr
    if command[0] != "preflight":  # preflight needs credentials past the spec
        good = fmcluster(*command, "-", *extra, stdin=EXAMPLE.read_text())
        # read as the file is: no error (the example's placeholders are warned of, located in <stdin>)
        assert "Traceback" not in good.stderr and ": error:" not in good.stderr
        if command[0] == "verify":  # the spec was read; an empty results file is nothing to judge
            assert good.returncode == 2 and "not judged" in good.stderr, good.stderr
        else:
            assert good.returncode in (0, 1), good.stderr


def test_dash_given_twice_is_refused(capsys):
    for argv in (["validate", "-", "-"], ["diff", "-", "-"], ["synth", "-", "-"]):
        assert main(argv) == 2
        assert "can stand for one SPEC only" in capsys.readouterr().err


def test_a_terminal_is_not_read(monkeypatch, capsys):
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    from fmcluster.spec import loader

    monkeypatch.setattr(loader, "_stdin", [])
    monkeypatch.setattr("sys.stdin", Terminal())
    assert main(["validate", "-"]) == 2
    assert "standard input is a terminal" in capsys.readouterr().err


def test_synth_and_diff_read_dash(tmp_path):
    """The CDK app reads a file: synth hands it standard input, diff (which reads the spec
    itself first) a copy of what it read."""
    spec = ROOT / "examples/p5-pcs.yaml"
    synth = fmcluster("synth", "-", "-o", str(tmp_path / "out"), stdin=spec.read_text())
    assert synth.returncode == 0, synth.stderr
    assert (tmp_path / "out/llm-pretrain-cluster.template.json").exists()
    diff = fmcluster("diff", str(spec), "-", stdin=spec.read_text().replace("count: 16", "count: 24"))
    assert diff.returncode == 0, diff.stderr
    assert "ScalingConfiguration.MaxInstanceCount" in diff.stdout


# ---- --format json: JSON diagnostics whatever stops the command ------------------------------

BAD = EXAMPLE.read_text().replace("count: 8", "count: eight", 1)


@pytest.mark.parametrize("argv", [
    ["plan", "{bad}"], ["preflight", "{bad}"], ["verify", "{bad}", "{tmp}/results.txt"],
    ["diff", "{good}", "{bad}"], ["diff", "--deployed", "{bad}"],
])
def test_format_json_gives_json_diagnostics_of_an_invalid_spec(tmp_path, capsys, argv):
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD)
    argv = [a.format(bad=bad, good=EXAMPLE, tmp=tmp_path) for a in argv]
    assert main([*argv, "--format", "json"]) == 2
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert captured.err == ""
    assert report[-1]["file"] == str(bad) and report[-1]["ok"] is False
    problem = [d for d in report[-1]["diagnostics"] if d["severity"] == "error"][0]
    assert (problem["path"], problem["rule"]) == ("node_groups[0].count", "wrong-type") and problem["line"] > 1
    # the text format is unchanged: located problems on stderr, nothing on stdout
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and f"{bad}:" in captured.err


def test_diff_json_reports_both_specs_in_one_document(tmp_path, capsys):
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(BAD)
    new.write_text("name: x\n")
    assert main(["diff", str(old), str(new), "--format", "json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert [(r["file"], r["ok"]) for r in report] == [(str(old), False), (str(new), False)]


def test_a_valid_spec_keeps_stdout_the_commands_json(tmp_path, capsys):
    warn = tmp_path / "warn.yaml"
    text, count = re.subn(r"^(  type: pcs\b.*\n)", r"\1  admin_role_arn: arn:aws:iam::111122223333:role/admin\n",
                          (ROOT / "examples/p5-pcs.yaml").read_text(), count=1, flags=re.MULTILINE)
    assert count == 1
    warn.write_text(text)
    assert main(["plan", str(warn), "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["name"] == "llm-pretrain"
    assert ": warning: orchestrator.admin_role_arn: " in captured.err


# ---- YAML mistakes, at their line in plain words ---------------------------------------------

@pytest.mark.parametrize("text, line, column, message, hint", [
    ("name: demo\n\tregion: us-east-1\n", 2, 1, "indented with a tab; YAML indents with spaces only",
     "replace the tab with spaces"),
    ("name: demo\nstorage:\n\tkms: true\n", 3, 1, "indented with a tab", "replace the tab with spaces"),
    ("name: demo\nregion: us-east-1\n  availability_zone_id: use1-az4\n", 3, 3,
     "indented more than `region:` above it", "indent it by 0 spaces, like `region:`"),
    ("storage:\n  lustre:\n    storage_capacity_gib: 1200\n   kms: true\n", 4, 4,
     "indented by 3 spaces, which lines up with no key above it", "4, 2 or 0 spaces"),
    ("node_groups:\n  - name: a\n    count: 1\n   - name: b\n", 4, 4,
     "this list item is indented by 3 spaces, the items above it by 2 spaces", "line up its `-`"),
    ("node_groups:\n  - name: a\n      count: 1\n", 3, 7, "indented more than `name:`", "indent it by 4 spaces"),
    ("tags:\n  - a\n  team: x\n", 3, 3, "not an item of it", "start it with `- `"),
    ("name demo\nregion: us-east-1\n", 1, 1, "this line has no `:` between its key and value", "key: value"),
    ("name: [demo\nregion: us-east-1\n", 1, 7, "the `[` opened here is never closed with `]`", "`]`"),
    ("name: 'demo\nregion: us-east-1\n", 1, 7, "the quote opened here is never closed", "same quote"),
    ("name: a: b\n", 1, 8, "a second `: ` on one line", 'name: "a: b"'),
    ("name: a\n---\nname: b\n", 2, 1, "a second document starts here", "remove this `---` line"),
    ("name: *base\n", 1, 7, "the alias `*base` names no anchor above it", "`key: &base value`"),
])
def test_yaml_mistakes_are_placed_at_their_line_in_plain_words(tmp_path, capsys, text, line, column, message,
                                                                hint):
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{spec}:{line}:{column}: error: (document): invalid YAML: "), err
    assert message in err.splitlines()[0]
    assert hint in err.split("\n  hint: ", 1)[1]
    assert "while parsing" not in err and "while scanning" not in err  # the parser's own words
    assert main(["validate", "--format", "json", str(spec)]) == 2
    (problem,) = json.loads(capsys.readouterr().out)[0]["diagnostics"]
    assert (problem["line"], problem["column"], problem["rule"]) == (line, column, "yaml")
    assert hint in problem["hint"]


# ---- a mistyped region: did you mean ---------------------------------------------------------

@pytest.mark.parametrize("typed, hint", [
    ("us-east1", "did you mean 'us-east-1'?"),
    ("US-EAST-1", "did you mean 'us-east-1'?"),
    ("us-wets-2", "did you mean 'us-west-2'?"),
    ("eu-centrl-1", "did you mean 'eu-central-1'?"),
    ("us-east-3", "did you mean 'us-east-1' or 'us-east-2'?"),
])
def test_a_mistyped_region_gets_did_you_mean(tmp_path, capsys, typed, hint):
    spec = tmp_path / "spec.yaml"
    text = PCS.read_text()
    spec.write_text(text.replace("region: us-east-1", f"region: {typed}", 1))
    line = text[:text.index("region: us-east-1")].count("\n") + 1
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert f"{spec}:{line}:9: error: region: '{typed}' is not an AWS region fmcluster knows" in err
    assert f"\n  hint: {hint}\n" in err and "known regions" not in err


def test_a_region_like_no_other_still_lists_the_known_ones(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(PCS.read_text().replace("region: us-east-1", "region: mars-north-1", 1))
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "did you mean" not in err and "hint: known regions (botocore's list" in err and "us-west-2" in err


# ---- a pipeline file where a spec goes -------------------------------------------------------

PIPELINE = ROOT / "examples/pipeline/pipeline.yaml"


@pytest.mark.parametrize("command", [["validate"], ["plan"], ["validate", "--format", "json"]])
def test_a_pipeline_file_given_as_a_spec_is_recognized(capsys, command):
    text = PIPELINE.read_text()
    line = text[:text.index("\nwaves:")].count("\n") + 2
    assert main([*command, str(PIPELINE)]) == 2
    captured = capsys.readouterr()
    if "json" in command:
        (problem,) = json.loads(captured.out)[0]["diagnostics"]
        assert (problem["line"], problem["path"], problem["rule"]) == (line, "waves", "document")
        assert problem["hint"].startswith(f"check it with `fmcluster validate --pipeline {PIPELINE}`")
        return
    err = captured.err
    assert f"{PIPELINE}:{line}:1: error: waves: this is a GitOps pipeline file (it has `waves`), not a cluster " \
           "spec [document]" in err
    assert f"hint: check it with `fmcluster validate --pipeline {PIPELINE}`" in err
    assert "did you mean" not in err and "unknown field" not in err and err.count(": error: ") == 1


def test_the_pipeline_file_still_validates_as_one(capsys):
    assert main(["validate", "--pipeline", str(PIPELINE)]) == 0
    assert capsys.readouterr().out == f"{PIPELINE}: ok\n"


def test_a_spec_with_a_stray_waves_key_is_still_a_spec(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(PCS.read_text() + "waves: []\n")
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "unknown field `waves`" in err and "pipeline file" not in err
