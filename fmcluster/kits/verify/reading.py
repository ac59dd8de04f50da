"""What every parser of a tool's output reads it with: its lines without the launchers'
prefixes, numbers as the tools print them (and nothing else taken for one), the JSON documents
among other lines, and the refusal a parser gives for a line it does not understand. Pure."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, ClassVar, Optional, Protocol, Sequence, TypeVar

# prefixes the launchers add: Open MPI --tag-output "[1,0]<stdout>:", srun --label "0: ", and the
# indentation of an output pasted into a page
_LAUNCH_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+: )")


@dataclass(frozen=True)
class Refusal:
    """A line, or a document, that a parser does not understand: the run it belongs to is not
    judged (fmcluster verify exits 2), whatever the rest of it says."""

    line: int  # 1-based, in the text the parser was given
    why: str

    def text(self) -> str:
        return f"line {self.line}: {self.why}"


def lines_of(text: str) -> list[str]:
    """The text's lines, split at newlines only (as an editor numbers them: a form feed or a
    vertical tab inside a line does not end it), without their newlines."""
    pieces = text.split("\n")
    return pieces[:-1] if len(pieces) > 1 and pieces[-1] == "" else pieces


def unprefixed_lines(text: str) -> list[str]:
    return [_LAUNCH_PREFIX.sub("", line, count=1).rstrip("\r") for line in lines_of(text)]


# A number as C's printf writes one (%f, %e, %g: "479.71", "1.67772e+07", "-0", "inf", "nan",
# "-nan"), at most MAX_NUMBER_CHARS long: a longer token is no tool's number.
MAX_NUMBER_CHARS = 40
_NUMBER = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)", re.IGNORECASE)
_WHOLE = re.compile(r"[+-]?\d{1,19}")


def number(token: str) -> Optional[float]:
    """The value of a number as printf writes it, else None (a word, a number glued to a word,
    one of more than MAX_NUMBER_CHARS characters). "inf" and "nan" are numbers: the caller
    decides what a figure that is not finite means."""
    if len(token) > MAX_NUMBER_CHARS or not _NUMBER.fullmatch(token):
        return None
    return float(token)


def whole(token: str) -> Optional[int]:
    """A whole number of at most 19 digits (what a 64-bit counter prints), else None."""
    return int(token) if _WHOLE.fullmatch(token) else None


def float_or_none(token: str) -> Optional[float]:
    return number(token)


def int_or_none(token: str) -> Optional[int]:
    return whole(token)


def finite(value: object) -> bool:
    """A finite int or float (not a bool, not NaN or infinity)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def as_float(value: object) -> Optional[float]:
    """A JSON number as a finite float, else None (a string, a bool, NaN, infinity, or an integer
    too large for a float)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        result = float(value)
    except OverflowError:
        return None
    return result if math.isfinite(result) else None


_DOC_START = re.compile(r"^[ \t]*\{", re.MULTILINE)
MAX_BROKEN_DOCUMENTS = 100  # JSON documents that do not parse, tried before the rest is left unread
_TOP_START = re.compile(r"^\{", re.MULTILINE)
# JSON integers longer than this are read as floats (possibly infinite): Python's int() refuses
# more than 4,300 digits, and no tool prints a count of more than 20
_JSON_INT_DIGITS = 30


def _json_int(token: str) -> object:
    return int(token) if len(token) <= _JSON_INT_DIGITS else float(token)


@dataclass(frozen=True)
class JsonDocument:
    value: object
    line: int  # the line it starts on, 1-based


def json_documents_at(text: str) -> tuple[list[JsonDocument], list[str], bool]:
    """Every JSON value in the text that starts a line with '{' (other lines skipped), with its
    line; errors for one that does not parse (cut short, nested deeper than Python reads, a
    number it cannot hold), after which the search goes on at the next line that starts with '{'
    in its first column (not at an object nested in the broken one), MAX_BROKEN_DOCUMENTS times at
    most."""
    decoder = json.JSONDecoder(parse_int=_json_int)
    found: list[JsonDocument] = []
    errors: list[str] = []
    broken = False
    line, counted = 1, 0  # the line of `counted` in the text, counted on as the search goes on
    match = _DOC_START.search(text)
    while match is not None:
        start = match.end() - 1
        line, counted = line + text.count("\n", counted, start), start
        if len(errors) >= MAX_BROKEN_DOCUMENTS:  # each try may read to the end: a bound on the work
            errors.append(f"more JSON that does not parse from line {line}: not read")
            break
        try:
            value, end = decoder.raw_decode(text, start)
        except RecursionError:
            errors.append(f"the JSON from line {line} is nested deeper than it can be read")
        except ValueError as error:  # JSONDecodeError, and a number Python cannot hold
            why = error.msg if isinstance(error, json.JSONDecodeError) else "a number it cannot hold"
            errors.append(f"the JSON from line {line} does not parse (cut short?): {why}")
        else:
            found.append(JsonDocument(value, line))
            match = _DOC_START.search(text, end)
            continue
        broken = True
        match = _TOP_START.search(text, start + 1)
    return found, errors, broken


def json_documents(text: str) -> tuple[list[object], list[str], bool]:
    """json_documents_at without the lines."""
    found, errors, broken = json_documents_at(text)
    return [d.value for d in found], errors, broken


def json_depth_ok(value: object, limit: int = 64) -> bool:
    """Whether a parsed JSON value nests at most `limit` deep (walked without recursion): what a
    tool writes nests a few levels; anything deeper is not its output."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: list[object] = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return False
        stack.extend((child, depth + 1) for child in children)
    return True


def as_list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def as_dict(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


class _Runs(Protocol):
    """A parser's result of one run of a tool (NcclResult, DcgmResult, SmokeResult)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def errors(self) -> tuple[str, ...]: ...


_R = TypeVar("_R", bound=_Runs)


def worst_run(runs: Sequence[_R], badness: Callable[[_R], Any], what: str) -> _R:
    """Of a text's runs (one at least), the one run, or the worst by `badness`, its errors saying
    how many there are and its `runs` their count."""
    if len(runs) == 1:
        return runs[0]
    worst = max(runs, key=badness)
    note = f"{len(runs)} {what} in one text: the worst is read (each is judged on its own)"
    return replace(worst, errors=(*worst.errors, note), runs=len(runs))
