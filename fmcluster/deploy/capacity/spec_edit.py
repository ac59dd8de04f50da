"""Writing a value into a spec file the user keeps: one scalar replaced (or one key added) and
every other byte of the file as it was, its comments, blank lines, quoting and indentation.

ruamel.yaml's round-trip loader says where each key and value stands (and which mappings are
anchored, in flow style, or merged); the change is then made in the text itself, at that place.
Dumping the loaded document instead would rewrite what the user wrote: ruamel.yaml indents every
sequence of a file alike, where the examples indent `storage.buckets` and `node_groups` apart.

Pure: text in, text out; an EditError says where a value cannot be written safely (an anchor
shared by several places, a flow mapping to add a key to), with what to write by hand."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from fmcluster.spec.diagnostics import Path, dotted

PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9:/._@+=,-]*")  # written as is: ids, ARNs, AZ IDs, enum values
DEFAULT_INDENT = 2


@dataclass(frozen=True)
class Change:
    """`path` (keys and list indices from the document's root) set to the string `value`."""

    path: Path
    value: str

    def __str__(self) -> str:
        return f"{dotted(self.path)}: {self.value}"


class EditError(Exception):
    """A change that cannot be made in the text safely, with what to do instead."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


def apply(text: str, changes: Sequence[Change]) -> str:
    """`text` with each change made in turn; EditError where one cannot be."""
    for change in changes:
        text = _apply(text, change)
    return text


def value_at(text: str, path: Path) -> Any:
    """The value at `path` of a YAML text (None where the path is not there)."""
    node: Any = _load(text)
    for part in path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def _load(text: str) -> Any:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    try:
        return yaml.load(io.StringIO(text))
    except YAMLError as exc:
        raise EditError(f"the file no longer reads as YAML: {exc}", "fix it, then run the command again") from None


def _apply(text: str, change: Change) -> str:
    root = _load(text)
    manual = f"write `{change}` by hand"
    path = change.path
    node: Any = root
    walked: list[Any] = [root]
    depth = 0  # path[:depth] is there: `node`
    while depth < len(path) - 1 and (child := _own(node, path[depth])) is not None:
        node = child
        walked.append(node)
        depth += 1
    for container in walked:
        anchor = getattr(getattr(container, "anchor", None), "value", None)
        if anchor:
            raise EditError(f"{dotted(path[:-1])} lies under the YAML anchor &{anchor}, which other places may share",
                            manual)
    rest = path[depth:]
    if not isinstance(node, CommentedMap) or not all(isinstance(part, str) for part in rest):
        raise EditError(f"{dotted(path[:depth]) or 'the document'} is not a mapping to write {dotted(rest)} in",
                        manual)
    if len(rest) == 1 and _own(node, rest[0]) is not None:
        return _replace(text, node, str(rest[0]), change)
    return _insert(text, node, [str(k) for k in rest], change, root)


def _own(node: Any, part: str | int) -> Any:
    """A mapping's own value of key `part` (not one merged in with `<<`), or a list's item."""
    if isinstance(node, CommentedMap):
        return dict(node.non_merged_items()).get(part) if isinstance(part, str) else None
    if isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    return None


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _token(line: str, column: int, value: Any) -> Optional[tuple[int, str]]:
    """(end column, quote) of the scalar `value` written at `column` of `line`, None where the
    text there is not it (an alias, a multi-line or escaped scalar)."""
    rest = line[column:].rstrip("\r")
    shown = str(value)
    for quote in ("'", '"'):
        if rest.startswith(quote + shown + quote):
            return column + len(shown) + 2, quote
    if rest.startswith(shown) and (len(rest) == len(shown) or rest[len(shown)] in " \t,}]#"):
        return column + len(shown), ""
    return None


def _written(value: str, quote: str = "") -> str:
    if quote:
        return quote + value + quote
    return value if PLAIN.fullmatch(value) else '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _replace(text: str, node: CommentedMap, key: str, change: Change) -> str:
    line_no, column = node.lc.value(key)
    lines = _lines(text)
    found = _token(lines[line_no], column, node[key])
    if found is None:
        raise EditError(f"{dotted(change.path)} is not written as one plain or quoted value on its line",
                        f"write `{change}` by hand")
    end, quote = found
    line = lines[line_no]
    written = _written(change.value, quote)
    rest = line[end:]
    comment = re.fullmatch(r"( +)(#.*)", rest)
    if comment:  # the comment stays in its column where the new value leaves room
        spaces = max(1, len(comment.group(1)) - (len(written) - (end - column)))
        rest = " " * spaces + comment.group(2)
    lines[line_no] = line[:column] + written + rest
    return "\n".join(lines)


def _insert(text: str, node: CommentedMap, keys: list[str], change: Change, root: Any) -> str:
    manual = f"write `{change}` by hand"
    if node.fa.flow_style():
        raise EditError(f"{dotted(change.path[:-len(keys)])} is a flow mapping ({{...}}): fmcluster adds keys only "
                        "to block mappings", manual)
    lines = _lines(text)
    after = next((k for k, v in reversed(list(node.non_merged_items()))
                  if isinstance(k, str) and _one_line(lines, node, k, v)), None)
    if after is None:
        raise EditError(f"{dotted(change.path[:-len(keys)])} has no key with a one-line value to add the new one "
                        "after", manual)
    line_no, column = node.lc.key(after)
    step = _indent(root, node)
    end = "\r" if lines[line_no].endswith("\r") else ""  # CRLF files: each line keeps its CR
    added = [" " * (column + i * step) + key + ":" for i, key in enumerate(keys)]
    added[-1] += " " + _written(change.value)
    lines[line_no + 1:line_no + 1] = [line + end for line in added]
    return "\n".join(lines)


def _one_line(lines: list[str], node: CommentedMap, key: str, value: Any) -> bool:
    """Whether `key`'s value is a scalar written whole on the key's own line."""
    if isinstance(value, (CommentedMap, CommentedSeq)) or value is None:
        return False
    key_line, _ = node.lc.key(key)
    value_line, column = node.lc.value(key)
    return key_line == value_line and _token(lines[value_line], column, value) is not None


def _indent(root: Any, node: CommentedMap) -> int:
    """The step of indentation from a block mapping's key to the block mapping under it, as the
    file has it nearest `node`: in `node` itself, in its siblings (the other items of its list,
    the other values of its mapping), else anywhere; 2 where the file has none."""
    parent = next((p for p in _containers(root) if any(item is node for item in _items(p))), None)
    near = [node, *(item for item in (_items(parent) if parent is not None else []) if item is not node)]
    for scope in (near, [root]):
        for outer in (m for item in scope for m in _mappings(item)):
            step = _step(outer)
            if step is not None:
                return step
    return DEFAULT_INDENT


def _step(outer: CommentedMap) -> Optional[int]:
    for key, inner in outer.non_merged_items():
        if isinstance(inner, CommentedMap) and not inner.fa.flow_style() and len(inner):
            first = next(iter(dict(inner.non_merged_items())), None)
            if first is not None and inner.lc.key(first)[0] > outer.lc.key(key)[0]:
                step = inner.lc.key(first)[1] - outer.lc.key(key)[1]
                if step > 0:
                    return int(step)
    return None


def _items(container: Any) -> list[Any]:
    if isinstance(container, CommentedMap):
        return [value for _, value in container.non_merged_items()]
    return list(container) if isinstance(container, CommentedSeq) else []


def _containers(node: Any) -> Iterable[Any]:
    if isinstance(node, (CommentedMap, CommentedSeq)):
        yield node
        for item in _items(node):
            yield from _containers(item)


def _mappings(node: Any) -> Iterable[CommentedMap]:
    if isinstance(node, CommentedMap):
        yield node
        for _, value in node.non_merged_items():
            yield from _mappings(value)
    elif isinstance(node, CommentedSeq):
        for item in node:
            yield from _mappings(item)
