"""The parser of NVIDIA nccl-tests' stdout (`all_reduce_perf` and every `*_perf`): its table, summary,
rank lines and NCCL's INFO lines, each run of a text on its own. Pure: the text in, frozen
NcclResults out.

It refuses what it does not understand: a line inside a run's table (from its column header to
its `# Avg bus bandwidth` line) is a row of the header's columns, NCCL's own log line, a comment
nccl-tests prints there, or a failure; anything else is a Refusal, and the run is not judged.
The formats are nccl-tests' own (NVIDIA/nccl-tests src/util.cu and, before 2.14, src/common.cu):
a row is `%12li  %12li  %8s  %6s  %6s` (size, count, type, redop, root) and per side (out of
place, in place) the time, algbw and busbw of getFloatStr (`%.2f`, `%.1f`, `%.0f`, else `%.1e`)
and `#wrong` as `%6g` of a count (so 16,777,216 wrong elements print `1.67772e+07`), or `N/A`
without checking; old layouts have `error` (`%5.0le`, the largest deviation) instead of `#wrong`,
no `root` or no `redop` column; newer ones may add `copybw`, the per-iteration columns (`i_min`,
`i_max`, `i_p99`, `i_cv%`) and a timestamp (`%Y-%m-%d %H:%M:%S`, two words).

Sources and details: docs/research-notes.md, "fmcluster/kits/verify/"."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Optional

from fmcluster.kits.verify.reading import Refusal, number, unprefixed_lines, whole, worst_run

NCCL_OPERATIONS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv",
                   "scatter", "gather", "hypercube")
_TYPE_BYTES = {"int8": 1, "uint8": 1, "char": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "f8e4m3": 1, "f8e5m2": 1,
               "half": 2, "float16": 2, "bfloat16": 2, "bf16": 2, "fp16": 2,
               "float": 4, "float32": 4, "int32": 4, "uint32": 4, "int": 4,
               "double": 8, "float64": 8, "int64": 8, "uint64": 8}
_REDUCTIONS = ("sum", "prod", "max", "min", "avg", "premulsum")
_NCCL_RANK = re.compile(r"^Rank\s+(\d{1,9})(?:\s+Group\s+(\d{1,9}))?(?:\s+Pid\s+(\d{1,9}))?\s+on\s+(\S+)\s+"
                        r"device\s+(\d{1,9})(?:\s+\[([^\]]*)\])?\s*(.*)$")
_NCCL_BINARY = re.compile(r"\b([a-z][a-z_]*?)_perf(?:_mpi)?\b")
_NCCL_FAILURE = re.compile(r"Test (?:NCCL |CUDA )?failure|NCCL failure|unhandled (?:system|cuda) error|"
                           r"Test timeout|^(?:srun|slurmstepd): error:|mpirun noticed|Primary job +terminated|"
                           r"exited on signal|Segmentation fault|Bus error|core dumped", re.IGNORECASE)
# One launcher error that is not a failure of the run: a connection to srun's message socket that
# brought no message (Slurm's src/common/eio.c, eio_message_socket_accept: it logs the receive error,
# drops that connection and serves the next). A busy node or network can leave one; slurmstepd sends
# srun's messages and waits for a reply, retrying (src/slurmd/slurmstepd/mgr.c, _send_srun_resp_msg),
# and a message lost for good still shows as a failure (a task's exit status, a step that times out, a
# table cut short). Any other srun error, "Error on msg accept socket" included, stays a failure.
_SRUN_DROPPED_CONNECTION = re.compile(r"^srun: error: eio_message_socket_accept: slurm_receive_msg\[[^\]]*\]: ")
# NCCL's own log lines ("HOST:PID:TID [DEV] NCCL INFO ...", WARN, TRACE) and libfabric's
# ("libfabric:PID:TIME::efa:..."): any rank may print them at any time, the table's included
_NCCL_LOG = re.compile(r"\bNCCL (?:INFO|WARN|TRACE)\b|^libfabric:\d+:")
_ROW_LIKE = re.compile(r"^\s*\d+\s+\d+\s+[A-Za-z_]\w*\s")
_PLAIN_VERSION = re.compile(r"NCCL version (\S+)")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VERSION = re.compile(r"nccl-tests version (\S+)(?: nccl-headers=(\d{1,9}))?(?: nccl-library=(\d{1,9}))?\s*")
_OUT_OF_BOUNDS = re.compile(r"Out of bounds values\s*:\s*(\d{1,10})\s+(OK|FAILED)\s*")
_AVERAGE = re.compile(r"Avg bus bandwidth\s*:\s*(\S+)(?:\s+(OK|FAILED))?\s*")
_SIDE_HEADING = re.compile(r"out-of-place(?: \(\+ per-iteration\))?\s+in-place(?: \(\+ per-iteration\))?")
_RUN_START = ("nccl-tests version", "Collective test starting:", "nThread ", "Using devices")
_AFTER_TABLE = ("Collective test concluded:", "GPU memory usage", "error:")
_TIMESTAMP = (re.compile(r"\d{4}-\d\d-\d\d"), re.compile(r"\d\d:\d\d:\d\d"))
_SIDE_COLUMNS = ("algbw", "busbw", "copybw", "#wrong", "error", "i_min", "i_max", "i_p99", "i_cv%")


@dataclass(frozen=True)
class NcclRank:
    rank: int
    host: str
    device: int
    bus_id: str  # "0000:04:00" or "0x10"
    name: str  # the GPU's name
    group: Optional[int] = None
    pid: Optional[int] = None


@dataclass(frozen=True)
class NcclTiming:
    time_us: Optional[float]
    algbw: Optional[float]  # GB/s
    busbw: Optional[float]  # GB/s
    wrong: Optional[float]  # "#wrong", a count printed with %g (None: "N/A", or old layouts' `error` column)
    error: Optional[float] = None  # old layouts: the largest error of the results


@dataclass(frozen=True)
class NcclRow:
    size: int  # bytes
    count: int  # elements
    type: str
    redop: str
    root: Optional[int]  # None in layouts without the column
    out_of_place: NcclTiming
    in_place: NcclTiming
    line: int = field(default=0, compare=False)  # in the text parsed


@dataclass(frozen=True)
class NcclResult:
    operation: Optional[str]  # all_reduce, all_gather, ... (None: not found)
    operation_from: str  # "header" (# Collective test starting), "binary" (a *_perf name), "table", ""
    version: Optional[str]  # nccl-tests' own version (new layouts)
    nccl_version: Optional[str]  # "2.9.9+cuda11.2" (NCCL_DEBUG=INFO or new headers)
    ranks: tuple[NcclRank, ...]
    rows: tuple[NcclRow, ...]
    avg_busbw: Optional[float]  # "# Avg bus bandwidth"
    out_of_bounds: Optional[int]  # "# Out of bounds values : N OK|FAILED"
    network: Optional[str]  # "AWS Libfabric", "Libfabric", "Socket", "IB" (NCCL INFO Using network ...)
    ofi_provider: Optional[str]  # "efa", "tcp;ofi_rxm" (NET/OFI Selected provider is ...)
    complete: bool  # the table and both summary lines are there
    errors: tuple[str, ...]
    refused: tuple[Refusal, ...] = ()  # lines of the run it does not understand: the run is not judged
    failures: tuple[str, ...] = ()  # the failure lines of the run (a test, NCCL or launcher failure)
    first_line: int = 1  # the run's first line in the text parsed
    runs: int = 1  # the runs of the text (parse_nccl_tests of several: the worst of them is returned)

    @property
    def hosts(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for rank in self.ranks:
            seen.setdefault(rank.host, None)
        return tuple(seen)

    @property
    def largest(self) -> Optional[NcclRow]:
        return max(self.rows, key=lambda row: row.size) if self.rows else None

    @property
    def busbw_out_of_place(self) -> Optional[float]:
        """busbw at the largest size, out of place (GB/s)."""
        return self.largest.out_of_place.busbw if self.largest else None

    @property
    def busbw_in_place(self) -> Optional[float]:
        return self.largest.in_place.busbw if self.largest else None

    @property
    def busbw(self) -> Optional[float]:
        """The better of the two at the largest size: what the kit's NCCL figures are held to."""
        found = [v for v in (self.busbw_out_of_place, self.busbw_in_place) if v is not None]
        return max(found) if found else None

    @property
    def peak_busbw(self) -> Optional[float]:
        """The highest busbw of any row, either side (infinite where one is not finite, NaN
        included): what is held to the path's limit, every size being a measurement of that path."""
        values = [t.busbw for row in self.rows for t in (row.out_of_place, row.in_place) if t.busbw is not None]
        if any(not math.isfinite(v) for v in values):
            return math.inf
        return max(values, default=None)

    @property
    def wrong(self) -> float:
        """Every #wrong of the table, as their absolute values (a negative count is no count: it
        cannot cancel a positive one), and the summary's out-of-bounds count: 0 when healthy."""
        total = sum(abs(t.wrong or 0) for row in self.rows for t in (row.out_of_place, row.in_place))
        return total + (self.out_of_bounds or 0)

    @property
    def wrong_rows(self) -> tuple[NcclRow, ...]:
        """The rows with a #wrong other than 0, either side (NaN included)."""
        return tuple(row for row in self.rows if any(t.wrong is not None and t.wrong != 0
                                                     for t in (row.out_of_place, row.in_place)))


