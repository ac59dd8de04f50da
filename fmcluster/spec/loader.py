"""Read a spec file into a ClusterSpec, or into located diagnostics that say what is wrong.

Never raises for bad input: a missing file, a directory, bad YAML, a non-mapping document,
wrong types, unknown keys and rule violations all come back as diagnostics. `fmcluster validate`
is `run`, `render` and `exit_code` at the end.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Iterable, Optional

from pydantic import BaseModel, TypeAdapter, ValidationError

from fmcluster.spec import accepting, placeholders, repair, rules, yamlpos
from fmcluster.spec.diagnostics import Diagnostic, Path, Problem, has_errors, placed, sort_key
from fmcluster.spec.models import AcceptedWarning, ClusterSpec

if typing.TYPE_CHECKING:
    from pydantic_core import ErrorDetails


@dataclass(frozen=True)
class LoadResult:
    """What loading a spec file gave: the spec where it is valid, the diagnostics, and the
    document as written (mappings, lists, scalars) once parsed."""

    file: str
    spec: ClusterSpec | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    data: typing.Any = None

    @property
    def ok(self) -> bool:
        return self.spec is not None and not has_errors(self.diagnostics)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]


# ids of the checks made before the rules (README, "What validate checks"); all report errors
FILE_RULE, YAML_RULE, DOCUMENT_RULE, DUPLICATE_KEY_RULE = "file", "yaml", "document", "duplicate-key"
SCHEMA_IDS = ("unknown-field", "missing-field", "not-a-choice", "wrong-type", "out-of-range", "invalid-value")
ERROR_IDS = (FILE_RULE, YAML_RULE, DOCUMENT_RULE, DUPLICATE_KEY_RULE, *SCHEMA_IDS)


def _at(file: str, message: str, line: int = 1, column: int = 1, hint: str | None = None, rule: str = FILE_RULE,
        source: str | None = None) -> Diagnostic:
    return Diagnostic(message, (), hint, "error", file, line, column, rule, source)


def _line(text: str, line: int) -> str | None:
    return yamlpos.line_of(yamlpos.lines(text), line)


MAX_SPEC_BYTES = 1 << 20  # 1 MiB: a spec of 64 node groups is about 5 KiB

_KINDS_OF_FILE = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                  (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _read(path: FsPath, file: str, what: str = "spec") -> str | Diagnostic:
    """The file's text, or the diagnostic that says why it cannot be read. Only a regular file
    of at most MAX_SPEC_BYTES is opened: a FIFO, a device (/dev/zero) or a huge file is refused
    from its metadata, without a blocking or endless read."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return _at(file, "no such file", hint=f"check the path of the {what}")
    except OSError as exc:
        return _at(file, f"cannot be read: {exc.strerror}")
    if stat.S_ISDIR(info.st_mode):
        return _at(file, f"is a directory, not a {what} file", hint=f"name a YAML file, such as {file}/cluster.yaml")
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS_OF_FILE if test(info.st_mode)), "not a regular file")
        return _at(file, f"is {kind}, not a {what} file", hint="name a YAML file")
    if info.st_size > MAX_SPEC_BYTES:
        return _at(file, f"is {info.st_size} bytes; a {what} file is at most {MAX_SPEC_BYTES} bytes (1 MiB)",
                   hint=f"is this the {what}?")
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SPEC_BYTES + 1)  # the file may have grown since stat
    except OSError as exc:
        return _at(file, f"cannot be read: {exc.strerror}")
    if len(raw) > MAX_SPEC_BYTES:
        return _at(file, f"is more than {MAX_SPEC_BYTES} bytes; a {what} file is at most 1 MiB")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _at(file, f"is not UTF-8 text ({exc.reason} at byte {exc.start})")


STDIN, STDIN_NAME = "-", "<stdin>"  # the path that reads standard input, and its name in diagnostics
_stdin: list[str | Diagnostic] = []  # standard input once read: a process reads it once


