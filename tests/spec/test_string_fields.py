"""Every string of the spec is one line of text: each string-typed field of the models (found by
walking their annotations, so a field added later is held too), a map's keys and values and a
list's items included, refuses a trailing line break and any control character, located at the
field (at the key, for a map's key), and the diagnostic is one line however the value reads."""

from __future__ import annotations

import copy
import typing
import unicodedata
from typing import Any, Iterator

import pytest
from pydantic import BaseModel, ValidationError

from fmcluster.facts import regions
from fmcluster.spec.diagnostics import CONTROL_CHARACTERS, control_characters, one_line
from fmcluster.spec.models import ClusterSpec
from tests.support.specs import base_spec, problems

Pattern = tuple[str, ...]  # a field's path: "[]" every item of a list, "{key}" / "{}" every key / value of a map
RULE = "control-character"


def string_fields(model: type[BaseModel], prefix: Pattern = ()) -> Iterator[Pattern]:
    """The paths of every field (or item, key, value) whose type is a string, under `model`."""
    for name, field in model.model_fields.items():
        yield from _strings(field.annotation, prefix + (field.alias or name,))


def _strings(annotation: Any, path: Pattern) -> Iterator[Pattern]:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        yield from _strings(args[0], path)
    elif origin is typing.Union:
        for option in args:
            yield from _strings(option, path)
    elif origin is list:
        yield from _strings(args[0], path + ("[]",))
    elif origin is dict:
        yield from _strings(args[0], path + ("{key}",))
        yield from _strings(args[1], path + ("{}",))
    elif annotation is str:  # a Literal is a choice (not-a-choice), not a string field
        yield path
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield from string_fields(annotation, path)


# A spec that gives every string field a value its format takes (other findings, such as a
# reservation and a training plan together, do not matter here)
SAMPLE = base_spec(
    account="111122223333",
    network={"vpc_cidr": "10.0.0.0/16", "extra_availability_zone_ids": ["use1-az1"]},
    orchestrator={"type": "pcs", "version": "25.05", "login": {"instance_type": "m7i.2xlarge"},
                  "admin_role_arn": "arn:aws:iam::111122223333:role/Admin", "public_access_cidrs": ["203.0.113.0/24"],
                  "namespace": "training"},
    observability={"alert_email": "oncall@example.com"},
    tags={"team": "ml-platform"},
    teams=[{"name": "pretrain", "members": ["alice"], "groups": ["ml-pretrain"], "gpus": {"gpu": 8}}],
    serving={"model": {"name": "Llama-3.1-8B", "path": "/fsx/models/llama", "parameters_billions": 8},
             "node_group": "gpu", "image": "vllm/vllm-openai:v0.10.0"},
    accepted_warnings=[{"rule": "capacity-block-not-placed", "reason": "known", "path": "node_groups[0]"}],
)
SAMPLE["storage"]["lustre"].update(metadata_iops="auto", mount_path="/fsx")
SAMPLE["storage"]["lustre"]["links"][0]["prefix"] = "raw"
SAMPLE["node_groups"][0].update(
    ami_id="ami-0123456789abcdef0", labels={"tier": "gpu"}, placement_group="auto", team="pretrain",
    capacity={"type": "reservation", "reservation_id": "cr-0123456789abcdef0",
              "reservation_resource_group_arn": "arn:aws:resource-groups:us-east-1:111122223333:group/gpus",
              "training_plan_arn": "arn:aws:sagemaker:us-east-1:111122223333:training-plan/plan",
              "ultraserver_type": "u-p6e-gb200x72", "end_signal": "B:USR1"})


