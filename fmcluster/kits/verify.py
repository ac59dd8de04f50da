"""Reading and judging the outputs of the acceptance kit (`fmcluster jobs`): the parsers of the
four tools' outputs and the small core that holds a measurement to its expected figure. Pure: no
AWS call, no aws_cdk, no I/O (every function takes the text and returns a frozen value).

Sources and details: docs/research-notes.md, "fmcluster/kits/verify.py"."""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Mapping, Optional, Sequence, Union

if TYPE_CHECKING:
    from fmcluster.model.expected import Expected


class Verdict(str, Enum):
    """A judgement; a `str`, so it serializes to JSON as itself."""

    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"


_RANK = {Verdict.PASS: 0, Verdict.WARN: 1, Verdict.FAIL: 2}


def worst(verdicts: Sequence[Verdict]) -> Verdict:
    """The worst of some verdicts (PASS for none)."""
    return max(verdicts, key=_RANK.__getitem__, default=Verdict.PASS)


# --------------------------------------------------------------------------------------------
# judging


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    measured: Optional[float]
    expected: float
    ratio: Optional[float]  # measured / expected
    warn_below: float  # expected x warn_ratio: below it WARN
    fail_below: float  # expected x fail_ratio: below it FAIL
    note: str = ""


def _finite(value: Optional[float]) -> bool:
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


def judge(measured: Optional[float], expected: float, warn_ratio: float, fail_ratio: float) -> Judgement:
    """PASS at `warn_ratio` x `expected` or more, WARN from `fail_ratio` x `expected`, FAIL below
    (and FAIL when nothing finite was measured). Higher is better (bandwidths).

    fmcluster.model.expected names the same two ratios `pass_ratio` and `warn_ratio` (PASS from the
    first, WARN down to the second): `judge_expected` maps them."""
    if not (_finite(expected) and expected > 0):
        raise ValueError(f"expected must be a positive number, not {expected!r}")
    if not 0 <= fail_ratio <= warn_ratio:
        raise ValueError(f"need 0 <= fail_ratio <= warn_ratio, not {fail_ratio!r}, {warn_ratio!r}")
    warn_below, fail_below = expected * warn_ratio, expected * fail_ratio
    if measured is None or not _finite(measured):
        return Judgement(Verdict.FAIL, None, expected, None, warn_below, fail_below, "nothing measured")
    ratio = measured / expected
    if measured >= warn_below:
        verdict = Verdict.PASS
    elif measured >= fail_below:
        verdict = Verdict.WARN
    else:
        verdict = Verdict.FAIL
    return Judgement(verdict, float(measured), expected, round(ratio, 4), warn_below, fail_below)


def judge_expected(measured: Optional[float], figure: Expected) -> Optional[Judgement]:
    """`judge` against one of fmcluster.model.expected's figures; None where it has no peak (measured,
    not judged)."""
    if figure.peak is None:
        return None
    return judge(measured, figure.peak, figure.pass_ratio, figure.warn_ratio)


def slow_nodes(per_node: Mapping[str, Optional[float]], expected: Optional[float],
               fail_ratio: float) -> tuple[str, ...]:
    """The nodes whose figure is below `fail_ratio` x `expected`, or was not measured, slowest first.
    `expected` None: the median of the nodes' own figures (the group's peers), for results that have
    no catalog figure (/scratch) or to name the stragglers of a group that passed as a whole."""
    finite = [v for v in per_node.values() if v is not None and _finite(v)]
    reference = expected if expected is not None else (statistics.median(finite) if finite else None)
    if reference is None:
        return tuple(sorted(per_node))
    floor = reference * fail_ratio

    def below(value: Optional[float]) -> bool:
        return value is None or not _finite(value) or value < floor

    def order(host: str) -> tuple[bool, float, str]:
        value = per_node[host]
        return (True, float(value), host) if value is not None and _finite(value) else (False, 0.0, host)

    return tuple(sorted((host for host, value in per_node.items() if below(value)), key=order))


# --------------------------------------------------------------------------------------------
# common


