"""The report of `fmcluster verify`: its rows, what it serializes to, and its text and JSON
renderings. Pure."""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import asdict, dataclass
from typing import Optional

from fmcluster.kits.verify.judging import Verdict, worst


@dataclass(frozen=True)
class Row:
    group: str
    test: str
    node: str  # a host, "all" (a run across nodes or a sum), "-" (not run), or "unknown node (FILE)"
    verdict: Verdict
    measured: Optional[float] = None
    pass_at: Optional[float] = None
    warn_at: Optional[float] = None
    unit: str = ""
    note: str = ""
    source: str = ""  # the results file ("a, b": the files of a sum over nodes); "" for a row of no file
    # the figure above which the measurement is impossible on its path (the physical limit plus
    # fmcluster.model.expected.MEASUREMENT_MARGIN); None without a figure
    impossible_above: Optional[float] = None


@dataclass(frozen=True)
class VerifyReport:
    cluster: str
    rows: tuple[Row, ...]
    error: Optional[str] = None  # a results file that cannot be read: nothing judged
    judged: int = 0  # the files of which a result was judged
    not_judged: tuple[tuple[str, str], ...] = ()  # (file, why) for each file, or part of one, not judged

    @property
    def verdict(self) -> Verdict:
        return worst([r.verdict for r in self.rows])

    def as_dict(self) -> dict[str, object]:
        groups: dict[str, list[dict[str, object]]] = {}
        for row in self.rows:
            groups.setdefault(row.group, []).append({k: (v.value if isinstance(v, Verdict) else v)
                                                     for k, v in asdict(row).items() if k != "group"})
        judged = self.error is None and self.judged > 0
        out: dict[str, object] = {
            "cluster": self.cluster, "verdict": self.verdict.value if judged else None, "judged": self.judged,
            "groups": {g: {"verdict": worst([Verdict(r["verdict"]) for r in rows]).value,
                           "results": rows} for g, rows in groups.items()},
            "not_judged": [{"file": source, "reason": why} for source, why in self.not_judged]}
        if self.error is not None:
            out["error"] = self.error
        return out


def number_text(value: Optional[float]) -> str:
    """A figure as the report writes it: "-" for none, thousands grouped, at most one decimal."""
    return "-" if value is None else f"{value:,.1f}".rstrip("0").rstrip(".")


WIDTH = 100  # the text table's lines fit a terminal or a review tool this wide
NARROWEST_NODE = 24  # a host list wraps after a comma no narrower than this


def _host_lines(cell: str, width: int) -> list[str]:
    """A NODE cell on lines of at most `width`, a host list broken after a comma, "unknown node
    (FILE)" at its spaces (one name longer than that stays whole)."""
    lines = [""]
    for piece in re.findall(r"[^, ]+[, ]?|[, ]", cell):
        if lines[-1] and len(lines[-1]) + len(piece.rstrip(" ")) > width:
            lines[-1] = lines[-1].rstrip(" ")
            lines.append(piece)
        else:
            lines[-1] += piece
    return [line.rstrip(" ") for line in lines]


def render_text(report: VerifyReport) -> str:
    """The verdicts as a table within WIDTH columns where the cells allow: a long host list wraps
    in its column; under each row the file it comes from (`file: PATH`); where the notes do not
    fit beside the rows, each goes on lines of its own under its row too."""
    table = [("VERDICT", "GROUP", "TEST", "NODE", "MEASURED", "PASS AT")]
    notes = ["NOTE"]
    sources = [""]
    for r in report.rows:
        unit = f" {r.unit}" if r.unit and r.measured is not None else ""
        table.append((r.verdict.value, r.group, r.test, r.node, number_text(r.measured) + unit, number_text(r.pass_at)))
        notes.append(r.note)
        sources.append(r.source)
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    node = table[0].index("NODE")
    room = WIDTH - 2 * (len(widths) - 1) - sum(w for i, w in enumerate(widths) if i != node)
    widths[node] = min(widths[node], max(room, NARROWEST_NODE))
    beside = all(sum(widths) + 2 * len(widths) + len(note) <= WIDTH for note in notes)
    lines = []
    for row, note, source in zip(table, notes, sources, strict=True):
        cells = [_host_lines(cell, w) if i == node else [cell]
                 for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
        height = max(map(len, cells))
        rows = ["  ".join((cell[k] if k < len(cell) else "").ljust(w) for cell, w in zip(cells, widths, strict=True))
                for k in range(height)]
        if beside:
            rows[0] += "  " + note
        if source:
            rows += textwrap.wrap(f"file: {source}", WIDTH, initial_indent="    ", subsequent_indent="      ",
                                  break_on_hyphens=False, break_long_words=False)
        if not beside and note and row is not table[0]:
            rows += textwrap.wrap(note, WIDTH, initial_indent="    ", subsequent_indent="    ",
                                  break_on_hyphens=False)
        lines += rows
    lines += _not_judged_lines(report)
    counts = {v: sum(1 for r in report.rows if r.verdict is v) for v in Verdict}
    lines.append(f"{report.cluster}: {report.verdict.value} ({counts[Verdict.PASS]} pass, {counts[Verdict.WARN]} "
                 f"warn, {counts[Verdict.FAIL]} fail)")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _not_judged_lines(report: VerifyReport) -> list[str]:
    """The section of the files not judged: each file, and under it why."""
    if not report.not_judged:
        return []
    lines = [f"NOT JUDGED ({len(report.not_judged)} file{'s' if len(report.not_judged) > 1 else ''})"]
    for source, why in report.not_judged:
        lines.append("  " + source)
        lines += textwrap.wrap(why, WIDTH, initial_indent="    ", subsequent_indent="    ",
                               break_on_hyphens=False, break_long_words=False)
    return lines


def render_json(report: VerifyReport) -> str:
    return json.dumps(report.as_dict(), indent=2) + "\n"
