"""`fmcluster verify SPEC RESULTS...`: the acceptance kit's outputs (fmcluster.kits.jobs), parsed
(fmcluster.kits.verify) and held to the cluster's figures (fmcluster.model.expected), per node group and per
node: PASS, WARN or FAIL, with the slow nodes named. Pure: no AWS call.

Sources and details: docs/research-notes.md, "fmcluster/kits/verdicts.py"."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Iterable, Mapping, Optional

from fmcluster.kits import verify
from fmcluster.kits.verify import Verdict
from fmcluster.model import expected

if TYPE_CHECKING:
    from fmcluster.model.cluster import ClusterModel, NodeGroup


@dataclass(frozen=True)
class Row:
    group: str
    test: str
    node: str  # a host, "all" (a run across nodes or a sum), or "-"
    verdict: Verdict
    measured: Optional[float] = None
    pass_at: Optional[float] = None
    warn_at: Optional[float] = None
    unit: str = ""
    note: str = ""
    source: str = ""  # the results file


@dataclass(frozen=True)
class VerifyReport:
    cluster: str
    rows: tuple[Row, ...]
    error: Optional[str] = None  # a results file that cannot be read: nothing judged

    @property
    def verdict(self) -> Verdict:
        return verify.worst([r.verdict for r in self.rows])

    def as_dict(self) -> dict[str, object]:
        groups: dict[str, list[dict[str, object]]] = {}
        for row in self.rows:
            groups.setdefault(row.group, []).append({k: (v.value if isinstance(v, Verdict) else v)
                                                     for k, v in asdict(row).items() if k != "group"})
        return {"cluster": self.cluster, "verdict": self.verdict.value,
                "groups": {g: {"verdict": verify.worst([Verdict(r["verdict"]) for r in rows]).value,
                               "results": rows} for g, rows in groups.items()}}


def _judged(group: str, test: str, node: str, measured: Optional[float], figure: expected.Expected,
            source: str, note: str = "") -> Row:
    judgement = verify.judge_expected(measured, figure)
    if judgement is None:
        verdict = Verdict.PASS if measured is not None else Verdict.FAIL
        note = note or ("measured, not judged: " + figure.basis if measured is not None else "nothing measured")
        return Row(group, test, node, verdict, measured, unit=figure.unit, note=note, source=source)
    return Row(group, test, node, judgement.verdict, measured, figure.pass_at, figure.warn_at, figure.unit,
               note or judgement.note, source)


def _nccl(group: NodeGroup, test: str, node: str, text: str, figure: expected.Expected, source: str) -> Row:
    result = verify.parse_nccl_tests(text)
    if not result.complete:
        return Row(group.name, test, node, Verdict.FAIL, result.busbw, figure.pass_at, figure.warn_at, "GB/s",
                   "truncated: no summary lines" + (f" ({'; '.join(result.errors)})" if result.errors else ""), source)
    if result.wrong:
        return Row(group.name, test, node, Verdict.FAIL, result.busbw, figure.pass_at, figure.warn_at, "GB/s",
                   f"{result.wrong} wrong values", source)
    # across the nodes of an EFA group that is not one NVLink domain, NCCL must have used EFA
    over_efa = test.endswith("-nodes") and group.efa and not group.one_nvlink_domain
    if over_efa and ((result.ofi_provider and result.ofi_provider != "efa") or result.network == "Socket"):
        return Row(group.name, test, node, Verdict.FAIL, result.busbw, figure.pass_at, figure.warn_at, "GB/s",
                   f"NCCL did not use EFA (network {result.network or '?'}, provider {result.ofi_provider or '?'})",
                   source)
    row = _judged(group.name, test, node, result.busbw, figure, source)
    if over_efa and not (result.ofi_provider or result.network) and row.verdict is Verdict.PASS:
        return Row(row.group, row.test, row.node, Verdict.WARN, row.measured, row.pass_at, row.warn_at, row.unit,
                   "the output does not say whether NCCL used EFA (run with NCCL_DEBUG=INFO)", source)
    return row


@dataclass(frozen=True)
class _FioPoint:
    write: Optional[float]  # MB/s
    read: Optional[float]
    source: str


def _mbps(bytes_per_s: Optional[float]) -> Optional[float]:
    return None if bytes_per_s is None else round(bytes_per_s / 1e6, 1)


def judge_results(model: ClusterModel, files: Mapping[str, str]) -> VerifyReport:
    """The verdicts of the results `files` (path -> text) of the cluster `model`'s kit."""
    figures = expected.expectations(model)
    groups = {g.name: g for g in expected.gpu_groups(model)}
    rows: list[Row] = []
    seen: set[tuple[str, str]] = set()
    fio: dict[tuple[str, str], dict[str, _FioPoint]] = {}
    for source, text in files.items():
        for part in verify.split_by_node(text):
            group_name, test = part.group, part.test
            if group_name is None and len(groups) == 1:
                group_name = next(iter(groups))
            if test is None:
                kind = verify.detect(part.text)
                test = {"dcgm": "dcgm", "smoke": "smoke"}.get(kind or "", "")
            if group_name not in groups or test not in figures.get(group_name, {}):
                rows.append(Row(group_name or "-", test or "-", part.host or "-", Verdict.WARN,
                                note="not a result of this cluster's kit (unknown group or test, or no marker)",
                                source=source))
                continue
            group, figure, node = groups[group_name], figures[group_name][test], part.host or "-"
            seen.add((group_name, test))
            if test.startswith("nccl-"):
                rows.append(_nccl(group, test, node, part.text, figure, source))
            elif test == "dcgm":
                dcgm = verify.parse_dcgm_diag(part.text)
                failed = ", ".join(f"{t.name}: {' '.join(t.messages)[:120]}" for t in dcgm.failed)
                rows.append(Row(group_name, test, node, dcgm.verdict,
                                note=failed or ("; ".join(dcgm.errors) if dcgm.errors else "every test passed"),
                                source=source))
            elif test == "smoke":
                smoke = verify.parse_smoke(part.text)
                world = group.max_count * group.gpus
                verdict, note = smoke.verdict, smoke.reason or ""
                if verdict is not Verdict.FAIL and smoke.world_size != world:
                    verdict, note = Verdict.FAIL, f"world size {smoke.world_size}, the group has {world} GPUs"
                if not note:
                    note = (f"{len(smoke.steps)} steps, loss {smoke.losses[0]:.4g} -> {smoke.losses[-1]:.4g}"
                            if smoke.steps else "no step")
                rows.append(Row(group_name, test, node, verdict, smoke.tokens_per_s, unit="tokens/s", note=note,
                                source=source))
            else:  # fio
                measured = verify.parse_fio(part.text)
                fio.setdefault((group_name, test), {})[node] = _FioPoint(
                    _mbps(measured.write_bw) if measured.complete else None,
                    _mbps(measured.read_bw) if measured.complete else None, source)
    for (group_name, test), nodes in fio.items():
        figure = figures[group_name][test]
        source = ", ".join(sorted({point.source for point in nodes.values()}))
        for direction in ("write", "read"):
            per_node: dict[str, Optional[float]] = {host: getattr(point, direction) for host, point in nodes.items()}
            slow = verify.slow_nodes(per_node, None, 0.8)  # against the group's median
            if test == "fio-fsx":
                values = [v for v in per_node.values() if v is not None]
                total = round(sum(values), 1) if len(values) == len(per_node) else None
                note = f"{len(per_node)} nodes together" + (f"; slow: {', '.join(slow)}" if slow else "")
                rows.append(_judged(group_name, f"{test}-{direction}", "all", total, figure, source, note=note))
            else:
                for host, value in sorted(per_node.items()):
                    verdict = Verdict.FAIL if value is None else Verdict.WARN if host in slow else Verdict.PASS
                    note = ("nothing measured" if value is None else "below 0.8 of the group's median"
                            if host in slow else "measured, against the group's median")
                    rows.append(Row(group_name, f"{test}-{direction}", host, verdict, value, unit="MB/s", note=note,
                                    source=source))
    for group_name, tests in figures.items():
        for test, figure in tests.items():
            if (group_name, test) not in seen:
                rows.append(Row(group_name, test, "-", Verdict.WARN, unit=figure.unit, note="no result: not run"))
        # the stragglers of the inside-node runs, named per operation
        for operation in expected.NCCL_OPERATIONS:
            test = f"nccl-{operation}-node"
            busbw = {r.node: r.measured for r in rows if r.group == group_name and r.test == test and r.node != "-"}
            peak = tests[test].peak
            if len(busbw) > 1 and peak is not None:
                slow = verify.slow_nodes(busbw, peak, tests[test].warn_ratio)
                if slow:
                    rows.append(Row(group_name, test, "slow", Verdict.FAIL, unit="GB/s",
                                    note=f"below {tests[test].warn_at:g} GB/s: {', '.join(slow)}"))
    order = {g: i for i, g in enumerate(groups)}
    rows.sort(key=lambda r: (order.get(r.group, len(order)), r.test, r.node))
    return VerifyReport(model.name, tuple(rows))


