"""YAML loading that remembers where every key and value stands in the file."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from fmcluster.diagnostics import Path

_Loader: type[yaml.CSafeLoader | yaml.SafeLoader]
try:  # the C parser is several times faster; PyYAML wheels ship it
    _Loader = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - pure-Python PyYAML
    _Loader = yaml.SafeLoader

Mark = tuple[int, int]  # 1-based line, column


class Document:
    """A loaded YAML document: its data, and the position of each path's key and value.

    A plain class rather than a dataclass, as is `loader.LoadResult`: a dataclass costs about
    half a millisecond to define, paid by every `fmcluster validate`."""

    def __init__(self, data: Any, file: str) -> None:
        self.data, self.file = data, file
        self.values: dict[Path, Mark] = {}
        self.keys: dict[Path, Mark] = {}
        self.duplicates: list[Path] = []  # paths of keys given twice

    def locate(self, path: Path, at_key: bool = False) -> Mark:
        """Position of a path, or of its nearest ancestor present in the file."""
        path = tuple(path)
        while True:
            table = self.keys if at_key else self.values
            if path in table:
                return table[path]
            if path in self.values:
                return self.values[path]
            if not path:
                return (1, 1)
            path = path[:-1]
            at_key = False


class YamlSyntaxError(Exception):
    def __init__(self, message: str, line: int, column: int):
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


def _mark(node: yaml.Node) -> Mark:
    return (node.start_mark.line + 1, node.start_mark.column + 1)


def _index(doc: Document, node: yaml.Node, data: Any, path: Path) -> None:
    doc.values[path] = _mark(node)
    if isinstance(node, yaml.MappingNode) and isinstance(data, dict):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is None or key not in data and str(key) not in data:
                continue
            key = key if key in data else str(key)
            if key in seen:
                doc.duplicates.append(path + (key,))
            seen.add(key)
            doc.keys[path + (key,)] = _mark(key_node)
            _index(doc, value_node, data[key], path + (key,))
    elif isinstance(node, yaml.SequenceNode) and isinstance(data, list):
        # a sequence node and the list constructed from it have the same length; not strict, so
        # that positions are indexed as far as they go whatever a constructor made of the node
        for i, (item_node, item) in enumerate(zip(node.value, data, strict=False)):
            _index(doc, item_node, item, path + (i,))


def load(text: str, file: str) -> Document:
    """Parse one YAML document. Raises YamlSyntaxError with a position on bad YAML."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
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
    doc = Document(data=data, file=file)
    if node is not None:
        _index(doc, node, data, ())
    return doc
