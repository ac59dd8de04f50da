"""The parser of NVIDIA nccl-tests' stdout (`all_reduce_perf` and every `*_perf`): its table, summary,
rank lines and NCCL's INFO lines. Pure: the text in, a frozen NcclResult out.

Sources and details: docs/research-notes.md, "fmcluster/kits/verify/"."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from fmcluster.kits.verify.reading import float_or_none, int_or_none, unprefixed_lines

NCCL_OPERATIONS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv",
                   "scatter", "gather", "hypercube")
_TYPE_BYTES = {"int8": 1, "uint8": 1, "char": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "f8e4m3": 1, "f8e5m2": 1,
               "half": 2, "float16": 2, "bfloat16": 2, "bf16": 2, "fp16": 2,
               "float": 4, "float32": 4, "int32": 4, "uint32": 4, "int": 4,
               "double": 8, "float64": 8, "int64": 8, "uint64": 8}
_REDUCTIONS = ("sum", "prod", "max", "min", "avg", "premulsum")
_NCCL_RANK = re.compile(r"^#\s*Rank\s+(\d+)(?:\s+Group\s+(\d+))?(?:\s+Pid\s+(\d+))?\s+on\s+(\S+)\s+device\s+(\d+)"
                        r"(?:\s+\[([^\]]*)\])?\s*(.*)$")
_NCCL_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([A-Za-z_0-9]+)\s+([A-Za-z_]+)\s+(.*)$")
_NCCL_BINARY = re.compile(r"\b([a-z][a-z_]*?)_perf(?:_mpi)?\b")
_NCCL_FAILURE = re.compile(r"(Test (?:NCCL |CUDA )?failure|NCCL failure|unhandled (?:system|cuda) error)",
                           re.IGNORECASE)


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
    wrong: Optional[int]  # "#wrong" (None: "N/A", or old layouts' `error` column)
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
    def wrong(self) -> int:
        """Every #wrong of the table, and the summary's out-of-bounds count: 0 when healthy."""
        total = sum((t.wrong or 0) for row in self.rows for t in (row.out_of_place, row.in_place))
        return total + (self.out_of_bounds or 0)


def _timing(tokens: list[str], with_wrong: bool) -> NcclTiming:
    def at(i: int) -> Optional[float]:
        return float_or_none(tokens[i]) if i < len(tokens) else None

    wrong: Optional[int] = None
    error: Optional[float] = None
    if len(tokens) > 3:
        if with_wrong:
            wrong = int_or_none(tokens[3])
        else:
            error = float_or_none(tokens[3])
    return NcclTiming(at(0), at(1), at(2), wrong, error)


def _nccl_row(line: str, layout: Optional[list[str]]) -> Optional[NcclRow]:
    match = _NCCL_ROW.match(line)
    if match is None or line.lstrip().startswith("#"):
        return None
    size, count, dtype, redop, rest = match.groups()
    tokens = rest.split()
    has_root = layout is not None and "root" in layout
    with_wrong = layout is None or "#wrong" in layout
    if layout is None:  # no header seen: guess from the number of columns
        has_root = len(tokens) >= 9
        with_wrong = True
    root: Optional[int] = None
    if has_root:
        if not tokens:
            return None
        root = int_or_none(tokens[0])
        tokens = tokens[1:]
    if len(tokens) < 3 or (float_or_none(tokens[0]) is None and tokens[0] != "N/A"):
        return None
    return NcclRow(int(size), int(count), dtype, redop, root,
                   _timing(tokens[:4], with_wrong), _timing(tokens[4:8], with_wrong))


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