@dataclass(frozen=True)
class _Layout:
    """The columns of a table header: the row's first columns (size, count, type and, where
    printed, redop and root), each side's (time, algbw, busbw, ...), and the timestamp's."""

    prefix: tuple[str, ...]
    sides: tuple[tuple[str, ...], tuple[str, ...]]
    timestamp: bool

    @property
    def width(self) -> int:
        return len(self.prefix) + len(self.sides[0]) + len(self.sides[1]) + (2 if self.timestamp else 0)


def _layout(body: str) -> Optional[_Layout]:
    """The layout of a table header's columns (the line without its '#'), None for one that is
    not a layout nccl-tests prints."""
    words = body.split()
    timestamp = bool(words) and words[-1] == "timestamp"
    if timestamp:
        words = words[:-1]
    prefix = ["size", "count", "type"]
    if words[:3] != prefix:
        return None
    at = 3
    for optional in ("redop", "root"):
        if at < len(words) and words[at] == optional:
            prefix.append(optional)
            at += 1
    starts = [i for i in range(at, len(words)) if words[i] in ("time", "cputime")]
    if len(starts) != 2 or starts[0] != at:
        return None
    sides = (tuple(words[starts[0]:starts[1]]), tuple(words[starts[1]:]))
    for side in sides:
        rest = side[1:]
        if (len(set(rest)) != len(rest) or not set(rest) <= set(_SIDE_COLUMNS) or "algbw" not in rest
                or "busbw" not in rest or ("#wrong" in rest) == ("error" in rest)):
            return None
    return _Layout(tuple(prefix), sides, timestamp)


