"""Best-effort repair of a spec with type errors, so the cross-field rules can still run and
every problem is reported in one pass.

Each invalid value is removed (its default applies), an object that loses a required field is
removed with it, and list items removed shift no reported positions: problems found on the
repaired spec are mapped back to the original list indices. Rule findings inside an object
that was repaired are dropped, since they would only echo the type error.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, TypeVar

from fmcluster.facts import regions
from fmcluster.spec.diagnostics import Path, Problem

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

M = TypeVar("M")  # the model that `validate` makes
MAX_ROUNDS = 8
# Required top-level fields whose wrong value can be stood in for: findings about the field
# itself are dropped (touches_repair), the rest of the spec is still checked.
PLACEHOLDERS: dict[str, Callable[[Any], str]] = {
    "name": lambda data: "repaired-spec",
    "availability_zone_id": lambda data: regions.example_az_id(_unwrap(data).get("region")),
}


@dataclass(frozen=True)
class _Item:
    """A list item that remembers its index in the original document."""

    index: int
    value: Any


def _wrap(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _wrap(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_Item(i, _wrap(v)) for i, v in enumerate(data)]
    return data


def _unwrap(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _unwrap(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_unwrap(item.value) for item in data]
    return data


def _original(wrapped: Any, path: Path) -> Path:
    """Map a path in the repaired document to the original document's indices."""
    out: list[str | int] = []
    node = wrapped
    for part in path:
        if isinstance(node, list) and isinstance(part, int) and part < len(node):
            out.append(node[part].index)
            node = node[part].value
        elif isinstance(node, dict) and part in node:
            out.append(part)
            node = node[part]
        else:
            out.append(part)
            node = None
    return tuple(out)


def _remove(wrapped: Any, path: Path) -> Path | None:
    """Remove the value at `path`; returns the original path removed, or None."""
    if not path:
        return None
    parent = wrapped
    for part in path[:-1]:
        if isinstance(parent, list) and isinstance(part, int) and part < len(parent):
            parent = parent[part].value
        elif isinstance(parent, dict) and part in parent:
            parent = parent[part]
        else:
            return None
    original = _original(wrapped, path)
    last = path[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
        return original
    if isinstance(parent, list) and isinstance(last, int) and last < len(parent):
        del parent[last]
        return original
    return None


def repaired(data: dict[str, Any], validate: Callable[[Any], M]) -> tuple[M, Any, list[Path]] | None:
    """(model, wrapped document, original paths removed), or None if no valid model remains."""
    wrapped = _wrap(copy.deepcopy(data))
    removed: list[Path] = []
    for _ in range(MAX_ROUNDS):
        try:
            return validate(_unwrap(wrapped)), wrapped, removed
        except Exception as exc:  # pydantic.ValidationError
            errors: Callable[..., list[ErrorDetails]] | None = getattr(exc, "errors", None)
            if errors is None:
                raise
            progress = False
            for err in sorted(errors(include_url=False), key=lambda e: len(e["loc"]), reverse=True):
                loc = tuple(p for p in err["loc"] if p != "[key]")
                target = loc[:-1] if err["type"] == "missing" else loc
                if not target:
                    if loc and isinstance(loc[0], str) and loc[0] in PLACEHOLDERS and (loc[0],) in removed:
                        wrapped[loc[0]] = PLACEHOLDERS[loc[0]](wrapped)
                        progress = True
                        continue
                    return None  # a required top-level field is missing or wrong: nothing to check
                gone = _remove(wrapped, target)
                if gone is not None:
                    if err["type"] != "extra_forbidden":  # an unknown key changes no meaning
                        removed.append(gone)
                    progress = True
            if not progress:
                return None
    return None


def touches_repair(path: Path, removed: list[Path]) -> bool:
    """True when a rule finding at `path` lies in (or contains) an object that was repaired."""
    for gone in removed:
        if gone[: len(path)] == path:  # the finding is about something that holds the repair
            return True
        # a removed list item stands for itself; a removed field for the object that held it
        scope = gone if isinstance(gone[-1], int) or len(gone) == 1 else gone[:-1]
        if path[: len(scope)] == scope:
            return True
    return False


def rule_problems(data: dict[str, Any], validate: Callable[[Any], M],
                  check: Callable[[M], Iterable[Problem]]) -> list[Problem]:
    """Run the rules on a repaired copy of `data`; findings mapped to original positions."""
    result = repaired(data, validate)
    if result is None:
        return []
    model, wrapped, removed = result
    problems: list[Problem] = []
    for p in check(model):
        path = _original(wrapped, p.path)
        if not touches_repair(path, removed):
            problems.append(replace(p, path=path))
    return problems
