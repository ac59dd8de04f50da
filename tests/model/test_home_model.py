"""The model's shared home (fmcluster.model.node.home_of): resolved once, for the plan, the
stacks and the node scripts."""

from fmcluster.model.cluster import LUSTRE, OPENZFS, Home, resolve
from tests.support.specs import base_spec, validated, with_


def test_storage_home_is_an_openzfs_home_at_home():
    m = resolve(validated(with_(base_spec(), "storage.home", {})))
    assert m.home == Home(OPENZFS, "/home")
    assert "FSx for OpenZFS" in m.stack("storage").contents


def test_lustre_at_home_is_the_home():
    m = resolve(validated(with_(base_spec(), "storage.lustre.mount_path", "/home")))
    assert m.home == Home(LUSTRE, "/home")
    assert "OpenZFS" not in m.stack("storage").contents


def test_no_home_by_default():
    assert resolve(validated(base_spec())).home is None
    assert resolve(validated(with_(base_spec(), "storage.lustre.mount_path", "/home/fsx"))).home is None