def stdin_text(what: str = "spec") -> str | Diagnostic:
    """Standard input's text (read on the first call, the same text after), or the diagnostic
    that says why it cannot be a spec: at most MAX_SPEC_BYTES, UTF-8, and not a terminal (where
    a command would wait for typing nobody means to do)."""
    if not _stdin:
        stream = sys.stdin
        if stream is None or stream.isatty():
            _stdin.append(_at(STDIN_NAME, f"standard input is a terminal, not a {what}",
                              hint=f"pipe the {what} in, such as `cat my-cluster.yaml | fmcluster validate -`"))
        else:
            raw = stream.buffer.read(MAX_SPEC_BYTES + 1)
            if len(raw) > MAX_SPEC_BYTES:
                _stdin.append(_at(STDIN_NAME, f"is more than {MAX_SPEC_BYTES} bytes; a {what} is at most 1 MiB"))
            else:
                try:
                    _stdin.append(raw.decode("utf-8"))
                except UnicodeDecodeError as exc:
                    _stdin.append(_at(STDIN_NAME, f"is not UTF-8 text ({exc.reason} at byte {exc.start})"))
    return _stdin[0]


def _text_of(path: str | FsPath, what: str = "spec") -> tuple[str, str | Diagnostic]:
    """The name diagnostics give the file, and its text (or why it cannot be read); `-` is
    standard input."""
    if str(path) == STDIN:
        return STDIN_NAME, stdin_text(what)
    return str(path), _read(FsPath(path), str(path), what)


def load(path: str | FsPath) -> LoadResult:
    """Load and check one spec file (`-`: standard input): types, formats, then every rule."""
    file, text = _text_of(path)
    if isinstance(text, Diagnostic):
        return LoadResult(file, diagnostics=[text])
    return load_text(text, file)


def read_mapping(path: str | FsPath, what: str, example: str, first_key: str
                 ) -> tuple[yamlpos.Document | None, list[Diagnostic]]:
    """A YAML file whose document is a mapping, with positions, or the diagnostic that says why
    not. `what` names the kind of file in messages ("spec", "pipeline file")."""
    file, text = _text_of(path, what)
    if isinstance(text, Diagnostic):
        return None, [text]
    return parse_mapping(text, file, what, example, first_key)


def parse_mapping(text: str, file: str, what: str = "spec", example: str | None = None,
                  first_key: str = "name: my-cluster") -> tuple[yamlpos.Document | None, list[Diagnostic]]:
    """The document of a YAML text that is a mapping, or the diagnostic that says why not. An
    empty one is told where to start: `example`, by default the cluster.yaml `fmcluster init`
    writes (and the examples, where the working directory has them: a checkout of the repository)."""
    if example is None:
        example = "the cluster.yaml that `fmcluster init DIR` writes"
        if FsPath("examples").is_dir():
            example += ", or one of the files in examples/"
    try:
        doc = yamlpos.load(text, file)
    except yamlpos.YamlSyntaxError as exc:
        return None, [_at(file, exc.message, exc.line, exc.column, exc.hint, YAML_RULE, _line(text, exc.line))]
    if doc.data is None:
        return None, [_at(file, f"the {what} is empty", hint=f"start from {example}", rule=DOCUMENT_RULE)]
    if not isinstance(doc.data, dict):
        kind = type(doc.data).__name__
        line, column = doc.locate(())
        return None, [_at(file, f"the {what} must be a mapping of fields, not a {kind}", line, column,
                          hint=f"start with `{first_key}`", rule=DOCUMENT_RULE, source=_line(text, line))]
    return doc, []


def duplicate_keys(doc: yamlpos.Document) -> list[Problem]:
    return [Problem(p, "this key is given twice; YAML keeps only the last", at_key=True, rule=DUPLICATE_KEY_RULE)
            for p in doc.duplicates]


def model_problems(exc: ValidationError, data: dict[str, typing.Any],
                   root: type[BaseModel] = ClusterSpec) -> list[Problem]:
    """pydantic's errors for a document validated as `root`, as located-ready problems."""
    return [_from_pydantic(e, data, root) for e in exc.errors(include_url=False)]


