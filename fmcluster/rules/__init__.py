"""Rules that relate several fields of a valid-typed spec. One rule, one function.

A rule takes a ClusterSpec and yields Problems (path, message, hint); the loader places them
in the file. Every rule module registers its rules with @rule (fmcluster.rules.registry) on
import; this package imports them all.
"""

from __future__ import annotations

from fmcluster.diagnostics import Problem
from fmcluster.rules import capacity, hyperpod, kubernetes, lustre, naming, network, orchestrator  # noqa: F401
from fmcluster.rules.registry import RULES, Rule, rule
from fmcluster.spec import ClusterSpec

__all__ = ["RULES", "Rule", "check", "rule"]


def check(spec: ClusterSpec) -> list[Problem]:
    problems: list[Problem] = []
    for fn in RULES:
        problems.extend(fn(spec))
    return problems
