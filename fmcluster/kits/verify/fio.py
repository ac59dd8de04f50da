"""The parsers of fio's output: its JSON (`--output-format=json`, also `json,normal`) and its normal
text report. Pure: the text in, a frozen FioResult out.

A bandwidth is read only where fio wrote it and it agrees with fio's own bytes and time: fio
computes a direction's `bw_bytes` as 1000 x `io_bytes` / `runtime` (ms; fio's stat.c,
add_ddir_status_json) and its normal report's group line as `bw=` over `io=` and `run=` in two
units (show_group_stats), so a figure that contradicts them, a bandwidth that is missing, negative,
not finite, or not a number is a Refusal: the result is not judged, not read as 0.

Sources and details: docs/research-notes.md, "fmcluster/kits/verify/"."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional

from fmcluster.kits.verify.reading import (
    JsonDocument,
    Refusal,
    as_dict,
    as_float,
    as_list,
    json_depth_ok,
    json_documents_at,
    unprefixed_lines,
)

# what fio's own figures may differ by (its integer arithmetic, the normal report's rounding to
# four significant figures, and "io=" printed to three)
_AGREE = 0.01
_AGREE_ROUNDED = 0.05


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
    refused: tuple[Refusal, ...] = ()  # what it does not understand: the result is not judged

    def job(self, name: str) -> Optional[FioJob]:
        return next((j for j in self.jobs if j.name == name), None)

    @property
    def failed(self) -> tuple[FioJob, ...]:
        return tuple(job for job in self.jobs if job.error)


def _agrees(value: float, expected: float, share: float) -> bool:
    return abs(value - expected) <= max(share * abs(expected), 2.0)


def _direction(side: dict[str, object], name: str, direction: str) -> tuple[Optional[float], str]:
    """A direction's bandwidth in bytes/s (`bw_bytes`; fio 2's `bw`, KiB/s, x 1024), or (None, why
    it cannot be read)."""
    key, scale = ("bw_bytes", 1.0) if "bw_bytes" in side else ("bw", 1024.0)
    if key not in side:
        return None, f"fio job {name!r}: its {direction} bandwidth is missing (neither bw_bytes nor bw)"
    value = as_float(side[key])
    if value is None or value < 0:
        return None, f"fio job {name!r}: its {direction} {key} {str(side[key])[:40]!r} is not a bandwidth"
    # fio 3: bw_bytes from io_bytes; fio 2 wrote KiB in both bw and io_bytes
    io_key = "io_bytes" if key == "bw_bytes" or "io_kbytes" not in side else "io_kbytes"
    io, runtime = side.get(io_key), side.get("runtime")
    if io is not None or runtime is not None:
        io_value, runtime_value = as_float(io), as_float(runtime)
        if io_value is None or runtime_value is None or io_value < 0 or runtime_value < 0:
            return None, (f"fio job {name!r}: its {direction} {io_key} {str(io)[:40]!r} and runtime "
                          f"{str(runtime)[:40]!r} are not a size and a time")
        expected = 1000 * io_value / runtime_value if runtime_value else 0.0
        if not _agrees(value, expected, _AGREE):
            return None, (f"fio job {name!r}: its {direction} {key} {value:,.0f} is not its {io_key} over its "
                          f"runtime ({expected:,.0f}): fio writes one from the other")
    return value * scale, ""


def _document(document: JsonDocument, index: int, per_name: dict[str, dict[str, float]],
              groups: dict[tuple[int, int], list[float]], refused: list[Refusal], errors: list[str],
              disks: list[FioDisk]) -> None:
    doc = as_dict(document.value)

    def refuse(why: str) -> None:
        refused.append(Refusal(document.line, f"the fio JSON from this line: {why}"))

    if not json_depth_ok(doc):
        refuse("nests deeper than fio writes")
        return
    if not isinstance(doc["jobs"], list):
        refuse("its jobs are not a list")
        return
    for job in doc["jobs"]:
        if not isinstance(job, dict):
            refuse("a job that is not an object")
            continue
        name = str(job.get("jobname", "?"))[:200]
        group_id = job.get("groupid", 0)
        read, write = job.get("read"), job.get("write")
        if not isinstance(group_id, int) or isinstance(group_id, bool):
            refuse(f"fio job {name!r}: its groupid {str(group_id)[:40]!r} is not a whole number")
            continue
        if not isinstance(read, dict) or not isinstance(write, dict):
            refuse(f"fio job {name!r}: no read and write figures")
            continue
        rbw, why = _direction(read, name, "read")
        wbw, why_write = _direction(write, name, "write")
        if rbw is None or wbw is None:
            refuse(why or why_write)
            continue
        times = [as_float(v) for v in (read.get("runtime"), write.get("runtime"), job.get("job_runtime"))
                 if v is not None]
        error = job.get("error", 0)
        if None in times or not isinstance(error, int) or isinstance(error, bool) or abs(error) > 2 ** 31:
            refuse(f"fio job {name!r}: its runtime or error is not a number fio writes")
            continue
        slot = per_name.setdefault(name, dict.fromkeys(("jobs", "rbw", "wbw", "riops", "wiops", "rt", "err"), 0.0))
        slot["jobs"] += 1
        slot["rbw"] += rbw
        slot["wbw"] += wbw
        slot["riops"] += as_float(read.get("iops")) or 0.0
        slot["wiops"] += as_float(write.get("iops")) or 0.0
        slot["rt"] = max([slot["rt"], *(t for t in times if t is not None)])
        if error != 0:
            errors.append(f"fio job {name}: error {error}")
            slot["err"] = slot["err"] or error
        group = groups.setdefault((index, group_id), [0.0, 0.0])
        group[0] += rbw
        group[1] += wbw
    for disk in map(as_dict, as_list(doc.get("disk_util"))):
        disks.append(FioDisk(str(disk.get("name", "?"))[:200], as_float(disk.get("util"))))


def _mean(values: list[float]) -> float:
    total = sum(values)
    return total / len(values) if values and math.isfinite(total) else (math.inf if values else 0.0)


def parse_fio(text: str) -> FioResult:
    """fio's JSON output: every document in the text (fio's warnings, `Starting N processes` and the
    normal report of `--output-format=json,normal` are skipped). Bandwidth in bytes/s (`bw_bytes`;
    fio 2's `bw`, KiB/s, x 1024). The jobs of one reporting group run at once, so they add up; groups
    (`stonewall`) and documents (the kit's write, then read) run one after the other, so each
    direction is the mean, over the groups that moved data that way, of the group's sum."""
    documents, errors, broken = json_documents_at(text)
    docs = [d for d in documents if isinstance(d.value, dict) and "jobs" in d.value]
    version: Optional[str] = None
    per_name: dict[str, dict[str, float]] = {}
    groups: dict[tuple[int, int], list[float]] = {}  # (document, groupid) -> [read, write]
    disks: list[FioDisk] = []
    refused: list[Refusal] = []
    for index, doc in enumerate(docs):
        value = as_dict(doc.value).get("fio version")
        version = str(value)[:100] if value else version
        _document(doc, index, per_name, groups, refused, errors, disks)
    jobs = tuple(FioJob(name, int(s["jobs"]), s["rbw"], s["wbw"], s["riops"], s["wiops"], int(s["rt"]), int(s["err"]))
                 for name, s in per_name.items())
    reads = [g[0] for g in groups.values() if g[0] > 0]
    writes = [g[1] for g in groups.values() if g[1] > 0]
    if not docs:
        errors.append("no fio JSON document")
    elif not jobs and not refused:
        errors.append("fio ran no jobs")
    return FioResult(version, len(docs), jobs, _mean(reads), _mean(writes), tuple(disks),
                     bool(jobs) and not broken and not refused, tuple([r.text() for r in refused] + errors),
                     tuple(refused))


# fio's normal (text) report (fio's stat.c, show_run_stats): per reporting group, "Run status group N
# (all jobs):" and a line per direction, "  WRITE: bw=1939MiB/s (2033MB/s), 1939MiB/s-1939MiB/s
# (2033MB/s-2033MB/s), io=10.0GiB (10.7GB), run=5281-5281msec" (num2str: 1024-based units "KiB",
# "MiB", ..., 1000-based "kB", "MB", ...); per job "NAME: (groupid=0, jobs=1): err= 0: pid=..."
_FIO_GROUP = re.compile(r"^\s*Run status group (\d{1,9}) \(all jobs\):\s*$")
_AMOUNT = r"(\d{1,12}(?:\.\d{1,6})?)((?:[KMGTPE]i|[kMGTPE])?B)"
_FIO_DIRECTION = re.compile(rf"^\s*(READ|WRITE|TRIM): bw={_AMOUNT}/s \({_AMOUNT}/s\), {_AMOUNT}/s-{_AMOUNT}/s "
                            rf"\({_AMOUNT}/s-{_AMOUNT}/s\), io={_AMOUNT} \({_AMOUNT}\), run=(\d{{1,12}})-(\d{{1,12}})"
                            r"msec\s*$")
_FIO_JOB = re.compile(r"^(\S+): \(groupid=(\d{1,9}), jobs=(\d{1,9})\): err=\s*(\d{1,9})")
FIO_TEXT = re.compile(r"^\s*Run status group \d+ \(all jobs\):|^\S+: \(groupid=\d+, jobs=\d+\): err=", re.MULTILINE)
_BYTES = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
          "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3, "Ti": 1024 ** 4, "Pi": 1024 ** 5, "Ei": 1024 ** 6}


def _bytes(value: str, unit: str) -> float:
    return float(value) * _BYTES[unit[:-1]]


def _group_line(line: str) -> tuple[Optional[tuple[str, float]], str]:
    """A direction line of a group's report: (direction, bytes/s), or (None, why not)."""
    found = _FIO_DIRECTION.match(line)
    if found is None:
        if re.match(r"^\s*MIXED:", line):
            return None, "a MIXED line (unified_rw_reporting): fmcluster judges reads and writes apart"
        return None, f"not a line of fio's group report: {line.strip()[:120]!r}"
    values = found.groups()
    side = values[0]
    bw, bw_alt = _bytes(*values[1:3]), _bytes(*values[3:5])
    io = _bytes(*values[13:15])
    slowest = int(values[18])
    if not _agrees(bw, bw_alt, _AGREE_ROUNDED):
        return None, f"its {side} bw= figures disagree ({values[1]}{values[2]}/s, {values[3]}{values[4]}/s)"
    if slowest and not _agrees(bw, 1000 * io / slowest, _AGREE_ROUNDED):
        return None, f"its {side} bw= is not its io= over its run= (fio writes one from the other)"
    return (side, bw), ""


def parse_fio_text(text: str) -> FioResult:
    """fio's normal report: the groups' READ and WRITE bandwidths (bytes/s; each direction the mean
    over the groups that moved data that way, as parse_fio), the jobs' names and errors. Every line
    of a group's report is a direction line fio prints, its figures agreeing with each other."""
    errors: list[str] = []
    refused: list[Refusal] = []
    groups: dict[int, list[Optional[float]]] = {}
    current: Optional[int] = None
    names: dict[str, dict[str, int]] = {}
    version = None
    for at, line in enumerate(unprefixed_lines(text), 1):
        if (found := re.match(r"^fio-(\d\S*)\s*$", line.strip())) is not None:
            version = "fio-" + found.group(1)[:40]
        if current is not None and line.startswith((" ", "\t")) and line.strip():
            direction, why = _group_line(line)
            if direction is None:
                refused.append(Refusal(at, why))
            elif direction[0] != "TRIM":
                index = 0 if direction[0] == "READ" else 1
                if groups[current][index] is not None:
                    refused.append(Refusal(at, f"group {current}'s {direction[0]} line twice"))
                else:
                    groups[current][index] = direction[1]
            continue
        current = None
        if (group := _FIO_GROUP.match(line)) is not None:
            current = int(group.group(1))
            if current in groups:
                refused.append(Refusal(at, f"run status group {current} twice"))
                current = None
            else:
                groups[current] = [None, None]
        elif line.startswith("Run status group") or re.match(r"^\S+: \(groupid=", line):
            if (job := _FIO_JOB.match(line)) is None:
                refused.append(Refusal(at, f"a line fio prints otherwise: {line.strip()[:120]!r}"))
                continue
            slot = names.setdefault(job.group(1)[:200], {"jobs": 0, "err": 0})
            slot["jobs"] += int(job.group(3))
            if int(job.group(4)) and not slot["err"]:
                slot["err"] = int(job.group(4))
                errors.append(f"fio job {job.group(1)[:200]}: error {job.group(4)}")
    reads = [g[0] for g in groups.values() if g[0]]
    writes = [g[1] for g in groups.values() if g[1]]
    jobs = tuple(FioJob(name, s["jobs"], 0.0, 0.0, 0.0, 0.0, 0, s["err"]) for name, s in names.items())
    empty = [number for number, group in groups.items() if group == [None, None]]
    if not groups:
        errors.append("no fio run status (the report is cut before its end)")
    elif empty:
        errors.append(f"run status group {empty[0]} has no READ or WRITE line (the report is cut before its end)")
    return FioResult(version, 1 if groups else 0, jobs, _mean(reads), _mean(writes), (),
                     bool(groups) and not empty and not refused, tuple([r.text() for r in refused] + errors),
                     tuple(refused))


def parse_fio_any(text: str) -> FioResult:
    """fio's JSON where the text has any (`--output-format=json` or `json,normal`), else its normal
    report."""
    if re.search(r'"fio version"\s*:|"jobname"\s*:', text):
        return parse_fio(text)
    return parse_fio_text(text)
