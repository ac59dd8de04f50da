"""`fmcluster verify SPEC RESULTS...` as a command of the CLI's shape: run (the results files read,
then judged), render (stdout, stderr) and exit_code. The only module of the package that reads
files."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from typing import TYPE_CHECKING, Iterable, Optional

from fmcluster.kits.verify.judging import Verdict
from fmcluster.kits.verify.report import VerifyReport, render_json, render_text, shown
from fmcluster.kits.verify.verdicts import judge_results

if TYPE_CHECKING:
    from fmcluster.model.cluster import ClusterModel


FORMATS = ("text", "json")
MAX_RESULT_BYTES = 64 * 1024 * 1024  # a results file larger than this is not read
_TOO_LARGE = "over the"


def _walk(path: str, unreadable: list[tuple[str, str]]) -> list[str]:
    """A file, or every file under a directory (recursively, in name order, through links to
    directories, each directory once); a directory that cannot be listed goes to `unreadable`
    with why."""
    try:
        info = os.stat(path)
    except OSError:
        return [path]  # _read says why
    if not stat.S_ISDIR(info.st_mode):
        return [path]
    found: list[str] = []
    visited: set[tuple[int, int]] = set()
    stack = [path]
    while stack:
        directory = stack.pop()
        try:
            key = (os.stat(directory).st_dev, os.stat(directory).st_ino)
            if key in visited:
                continue  # a link back to a directory already read
            visited.add(key)
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError as exc:
            unreadable.append((directory, f"a directory that cannot be read: {exc.strerror or exc}"))
            continue
        subdirectories = []
        for entry in entries:
            try:
                is_dir = entry.is_dir()  # through a link
            except OSError:
                is_dir = False
            if is_dir:
                subdirectories.append(entry.path)
            else:
                found.append(entry.path)
        stack.extend(reversed(subdirectories))
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
            return None, (f"{info.st_size / 2 ** 20:,.1f} MiB, {_TOO_LARGE} {MAX_RESULT_BYTES // 2 ** 20} MiB a "
                          "result is read to: not read")
        data = handle.read(MAX_RESULT_BYTES + 1)
    if len(data) > MAX_RESULT_BYTES:
        return None, f"{_TOO_LARGE} {MAX_RESULT_BYTES // 2 ** 20} MiB a result is read to (it grew): not read"
    return data.decode("utf-8", errors="replace"), ""


def run(model: ClusterModel, paths: Iterable[str]) -> VerifyReport:
    """`fmcluster verify SPEC RESULTS...`: the results files (and every file under a results
    directory) read and judged; what is not a regular file is listed, not judged; a file or
    directory that cannot be read, or is too large to read, is listed as a result not judged
    (refused: the command exits 2), and the rest is judged all the same."""
    files: dict[str, str] = {}
    skipped: list[tuple[str, str]] = []
    unreadable: list[tuple[str, str]] = []
    for given in paths:
        for path in _walk(given, unreadable):
            try:
                text, why = _read(path)
            except OSError as exc:
                unreadable.append((path, f"cannot read it: {exc.strerror or exc}"))
                continue
            if text is None and why.startswith(_TOO_LARGE):
                unreadable.append((path, why))
            elif text is None:
                skipped.append((path, why))
            else:
                files[path] = text
    report = judge_results(model, files, skipped, unreadable)
    if unreadable:
        first, why = unreadable[0]
        report = replace(report, error=f"cannot read {first} ({why})")
    return report


def render(report: VerifyReport, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr). JSON: the object on stdout whatever the outcome (nothing judged, results
    refused); text: the table with its section of the files not judged, or nothing on stdout and
    why on stderr when nothing was judged. The results refused (a file that cannot be read, a line
    not understood) are said on stderr too, each with why."""
    refused = "".join(f"fmcluster verify: {shown(source)}: not judged: {shown(why)}\n"
                      for source, why in report.refused)
    notes = refused + "".join(f"fmcluster verify: {shown(source)}: not judged: {shown(why)}\n"
                              for source, why in report.not_judged if (source, why) not in report.refused)
    if not report.judged:
        err = notes + "fmcluster verify: nothing judged: no file holds a result fmcluster recognizes\n"
        return (render_json(report) if fmt == "json" else ""), err
    if fmt == "json":
        return render_json(report), notes
    return render_text(report), refused


def exit_code(report: VerifyReport) -> int:
    """0 when at least one result was judged, none failed and every result was read and
    understood; 1 when one failed; 2 when a result could not be judged (a file or directory that
    cannot be read, a line a parser does not understand) or nothing was (no file holds a result),
    whatever else failed."""
    if report.refused or report.error is not None or not report.judged:
        return 2
    return 1 if report.verdict is Verdict.FAIL else 0
