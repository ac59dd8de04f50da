"""preflight's report, and what `fmcluster preflight` prints of it: a table of STATUS, CHECK and
RESULT within 100 columns (--format text, laid out by fmcluster.text.table), or one JSON object
(--format json: what `fmcluster plan --preflight` takes back); the exit code."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from fmcluster.deploy.preflight.context import FAIL, PASS, WARN, Check
from fmcluster.deploy.preflight.shapes import ReadReservation
from fmcluster.text.table import Columns, noted_table

FORMATS = ("text", "json")


@dataclass(frozen=True)
class PreflightReport:
    cluster: str
    region: str
    checks: tuple[Check, ...] = ()
    reservations: tuple[ReadReservation, ...] = ()  # what it read of them, by id
    error: str | None = None  # nothing could be checked (no usable credentials)
    hint: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not any(c.status == FAIL for c in self.checks)


# a check's result wraps in its column, no narrower than 40; its hint hangs under it
COLUMNS = Columns(narrow={2: 40})


def render_text(report: PreflightReport) -> str:
    """A line per check within 100 columns: its result and hint wrap in the RESULT column."""
    checks = report.checks
    rows = [("STATUS", "CHECK", "RESULT")] + [(c.status.upper(), c.name, c.reason) for c in checks]
    hints = [""] + [f"hint: {c.hint}" if c.hint else "" for c in checks]
    lines = [f"fmcluster preflight: {report.cluster} in {report.region}",
             *noted_table(rows, hints, columns=COLUMNS, under=2, hanging="      ")]
    counts = {s: sum(c.status == s for c in checks) for s in (PASS, WARN, FAIL)}
    lines.append(f"{len(checks)} checks: {counts[PASS]} pass, {counts[WARN]} warn, {counts[FAIL]} fail")
    return "\n".join(lines) + "\n"


def render_json(report: PreflightReport) -> str:
    if report.error is not None:  # a pipeline reading stdout gets JSON whatever happened
        return json.dumps({"cluster": report.cluster, "region": report.region, "ok": False, "error": report.error,
                           "hint": report.hint, "checks": [], "reservations": []}, indent=2) + "\n"
    return json.dumps({"cluster": report.cluster, "region": report.region, "ok": report.ok,
                       "checks": [asdict(c) for c in report.checks], "reservations": list(report.reservations)},
                      indent=2) + "\n"


def render(report: PreflightReport, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr): the table (or JSON); a run that checked nothing says why on stderr."""
    err = f"error: {report.error}\n  hint: {report.hint}\n" if report.error is not None else ""
    if fmt == "json":
        return render_json(report), err
    return ("" if report.error is not None else render_text(report)), err


def exit_code(report: PreflightReport) -> int:
    """1 when a check fails or nothing can be checked."""
    return 0 if report.ok else 1
