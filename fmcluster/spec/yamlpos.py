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
    def __init__(self, message: str, line: int, column: int):
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


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
