"""The parser of `dcgmi diag -r N`: its boxed text table, or its JSON (`-j`: DCGM 3 and DCGM 4
shapes), each table or document of a text on its own. Pure: the text in, frozen DcgmResults out.

A status is one of the five dcgmi prints (NVIDIA/DCGM dcgmi/Diag.cpp, HelperDisplayDiagResult:
`Pass`, `Skip`, `Warn`, `Fail`, `Not Run`), in the text alone (`Pass`), for all GPUs or some
(DCGM 3: `Fail - All`, `Pass - GPUs: 0, 1`) or per entity (DCGM 4: `GPU0: Pass`). Anything else
where a status belongs (`Failed`, `PASS`, DCGM 4's empty status for a result it does not know), a
row of the table that is none of dcgmi's, or a JSON document not of dcgmi's shape is a Refusal:
the result is not judged, never a pass.

Sources and details: docs/research-notes.md, "fmcluster/kits/verify/"."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence

from fmcluster.kits.verify.judging import Verdict, worst
from fmcluster.kits.verify.reading import (
    Refusal,
    as_dict,
    as_list,
    json_depth_ok,
    json_documents_at,
    unprefixed_lines,
    worst_run,
)

STATUSES = {"Pass": "pass", "Fail": "fail", "Warn": "warn", "Skip": "skip", "Not Run": "skip"}
_STATUS_WORDS = "|".join(STATUSES)
# dcgmi's entity groups (NVIDIA/DCGM dcgmlib/src/dcgm_fields.cpp, DcgmFieldsGetEntityGroupString)
_ENTITY = r"(?:GPU|vGPU|Switch|GPU_I|GPU_CI|LINK|CPU|CPU_CORE|ConnectX|None)\d{1,6}"
_TEST_STATUS = re.compile(rf"({_STATUS_WORDS})(?: - (All|GPUs?: \d{{1,6}}(?:, \d{{1,6}})*))?")
_ENTITY_STATUS = re.compile(rf"({_ENTITY}): ({_STATUS_WORDS})")
_DIAGNOSTIC_CODE = re.compile(r"Code: \(\d{1,20}\)")
_MESSAGE_NAME = re.compile(rf"(Info|Warning|Error)(?:: {_ENTITY})?")
_META = {"DCGM Version": "version", "Driver Version Detected": "driver", "GPU Device IDs Detected": "devices"}
_BORDER = re.compile(r"\+[-=+]+\+")
_SECTION = re.compile(r"^[|+]-+\s+([A-Za-z][A-Za-z/]*(?: [A-Za-z/]+)*)\s+-+[+|]-*[+|]$")
_DCGM_JSON_KEYS = ("DCGM GPU Diagnostic", "DCGM Diagnostic")
_KNOWN = ", ".join(STATUSES)


@dataclass(frozen=True)
class DcgmTest:
    name: str  # "GPU Memory", "PCIe", "memory" (DCGM 4 JSON), ...
    category: str  # Deployment, Integration, Hardware, Stress ("" where not given)
    status: str  # pass, fail, warn, skip
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
    refused: tuple[Refusal, ...] = ()  # what it does not understand: the result is not judged
    first_line: int = 1  # of the table or document, in the text parsed
    runs: int = 1  # the tables or documents of the text (parse_dcgm_diag of several: the worst)

    @property
    def verdict(self) -> Verdict:
        """FAIL on any failed test, a runtime error, nothing to read or anything not understood;
        WARN on a warning; otherwise PASS (skipped tests do not fail a node: DCGM skips what a GPU
        lacks)."""
        if self.refused or not self.tests or not self.complete or self.format == "":
            return Verdict.FAIL
        if self.messages and any("error" in m.lower() for m in self.messages):
            return Verdict.FAIL
        return worst([t.verdict for t in self.tests])

    @property
    def failed(self) -> tuple[DcgmTest, ...]:
        return tuple(t for t in self.tests if t.status == "fail")


_STATUS_ORDER = {"pass": 0, "skip": -1, "warn": 2, "fail": 3}


def _combine(statuses: list[str]) -> str:
    if all(s == "skip" for s in statuses):
        return "skip"
    return max(statuses, key=_STATUS_ORDER.__getitem__)


def _cell(value_cell: str) -> str:
    """The text of a value cell: dcgmi pads it with one space before and two after the wrapped
    chunk, and wraps long messages mid-word, so a chunk keeps its own spaces."""
    return value_cell[1:-2] if len(value_cell) >= 3 else value_cell.strip()


class _Table:
    """One dcgmi diag table as its lines are read."""

    def __init__(self, first_line: int) -> None:
        self.first_line = first_line
        self.errors: list[str] = []
        self.messages: list[str] = []
        self.meta: dict[str, str] = {}
        self.category = ""
        # per test: name, category, statuses, wheres, messages
        self.tests: list[tuple[str, str, list[str], list[str], list[str]]] = []
        self.current: Optional[list[str]] = None  # the list whose last message continues on the next row
        self.meta_key: Optional[str] = None  # the metadata row a wrapped value continues
        self.header = self.closed = False
        self.refused: list[Refusal] = []

    def refuse(self, at: int, why: str) -> None:
        self.refused.append(Refusal(at, why))

    def row(self, line: str, at: int) -> None:
        cells = line.split("|")
        if len(cells) < 4 or cells[0] != "" or cells[-1] != "":
            self.refuse(at, f"a row of dcgmi's table is two cells between bars: {line[:120]!r}")
            return
        name, value_cell = cells[1].strip(), "|".join(cells[2:-1])
        value = value_cell.strip()
        if name in _META:
            self.meta_key, self.current = _META[name], None
            self.meta[self.meta_key] = value
            return
        if self.category == "Metadata" or name.startswith("GPU Device"):
            if not name and self.meta_key is not None:  # the wrapped rest of a metadata value
                self.meta[self.meta_key] += value
            else:
                self.meta_key = None
            self.current = None
            return
        self.meta_key = None
        if _MESSAGE_NAME.fullmatch(name):
            self.current = []  # an Info row and its wrapped rest are read, not kept
            if not name.startswith("Info"):
                self.current = self.tests[-1][4] if self.tests else self.messages
            self.current.append(f"{name}: {_cell(value_cell)}")
            return
        if not name and self.current is not None:  # the wrapped rest of a message
            self.current[-1] += _cell(value_cell)
            return
        self.current = None
        if name:
            status = _TEST_STATUS.fullmatch(value)
            if status is None:
                self.refuse(at, f"test {name!r}: status {value!r} is none of dcgmi's ({_KNOWN})")
                return
            self.tests.append((name, self.category, [STATUSES[status.group(1)]], [status.group(2) or ""], []))
            return
        if not self.tests:
            self.refuse(at, f"a row with no test before it: {value[:120]!r}")
            return
        status = _TEST_STATUS.fullmatch(value)
        entity = _ENTITY_STATUS.fullmatch(value)
        if status is not None and status.group(2):  # DCGM 3: the test's result for another set of GPUs
            self.tests[-1][2].append(STATUSES[status.group(1)])
            self.tests[-1][3].append(status.group(2))
        elif entity is not None:  # DCGM 4: one entity's result
            self.tests[-1][2].append(STATUSES[entity.group(2)])
            if entity.group(2) != "Pass":
                self.tests[-1][3].append(entity.group(1))
        elif not _DIAGNOSTIC_CODE.fullmatch(value):  # DCGM 3's "Code: (...)" under a Diagnostic warning
            self.refuse(at, f"test {self.tests[-1][0]!r}: a row that is none of dcgmi's results ({value[:120]!r}: "
                            f"a status is one of {_KNOWN})")

    def result(self) -> DcgmResult:
        tests = tuple(DcgmTest(name, cat, _combine(st), ", ".join(w for w in wh if w), tuple(m.strip() for m in ms))
                      for name, cat, st, wh, ms in self.tests)
        errors = [r.text() for r in self.refused] + self.errors
        if not self.header:
            errors.append("no dcgmi diag table")
        elif not self.closed:
            errors.append("truncated: the table is not closed")
        complete = self.header and self.closed and bool(tests) and not self.refused
        return DcgmResult("text" if self.header else "", self.meta.get("version"), self.meta.get("driver"), tests,
                          tuple(m.strip() for m in self.messages), complete, tuple(errors),
                          _device_ids(self.meta.get("devices", "").split(",")), tuple(self.refused), self.first_line)


def _parse_dcgm_text(text: str) -> list[DcgmResult]:
    tables: list[_Table] = []
    table = _Table(1)
    for at, raw in enumerate(unprefixed_lines(text), 1):
        line = raw.strip()
        if not line:
            continue
        is_header = re.fullmatch(r"\|\s*Diagnostic\s*\|\s*Result\s*\|", line) is not None
        if is_header and table.header:  # a table after another, whole or cut: a run of its own
            tables.append(table)
            table = _Table(at)
        if is_header:
            table.header = True
            continue
        if not table.header or table.closed:
            if line.startswith(("Error", "Failed to")) or "Unable to" in line:
                table.errors.append(line[:300])
            elif table.closed and line.startswith("|"):
                table.refuse(at, "a row after the end of dcgmi's table")
            continue
        if not line.startswith(("|", "+")):
            table.refuse(at, f"a line inside dcgmi's table that is not a row of it: {line[:120]!r}")
            continue
        section = _SECTION.match(line)
        if section:
            table.category, table.current, table.meta_key = section.group(1), None, None
            continue
        if _BORDER.fullmatch(line):
            table.closed = bool(table.tests)
            continue
        table.row(line, at)
    tables.append(table)
    return [t.result() for t in tables]


def _device_ids(values: Sequence[object]) -> tuple[str, ...]:
    """PCI device IDs as DCGM prints them ("2330", "0x2330", or with NVIDIA's vendor ID,
    "233010DE"), each its four hex digits, upper case."""
    found = []
    for value in values:
        text = str(value).strip().upper().removeprefix("0X") if isinstance(value, (str, int)) else ""
        if len(text) == 8 and text.endswith("10DE"):
            text = text[:4]
        if re.fullmatch(r"[0-9A-F]{1,4}", text):
            found.append(text.zfill(4))
    return tuple(found)


def _json_device_ids(document: dict[str, object], root: dict[str, object]) -> tuple[str, ...]:
    """DCGM 4: the GPUs of `entity_groups` (NVIDIA/DCGM testing/python3/dcgm_diag_schema.json:
    entities[].device_id); older: the "GPU Device IDs" list nvvs writes (NvvsJsonStrings.h)."""
    ids: list[object] = []
    for group in map(as_dict, as_list(document.get("entity_groups"))):
        if str(group.get("entity_group", "GPU")).upper() == "GPU":
            ids.extend(as_dict(entity).get("device_id") for entity in as_list(group.get("entities")))
    for holder in (root, document, as_dict(document.get("metadata"))):
        if not ids:
            ids.extend(as_list(holder.get("GPU Device IDs")))
    return _device_ids(ids)


def _text_of(value: object) -> list[str]:
    """The strings of a message value: a string, a list of them, or of objects holding one under
    "warning" or "message" (a JSON whose depth json_depth_ok bounded)."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            stack.append(item.get("warning") or item.get("message") or "")
    return found


