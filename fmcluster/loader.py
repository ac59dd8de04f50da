"""Read a spec file into a ClusterSpec, or into located diagnostics that say what is wrong.

Never raises for bad input: a missing file, a directory, bad YAML, a non-mapping document,
wrong types, unknown keys and rule violations all come back as diagnostics.
"""

from __future__ import annotations

import typing
from pathlib import Path as FsPath

from pydantic import BaseModel, ValidationError

from fmcluster import yamlpos
from fmcluster.diagnostics import Diagnostic, Path, Problem, has_errors, sort_key
from fmcluster.spec import ClusterSpec

if typing.TYPE_CHECKING:
    from pydantic_core import ErrorDetails


class LoadResult:
    def __init__(self, file: str, spec: ClusterSpec | None = None, diagnostics: list[Diagnostic] | None = None):
        self.file, self.spec = file, spec
        self.diagnostics: list[Diagnostic] = diagnostics if diagnostics is not None else []

    @property
    def ok(self) -> bool:
        return self.spec is not None and not has_errors(self.diagnostics)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]


def _at(file: str, message: str, line: int = 1, column: int = 1, hint: str | None = None) -> Diagnostic:
    return Diagnostic(message, (), hint, "error", file, line, column)


def _read(path: FsPath, file: str, what: str = "spec") -> str | Diagnostic:
    """The file's text, or the diagnostic that says why it cannot be read."""
    if not path.exists():
        return _at(file, "no such file", hint=f"check the path of the {what}")
    if path.is_dir():
        return _at(file, "is a directory, not a spec file", hint=f"name a YAML file, such as {file}/cluster.yaml")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        return _at(file, f"is not UTF-8 text ({exc.reason} at byte {exc.start})")
    except OSError as exc:
        return _at(file, f"cannot be read: {exc.strerror}")


def load(path: str | FsPath) -> LoadResult:
    """Load and check one spec file: types, formats, then every rule."""
    file = str(path)
    text = _read(FsPath(path), file)
    if isinstance(text, Diagnostic):
        return LoadResult(file, diagnostics=[text])
    return load_text(text, file)


def read_mapping(path: str | FsPath, what: str, example: str, first_key: str
                 ) -> tuple[yamlpos.Document | None, list[Diagnostic]]:
    """A YAML file whose document is a mapping, with positions, or the diagnostic that says why
    not. `what` names the kind of file in messages ("spec", "pipeline file")."""
    file = str(path)
    text = _read(FsPath(path), file, what)
    if isinstance(text, Diagnostic):
        return None, [text]
    return parse_mapping(text, file, what, example, first_key)


def parse_mapping(text: str, file: str, what: str = "spec", example: str = "one of the files in examples/",
                  first_key: str = "name: my-cluster") -> tuple[yamlpos.Document | None, list[Diagnostic]]:
    try:
        doc = yamlpos.load(text, file)
    except yamlpos.YamlSyntaxError as exc:
        return None, [_at(file, exc.message, exc.line, exc.column)]
    if doc.data is None:
        return None, [_at(file, f"the {what} is empty", hint=f"start from {example}")]
    if not isinstance(doc.data, dict):
        kind = type(doc.data).__name__
        return None, [_at(file, f"the {what} must be a mapping of fields, not a {kind}",
                          *doc.locate(()), hint=f"start with `{first_key}`")]
    return doc, []


def duplicate_keys(doc: yamlpos.Document) -> list[Problem]:
    return [Problem(p, "this key is given twice; YAML keeps only the last", at_key=True) for p in doc.duplicates]


def model_problems(exc: ValidationError, data: dict[str, typing.Any],
                   root: type[BaseModel] = ClusterSpec) -> list[Problem]:
    """pydantic's errors for a document validated as `root`, as located-ready problems."""
    return [_from_pydantic(e, data, root) for e in exc.errors(include_url=False)]


