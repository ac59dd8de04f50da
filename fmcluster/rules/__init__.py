"""Rules that relate several fields of a valid-typed spec. One rule, one function.

A rule takes a ClusterSpec and yields Problems (path, message, hint); the loader places them
in the file. Every rule module registers its rules with @rule on import.
"""

from __future__ import annotations

from typing import Callable, Iterable

from fmcluster.diagnostics import Problem
from fmcluster.spec import ClusterSpec

Rule = Callable[[ClusterSpec], Iterable[Problem]]
RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn


def check(spec: ClusterSpec) -> list[Problem]:
    problems: list[Problem] = []
    for fn in RULES:
        problems.extend(fn(spec))
    return problems


from fmcluster.rules import capacity, hyperpod, kubernetes, lustre, naming, network, orchestrator  # noqa: E402,F401