# prefixes the launchers add: Open MPI --tag-output "[1,0]<stdout>:", srun --label "0: ", and the
# indentation of an output pasted into a page
_LAUNCH_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+: )")


def _lines(text: str) -> list[str]:
    return [_LAUNCH_PREFIX.sub("", line, count=1).rstrip("\r\n") for line in text.splitlines()]


def _number(token: str) -> Optional[float]:
    try:
        value = float(token)
    except ValueError:
        return None
    return value


def _integer(token: str) -> Optional[int]:
    try:
        return int(token)
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------
# nccl-tests

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
        return _number(tokens[i]) if i < len(tokens) else None

    wrong: Optional[int] = None
    error: Optional[float] = None
    if len(tokens) > 3:
        if with_wrong:
            wrong = _integer(tokens[3])
        else:
            error = _number(tokens[3])
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
        root = _integer(tokens[0])
        tokens = tokens[1:]
    if len(tokens) < 3 or (_number(tokens[0]) is None and tokens[0] != "N/A"):
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
    for line in _lines(text):
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
                avg = _number(value.group(1)) if value else None
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


# --------------------------------------------------------------------------------------------
# DCGM diagnostics


@dataclass(frozen=True)
class DcgmTest:
    name: str  # "GPU Memory", "PCIe", "memory" (DCGM 4 JSON), ...
    category: str  # Deployment, Integration, Hardware, Stress ("" where not given)
    status: str  # pass, fail, warn, skip, unknown
    where: str  # text: "All", "GPU: 0"; JSON: the GPUs or entities that reported
    messages: tuple[str, ...]  # DCGM's failure and warning text for the test

    @property
    def verdict(self) -> Verdict:
        return {"pass": Verdict.PASS, "skip": Verdict.PASS, "fail": Verdict.FAIL}.get(self.status, Verdict.WARN)


@dataclass(frozen=True)
class DcgmResult:
    format: str  # "text", "json" or "" (neither found)
    version: Optional[str]  # DCGM's
    driver: Optional[str]
    tests: tuple[DcgmTest, ...]
    messages: tuple[str, ...]  # messages not tied to a test (runtime errors, global warnings)
    complete: bool
    errors: tuple[str, ...]
    # the PCI device IDs of the GPUs it ran on, one a GPU ("2330"): the text's "GPU Device IDs
    # Detected", DCGM 4 JSON's entity_groups; () where the output names none (DCGM 3's JSON)
    device_ids: tuple[str, ...] = ()

    @property
    def verdict(self) -> Verdict:
        """FAIL on any failed test, a runtime error or nothing to read; WARN on a warning or a status
        not known; otherwise PASS (skipped tests do not fail a node: DCGM skips what a GPU lacks)."""
        if not self.tests or not self.complete or self.format == "":
            return Verdict.FAIL
        if self.messages and any("error" in m.lower() for m in self.messages):
            return Verdict.FAIL
        return worst([t.verdict for t in self.tests])

    @property
    def failed(self) -> tuple[DcgmTest, ...]:
        return tuple(t for t in self.tests if t.status == "fail")


def _dcgm_status(word: str) -> str:
    value = word.strip().lower()
    if value.startswith("pass"):
        return "pass"
    if value.startswith("fail"):
        return "fail"
    if value.startswith("warn"):
        return "warn"
    if value.startswith("skip") or value in ("not run", "notrun", "not_run"):
        return "skip"
    return "unknown"


_STATUS_ORDER = {"pass": 0, "skip": -1, "warn": 2, "unknown": 2, "fail": 3}


def _combine(statuses: list[str]) -> str:
    if not statuses:
        return "unknown"
    if all(s == "skip" for s in statuses):
        return "skip"
    return max(statuses, key=_STATUS_ORDER.__getitem__)


_TEXT_STATUS = re.compile(r"^(Pass|Fail|Warn(?:ing)?|Skip(?:ped)?)\b\s*(?:-\s*(.*))?$", re.IGNORECASE)
_META = {"DCGM Version": "version", "Driver Version Detected": "driver", "GPU Device IDs Detected": "devices"}


