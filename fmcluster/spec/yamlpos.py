"""YAML loading that remembers where every key and value stands in the file.

Loading is bounded whatever the input: a document whose aliases expand it past MAX_VALUES
values ("billion laughs"), an alias of a value inside itself, or nesting deeper than MAX_DEPTH
is refused with a located error before anything is built from it. YAML merge keys (`<<: *base`)
work as YAML defines them: keys given next to a merge override the merged ones and are not
duplicates; a merged key is placed at its anchor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from fmcluster.spec.diagnostics import Path

_Loader: type[yaml.CSafeLoader | yaml.SafeLoader]
try:  # the C parser is several times faster; PyYAML wheels ship it
    _Loader = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - pure-Python PyYAML
    _Loader = yaml.SafeLoader

Mark = tuple[int, int]  # 1-based line, column

MAX_VALUES = 100_000  # keys, values and items once aliases are expanded; a 64-group spec has ~2,000
MAX_DEPTH = 64  # levels of nesting; a spec has fewer than ten
MERGE_TAG = "tag:yaml.org,2002:merge"

_Pairs = list[tuple[yaml.Node, yaml.Node]]


@dataclass(frozen=True)
class Document:
    """A loaded YAML document: its data, and the position of each path's key and value (`load`
    fills them in)."""

    data: Any
    file: str
    text: str = ""
    values: dict[Path, Mark] = field(default_factory=dict)
    keys: dict[Path, Mark] = field(default_factory=dict)
    duplicates: list[Path] = field(default_factory=list)  # paths of keys given twice

    @cached_property
    def _lines(self) -> list[str]:
        """The file's lines, split on first use: only a spec with problems needs them."""
        return lines(self.text)

    def line(self, number: int) -> str | None:
        """The text of a 1-based line of the file, or None past its end."""
        return line_of(self._lines, number)

    def locate(self, path: Path, at_key: bool = False) -> Mark:
        """Position of a path's value (or key); for a path the file does not have (a missing
        field, a default), the nearest ancestor that it has: at its key where it has one (the
        `orchestrator:` a missing `type` belongs under), else its value (a list item)."""
        path = tuple(path)
        if at_key and path in self.keys:
            return self.keys[path]
        if path in self.values:
            return self.values[path]
        while path:
            path = path[:-1]
            if path in self.keys:
                return self.keys[path]
            if path in self.values:
                return self.values[path]
        return (1, 1)


def lines(text: str) -> list[str]:
    """The lines of a YAML text, split where PyYAML counts a line break (str.splitlines also
    splits at form feeds and other characters YAML does not)."""
    import re

    return re.split(r"\r\n|[\r\n\x85\u2028\u2029]", text)


def line_of(text_lines: list[str], number: int) -> str | None:
    """Line `number` (1-based) of `lines(text)`, or None past its end."""
    return text_lines[number - 1] if 0 < number <= len(text_lines) else None


class YamlSyntaxError(Exception):
    def __init__(self, message: str, line: int, column: int, hint: str | None = None):
        super().__init__(message)
        self.message, self.line, self.column, self.hint = message, line, column, hint


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" "))


def _levels_above(text_lines: list[str], line: int) -> list[int]:
    """The indentations of the blocks that enclose 1-based `line`, innermost first: walking up,
    each non-blank line indented less than all below it (a `- key:` item also opens its key's
    level)."""
    levels: list[int] = []
    for above in reversed(text_lines[:line - 1]):
        stripped = above.strip()
        if not stripped or stripped.startswith("#"):
            continue
        found = sorted({_indent(above), _key_indent(above)}, reverse=True)
        for level in found:
            if not levels or level < levels[-1]:
                levels.append(level)
        if levels[-1] == 0:
            break
    return levels


def _key_indent(text: str) -> int:
    """Where a line's key starts: after its indentation, and after `- ` on a list item."""
    stripped = text.lstrip(" ")
    while stripped.startswith("- "):
        stripped = stripped[1:].lstrip(" ")
    return len(text) - len(stripped)


def _spaces(levels: list[int]) -> str:
    words = [str(n) for n in levels]
    said = ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0]
    return said + (" space" if levels == [1] else " spaces")


