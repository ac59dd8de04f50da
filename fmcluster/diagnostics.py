"""Problems found in a spec, located in its file, and how they are printed.

Format (one per line, on stderr)::

    FILE:LINE:COL: error: dotted.field.path: message
      hint: ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, NamedTuple

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


def dotted(path: Path) -> str:
    """('node_groups', 0, 'count') -> 'node_groups[0].count'."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(document)"


class Diagnostic(NamedTuple):
    message: str
    path: Path = ()
    hint: str | None = None
    severity: str = "error"  # "error" | "warning"
    file: str = "<spec>"
    line: int = 1
    column: int = 1

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def format(self) -> str:
        text = f"{self.file}:{self.line}:{self.column}: {self.severity}: {dotted(self.path)}: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text

    def as_dict(self) -> DiagnosticDict:
        return {"file": self.file, "line": self.line, "column": self.column,
                "severity": self.severity, "path": dotted(self.path), "message": self.message,
                "hint": self.hint}


class Problem(NamedTuple):
    """A rule's finding before it is placed in a file: a path, a message and a hint."""

    path: Path
    message: str
    hint: str | None = None
    severity: str = "error"
    at_key: bool = False  # point at the key rather than the value


def error(path: Path, message: str, hint: str | None = None, *, at_key: bool = False) -> Problem:
    return Problem(tuple(path), message, hint, "error", at_key)


def warning(path: Path, message: str, hint: str | None = None) -> Problem:
    return Problem(tuple(path), message, hint, "warning")


def sort_key(d: Diagnostic) -> tuple[str, int, int, bool, str]:
    return (d.file, d.line, d.column, d.severity != "error", d.message)


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.is_error for d in diagnostics)
