"""`fmcluster verify SPEC RESULTS...`: the acceptance kit's outputs, and plain outputs of the tools,
parsed and held to the cluster's figures (fmcluster.model.expected): PASS, WARN or FAIL per node
group, test and node.

It owns, bottom up: `judging` (the verdicts and the figure core) and `reading` (lines, numbers,
JSON documents, the Refusal of what a parser does not understand); one parser a tool's output,
each refusing what it does not understand and reading every run of a text: `nccl` (nccl-tests),
`dcgm` (dcgmi diag, text and JSON), `fio` (JSON and text), `smoke` (the kit's smoke test); `files`
(the kit's markers, its own files and expected.json); `detect` (which tool a text is); `gpus` and
`placing` (a log's GPUs, where a plain output belongs); `verdicts` (the rows, the results refused);
`report` (its shape and rendering, untrusted text escaped, strict JSON); `command` (run, render,
exit_code: the only module that reads files). Modules import siblings below them directly,
never this package; the package imports facts, model and the spec's one_line (how a value is
escaped), nothing of another kit, plan or deploy.
Here: the names other code uses.

Sources and details: docs/research-notes.md, "fmcluster/kits/verify/"."""

from __future__ import annotations

from fmcluster.kits.verify.command import FORMATS, MAX_RESULT_BYTES, exit_code, render, run
from fmcluster.kits.verify.dcgm import DcgmResult, DcgmTest, parse_dcgm_diag, parse_dcgm_runs
from fmcluster.kits.verify.detect import Parsed, detect, parse
from fmcluster.kits.verify.files import NodePart, split_by_node
from fmcluster.kits.verify.fio import FioJob, FioResult, parse_fio, parse_fio_any, parse_fio_text
from fmcluster.kits.verify.gpus import gpu_named
from fmcluster.kits.verify.judging import Judgement, Verdict, judge, judge_expected, slow_nodes, worst
from fmcluster.kits.verify.nccl import NcclRank, NcclResult, NcclRow, NcclTiming, parse_nccl_runs, parse_nccl_tests
from fmcluster.kits.verify.reading import Refusal
from fmcluster.kits.verify.report import Row, VerifyReport
from fmcluster.kits.verify.smoke import SmokeResult, SmokeStep, parse_smoke, parse_smoke_runs
from fmcluster.kits.verify.verdicts import judge_results

__all__ = [
    "FORMATS", "MAX_RESULT_BYTES", "DcgmResult", "DcgmTest", "FioJob", "FioResult", "Judgement", "NcclRank",
    "NcclResult", "NcclRow", "NcclTiming", "NodePart", "Parsed", "Refusal", "Row", "SmokeResult", "SmokeStep",
    "Verdict", "VerifyReport", "detect", "exit_code", "gpu_named", "judge", "judge_expected", "judge_results",
    "parse", "parse_dcgm_diag", "parse_dcgm_runs", "parse_fio", "parse_fio_any", "parse_fio_text",
    "parse_nccl_runs", "parse_nccl_tests", "parse_smoke", "parse_smoke_runs", "render", "run", "slow_nodes",
    "split_by_node", "worst",
]