def _cell(value_cell: str) -> str:
    """The text of a value cell: dcgmi pads it with one space before and two after the wrapped
    chunk, and wraps long messages mid-word, so a chunk keeps its own spaces."""
    return value_cell[1:-2] if len(value_cell) >= 3 else value_cell.strip()


def _parse_dcgm_text(text: str) -> DcgmResult:
    errors: list[str] = []
    messages: list[str] = []
    meta: dict[str, str] = {}
    category = ""
    # per test: name, category, statuses, wheres, messages
    tests: list[tuple[str, str, list[str], list[str], list[str]]] = []
    current: Optional[list[str]] = None  # the list whose last message continues on the next row
    meta_key: Optional[str] = None  # the metadata row a wrapped value continues
    closed = header = False
    for raw in _lines(text):
        line = raw.strip()
        if not line:
            continue
        if not line.startswith(("|", "+")):
            if line.startswith(("Error", "Failed to")) or "Unable to" in line:
                errors.append(line[:300])
            continue
        section = re.match(r"^[|+]-+\s+([A-Za-z][A-Za-z /]*?)\s+-+[+|]", line)
        if section:
            category, current = section.group(1), None
            continue
        if re.fullmatch(r"\+[-=+]+\+", line):
            closed = header and bool(tests)
            continue
        closed = False
        cells = line.split("|")
        if len(cells) < 4:
            continue
        name, value_cell = cells[1].strip(), "|".join(cells[2:-1])
        value = value_cell.strip()
        if name == "Diagnostic" and value == "Result":
            header = True
            continue
        if name in _META:
            meta_key = _META[name]
            meta[meta_key] = value
            current = None
            continue
        if category == "Metadata" or name.startswith("GPU Device"):
            if not name and meta_key is not None:  # the wrapped rest of a metadata value
                meta[meta_key] += value
            else:
                meta_key = None
            current = None
            continue
        status = _TEXT_STATUS.match(value)
        if name in ("Info", "Warning", "Error"):
            current = None
            if name != "Info":  # informational rows are not kept
                current = tests[-1][4] if tests else messages
                current.append(f"{name}: {_cell(value_cell)}")
        elif name and status:
            tests.append((name, category, [_dcgm_status(status.group(1))], [status.group(2) or ""], []))
            current = None
        elif not name and current is not None:  # the wrapped rest of a message
            current[-1] += _cell(value_cell)
        elif not name and status and tests:  # the test's result for another set of GPUs
            tests[-1][2].append(_dcgm_status(status.group(1)))
            tests[-1][3].append(status.group(2) or "")
    result_tests = tuple(DcgmTest(name, cat, _combine(st), ", ".join(w for w in wh if w),
                                  tuple(m.strip() for m in ms)) for name, cat, st, wh, ms in tests)
    if not header:
        errors.append("no dcgmi diag table")
    elif not closed:
        errors.append("truncated: the table is not closed")
    return DcgmResult("text" if header else "", meta.get("version"), meta.get("driver"), result_tests,
                      tuple(m.strip() for m in messages), header and closed and bool(result_tests), tuple(errors),
                      _device_ids(meta.get("devices", "").split(",")))


def _device_ids(values: Sequence[object]) -> tuple[str, ...]:
    """PCI device IDs as DCGM prints them ("2330", "0x2330", or with NVIDIA's vendor ID,
    "233010DE"), each its four hex digits, upper case."""
    found = []
    for value in values:
        text = str(value).strip().upper().removeprefix("0X")
        if len(text) == 8 and text.endswith("10DE"):
            text = text[:4]
        if re.fullmatch(r"[0-9A-F]{1,4}", text):
            found.append(text.zfill(4))
    return tuple(found)


