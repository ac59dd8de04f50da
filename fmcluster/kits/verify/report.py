"""The report of `fmcluster verify`: its rows, what it serializes to, and its text and JSON
renderings. Pure.

What a result says (a host, a test's message, a file's path) is not trusted: the text rendering
shows its control characters escaped (\\x1b, \\n, as fmcluster's spec errors show a value's), so
an escape sequence in a host name never reaches the terminal; the JSON is strict (no NaN or
Infinity: a figure that is not finite is null, with why)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from typing import Optional

from fmcluster.kits.verify.judging import Verdict, worst
from fmcluster.spec.diagnostics import one_line
from fmcluster.text.table import Columns, fits, paragraph, table_rows

# beside what one_line escapes (C0, DEL, NEL, the line and paragraph separators): the other C1
# controls (0x9b is a CSI on terminals that read 8-bit controls) and the bidirectional overrides
# and isolates, which reorder what a terminal shows
_MORE_ESCAPES = {c: ascii(chr(c))[1:-1] for c in (*range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A))}


def shown(text: str) -> str:
    """Untrusted text as the text report shows it: on one line, its control characters escaped."""
    return one_line(text).translate(_MORE_ESCAPES)


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
    basis: str = ""  # where PASS AT comes from, or why there is none
    ceiling: str = ""  # the path's limit and where it comes from, or why there is none
    unmeasured: str = ""  # why MEASURED is none ("" where there is a figure)


_ROW_FIELDS = tuple(f.name for f in fields(Row) if f.name != "group")


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint of the smoke test (its `smoke-checkpoint` row): its write time (rank 0's, from
    the step's end to the checkpoint whole) and size; reported, not judged."""

    group: str
    node: str
    source: str  # the results file
    step: int
    seconds: float
    bytes: int
    path: str  # where smoke.py wrote it, on the shared file system
    resumed: bool  # a run of the output went on from it
    line: str  # the smoke line that tells it: "checkpoint" (the run that saved it), or "resumed" (the run
    # that read it, where the output of the one that saved it is not there: a pod's logs go with the pod)

    @property
    def bytes_per_s(self) -> Optional[float]:
        return self.bytes / self.seconds if self.seconds > 0 else None

    def as_dict(self) -> dict[str, object]:
        return {"group": self.group, "node": self.node, "source": self.source, "step": self.step,
                "seconds": self.seconds, "bytes": self.bytes, "bytes_per_s": self.bytes_per_s, "path": self.path,
                "resumed": self.resumed, "line": self.line}


@dataclass(frozen=True)
class VerifyReport:
    cluster: str
    rows: tuple[Row, ...]
    error: Optional[str] = None  # the first results file or directory that cannot be read
    judged: int = 0  # the files of which a result was judged
    not_judged: tuple[tuple[str, str], ...] = ()  # (file, why) for each file, or part of one, not judged
    # (file, why) of each result that cannot be judged: a file or directory that cannot be read, a
    # line a parser does not understand ("line N: ..."); any makes the command exit 2
    refused: tuple[tuple[str, str], ...] = ()
    checkpoints: tuple[Checkpoint, ...] = ()  # the smoke test's, as its smoke-checkpoint rows report them

    @property
    def verdict(self) -> Verdict:
        return worst([r.verdict for r in self.rows])

    def as_dict(self) -> dict[str, object]:
        """The report as strict JSON holds it: a figure that is not finite is null, with why."""
        groups: dict[str, list[dict[str, object]]] = {}
        for row in self.rows:
            entry: dict[str, object] = {}
            for key in _ROW_FIELDS:
                value = getattr(row, key)
                if isinstance(value, float) and not math.isfinite(value):
                    value = None
                entry[key] = value.value if isinstance(value, Verdict) else value
            if entry["measured"] is None and not row.unmeasured:
                entry["unmeasured"] = ("no figure" if row.measured is None
                                       else f"not a finite figure ({row.measured})")
            groups.setdefault(row.group, []).append(entry)
        out: dict[str, object] = {
            "cluster": self.cluster, "verdict": self.verdict.value if self.judged > 0 else None,
            "judged": self.judged,
            "groups": {g: {"verdict": worst([Verdict(r["verdict"]) for r in rows]).value,
                           "results": rows} for g, rows in groups.items()},
            "not_judged": [{"file": source, "reason": why} for source, why in self.not_judged],
            "refused": [{"file": source, "reason": why} for source, why in self.refused],
            "checkpoints": [checkpoint.as_dict() for checkpoint in self.checkpoints]}
        if self.error is not None:
            out["error"] = self.error
        return out


def number_text(value: Optional[float]) -> str:
    """A figure as the report writes it: "-" for none, thousands grouped, at most one decimal."""
    return "-" if value is None else f"{value:,.1f}".rstrip("0").rstrip(".")


# only the NODE column narrows, no narrower than 24: a host list breaks after a comma, the path
# of "unknown node (FILE)" after a slash
COLUMNS = Columns(narrow={3: 24}, breaks={3: ",/"})


def render_text(report: VerifyReport) -> str:
    """The verdicts as a table within 100 columns where the cells allow: a long host list wraps
    in its column; under each row the file it comes from (`file: PATH`); where the notes do not
    fit beside the rows, each goes on lines of its own under its row too."""
    table = [("VERDICT", "GROUP", "TEST", "NODE", "MEASURED", "PASS AT")]
    notes = ["NOTE"]
    sources = [""]
    for r in report.rows:
        unit = f" {r.unit}" if r.unit and r.measured is not None else ""
        table.append((r.verdict.value, shown(r.group), shown(r.test), shown(r.node), number_text(r.measured) + unit,
                      number_text(r.pass_at)))
        notes.append(shown(r.note))
        sources.append(shown(r.source))
    noted = [(*row, note) for row, note in zip(table, notes, strict=True)]
    beside = fits(noted, indent="")
    lines = []
    for i, (row, note, source) in enumerate(zip(table_rows(noted if beside else table, indent="", columns=COLUMNS),
                                                notes, sources, strict=True)):
        lines += row + (paragraph(f"file: {source}", "    ", hanging="  ") if source else [])
        lines += paragraph(note, "    ", break_words=True) if i and note and not beside else []
    lines += _not_judged_lines(report)
    counts = {v: sum(1 for r in report.rows if r.verdict is v) for v in Verdict}
    refused = (f"; NOT JUDGED: {len(report.refused)} result{'s' if len(report.refused) > 1 else ''} cannot be "
               "read or understood" if report.refused else "")
    lines.append(f"{shown(report.cluster)}: {report.verdict.value} ({counts[Verdict.PASS]} pass, "
                 f"{counts[Verdict.WARN]} warn, {counts[Verdict.FAIL]} fail){refused}")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _not_judged_lines(report: VerifyReport) -> list[str]:
    """The section of the files not judged: each file, and under it why; the results that cannot
    be judged (refused) first, each line marked so."""
    entries = [(source, "REFUSED " + why) for source, why in report.refused] + [
        entry for entry in report.not_judged if entry not in report.refused]
    if not entries:
        return []
    files = len(dict.fromkeys(source for source, _ in entries))
    lines = [f"NOT JUDGED ({files} file{'s' if files > 1 else ''})"]
    last = None
    for source, why in entries:
        if source != last:
            lines.append("  " + shown(source))
        last = source
        lines += paragraph(shown(why), "    ")
    return lines


def render_json(report: VerifyReport) -> str:
    """Strict JSON (allow_nan=False: as_dict leaves no NaN or infinity)."""
    return json.dumps(report.as_dict(), indent=2, allow_nan=False) + "\n"