def _timing(columns: tuple[str, ...], tokens: list[str]) -> tuple[Optional[NcclTiming], str]:
    """One side of a row, or (None, why not)."""
    values: dict[str, Optional[float]] = {}
    for name, token in zip(columns, tokens, strict=True):
        if name in ("#wrong", "error") and token == "N/A":
            values[name] = None
            continue
        value = number(token)
        if value is None:
            return None, f"{name} {token!r} is not a number"
        if name != "#wrong" and value < 0:
            return None, f"{name} {token} is negative: no measurement is"
        values[name] = value
    time = values.get("time", values.get("cputime"))
    return NcclTiming(time, values["algbw"], values["busbw"], values.get("#wrong"), values.get("error")), ""


def _row(layout: _Layout, line: str, at: int) -> tuple[Optional[NcclRow], str]:
    tokens = line.split()
    if len(tokens) != layout.width:
        return None, f"{len(tokens)} columns where the table's header has {layout.width}"
    head = dict(zip(layout.prefix, tokens, strict=False))
    size, count = whole(head["size"]), whole(head["count"])
    if size is None or count is None or size < 0 or count < 0:
        return None, "its size and count are not whole numbers"
    if not _WORD.fullmatch(head["type"]) or ("redop" in head and not _WORD.fullmatch(head["redop"])):
        return None, "its type or reduction is not a name"
    root: Optional[int] = None
    if "root" in head:
        root = whole(head["root"])
        if root is None:
            return None, f"root {head['root']!r} is not a whole number"
    rest = tokens[len(layout.prefix):]
    first, second = layout.sides
    out, why = _timing(first, rest[:len(first)])
    if out is None:
        return None, why
    inside, why = _timing(second, rest[len(first):len(first) + len(second)])
    if inside is None:
        return None, why
    if layout.timestamp and not all(p.fullmatch(t) for p, t in zip(_TIMESTAMP, rest[-2:], strict=True)):
        return None, "its timestamp is not a date and time"
    return NcclRow(size, count, head["type"], head.get("redop", ""), root, out, inside, at), ""