def load_text(text: str, file: str = "<spec>") -> LoadResult:
    result = LoadResult(file)
    doc, result.diagnostics = parse_mapping(text, file)
    if doc is None:
        return result
    problems = duplicate_keys(doc)
    from fmcluster import rules  # registers every rule

    try:
        result.spec = ClusterSpec.model_validate(doc.data)
    except ValidationError as exc:
        problems += model_problems(exc, doc.data)
        # the rules still run on what is valid, so one pass reports every problem
        from fmcluster import repair

        problems += repair.rule_problems(doc.data, ClusterSpec.model_validate, rules.check)
    else:
        problems += rules.check(result.spec)
    result.diagnostics = sorted((locate(p, doc) for p in problems), key=sort_key)
    return result


def locate(problem: Problem, doc: yamlpos.Document) -> Diagnostic:
    line, column = doc.locate(problem.path, problem.at_key)
    return Diagnostic(problem.message, problem.path, problem.hint, problem.severity,
                      doc.file, line, column)


# ---- pydantic errors in words a person understands -------------------------------------

_KINDS = {"string_type": "a string", "int_type": "a whole number", "bool_type": "true or false",
          "list_type": "a list", "dict_type": "a mapping", "model_type": "a mapping of fields",
          "float_type": "a number", "int_from_float": "a whole number"}


def _describe(value: object) -> str:
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, (int, float)):
        return f"{value!r} (a number)"
    if isinstance(value, str):
        return f"'{value}' (a string)"
    if value is None:
        return "nothing (null)"
    return f"a {'list' if isinstance(value, list) else 'mapping' if isinstance(value, dict) else type(value).__name__}"


def _type_hint(kind: str, value: object) -> str | None:
    if kind == "string_type" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f'quote it, so YAML keeps it a string: "{value}"'
    if kind == "int_type" and isinstance(value, str) and value.strip().isdigit():
        return f"write the number without quotes: {value.strip()}"
    if kind == "bool_type" and isinstance(value, str):
        return "write true or false, without quotes"
    return None


def _model_at(path: Path, root: type[BaseModel] = ClusterSpec) -> type[BaseModel] | None:
    """The model class that validates the mapping at `path` (for did-you-mean hints)."""
    model = root
    for part in path:
        if isinstance(part, int):
            continue
        info = model.model_fields.get(part) or next(
            (f for f in model.model_fields.values() if f.alias == part), None)
        if info is None:
            return None
        inner = _inner_model(info.annotation)
        if inner is None:
            return None
        model = inner
    return model


def _inner_model(annotation: typing.Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _inner_model(arg)
        if found:
            return found
    return None


def _field_names(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _closest(word: str, choices: list[str]) -> str | None:
    import difflib  # only for a spec with errors

    found = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return found[0] if found else None


def _from_pydantic(err: ErrorDetails, data: dict[str, typing.Any], root: type[BaseModel] = ClusterSpec) -> Problem:
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    loc = tuple(p for p in err["loc"] if p != "[key]")
    at_key = "[key]" in err["loc"]
    last = loc[-1] if loc else ""
    if kind == "extra_forbidden":
        model = _model_at(loc[:-1], root)
        names = _field_names(model) if model else []
        close = _closest(str(last), names)
        hint = f"did you mean `{close}`?" if close else ("known fields: " + ", ".join(names) if names else None)
        return Problem(loc, f"unknown field `{last}`", hint, at_key=True)
    if kind == "missing":
        return Problem(loc, f"required field `{last}` is missing", None)
    if kind == "literal_error":
        expected = ctx.get("expected", "")
        choices = [c.strip(" '") for c in expected.replace(" or ", ", ").split(",")]
        close = _closest(str(value), choices)
        return Problem(loc, f"{_describe(value)} is not one of {expected}",
                       f"did you mean '{close}'?" if close else None)
    if kind in _KINDS:
        return Problem(loc, f"expected {_KINDS[kind]}, got {_describe(value)}", _type_hint(kind, value),
                       at_key=at_key)
    if kind == "too_short" and loc == ("node_groups",):
        return Problem(loc, "at least one node group is required")
    return Problem(loc, err["msg"][0].lower() + err["msg"][1:], ctx.get("hint"), at_key=at_key)
