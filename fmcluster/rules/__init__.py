"""Rules that relate several fields of a valid-typed spec. One rule, one function.

A rule takes a ClusterSpec and yields Problems (path, message, hint); the loader places them
in the file. Every rule module registers its rules with @rule (fmcluster.rules.registry) on
import; this package imports them all.
"""

from __future__ import annotations

from fmcluster.diagnostics import Problem
from fmcluster.rules import (  # noqa: F401
    capacity,
    hyperpod,
    kubernetes,
    lustre,
    naming,
    network,
    orchestrator,
    serving,
    slurm,
    ultraserver,
)
from fmcluster.rules.registry import RULES, WARNING_RULES, Rule, rule, rule_id, run
from fmcluster.spec import ClusterSpec

__all__ = ["RULES", "WARNING_RULES", "Rule", "check", "rule", "rule_id"]


def check(spec: ClusterSpec) -> list[Problem]:
    """Every rule's findings, each with its rule's id."""
    problems: list[Problem] = []
    for fn in RULES:
        problems.extend(run(fn, spec))
    return problems
