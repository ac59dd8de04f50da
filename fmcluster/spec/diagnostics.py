"""Problems found in a spec, located in its file, and how they are printed.

Sources and details: docs/research-notes.md, "fmcluster/spec/diagnostics.py"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

Path = tuple[str | int, ...]  # a field path: keys (str) and list indices (int)

if TYPE_CHECKING:
    from typing import TypedDict

    class DiagnosticDict(TypedDict):
        """A diagnostic as `fmcluster validate --format json` prints it."""

        file: str
        line: int
        column: int
        severity: str
        path: str
        message: str
        hint: str | None
        rule: str


def dotted(path: Path) -> str:
    """('node_groups', 0, 'count') -> 'node_groups[0].count'."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(document)"


# Control characters (Unicode's Cc: C0, DEL and C1) and the line and paragraph separators. No
# value of a spec may hold one (fmcluster.spec.models.formats); a diagnostic writes each as an
# escape, so that whatever a value holds, a diagnostic is one line (and its hint one more), which
# editors and CI logs can place, and a terminal shows as written (C1's CSI, 0x9b, starts a
# terminal's control sequence as ESC [ does).
CONTROL_CHARACTERS = frozenset((*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029))
_ESCAPES = {c: ascii(chr(c))[1:-1] for c in sorted(CONTROL_CHARACTERS)}


def one_line(text: str) -> str:
    """`text` with newlines, NUL and other control characters written as escapes (\\n, \\x00)."""
    return text.translate(_ESCAPES)


def control_characters(text: str) -> str:
    """The control characters `text` holds, each once and escaped, in the order they come
    (`\\n, \\x00`); "" for none."""
    found = dict.fromkeys(c for c in text if ord(c) in CONTROL_CHARACTERS)
    return ", ".join(one_line(c) for c in found)


@dataclass(frozen=True)
class Diagnostic:
    message: str
    path: Path = ()
    hint: str | None = None  # for an accepted warning: the spec's reason
    severity: str = "error"  # "error" | "warning" | "accepted" (a warning the spec accepts)
    file: str = "<spec>"
    line: int = 1
    column: int = 1
    rule: str = ""  # the stable id of the check (README, "What validate checks"); "" for none
    source: str | None = None  # the text of the file's line, shown under the message

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def format(self) -> str:
        """One line, then the spec's line with a caret under the column (where the file has
        one), then the hint (or the reason a warning is accepted)."""
        rule = f" [{self.rule}]" if self.rule else ""
        text = one_line(f"{self.file}:{self.line}:{self.column}: {self.severity}: {dotted(self.path)}: "
                        f"{self.message}{rule}")
        if self.source is not None:
            gutter = str(self.line)
            # tabs as single spaces, so the caret stands under the column; one line whatever the text
            shown = one_line(self.source.replace("\t", " "))
            text += f"\n {gutter} | {shown}\n {' ' * len(gutter)} | {' ' * (self.column - 1)}^"
        if self.hint:
            text += f"\n  {'reason' if self.severity == 'accepted' else 'hint'}: {one_line(self.hint)}"
        return text

    def as_dict(self) -> DiagnosticDict:
        return {"file": self.file, "line": self.line, "column": self.column,
                "severity": self.severity, "path": dotted(self.path), "message": self.message,
                "hint": self.hint, "rule": self.rule}


@dataclass(frozen=True)
class Problem:
    """A rule's finding before it is placed in a file: a path, a message and a hint."""

    path: Path
    message: str
    hint: str | None = None
    severity: str = "error"
    at_key: bool = False  # point at the key rather than the value
    rule: str = ""  # the id of the check that found it (set by fmcluster.spec.rules.check for rules)


def error(path: Path, message: str, hint: str | None = None, *, at_key: bool = False, rule: str = "") -> Problem:
    return Problem(tuple(path), message, hint, "error", at_key, rule)


def warning(path: Path, message: str, hint: str | None = None, *, rule: str = "") -> Problem:
    return Problem(tuple(path), message, hint, "warning", False, rule)


def sort_key(d: Diagnostic) -> tuple[str, int, int, bool, str]:
    return (d.file, d.line, d.column, d.severity != "error", d.message)


def placed(problem: Problem, file: str, line: int, column: int, source: str | None = None) -> Diagnostic:
    """A problem placed in a file."""
    return Diagnostic(problem.message, problem.path, problem.hint, problem.severity, file, line, column,
                      problem.rule, source)


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.is_error for d in diagnostics)
