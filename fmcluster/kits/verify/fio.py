"""The parsers of fio's output: its JSON (`--output-format=json`, also `json,normal`) and its normal
text report. Pure: the text in, a frozen FioResult out.

Sources and details: docs/research-notes.md, "fmcluster/kits/verify/"."""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Optional

from fmcluster.kits.verify.reading import as_dict, as_list, json_documents, unprefixed_lines


@dataclass(frozen=True)
class FioJob:
    name: str
    jobs: int  # fio jobs of that name (numjobs without group_reporting: one each)
    read_bw: float  # bytes/s, summed over the jobs of the name
    write_bw: float
    read_iops: float
    write_iops: float
    runtime_ms: int  # the longest
    error: int  # the first non-zero error of the jobs, else 0


@dataclass(frozen=True)
class FioDisk:
    name: str
    util: Optional[float]  # percent


@dataclass(frozen=True)
class FioResult:
    version: Optional[str]
    documents: int
    jobs: tuple[FioJob, ...]  # per job name
    read_bw: float  # bytes/s: see parse_fio
    write_bw: float
    disks: tuple[FioDisk, ...]
    complete: bool
    errors: tuple[str, ...]

    def job(self, name: str) -> Optional[FioJob]:
        return next((j for j in self.jobs if j.name == name), None)


def _direction_bw(side: dict[str, object]) -> float:
    value = side.get("bw_bytes")
    if isinstance(value, (int, float)):
        return float(value)
    kib = side.get("bw")  # fio before 3.x: KiB/s only
    return float(kib) * 1024 if isinstance(kib, (int, float)) else 0.0