def _json_device_ids(document: dict[str, object], root: dict[str, object]) -> tuple[str, ...]:
    """DCGM 4: the GPUs of `entity_groups` (NVIDIA/DCGM testing/python3/dcgm_diag_schema.json:
    entities[].device_id); older: the "GPU Device IDs" list nvvs writes (NvvsJsonStrings.h)."""
    ids: list[object] = []
    for group in map(_as_dict, _as_list(document.get("entity_groups"))):
        if str(group.get("entity_group", "GPU")).upper() == "GPU":
            ids.extend(_as_dict(entity).get("device_id") for entity in _as_list(group.get("entities")))
    for holder in (root, document, _as_dict(document.get("metadata"))):
        if not ids:
            ids.extend(_as_list(holder.get("GPU Device IDs")))
    return _device_ids(ids)


_DOC_START = re.compile(r"^[ \t]*\{", re.MULTILINE)
_TOP_START = re.compile(r"^\{", re.MULTILINE)


def _json_documents(text: str) -> tuple[list[object], list[str], bool]:
    """Every JSON value in the text that starts a line with '{' (other lines skipped); errors for
    one that does not parse (cut short), after which the search goes on at the next line that
    starts with '{' in its first column (not at an object nested in the broken one)."""
    decoder = json.JSONDecoder()
    found: list[object] = []
    errors: list[str] = []
    broken = False
    match = _DOC_START.search(text)
    while match is not None:
        start = match.end() - 1
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError as error:
            line = text.count("\n", 0, start) + 1
            errors.append(f"the JSON from line {line} does not parse (cut short?): {error.msg}")
            broken = True
            match = _TOP_START.search(text, start + 1)
            continue
        found.append(value)
        match = _DOC_START.search(text, end)
    return found, errors, broken