def _pipeline_file(doc: yamlpos.Document) -> Diagnostic | None:
    """The one error of a GitOps pipeline file given where a spec goes: its fields checked as a
    spec's (\"unknown field `source`; did you mean `storage`?\") would only mislead. A pipeline
    file has `waves` and no `node_groups`."""
    if "waves" not in doc.data or "node_groups" in doc.data:
        return None
    line, column = doc.locate(("waves",), at_key=True)
    named = "FILE" if doc.file == STDIN_NAME else doc.file
    return Diagnostic("this is a GitOps pipeline file (it has `waves`), not a cluster spec", ("waves",),
                      f"check it with `fmcluster validate --pipeline {named}`; commands that take a SPEC take "
                      "one of the cluster specs its waves list", "error", doc.file, line, column, DOCUMENT_RULE,
                      doc.line(line))


def cluster_spec_file(doc: yamlpos.Document) -> Diagnostic | None:
    """The one error of a cluster spec given where a GitOps pipeline file goes (`validate
    --pipeline SPEC`), as `_pipeline_file` is of the converse: a spec has `node_groups` and no
    `waves`."""
    if "node_groups" not in doc.data or "waves" in doc.data:
        return None
    line, column = doc.locate(("node_groups",), at_key=True)
    named = "FILE" if doc.file == STDIN_NAME else doc.file
    return Diagnostic("this is a cluster spec (it has `node_groups`), not a GitOps pipeline file", ("node_groups",),
                      f"check it without --pipeline: `fmcluster validate {named}`", "error", doc.file, line, column,
                      DOCUMENT_RULE, doc.line(line))


def load_text(text: str, file: str = "<spec>") -> LoadResult:
    doc, diagnostics = parse_mapping(text, file)
    if doc is None:
        return LoadResult(file, diagnostics=diagnostics)
    if (pipeline_file := _pipeline_file(doc)) is not None:
        return LoadResult(file, diagnostics=[pipeline_file], data=doc.data)
    problems = duplicate_keys(doc)
    spec: ClusterSpec | None = None
    try:
        spec = ClusterSpec.model_validate(doc.data)
    except ValidationError as exc:
        problems += model_problems(exc, doc.data)
        # the rules still run on what is valid, so one pass reports every problem
        problems += accepting.apply(repair.rule_problems(doc.data, ClusterSpec.model_validate, rules.check),
                                    _accepted(doc.data), ERROR_IDS)
    else:
        problems = accepting.apply(problems + rules.check(spec), spec.accepted_warnings, ERROR_IDS)
    return LoadResult(file, spec, sorted((locate(p, doc) for p in problems), key=sort_key), doc.data)


_NAME_LINE = re.compile(r"^name:[ \t]*", re.MULTILINE)


def _name_at(file: str) -> tuple[int, int]:
    """Line and column of a spec file's top-level `name:` value (1, 1 where there is none)."""
    try:
        text = _stdin_or_file(file)
    except OSError:
        return 1, 1
    match = _NAME_LINE.search(text)
    if match is None:
        return 1, 1
    return text.count("\n", 0, match.start()) + 1, match.end() - match.start() + 1


def _stdin_or_file(file: str) -> str:
    if file == STDIN:
        text = stdin_text()
        return text if isinstance(text, str) else ""
    return FsPath(file).read_text(encoding="utf-8")


def load_specs(paths: Iterable[str], deploying: bool = False,
               apart: bool = False) -> tuple[Optional[list[ClusterSpec]], list[Diagnostic]]:
    """Every spec validated, and no two naming the same cluster (their stacks would clash): the
    specs, or None when one fails; the diagnostics of all of them in either case. The app's:
    `fmcluster synth` itself validates nothing (the app does). `deploying`: the templates may be
    deployed, so a placeholder is an error (fmcluster.spec.placeholders). `apart`: each spec is
    synthesized in an app of its own (`fmcluster diff`'s OLD and NEW), so names may repeat."""
    paths = list(paths)
    specs: list[ClusterSpec] = []
    diagnostics: list[Diagnostic] = []
    for path in paths:
        result = load(path)
        found = placeholders.refused(result.diagnostics) if deploying else result.diagnostics
        diagnostics += found
        if result.spec is not None and not has_errors(found):
            specs.append(result.spec)
    if len(specs) != len(paths):
        return None, diagnostics
    if not apart:
        diagnostics += _clashes(paths, specs)
    if any(d.is_error for d in diagnostics):
        return None, diagnostics
    return specs, diagnostics


