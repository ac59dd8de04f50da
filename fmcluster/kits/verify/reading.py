"""What every parser of a tool's output reads it with: its lines without the launchers'
prefixes, numbers that may not be numbers, and the JSON documents among other lines. Pure."""

from __future__ import annotations

import json
import re
from typing import Optional

# prefixes the launchers add: Open MPI --tag-output "[1,0]<stdout>:", srun --label "0: ", and the
# indentation of an output pasted into a page
_LAUNCH_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+: )")


def unprefixed_lines(text: str) -> list[str]:
    return [_LAUNCH_PREFIX.sub("", line, count=1).rstrip("\r\n") for line in text.splitlines()]


def float_or_none(token: str) -> Optional[float]:
    try:
        value = float(token)
    except ValueError:
        return None
    return value


def int_or_none(token: str) -> Optional[int]:
    try:
        return int(token)
    except ValueError:
        return None


_DOC_START = re.compile(r"^[ \t]*\{", re.MULTILINE)
_TOP_START = re.compile(r"^\{", re.MULTILINE)


def json_documents(text: str) -> tuple[list[object], list[str], bool]:
    """Every JSON value in the text that starts a line with '{' (other lines skipped); errors for
    one that does not parse (cut short), after which the search goes on at the next line that
    starts with '{' in its first column (not at an object nested in the broken one)."""
    decoder = json.JSONDecoder()
    found: list[object] = []
    errors: list[str] = []
    broken = False
    match = _DOC_START.search(text)
    while match is not None:
        start = match.end() - 1
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError as error:
            line = text.count("\n", 0, start) + 1
            errors.append(f"the JSON from line {line} does not parse (cut short?): {error.msg}")
            broken = True
            match = _TOP_START.search(text, start + 1)
            continue
        found.append(value)
        match = _DOC_START.search(text, end)
    return found, errors, broken


def as_list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def as_dict(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}