def _nccl_infer(rows: tuple[NcclRow, ...], nranks: int) -> Optional[str]:
    """The collective from the table: all_reduce moves count x type-size bytes with a reduction and
    no root; reduce_scatter and all_gather count one rank's share. Unambiguous cases only."""
    for row in rows:
        width = _TYPE_BYTES.get(row.type.lower())
        if not width or row.count == 0 or row.root not in (None, -1):
            continue
        if row.redop in _REDUCTIONS and row.count * width == row.size:
            return "all_reduce"
        if nranks > 1 and row.redop in _REDUCTIONS and row.count * width * nranks == row.size:
            return "reduce_scatter"
        return None
    return None


class _Run:
    """One run's lines as they are read: before its table, in it, in its summary, after it."""

    def __init__(self, first_line: int) -> None:
        self.first_line = first_line
        self.state = "before"  # before | table | summary | after
        self.layout: Optional[_Layout] = None
        self.header = False
        self.operation: Optional[str] = None
        self.binary: Optional[str] = None
        self.version: Optional[str] = None
        self.nccl_version: Optional[str] = None
        self.ranks: dict[int, NcclRank] = {}
        self.rows: list[NcclRow] = []
        self.avg: Optional[float] = None
        self.oob: Optional[int] = None
        self.network: Optional[str] = None
        self.provider: Optional[str] = None
        self.failures: list[str] = []
        self.refused: list[Refusal] = []
        self.errors: list[str] = []

    def refuse(self, at: int, why: str) -> None:
        if not self.failures:  # after a failure the run is a FAIL, and what follows is its wreckage
            self.refused.append(Refusal(at, why))

    def log(self, stripped: str) -> None:
        if (net := re.search(r"NCCL INFO Using network (.+)$", stripped)) is not None:
            self.network = net.group(1).strip()
        elif (ofi := re.search(r"NET/OFI Selected [Pp]rovider is ([^,\s]+)", stripped)) is not None:
            self.provider = ofi.group(1)
        elif (ver := re.search(r"NCCL INFO NCCL version (\S+)", stripped)) is not None:
            self.nccl_version = ver.group(1)

    def result(self) -> NcclResult:
        rows = tuple(self.rows)
        operation, source = self.operation, "header" if self.operation else ""
        if operation is None and self.binary is not None:
            operation, source = self.binary, "binary"
        if operation is None:
            inferred = _nccl_infer(rows, len(self.ranks))
            if inferred:
                operation, source = inferred, "table"
        errors = [r.text() for r in self.refused] + self.errors
        if not self.header and not rows:
            errors.append("no nccl-tests table")
        elif not rows:
            errors.append("the table has no rows")
        complete = bool(rows) and self.avg is not None and self.oob is not None
        if rows and not complete:
            errors.append("truncated: no summary lines (# Out of bounds values, # Avg bus bandwidth) after the table")
        wrong = [row for row in rows if any(t.wrong is not None and t.wrong != 0
                                            for t in (row.out_of_place, row.in_place))]
        if wrong:
            errors.append(f"wrong values at {len(wrong)} sizes, the first {wrong[0].size} B")
        errors.extend(f"nccl-tests: {f}" for f in self.failures)
        if operation is None:
            errors.append("the operation is not named (no # Collective test starting line, no *_perf name)")
        return NcclResult(operation, source, self.version, self.nccl_version,
                          tuple(self.ranks[r] for r in sorted(self.ranks)), rows, self.avg, self.oob, self.network,
                          self.provider, complete and not self.refused, tuple(errors), tuple(self.refused),
                          tuple(self.failures), self.first_line)


