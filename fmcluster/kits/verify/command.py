"""`fmcluster verify SPEC RESULTS...` as a command of the CLI's shape: run (the results files read,
then judged), render (stdout, stderr) and exit_code. The only module of the package that reads
files."""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Iterable, Optional

from fmcluster.kits.verify.judging import Verdict
from fmcluster.kits.verify.report import VerifyReport, render_json, render_text
from fmcluster.kits.verify.verdicts import judge_results

if TYPE_CHECKING:
    from fmcluster.model.cluster import ClusterModel


FORMATS = ("text", "json")
MAX_RESULT_BYTES = 64 * 1024 * 1024  # a results file larger than this is not read


def _walk(path: str) -> list[str]:
    """A file, or every file under a directory (recursively, in name order)."""
    if not os.path.isdir(path):
        return [path]
    found: list[str] = []
    for root, dirs, names in os.walk(path):
        dirs.sort()
        found.extend(os.path.join(root, name) for name in sorted(names))
    return found


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"))


def _read(path: str) -> tuple[Optional[str], str]:
    """(text, "") of a regular file, or (None, why it is not read). Only a regular file is opened
    (stat first, so a FIFO, a socket or a device is never opened: opening a FIFO blocks until a
    writer comes), non-blocking and checked again once open; one over MAX_RESULT_BYTES is not read.
    OSError where the file cannot be stat'ed or read."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        return None, f"{kind}, not a regular file: not opened"
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):  # replaced between the stat and the open
            return None, "not a regular file once opened: not read"
        if info.st_size > MAX_RESULT_BYTES:
            return None, (f"{info.st_size / 2 ** 20:,.1f} MiB, over the {MAX_RESULT_BYTES // 2 ** 20} MiB a "
                          "result is read to: not read")
        data = handle.read(MAX_RESULT_BYTES + 1)
    if len(data) > MAX_RESULT_BYTES:
        return None, f"over the {MAX_RESULT_BYTES // 2 ** 20} MiB a result is read to (it grew): not read"
    return data.decode("utf-8", errors="replace"), ""


def run(model: ClusterModel, paths: Iterable[str]) -> VerifyReport:
    """`fmcluster verify SPEC RESULTS...`: the results files (and every file under a results
    directory) read and judged; what is not a regular file, or too large, is listed, not judged."""
    files: dict[str, str] = {}
    skipped: list[tuple[str, str]] = []
    for given in paths:
        for path in _walk(given):
            try:
                text, why = _read(path)
            except OSError as exc:
                return VerifyReport(model.name, (), error=f"cannot read {path}: {exc.strerror or exc}",
                                    not_judged=tuple(skipped))
            if text is None:
                skipped.append((path, why))
            else:
                files[path] = text
    return judge_results(model, files, skipped)


def render(report: VerifyReport, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr). JSON: the object on stdout whatever the outcome (an error, nothing judged);
    text: the table with its section of the files not judged, or nothing on stdout and why on
    stderr when nothing was judged."""
    notes = "".join(f"fmcluster verify: {source}: not judged: {why}\n" for source, why in report.not_judged)
    if report.error is not None:
        err = notes + f"fmcluster verify: {report.error}\n"
        return (render_json(report) if fmt == "json" else ""), err
    if not report.judged:
        err = notes + "fmcluster verify: nothing judged: no file holds a result fmcluster recognizes\n"
        return (render_json(report) if fmt == "json" else ""), err
    if fmt == "json":
        return render_json(report), notes
    return render_text(report), ""


def exit_code(report: VerifyReport) -> int:
    """0 when at least one result was judged and none failed; 1 when one failed; 2 when nothing could
    be judged (a results file that cannot be read, or none that holds a result)."""
    if report.error is not None or not report.judged:
        return 2
    return 1 if report.verdict is Verdict.FAIL else 0
