"""The rule registry: each rule module registers its rules with @rule on import
(fmcluster.rules imports every rule module)."""

from __future__ import annotations

from typing import Callable, Iterable

from fmcluster.diagnostics import Problem
from fmcluster.spec import ClusterSpec

Rule = Callable[[ClusterSpec], Iterable[Problem]]
RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn
