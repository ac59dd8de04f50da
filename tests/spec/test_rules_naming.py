"""fmcluster.spec.rules.naming: node group names, bucket names, tags."""

import pytest

from fmcluster.spec.diagnostics import dotted
from fmcluster.spec.rules import naming
from tests.support.specs import base_spec, findings, messages, paths, problems, with_

CPU_GROUP = {"name": "cpu", "instance_type": "c7i.8xlarge", "count": 2}


def test_base_spec_has_no_problems():
    assert paths(base_spec()) == set()
    assert paths(base_spec(), severity="warning") == set()


# ---- node_group_names_unique ----------------------------------------------------------

def test_distinct_group_names_pass():
    spec = with_(base_spec(), "node_groups[1]", CPU_GROUP)
    assert findings(naming.node_group_names_unique, spec) == []
    assert "node_groups[1].name" not in paths(spec)


def test_repeated_group_name_is_reported_at_the_second_group():
    spec = with_(base_spec(), "node_groups[1]", {**CPU_GROUP, "name": "gpu"})
    assert "node_groups[1].name" in paths(spec)
    assert "node_groups[0].name" not in paths(spec)
    assert "used twice" in messages(spec, "node_groups[1].name")[0]
    assert "node_groups[0]" in messages(spec, "node_groups[1].name")[0]  # the hint names the first


def test_each_repeat_is_reported():
    spec = base_spec()
    for i in (1, 2):
        spec = with_(spec, f"node_groups[{i}]", {**CPU_GROUP, "name": "gpu"})
    assert {"node_groups[1].name", "node_groups[2].name"} <= paths(spec)


# ---- node_group_names_not_reserved ----------------------------------------------------

@pytest.mark.parametrize("name", ["gpu", "cpu", "login-nodes", "controllers"])
def test_unreserved_group_names_pass(name):
    spec = with_(base_spec(), "node_groups[0].name", name)
    assert findings(naming.node_group_names_not_reserved, spec) == []
    assert "node_groups[0].name" not in paths(spec)


@pytest.mark.parametrize("name", sorted(naming.RESERVED_GROUP_NAMES))
def test_reserved_group_names_fail(name):
    spec = with_(base_spec(), "node_groups[1]", {**CPU_GROUP, "name": name})
    assert "node_groups[1].name" in paths(spec)
    assert "reserved" in messages(spec, "node_groups[1].name")[0]


# ---- bucket_names_unique --------------------------------------------------------------

def test_distinct_bucket_names_pass():
    spec = base_spec()
    assert findings(naming.bucket_names_unique, spec) == []
    assert not any(p.startswith("storage.buckets") for p in paths(spec))


def test_repeated_bucket_name_is_reported_at_the_second_bucket():
    spec = with_(base_spec(), "storage.buckets[2]", {"name": "datasets", "versioned": True})
    assert "storage.buckets[2].name" in paths(spec)
    assert "storage.buckets[0].name" not in paths(spec)
    assert "declared twice" in messages(spec, "storage.buckets[2].name")[0]


# ---- tags_valid -----------------------------------------------------------------------

@pytest.mark.parametrize("key", ["team", "cost-center", "awsome", "x" * 128, "project:aws"])
def test_valid_tag_keys_pass(key):
    spec = base_spec(tags={key: "ml"})
    assert findings(naming.tags_valid, spec) == []
    assert paths(spec) == set()


@pytest.mark.parametrize("key", ["aws:team", "AWS:Team", "Aws:cost"])
def test_aws_prefix_is_reserved(key):
    spec = base_spec(tags={"team": "ml", key: "x"})
    assert f"tags.{key}" in paths(spec)
    assert "tags.team" not in paths(spec)
    assert "aws:" in messages(spec, f"tags.{key}")[0]


def test_tag_key_too_long():
    key = "k" * 129
    spec = base_spec(tags={key: "x"})
    assert f"tags.{key}" in paths(spec)
    assert "128" in messages(spec, f"tags.{key}")[0]


def test_tag_value_length_limit():
    assert paths(base_spec(tags={"note": "v" * 256})) == set()
    spec = base_spec(tags={"note": "v" * 257})
    assert "tags.note" in paths(spec)
    assert "256" in messages(spec, "tags.note")[0]


# ---- bucket_s3_names_fit ({cluster}-{bucket}-{account}-{region code} fits 63 characters) --

LONG_CLUSTER = "c" * 32  # the longest cluster name


