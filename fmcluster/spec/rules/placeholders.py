"""Placeholders in a spec: what `fmcluster init` marks `put yours`, and values reserved for
documentation (fmcluster.spec.placeholders). A warning here, since the examples and a new project
hold them on purpose until they are replaced; `preflight` fails on them, and the CDK app refuses
them wherever its templates may be deployed."""

from __future__ import annotations

from typing import Iterator

from fmcluster.spec import placeholders
from fmcluster.spec.diagnostics import Problem, warning
from fmcluster.spec.models import ClusterSpec
from fmcluster.spec.rules.registry import rule


@rule(warns=True)
def placeholder_values(spec: ClusterSpec) -> Iterator[Problem]:
    """A value that holds a place: an example account of AWS's documentation, an address of the
    documentation ranges (RFC 5737), an example reservation id, a documentation mail domain."""
    for finding in placeholders.found(spec):
        yield warning(finding.path, f"{finding.message}: a placeholder", finding.hint)
