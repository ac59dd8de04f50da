"""The teams as Slurm accounting on a real Slurm configured as fmcluster configures AWS PCS: of
accounting.SLURM_SETTINGS only accounting.PCS_SETTINGS (AccountingStorageEnforce), so Slurm does
not track gres/gpu as a TRES and sacctmgr refuses any GrpTRES on it. The accounts and users are
still made (the GPU limit skipped, and said), and the teams' jobs accepted.

Real: Slurm of each release AWS PCS runs (24.11, 26.05), laid out as PCS lays it out (slurmctld,
slurmd, slurmdbd, sacctmgr and sbatch from its root, auth/slurm: tests/support/slurm_roots.py),
MariaDB, getent and the Linux users the module creates (and removes)."""

from __future__ import annotations

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

TAG = "fmp" + uuid.uuid4().hex[:5]
ALICE, CAROL = f"{TAG}-alice", f"{TAG}-carol"
# research may borrow only so far: its account's GrpTRES=gres/gpu=8 where Slurm tracks GPUs
TEAMS = [
    {"name": "pretrain", "members": [ALICE], "gpus": {"gpu": 8}, "priority": "high"},
    {"name": "research", "members": [CAROL], "gpus": {"gpu": 4}, "borrow": 4},
]


@pytest.fixture(scope="module", params=PCS_RELEASES, ids=release_id)
def slurm(request):
    require_slurm(request.param)
    require_accounting()
    for tool in ("useradd", "runuser"):
        if find(tool) is None:
            pytest.skip(f"no {tool}")
    directory = Path(tempfile.mkdtemp(prefix="fmpcs-"))
    directory.chmod(0o755)
    for user in (ALICE, CAROL):
        subprocess.run(["useradd", "-M", "-N", "-s", "/bin/sh", user], check=True)
    try:
        with AccountingDatabase(directory / "db") as database:
            args = with_accounting(database, settings=accounting.pcs_settings())
            assert not any(line.startswith("AccountingStorageTRES") for line in args["extra"])
            with SlurmCluster(directory / "slurm", nodes=1, gres="gpu:8", partitions={"gpu": ["node1"]},
                              release=request.param, **args) as cluster:
                cluster.sockets.chmod(0o755)
                yield cluster
    finally:
        for user in (ALICE, CAROL):
            subprocess.run(["userdel", user], capture_output=True)
        shutil.rmtree(directory, ignore_errors=True)


def test_without_gpus_as_a_tres_the_teams_are_made_and_their_jobs_accepted(slurm, tmp_path):
    assert "gres|gpu" not in slurm.run("sacctmgr", "-Pn", "show", "tres", "format=type,name").stdout.split()
    path = tmp_path / "teams"
    path.write_text(accounting.data(resolve(validated(base_spec(teams=TEAMS))).teams))
    assert "gres/gpu=8" in path.read_text()

    def apply():
        return subprocess.run(["bash", str(accounting.PROGRAM), str(path)],
                              env={**slurm.env, "SLURM_BIN": str(slurm.bin)}, capture_output=True, text=True,
                              timeout=120)

    first = apply()
    assert first.returncode == 0, first.stdout + first.stderr
    assert "GrpTRES=gres/gpu=8 skipped" in first.stdout
    out = slurm.run("sacctmgr", "-Pn", "show", "assoc", "format=account,user,grptres").stdout.split()
    assert {"pretrain||", "research||", f"pretrain|{ALICE}|", f"research|{CAROL}|"} <= set(out)
    for user, account in ((ALICE, "pretrain"), (CAROL, "research")):
        job = slurm.as_user(user, "sbatch", "--parsable", "--hold", "--chdir=/tmp", "-o", "/dev/null", "-A", account,
                            "-p", "gpu", "--wrap", "true", timeout=30)
        assert job.returncode == 0, job.stderr
        slurm.run("scancel", job.stdout.strip().split(";")[0])
    second = apply()  # nothing to change: the skipped limit is said again, nothing else
    assert second.returncode == 0 and second.stdout.strip().endswith("up to date"), second.stdout
