"""Rules that relate several fields of a valid-typed spec. One rule, one function.

A rule takes a ClusterSpec and yields Problems (path, message, hint); the loader places them
in the file. Every rule module registers its rules with @rule (fmcluster.spec.rules.registry) on
import; this package imports them all.
"""

from __future__ import annotations

from fmcluster.spec.diagnostics import Problem
from fmcluster.spec.models import ClusterSpec
from fmcluster.spec.rules import (  # noqa: F401
    capacity,
    home,
    hyperpod,
    images,
    kubernetes,
    lustre,
    naming,
    network,
    orchestrator,
    placeholders,
    serving,
    slurm,
    teams,
    ultraserver,
)
from fmcluster.spec.rules.registry import RULES, WARNING_RULES, Rule, rule, rule_id, run

__all__ = ["RULES", "WARNING_RULES", "Rule", "check", "rule", "rule_id"]


def check(spec: ClusterSpec) -> list[Problem]:
    """Every rule's findings, each with its rule's id."""
    problems: list[Problem] = []
    for fn in RULES:
        problems.extend(run(fn, spec))
    return problems