def _json_status(value: object) -> Optional[str]:
    return STATUSES.get(value) if isinstance(value, str) else None


def _parse_dcgm_json(document: dict[str, object], line: int) -> DcgmResult:
    refused: list[Refusal] = []

    def refuse(why: str) -> None:
        refused.append(Refusal(line, f"the dcgmi diag JSON from this line: {why}"))

    root_value = next((document[k] for k in _DCGM_JSON_KEYS if k in document), None)
    root = as_dict(root_value)
    if root_value is not None and not isinstance(root_value, dict):
        refuse("its diagnostic is not an object")
    metadata = as_dict(document.get("metadata"))
    version = root.get("version") or metadata.get("version")
    driver = (root.get("Driver Version Detected") or root.get("driver_version_detected")
              or metadata.get("Driver Version Detected"))
    messages = [f"runtime error: {m}" for m in _text_of(root.get("runtime_error") or document.get("runtime_error"))]
    tests: list[DcgmTest] = []
    categories: object = []
    if "test_categories" in root:
        categories = root["test_categories"]
    elif "tests" in document:
        categories = [{"category": "", "tests": document["tests"]}]
    if not isinstance(categories, list):
        refuse("test_categories is not a list")
        categories = []
    for category in categories:
        if not isinstance(category, dict) or not isinstance(category.get("tests"), list):
            refuse("a test category without its list of tests")
            continue
        for test in category["tests"]:
            if test is None:
                continue  # DCGM 3.1 prints nulls between tests
            if not isinstance(test, dict) or not isinstance(test.get("name"), str):
                refuse("a test that is not an object with a name")
                continue
            name = test["name"]
            statuses: list[str] = []
            where: list[str] = []
            texts: list[str] = []
            results = test.get("results", [])
            summary = test.get("test_summary", {})
            if not isinstance(results, list) or not isinstance(summary, dict):
                refuse(f"test {name!r}: its results are not a list of objects")
                continue
            unknown = False
            for result in results:
                status = _json_status(as_dict(result).get("status"))
                if not isinstance(result, dict) or status is None:
                    refuse(f"test {name!r}: status {as_dict(result).get('status')!r} is none of dcgmi's ({_KNOWN})")
                    unknown = True
                    continue
                statuses.append(status)
                entity = result.get("gpu_ids", result.get("gpu_id", result.get("entity_id")))
                if entity is not None and status != "pass":
                    where.append(f"{result.get('entity_group', 'GPU')} {entity}")
                for key in ("warnings", "warning", "error"):
                    texts.extend(_text_of(result.get(key)))
            if "status" in summary:
                status = _json_status(summary["status"])
                if status is None:
                    refuse(f"test {name!r}: summary status {summary['status']!r} is none of dcgmi's ({_KNOWN})")
                    continue
                statuses.append(status)
            texts.extend(_text_of(summary.get("warnings")))
            if unknown:
                continue
            if not statuses:
                refuse(f"test {name!r} has no status")
                continue
            tests.append(DcgmTest(name, str(category.get("category", "")), _combine(statuses), ", ".join(where),
                                  tuple(dict.fromkeys(texts))))
    errors = [r.text() for r in refused] + ([] if tests else ["no tests in the DCGM JSON"])
    return DcgmResult("json", str(version) if version else None, str(driver) if driver else None, tuple(tests),
                      tuple(messages), bool(tests) and not refused, tuple(errors), _json_device_ids(document, root),
                      tuple(refused), line)


