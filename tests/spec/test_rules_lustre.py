"""fmcluster.spec.rules.lustre: FSx for Lustre grids, metadata IOPS, EFA and data repository links."""

import pytest

from fmcluster.facts import fsx
from fmcluster.spec.rules import lustre
from tests.support.specs import base_spec, findings, messages, paths, with_, without

FS = "storage.lustre"


def fs(**fields):
    """The base spec with storage.lustre fields replaced."""
    spec = base_spec()
    for key, value in fields.items():
        spec = with_(spec, f"{FS}.{key}", value)
    return spec


def scratch(**fields):
    """A SCRATCH_2 file system without links."""
    return without(fs(deployment_type="SCRATCH_2", **fields), f"{FS}.links")


def test_no_file_system_passes_every_lustre_rule():
    spec = without(base_spec(), FS)
    for fn in (lustre.lustre_capacity_grid, lustre.lustre_throughput_grid, lustre.lustre_metadata_iops,
               lustre.lustre_efa_deployment, lustre.lustre_efa_clients, lustre.lustre_links_limit,
               lustre.lustre_links_buckets_declared, lustre.lustre_links_distinct_paths,
               lustre.lustre_links_distinct_repositories, lustre.lustre_link_events_distinct,
               lustre.lustre_mount_path_free):
        assert findings(fn, spec) == [], fn.__name__
    assert paths(spec) == set()


# ---- lustre_capacity_grid -------------------------------------------------------------

@pytest.mark.parametrize("deployment", ["PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2"])
@pytest.mark.parametrize("gib", [1200, 2400, 4800, 9600])
def test_ssd_capacities_on_the_grid(deployment, gib):
    spec = without(fs(storage_capacity_gib=gib, deployment_type=deployment), f"{FS}.links")
    assert findings(lustre.lustre_capacity_grid, spec) == []
    assert paths(spec) == set()


@pytest.mark.parametrize("gib", [1000, 3600, 5000])
def test_ssd_capacities_off_the_grid(gib):
    spec = fs(storage_capacity_gib=gib)
    assert f"{FS}.storage_capacity_gib" in paths(spec)
    (message,) = messages(spec, f"{FS}.storage_capacity_gib")
    assert f"{gib} GiB is not a valid capacity for PERSISTENT_2" in message
    assert "1200 or a multiple of 2400" in message


@pytest.mark.parametrize("gib, tier", [(4800, 1000), (9600, 1000), (9600, 500), (19200, 250),
                                       (38400, 125), (76800, 125)])
def test_efa_capacities_on_the_tier_grid(gib, tier):
    spec = fs(storage_capacity_gib=gib, throughput_per_tib=tier, efa=True)
    assert findings(lustre.lustre_capacity_grid, spec) == []
    assert paths(spec) == set()


@pytest.mark.parametrize("gib, tier, step", [(2400, 1000, 4800), (1200, 1000, 4800), (4800, 500, 9600),
                                             (9600, 250, 19200), (19200, 125, 38400)])
def test_efa_capacities_off_the_tier_grid(gib, tier, step):
    spec = fs(storage_capacity_gib=gib, throughput_per_tib=tier, efa=True)
    assert f"{FS}.storage_capacity_gib" in paths(spec)
    (message,) = messages(spec, f"{FS}.storage_capacity_gib")
    assert f"EFA file system at {tier} MB/s per TiB" in message
    assert f"a multiple of {step}" in message


# ---- lustre_throughput_grid -----------------------------------------------------------

TIERS = [("PERSISTENT_2", t) for t in (125, 250, 500, 1000)] + [("PERSISTENT_1", t) for t in (50, 100, 200)]


@pytest.mark.parametrize("deployment, tier", TIERS)
def test_offered_throughput_tiers_pass(deployment, tier):
    spec = without(fs(deployment_type=deployment, throughput_per_tib=tier), f"{FS}.links")
    assert findings(lustre.lustre_throughput_grid, spec) == []
    assert paths(spec) == set()


@pytest.mark.parametrize("deployment", ["PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2"])
def test_default_throughput_passes(deployment):
    spec = without(fs(deployment_type=deployment), f"{FS}.links")
    assert findings(lustre.lustre_throughput_grid, spec) == []


@pytest.mark.parametrize("deployment, tier", [("PERSISTENT_1", 250), ("PERSISTENT_1", 1000),
                                              ("PERSISTENT_2", 200), ("PERSISTENT_2", 50)])
def test_throughput_not_offered_for_the_deployment_type(deployment, tier):
    spec = without(fs(deployment_type=deployment, throughput_per_tib=tier), f"{FS}.links")
    assert f"{FS}.throughput_per_tib" in paths(spec)
    assert f"{tier} MB/s per TiB is not offered for {deployment}" in messages(spec, f"{FS}.throughput_per_tib")[0]


@pytest.mark.parametrize("tier", [200, 125])
def test_scratch_throughput_is_fixed(tier):
    spec = scratch(throughput_per_tib=tier)
    assert f"{FS}.throughput_per_tib" in paths(spec)
    assert "fixed throughput" in messages(spec, f"{FS}.throughput_per_tib")[0]