def parse_nccl_tests(text: str) -> NcclResult:
    """nccl-tests' stdout. The operation: nccl-tests 2.17+ names it (`# Collective test starting:
    all_reduce_perf`); otherwise the first `NAME_perf` in the text (the command line a job echoes, or
    `srun .../all_gather_perf`); otherwise it is inferred from the table's counts (all_reduce and
    reduce_scatter only). Several runs in one text: the last one is read (and an error says so)."""
    errors: list[str] = []
    operation: Optional[str] = None
    source = ""
    binary: Optional[str] = None
    version: Optional[str] = None
    nccl_version: Optional[str] = None
    ranks: dict[int, NcclRank] = {}
    rows: list[NcclRow] = []
    layout: Optional[list[str]] = None
    tables = 0
    avg: Optional[float] = None
    oob: Optional[int] = None
    network: Optional[str] = None
    provider: Optional[str] = None
    failures: list[str] = []
    for line in unprefixed_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        if binary is None:
            found = _NCCL_BINARY.search(stripped)
            if found and not stripped.startswith("#"):
                binary = found.group(1)
        if stripped.startswith("#"):
            body = stripped.lstrip("#").strip()
            if body.startswith("nccl-tests version"):
                parts = body.split()
                version = parts[2] if len(parts) > 2 else None
                library = re.search(r"nccl-library=(\d+)", body)
                if library and nccl_version is None:
                    code = int(library.group(1))
                    nccl_version = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
            elif body.startswith("Collective test starting:"):
                named = _NCCL_BINARY.search(body)
                if named:
                    operation, source = named.group(1), "header"
            elif (rank := _NCCL_RANK.match(stripped)) is not None:
                number, group, pid, host, device, bus, name = rank.groups()
                ranks[int(number)] = NcclRank(int(number), host, int(device), bus or "", name.strip(),
                                              int(group) if group else None, int(pid) if pid else None)
            elif re.match(r"size\s+count\s+type", body) and "busbw" in body:
                tables += 1
                layout = body.split()
                rows = []
                avg, oob = None, None
            elif body.startswith("Out of bounds values"):
                value = re.search(r":\s*(\d+)\s*(OK|FAILED)?", body)
                oob = int(value.group(1)) if value else None
                if value and value.group(2) == "FAILED":
                    errors.append(f"nccl-tests: {body}")
            elif body.startswith("Avg bus bandwidth"):
                value = re.search(r":\s*([0-9.eE+-]+|nan|inf)", body)
                avg = float_or_none(value.group(1)) if value else None
            continue
        if "NCCL INFO" in stripped:
            if (net := re.search(r"NCCL INFO Using network (.+)$", stripped)) is not None:
                network = net.group(1).strip()
            elif (ofi := re.search(r"NET/OFI Selected [Pp]rovider is ([^,\s]+)", stripped)) is not None:
                provider = ofi.group(1)
            elif (ver := re.search(r"NCCL INFO NCCL version (\S+)", stripped)) is not None:
                nccl_version = ver.group(1)
            continue
        if (ver := re.match(r"NCCL version (\S+)", stripped)) is not None:
            nccl_version = ver.group(1)
            continue
        if _NCCL_FAILURE.search(stripped):
            if len(failures) < 10:
                failures.append(stripped[:300])
            continue
        row = _nccl_row(line, layout)
        if row is not None:
            rows.append(row)
    rows_t = tuple(rows)
    if operation is None and binary is not None:
        operation, source = binary, "binary"
    if operation is None:
        inferred = _nccl_infer(rows_t, len(ranks))
        if inferred:
            operation, source = inferred, "table"
    if tables == 0 and not rows_t:
        errors.append("no nccl-tests table")
    elif not rows_t:
        errors.append("the table has no rows")
    if tables > 1:
        errors.append(f"{tables} runs in one text: the last one is read")
    if rows_t and (avg is None or oob is None):
        errors.append("truncated: no summary lines (# Out of bounds values, # Avg bus bandwidth) after the table")
    bad_rows = [row.size for row in rows_t if any((t.wrong or 0) > 0 for t in (row.out_of_place, row.in_place))]
    if bad_rows:
        errors.append(f"wrong values at {len(bad_rows)} sizes, the first {bad_rows[0]} B")
    errors.extend(f"nccl-tests: {f}" for f in failures)
    if operation is None:
        errors.append("the operation is not named (no # Collective test starting line, no *_perf name)")
    complete = bool(rows_t) and avg is not None and oob is not None
    return NcclResult(operation, source, version, nccl_version, tuple(ranks[r] for r in sorted(ranks)), rows_t,
                      avg, oob, network, provider, complete, tuple(errors))
