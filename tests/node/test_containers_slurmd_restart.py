"""containers.sh's restart of a running slurmd (RESTART_SLURMD), run in the boot-path harness
(tests/node/test_boot_path.py's container node): slurmd is restarted once to load Pyxis, even where
its unit answers to two names (AWS PCS's slurmd-VERSION.service with an Alias=slurmd.service: both
names are active, and restarting each would restart slurmd twice)."""

from __future__ import annotations

import dataclasses

from fmcluster.node import bootstrap
from tests.node.test_boot_path import PCS_SLURM, container_node, standin_pins  # noqa: F401  (autouse fixture)


def test_a_running_slurmd_under_two_names_is_restarted_once(tmp_path, monkeypatch):
    pcs = bootstrap.Containers.pcs
    monkeypatch.setattr(bootstrap.Containers, "pcs", lambda *a, **k: dataclasses.replace(pcs(*a, **k),
                                                                                         restart_slurmd=True))
    node, script = container_node(tmp_path)
    units = bootstrap.slurmd_units(PCS_SLURM).split()
    assert units == [f"slurmd-{PCS_SLURM}.service", "slurmd.service"]
    for unit in units:  # one unit, active under both of its names
        (node.state / "units" / unit).write_text("active\n")
    result = node.run(script)
    assert result.returncode == 0, result.stderr
    restarts = [c.args for c in node.calls("systemctl") if c.args[:1] == ("restart",)]
    assert restarts == [("restart", units[0])]
