"""Loading specs: positions of every error, bad input of every kind, all errors collected."""

import pytest

from fmcluster import loader
from fmcluster.diagnostics import dotted

GOOD = """\
name: demo
region: us-east-1
availability_zone_id: use1-az4
orchestrator:
  type: pcs
node_groups:
  - name: gpu
    instance_type: p5.48xlarge
    count: 2
"""


def load(text):
    return loader.load_text(text, "spec.yaml")


def where(result):
    return {dotted(d.path): (d.line, d.column) for d in result.diagnostics}


def test_good_spec_loads_with_defaults_resolved():
    result = load(GOOD)
    assert result.ok, [d.format() for d in result.diagnostics]
    spec = result.spec
    assert spec.orchestrator.version == "25.11"
    assert spec.network.vpc_cidr == "10.0.0.0/16"
    assert spec.node_groups[0].efa is True
    assert spec.node_groups[0].placement_group == "auto"
    assert spec.resolved()["orchestrator"]["login"] == {"instance_type": "m7i.2xlarge", "count": 1}


def test_value_error_points_at_the_value():
    result = load(GOOD.replace("count: 2", "count: two"))
    assert where(result)["node_groups[0].count"] == (9, 12)


def test_unknown_key_points_at_the_key_with_a_suggestion():
    result = load(GOOD.replace("    count: 2", "    count: 2\n    instance_typ: x"))
    (d,) = result.diagnostics
    assert dotted(d.path) == "node_groups[0].instance_typ"
    assert (d.line, d.column) == (10, 5)
    assert d.hint == "did you mean `instance_type`?"


def test_missing_key_points_at_the_parent():
    result = load(GOOD.replace("    instance_type: p5.48xlarge\n", ""))
    (d,) = result.diagnostics
    assert dotted(d.path) == "node_groups[0].instance_type"
    assert "missing" in d.message
    assert (d.line, d.column) == (7, 5)


def test_missing_top_level_key_points_at_document_start():
    result = load(GOOD.replace("region: us-east-1\n", ""))
    assert where(result)["region"] == (1, 1)


def test_az_name_gets_az_id_hint():
    result = load(GOOD.replace("use1-az4", "us-east-1a"))
    (d,) = result.diagnostics
    assert "AZ ID" in d.hint and "use1-az1" in d.hint
    assert (d.line, d.column) == (3, 23)


def test_unquoted_version_gets_quote_hint():
    result = load(GOOD.replace("  type: pcs", "  type: pcs\n  version: 25.05"))
    (d,) = result.diagnostics
    assert dotted(d.path) == "orchestrator.version"
    assert 'quote it' in d.hint


def test_literal_gets_did_you_mean():
    result = load(GOOD.replace("type: pcs", "type: eksx"))
    (d,) = result.diagnostics
    assert d.hint == "did you mean 'eks'?"


def test_unknown_instance_type_lists_known_ones():
    result = load(GOOD.replace("p5.48xlarge", "p9.48xlarge"))
    (d,) = result.diagnostics
    assert "unknown instance type" in d.message
    assert "p6-b200.48xlarge" in d.hint


def test_all_errors_collected_type_errors_and_rules_together():
    text = GOOD.replace("count: 2", "count: 2\n    min_count: 1") + "tags:\n  aws:team: x\n"
    text = text.replace("name: demo", "name: Demo")
    paths = set(where(load(text)))
    assert {"name", "node_groups[0].count", "tags.aws:team"} <= paths


def test_rules_in_repaired_objects_are_not_echoed():
    """A wrong count is one error, not also 'the group has no size'."""
    result = load(GOOD.replace("count: 2", "count: '2'"))
    assert [dotted(d.path) for d in result.diagnostics] == ["node_groups[0].count"]


def test_duplicate_key_is_an_error():
    result = load(GOOD.replace("region: us-east-1", "region: us-east-1\nregion: us-west-2"))
    assert any("twice" in d.message and dotted(d.path) == "region" for d in result.diagnostics)


def test_diagnostic_format():
    (d,) = load(GOOD.replace("count: 2", "count: -1")).diagnostics
    assert d.format().startswith("spec.yaml:9:12: error: node_groups[0].count: ")


@pytest.mark.parametrize("text,expect", [
    ("name: [unclosed\n", "invalid YAML"),
    ("a: b\n  c: d\n", "invalid YAML"),
    ("- just\n- a list\n", "must be a mapping"),
    ("just a string\n", "must be a mapping"),
    ("", "empty"),
    ("# only a comment\n", "empty"),
    ("---\na: 1\n---\nb: 2\n", "invalid YAML"),
    ("name: demo\n\tregion: x\n", "invalid YAML"),
    ("? [a, b]\n: c\n", "invalid YAML"),
])
def test_bad_documents_are_located_errors(text, expect):
    result = load(text)
    assert not result.ok
    assert result.spec is None
    assert any(expect in d.message for d in result.diagnostics), [d.format() for d in result.diagnostics]
    assert all(d.line >= 1 and d.column >= 1 for d in result.diagnostics)


def test_yaml_syntax_error_position():
    (d,) = load("name: demo\nregion: [us-east-1\n").diagnostics
    assert d.line >= 2


@pytest.mark.parametrize("text,path,word", [
    ("name: 5\n", "name", "string"),
    ("node_groups: {a: 1}\n", "node_groups", "list"),
    ("orchestrator: pcs\n", "orchestrator", "mapping"),
    ("network:\n  extra_availability_zone_ids: use1-az1\n", "network.extra_availability_zone_ids", "list"),
    ("tags: {team: 5}\n", "tags.team", "string"),
    ("observability: {grafana: 'yes'}\n", "observability.grafana", "true or false"),
])
def test_wrong_types_are_explained(text, path, word):
    diags = {dotted(d.path): d for d in load(text).diagnostics}
    assert word in diags[path].message


def test_missing_file(tmp_path):
    (d,) = loader.load(tmp_path / "nope.yaml").diagnostics
    assert "no such file" in d.message


def test_directory(tmp_path):
    (d,) = loader.load(tmp_path).diagnostics
    assert "directory" in d.message


def test_not_utf8(tmp_path):
    f = tmp_path / "bin.yaml"
    f.write_bytes(b"name: \xff\xfe\n")
    (d,) = loader.load(f).diagnostics
    assert "UTF-8" in d.message


def test_dot_segments_in_paths_are_rejected():
    text = GOOD + "storage:\n  lustre:\n    mount_path: /fsx/../etc\n"
    assert "storage.lustre.mount_path" in where(load(text))