def _comment(run: _Run, body: str, at: int) -> Optional[str]:
    """A '#' line of nccl-tests read into the run; "new" where it starts a run of its own, else
    None."""
    in_table = run.state in ("table", "summary")
    started = run.state != "before"
    if re.match(r"size\s+count\s+type\b", body):
        layout = _layout(body)
        if started:
            return "new"
        if layout is None:
            run.refuse(at, f"a table header fmcluster does not know: {body[:120]!r}")
            return None
        run.layout, run.header, run.state = layout, True, "table"
        return None
    if body.startswith(_RUN_START) or body.startswith("Rank"):
        if started:
            return "new"
        if body.startswith("nccl-tests version"):
            version = _VERSION.fullmatch(body)
            if version is None:
                run.refuse(at, f"an nccl-tests version line fmcluster does not read: {body[:120]!r}")
                return None
            run.version = version.group(1)
            if version.group(3) and run.nccl_version is None:
                code = int(version.group(3))
                run.nccl_version = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
        elif body.startswith("Collective test starting:"):
            named = _NCCL_BINARY.search(body)
            if named:
                run.operation = named.group(1)
        elif body.startswith("Rank"):
            rank = _NCCL_RANK.match(body)
            if rank is None:
                run.refuse(at, f"a '# Rank' line fmcluster does not read: {body[:120]!r}")
                return None
            number_, group, pid, host, device, bus, name = rank.groups()
            if int(number_) in run.ranks:
                run.refuse(at, f"rank {int(number_)} is named twice")
                return None
            run.ranks[int(number_)] = NcclRank(int(number_), host, int(device), bus or "", name.strip(),
                                               int(group) if group else None, int(pid) if pid else None)
        return None
    if body.startswith("Out of bounds values"):
        value = _OUT_OF_BOUNDS.fullmatch(body)
        if run.state != "table" or not run.rows:
            run.refuse(at, "a summary line (# Out of bounds values) that does not end a table")
        elif value is None or (int(value.group(1)) == 0) != (value.group(2) == "OK"):
            run.refuse(at, f"an out-of-bounds line nccl-tests does not print: {body[:120]!r}")
        else:
            run.oob, run.state = int(value.group(1)), "summary"
            if value.group(2) == "FAILED":
                run.errors.append(f"nccl-tests: {body}")
        return None
    if body.startswith("Avg bus bandwidth"):
        value = _AVERAGE.fullmatch(body)
        average = number(value.group(1)) if value else None
        if run.state != "summary":
            run.refuse(at, "a summary line (# Avg bus bandwidth) not right after # Out of bounds values")
        elif average is None:
            run.refuse(at, f"an average line nccl-tests does not print: {body[:120]!r}")
        else:
            run.avg, run.state = average, "after"
            if value is not None and value.group(2) == "FAILED":
                run.failures.append(f"# {body}")
        return None
    if in_table and not (body == "" or body.startswith("(B)") or _SIDE_HEADING.fullmatch(body)
                         or (run.state == "summary" and body.startswith(_AFTER_TABLE))):
        run.refuse(at, f"a comment nccl-tests does not print in its table: {body[:120]!r}")
    return None