def test_s3_name_of_63_characters_fits():
    # 32 + 12 + 12 (account) + 4 (use1) + 3 dashes = 63
    spec = with_(base_spec(name=LONG_CLUSTER), "storage.buckets[2]", {"name": "b" * 12})
    assert findings(naming.bucket_s3_names_fit, spec) == []
    assert paths(spec) == set()


def test_s3_name_of_64_characters_does_not_fit():
    spec = with_(base_spec(name=LONG_CLUSTER), "storage.buckets[2]", {"name": "b" * 13})
    assert "storage.buckets[2].name" in paths(spec)
    assert "storage.buckets[0].name" not in paths(spec)  # datasets still fits
    (message,) = messages(spec, "storage.buckets[2].name")
    assert "64 characters" in message and "S3 allows 63" in message


def test_reserved_s3_prefix_in_cluster_name():
    from tests.support.specs import base_spec, paths

    assert "name" in paths(base_spec(name="xn--demo"))
    assert "name" not in paths(base_spec(name="demo"))


# ---- tags_valid: EC2's tag restrictions (issue 15) ---------------------------------------

def tagged(tags):
    return with_(base_spec(), "tags", tags)


def test_forty_six_tags_pass_with_fmclusters_four():
    spec = tagged({f"k{i}": "v" for i in range(46)})
    assert findings(naming.tags_valid, spec) == []
    assert paths(spec) == set()


def test_forty_seven_tags_are_too_many():
    spec = tagged({f"k{i}": "v" for i in range(47)})
    (message,) = messages(spec, "tags")
    assert "at most 50" in message and "Name, fmcluster:cluster, fmcluster:node-group, fmcluster:team" in message


@pytest.mark.parametrize("key", ["Project", "cost center", "team:ml/platform", "a=b+c-d@e_f.g", "プロジェクト",
                                 "k" * 128])
def test_tag_keys_ec2_takes_pass(key):
    spec = tagged({key: "v"})
    assert findings(naming.tags_valid, spec) == []


@pytest.mark.parametrize("key,word", [
    ("aws:team", "aws: prefix"), ("AWS:team", "aws: prefix"), ("fmcluster:cluster", "fmcluster: prefix"),
    ("FMCluster:x", "fmcluster: prefix"), ("Name", "its own Name tag"), ("k" * 129, "1 to 128"),
    ("a#b", "is not allowed"), ("a,b", "is not allowed"),
])
def test_bad_tag_keys_are_reported_at_the_key(key, word):
    spec = tagged({key: "v"})
    found = [d for d in problems(spec) if d.rule == "tags-valid"]
    assert len(found) == 1 and word in found[0].message
    assert found[0].path == ("tags", key)


@pytest.mark.parametrize("key", ["a\nb", "a\x00b"])
def test_tag_keys_with_control_characters_are_reported_once_at_the_key(key):
    """As every string of the spec (control-character), before the tag rules, which do not repeat it."""
    spec = tagged({key: "v"})
    (found,) = [d for d in problems(spec) if dotted(d.path).startswith("tags")]
    assert found.rule == "control-character" and "control characters" in found.message
    assert found.path == ("tags", key)


@pytest.mark.parametrize("value,word", [("v" * 257, "at most 256"), ("a;b", "is not allowed"), ("", "empty tag value"),
                                        ("x\ny", "control characters")])
def test_bad_tag_values(value, word):
    spec = tagged({"team": value})
    assert any(word in m for m in messages(spec, "tags.team"))


@pytest.mark.parametrize("value", ["m", "ml platform", "v" * 256, "a:b/c=d+e-f@g_h.i"])
def test_tag_values_ec2_takes_pass(value):
    assert findings(naming.tags_valid, tagged({"team": value})) == []


# ---- buckets_limit ----------------------------------------------------------------------

def test_thirty_two_buckets_pass_and_thirty_three_do_not():
    from fmcluster.facts import naming as names

    buckets = [{"name": f"b{i:02d}"} for i in range(names.MAX_BUCKETS)]
    spec = with_(with_(base_spec(), "storage.buckets", buckets), "storage.lustre.links", [])
    assert findings(naming.buckets_limit, spec) == []
    spec = with_(spec, "storage.buckets", buckets + [{"name": "one-more"}])
    assert f"storage.buckets[{names.MAX_BUCKETS}]" in paths(spec)
    assert "10,240 characters" in messages(spec, f"storage.buckets[{names.MAX_BUCKETS}]")[0]