def _as_list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _as_dict(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _text_of(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        out: list[str] = []
        for item in value:
            out.extend(_text_of(item))
        return out
    if isinstance(value, dict):
        return _text_of(value.get("warning") or value.get("message") or "")
    return []


def _parse_dcgm_json(document: dict[str, object]) -> DcgmResult:
    root = _as_dict(document.get("DCGM GPU Diagnostic") or document.get("DCGM Diagnostic"))
    metadata = _as_dict(document.get("metadata"))
    version = root.get("version") or metadata.get("version")
    driver = (root.get("Driver Version Detected") or root.get("driver_version_detected")
              or metadata.get("Driver Version Detected"))
    messages = [f"runtime error: {m}" for m in _text_of(root.get("runtime_error") or document.get("runtime_error"))]
    tests: list[DcgmTest] = []
    categories = _as_list(root.get("test_categories")) or [{"category": "", "tests": document.get("tests")}]
    for category in map(_as_dict, categories):
        for test in map(_as_dict, _as_list(category.get("tests"))):
            if not test:
                continue  # DCGM 3.1 prints nulls between tests
            statuses: list[str] = []
            where: list[str] = []
            texts: list[str] = []
            for result in map(_as_dict, _as_list(test.get("results"))):
                status = _dcgm_status(str(result.get("status", "")))
                statuses.append(status)
                entity = result.get("gpu_ids", result.get("gpu_id", result.get("entity_id")))
                if entity is not None and status != "pass":
                    where.append(f"{result.get('entity_group', 'GPU')} {entity}")
                for key in ("warnings", "warning", "error"):
                    texts.extend(_text_of(result.get(key)))
            summary = _as_dict(test.get("test_summary"))
            if "status" in summary:
                statuses.append(_dcgm_status(str(summary["status"])))
            texts.extend(_text_of(summary.get("warnings")))
            tests.append(DcgmTest(str(test.get("name", "?")), str(category.get("category", "")), _combine(statuses),
                                  ", ".join(where), tuple(dict.fromkeys(texts))))
    errors = [] if tests else ["no tests in the DCGM JSON"]
    return DcgmResult("json", str(version) if version else None, str(driver) if driver else None, tuple(tests),
                      tuple(messages), bool(tests), tuple(errors), _json_device_ids(document, root))


def parse_dcgm_diag(text: str) -> DcgmResult:
    """`dcgmi diag -r N` (text) or `dcgmi diag -r N -j` (JSON, with whatever dcgmi printed around it).
    Per test: pass / fail / warn / skip (text: "Pass - All", one line per GPU set; JSON: the worst of
    the GPUs' results), with DCGM's failure text (text: the Warning / Error rows under the test, the
    wrapped lines joined back)."""
    if re.search(r'"DCGM (GPU )?Diagnostic"\s*:', text) or (
            re.search(r"^\s*\{\s*$", text, re.MULTILINE) and "| Diagnostic" not in text):
        documents, errors, broken = _json_documents(text)
        dicts = [d for d in documents if isinstance(d, dict) and ("DCGM GPU Diagnostic" in d or "DCGM Diagnostic" in d
                                                                   or "tests" in d)]
        if dicts:
            result = _parse_dcgm_json(dicts[-1])
            if broken or len(dicts) > 1:
                more = [f"{len(dicts)} DCGM documents: the last one is read"] if len(dicts) > 1 else []
                return DcgmResult(result.format, result.version, result.driver, result.tests, result.messages,
                                  result.complete and not broken, tuple(errors + more) + result.errors,
                                  result.device_ids)
            return result
        return DcgmResult("", None, None, (), (), False, tuple(errors) or ("no DCGM JSON document",))
    return _parse_dcgm_text(text)


# --------------------------------------------------------------------------------------------
# fio


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
    documents, errors, broken = _json_documents(text)
    docs = [_as_dict(d) for d in documents if isinstance(d, dict) and "jobs" in d]
    version: Optional[str] = None
    per_name: dict[str, dict[str, float]] = {}
    groups: dict[tuple[int, object], list[float]] = {}  # (document, groupid) -> [read, write]
    disks: list[FioDisk] = []
    for index, doc in enumerate(docs):
        version = str(doc.get("fio version")) if doc.get("fio version") else version
        for job in map(_as_dict, _as_list(doc.get("jobs"))):
            name = str(job.get("jobname", "?"))
            read, write = _as_dict(job.get("read")), _as_dict(job.get("write"))
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
        for disk in map(_as_dict, _as_list(doc.get("disk_util"))):
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
_FIO_TEXT = re.compile(r"^\s*Run status group \d+ \(all jobs\):|^\S+: \(groupid=\d+, jobs=\d+\): err=", re.MULTILINE)
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
    for line in _lines(text):
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


# --------------------------------------------------------------------------------------------
# the smoke test (fmcluster.kits.common.SMOKE_PY)

_SMOKE = re.compile(r"fmcluster-smoke\s+(.*)$")


@dataclass(frozen=True)
class SmokeStep:
    step: int
    loss: float
    tokens_per_s: Optional[float]
    host: Optional[str]
    rank: Optional[int]


@dataclass(frozen=True)
class SmokeResult:
    steps: tuple[SmokeStep, ...]
    outcome: Optional[str]  # "ok", "failed", None (no final line)
    reason: Optional[str]  # of a failure
    world_size: Optional[int]
    steps_declared: Optional[int]  # the final line's steps=
    complete: bool  # the final line is there
    errors: tuple[str, ...]

    @property
    def losses(self) -> tuple[float, ...]:
        return tuple(s.loss for s in self.steps)

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.host for s in self.steps if s.host))

    @property
    def tokens_per_s(self) -> Optional[float]:
        """The median rate (the first steps warm up)."""
        rates = [s.tokens_per_s for s in self.steps if s.tokens_per_s is not None and math.isfinite(s.tokens_per_s)]
        return statistics.median(rates) if rates else None

    @property
    def verdict(self) -> Verdict:
        """PASS: the final `ok` line, every loss finite and the last no higher than the first; FAIL
        otherwise (a missing final line is a truncated run)."""
        if self.outcome != "ok" or not self.steps:
            return Verdict.FAIL
        if not all(math.isfinite(loss) for loss in self.losses):
            return Verdict.FAIL
        if self.losses[-1] > self.losses[0]:
            return Verdict.FAIL
        if self.steps_declared is not None and len(self.steps) != self.steps_declared:
            return Verdict.WARN
        return Verdict.PASS


