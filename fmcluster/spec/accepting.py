"""Warnings a spec accepts (`accepted_warnings`): each becomes an `accepted` finding with the
spec's reason, so a team takes a known risk on purpose and a reviewer sees that it did.

Only warnings are accepted. An entry that names an unknown check or one that reports errors is
an error; one that accepts nothing (the warning is gone, or the path names another place) is a
warning, so stale acceptances are cleaned up.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from fmcluster.spec.diagnostics import Problem, dotted, error, warning
from fmcluster.spec.models import AcceptedWarning
from fmcluster.spec.rules import RULES, WARNING_RULES, rule_id

UNUSED_RULE = "accepted-warning-unused"


def apply(problems: Sequence[Problem], accepted: Sequence[AcceptedWarning],
          error_ids: Sequence[str] = ()) -> list[Problem]:
    """`problems` with each accepted warning marked, and the problems of the entries themselves.
    `error_ids` are the ids of checks outside the rules (the loader's), all of them errors."""
    out: list[Problem] = []
    used: set[int] = set()
    for problem in problems:
        if problem.severity == "warning":
            match = next((i for i, entry in enumerate(accepted) if entry.rule == problem.rule
                          and (entry.path is None or entry.path == dotted(problem.path))), None)
            if match is not None:
                used.add(match)
                problem = replace(problem, severity="accepted", hint=accepted[match].reason)
        out.append(problem)
    errors_only = {rule_id(fn) for fn in RULES} - WARNING_RULES | set(error_ids)
    for i, entry in enumerate(accepted):
        if entry.rule in errors_only:
            out.append(error(("accepted_warnings", i, "rule"),
                             f"{entry.rule} reports errors, and an error cannot be accepted",
                             "fix what it reports; only warnings can be accepted", rule="accepted-warnings"))
        elif entry.rule not in WARNING_RULES:
            import difflib

            close = difflib.get_close_matches(entry.rule, sorted(WARNING_RULES), n=1)
            out.append(error(("accepted_warnings", i, "rule"), f"no check reports warnings with id {entry.rule}",
                             f"did you mean {close[0]}?" if close else
                             "checks that report warnings: " + ", ".join(sorted(WARNING_RULES)),
                             rule="accepted-warnings"))
        elif i not in used:
            where = f" at {entry.path}" if entry.path else ""
            out.append(warning(("accepted_warnings", i), f"accepts nothing: {entry.rule} reports no warning{where}",
                               "remove the entry, or correct its path", rule=UNUSED_RULE))
    return out
