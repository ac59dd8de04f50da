"""The spec reference's types are what the models accept. docs/reference/spec.md (which
docs/gen_reference.py writes from the JSON Schema; tests/project/test_docs.py holds the page to
it) gives each field a type and bounds; here each row is held to the field's pydantic annotation,
strict as the models are: a sample of every type the row names is accepted, a value of every JSON
kind it does not name is refused (inside lists and maps too), a field documented without a
default (`none`) takes null and no other does, and each bound holds at its edge and breaks past
it. The field formats (an AZ ID's shape, a name's pattern) are not types, and are left out."""

from __future__ import annotations

import re
import typing
from typing import Annotated, Any, Iterator, Union

import annotated_types
import pytest
from pydantic import BaseModel, ConfigDict, PlainValidator, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from fmcluster.spec.models import ClusterSpec
from tests.support.paths import ROOT

PAGE = ROOT / "docs" / "reference" / "spec.md"
STRICT = ConfigDict(strict=True)
ROW = re.compile(r"^\| `([^`]+)` \| (.+?) \| (.*?) \| (.*) \| .* \|$")
BOUND = re.compile(r"(at least|more than|at most|less than) (-?[0-9.]+)")


def rows() -> dict[str, tuple[str, str, str]]:
    """Field path -> (type, default, description), from the page's table."""
    found = {}
    for line in PAGE.read_text().splitlines():
        if (match := ROW.match(line)) and match.group(1) != "Field":
            found[match.group(1)] = (match.group(2), match.group(3), match.group(4))
    return found


ROWS = rows()


def walk(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, FieldInfo]]:
    """(dotted path as the page writes it, field) of every field, depth first."""
    for name, field in model.model_fields.items():
        path = prefix + (field.alias or name)
        yield path, field
        inner = _model_of(field.annotation)
        if inner is not None:
            listed = typing.get_origin(_unoptional(field.annotation)) is list
            yield from walk(inner, path + ("[]." if listed else "."))


def _unoptional(annotation: Any) -> Any:
    if typing.get_origin(annotation) is Union:
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        return options[0] if len(options) == 1 else annotation
    return annotation


def _model_of(annotation: Any) -> type[BaseModel] | None:
    annotation = _unoptional(annotation)
    if typing.get_origin(annotation) is list:
        annotation = typing.get_args(annotation)[0]
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


FIELDS = dict(walk(ClusterSpec))


def _kept(meta: Any, bounds: bool) -> bool:
    """A PlainValidator is the type itself (metadata_iops: `auto` or a number); a constraint is a bound."""
    return isinstance(meta, PlainValidator) or (bounds and isinstance(meta, (FieldInfo, annotated_types.BaseMetadata)))


