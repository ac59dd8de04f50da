"""The rule registry: each rule module registers its rules with @rule on import
(fmcluster.spec.rules imports every rule module).

A rule's id is its function's name with '-' for '_' (`pcs_node_group_limit`: pcs-node-group-limit):
printed with each of its findings, listed in the README's table of checks (a test holds the two
to each other), and named by a spec's `accepted_warnings`. A rule registered with `warns=True`
reports warnings only, which a spec may accept; every other rule reports errors, which it
cannot.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterable, overload

from fmcluster.spec.diagnostics import Problem
from fmcluster.spec.models import ClusterSpec

Rule = Callable[[ClusterSpec], Iterable[Problem]]
RULES: list[Rule] = []
WARNING_RULES: set[str] = set()  # ids of the rules that report warnings


def rule_id(fn: Rule) -> str:
    return getattr(fn, "__name__", repr(fn)).replace("_", "-")


@overload
def rule(fn: Rule) -> Rule: ...
@overload
def rule(*, warns: bool = False) -> Callable[[Rule], Rule]: ...


def rule(fn: Rule | None = None, *, warns: bool = False) -> Rule | Callable[[Rule], Rule]:
    """Register a rule: `@rule`, or `@rule(warns=True)` for one that reports warnings."""

    def register(fn: Rule) -> Rule:
        RULES.append(fn)
        if warns:
            WARNING_RULES.add(rule_id(fn))
        return fn

    return register(fn) if fn is not None else register


def run(fn: Rule, spec: ClusterSpec) -> list[Problem]:
    """A rule's findings on a spec, each marked with the rule's id."""
    ident = rule_id(fn)
    return [p if p.rule else replace(p, rule=ident) for p in fn(spec)]