def _is_dcgm_document(value: object) -> bool:
    return isinstance(value, dict) and (any(k in value for k in _DCGM_JSON_KEYS) or "tests" in value)


def parse_dcgm_runs(text: str) -> tuple[DcgmResult, ...]:
    """Every table of `dcgmi diag -r N`, or every DCGM document of `dcgmi diag -r N -j` (with
    whatever dcgmi printed around it), in order, each a result of its own: two documents in one
    file (a failed node's before a passing one) are both judged. Per test: pass / fail / warn /
    skip (text: "Pass - All", one line per GPU set; JSON: the worst of the GPUs' results), with
    DCGM's failure text (text: the Warning / Error rows under the test, the wrapped lines joined
    back). A document cut short is a result of its own, incomplete."""
    if not (re.search(r'"DCGM (GPU )?Diagnostic"\s*:', text) or (
            re.search(r"^\s*\{\s*$", text, re.MULTILINE) and "| Diagnostic" not in text)):
        return tuple(_parse_dcgm_text(text))
    documents, errors, broken = json_documents_at(text)
    results: list[DcgmResult] = []
    for document in documents:
        if not _is_dcgm_document(document.value):
            continue
        if not json_depth_ok(document.value):
            refusal = Refusal(document.line, "the dcgmi diag JSON from this line nests deeper than dcgmi writes")
            results.append(DcgmResult("json", None, None, (), (), False, (refusal.text(),), (), (refusal,),
                                      document.line))
            continue
        results.append(_parse_dcgm_json(as_dict(document.value), document.line))
    if broken or not results:
        results.append(DcgmResult("json" if results else "", None, None, (), (), False,
                                  tuple(errors) or ("no DCGM JSON document",)))
    return tuple(results)


def _badness(result: DcgmResult) -> tuple[int, int]:
    rank = {Verdict.PASS: 0, Verdict.WARN: 1, Verdict.FAIL: 2}[result.verdict]
    return (3 if result.refused else rank, -result.first_line)


def parse_dcgm_diag(text: str) -> DcgmResult:
    """The text's one table or document (parse_dcgm_runs); of several, the worst (one not
    understood, then a failure, then a warning), its errors saying how many there are."""
    return worst_run(parse_dcgm_runs(text), _badness, "DCGM results")