# ---- lustre_metadata_iops -------------------------------------------------------------

@pytest.mark.parametrize("iops", ["auto", 1500, 3000, 6000, 12000, 24000, 36000, 192000])
def test_valid_metadata_iops(iops):
    spec = fs(metadata_iops=iops)
    assert findings(lustre.lustre_metadata_iops, spec) == []
    assert paths(spec) == set()


@pytest.mark.parametrize("iops", [0, -12000, 1000, 7000, 18000, 204000])
def test_invalid_metadata_iops(iops):
    spec = fs(metadata_iops=iops)
    assert f"{FS}.metadata_iops" in paths(spec)
    assert f"{iops} is not a valid metadata IOPS setting" in messages(spec, f"{FS}.metadata_iops")[0]


@pytest.mark.parametrize("deployment", ["PERSISTENT_1", "SCRATCH_2"])
def test_metadata_iops_only_on_persistent_2(deployment):
    spec = without(fs(deployment_type=deployment, metadata_iops=12000), f"{FS}.links")
    assert f"{FS}.metadata_iops" in paths(spec)
    assert "only on PERSISTENT_2" in messages(spec, f"{FS}.metadata_iops")[0]
    assert findings(lustre.lustre_metadata_iops, with_(spec, f"{FS}.metadata_iops", "auto")) == []


# ---- lustre_efa_deployment ------------------------------------------------------------

def test_efa_on_persistent_2_passes():
    spec = fs(efa=True, storage_capacity_gib=19200)
    assert findings(lustre.lustre_efa_deployment, spec) == []
    assert paths(spec) == set()


@pytest.mark.parametrize("deployment", ["PERSISTENT_1", "SCRATCH_2"])
def test_efa_only_on_persistent_2(deployment):
    spec = without(fs(deployment_type=deployment, efa=True), f"{FS}.links")
    assert f"{FS}.efa" in paths(spec)
    assert any("must be PERSISTENT_2" in m for m in messages(spec, f"{FS}.efa"))


# ---- lustre_efa_clients ---------------------------------------------------------------

def test_efa_file_system_with_an_efa_group_passes():
    spec = fs(efa=True, storage_capacity_gib=19200)
    assert findings(lustre.lustre_efa_clients, spec) == []


@pytest.mark.parametrize("group", [{"efa": False}, {"instance_type": "c7i.8xlarge"}])
def test_efa_file_system_without_efa_node_group(group):
    spec = fs(efa=True, storage_capacity_gib=19200)
    for key, value in group.items():
        spec = with_(spec, f"node_groups[0].{key}", value)
    assert f"{FS}.efa" in paths(spec)
    assert "no node group has EFA" in messages(spec, f"{FS}.efa")[0]


# ---- lustre_links_limit ---------------------------------------------------------------

def links(n):
    return [{"bucket": "datasets", "path": f"/data{i}", "prefix": f"p{i}/"} for i in range(n)]


def test_eight_links_pass():
    spec = fs(links=links(8))
    assert findings(lustre.lustre_links_limit, spec) == []
    assert paths(spec) == set()


def test_more_than_eight_links():
    spec = fs(links=links(9))
    assert f"{FS}.links" in paths(spec)
    assert f"at most {fsx.MAX_LINKS}" in messages(spec, f"{FS}.links")[0]


# ---- links on every deployment type offered (FSx: every Lustre 2.12/2.15 file system but SCRATCH_1)

@pytest.mark.parametrize("deployment", ["PERSISTENT_1", "SCRATCH_2"])
def test_links_pass_on_every_deployment_type_offered(deployment):
    spec = fs(deployment_type=deployment, throughput_per_tib=200 if deployment == "PERSISTENT_1" else None)
    if deployment == "SCRATCH_2":
        spec = without(spec, f"{FS}.throughput_per_tib")
    assert spec["storage"]["lustre"]["links"]
    assert paths(spec) == set()


# ---- lustre_links_buckets_declared ----------------------------------------------------

def test_links_to_declared_buckets_pass():
    assert findings(lustre.lustre_links_buckets_declared, base_spec()) == []


def test_link_to_undeclared_bucket():
    spec = fs(**{"links[1].bucket": "checkpoint"})
    assert f"{FS}.links[1].bucket" in paths(spec)
    (message,) = messages(spec, f"{FS}.links[1].bucket")
    assert "'checkpoint' is not declared" in message
    assert "datasets, checkpoints" in message  # the hint lists what is declared


def test_link_with_no_buckets_declared():
    spec = without(base_spec(), "storage.buckets")
    assert {f"{FS}.links[0].bucket", f"{FS}.links[1].bucket"} <= paths(spec)
    assert "declare it under storage.buckets" in messages(spec, f"{FS}.links[0].bucket")[0]


# ---- lustre_links_distinct_paths ------------------------------------------------------

