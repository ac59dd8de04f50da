"""The snapshot comparison that shows a refactoring changes no output (tests/support/snapshot.py)
reports every difference, and only differences."""

from __future__ import annotations

from tests.support.snapshot import differences


def write(folder, files):
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def test_identical_snapshots_have_no_differences(tmp_path):
    files = {"a.cdk.out/x.template.json": "{{}}", "a.synth.txt": "wrote {dir}/x\n", "a.kit/README.md": "kit"}
    old = write(tmp_path / "old", {k: v.format(dir=tmp_path / "old") for k, v in files.items()})
    new = write(tmp_path / "new", {k: v.format(dir=tmp_path / "new") for k, v in files.items()})
    assert differences(old, new) == []


def test_every_kind_of_difference_is_reported(tmp_path):
    old = write(tmp_path / "old", {"t/x.json": "1", "gone.txt": "", "same.txt": "s"})
    new = write(tmp_path / "new", {"t/x.json": "2", "added.txt": "", "same.txt": "s"})
    assert sorted(differences(old, new)) == ["differs: t/x.json", "only in new: added.txt", "only in old: gone.txt"]
