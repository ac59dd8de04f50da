"""`fmcluster validate --pipeline FILE...`: each pipeline file checked, reported as validate
reports spec files. The file's model and its loading are fmcluster.spec.pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from fmcluster.spec import loader
from fmcluster.spec.pipeline import load


def run(paths: Iterable[str], root: str | Path | None = None) -> loader.ValidateReport:
    """`fmcluster validate --pipeline FILE...`: each pipeline file and every spec it lists checked,
    reported (and rendered, by fmcluster.spec.loader) as validate reports spec files."""
    checks = []
    for path in paths:
        result = load(path, root)
        checks.append(loader.FileCheck(path, result.ok, tuple(result.diagnostics)))
    return loader.ValidateReport(tuple(checks))
