"""preflight's report, and what `fmcluster preflight` prints of it: a table of STATUS, CHECK and
RESULT within WIDTH columns (--format text), or one JSON object (--format json: what `fmcluster
plan --preflight` takes back); the exit code."""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import asdict, dataclass

from fmcluster.deploy.preflight.context import FAIL, PASS, WARN, Check
from fmcluster.deploy.preflight.shapes import ReadReservation

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


WIDTH = 100  # the text table's lines fit a terminal or a review tool this wide
NARROWEST_RESULT = 40  # the RESULT column wraps no narrower than this


class _Wrapper(textwrap.TextWrapper):
    """textwrap that breaks a word too long for a line after a `/` or `:` (paths, ARNs) before
    it breaks it anywhere."""

    def _split(self, text: str) -> list[str]:
        chunks = super()._split(text)
        return [piece for chunk in chunks
                for piece in (re.split(r"(?<=[/:])", chunk) if len(chunk) > self.width else [chunk]) if piece]


def render_text(report: PreflightReport) -> str:
    """A line per check within WIDTH columns: its result and hint wrap in the RESULT column."""
    checks = report.checks
    rows = [("STATUS", "CHECK", "RESULT")] + [(c.status.upper(), c.name, c.reason) for c in checks]
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    column = 6 + widths[0] + widths[1]
    room = max(WIDTH - column, NARROWEST_RESULT)
    result = _Wrapper(room, break_on_hyphens=False)
    hinted = _Wrapper(room, break_on_hyphens=False, subsequent_indent="      ")
    lines = [f"fmcluster preflight: {report.cluster} in {report.region}"]
    for i, (status, name, reason) in enumerate(rows):
        first, *more = result.wrap(reason) or [""]
        lines.append(f"  {status.ljust(widths[0])}  {name.ljust(widths[1])}  {first}".rstrip())
        lines += [" " * column + line for line in more]
        hint = checks[i - 1].hint if i else None
        if hint:
            lines += [" " * column + line for line in hinted.wrap(f"hint: {hint}")]
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
