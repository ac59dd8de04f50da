"""The teams as Slurm accounting on a real Slurm: fmcluster-accounting (the real program,
fmcluster/node/scripts/slurm/accounting.sh) applies the data of fmcluster.node.accounting with the real
sacctmgr against a real slurmdbd and MariaDB (tests/support/slurm_accounting.py), and slurmctld
enforces it with the slurm.conf settings of a cluster with teams (accounting.SLURM_SETTINGS).

Real: Slurm (slurmctld, slurmd, slurmdbd, sacctmgr, sbatch), MariaDB, getent and the Linux users
and group the module creates (and removes) for it. Slurm is the releases the control planes run,
from their roots as AWS PCS lays them out (tests/support/slurm_roots.py; auth/slurm; the program
finds the commands in SLURM_BIN, the cluster's `bin`): every test on 24.11, the oldest PCS runs
and the one HyperPod runs; those that depend most on what sacctmgr answers on 26.05 too
(EVERY_RELEASE). Submissions run as those users (runuser), held (--hold) so that nothing runs:
acceptance or refusal is sbatch's answer.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from fmcluster.model.cluster import resolve
from fmcluster.node import accounting
from tests.support.slurm_accounting import AccountingDatabase, require_accounting
from tests.support.slurm_accounting import accounting as with_accounting
from tests.support.slurm_cluster import PCS_RELEASES, SlurmCluster, find, release_id, require_slurm
from tests.support.specs import base_spec, validated

PROGRAM = accounting.PROGRAM
TAG = "fmt" + uuid.uuid4().hex[:5]  # the users and group of this run, never someone's
ALICE, BOB, CAROL, DAVE, ERIN, FRANK = (f"{TAG}-{n}" for n in ("alice", "bob", "carol", "dave", "erin", "frank"))
RESEARCH_GROUP = f"{TAG}-research"
GRACE = f"{TAG}-Grace"  # upper case, which Linux allows and sacctmgr stores in lower case


def model(teams: list[dict], evals_team: str | None = "pretrain"):
    """The spec's model with these teams and a second GPU group, evals, dedicated to `evals_team`
    (None: to no team)."""
    spec = base_spec(teams=teams)
    spec["node_groups"].append({"name": "evals", "instance_type": "p5.48xlarge", "count": 1,
                                "capacity": {"type": "on-demand"},
                                **({"team": evals_team} if evals_team else {})})
    return resolve(validated(spec))


TEAMS = [
    {"name": "pretrain", "members": [ALICE, BOB], "gpus": {"gpu": 8}, "priority": "high"},
    {"name": "research", "groups": [RESEARCH_GROUP], "gpus": {"gpu": 4}, "borrow": 4},
]


def users_and_group():
    """The module's users and group: carol a member of the research group (its list), erin a user
    whose primary group it is (not in getent's list), dave in no team."""
    subprocess.run(["groupadd", RESEARCH_GROUP], check=True)
    for user in (ALICE, BOB, CAROL, DAVE, FRANK, GRACE):
        subprocess.run(["useradd", "-M", "-N", "-s", "/bin/sh", user], check=True)
    subprocess.run(["useradd", "-M", "-g", RESEARCH_GROUP, "-s", "/bin/sh", ERIN], check=True)
    subprocess.run(["gpasswd", "-a", CAROL, RESEARCH_GROUP], check=True, capture_output=True)


def remove_users_and_group():
    for user in (ALICE, BOB, CAROL, DAVE, ERIN, FRANK, GRACE):
        subprocess.run(["userdel", user], capture_output=True)
    subprocess.run(["groupdel", RESEARCH_GROUP], capture_output=True)


# each test's releases (the module-scoped cluster's, one per release)
OLDEST = pytest.mark.parametrize("slurm", PCS_RELEASES[:1], indirect=True, ids=release_id)
EVERY_RELEASE = pytest.mark.parametrize("slurm", PCS_RELEASES, indirect=True, ids=release_id)


@pytest.fixture(scope="module")
def slurm(request):
    release = request.param
    require_slurm(release)
    require_accounting()
    for tool in ("useradd", "groupadd", "runuser", "getent"):
        if find(tool) is None:
            pytest.skip(f"no {tool}")
    # readable by the users the jobs are submitted as (slurm.conf, munge's socket)
    directory = Path(tempfile.mkdtemp(prefix="fmacct-"))
    directory.chmod(0o755)
    users_and_group()
    try:
        with AccountingDatabase(directory / "db") as database:
            args = with_accounting(database)
            # the dedicated group's partition without AllowAccounts: fmcluster-accounting sets it
            partitions = {"gpu": ["node1"], "evals": ["node2"]}
            with SlurmCluster(directory / "slurm", nodes=2, gres="gpu:8", partitions=partitions, release=release,
                              **args) as cluster:
                cluster.sockets.chmod(0o755)
                yield cluster
    finally:
        remove_users_and_group()
        shutil.rmtree(directory, ignore_errors=True)


def apply(cluster: SlurmCluster, teams: list[dict], tmp_path: Path, data: str | None = None,
          evals_team: str | None = "pretrain"):
    path = tmp_path / "teams"
    path.write_text(data if data is not None else accounting.data(model(teams, evals_team).teams))
    # ALLOWED: the accounts fmcluster named in AllowAccounts, kept for the module's cluster
    env = {**cluster.env, "SLURM_BIN": str(cluster.bin), "ALLOWED": str(cluster.dir / "allowed-accounts")}
    return subprocess.run(["bash", str(PROGRAM), str(path)], env=env, capture_output=True, text=True, timeout=120)


def associations(cluster: SlurmCluster) -> set[tuple[str, ...]]:
    """account, user, shares, GrpTRES, QOS list, default QOS of every association but root's."""
    out = cluster.run("sacctmgr", "-Pn", "show", "assoc", "format=account,user,fairshare,grptres,qos,defaultqos").stdout
    return {tuple(line.split("|")) for line in out.splitlines() if line and not line.startswith("root|")}


def qos(cluster: SlurmCluster) -> set[tuple[str, ...]]:
    out = cluster.run("sacctmgr", "-Pn", "show", "qos", "format=name,priority,preempt,preemptmode").stdout
    return {tuple(line.split("|")) for line in out.splitlines() if line}


def submit(cluster: SlurmCluster, user: str, *options: str) -> subprocess.CompletedProcess:
    """sbatch as `user`, held: the job is accepted (and cancelled) or refused."""
    result = cluster.as_user(user, "sbatch", "--parsable", "--hold", "--chdir=/tmp", "-o", "/dev/null", *options,
                             "--wrap", "true", timeout=30)
    if result.returncode == 0:
        cluster.run("scancel", result.stdout.strip().split(";")[0])
    return result


HIGH = ("high", "1000", "low,normal", "requeue")
NORMAL = ("normal", "100", "low", "requeue")
LOW = ("low", "10", "", "requeue")
PRETRAIN = ("pretrain", "", "16", "", "high,low,normal", "high")  # 8 in gpu, its own evals group
RESEARCH = ("research", "", "4", "gres/gpu=8", "low,normal", "normal")


def user_rows(account: str, users, team_row) -> set[tuple[str, ...]]:
    return {(account, user, "1", "", team_row[4], team_row[5]) for user in users}


@EVERY_RELEASE
def test_the_spec_becomes_qos_accounts_and_users_and_a_second_run_changes_nothing(slurm, tmp_path):
    first = apply(slurm, TEAMS, tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert qos(slurm) == {HIGH, NORMAL, LOW}
    assert associations(slurm) == ({PRETRAIN, RESEARCH} | user_rows("pretrain", [ALICE, BOB], PRETRAIN)
                                   | user_rows("research", [CAROL, ERIN], RESEARCH))
    before = associations(slurm), qos(slurm)
    second = apply(slurm, TEAMS, tmp_path)
    assert second.returncode == 0, second.stdout
    assert second.stdout.strip().splitlines() == ["fmcluster-accounting: up to date"]
    assert (associations(slurm), qos(slurm)) == before


@OLDEST
def test_slurm_enforces_the_teams(slurm, tmp_path):
    assert apply(slurm, TEAMS, tmp_path).returncode == 0
    assert submit(slurm, ALICE, "-A", "pretrain", "--qos=high", "-p", "gpu").returncode == 0
    assert submit(slurm, ALICE, "-p", "gpu").returncode == 0  # its default account and QOS
    assert submit(slurm, ERIN, "-A", "research", "--qos=normal", "-p", "gpu").returncode == 0
    above = submit(slurm, CAROL, "-A", "research", "--qos=high", "-p", "gpu")
    assert above.returncode != 0 and "qos" in above.stderr.lower()
    outsider = submit(slurm, DAVE, "-p", "gpu")
    assert outsider.returncode != 0 and "account" in outsider.stderr.lower()
    elsewhere = submit(slurm, CAROL, "-A", "pretrain", "-p", "gpu")
    assert elsewhere.returncode != 0
    # the dedicated group's partition lets only its team's account in (AllowAccounts, set by the program)
    assert "AllowAccounts=pretrain " in slurm.run("scontrol", "-o", "show", "partition", "evals").stdout
    assert submit(slurm, ALICE, "-A", "pretrain", "-p", "evals").returncode == 0
    dedicated = submit(slurm, CAROL, "-A", "research", "-p", "evals")
    assert dedicated.returncode != 0 and "account" in dedicated.stderr.lower()


@OLDEST
def test_a_changed_spec_is_applied_and_what_it_no_longer_has_removed(slurm, tmp_path):
    assert apply(slurm, TEAMS, tmp_path).returncode == 0
    changed = [{**TEAMS[0], "members": [ALICE, BOB, FRANK], "gpus": {"gpu": 12}}]
    result = apply(slurm, changed, tmp_path)
    assert result.returncode == 0, result.stdout
    pretrain = (*PRETRAIN[:2], "20", *PRETRAIN[3:])
    assert associations(slurm) == {pretrain} | user_rows("pretrain", [ALICE, BOB, FRANK], pretrain)
    assert "research" not in slurm.run("sacctmgr", "-Pn", "show", "account", "format=account").stdout.split()
    assert submit(slurm, FRANK, "-A", "pretrain", "-p", "gpu").returncode == 0
    assert submit(slurm, CAROL, "-p", "gpu").returncode != 0
    assert apply(slurm, changed, tmp_path).stdout.strip().endswith("up to date")
    # a member removed: that association only
    fewer = [{**changed[0], "members": [ALICE, FRANK]}]
    assert apply(slurm, fewer, tmp_path).returncode == 0
    assert {row[1] for row in associations(slurm)} == {"", ALICE, FRANK}
    assert submit(slurm, BOB, "-p", "gpu").returncode != 0


@EVERY_RELEASE
def test_a_team_with_jobs_is_removed_once_they_have_ended(slurm, tmp_path):
    assert apply(slurm, TEAMS, tmp_path).returncode == 0
    held = slurm.as_user(CAROL, "sbatch", "--parsable", "--hold", "--chdir=/tmp", "-o", "/dev/null", "-A", "research",
                         "-p", "gpu", "--wrap", "true", timeout=30)
    assert held.returncode == 0, held.stderr
    job = held.stdout.strip().split(";")[0]
    # slurmctld tells slurmdbd of a job asynchronously: Slurm refuses the removal once the
    # database has the job (within seconds on a cluster; waited for here, bounded)
    slurm._until(lambda: job in slurm.run("sacct", "-n", "-X", "-P", "-o", "jobid", "-j", job,
                                          check=False).stdout.split(), "slurmdbd to know the job")
    try:
        refused = apply(slurm, TEAMS[:1], tmp_path)
        assert refused.returncode == 1 and "failed" in refused.stdout
        assert "research" in slurm.run("sacctmgr", "-Pn", "show", "account", "format=account").stdout.split()
    finally:
        slurm.run("scancel", job)
    slurm.wait_job(job, states=("CANCELLED",))
    done = apply(slurm, TEAMS[:1], tmp_path)
    assert done.returncode == 0, done.stdout
    assert "research" not in slurm.run("sacctmgr", "-Pn", "show", "account", "format=account").stdout.split()


@OLDEST
def test_a_group_that_cannot_be_looked_up_removes_nobody(slurm, tmp_path):
    assert apply(slurm, TEAMS, tmp_path).returncode == 0
    data = accounting.data(model(TEAMS).teams).replace(RESEARCH_GROUP, f"{TAG}-nosuchgroup")
    result = apply(slurm, TEAMS, tmp_path, data=data)
    assert result.returncode == 1 and "not found by getent" in result.stdout
    assert {row[1] for row in associations(slurm) if row[0] == "research"} == {"", CAROL, ERIN}


@OLDEST
def test_a_user_name_in_upper_case_is_added_once(slurm, tmp_path):
    """A group member whose name has capitals: sacctmgr stores it in lower case, which the program
    compares with, so a second run changes nothing (no add and delete on every run)."""
    subprocess.run(["gpasswd", "-a", GRACE, RESEARCH_GROUP], check=True, capture_output=True)
    try:
        first = apply(slurm, TEAMS, tmp_path)
        assert first.returncode == 0, first.stdout
        assert ("research", GRACE.lower()) in {row[:2] for row in associations(slurm)}
        second = apply(slurm, TEAMS, tmp_path)
        assert second.returncode == 0 and second.stdout.strip().splitlines() == ["fmcluster-accounting: up to date"], \
            second.stdout
    finally:
        subprocess.run(["gpasswd", "-d", GRACE, RESEARCH_GROUP], capture_output=True)
    assert apply(slurm, TEAMS, tmp_path).returncode == 0
    assert ("research", GRACE.lower()) not in {row[:2] for row in associations(slurm)}


@OLDEST
def test_a_removed_team_stays_on_the_slurmdbds_other_clusters(slurm, tmp_path):
    """A slurmdbd shared with another cluster: a team removed from this cluster's spec loses its
    associations on this cluster only (ClusterName), and the account stays for the other."""
    other = f"{TAG}-other".replace("-", "")
    assert apply(slurm, TEAMS, tmp_path).returncode == 0
    slurm.run("sacctmgr", "-i", "add", "cluster", other)
    try:
        slurm.run("sacctmgr", "-i", "add", "account", "research", f"cluster={other}", check=False)
        assert slurm.run("sacctmgr", "-Pn", "show", "assoc", f"cluster={other}", "account=research",
                         "format=account").stdout.split()
        result = apply(slurm, TEAMS[:1], tmp_path)
        assert result.returncode == 0, result.stdout
        assert not slurm.run("sacctmgr", "-Pn", "show", "assoc", f"cluster={slurm.cluster}", "account=research",
                             "format=account").stdout.split()
        assert slurm.run("sacctmgr", "-Pn", "show", "assoc", f"cluster={other}", "account=research",
                         "format=account").stdout.split()
        assert "research" in slurm.run("sacctmgr", "-Pn", "show", "account", "format=account").stdout.split()
    finally:
        slurm.run("sacctmgr", "-i", "delete", "cluster", other, check=False)
    # no cluster has it any more: the next run removes the account itself
    assert apply(slurm, TEAMS[:1], tmp_path).returncode == 0
    assert "research" not in slurm.run("sacctmgr", "-Pn", "show", "account", "format=account").stdout.split()


@EVERY_RELEASE
def test_another_node_making_the_same_changes_first_is_no_failure(slurm, tmp_path):
    """Several login nodes (AWS PCS) run the program at once: another may make a change between
    this run's query and its own. Here every change is made first by "the other node" (the real
    sacctmgr, run once more before this run's own call): the run still succeeds, and the state is
    the spec's."""
    assert apply(slurm, TEAMS[:1], tmp_path).returncode == 0
    bin_dir = tmp_path / "race"
    bin_dir.mkdir()
    (bin_dir / "scontrol").symlink_to(slurm.client("scontrol"))
    sacctmgr = slurm.client("sacctmgr")
    (bin_dir / "sacctmgr").write_text(f'#!/bin/bash\nif [[ $1 == --immediate ]]; then "{sacctmgr}" "$@" '
                                      f'>/dev/null 2>&1; fi\nexec "{sacctmgr}" "$@"\n')
    (bin_dir / "sacctmgr").chmod(0o755)
    path = tmp_path / "teams"
    for teams in (TEAMS, TEAMS[:1]):
        path.write_text(accounting.data(model(teams).teams))
        raced = subprocess.run(["bash", str(PROGRAM), str(path)], env={**slurm.env, "SLURM_BIN": str(bin_dir)},
                               capture_output=True, text=True, timeout=120)
        assert raced.returncode == 0 and "already so" in raced.stdout, raced.stdout
        assert apply(slurm, teams, tmp_path).stdout.strip().endswith("up to date")


@OLDEST
def test_an_unreadable_file_is_refused_before_any_change(slurm, tmp_path):
    result = subprocess.run(["bash", str(PROGRAM), str(tmp_path / "missing")],
                            env={**slurm.env, "SLURM_BIN": str(slurm.bin)}, capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "usage" in result.stdout


@OLDEST
def test_the_sync_applies_the_parameter_on_every_run(slurm, tmp_path):
    """fmcluster-accounting-sync with the real program, under FMCLUSTER_ROOT, the SSM parameter
    a stand-in `aws` that prints a file (the cloud is the one thing faked): a first sync applies;
    a second with the same data still runs the program, so a person added to a team's Linux group
    since is added, and a partition's AllowAccounts reset (a slurmctld restart on HyperPod) is set
    again; changed data is applied."""
    root, bin_dir, value = tmp_path / "root", tmp_path / "bin", tmp_path / "parameter"
    (root / accounting.PROGRAM_PATH.lstrip("/")).parent.mkdir(parents=True)
    (root / accounting.PROGRAM_PATH.lstrip("/")).write_text(accounting.program())
    (root / accounting.PROGRAM_PATH.lstrip("/")).chmod(0o755)
    bin_dir.mkdir()
    (bin_dir / "aws").write_text(f'#!/bin/sh\ncat "{value}"\n')
    (bin_dir / "aws").chmod(0o755)
    sync = tmp_path / "sync"
    sync.write_text(accounting.sync_program(parameter="/fmcluster/t/slurm-teams", region="us-east-1",
                                            slurm_bin=str(slurm.bin)))
    env = {**slurm.env, "FMCLUSTER_ROOT": str(root), "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def run():
        return subprocess.run(["bash", str(sync)], env=env, capture_output=True, text=True, timeout=120)

    value.write_text(accounting.data(model(TEAMS).teams).rstrip("\n"))  # as the CLI's text output gives it
    first = run()
    assert first.returncode == 0 and "teams data" in first.stdout, first.stdout
    applied = (root / accounting.APPLIED_PATH.lstrip("/")).read_text()
    again = run()
    assert again.returncode == 0 and again.stdout.strip().splitlines() == ["fmcluster-accounting: up to date"]
    subprocess.run(["gpasswd", "-a", DAVE, RESEARCH_GROUP], check=True, capture_output=True)
    try:
        slurm.run("scontrol", "update", "PartitionName=evals", "AllowAccounts=ALL")
        joined = run()
        assert joined.returncode == 0, joined.stdout
        assert ("research", DAVE) in {row[:2] for row in associations(slurm)}
        assert "AllowAccounts=pretrain " in slurm.run("scontrol", "-o", "show", "partition", "evals").stdout
        assert submit(slurm, DAVE, "-A", "research", "-p", "gpu").returncode == 0
    finally:
        subprocess.run(["gpasswd", "-d", DAVE, RESEARCH_GROUP], capture_output=True)
    value.write_text(accounting.data(model([{**TEAMS[0], "gpus": {"gpu": 4}}, TEAMS[1]]).teams))
    changed = run()
    assert changed.returncode == 0 and "modify account" in changed.stdout
    assert (root / accounting.APPLIED_PATH.lstrip("/")).read_text() != applied
    assert ("pretrain", "", "12", "", "high,low,normal", "high") in associations(slurm)
    assert ("research", DAVE) not in {row[:2] for row in associations(slurm)}


@OLDEST
def test_the_slurm_collector_counts_gpus_per_team_and_user(slurm, tmp_path):
    """The per-account collector (scripts/slurm/account-usage.sh, as shipped) reports the GPUs
    running jobs hold per account and user: what the scheduler dashboard's per-team panel sums."""
    assert apply(slurm, TEAMS, tmp_path).returncode == 0
    jobs = []
    # two jobs on the gpu partition's one node of 2 CPUs, each a CPU and a little memory
    for user, account, gres in ((ALICE, "pretrain", "gpu:2"), (ERIN, "research", "gpu:3")):
        result = slurm.as_user(user, "sbatch", "--parsable", "--chdir=/tmp", "-o", "/dev/null", "-A", account, "-p",
                               "gpu", f"--gres={gres}", "--mem=100", "--wrap", "sleep 60", timeout=30)
        assert result.returncode == 0, result.stderr
        jobs.append(result.stdout.strip().split(";")[0])
    try:
        for job in jobs:
            slurm.wait_job(job, states=("RUNNING",))
        out = subprocess.run(["bash", str(accounting.USAGE)], env={**slurm.env, "SLURM_BIN": str(slurm.bin)},
                             capture_output=True, text=True, timeout=60).stdout
    finally:
        for job in jobs:
            slurm.run("scancel", job)
    found = {line.rsplit(" ", 1)[0]: line.rsplit(" ", 1)[1] for line in out.splitlines()
             if line.startswith("slurm_account_gpus_allocated{")}
    assert found == {f'slurm_account_gpus_allocated{{account="pretrain",user="{ALICE}"}}': "2",
                     f'slurm_account_gpus_allocated{{account="research",user="{ERIN}"}}': "3"}


@pytest.mark.parametrize("goes", ["pretrain", "research"])
@EVERY_RELEASE
def test_a_team_whose_member_is_in_another_team_is_removed(slurm, tmp_path, goes):
    """A member of two teams has the one that goes as the default account: the member's default
    moves to the team that stays before the account is deleted (sacctmgr refuses to delete a
    user's default account), and the team's other users go with it, in one run. The slurmdbd has
    another cluster where the member has an account of its own: the default moves on this
    cluster only (Slurm keeps one per cluster) and the other cluster's is left alone."""
    other = f"{TAG}-elsewhere".replace("-", "")
    both = [{**TEAMS[0], "members": [ALICE, BOB, CAROL]}, TEAMS[1]]
    assert apply(slurm, both, tmp_path).returncode == 0
    slurm.run("sacctmgr", "-i", "add", "cluster", other)
    try:
        slurm.run("sacctmgr", "-i", "add", "account", f"{other}acct", f"cluster={other}")
        slurm.run("sacctmgr", "-i", "add", "user", CAROL, f"account={other}acct", f"cluster={other}")
        slurm.run("sacctmgr", "-i", "modify", "user", "where", f"name={CAROL}", f"cluster={slurm.cluster}", "set",
                  f"defaultaccount={goes}")
        stays = [team for team in both if team["name"] != goes]
        result = apply(slurm, stays, tmp_path)
        assert result.returncode == 0, result.stdout
        assert goes not in slurm.run("sacctmgr", "-Pn", "show", "account", "format=account").stdout.split()
        kept = stays[0]["name"]
        defaults = slurm.run("sacctmgr", "-Pn", "show", "user", CAROL, "withassoc",
                             "format=cluster,defaultaccount").stdout.split()
        assert set(defaults) == {f"{slurm.cluster}|{kept}", f"{other}|{other}acct"}
        assert {row[:2] for row in associations(slurm) if row[1]} == {(kept, CAROL)} | {
            (kept, user) for user in ([ALICE, BOB] if kept == "pretrain" else [ERIN])} | {(f"{other}acct", CAROL)}
    finally:
        slurm.run("sacctmgr", "-i", "delete", "cluster", other, check=False)
        slurm.run("sacctmgr", "-i", "delete", "account", f"{other}acct", check=False)
    assert submit(slurm, CAROL, "-p", "gpu").returncode == 0  # with the default account that stays
    assert apply(slurm, stays, tmp_path).stdout.strip().endswith("up to date")


@OLDEST
def test_a_user_keeps_an_account_of_an_administrators_own(slurm, tmp_path):
    """A team's member whose other account is an administrator's (not fmcluster's): when the team
    goes, the user's default moves to that account, and the account and its association stay."""
    assert apply(slurm, TEAMS, tmp_path).returncode == 0
    own = f"{TAG}own".replace("-", "")
    slurm.run("sacctmgr", "-i", "add", "account", own, f"cluster={slurm.cluster}")
    try:
        slurm.run("sacctmgr", "-i", "add", "user", ALICE, f"account={own}", f"cluster={slurm.cluster}")
        assert slurm.run("sacctmgr", "-Pn", "show", "user", ALICE, "format=defaultaccount").stdout.strip() == "pretrain"
        result = apply(slurm, TEAMS[1:], tmp_path)
        assert result.returncode == 0, result.stdout
        assert "pretrain" not in slurm.run("sacctmgr", "-Pn", "show", "account", "format=account").stdout.split()
        assert slurm.run("sacctmgr", "-Pn", "show", "user", ALICE, "format=defaultaccount").stdout.strip() == own
        assert (own, ALICE) in {row[:2] for row in associations(slurm)}
    finally:
        slurm.run("sacctmgr", "-i", "delete", "user", "where", f"name={ALICE}", f"account={own}", check=False)
        slurm.run("sacctmgr", "-i", "delete", "account", own, check=False)


def allowed(cluster: SlurmCluster, partition: str) -> str:
    out = cluster.run("scontrol", "-o", "show", "partition", partition).stdout
    return next(field for field in out.split() if field.startswith("AllowAccounts=")).split("=", 1)[1]


@EVERY_RELEASE
def test_a_group_that_stops_being_dedicated_takes_every_teams_jobs_again(slurm, tmp_path):
    """evals loses its `team:` (HyperPod, where the program sets AllowAccounts with scontrol: the
    partition kept naming the team): the program opens it to every account again, and so when
    the team it was dedicated to goes as well, whose account no longer exists."""
    try:
        assert apply(slurm, TEAMS, tmp_path).returncode == 0
        assert allowed(slurm, "evals") == "pretrain"
        opened = apply(slurm, TEAMS, tmp_path, evals_team=None)
        assert opened.returncode == 0, opened.stdout
        assert "AllowAccounts=ALL" in opened.stdout
        assert allowed(slurm, "evals") == "ALL"
        assert submit(slurm, CAROL, "-A", "research", "-p", "evals").returncode == 0
        assert apply(slurm, TEAMS, tmp_path, evals_team=None).stdout.strip().endswith("up to date")
        # dedicated again, then its team removed with the dedication in the same change
        assert apply(slurm, TEAMS, tmp_path).returncode == 0 and allowed(slurm, "evals") == "pretrain"
        gone = apply(slurm, TEAMS[1:], tmp_path, evals_team=None)
        assert gone.returncode == 0, gone.stdout
        assert "pretrain" not in slurm.run("sacctmgr", "-Pn", "show", "account", "format=account").stdout.split()
        assert allowed(slurm, "evals") == "ALL"
        assert submit(slurm, ERIN, "-A", "research", "-p", "evals").returncode == 0
        # a list of a removed team the program did not reset (an earlier run, or a restart that
        # restored it): the account no longer exists, so the partition is opened
        slurm.run("scontrol", "update", "PartitionName=evals", "AllowAccounts=pretrain")
        assert apply(slurm, TEAMS[1:], tmp_path, evals_team=None).returncode == 0
        assert allowed(slurm, "evals") == "ALL"
    finally:
        slurm.run("scontrol", "update", "PartitionName=evals", "AllowAccounts=ALL", check=False)


@OLDEST
def test_an_administrators_own_allow_list_is_left_alone(slurm, tmp_path):
    """A GPU group no team has to itself, whose partition an administrator restricted to an
    account of their own: the program leaves that list as it is."""
    own = f"{TAG}admin".replace("-", "")
    slurm.run("sacctmgr", "-i", "add", "account", own, f"cluster={slurm.cluster}")
    try:
        slurm.run("scontrol", "update", "PartitionName=gpu", f"AllowAccounts={own},research")
        result = apply(slurm, TEAMS, tmp_path)
        assert result.returncode == 0, result.stdout
        assert allowed(slurm, "gpu") == f"{own},research"
    finally:
        slurm.run("scontrol", "update", "PartitionName=gpu", "AllowAccounts=ALL", check=False)
        slurm.run("sacctmgr", "-i", "delete", "account", own, check=False)



@pytest.mark.parametrize("default", ["pretrain", "research"])
@OLDEST
def test_a_user_whose_every_team_goes_loses_the_default_association_last(slurm, tmp_path, default):
    """A member of two teams that both go, who keeps no other account here: there is no default
    to move to, and Slurm refuses to remove the default association while the user has others
    ("unless we are removing all of the user's accounts"): the other association goes first, the
    default last, whichever of the two it is, in one run."""
    both = [{**TEAMS[0], "members": [ALICE, BOB, FRANK]}, {**TEAMS[1], "members": [FRANK]}]
    try:
        assert apply(slurm, both, tmp_path).returncode == 0
        slurm.run("sacctmgr", "-i", "modify", "user", "where", f"name={FRANK}", f"cluster={slurm.cluster}", "set",
                  f"defaultaccount={default}")
        result = apply(slurm, [], tmp_path, evals_team=None)
        assert result.returncode == 0, result.stdout
        left = slurm.run("sacctmgr", "-Pn", "show", "account", "format=account").stdout.split()
        assert "pretrain" not in left and "research" not in left
        assert not [row for row in associations(slurm) if row[1] == FRANK]
    finally:
        assert apply(slurm, TEAMS, tmp_path).returncode == 0


@OLDEST
def test_an_allow_list_naming_an_account_not_created_yet_is_left_alone(slurm, tmp_path):
    """An administrator restricts a shared GPU group's partition to an account they have not
    created yet: an account that does not exist is a removed team's only where a list fmcluster
    wrote named it (ALLOWED), so the list stays; a removed team's account fmcluster named is
    still opened (test_a_group_that_stops_being_dedicated_takes_every_teams_jobs_again)."""
    future = f"{TAG}future".replace("-", "")
    try:
        slurm.run("scontrol", "update", "PartitionName=gpu", f"AllowAccounts={future},research")
        result = apply(slurm, TEAMS, tmp_path)
        assert result.returncode == 0, result.stdout
        assert allowed(slurm, "gpu") == f"{future},research"
        assert "pretrain" in (slurm.dir / "allowed-accounts").read_text().split()  # evals' list, recorded
    finally:
        slurm.run("scontrol", "update", "PartitionName=gpu", "AllowAccounts=ALL", check=False)
