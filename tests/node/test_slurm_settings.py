"""The Slurm settings fmcluster gives AWS PCS (the cluster's SlurmCustomSettings, model.slurm_settings;
each queue's, NodeGroup.partition_settings) as slurm.conf lines a real slurmctld accepts and applies
(Debian's 22.05 on localhost, tests/support/slurm_cluster.py): the IMEX prolog's Prolog= and
PrologFlags=Alloc,NoHold on a cluster with an UltraServer group, and OverSubscribe=EXCLUSIVE on its
partition, which gives a job submitted without --exclusive whole nodes (the IMEX prolog acts on
exclusive jobs only).

What this leaves to AWS PCS: how it maps its SlurmCustomSettings onto slurm.conf (PCS accepts a
documented subset), and Slurm 24.11+'s parsing, which 22.05 stands in for.
"""

from __future__ import annotations

from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from tests.support.paths import EXAMPLES_DIR
from tests.support.slurm_cluster import SlurmCluster

EXAMPLE = EXAMPLES_DIR / "p6e-gb200-pcs.yaml"


def test_the_ultraserver_settings_are_slurm_conf_lines_slurmctld_applies(tmp_path):
    model = resolve(loader.load(EXAMPLE).spec)
    (group,) = model.ultraserver_groups
    assert model.slurm_settings and group.partition_settings
    with SlurmCluster(tmp_path / "slurm", 2, extra=[f"{k}={v}" for k, v in model.slurm_settings.items()],
                      partitions={group.name: ["node1", "node2"]},
                      partition_settings={group.name: group.partition_settings}) as cluster:
        lines = cluster.run("scontrol", "show", "config").stdout.splitlines()
        config = {k.strip(): v.strip() for k, v in (line.split(" = ", 1) for line in lines if " = " in line)}
        for name, value in model.slurm_settings.items():
            assert config[name] == value, (name, config.get(name))
        partition = cluster.run("scontrol", "-o", "show", "partition", group.name).stdout
        for name, value in group.partition_settings.items():
            assert f"{name}={value}" in partition
        # a job that does not ask for --exclusive still gets whole nodes
        job = cluster.run("sbatch", "--parsable", "--hold", f"--partition={group.name}", "-N1", "-n1",
                          "--wrap=true").stdout.strip().split(";")[0]
        assert cluster.job(job)["OverSubscribe"] == "NO"
