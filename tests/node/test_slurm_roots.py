"""The roots of the Slurm releases AWS PCS runs (tests/support/slurm_roots.py): which release each
root carries is read from the root itself, so a Debian suite that moves on (sid, to the next Slurm
release) gives the tests that release instead of failing a fresh machine's `make tools`."""

from __future__ import annotations

import json

import pytest

from tests.support import slurm_roots


@pytest.fixture
def roots(tmp_path, monkeypatch):
    monkeypatch.setattr(slurm_roots, "ROOTS_DIR", tmp_path)
    monkeypatch.setattr(slurm_roots, "SCRATCH", tmp_path / ".scratch")
    (tmp_path / ".scratch").mkdir()
    return tmp_path


def stamp(suite: str, slurm: str) -> None:
    path = slurm_roots.path_of(suite)
    path.mkdir(parents=True)
    (path / slurm_roots.STAMP).write_text(json.dumps({"suite": suite, "slurm": slurm, "recipe": slurm_roots.RECIPE}))


def test_a_built_root_says_which_release_it_carries(roots):
    stamp("trixie", "24.11.5")
    stamp("sid", "26.11.1")  # sid moved on after SUITES was written
    assert slurm_roots.versions() == ("24.11", "26.11")
    assert slurm_roots.root("26.11") == slurm_roots.path_of("sid")
    with pytest.raises(slurm_roots.Missing, match="no Debian suite here carries Slurm 26.05"):
        slurm_roots.root("26.05")


def test_before_the_build_the_releases_are_the_suites_and_missing(roots):
    assert slurm_roots.versions() == tuple(sorted(slurm_roots.SUITES.values()))
    with pytest.raises(slurm_roots.Missing, match="run `make tools`"):
        slurm_roots.root("24.11")
