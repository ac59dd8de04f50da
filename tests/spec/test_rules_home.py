"""fmcluster.spec.rules.home: the shared home's throughput, and one file system at /home."""

import pytest

from fmcluster.facts import openzfs
from fmcluster.spec.rules import home
from tests.support.specs import base_spec, findings, messages, paths, validated, with_, without

HOME = "storage.home"


def homed(**fields):
    """The base spec with a shared home (storage.home) of these fields."""
    return with_(base_spec(), HOME, dict(fields))


def test_no_home_passes_every_home_rule():
    spec = base_spec()
    for fn in (home.home_throughput_offered, home.home_one_file_system):
        assert findings(fn, spec) == [], fn.__name__


def test_a_default_home_is_valid_and_resolved():
    spec = homed()
    assert paths(spec) == set()
    fs = validated(spec).storage.home
    assert (fs.deployment_type, fs.throughput_mbps, fs.storage_capacity_gib) == ("SINGLE_AZ_2", 160, 512)
    assert validated(homed(deployment_type="SINGLE_AZ_1")).storage.home.throughput_mbps == 64


@pytest.mark.parametrize("deployment", openzfs.DEPLOYMENT_TYPES)
def test_every_offered_throughput_passes(deployment):
    for mbps in openzfs.THROUGHPUT_MBPS[deployment]:
        spec = homed(deployment_type=deployment, throughput_mbps=mbps)
        assert findings(home.home_throughput_offered, spec) == [], (deployment, mbps)


@pytest.mark.parametrize("deployment, mbps", [("SINGLE_AZ_2", 64), ("SINGLE_AZ_HA_2", 128), ("SINGLE_AZ_1", 160),
                                              ("SINGLE_AZ_HA_1", 10240), ("SINGLE_AZ_2", 100)])
def test_throughput_not_offered_is_refused(deployment, mbps):
    spec = homed(deployment_type=deployment, throughput_mbps=mbps)
    (message,) = messages(spec, f"{HOME}.throughput_mbps")
    assert f"{mbps} MB/s is not a throughput capacity of {deployment}" in message


@pytest.mark.parametrize("gib", [63, 524289, 0])
def test_capacity_outside_the_service_limits_is_refused(gib):
    assert f"{HOME}.storage_capacity_gib" in paths(homed(storage_capacity_gib=gib))


@pytest.mark.parametrize("field, value", [("deployment_type", "MULTI_AZ_1"), ("compression", "GZIP")])
def test_values_not_offered_are_refused(field, value):
    assert f"{HOME}.{field}" in paths(homed(**{field: value}))


def test_lustre_may_be_the_home_alone():
    spec = with_(base_spec(), "storage.lustre.mount_path", "/home")
    assert paths(spec) == set()


def test_two_file_systems_at_home_are_refused():
    spec = with_(homed(), "storage.lustre.mount_path", "/home")
    (message,) = messages(spec, "storage.lustre.mount_path")
    assert "storage.home is mounted at /home already" in message


def test_lustre_inside_the_shared_home_is_refused():
    spec = with_(homed(), "storage.lustre.mount_path", "/home/fsx")
    (message,) = messages(spec, "storage.lustre.mount_path")
    assert "inside /home" in message


def test_home_without_lustre_passes():
    assert paths(without(homed(), "storage.lustre")) == set()
