"""The docs (Development, Benchmarks) quote the latest benchmark figures (bench/results/, written
by `make bench`).

No timings are asserted here: the benchmark is the speed gate; this only keeps the quoted
figures the ones in the committed results."""

import sys

from tests.support.paths import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import table  # noqa: E402


def test_the_docs_quote_the_latest_results():
    assert table.README == ROOT / "docs" / "development.md"  # where `python bench/table.py --write` writes
    assert table.readme_block(table.README.read_text()) == table.render(), \
        "run `python bench/table.py --write` (make bench does) after updating bench/results/"


def test_results_name_every_target():
    text = table.render()
    for what in ("fmcluster validate", "fmcluster synth", "64 p5.48xlarge node groups", "fresh clone"):
        assert what in text
