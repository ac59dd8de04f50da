"""Loading specs: positions of every error, bad input of every kind, all errors collected."""

import pytest

from fmcluster.spec import loader
from fmcluster.spec.diagnostics import dotted

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


# ---- an unclosed bracket, wherever it stands (issue 38) -----------------------------------

def bracket_shapes():
    """(text, line, column, bracket) of a flow collection left open: a list or a mapping, as a
    value at each depth of a block mapping or as a list item, written on one line or over several,
    with an item, with a trailing comma or empty, followed by a key, a list item, a comment or the
    end of the file (with and without its last newline); line and column are the bracket's."""
    for bracket, item in (("[", "a"), ("{", "k: v")):
        for depth in (0, 1, 2):
            indent = "  " * depth
            head = "".join(f"{'  ' * d}l{d}:\n" for d in range(depth))
            for lead in (f"{indent}key: ", f"{indent}- "):
                for body in ("", item, f"{item},", f"{item}, ", f"\n{indent}  {item},",
                             f"{item},\n{indent}  {item}"):
                    for tail in ("", "\n", f"\n{indent}next: 1\n", f"\n{indent}# a comment\n"):
                        if lead.endswith("- ") and "next" in tail:
                            tail = f"\n{indent}- other\n"
                        text = f"{head}{lead}{bracket}{body}{tail}"
                        yield text, depth + 1, len(lead) + 1, bracket


SHAPES = list(bracket_shapes())


def test_bracket_shapes_are_many_and_all_invalid():
    import yaml

    assert len(SHAPES) >= 200
    for text, *_ in SHAPES:
        with pytest.raises(yaml.YAMLError):
            yaml.safe_load(text)


@pytest.mark.parametrize("text, line, column, bracket", SHAPES, ids=[repr(s[0]) for s in SHAPES])
def test_an_unclosed_bracket_is_named_at_its_line(text, line, column, bracket):
    """Whatever follows it, an unclosed `[` is reported as a `[` (not a `{`), on its own line and
    column (not the line after the last, where the parser notices)."""
    (d,) = load(text).diagnostics
    closer = {"[": "]", "{": "}"}[bracket]
    assert d.message == f"invalid YAML: the `{bracket}` opened here is never closed with `{closer}`", d.format()
    assert (d.line, d.column) == (line, column), d.format()


@pytest.mark.parametrize("text, line, column, message", [
    ("a: [1, [2,\n", 1, 8, "the `[` opened here is never closed with `]`"),  # the innermost first
    ("a: [1, {b: [2,\n", 1, 12, "the `[` opened here is never closed with `]`"),
    ("a: {b: [1, 2,\n", 1, 8, "the `[` opened here is never closed with `]`"),
    ("a: [1, , 2]\n", 1, 8, "nothing between two commas"),
    ("a: {b: 1, , c: 2}\n", 1, 11, "nothing between two commas"),
    ("a: [1, }\n", 1, 8, "`}` closes the `[` opened on line 1, which `]` closes"),
    ("a: [1, 2]]\n", 1, 10, "this `]` closes no `[`"),
    ("a: {b: 1}}\n", 1, 10, "this `}` closes no `{`"),
])
def test_other_bracket_mistakes_are_placed_and_named(text, line, column, message):
    (d,) = load(text).diagnostics
    assert d.message == f"invalid YAML: {message}" and (d.line, d.column) == (line, column), d.format()
    assert d.hint


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


# ---- never crash, never hang (issue 15) -------------------------------------------------

