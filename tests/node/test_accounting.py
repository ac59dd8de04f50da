"""fmcluster.node.accounting: the teams' data for fmcluster-accounting, the script that installs and
applies it, the partitions of dedicated groups. The program itself runs against a real Slurm in
tests/node/test_accounting_slurm.py."""

from __future__ import annotations

import shutil
import subprocess

import pytest

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
        "partition eval evals",
        "partition train -",  # open to every team: AllowAccounts=ALL where the program had set it
    ]
    assert accounting.partition_settings(model.teams) == {"eval": {"AllowAccounts": "evals"}}


def test_a_limited_borrower_gets_its_burst_as_grptres():
    spec = base_spec(teams=[{"name": "a", "members": ["x"], "gpus": {"gpu": 8}, "borrow": 4},
                            {"name": "b", "members": ["y"], "gpus": {"gpu": 4}, "borrow": False}])
    teams = resolve(validated(spec)).teams
    assert accounting.grp_tres(teams[0], teams) == "gres/gpu=12"
    assert accounting.grp_tres(teams[1], teams) == "gres/gpu=4"


INSTALL = dict(parameter="/fmcluster/llm-pretrain/slurm-teams", region="us-east-1", slurm_bin="/opt/slurm/bin")


def test_the_programs_are_shellcheck_clean(tmp_path):
    assert_shellcheck_clean(tmp_path, {"accounting": accounting.program(), "usage": accounting.USAGE.read_text(),
                                       "sync": accounting.sync_program(**INSTALL),
                                       "install": accounting.install_script(**INSTALL),
                                       "controller": accounting.install_script(
                                           **INSTALL, slurm_conf="/opt/slurm/etc/slurm.conf")})


def test_the_install_script_installs_the_programs_and_the_timer(tmp_path):
    """Run under FMCLUSTER_ROOT with recording stand-ins of systemctl and aws (the cloud: the
    parameter is not readable here): the files are written, the timer enabled, and the first sync
    fails for want of the parameter, which the script says (and succeeds: the timer retries)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("systemctl", "aws"):
        status = 1 if tool == "aws" else 0
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >>"{tmp_path}/calls"\nexit {status}\n')
        (bin_dir / tool).chmod(0o755)
    script = tmp_path / "install.sh"
    script.write_text(accounting.install_script(**INSTALL))
    root = tmp_path / "root"
    env = {"FMCLUSTER_ROOT": str(root), "PATH": f"{bin_dir}:/usr/bin:/bin"}
    result = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert result.returncode == 0 and "cannot read /fmcluster/llm-pretrain/slurm-teams" in result.stderr
    assert "not applied yet; fmcluster-accounting.timer retries" in result.stderr
    assert (root / accounting.PROGRAM_PATH.lstrip("/")).read_text() == accounting.program()
    assert (root / accounting.SYNC_PATH.lstrip("/")).read_text() == accounting.sync_program(**INSTALL)
    for name, text in accounting.units("/opt/slurm/bin").items():
        assert (root / "etc/systemd/system" / name).read_text() == text
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[:2] == ["systemctl daemon-reload",
                         "systemctl enable --now fmcluster-accounting.timer fmcluster-collect-accounts.timer"]
    assert (root / accounting.USAGE_PATH.lstrip("/")).read_text() == accounting.USAGE.read_text()
    assert calls[2].startswith("aws ssm get-parameter --region us-east-1 --name /fmcluster/llm-pretrain/slurm-teams")


def test_the_units_pass_systemd_analyze(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("no systemd-analyze")
    for name, text in accounting.units().items():
        (tmp_path / name).write_text(text.replace(accounting.SYNC_PATH, "/bin/true"))
    (tmp_path / "collect").write_text("#!/bin/sh\n")
    result = subprocess.run([analyze, "verify", *(str(tmp_path / n) for n in accounting.units())],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_controller_s_slurm_conf_gets_the_settings_once(tmp_path):
    """HyperPod: SLURM_SETTINGS set in the controller's slurm.conf (a key already there replaced,
    the others added), slurmctld restarted when one changed and not on a second run."""
    bin_dir, root = tmp_path / "bin", tmp_path / "root"
    bin_dir.mkdir()
    for tool in ("systemctl", "aws"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >>"{tmp_path}/calls"\n')
        (bin_dir / tool).chmod(0o755)
    conf = root / "opt/slurm/etc/slurm.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text("ClusterName=b200\npreempttype=preempt/none\n")
    script = tmp_path / "install.sh"
    script.write_text(accounting.install_script(parameter="/p", region="us-east-1", slurm_bin=str(bin_dir),
                                                slurm_conf="/opt/slurm/etc/slurm.conf"))
    env = {"FMCLUSTER_ROOT": str(root), "PATH": f"{bin_dir}:/usr/bin:/bin"}
    for _ in range(2):
        subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    lines = conf.read_text().splitlines()
    assert lines[:2] == ["ClusterName=b200", "PreemptType=preempt/qos"]
    assert sorted(lines[1:]) == sorted(f"{k}={v}" for k, v in accounting.SLURM_SETTINGS.items())
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls.count("systemctl restart slurmctld") == 1


def test_a_controller_without_slurm_conf_is_said_and_not_fatal(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("systemctl", "aws"):
        (bin_dir / tool).write_text("#!/bin/sh\n")
        (bin_dir / tool).chmod(0o755)
    script = tmp_path / "install.sh"
    script.write_text(accounting.install_script(parameter="/p", region="us-east-1", slurm_bin=str(bin_dir),
                                                slurm_conf="/opt/slurm/etc/slurm.conf"))
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                            env={"FMCLUSTER_ROOT": str(tmp_path / "root"), "PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert result.returncode == 0 and "no /opt/slurm/etc/slurm.conf" in result.stderr