def _number(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:,.1f}".rstrip("0").rstrip(".")


def render_text(report: VerifyReport) -> str:
    table = [("VERDICT", "GROUP", "TEST", "NODE", "MEASURED", "PASS AT", "NOTE")]
    for r in report.rows:
        unit = f" {r.unit}" if r.unit and r.measured is not None else ""
        table.append((r.verdict.value, r.group, r.test, r.node, _number(r.measured) + unit, _number(r.pass_at),
                      r.note))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
             for row in table]
    counts = {v: sum(1 for r in report.rows if r.verdict is v) for v in Verdict}
    lines.append(f"{report.cluster}: {report.verdict.value} ({counts[Verdict.PASS]} pass, {counts[Verdict.WARN]} "
                 f"warn, {counts[Verdict.FAIL]} fail)")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def render_json(report: VerifyReport) -> str:
    return json.dumps(report.as_dict(), indent=2) + "\n"


# ---- the command ---------------------------------------------------------------------------

FORMATS = ("text", "json")
MAX_RESULT_BYTES = 64 * 1024 * 1024  # read of each results file


def run(model: ClusterModel, paths: Iterable[str]) -> VerifyReport:
    """`fmcluster verify SPEC RESULTS...`: the results files read and judged."""
    files: dict[str, str] = {}
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                files[path] = handle.read(MAX_RESULT_BYTES)
        except OSError as exc:
            return VerifyReport(model.name, (), error=f"cannot read {path}: {exc.strerror or exc}")
    return judge_results(model, files)


def render(report: VerifyReport, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr)."""
    if report.error is not None:
        return "", f"fmcluster verify: {report.error}\n"
    return (render_json if fmt == "json" else render_text)(report), ""


def exit_code(report: VerifyReport) -> int:
    """2 when a results file cannot be read, 1 on a FAIL, else 0."""
    if report.error is not None:
        return 2
    return 1 if report.verdict is Verdict.FAIL else 0
