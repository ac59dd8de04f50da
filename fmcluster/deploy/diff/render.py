"""What `fmcluster diff` prints: the text, the JSON, and the verdict they end with."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from fmcluster.deploy import node_roll
from fmcluster.deploy.diff.changes import (
    ADD,
    FAILS,
    LABELS,
    MAY_REPLACE,
    REMOVE,
    REPLACE,
    SHOWN_PATHS,
    UPDATE,
    Change,
    Comparison,
    NewCluster,
    TeamChange,
)

SYMBOLS = {ADD: "+", REMOVE: "-", UPDATE: "~", REPLACE: "!", MAY_REPLACE: "?", FAILS: "x"}
NODE_FLAGS = {node_roll.REPLACED: " [its nodes are replaced]", node_roll.NEW_ONLY: " [new nodes only]"}


def _loss_text(c: Change) -> str:
    what = {REMOVE: "removed", REPLACE: "replaced by a new one (the data does not move)",
            MAY_REPLACE: "may be replaced by a new one (the data does not move)"}[c.action]
    if c.retained:
        kept = ("; retained: kept in the account, outside the stack, no longer used by the cluster"
                if c.action == REMOVE else "; the old one is retained outside the stack, no longer used by the cluster")
    else:
        kept = ""
    return f"{c.stack} {c.logical_id} ({c.type}): {what}{kept}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


# How to move the data to the new cluster: the buckets are linked to the file system (data
# repository associations), so the data goes through them. FSx for Lustre exports a linked path's
# files to its bucket with a data repository task (EXPORT_TO_REPOSITORY) and imports what is in
# the bucket (IMPORT_METADATA_FROM_REPOSITORY, or automatically where the link imports); CDK's
# `destroy` deletes a stack, and CloudFormation keeps its retained resources (Amazon FSx for
# Lustre User Guide, "Data repository tasks"; AWS CDK CLI reference, "cdk destroy").
MOVE_HINT = ("to move the data: export the old file system's linked paths to their buckets (aws fsx "
             "create-data-repository-task --type EXPORT_TO_REPOSITORY), deploy NEW, copy each old bucket into "
             "its new one (aws s3 sync s3://OLD-BUCKET s3://NEW-BUCKET), and let the new file system import "
             "it through its links (automatic where a link imports, else a task of type "
             "IMPORT_METADATA_FROM_REPOSITORY); then, after checking them, destroy the old stacks (npx cdk "
             "destroy -c spec=OLD --all): the retained file system, buckets and keys stay in the account "
             "until deleted by hand, the rest goes with the stacks")


@dataclass(frozen=True)
class Verdict:
    """What the comparison comes to, in one line: the last line of the text, the `verdict` of the JSON."""

    kind: str  # ok | data-loss | new-cluster | fails
    refused: bool  # the command exits 1
    line: str


def verdict(report: Comparison, allowed: bool, fmt: str = "text") -> Verdict:
    """An update the service refuses (whatever is allowed) first; then a new cluster (the
    identity changes) or data loss, refused unless allowed; else ok. How to move the data is
    said before the verdict in the text, in new_cluster.hint in the JSON (`fmt`)."""
    failing, loss, moved = report.failing, report.data_loss, report.new_cluster
    if failing:
        also = f" (and {_plural(len(loss), 'stateful resource')} it would replace or remove)" if loss else ""
        return Verdict("fails", True, f"UPDATE FAILS: {_plural(len(failing), 'change')} that the service "
                                      f"refuses{also}; refusing (exit 1): no switch allows it, undo the change")
    allowance = "allowed by --allow-data-loss"
    if moved is not None:
        text = (f"NEW CLUSTER: {', '.join(moved.changes)}: new stacks beside the old ones, which keep "
                f"{_plural(len(moved.left), 'stateful resource')} with the data; the new cluster starts with "
                "empty storage; ")
        return Verdict("new-cluster", not allowed, text + (allowance if allowed else (
            f"refusing (exit 1): move the data ({'above' if fmt == 'text' else 'new_cluster.hint'}), then pass "
            "--allow-data-loss")))
    if loss:
        text = f"DATA LOSS: {_plural(len(loss), 'stateful resource')} replaced or removed; "
        return Verdict("data-loss", not allowed, text + (allowance if allowed else (
            "refusing (exit 1): copy or back up the data first, then pass --allow-data-loss")))
    return Verdict("ok", False, "ok: no stateful resource is replaced or removed")


TEAM_NOTES = {
    "removed": "its Slurm account and associations are removed (Slurm refuses while it has jobs), or its "
               "Kubernetes namespace with its queue and every workload in it",
    "changed": "quotas apply to jobs admitted from then on: running jobs keep their GPUs, and a lower "
               "guarantee is reclaimed by preemption only when another team needs the GPUs",
}


def _team_lines(changes: list[TeamChange]) -> list[str]:
    lines = ["teams:"]
    for change in changes:
        lines.append(f"  {change.team} ({change.change}): {'; '.join(change.details)}")
    for kind, note in TEAM_NOTES.items():
        if any(c.change == kind for c in changes):
            lines.append(f"  ({kind}: {note})")
    return lines


def _new_cluster_lines(moved: NewCluster) -> list[str]:
    lines = [f"new cluster: {', '.join(moved.changes)}: deploying NEW creates the stacks above, with new, empty "
             "file systems and buckets, and does not touch the old ones",
             f"  the old stacks stay as deployed ({moved.where}), and keep costing, until destroyed: "
             f"{', '.join(moved.old_stacks) or 'none'}"]
    if moved.left:
        lines.append("  the old cluster's data stays in them:")
        lines += [f"    {c.stack} {c.logical_id} ({c.type})" for c in moved.left]
    lines.append(f"  {MOVE_HINT}")
    return lines


def render_text(report: Comparison, old_name: str, new_name: str, allowed: bool) -> str:
    lines = [f"fmcluster diff: {old_name} -> {new_name}", *[f"note: {n}" for n in report.notes]]
    for s in report.stacks:
        counts = {a: sum(c.action == a for c in s.changes) for a in (ADD, UPDATE, REPLACE, MAY_REPLACE, REMOVE, FAILS)}
        summary = ", ".join(f"{n} {LABELS[a].lower()}" for a, n in counts.items() if n) or "no changes"
        note = {"added": " (new stack)", "removed": " (no longer produced: destroy it to remove its resources)"}
        if "/" in s.name:  # a nested stack comes and goes with its parent's AWS::CloudFormation::Stack
            note = {"added": " (new nested stack)", "removed": " (nested stack: deleted with its resources)"}
        lines.append(f"stack {s.name}{note.get(s.status, '')}: {summary}")
        whole = s.status in ("added", "removed")
        for c in s.changes:
            if whole and not c.data_loss:
                continue
            flag = " [stateful]" if c.stateful and c.action != ADD else ""
            flag += NODE_FLAGS.get(c.nodes, "")
            lines.append(f"  {SYMBOLS[c.action]} {LABELS[c.action]} {c.type} {c.logical_id}{flag}")
            more = [f"... {len(c.paths) - SHOWN_PATHS} more"] if len(c.paths) > SHOWN_PATHS else []
            shown = c.paths[:SHOWN_PATHS] + more
            if shown and c.action != ADD:
                lines.append(f"      changes: {', '.join(shown)}")
            for reason in c.reasons:
                lines.append(f"      because {reason}")
    for roll in report.rolls:
        lines.append(f"node image {roll.image}: node groups {', '.join(roll.groups)} roll to a new image")
        lines += [f"  {change}" for change in roll.changes[:SHOWN_PATHS]]
        if len(roll.changes) > SHOWN_PATHS:
            lines.append(f"  ... {len(roll.changes) - SHOWN_PATHS} more")
        lines.append(f"  {roll.note}")
    lines += node_roll.lines(report.node_rolls)
    if report.teams:
        lines += _team_lines(report.teams)
    if report.new_cluster is not None:
        lines += _new_cluster_lines(report.new_cluster)
    failing = report.failing
    if failing:
        lines.append(f"the service refuses {_plural(len(failing), 'change')}:")
        lines += [f"  {c.stack} {c.logical_id} ({c.type}): {'; '.join(c.reasons)}" for c in failing]
    loss = report.data_loss
    if loss:
        lines.append("replaced or removed, with their data:")
        lines += [f"  {_loss_text(c)}" for c in loss]
    lines.append(verdict(report, allowed).line)
    return "\n".join(lines) + "\n"


def render_json(report: Comparison, old_name: str, new_name: str, allowed: bool) -> str:
    def change(c: Change) -> dict[str, Any]:
        return {**asdict(c), "data_loss": c.data_loss, "fails": c.fails}

    moved = report.new_cluster
    return json.dumps({"old": old_name, "new": new_name, "allow_data_loss": allowed,
                       "verdict": asdict(verdict(report, allowed, "json")),
                       "data_loss": [change(c) for c in report.data_loss],
                       "fails": [change(c) for c in report.failing], "notes": report.notes,
                       "new_cluster": None if moved is None else {
                           "changes": moved.changes, "where": moved.where, "old_stacks": moved.old_stacks,
                           "left": [change(c) for c in moved.left], "hint": MOVE_HINT},
                       "rolls": [asdict(r) for r in report.rolls],
                       "node_rolls": [{**asdict(r), "nodes": r.nodes} for r in report.node_rolls],
                       "teams": [asdict(t) for t in report.teams],
                       "stacks": [{"name": s.name, "status": s.status, "changes": [change(c) for c in s.changes]}
                                  for s in report.stacks]}, indent=2) + "\n"


def refused(report: Comparison, allowed: bool) -> bool:
    """An update the service refuses (whatever is allowed), or a new cluster or data loss not allowed."""
    return verdict(report, allowed).refused
