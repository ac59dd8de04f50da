"""cfn-lint's findings on a template, its rules loaded once a process. Not a test module.

`cfnlint.api.lint_file` builds a new runner for every call, and the runner loads every rule module
again (a third of a second or more, most of the time a small template takes); cfn-lint's own
command line loads them once for all the templates it is given. `findings` does the same through
the API: the rules of `cfnlint.core.get_rules` (the default rules directory, nothing appended,
ignored or added: a caller filters the matches by rule id) and `cfnlint.api.lint` in the regions
given. Over the 91 templates of the examples' corpus it finds exactly what lint_file finds (rule,
message, line and path), in a quarter of the time (tests/project/test_cfn_lint_support.py holds
the two to each other)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Optional


@functools.cache
def _rules() -> Any:
    from cfnlint.core import get_rules

    return get_rules([], [], [])


def findings(template: Path, regions: Optional[list[str]] = None) -> list[Any]:
    """cfn-lint's matches on the template file (JSON or YAML), in `regions` (its default: us-east-1)."""
    return text_findings(template.read_text(), regions)


def text_findings(text: str, regions: Optional[list[str]] = None) -> list[Any]:
    """cfn-lint's matches on a template's text, as `findings` on a file of it."""
    from cfnlint.api import lint

    return lint(text, rules=_rules(), regions=regions)