def _fields(rest: str) -> tuple[list[str], dict[str, str]]:
    words: list[str] = []
    fields: dict[str, str] = {}
    for token in rest.split():
        key, sep, value = token.partition("=")
        if sep:
            fields[key] = value
        else:
            words.append(token)
    return words, fields


def parse_smoke(text: str) -> SmokeResult:
    """The smoke test's lines, wherever they sit in a line (torchrun or srun may prefix them)."""
    steps: list[SmokeStep] = []
    errors: list[str] = []
    outcome: Optional[str] = None
    reason: Optional[str] = None
    world: Optional[int] = None
    declared: Optional[int] = None
    for line in text.splitlines():
        match = _SMOKE.search(line)
        if match is None:
            if "Traceback (most recent call last)" in line or re.search(r"\b\w*Error: ", line):
                if len(errors) < 10:
                    errors.append(line.strip()[:300])
            continue
        words, fields = _fields(match.group(1))
        if "step" in fields:
            step = _integer(fields["step"])
            loss = _number(fields.get("loss", ""))
            if step is None or loss is None:
                errors.append(f"unreadable step line: {line.strip()[:200]}")
                continue
            rank = _integer(fields["rank"]) if "rank" in fields else None
            steps.append(SmokeStep(step, loss, _number(fields.get("tokens_per_s", "")), fields.get("host"), rank))
            if not math.isfinite(loss):
                errors.append(f"loss not finite at step {step}: {fields.get('loss')}")
        elif words and words[0] in ("ok", "failed"):
            outcome = words[0]
            world = _integer(fields.get("world_size", "")) if "world_size" in fields else world
            declared = _integer(fields.get("steps", "")) if "steps" in fields else declared
            if outcome == "failed":
                reason = fields.get("reason") or " ".join(words[1:]) or "unknown"
                errors.append(f"smoke test failed: {reason}")
    if outcome is None:
        errors.append("truncated: no final fmcluster-smoke ok/failed line")
    if not steps:
        errors.append("no fmcluster-smoke step lines")
    elif outcome == "ok" and math.isfinite(steps[0].loss) and math.isfinite(steps[-1].loss) \
            and steps[-1].loss > steps[0].loss:
        first, last = steps[0], steps[-1]
        errors.append(f"loss rose: {first.loss:g} at step {first.step}, {last.loss:g} at step {last.step}")
    return SmokeResult(tuple(steps), outcome, reason, world, declared, outcome is not None, tuple(errors))


# --------------------------------------------------------------------------------------------
# files of the kit: markers, detection

_MARKER = re.compile(r"^==> fmcluster node=(\S+) group=(\S+) test=(\S+) <==\s*$")
_GLUED_MARKER = re.compile(r"([^\n])(==> fmcluster node=\S+ group=\S+ test=\S+ <==)")
# Pyxis' progress lines (NVIDIA/pyxis pyxis_slurmstepd.c: slurm_spank_log "pyxis: importing docker
# image: %s" and "pyxis: imported docker image: %s"), which slurmstepd prints outside the step's own
# output, so they land anywhere in the job's file, with or without srun --label's "N: ": not a
# result's lines. (Its failures, "pyxis: failed to import docker image" and the like, stay.)
_PYXIS_PROGRESS = re.compile(r"^(?:\s*\d+: )?pyxis: import(?:ing|ed) docker image: \S+\s*$")


@dataclass(frozen=True)
class NodePart:
    host: Optional[str]  # "all" for a step across nodes; None: text outside any marker
    group: Optional[str]
    test: Optional[str]
    text: str


