"""How the command line takes its inputs, as a user runs it: hints that never name the user's own
files as an output, `-` for standard input, JSON diagnostics under --format json, plain YAML
errors, did-you-mean for regions, a pipeline file given where a spec goes."""

import json
import shutil

import pytest

from fmcluster.cli import main
from tests.support.paths import ROOT

EXAMPLE = ROOT / "examples/p5en-eks.yaml"


# ---- plan --preflight: the hint names a new file ------------------------------------------------

def test_plan_with_the_spec_as_its_preflight_report_leaves_the_spec_alone(tmp_path, capsys):
    spec = tmp_path / "my-cluster.yaml"
    shutil.copy(EXAMPLE, spec)
    before = spec.read_text()
    assert main(["plan", str(spec), "--preflight", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "--preflight names the spec itself" in err
    assert "my-cluster.yaml" not in err.split("hint:", 1)[1]  # the hint never writes over the spec
    assert "> preflight.json" in err
    assert spec.read_text() == before


@pytest.mark.parametrize("text", ["name: x\n", '{"cluster": "p5en-eks"}'])
def test_the_preflight_hint_never_names_the_file_given(tmp_path, capsys, text):
    report = tmp_path / "notes.yaml"
    report.write_text(text)
    assert main(["plan", str(EXAMPLE), "--preflight", str(report)]) == 2
    err = capsys.readouterr().err
    hint = err.split("hint:", 1)[1]
    assert "notes.yaml" not in hint and "> preflight.json" in hint