def _explained(exc: yaml.MarkedYAMLError, text: str) -> YamlSyntaxError | None:
    """The parser's error in plain words, at the line at fault, with a hint; None for an error
    these cases do not cover. PyYAML often notices a mistake a line late (a bracket never
    closed, a key without `:`), and words it from the parser's point of view."""
    problem, context = exc.problem or "", exc.context or ""
    mark = exc.problem_mark
    if mark is None:
        return None
    text_lines = lines(text)
    line, column = mark.line + 1, mark.column + 1
    here = line_of(text_lines, line) or ""
    start = exc.context_mark
    if ("tab" in problem or "cannot start any token" in problem) and "\t" in here[:len(here) - len(here.lstrip(" \t"))]:
        return YamlSyntaxError("invalid YAML: this line is indented with a tab; YAML indents with spaces only",
                               line, here.index("\t") + 1, "replace the tab with spaces, as many as the lines "
                               "beside it use (2 per level in the examples)")
    if context.startswith("expected a single document"):
        return YamlSyntaxError("invalid YAML: a second document starts here; a spec is one YAML document", line,
                               column, "remove this `---` line, or give each document a file of its own")
    if problem.startswith("found undefined alias"):
        name = here[column - 1:].split()[0] if here[column - 1:].split() else "*"
        return YamlSyntaxError(f"invalid YAML: the alias `{name}` names no anchor above it", line, column,
                               f"anchor the value it repeats first, such as `key: &{name[1:]} value`; or, "
                               "if `*` is meant as text, quote the value")
    if start is not None and context.startswith("while parsing a flow node"):
        # a value was expected in a flow collection: where the parser says so is not where the
        # collection opened (at the end of the file, the line after the last), so the opening
        # bracket is found by parsing again
        found = here[column - 1:column]
        if found == ",":
            return YamlSyntaxError("invalid YAML: nothing between two commas", line, column,
                                   "remove the extra `,`, or put the missing item between the commas")
        opened = _open_flow(text)
        if opened is None:
            return None
        at_line, at_column, bracket = opened
        closer = CLOSERS[bracket]
        if found in CLOSERS.values() and found != closer:
            return YamlSyntaxError(f"invalid YAML: `{found}` closes the `{bracket}` opened on line {at_line}, "
                                   f"which `{closer}` closes", line, column, f"write `{closer}` here")
        return _never_closed(bracket, at_line, at_column)
    if start is not None and context.startswith("while parsing a flow"):
        return _never_closed("[" if "sequence" in context else "{", start.line + 1, start.column + 1)
    if start is not None and context.startswith("while scanning a quoted scalar"):
        return YamlSyntaxError("invalid YAML: the quote opened here is never closed", start.line + 1,
                               start.column + 1, "end the value with the same quote it starts with")
    if problem.startswith("mapping values are not allowed"):
        before = here[:column - 1]
        if ": " in before.strip():
            key, value = before.split(": ", 1)
            return YamlSyntaxError("invalid YAML: a second `: ` on one line; a value that holds `: ` must be "
                                   "quoted", line, column,
                                   f'quote the value, such as {key.strip()}: "{value.strip()}'
                                   f'{here[column - 1:].rstrip()}"')
        previous = next((n for n in range(line - 1, 0, -1)
                         if (line_of(text_lines, n) or "").strip() and
                         not (line_of(text_lines, n) or "").strip().startswith("#")), None)
        above = line_of(text_lines, previous) if previous else None
        if above is not None and ":" not in above:
            return YamlSyntaxError("invalid YAML: this line has no `:` between its key and value", previous or 1,
                                   _indent(above) + 1, "write `key: value`, with a colon and a space")
        if above is not None and _indent(here) > _key_indent(above):
            key = above[_key_indent(above):].split(":", 1)[0]
            return YamlSyntaxError(
                f"invalid YAML: this line is indented more than `{key}:` above it, whose value is already "
                "given on its line", line, _indent(here) + 1,
                f"indent it by {_spaces([_key_indent(above)])}, like `{key}:`; or, if it belongs under "
                f"`{key}:`, leave `{key}:` without a value")
        return None
    if here[column - 1:column] in ("]", "}") and context.startswith("while parsing a block"):
        found = here[column - 1]
        opener = next(o for o, c in CLOSERS.items() if c == found)
        return YamlSyntaxError(f"invalid YAML: this `{found}` closes no `{opener}`", line, column,
                               f"remove it, or open the {'list' if found == ']' else 'mapping'} with `{opener}`")
    if problem.startswith("did not find expected key") and context.startswith("while parsing a block mapping"):
        levels = [n for n in _levels_above(text_lines, line) if n != _indent(here)]
        if not levels or _indent(here) in _levels_above(text_lines, line):
            return None
        return YamlSyntaxError(
            f"invalid YAML: this line is indented by {_spaces([_indent(here)])}, which lines up with no key above it",
            line, _indent(here) + 1,
            f"indent it by exactly as many spaces as the keys it belongs with: {_spaces(levels)}")
    if "expected '-' indicator" in problem and start is not None and here.lstrip(" ").startswith("-"):
        return YamlSyntaxError(
            f"invalid YAML: this list item is indented by {_spaces([_indent(here)])}, the items above it by "
            f"{_spaces([start.column])}", line, _indent(here) + 1,
            f"line up its `-` with the items above: {_spaces([start.column])}")
    if "expected '-' indicator" in problem and start is not None:
        return YamlSyntaxError(
            f"invalid YAML: this line stands at the indentation of the list that starts on line {start.line + 1}, "
            "but is not an item of it", line, _indent(here) + 1,
            "start it with `- ` to make it an item, indent it under an item's key, or indent it less to leave "
            "the list")
    return None