def _table_row(run: _Run, layout: _Layout, line: str, at: int) -> None:
    """A line in a run's table: a row of its header's columns, its size above the row's before."""
    row, why = _row(layout, line, at)
    if row is None:
        run.refuse(at, f"not a row of the table: {why}")
    elif run.rows and (row.size < run.rows[-1].size or (row.size == run.rows[-1].size and row.size > 0)):
        run.refuse(at, f"size {row.size} after {run.rows[-1].size}: nccl-tests prints each size once, smallest first")
    else:
        run.rows.append(row)


def parse_nccl_runs(text: str) -> tuple[NcclResult, ...]:
    """Every run of nccl-tests' stdout in the text, in order: a run starts at its first header
    line (`# nccl-tests version`, `# Collective test starting`, `# nThread`, `# Using devices`,
    a rank line, or its table's header) once the run before it has a table. A run cut mid-table
    and followed by a rerun is two runs, the first one truncated. The operation: nccl-tests 2.17+
    names it (`# Collective test starting: all_reduce_perf`); otherwise the first `NAME_perf` in
    the lines since the table before (the command line a job echoes, or `srun
    .../all_gather_perf`); otherwise it is inferred from the table's counts (all_reduce and
    reduce_scatter only). A text with no table at all is one run (with an error saying so)."""
    runs: list[_Run] = []
    run = _Run(1)
    pending_binary: Optional[str] = None  # a *_perf name seen since the last table began
    for at, line in enumerate(unprefixed_lines(text), 1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            if _comment(run, stripped.lstrip("#").strip(), at) == "new":
                runs.append(run)
                run = _Run(at)
                _comment(run, stripped.lstrip("#").strip(), at)
            if run.state == "table" and run.binary is None and not run.rows:
                run.binary, pending_binary = pending_binary, None
            continue
        if run.state == "table" and run.layout is not None and _ROW_LIKE.match(line):
            _table_row(run, run.layout, line, at)
            continue
        if _NCCL_LOG.search(stripped):
            run.log(stripped)
            continue
        if (ver := _PLAIN_VERSION.match(stripped)) is not None:
            run.nccl_version = ver.group(1)
            continue
        if _SRUN_DROPPED_CONNECTION.match(stripped):
            continue
        if _NCCL_FAILURE.search(stripped):
            if len(run.failures) < 10:
                run.failures.append(stripped[:300])
            continue
        if run.state == "before":
            if (found := _NCCL_BINARY.search(stripped)) and pending_binary is None:
                pending_binary = found.group(1)
            if _ROW_LIKE.match(line):
                run.refuse(at, "a table row before any table header")
            continue
        if run.state == "table" and run.layout is not None:
            _table_row(run, run.layout, line, at)
            continue
        if run.state == "summary":
            run.refuse(at, "a line between the summary lines that nccl-tests does not print there")
            continue
        # after the run's summary: a job's own lines, until the next run
        if (found := _NCCL_BINARY.search(stripped)) and pending_binary is None:
            pending_binary = found.group(1)
        if _ROW_LIKE.match(line):
            run.refuse(at, "a table row after its table's summary lines")
    if run.state == "before" and run.binary is None:
        run.binary = pending_binary  # a run with no table: the name its lines give
    runs.append(run)
    return tuple(r.result() for r in runs)


def _badness(result: NcclResult) -> tuple[int, float]:
    busbw = result.busbw if result.busbw is not None and math.isfinite(result.busbw) else -math.inf
    if result.refused:
        return (4, 0.0)
    if not result.complete or result.failures:
        return (3, 0.0)
    if result.wrong:
        return (2, 0.0)
    return (1, -busbw)


def parse_nccl_tests(text: str) -> NcclResult:
    """The text's one run (parse_nccl_runs); of several, the worst (one not understood, then one
    cut short or failed, then one with wrong values, then the slowest), its errors saying how
    many there are: parse_nccl_runs gives each."""
    return worst_run(parse_nccl_runs(text), _badness, "runs")
