"""What a text is the output of (nccl-tests, dcgmi diag, fio or the smoke test), from the tool's own
lines at the start of a line, and that tool's parser applied. Pure."""

from __future__ import annotations

import re
from typing import Optional, Union

from fmcluster.kits.verify.dcgm import DcgmResult, parse_dcgm_diag
from fmcluster.kits.verify.fio import FIO_TEXT, FioResult, parse_fio_any
from fmcluster.kits.verify.nccl import NcclResult, parse_nccl_tests
from fmcluster.kits.verify.smoke import SmokeResult, parse_smoke

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
    if FIO_TEXT.search(text):
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
