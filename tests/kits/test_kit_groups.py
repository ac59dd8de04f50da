"""The kit run as a team covers only the GPU node groups the team may hold whole: each acceptance
job asks for every node of its group, and a queue that lets the team hold fewer GPUs (Kueue's
ClusterQueue, a Slurm account's GrpTRES, a partition's AllowAccounts) never starts it. The groups
left out are named in the README and in `fmcluster jobs`' output, left out of expected.json, and
`fmcluster verify` does not wait for their results."""

from __future__ import annotations

import json

import pytest

from fmcluster.cli import main
from fmcluster.kits import common, jobs, verify
from fmcluster.model.cluster import resolve
from fmcluster.spec.loader import load
from tests.support.specs import base_spec, on, to_yaml, validated, with_

SLURM, KUBERNETES = "examples/p5-pcs.yaml", "examples/p5en-eks.yaml"


def _two_groups(type_: str) -> dict:
    """Two GPU groups: `gpu` shared (2 nodes, 16 GPUs), `reserved` dedicated to team pretrain;
    research guaranteed 8 of gpu and borrowing 8: it holds gpu whole, never `reserved`."""
    spec = on(type_) if type_ != "pcs" else base_spec()
    if type_ == "eks":
        spec = with_(spec, "orchestrator.admin_role_arn", "arn:aws:iam::111122223333:role/admin")
    spec = with_(spec, "node_groups[1]", {"name": "reserved", "instance_type": "p5.48xlarge", "count": 1,
                                          "capacity": {"type": "on-demand"}, "team": "pretrain"})
    members = ["alice"] if type_ == "pcs" else ["arn:aws:iam::111122223333:role/pretrain"]
    return with_(spec, "teams", [
        {"name": "pretrain", "members": members, "gpus": {"gpu": 8}, "priority": "high"},
        {"name": "research", "groups": ["ml-research"], "gpus": {"gpu": 8}, "borrow": 8, "priority": "low"}])


def _model(spec: dict):
    return resolve(validated(spec))


@pytest.mark.parametrize("spec,limit", [(KUBERNETES, "at most 32 of its 64 GPUs"),
                                        (SLURM, "at most 64 of its 128 GPUs")])
def test_a_team_that_holds_no_group_whole_gets_no_kit(tmp_path, capsys, spec, limit):
    """research borrows too little to hold the only GPU group: exit 2, nothing written, and the
    message names the group, why, and the team that may run its jobs."""
    assert main(["jobs", spec, "-o", str(tmp_path / "kit"), "--team", "research"]) == 2
    err = capsys.readouterr().err
    assert "team research cannot hold any GPU node group whole" in err
    assert "node group gpu left out" in err and limit in err and "--team pretrain" in err
    assert not (tmp_path / "kit").exists()


@pytest.mark.parametrize("spec", [KUBERNETES, SLURM])
def test_the_default_team_holds_the_group(tmp_path, capsys, spec):
    """Without --team the kit runs as the first team (pretrain), which may hold the whole group."""
    assert main(["jobs", spec, "-o", str(tmp_path / "kit")]) == 0
    out = capsys.readouterr().out
    assert "node groups gpu" in out and "left out" not in out
    assert set(json.loads((tmp_path / "kit" / "expected.json").read_text())) == {"gpu"}
    assert "left out" not in (tmp_path / "kit" / "README.md").read_text()


@pytest.mark.parametrize("type_", ["pcs", "eks"])
def test_a_group_dedicated_to_another_team_is_left_out(type_):
    model = _model(_two_groups(type_))
    research, pretrain = model.team("research"), model.team("pretrain")
    groups, left = common.kit_groups(model, research)
    assert [g.name for g in groups] == ["gpu"]
    assert [(item.group, "dedicated to team pretrain" in item.why, "--team pretrain" in item.hint)
            for item in left] == [("reserved", True, True)]
    files = {f.path: f.content for f in jobs.kit(model, research)}
    assert not any(path.startswith("reserved/") for path in files)
    assert any(path.startswith("gpu/") for path in files)
    assert set(json.loads(files["expected.json"])) == {"gpu"}
    assert "reserved" not in files["submit-all.sh"]
    assert "node group reserved left out: it is dedicated to team pretrain" in files["README.md"]
    # the owner holds both: nothing left out; without teams, every GPU group
    assert [g.name for g in common.kit_groups(model, pretrain)[0]] == ["gpu", "reserved"]
    assert common.kit_groups(model, pretrain)[1] == ()
    assert [g.name for g in common.kit_groups(model, None)[0]] == ["gpu", "reserved"]


def test_the_writer_names_the_group_left_out(tmp_path, capsys):
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(to_yaml(_two_groups("eks")))
    assert main(["jobs", str(spec_file), "-o", str(tmp_path / "kit"), "--team", "research"]) == 0
    out = capsys.readouterr().out
    assert "acceptance jobs of node groups gpu " in out
    assert "node group reserved left out: it is dedicated to team pretrain" in out
    assert "--team pretrain" in out
    # the kit copies expected.json into results/, where verify finds it
    assert "cp expected.json results/" in (tmp_path / "kit" / "submit-all.sh").read_text()


def test_verify_expects_only_the_kits_groups():
    """With the kit's expected.json among the results, a group it left out has no "no result"
    row; without it, every GPU group is expected (the check catches the bad case)."""
    model = _model(_two_groups("pcs"))
    kit = {f.path: f.content for f in jobs.kit(model, model.team("research"))}
    without = verify.judge_results(model, {})
    with_kit = verify.judge_results(model, {"results/expected.json": kit["expected.json"]})
    assert {r.group for r in without.rows if r.note == "no result: not run"} == {"gpu", "reserved"}
    assert {r.group for r in with_kit.rows if r.note == "no result: not run"} == {"gpu"}


def test_the_specs_are_valid(tmp_path):
    """The examples and the two-group specs the tests above read load without errors."""
    for path in (SLURM, KUBERNETES):
        assert [t.name for t in resolve(load(path).spec).teams] == ["pretrain", "research"]
    for type_ in ("pcs", "eks"):
        spec_file = tmp_path / f"{type_}.yaml"
        spec_file.write_text(to_yaml(_two_groups(type_)))
        loaded = load(spec_file)
        assert loaded.spec is not None and not [d for d in loaded.diagnostics if d.severity == "error"]
