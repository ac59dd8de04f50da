"""The commit history reads: every commit since the layout of issue 25 (BASELINE, the last commit
before it) has a subject of at most 72 characters, scoped and in the imperative ("kits: wait for
every MPI worker"), then a blank line and a body that says why; a merge, a scoped subject within the
length ("merge: what comes in"). CI runs this on a fresh clone of
main (`make test`); outside a git checkout, or where the baseline is not in a shallow history,
the commits that are there are checked.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.support.paths import ROOT

BASELINE = "d6c694f3cfe2959d9ef115d2683bf763ee168dcf"  # "slurm: the IMEX prolog turns on the command service it polls"
SUBJECT_MAX = 72
# scope (one or more, comma-separated), a colon, a space, then the subject proper
SCOPED = re.compile(r"^(?P<scope>[a-z0-9][a-z0-9_./-]*(?:, [a-z0-9][a-z0-9_./-]*)*): (?P<rest>\S.*)$")
# The subject proper starts with a verb in the imperative: not "added", "adds", "adding".
# Words that end like a past tense or a gerund but are imperatives themselves:
IMPERATIVE_ANYWAY = {"embed", "feed", "need", "proceed", "seed", "shed", "speed", "succeed", "bring", "string"}
NOT_A_VERB_FORM = {"does", "focus", "address", "pass", "process", "access", "bypass", "express", "is", "has"}


def problems(subject: str, body: str, merge: bool = False) -> list[str]:
    """What is wrong with one commit message (subject line, body after the blank line). A merge's
    subject says what comes in, scoped ("merge: the docs site"), within the length; a merge needs
    no body (its commits have theirs)."""
    found = []
    if len(subject) > SUBJECT_MAX:
        found.append(f"subject is {len(subject)} characters (at most {SUBJECT_MAX})")
    match = SCOPED.match(subject)
    if not match:
        found.append("subject is not scoped: " + ("'merge: what comes in'" if merge else "'scope: do something'"))
    if merge:
        return found
    if match:
        verb = match.group("rest").split()[0].lower()
        if verb not in IMPERATIVE_ANYWAY and (verb.endswith(("ed", "ing"))
                                              or (verb.endswith("s") and not verb.endswith("ss")
                                                  and verb not in NOT_A_VERB_FORM)):
            found.append(f"'{verb}' is not the imperative ('add', not 'added' or 'adds')")
    if subject.endswith("."):
        found.append("subject ends with a full stop")
    if not body.strip():
        found.append("no body saying why, after a blank line")
    return found


def commits(merges: bool = False) -> list[tuple[str, str, str]]:
    """(sha, subject, body) of every commit after BASELINE (or of all there are): the merges, or
    the others."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    known = subprocess.run(["git", "cat-file", "-e", f"{BASELINE}^{{commit}}"], cwd=ROOT,
                           capture_output=True).returncode == 0
    span = [f"{BASELINE}..HEAD"] if known else ["HEAD"]
    out = subprocess.run(["git", "log", "--merges" if merges else "--no-merges", "--format=%H%x00%B%x1e", *span],
                         cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    found = []
    for record in filter(str.strip, out.split("\x1e")):
        sha, message = record.strip("\n").split("\x00", 1)
        subject, _, rest = message.partition("\n")
        if rest and not rest.startswith("\n"):
            rest = "\x00"  # the line after the subject is not blank: reported as no body
        found.append((sha[:10], subject, "" if rest == "\x00" else rest))
    return found


@pytest.mark.parametrize("merges", [False, True], ids=["commits", "merges"])
def test_every_new_commit_message_reads(merges):
    bad = {f"{sha} {subject}": problems(subject, body, merge=merges) for sha, subject, body in commits(merges)}
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, "\n".join(f"{k}: {'; '.join(v)}" for k, v in bad.items())


def test_a_merge_subject_is_held_to_length_and_scope():
    assert problems("merge: the docs site", "", merge=True) == []
    assert problems("Merge branch 'wt-docs'", "", merge=True) and problems("merge: " + "x" * 70, "", merge=True)


@pytest.mark.parametrize("subject, body, expected", [
    ("kits: wait for every MPI worker", "why", []),
    ("node, pipeline: name the new modules", "why", []),
    ("kits: embed the collector", "why", []),
    ("Wait for every MPI worker", "why", ["not scoped"]),
    ("kits: added a wait", "why", ["imperative"]),
    ("kits: adds a wait", "why", ["imperative"]),
    ("kits: wait for every worker.", "why", ["full stop"]),
    ("kits: wait", "", ["no body"]),
    ("kits: " + "x" * 70, "why", ["characters"]),
])
def test_the_check_catches_each_problem(subject, body, expected):
    found = problems(subject, body)
    assert len(found) == len(expected) and all(e in f for e, f in zip(expected, found, strict=True)), found
