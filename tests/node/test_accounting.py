"""fmcluster.node.accounting: the teams' data for fmcluster-accounting, the script that installs and
applies it, the partitions of dedicated groups. The program itself runs against a real Slurm in
tests/node/test_accounting_slurm.py."""

from __future__ import annotations

import subprocess

from fmcluster.model.cluster import resolve
from fmcluster.node import accounting
from fmcluster.spec import loader
from tests.support.paths import EXAMPLES_DIR
from tests.support.specs import base_spec, validated
from tests.support.tools import assert_shellcheck_clean


def model_of(name):
    return resolve(loader.load(EXAMPLES_DIR / name).spec)


def test_the_data_of_the_hyperpod_example():
    model = model_of("p6-b200-hyperpod-slurm.yaml")
    assert accounting.data(model.teams).splitlines()[1:] == [
        "qos high 1000 normal,low",
        "qos normal 100 low",
        "qos low 10 -",
        "account pretrain 96 - high,normal,low high",
        "member pretrain alice",
        "member pretrain bob",
        "account evals 48 - normal,low normal",  # 32 in train and the 16 of its own eval group
        "group evals ml-evals",
    ]
    assert accounting.partition_settings(model.teams) == {"eval": {"AllowAccounts": "evals"}}


def test_a_limited_borrower_gets_its_burst_as_grptres():
    spec = base_spec(teams=[{"name": "a", "members": ["x"], "gpus": {"gpu": 8}, "borrow": 4},
                            {"name": "b", "members": ["y"], "gpus": {"gpu": 4}, "borrow": False}])
    teams = resolve(validated(spec)).teams
    assert accounting.grp_tres(teams[0], teams) == "gres/gpu=12"
    assert accounting.grp_tres(teams[1], teams) == "gres/gpu=4"


def test_the_program_and_the_apply_script_are_shellcheck_clean(tmp_path):
    model = model_of("p5-pcs.yaml")
    assert_shellcheck_clean(tmp_path, {"accounting": accounting.program(),
                                       "apply": accounting.apply_script(model.teams, "/opt/slurm/bin")})


def test_the_apply_script_installs_the_program_and_its_data_and_runs_it(tmp_path):
    """Run under FMCLUSTER_ROOT with a SLURM_BIN without Slurm: the files are written, the program
    refuses (exit 2) for want of sacctmgr, and the script says so by its own exit status."""
    model = model_of("p5-pcs.yaml")
    script = tmp_path / "apply.sh"
    script.write_text(accounting.apply_script(model.teams, str(tmp_path / "no-slurm")))
    root = tmp_path / "root"
    result = subprocess.run(["bash", str(script)], env={"FMCLUSTER_ROOT": str(root), "PATH": "/usr/bin:/bin"},
                            capture_output=True, text=True)
    assert result.returncode == 2 and "no sacctmgr" in result.stdout
    assert (root / accounting.PROGRAM_PATH.lstrip("/")).read_text() == accounting.program()
    assert (root / accounting.TEAMS_PATH.lstrip("/")).read_text() == accounting.data(model.teams)


def test_the_script_changes_exactly_with_the_teams():
    model = model_of("p5-pcs.yaml")
    one = accounting.apply_script(model.teams, "/opt/slurm/bin")
    assert one == accounting.apply_script(model.teams, "/opt/slurm/bin")
    assert one != accounting.apply_script(model.teams[:1], "/opt/slurm/bin")