def split_by_node(text: str) -> tuple[NodePart, ...]:
    """The parts of a kit's output file, at the markers `==> fmcluster node=HOST group=GROUP test=TEST
    <==` (fmcluster.kits.jobs.MARKER). Text before the first marker is a part of its own (host, group and
    test None) where it is not blank; a file without markers is one such part. Pyxis' progress
    lines (_PYXIS_PROGRESS) are left out wherever they are."""
    # a marker glued to the end of an output without its last newline starts a line of its own
    text = _GLUED_MARKER.sub(r"\1\n\2", text)
    parts: list[NodePart] = []
    head: Optional[tuple[str, str, str]] = None
    body: list[str] = []

    def close() -> None:
        chunk = "".join(body)
        if head is not None:
            parts.append(NodePart(head[0], head[1], head[2], chunk))
        elif chunk.strip():
            parts.append(NodePart(None, None, None, chunk))

    for line in text.splitlines(keepends=True):
        if _PYXIS_PROGRESS.match(line):
            continue
        match = _MARKER.match(line.rstrip("\r\n"))
        if match:
            close()
            head = (match.group(1), match.group(2), match.group(3))
            body = []
        else:
            body.append(line)
    close()
    if not parts:
        parts.append(NodePart(None, None, None, text))
    return tuple(parts)


# what may start a line of output before the tool's own text: Open MPI --tag-output "[1,0]<stdout>:",
# srun --label "0: ", torchrun's "[default0]:" or "[rank0]:", and the indentation of a pasted output
_LINE_START = r"^[ \t]*(?:(?:\[[^\]\n]*\](?:<std(?:out|err)>)?:|\d+:)[ \t]*)*"
# each tool's own lines, at the start of a line: a text that only mentions them (a note, a script that
# prints them, the kit's smoke.py) is none of them
# (a whole line of plain words: the source that prints it, quoted or folded into YAML, is not one)
_SMOKE_WORD = r"""[^\s"'\\{}]+"""
_SMOKE_LINE = re.compile(_LINE_START + rf"fmcluster-smoke (?:step=\d+ loss={_SMOKE_WORD}|ok|failed)"
                         rf"(?: {_SMOKE_WORD})*[ \t\r]*$", re.MULTILINE)
_DCGM_JSON = re.compile(_LINE_START + r'\{?\s*"DCGM (?:GPU )?Diagnostic"\s*:\s*\{', re.MULTILINE)
_DCGM_TABLE = re.compile(_LINE_START + r"\|\s*Diagnostic\s+\|\s*Result\s+\|\s*$", re.MULTILINE)
_DCGM_DONE = re.compile(_LINE_START + r"Successfully ran diagnostic for group\.?\s*$", re.MULTILINE)
_FIO_JSON = re.compile(_LINE_START + r'\{?\s*"fio version"\s*:\s*"', re.MULTILINE)
_NCCL_HEAD = re.compile(_LINE_START + r"#\s*(?:nccl-tests version \S+|Collective test starting: \w+_perf|"
                        r"nThread \d+ nGpus \d+ minBytes \d+|size\s+count\s+type\s+redop\b.*\bbusbw\b)",
                        re.MULTILINE)


def detect(text: str) -> Optional[str]:
    """What the text is the output of, from the tool's own lines at the start of a line: "nccl"
    (nccl-tests' header or table header), "dcgm" (dcgmi diag's table header, its JSON document or its
    `Successfully ran diagnostic for group.` line), "fio" (fio's JSON document or its normal report)
    or "smoke" (the smoke test's step or final line); None when it is none of them. A truncated
    output is still recognised by its first lines; a text that only mentions them is not."""
    if _SMOKE_LINE.search(text):
        return "smoke"
    if _DCGM_JSON.search(text) or _DCGM_TABLE.search(text):
        return "dcgm"
    if _FIO_JSON.search(text):
        return "fio"
    if _NCCL_HEAD.search(text):
        return "nccl"
    if _DCGM_DONE.search(text):
        return "dcgm"
    if _FIO_TEXT.search(text):
        return "fio"
    return None


Parsed = Union[NcclResult, DcgmResult, FioResult, SmokeResult]


def parse(text: str) -> Optional[Parsed]:
    """The parser `detect` names, applied; None when the text is none of the four."""
    kind = detect(text)
    if kind == "nccl":
        return parse_nccl_tests(text)
    if kind == "dcgm":
        return parse_dcgm_diag(text)
    if kind == "fio":
        return parse_fio_any(text)
    if kind == "smoke":
        return parse_smoke(text)
    return None
