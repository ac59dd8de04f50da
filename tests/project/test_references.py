"""Names and paths written in prose resolve: every dotted reference to fmcluster or fmcluster_cdk
in the comments and docstrings of fmcluster/, fmcluster_cdk/ and tests/, and in README.md and
docs/*.md, names a module or something the module defines (or an attribute of that); every path
of the repository written there (fmcluster/GROUP/NAME.py, tests/GROUP/test_NAME.py, docs/NAME.md,
...) exists. A path with a segment in capitals (NAME, GROUP) is a pattern, not checked."""

from __future__ import annotations

import ast
import functools
import importlib
import io
import re
import tokenize
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support.paths import ROOT

PYTHON = sorted(p for top in ("fmcluster", "fmcluster_cdk", "tests") for p in (ROOT / top).rglob("*.py"))
MARKDOWN = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# Other text a user or developer reads, every line of it prose: the examples' comments, the image
# recipes, the vendored test data's provenance and comments.
TEXT = sorted(p for pattern in ("examples/**/*.yaml", "examples/**/*.yml", "fmcluster/data/docker/*",
                                "tests/data/**/*.md", "tests/data/**/*.yaml", "tests/data/**/*.json")
              for p in ROOT.glob(pattern)
              if p.is_file())
# Names the code had before issue 25's layout: no text may still use them.
OLD_NAMES = re.compile(r"\bconstructs_lib\b|(?<![\w/.-])stacks/[a-z_]+\.py|python -m fmcluster\.(?:pipeline|synth)\b"
                       r"|(?<![\w/.-])tests/test_\w+\.py")

# fmcluster.dev is the domain of fmcluster's Kubernetes labels, not a module
DOTTED = re.compile(r"(?<![\w./-])(fmcluster(?:_cdk)?(?!\.dev\b)(?:\.[A-Za-z_]\w*)+)(?![\w/-])")
# A path from the repository's root: a top folder of it, then names; not a pattern (<group>, *, {a,b})
PATH = re.compile(r"(?<![\w./<#-])((?:fmcluster|fmcluster_cdk|tests|docs|examples|bench)/[\w./-]*[\w/])(?![\w<>*{}])")


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of each comment and docstring of a Python file, or of each line of a Markdown one."""
    text = path.read_text()
    if path.suffix != ".py":
        yield from enumerate(text.splitlines(), 1)
        return
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                yield first.lineno, first.value.value


def pattern_path(name: str) -> bool:
    """A path written as a pattern: a segment in capitals (NAME, GROUP, test_NAME.py)."""
    return any(re.search(r"(^|_)[A-Z]{2,}\b", part) for part in name.split("/"))


@functools.cache
def written() -> tuple[tuple[str, int, str], ...]:
    """(file, line, text) of all the prose checked, read once a run (when a test asks, not when
    pytest collects the module: every worker collects it)."""
    return tuple((str(path.relative_to(ROOT)), line, text) for path in PYTHON + MARKDOWN + TEXT
                 for line, text in prose(path))


def references(pattern: re.Pattern[str]) -> dict[tuple[str, str], list[int]]:
    """(file, reference) -> the lines it is written on (a docstring's: its first line)."""
    found: dict[tuple[str, str], list[int]] = {}
    for relative, line, text in written():
        for match in pattern.finditer(text):
            name = match.group(1).rstrip(".")
            if pattern is not PATH or not pattern_path(name):
                found.setdefault((relative, name), []).append(line)
    return found


def defined(module: Any) -> set[str]:
    """The names a module binds itself at its top level (not those it imports)."""
    names: set[str] = set()

    def visit(statements: list[ast.stmt]) -> None:
        for statement in statements:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(statement.name)
            elif isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif not isinstance(statement, (ast.Import, ast.ImportFrom)):
                for block in ("body", "orelse", "finalbody", "handlers"):
                    visit(getattr(statement, block, []))

    visit(ast.parse(Path(module.__file__).read_text()).body)
    return names


def attribute(owner: Any, name: str) -> Any:
    """owner.name, where a dataclass or pydantic field without a default counts as one."""
    if hasattr(owner, name):
        return getattr(owner, name)
    fields = {**getattr(owner, "__dataclass_fields__", {}), **getattr(owner, "model_fields", {})}
    if name in fields:
        return fields[name]
    raise AttributeError(name)


def resolves(name: str) -> bool:
    """A module, or an attribute (at any depth) of the longest module that is a prefix of it."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        module_name = ".".join(parts[:n])
        try:
            found: Any = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module_name.startswith(exc.name):
                continue  # no such module: try the one above, with an attribute
            raise
        if n < len(parts) and parts[n] not in defined(found):
            return False  # not there, or imported there from where it is defined
        try:
            for part in parts[n:]:
                found = attribute(found, part)
        except AttributeError:
            return False
        return True
    return False


@pytest.fixture(scope="module")
def dotted_found() -> dict[tuple[str, str], list[int]]:
    return references(DOTTED)


@pytest.fixture(scope="module")
def paths_found() -> dict[tuple[str, str], list[int]]:
    return references(PATH)


def test_the_readers_find_what_is_written(tmp_path):
    source = tmp_path / "m.py"
    source.write_text('"""See fmcluster.kubernetes.charts.INSTALLS and fmcluster_cdk/stacks/eks.py."""\n'
                      "x = 'fmcluster.not.read'  # fmcluster.model.cluster.ClusterModel.spec, tests/<group>/\n"
                      "# the label fmcluster.dev/node-group; examples/p5-pcs.yaml, image#fmcluster/x.\n")
    texts = [text for _, text in prose(source)]
    assert [m.group(1) for t in texts for m in DOTTED.finditer(t)] == [
        "fmcluster.model.cluster.ClusterModel.spec", "fmcluster.kubernetes.charts.INSTALLS"]
    assert sorted(m.group(1).rstrip(".") for t in texts for m in PATH.finditer(t)) == [
        "examples/p5-pcs.yaml", "fmcluster_cdk/stacks/eks.py"]
    assert resolves("fmcluster.model.cluster.ClusterModel.spec")  # a dataclass field
    assert resolves("fmcluster.spec.models.cluster.ClusterSpec.node_groups")  # a pydantic field
    assert resolves("fmcluster.kubernetes") and resolves("fmcluster_cdk.stacks.eks.EksClusterStack")
    assert not resolves("fmcluster.model.network") and not resolves("fmcluster.model.cluster.Nothing")
    assert resolves("fmcluster.kits.common.SMOKE_PY")
    assert not resolves("fmcluster.kits.jobs.SMOKE_PY")  # imported there from fmcluster.kits.common
    assert pattern_path("tests/GROUP/test_NAME.py") and not pattern_path("tests/kubernetes/test_installs.py")


def test_there_is_something_to_check(dotted_found, paths_found):
    assert len(dotted_found) > 50 and len(paths_found) > 50


def test_every_dotted_name_resolves(dotted_found):
    wrong = [f"{file}:{lines[0]}: {name}" for (file, name), lines in sorted(dotted_found.items())
             if not resolves(name)]
    assert not wrong, "names that are no module or attribute:\n" + "\n".join(wrong)


def test_every_path_exists(paths_found):
    wrong = [f"{file}:{lines[0]}: {name}" for (file, name), lines in sorted(paths_found.items())
             if not (ROOT / name).exists()]
    assert not wrong, "paths that do not exist:\n" + "\n".join(wrong)


def test_no_text_uses_the_names_from_before_the_layout():
    found = [f"{relative}:{line}: {match.group(0)}" for relative, line, text in written()
             for match in OLD_NAMES.finditer(text)]
    assert not found, "\n".join(found)
