"""`fmcluster diff OLD NEW`: what changing a spec does to deployed resources.

It owns the comparison of two sets of templates, resource by resource, and what a change reaches
beyond its resource. Its modules, bottom up: changes (what is found, as data), references (what a
template value refers to, across stacks), rules (one resource's change), rolls (the node groups
a change reaches, the node images that roll), compare (every stack, references followed), notes
(what a change of the spec does that the templates do not show), render (the text, the JSON, the
verdict) and command (run, render, exit code). Each imports its siblings directly, never this
package; the package may import fmcluster.deploy's other modules and the layers below (model,
spec, facts). Here are the names other code uses.

Sources and details: docs/research-notes.md, "fmcluster/deploy/diff/"."""

from __future__ import annotations

from fmcluster.deploy.diff.changes import (
    ADD,
    FAILS,
    MAY_REPLACE,
    REMOVE,
    REPLACE,
    UPDATE,
    Change,
    Comparison,
    NewCluster,
    Roll,
    StackDiff,
    TeamChange,
)
from fmcluster.deploy.diff.command import FORMATS, DiffReport, exit_code, render, run, run_deployed
from fmcluster.deploy.diff.compare import compare, data_keys
from fmcluster.deploy.diff.notes import health_notes, home_notes, identity_changes, team_changes
from fmcluster.deploy.diff.references import canonical, exports, imports, references
from fmcluster.deploy.diff.render import Verdict, refused, render_json, render_text, verdict
from fmcluster.deploy.diff.rolls import HYPERPOD_ROLL, PCS_ROLL, image_rolls

__all__ = [
    "ADD", "FAILS", "FORMATS", "HYPERPOD_ROLL", "MAY_REPLACE", "PCS_ROLL", "REMOVE", "REPLACE", "UPDATE", "Change",
    "Comparison", "DiffReport", "NewCluster", "Roll", "StackDiff", "TeamChange", "Verdict", "canonical", "compare",
    "data_keys", "exit_code", "exports", "health_notes", "home_notes", "identity_changes", "image_rolls", "imports",
    "references", "refused", "render", "render_json", "render_text", "run", "run_deployed", "team_changes", "verdict",
]