@pytest.mark.parametrize("a, b", [("/data", "/database"), ("/datasets", "/checkpoints"), ("/a/b", "/a/c")])
def test_separate_link_paths_pass(a, b):
    spec = fs(**{"links[0].path": a, "links[1].path": b})
    assert findings(lustre.lustre_links_distinct_paths, spec) == []
    assert paths(spec) == set()


@pytest.mark.parametrize("a, b", [("/data", "/data/raw"), ("/data/raw", "/data"), ("/data", "/data"),
                                  ("/data", "/data/")])
def test_overlapping_link_paths(a, b):
    spec = fs(**{"links[0].path": a, "links[1].path": b})
    assert f"{FS}.links[1].path" in paths(spec)
    assert f"{FS}.links[0].path" not in paths(spec)
    assert "overlaps" in messages(spec, f"{FS}.links[1].path")[0]
    assert "links[0]" in messages(spec, f"{FS}.links[1].path")[0]


# ---- lustre_mount_path_free (issue 15) --------------------------------------------------

@pytest.mark.parametrize("path", ["/fsx", "/lustre", "/mnt/fsx", "/opt/fsx", "/home/shared", "/data/fsx", "/home"])
def test_mount_paths_of_their_own_pass(path):
    spec = fs(mount_path=path)
    assert findings(lustre.lustre_mount_path_free, spec) == []
    assert paths(spec) == set()


@pytest.mark.parametrize("path,word", [
    ("/usr", "system directory"), ("/usr/local", "under /usr"), ("/etc", "system directory"),
    ("/var", "system directory"), ("/var/lib/fsx", "under /var"), ("/boot", "system"), ("/proc", "system"),
    ("/sys", "system"), ("/dev", "system"), ("/tmp", "system"), ("/opt", "system"),
    ("/root", "system"), ("/run/fsx", "under /run"),
    ("/scratch", "instance-store NVMe"), ("/scratch/fsx", "overlaps /scratch"),
    ("/opt/dlami/nvme", "Deep Learning AMI"), ("/opt/dlami", "overlaps /opt/dlami/nvme"),
])
def test_mount_paths_over_what_the_node_uses_are_refused(path, word):
    spec = fs(mount_path=path)
    (message,) = messages(spec, f"{FS}.mount_path")
    assert word in message


def test_opt_sagemaker_is_hyperpods_own():
    spec = with_(fs(mount_path="/opt/sagemaker"), "orchestrator.type", "hyperpod-slurm")
    assert "SageMaker HyperPod's volume" in messages(spec, f"{FS}.mount_path")[0]
    assert findings(lustre.lustre_mount_path_free, fs(mount_path="/opt/sagemaker")) == []  # PCS: free


def test_root_is_not_a_mount_path():
    assert f"{FS}.mount_path" in paths(fs(mount_path="/"))


# ---- links: "/", distinct repositories, distinct events (issue 15) ------------------------------

def one_link(**fields):
    return fs(links=[{"bucket": "datasets", **fields}])


def test_the_whole_file_system_as_the_one_link_passes():
    spec = one_link(path="/", **{"import": ["NEW"]})
    assert paths(spec) == set()


def test_the_whole_file_system_with_other_links_is_refused():
    spec = fs(links=[{"bucket": "datasets", "path": "/"}, {"bucket": "checkpoints", "path": "/checkpoints"}])
    (message,) = messages(spec, f"{FS}.links[0].path")
    assert "must be its only link" in message
    assert f"{FS}.links[1].path" not in paths(spec)  # not also reported as overlapping "/"


@pytest.mark.parametrize("first,second", [("", ""), ("raw", "raw"), ("raw/", "/raw"), ("a/b", "a/b/")])
def test_the_same_bucket_and_prefix_twice_is_refused(first, second):
    spec = fs(links=[{"bucket": "datasets", "path": "/a", "prefix": first},
                     {"bucket": "datasets", "path": "/b", "prefix": second}])
    field = "prefix" if second else "bucket"
    (message,) = messages(spec, f"{FS}.links[1].{field}")
    assert "is linked already, by links[0]" in message


def test_distinct_prefixes_of_one_bucket_pass():
    spec = fs(links=[{"bucket": "datasets", "path": "/a", "prefix": "raw"},
                     {"bucket": "datasets", "path": "/b", "prefix": "tokenized"}])
    assert findings(lustre.lustre_links_distinct_repositories, spec) == []
    assert paths(spec) == set()


@pytest.mark.parametrize("field", ["import", "export"])
def test_an_event_listed_twice_is_refused_at_the_second(field):
    spec = one_link(path="/d", **{field: ["NEW", "CHANGED", "NEW"]})
    assert paths(spec) == {f"{FS}.links[0].{field}[2]"}


@pytest.mark.parametrize("prefix,word", [("a\nb", "control characters"), ("p" * 1025, "at most 1024 bytes")])
def test_bad_prefixes(prefix, word):
    spec = one_link(path="/d", prefix=prefix)
    assert any(word in m for m in messages(spec, f"{FS}.links[0].prefix"))
