"""Every module of the product fits in one reader's head: at most LIMIT lines (issue 40). A module
that grows past it is split along its seams into a package whose __init__ says what it owns."""

from __future__ import annotations

from tests.support.paths import ROOT

PACKAGES = ("fmcluster", "fmcluster_cdk")
LIMIT = 500


def line_counts() -> dict[str, int]:
    return {str(path.relative_to(ROOT)): len(path.read_text().splitlines())
            for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def test_no_module_is_longer_than_the_limit():
    counts = line_counts()
    assert len(counts) > 100  # the walk found the product's modules
    assert {name: n for name, n in counts.items() if n > LIMIT} == {}
