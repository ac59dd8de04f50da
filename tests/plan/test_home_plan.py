"""The shared home in `fmcluster plan`: the storage rows, the cost line and the JSON plan."""

from __future__ import annotations

from fmcluster.plan import cluster_rows
from fmcluster.plan import report as plan
from tests.support.specs import base_spec, validated, with_


def built(data: dict) -> plan.Plan:
    return plan.build(validated(data), data)


def test_an_openzfs_home_is_shown_and_not_priced():
    data = with_(base_spec(), "storage.home", {"deployment_type": "SINGLE_AZ_HA_2", "throughput_mbps": 320})
    p = built(data)
    assert p.storage.home is not None
    assert (p.storage.home.file_system, p.storage.home.mount_path, p.storage.home.throughput_mbps) == (
        "FSx for OpenZFS", "/home", 320)
    rows = dict((r[0], r[1]) for r in cluster_rows.storage_rows(p) if r[0])
    assert rows["shared home"].startswith("FSx for OpenZFS, 512 GiB SINGLE_AZ_HA_2, 320 MB/s, LZ4, mounted at /home")
    (line,) = [c for c in p.cost.lines if c.item.startswith("FSx for OpenZFS home")]
    assert line.status == "unknown" and line.hourly_usd_max is None  # never a guessed price


def test_lustre_as_the_home_is_shown_as_such():
    p = built(with_(base_spec(), "storage.lustre.mount_path", "/home"))
    assert p.storage.home is not None and p.storage.home.file_system == "FSx for Lustre"
    rows = dict((r[0], r[1]) for r in cluster_rows.storage_rows(p) if r[0])
    assert rows["shared home"] == "the FSx for Lustre file system, mounted at /home on every node"


def test_no_home_no_row():
    p = built(base_spec())
    assert p.storage.home is None and "shared home" not in [r[0] for r in cluster_rows.storage_rows(p)]