def lol(levels: int, width: int = 9) -> str:
    """A "billion laughs" document: each level aliases the one before `width` times."""
    lines = ["l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_a_located_error_at_once():
    result = load(GOOD + lol(9))  # 9**9 = 387 million values once expanded
    (d,) = result.diagnostics
    assert "past 100000 values" in d.message and d.rule == "yaml"
    assert d.line == len(GOOD.splitlines()) + 6  # the first level that expands past the limit (9**6)
    assert result.spec is None


def test_aliases_within_the_limit_load():
    text = GOOD + "extra: &x [a, b]\n"
    result = load(text.replace("extra: &x [a, b]\n", "") + "tags: &t {team: ml}\n")
    assert result.ok


@pytest.mark.parametrize("text", ["a: &a [*a]\n", "a: &a {b: *a}\n", "a: &a [x, [y, *a]]\n"])
def test_recursive_alias_is_a_located_error(text):
    (d,) = load(text).diagnostics
    assert "recursive alias" in d.message
    assert (d.line, d.column) == (1, 4)


def test_deep_nesting_is_a_located_error():
    text = "".join("  " * i + f"k{i}:\n" for i in range(80)) + "  " * 80 + "v\n"
    (d,) = load(text).diagnostics
    assert "nested more than 64 levels" in d.message
    assert d.line == 65  # k64, the 65th level


def test_merge_keys_work_and_are_not_duplicates():
    text = GOOD.replace("node_groups:\n  - name: gpu\n    instance_type: p5.48xlarge\n    count: 2\n", """\
x-gpu: &gpu
  instance_type: p5.48xlarge
  count: 2
node_groups:
  - <<: *gpu
    name: gpu
  - <<: *gpu
    name: gpu2
    count: 4
""")
    result = load(text)
    messages = [d.message for d in result.diagnostics]
    assert not any("twice" in m for m in messages), messages
    # the merged-in fields are what the groups get; the one given next to the merge wins
    data = result.data
    assert data["node_groups"][0] == {"instance_type": "p5.48xlarge", "count": 2, "name": "gpu"}
    assert data["node_groups"][1]["count"] == 4
    assert list(where(result)) == ["x-gpu"]  # the only problem: x-gpu is not a field
    assert where(result)["x-gpu"] == (6, 1)


def test_a_key_given_twice_next_to_a_merge_is_still_a_duplicate():
    text = GOOD.replace("    count: 2\n", "    count: 2\n    count: 3\n")
    result = load("base: &b {count: 1}\n" + text.replace("  - name: gpu\n", "  - <<: *b\n    name: gpu\n"))
    assert any(d.rule == "duplicate-key" and dotted(d.path) == "node_groups[0].count" for d in result.diagnostics)


def test_a_merged_key_is_placed_at_its_anchor():
    text = "base: &b\n  count: zero\n" + GOOD.replace("    count: 2\n", "").replace(
        "  - name: gpu\n", "  - <<: *b\n    name: gpu\n")
    found = where(load(text))
    assert found["node_groups[0].count"] == (2, 10)


def test_a_fifo_is_refused_without_reading_it(tmp_path):
    import os

    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    (d,) = loader.load(fifo).diagnostics  # a blocking read would hang here
    assert "FIFO" in d.message and d.rule == "file"


@pytest.mark.parametrize("path,kind", [("/dev/zero", "character device"), ("/dev/null", "character device")])
def test_devices_are_refused(path, kind):
    (d,) = loader.load(path).diagnostics
    assert kind in d.message


def test_a_huge_file_is_refused_from_its_size(tmp_path):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as handle:
        handle.truncate(loader.MAX_SPEC_BYTES + 1)  # sparse: nothing is written or read
    (d,) = loader.load(big).diagnostics
    assert "at most 1048576 bytes" in d.message


def test_a_directory_is_refused(tmp_path):
    (d,) = loader.load(tmp_path).diagnostics
    assert "is a directory" in d.message


@pytest.mark.parametrize("value,shown", [("a\nb", "'a\\nb'"), ("a\x00b", "'a\\x00b'"), ("a\u2028b", "'a\\u2028b'")])
def test_control_characters_in_values_are_shown_escaped(value, shown):
    import json

    text = GOOD.replace("name: demo", f"name: {json.dumps(value)}")
    (d,) = load(text).diagnostics
    printed = d.format()
    assert shown in printed.splitlines()[0]
    assert len(printed.splitlines()) == 4  # the message, the line of the file, the caret, the hint
    assert "\x00" not in printed and "\u2028" not in printed


def test_missing_field_points_at_the_key_it_belongs_under():
    result = load(GOOD.replace("  type: pcs\n", "  login: {count: 1}\n"))
    assert where(result)["orchestrator.type"] == (4, 1)  # `orchestrator:`, not its first child


def test_missing_top_level_field_points_at_the_first_key_not_a_comment():
    result = load("# a comment\n\n" + GOOD.replace("region: us-east-1\n", ""))
    assert where(result)["region"] == (3, 1)


def test_text_output_shows_the_line_and_a_caret_and_the_rule_id():
    (d,) = load(GOOD.replace("count: 2", "count: two")).diagnostics
    assert d.format().splitlines() == [
        "spec.yaml:9:12: error: node_groups[0].count: expected a whole number, got 'two' (a string) [wrong-type]",
        " 9 |     count: two",
        "   |            ^",
    ]
    assert d.as_dict()["rule"] == "wrong-type" and "source" not in d.as_dict()