CLOSERS = {"[": "]", "{": "}"}  # a flow collection's bracket, and what closes it


def _never_closed(bracket: str, line: int, column: int) -> YamlSyntaxError:
    closer = CLOSERS[bracket]
    kind = "list" if bracket == "[" else "mapping"
    return YamlSyntaxError(f"invalid YAML: the `{bracket}` opened here is never closed with `{closer}`", line, column,
                           f"end the {kind} with `{closer}` on this line, or write it as a block "
                           f"({'one `- item` per line' if kind == 'list' else 'one `key: value` per line'})")


def _open_flow(text: str) -> tuple[int, int, str] | None:
    """(line, column, bracket) of the innermost flow collection still open where the parser stops
    on `text`; None when it stops in none. The pure-Python parser keeps the start of every
    collection it is in (the C parser, which loads, does not say); only an error path runs it."""
    parser = yaml.SafeLoader(text)
    text_lines = lines(text)
    try:
        parser.get_single_node()  # raises where the document is wrong
    except yaml.YAMLError:
        for mark in reversed(parser.marks):
            bracket = (line_of(text_lines, mark.line + 1) or "")[mark.column:mark.column + 1]
            if bracket in CLOSERS:
                return mark.line + 1, mark.column + 1, bracket
    finally:
        parser.dispose()
    return None


def _mark(node: yaml.Node) -> Mark:
    return (node.start_mark.line + 1, node.start_mark.column + 1)


def _refuse(node: yaml.Node, message: str) -> YamlSyntaxError:
    return YamlSyntaxError(message, *_mark(node))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def check_graph(root: yaml.Node) -> dict[int, _Pairs]:
    """Walk the composed node graph (an alias is the anchored node itself, met again) without
    recursion: raise YamlSyntaxError at a recursive alias, at nesting past MAX_DEPTH, or at the
    first value that expands past MAX_VALUES. Returns each mapping's own pairs, merge keys left
    out, before construction flattens the merges into them."""
    sizes: dict[int, int] = {}  # expanded size of each finished node
    open_nodes: set[int] = set()  # on the path from the root
    own_pairs: dict[int, _Pairs] = {}
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 0, False)]
    while stack:
        node, depth, finished = stack.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > MAX_VALUES:
                raise _refuse(node, f"YAML aliases expand this value past {MAX_VALUES} values; "
                                    "a spec needs far fewer (is it an alias bomb?)")
            sizes[key] = size
            continue
        if key in sizes:
            continue  # an alias of a finished value: its size is known
        if key in open_nodes:
            raise _refuse(node, "the value anchored here contains an alias of itself (a recursive alias)")
        if depth > MAX_DEPTH:
            raise _refuse(node, f"the document is nested more than {MAX_DEPTH} levels deep")
        open_nodes.add(key)
        if isinstance(node, yaml.MappingNode):
            own_pairs[key] = [(k, v) for k, v in node.value if k.tag != MERGE_TAG]
        stack.append((node, depth, True))
        stack.extend((child, depth + 1, False) for child in reversed(_children(node)))
    return own_pairs


def _index(doc: Document, node: yaml.Node, data: Any, path: Path, own_pairs: dict[int, _Pairs]) -> None:
    doc.values[path] = _mark(node)
    if isinstance(node, yaml.MappingNode) and isinstance(data, dict):
        own = {id(k) for k, _ in own_pairs.get(id(node), ())}
        seen: set[str] = set()
        # construction put merged pairs first and the mapping's own after them, which win
        for key_node, value_node in node.value:
            if key_node.tag == MERGE_TAG:
                continue
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is None or key not in data and str(key) not in data:
                continue
            key = key if key in data else str(key)
            if id(key_node) in own:
                if key in seen:
                    doc.duplicates.append(path + (key,))
                seen.add(key)
            doc.keys[path + (key,)] = _mark(key_node)
            _index(doc, value_node, data[key], path + (key,), own_pairs)
    elif isinstance(node, yaml.SequenceNode) and isinstance(data, list):
        # a sequence node and the list constructed from it have the same length; not strict, so
        # that positions are indexed as far as they go whatever a constructor made of the node
        for i, (item_node, item) in enumerate(zip(node.value, data, strict=False)):
            _index(doc, item_node, item, path + (i,), own_pairs)


def load(text: str, file: str) -> Document:
    """Parse one YAML document. Raises YamlSyntaxError with a position on bad YAML, and on a
    document that aliases expand past the limits (module docstring)."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        own_pairs = check_graph(node) if node is not None else {}
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        explained = _explained(exc, text)
        if explained is not None:
            raise explained from None
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        message = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        raise YamlSyntaxError(f"invalid YAML: {message}", line, column) from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(f"invalid YAML: {exc}", 1, 1) from None
    finally:
        loader.dispose()
    doc = Document(data=data, file=file, text=text)
    if node is not None:
        _index(doc, node, data, (), own_pairs)
    return doc
