"""The parser of `dcgmi diag -r N`: its boxed text table, or its JSON (`-j`: DCGM 3 and DCGM 4
shapes). Pure: the text in, a frozen DcgmResult out.

Sources and details: docs/research-notes.md, "fmcluster/kits/verify/"."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence

from fmcluster.kits.verify.judging import Verdict, worst
from fmcluster.kits.verify.reading import as_dict, as_list, json_documents, unprefixed_lines


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
    for raw in unprefixed_lines(text):
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
    for group in map(as_dict, as_list(document.get("entity_groups"))):
        if str(group.get("entity_group", "GPU")).upper() == "GPU":
            ids.extend(as_dict(entity).get("device_id") for entity in as_list(group.get("entities")))
    for holder in (root, document, as_dict(document.get("metadata"))):
        if not ids:
            ids.extend(as_list(holder.get("GPU Device IDs")))
    return _device_ids(ids)


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
    root = as_dict(document.get("DCGM GPU Diagnostic") or document.get("DCGM Diagnostic"))
    metadata = as_dict(document.get("metadata"))
    version = root.get("version") or metadata.get("version")
    driver = (root.get("Driver Version Detected") or root.get("driver_version_detected")
              or metadata.get("Driver Version Detected"))
    messages = [f"runtime error: {m}" for m in _text_of(root.get("runtime_error") or document.get("runtime_error"))]
    tests: list[DcgmTest] = []
    categories = as_list(root.get("test_categories")) or [{"category": "", "tests": document.get("tests")}]
    for category in map(as_dict, categories):
        for test in map(as_dict, as_list(category.get("tests"))):
            if not test:
                continue  # DCGM 3.1 prints nulls between tests
            statuses: list[str] = []
            where: list[str] = []
            texts: list[str] = []
            for result in map(as_dict, as_list(test.get("results"))):
                status = _dcgm_status(str(result.get("status", "")))
                statuses.append(status)
                entity = result.get("gpu_ids", result.get("gpu_id", result.get("entity_id")))
                if entity is not None and status != "pass":
                    where.append(f"{result.get('entity_group', 'GPU')} {entity}")
                for key in ("warnings", "warning", "error"):
                    texts.extend(_text_of(result.get(key)))
            summary = as_dict(test.get("test_summary"))
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
        documents, errors, broken = json_documents(text)
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