def bare(annotation: Any, bounds: bool) -> Any:
    """The annotation without the field formats (AfterValidators), and without bounds unless asked."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        kept = [m for m in args[1:] if _kept(m, bounds)]
        inner = bare(args[0], bounds)
        return Annotated[(inner, *kept)] if kept else inner
    if origin is Union:
        return Union[tuple(bare(a, bounds) for a in args)]
    if origin is list:
        return list[bare(args[0], bounds)]  # type: ignore[misc]
    if origin is dict:
        return dict[bare(args[0], bounds), bare(args[1], bounds)]  # type: ignore[misc]
    return annotation


def adapter(field: FieldInfo, bounds: bool = False) -> TypeAdapter[Any]:
    kept = [m for m in field.metadata if _kept(m, bounds)]
    annotation = bare(field.annotation, bounds)
    annotation = Annotated[(annotation, *kept)] if kept else annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return TypeAdapter(annotation)  # strict by its own config (fmcluster.spec.models.base)
    return TypeAdapter(annotation, config=STRICT)


def accepts(field: FieldInfo, value: Any, bounds: bool = False) -> bool:
    try:
        adapter(field, bounds).validate_python(value)
    except ValidationError:
        return False
    return True


# ---- the page's type grammar: `a` \| `b`, string, integer, number, boolean, object, list of T,
# map of string to T, alternatives joined by " or " -------------------------------------------------------------

KINDS: dict[str, Any] = {"string": "x", "integer": 7, "number": 0.5, "boolean": True, "list": ["x"],
                         "map": {"k": "x"}}


def alternatives(text: str) -> list[str]:
    return text.split(" or ")


def kind(alt: str) -> str:
    """The JSON kind of one alternative."""
    if alt.startswith("list of"):
        return "list"
    if alt.startswith("map of string to "):
        return "map"
    if alt.startswith("`"):
        return "string"
    return alt


def enum_values(alt: str) -> list[str]:
    return re.findall(r"`([^`]*)`", alt)


def samples(alt: str) -> list[Any]:
    """Values of one documented alternative (none for an object: its fields have rows of their own)."""
    if alt.startswith("`"):
        return list(enum_values(alt))
    if alt == "list of objects" or alt == "object":
        return []
    if alt.startswith("list of "):
        return [[s] for s in samples(alt.removeprefix("list of "))]
    if alt.startswith("map of string to "):
        return [{"k": s} for s in samples(alt.removeprefix("map of string to "))]
    return {"boolean": [True, False]}.get(alt, [KINDS[alt]])


def refused(text: str) -> list[Any]:
    """Values of the JSON kinds the type does not name, and, inside a list or map it names, of the
    kinds its items do not name. An integer is a number (JSON Schema's and pydantic's)."""
    alts = alternatives(text)
    named = {kind(a) for a in alts} | ({"integer"} if "number" in alts else set())
    if "object" in alts:
        named.add("map")  # a section is a mapping of its fields
    found = [value for name, value in KINDS.items() if name not in named]
    for alt in alts:
        if alt.startswith("list of ") and alt != "list of objects":
            found += [[v] for v in refused(alt.removeprefix("list of "))]
        elif alt.startswith("map of string to "):
            found += [{"k": v} for v in refused(alt.removeprefix("map of string to "))]
    return found


def test_every_field_of_the_models_has_a_row_and_every_row_a_field():
    assert set(ROWS) == set(FIELDS)
    assert ROWS["teams[].gpus"][0] == "map of string to integer"  # issue 42: it said "map of string to string"


@pytest.mark.parametrize("path", sorted(FIELDS))
def test_the_documented_type_is_what_the_field_accepts(path):
    text, default, _ = ROWS[path]
    field = FIELDS[path]
    for alt in alternatives(text):
        if alt in ("object", "list of objects"):
            model = _model_of(field.annotation)
            assert model is not None, f"{path}: documented as {alt}, typed {field.annotation}"
            assert (typing.get_origin(_unoptional(field.annotation)) is list) == (alt == "list of objects")
        for value in samples(alt):
            assert accepts(field, value), f"{path}: documented as {text}, refuses {value!r}"
    for value in refused(text):
        assert not accepts(field, value), f"{path}: documented as {text}, accepts {value!r}"
    assert accepts(field, None) == (default == "none"), f"{path}: null taken or refused against its default {default}"


def bounded() -> Iterator[tuple[str, str, float]]:
    for path, (_, _, description) in ROWS.items():
        tail = re.search(r"\(([^()]*)\)$", description)
        if tail and BOUND.search(tail.group(1)) and not tail.group(1).endswith(("items", "characters")):
            for word, number in BOUND.findall(tail.group(1)):
                yield path, word, float(number)


BOUNDED = sorted(set(bounded()))


def test_bounds_are_documented_where_the_models_have_them():
    assert ("teams[].share", "more than", 0) in BOUNDED and ("teams[].share", "at most", 1) in BOUNDED
    assert ("serving.replicas", "at least", 1) in BOUNDED  # an optional field's bounds too


@pytest.mark.parametrize("path,word,number", BOUNDED)
def test_each_documented_bound_holds_at_its_edge_and_breaks_past_it(path, word, number):
    field = FIELDS[path]
    whole = "integer" in alternatives(ROWS[path][0])
    step = 1 if whole else 0.01
    value = int(number) if whole else number
    inside, edge, outside = {
        "at least": (value + step, value, value - step), "at most": (value - step, value, value + step),
        "more than": (value + step, None, value), "less than": (value - step, None, value)}[word]
    assert accepts(field, inside, bounds=True) and not accepts(field, outside, bounds=True)
    if edge is not None:
        assert accepts(field, edge, bounds=True)


LISTS = sorted(p for p, (_, _, d) in ROWS.items() if re.search(r"\(at least \d+ items\)$", d))


@pytest.mark.parametrize("path", LISTS)
def test_a_list_s_documented_least_length_holds(path):
    text, _, description = ROWS[path]
    least = int(re.findall(r"\(at least (\d+) items\)$", description)[0])
    items = samples(text)  # a list of one item each (none for objects)
    short = [items[0][0]] * (least - 1) if items else []
    assert len(short) < least and not accepts(FIELDS[path], short, bounds=True)
    if items:
        assert accepts(FIELDS[path], [items[0][0]] * least, bounds=True)


TEXTS = sorted((p, int(n)) for p, (_, _, d) in ROWS.items() for n in re.findall(r"\(at most (\d+) characters\)$", d))


@pytest.mark.parametrize("path,most", TEXTS)
def test_a_string_s_documented_length_holds(path, most):
    assert accepts(FIELDS[path], "x" * most, bounds=True) and not accepts(FIELDS[path], "x" * (most + 1), bounds=True)


def test_lengths_are_documented_where_the_models_have_them():
    assert ("accepted_warnings[].reason", 500) in TEXTS
    assert "node_groups" in LISTS and "orchestrator.public_access_cidrs" in LISTS


def test_the_grammar_reads_a_choice_a_literal_and_nested_kinds():
    assert samples("`a` \\| `b`") == ["a", "b"] and samples("`auto`") == ["auto"]
    assert samples("map of string to integer") == [{"k": 7}]
    assert {"k": "x"} in refused("map of string to integer") and 7 not in refused("number")