def _float(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0


def parse_fio(text: str) -> FioResult:
    """fio's JSON output: every document in the text (fio's warnings, `Starting N processes` and the
    normal report of `--output-format=json,normal` are skipped). Bandwidth in bytes/s (`bw_bytes`;
    fio 2's `bw`, KiB/s, x 1024). The jobs of one reporting group run at once, so they add up; groups
    (`stonewall`) and documents (the kit's write, then read) run one after the other, so each
    direction is the mean, over the groups that moved data that way, of the group's sum."""
    documents, errors, broken = json_documents(text)
    docs = [as_dict(d) for d in documents if isinstance(d, dict) and "jobs" in d]
    version: Optional[str] = None
    per_name: dict[str, dict[str, float]] = {}
    groups: dict[tuple[int, object], list[float]] = {}  # (document, groupid) -> [read, write]
    disks: list[FioDisk] = []
    for index, doc in enumerate(docs):
        version = str(doc.get("fio version")) if doc.get("fio version") else version
        for job in map(as_dict, as_list(doc.get("jobs"))):
            name = str(job.get("jobname", "?"))
            read, write = as_dict(job.get("read")), as_dict(job.get("write"))
            rbw, wbw = _direction_bw(read), _direction_bw(write)
            slot = per_name.setdefault(name, dict.fromkeys(("jobs", "rbw", "wbw", "riops", "wiops", "rt", "err"), 0.0))
            slot["jobs"] += 1
            slot["rbw"] += rbw
            slot["wbw"] += wbw
            slot["riops"] += _float(read.get("iops"))
            slot["wiops"] += _float(write.get("iops"))
            slot["rt"] = max(slot["rt"], _float(read.get("runtime")), _float(write.get("runtime")),
                             _float(job.get("job_runtime")))
            error = job.get("error")
            if isinstance(error, int) and error != 0:
                errors.append(f"fio job {name}: error {error}")
                slot["err"] = slot["err"] or error
            group = groups.setdefault((index, job.get("groupid")), [0.0, 0.0])
            group[0] += rbw
            group[1] += wbw
        for disk in map(as_dict, as_list(doc.get("disk_util"))):
            util = disk.get("util")
            disks.append(FioDisk(str(disk.get("name", "?")), float(util) if isinstance(util, (int, float)) else None))
    jobs = tuple(FioJob(name, int(s["jobs"]), s["rbw"], s["wbw"], s["riops"], s["wiops"], int(s["rt"]), int(s["err"]))
                 for name, s in per_name.items())
    reads = [g[0] for g in groups.values() if g[0] > 0]
    writes = [g[1] for g in groups.values() if g[1] > 0]
    if not docs:
        errors.append("no fio JSON document")
    elif not jobs:
        errors.append("fio ran no jobs")
    return FioResult(version, len(docs), jobs, statistics.fmean(reads) if reads else 0.0,
                     statistics.fmean(writes) if writes else 0.0, tuple(disks), bool(jobs) and not broken,
                     tuple(errors))


# fio's normal (text) report (fio's stat.c, show_run_stats): per reporting group, "Run status group N
# (all jobs):" and a line per direction, "  WRITE: bw=1939MiB/s (2033MB/s), 1939MiB/s-1939MiB/s
# (2033MB/s-2033MB/s), io=10.0GiB (10.7GB), run=5281-5281msec"; per job "NAME: (groupid=0, jobs=1):
# err= 0: pid=..."
_FIO_GROUP = re.compile(r"^\s*Run status group (\d+) \(all jobs\):")
_FIO_DIRECTION = re.compile(r"^\s*(READ|WRITE|TRIM):\s*bw=([0-9.]+)\s*([KMGTP]?i?B)/s")
_FIO_JOB = re.compile(r"^(\S+): \(groupid=(\d+), jobs=(\d+)\): err=\s*(\d+)")
FIO_TEXT = re.compile(r"^\s*Run status group \d+ \(all jobs\):|^\S+: \(groupid=\d+, jobs=\d+\): err=", re.MULTILINE)
_BYTES = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15,
          "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3, "TiB": 1024 ** 4, "PiB": 1024 ** 5}


def parse_fio_text(text: str) -> FioResult:
    """fio's normal report: the groups' READ and WRITE bandwidths (bytes/s; each direction the mean
    over the groups that moved data that way, as parse_fio), the jobs' names and errors."""
    errors: list[str] = []
    groups: dict[int, list[float]] = {}
    current: Optional[int] = None
    names: dict[str, dict[str, int]] = {}
    version = None
    for line in unprefixed_lines(text):
        if (found := re.match(r"^fio-(\d\S*)\s*$", line.strip())) is not None:
            version = "fio-" + found.group(1)
        if (job := _FIO_JOB.match(line)) is not None:
            slot = names.setdefault(job.group(1), {"jobs": 0, "err": 0})
            slot["jobs"] += int(job.group(3))
            if int(job.group(4)) and not slot["err"]:
                slot["err"] = int(job.group(4))
                errors.append(f"fio job {job.group(1)}: error {job.group(4)}")
        elif (group := _FIO_GROUP.match(line)) is not None:
            current = int(group.group(1))
            groups.setdefault(current, [0.0, 0.0])
        elif current is not None and (direction := _FIO_DIRECTION.match(line)) is not None:
            side, value, unit = direction.groups()
            if side != "TRIM" and unit in _BYTES:
                groups[current][0 if side == "READ" else 1] += float(value) * _BYTES[unit]
    reads = [g[0] for g in groups.values() if g[0] > 0]
    writes = [g[1] for g in groups.values() if g[1] > 0]
    jobs = tuple(FioJob(name, s["jobs"], 0.0, 0.0, 0.0, 0.0, 0, s["err"]) for name, s in names.items())
    if not groups:
        errors.append("no fio run status (the report is cut before its end)")
    return FioResult(version, 1 if groups else 0, jobs, statistics.fmean(reads) if reads else 0.0,
                     statistics.fmean(writes) if writes else 0.0, (), bool(groups), tuple(errors))


def parse_fio_any(text: str) -> FioResult:
    """fio's JSON where the text has any (`--output-format=json` or `json,normal`), else its normal
    report."""
    if re.search(r'"fio version"\s*:|"jobname"\s*:', text):
        return parse_fio(text)
    return parse_fio_text(text)