def strings(data: Any, pattern: Pattern, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """The paths of the sample's strings a pattern names (a map's key: the path to the key)."""
    if not pattern:
        if isinstance(data, str):
            yield path
        return
    head, rest = pattern[0], pattern[1:]
    if head == "[]" and isinstance(data, list):
        for i, item in enumerate(data):
            yield from strings(item, rest, path + (i,))
    elif head in ("{key}", "{}") and isinstance(data, dict):
        for key, value in data.items():
            if head == "{}":
                yield from strings(value, rest, path + (key,))
            elif isinstance(key, str) and not rest:
                yield path + (key,)
    elif isinstance(data, dict) and head in data:
        yield from strings(data[head], rest, path + (head,))


FIELDS = sorted(set(string_fields(ClusterSpec)))
KEYS = {p for p in FIELDS if p[-1] == "{key}"}


def mutated(path: tuple[str | int, ...], is_key: bool, change: typing.Callable[[str], str]) -> tuple[dict, tuple]:
    """A copy of the sample with the string at `path` changed; and the path of the changed string."""
    out = copy.deepcopy(SAMPLE)
    parent = out
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if is_key:
        parent[change(str(last))] = parent.pop(last)
        return out, path[:-1] + (change(str(last)),)
    parent[last] = change(parent[last])
    return out, path


def test_the_models_have_string_fields_of_every_kind():
    """The walk finds plain fields, list items, map keys and values, in every section."""
    assert ("availability_zone_id",) in FIELDS and ("tags", "{key}") in FIELDS and ("tags", "{}") in FIELDS
    assert ("node_groups", "[]", "labels", "{key}") in FIELDS and ("teams", "[]", "gpus", "{key}") in FIELDS
    assert ("network", "extra_availability_zone_ids", "[]") in FIELDS
    assert ("storage", "lustre", "metadata_iops") in FIELDS  # a string or a number
    assert ("orchestrator", "type") not in FIELDS  # a choice


def test_the_sample_gives_every_string_field_a_value_its_format_takes():
    unsampled = [p for p in FIELDS if not list(strings(SAMPLE, p))]
    assert unsampled == [], "give these fields a value in SAMPLE"
    assert not [d for d in problems(SAMPLE) if d.rule in (RULE, "wrong-type", "unknown-field", "missing-field")]


# a character of every kind for the second mutation, one per field in turn
CONTROLS = ("\x00", "\t", "\r", "\x1b", "\x7f", "\x85", "\x9b", "\u2028", "\u2029", "\n", "\x01", "\x1f")


@pytest.mark.parametrize("pattern", FIELDS, ids=lambda p: ".".join(p))
def test_every_string_field_refuses_a_trailing_newline_and_a_control_character(pattern):
    control = CONTROLS[FIELDS.index(pattern) % len(CONTROLS)]
    for path in strings(SAMPLE, pattern):
        for change in (lambda s: s + "\n", lambda s: s[:1] + control + s[1:]):
            spec, where = mutated(path, pattern in KEYS, change)
            found = [d for d in problems(spec) if d.rule == RULE]
            assert [d.path for d in found] == [where], (where, [d.format() for d in problems(spec)])
            (d,) = found
            assert d.is_error and "control characters" in d.message
            printed = d.format()
            # the message, the file's line, its caret and the hint: each one line, every control character escaped
            assert len(printed.splitlines()) == 4 and not control_characters(printed.replace("\n", ""))
            assert one_line(where[-1] if pattern in KEYS else spec_value(spec, where)) in printed.splitlines()[0]


def spec_value(spec: dict, path: tuple[str | int, ...]) -> str:
    for part in path:
        spec = spec[part]
    return typing.cast(str, spec)


def test_the_control_characters_are_unicode_s_and_the_line_separators():
    cc = {c for c in range(0x110000) if unicodedata.category(chr(c)) == "Cc"}
    assert CONTROL_CHARACTERS == cc | {0x2028, 0x2029}


@pytest.mark.parametrize("char", sorted(CONTROL_CHARACTERS), ids=hex)
def test_every_control_character_is_refused_in_a_free_string(char):
    """A tag's value takes any other character (EC2's tags take Unicode letters); not these."""
    with pytest.raises(ValidationError) as caught:
        ClusterSpec.model_validate(base_spec(tags={"team": f"ml{chr(char)}platform"}))
    (error,) = caught.value.errors()
    assert error["type"] == "control_character" and error["loc"] == ("tags", "team")


@pytest.mark.parametrize("value", ["プロジェクト", "ml platform", "ml-platform/é"])
def test_printable_text_is_taken_where_the_field_takes_it(value):
    assert ClusterSpec.model_validate(base_spec(tags={"team": value})).tags == {"team": value}


@pytest.mark.parametrize("az_id", ["use1-az4\n", "use1-dfw2-az1\n", "use1-az4\r\n"])
def test_an_az_id_with_a_trailing_newline_is_refused(az_id):
    """A Python `$` matches before a last line break: the AZ ID patterns end in \\Z, and are fully matched."""
    (d,) = problems(base_spec(availability_zone_id=az_id))
    assert d.rule == RULE and d.path == ("availability_zone_id",)
    assert regions.region_of_az_id(az_id) is None and not regions.is_local_zone(az_id)
    assert regions.region_of_az_id(az_id.rstrip()) == "us-east-1"