def _clashes(paths: list[str], specs: list[ClusterSpec]) -> list[Diagnostic]:
    """An error at each spec whose cluster name an earlier one has: in one app their stacks would clash."""
    found: list[Diagnostic] = []
    seen: dict[str, str] = {}
    for path, spec in zip(paths, specs, strict=True):
        if spec.name in seen:
            line, column = _name_at(path)
            found.append(Diagnostic(
                f"cluster {spec.name!r} is named by {seen[spec.name]} too: their stacks would clash", ("name",),
                "give each cluster its own name", "error", _shown(path), line, column))
        seen.setdefault(spec.name, _shown(path))
    return found


def _accepted(data: dict[str, typing.Any]) -> list[AcceptedWarning]:
    """The accepted warnings of a spec with type errors, where they are valid themselves."""
    try:
        return TypeAdapter(list[AcceptedWarning]).validate_python(data.get("accepted_warnings", []))
    except ValidationError:
        return []


def locate(problem: Problem, doc: yamlpos.Document) -> Diagnostic:
    line, column = doc.locate(problem.path, problem.at_key)
    return placed(problem, doc.file, line, column, doc.line(line))


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
        return Problem(loc, f"unknown field `{last}`", hint, at_key=True, rule="unknown-field")
    if kind == "missing":
        return Problem(loc, f"required field `{last}` is missing", None, rule="missing-field")
    if kind == "literal_error":
        expected = ctx.get("expected", "")
        choices = [c.strip(" '") for c in expected.replace(" or ", ", ").split(",")]
        close = _closest(str(value), choices)
        return Problem(loc, f"{_describe(value)} is not one of {expected}",
                       f"did you mean '{close}'?" if close else None, rule="not-a-choice")
    if kind in _KINDS:
        return Problem(loc, f"expected {_KINDS[kind]}, got {_describe(value)}", _type_hint(kind, value),
                       at_key=at_key, rule="wrong-type")
    if kind == "too_short" and loc == ("node_groups",):
        return Problem(loc, "at least one node group is required", rule="out-of-range")
    rule = ctx.get("rule") or ("out-of-range" if kind in _RANGES else "invalid-value")
    return Problem(loc, err["msg"][0].lower() + err["msg"][1:], ctx.get("hint"), at_key=at_key, rule=rule)


_RANGES = ("greater_than", "greater_than_equal", "less_than", "less_than_equal", "too_short", "too_long")


# ---- `fmcluster validate`: the report of the files checked -----------------------------------

FORMATS = ("text", "json")


@dataclass(frozen=True)
class FileCheck:
    """One file as validate checked it: a spec, or a pipeline file (fmcluster.spec.pipeline)."""

    file: str  # as given on the command line
    ok: bool
    diagnostics: tuple[Diagnostic, ...]

    @property
    def errors(self) -> int:
        return sum(d.is_error for d in self.diagnostics)


@dataclass(frozen=True)
class ValidateReport:
    files: tuple[FileCheck, ...]


def _shown(path: str) -> str:
    """A path as reports name it: `-` is <stdin>."""
    return STDIN_NAME if path == STDIN else path


def checked(file: str, result: LoadResult) -> FileCheck:
    return FileCheck(_shown(file), result.ok, tuple(result.diagnostics))


def run(paths: typing.Iterable[str]) -> ValidateReport:
    """`fmcluster validate SPEC...`: every spec file loaded and checked."""
    return ValidateReport(tuple(checked(path, load(path)) for path in paths))


def render(report: ValidateReport, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr). Text: each problem on stderr, then `FILE: ok` on stdout or `FILE: N errors`
    on stderr; JSON: a list of {file, ok, diagnostics} on stdout."""
    if fmt == "json":
        return json.dumps([{"file": f.file, "ok": f.ok, "diagnostics": [d.as_dict() for d in f.diagnostics]}
                           for f in report.files], indent=2) + "\n", ""
    out, err = [], []
    for f in report.files:
        err += [d.format() + "\n" for d in f.diagnostics]
        if f.ok:
            out.append(f"{f.file}: ok\n")
        else:
            err.append(f"{f.file}: {f.errors} error{'s' if f.errors != 1 else ''}\n")
    return "".join(out), "".join(err)


def exit_code(report: ValidateReport) -> int:
    """0 when every file is valid (warnings do not count), else 2."""
    return 0 if all(f.ok for f in report.files) else 2
