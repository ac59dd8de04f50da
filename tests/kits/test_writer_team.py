"""`fmcluster jobs --team`: the team the kit runs as is one of the spec's, the first by default."""

from fmcluster.cli import main

SPEC = "examples/p5-pcs.yaml"  # teams pretrain and research


def test_an_unknown_team_is_refused_and_nothing_is_written(tmp_path, capsys):
    assert main(["jobs", SPEC, "-o", str(tmp_path / "kit"), "--team", "nobody"]) == 2
    err = capsys.readouterr().err
    assert "there is no team 'nobody'" in err and "pretrain, research" in err
    assert not (tmp_path / "kit").exists()


def test_a_team_of_the_spec_is_taken(tmp_path):
    assert main(["jobs", SPEC, "-o", str(tmp_path / "kit"), "--team", "pretrain"]) == 0


def test_a_spec_without_teams_refuses_a_team(tmp_path, capsys):
    assert main(["jobs", "examples/p5en-reservation-pcs.yaml", "-o", str(tmp_path / "kit"), "--team", "x"]) == 2
    assert "has no teams" in capsys.readouterr().err
