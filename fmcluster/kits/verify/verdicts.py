"""The verdicts of `fmcluster verify`: the acceptance kit's outputs (fmcluster.kits.jobs), parsed and
held to the cluster's figures (fmcluster.model.expected) and to what their paths can carry, per node
group and per node: PASS, WARN or FAIL, with the slow nodes named; and the results that cannot be
judged (a line a parser does not understand), each with its file, line and why. Pure: no AWS call,
no I/O (the files' texts come in).

Sources and details: docs/research-notes.md, "fmcluster/kits/verify/verdicts.py"."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Optional, Protocol, Sequence, TypeVar

from fmcluster.kits.verify.dcgm import DcgmResult, parse_dcgm_runs
from fmcluster.kits.verify.detect import detect
from fmcluster.kits.verify.files import NodePart, joined, kit_groups, marker_refusals, not_a_result, split_by_node
from fmcluster.kits.verify.fio import FioResult, parse_fio_any
from fmcluster.kits.verify.gpus import dcgm_gpus, nccl_gpus
from fmcluster.kits.verify.judging import Verdict, judge_expected, slow_nodes, worst
from fmcluster.kits.verify.nccl import NcclResult, parse_nccl_runs
from fmcluster.kits.verify.placing import NOT_A_TOOL, place_plain
from fmcluster.kits.verify.reading import Refusal
from fmcluster.kits.verify.report import Checkpoint, Row, VerifyReport, number_text
from fmcluster.kits.verify.smoke import SmokeResult, parse_smoke_runs
from fmcluster.model import expected

if TYPE_CHECKING:
    from fmcluster.model.cluster import ClusterModel, NodeGroup


def _judged(group: str, test: str, node: str, measured: Optional[float], figure: expected.Expected,
            source: str, note: str = "") -> Row:
    if measured is not None and not math.isfinite(measured):
        return Row(group, test, node, Verdict.FAIL, None, figure.pass_at, figure.warn_at, figure.unit,
                   note or f"impossible: {measured} is not a finite figure", source, basis=figure.basis,
                   unmeasured=f"not a finite figure ({measured})")
    judgement = judge_expected(measured, figure)
    if judgement is None:
        verdict = Verdict.PASS if measured is not None else Verdict.FAIL
        note = note or ("measured, not judged: " + figure.basis if measured is not None else "nothing measured")
        return Row(group, test, node, verdict, measured, unit=figure.unit, note=note, source=source,
                   basis=figure.basis, unmeasured="" if measured is not None else "nothing measured")
    return Row(group, test, node, judgement.verdict, measured, figure.pass_at, figure.warn_at, figure.unit,
               note or judgement.note, source, basis=figure.basis,
               unmeasured="" if measured is not None else "nothing measured")


def _impossible(measured: Optional[float], ceiling: expected.Ceiling, what: str = "") -> str:
    return f"impossible: {what}{number_text(measured)} {ceiling.unit} is above {ceiling.describe()}"


def _with(row: Row, verdict: Verdict, note: str) -> Row:
    """The row with a verdict no better than its own and a note before its own."""
    notes = "; ".join(n for n in (note, row.note) if n)
    return replace(row, verdict=worst([row.verdict, verdict]), note=notes)


def _nccl(group: NodeGroup, test: str, node: str, result: NcclResult, figure: expected.Expected,
          source: str) -> Row:
    nodes, ranks = len(result.hosts), len(result.ranks)
    ceiling = expected.nccl_ceiling(group, test, nodes, ranks)
    limit = ceiling.above if ceiling is not None else None
    measured = result.busbw
    base = Row(group.name, test, node, Verdict.FAIL, measured, figure.pass_at, figure.warn_at, "GB/s",
               source=source, impossible_above=limit, basis=figure.basis,
               ceiling=ceiling.describe() if ceiling is not None else "no figure for this path in the catalog",
               unmeasured="" if measured is not None else "no row in the table")
    operation = test[len("nccl-"):].rsplit("-", 1)[0]
    if result.operation_from == "header" and result.operation != operation:
        return replace(base, note=f"the output is {result.operation}_perf's, the kit's marker says {operation}")
    if result.failures:
        return replace(base, note="failed: " + "; ".join(result.failures)[:300])
    if not result.complete:
        return replace(base, note="; ".join(result.errors) or "truncated: no summary lines")
    if result.wrong:
        first = result.wrong_rows[0].size if result.wrong_rows else None
        return replace(base, note=f"{number_text(result.wrong)} wrong values" + (
            f", the first at {first} B" if first is not None else " (# Out of bounds values)"))
    gpus, gpus_note = nccl_gpus(group, result)
    if gpus is Verdict.FAIL:
        return replace(base, note=gpus_note)
    peak = result.peak_busbw
    if peak is not None and not math.isfinite(peak):
        return replace(base, measured=None, unmeasured="a busbw that is not a finite number",
                       note="impossible: a busbw of the table is not a finite number (nan or inf): no measurement is")
    if ceiling is not None and ceiling.exceeded_by(peak):
        at = "" if peak == measured else "a row's "
        return replace(base, note=_impossible(peak, ceiling, at))
    # across the nodes of an EFA group that is not one NVLink domain, NCCL must have used EFA
    over_efa = test.endswith("-nodes") and group.efa and not group.one_nvlink_domain
    if over_efa and ((result.ofi_provider and result.ofi_provider != "efa") or result.network == "Socket"):
        return replace(base, note=f"NCCL did not use EFA (network {result.network or '?'}, provider "
                                  f"{result.ofi_provider or '?'})")
    row = replace(_judged(group.name, test, node, measured, figure, source), impossible_above=limit,
                  ceiling=base.ceiling)
    if over_efa and not (result.ofi_provider or result.network) and row.verdict is Verdict.PASS:
        ena = expected.ena_ceiling(group, nodes, ranks)
        if ena.exceeded_by(measured):
            row = _with(row, Verdict.PASS, "EFA inferred, the output has no NCCL INFO lines: "
                                           f"{number_text(measured)} GB/s is above {ena.describe()}")
        else:
            row = _with(row, Verdict.WARN, "the output does not say whether NCCL used EFA (run with NCCL_DEBUG=INFO), "
                                           f"nor does its {number_text(measured)} GB/s: it is within "
                                           f"{ena.describe()}")
    return _with(row, gpus, gpus_note) if gpus is Verdict.WARN else row


def _dcgm(group: NodeGroup, node: str, result: DcgmResult, source: str) -> Row:
    failed = ", ".join(f"{t.name}: {' '.join(t.messages)[:120]}" for t in result.failed)
    note = failed or ("; ".join(result.errors) if result.errors else "every test passed")
    row = Row(group.name, "dcgm", node, result.verdict, note=note, source=source,
              basis="DCGM's own verdict per test", ceiling="none: DCGM gives verdicts, not a figure",
              unmeasured="dcgmi diag gives a verdict per test, not a figure")
    gpus, gpus_note = dcgm_gpus(group, result)
    return _with(row, gpus, gpus_note)


def _smoke(group: NodeGroup, node: str, result: SmokeResult, source: str) -> Row:
    world = group.max_count * group.gpus
    verdict, note = result.verdict, result.reason or ""
    if verdict is not Verdict.FAIL and result.world_size != world:
        verdict, note = Verdict.FAIL, f"world size {result.world_size}, the group has {world} GPUs"
    if not note:
        note = (f"{len(result.steps)} steps, loss {result.losses[0]:.4g} -> {result.losses[-1]:.4g}"
                if result.steps else "no step")
        resumed = [str(c.step) for c in result.checkpoints if c.resumed]
        if resumed:
            note += f"; stopped by a signal, resumed from its checkpoint of step {', '.join(resumed)}"
        if verdict is Verdict.FAIL and result.errors:
            note = "; ".join(result.errors)[:300]
    rate = result.tokens_per_s
    return Row(group.name, "smoke", node, verdict, rate, unit="tokens/s", note=note, source=source,
               basis=f"finite, falling loss; world size {world}; a run stopped by a signal resumed from its checkpoint",
               ceiling="none: the rate is reported, not judged",
               unmeasured="" if rate is not None else "no step line gives a rate")


CHECKPOINT_BASIS = "the checkpoint's write time and size, reported, not judged: no sourced figure to hold them to"


def _checkpoints(group: NodeGroup, node: str, result: SmokeResult, source: str) -> list[Checkpoint]:
    return [Checkpoint(group.name, node, source, c.step, c.seconds, c.bytes, c.path, c.resumed,
                       "checkpoint" if c.saved_here else "resumed") for c in result.checkpoints]


def _checkpoint_row(checkpoint: Checkpoint) -> Row:
    rate = checkpoint.bytes_per_s
    after = ("the run that saved it is not in this output: told by the run that resumed from it"
             if checkpoint.line == "resumed" else "the next run resumed from it" if checkpoint.resumed
             else "no run resumed from it")
    note = (f"{checkpoint.bytes:,} bytes in {checkpoint.seconds:g} s"
            + (f" ({rate / 1e6:,.1f} MB/s)" if rate is not None else "")
            + f" at step {checkpoint.step}, {checkpoint.path}; {after}")
    return Row(checkpoint.group, "smoke-checkpoint", checkpoint.node, Verdict.PASS, checkpoint.seconds, unit="s",
               note=note, source=checkpoint.source, basis=CHECKPOINT_BASIS,
               ceiling="none: the write time is reported, not judged")


@dataclass(frozen=True)
class _FioPoint:
    write: Optional[float]  # MB/s; None: nothing moved that way, or nothing read (complete False)
    read: Optional[float]
    source: str
    plain: bool = False  # a plain fio output: a direction it did not run is left out, not failed
    refused: bool = False  # not understood: the test's rows that need it are not judged
    complete: bool = True  # fio's output is whole and no job failed
    why: str = ""  # what is wrong with it, where it is not complete


def _mbps(bytes_per_s: float) -> Optional[float]:
    """MB/s of a bandwidth that moved data; None for none (0)."""
    if bytes_per_s == 0:
        return None
    return round(bytes_per_s / 1e6, 1) if math.isfinite(bytes_per_s) else math.inf


def _fio_point(result: FioResult, source: str, plain: bool) -> _FioPoint:
    if not result.complete or result.failed:
        return _FioPoint(None, None, source, plain, bool(result.refused), False,
                         "; ".join(result.errors)[:300] or "fio's output is not complete")
    return _FioPoint(_mbps(result.write_bw), _mbps(result.read_bw), source, plain)


def _fsx_possible(model: ClusterModel, group: NodeGroup, row: Row, per_node: Mapping[str, Optional[float]]) -> Row:
    """The file system's row FAILed as impossible where a node moved more than its network
    carries, or all of them together more than the file system's servers and the nodes' network
    can."""
    node = expected.node_network_ceiling(group)
    servers = expected.lustre_ceiling(model)
    over = [(host, value) for host, value in sorted(per_node.items()) if node.exceeded_by(value)]
    together = expected.Ceiling(node.value * len(per_node), node.unit, f"{len(per_node)} {group.instance_type} "
                                f"node{'s' if len(per_node) > 1 else ''}' network", f"{node.basis}, each")
    ceiling = min((c for c in (servers, together) if c is not None), key=lambda c: c.value)
    row = replace(row, impossible_above=ceiling.above, ceiling=ceiling.describe())
    cache = " (buffered fio measures the page cache, not the file system: run it with --direct=1)"
    if over:
        host, value = over[0]
        more = f" (and {len(over) - 1} more node{'s' if len(over) > 2 else ''})" if len(over) > 1 else ""
        return replace(row, verdict=Verdict.FAIL, note=_impossible(value, node, f"node {host}'s ") + more + cache)
    if ceiling.exceeded_by(row.measured):
        return replace(row, verdict=Verdict.FAIL, note=_impossible(row.measured, ceiling) + cache)
    return row


def _fio_rows(model: ClusterModel, groups: Mapping[str, NodeGroup],
              figures: Mapping[str, Mapping[str, expected.Expected]],
              fio: Mapping[tuple[str, str], Mapping[str, _FioPoint]]) -> list[Row]:
    rows: list[Row] = []
    for (group_name, test), nodes in fio.items():
        figure = figures[group_name][test]
        source = ", ".join(sorted({point.source for point in nodes.values()}))
        usable = {host: point for host, point in nodes.items() if not point.refused}
        for direction in ("write", "read"):
            per_node: dict[str, Optional[float]] = {host: getattr(point, direction) for host, point in usable.items()}
            if all(point.plain and point.complete for point in usable.values()) and \
                    all(v is None for v in per_node.values()):
                continue  # plain outputs of fio that did not move data this way (a write-only job)
            finite = {host: v for host, v in per_node.items() if v is None or math.isfinite(v)}
            slow = slow_nodes(finite, None, 0.8)  # against the group's median
            if test == "fio-fsx":
                if len(usable) < len(nodes):
                    continue  # a node's output is not understood: no sum is judged (it is listed)
                values = [v for v in per_node.values() if v is not None]
                total = round(sum(values), 1) if len(values) == len(per_node) else None
                broken = [f"{host}: {point.why}" for host, point in sorted(usable.items()) if not point.complete]
                note = (f"{len(per_node)} node{'s' if len(per_node) > 1 else ''} together"
                        + (f"; slow: {', '.join(slow)}" if slow else "")
                        + (f"; nothing measured on {'; '.join(broken)}"[:400] if broken else ""))
                row = _judged(group_name, f"{test}-{direction}", "all", total, figure, source, note=note)
                if total is not None and math.isfinite(total):
                    row = _fsx_possible(model, groups[group_name], row, per_node)
                rows.append(row)
                continue
            for host, value in sorted(per_node.items()):
                if value is not None and not math.isfinite(value):
                    verdict, note = Verdict.FAIL, "impossible: not a finite figure"
                else:
                    verdict = Verdict.FAIL if value is None else Verdict.WARN if host in slow else Verdict.PASS
                    note = (("nothing measured" + (f": {usable[host].why}" if usable[host].why else ""))
                            if value is None else "below 0.8 of the group's median"
                            if host in slow else "measured, against the group's median")
                rows.append(Row(group_name, f"{test}-{direction}", host, verdict,
                                value if value is not None and math.isfinite(value) else None, unit="MB/s",
                                note=note, source=nodes[host].source, basis=figure.basis,
                                ceiling=f"none: {figure.basis}",
                                unmeasured="" if value is not None and math.isfinite(value) else note))
    return rows


def _job(test: str) -> str:
    """The kit's job a test is part of (fmcluster.kits.jobs: nccl, dcgm, fio, smoke)."""
    return "nccl" if test.startswith("nccl-") else "fio" if test.startswith("fio-") else test


def _per_node(test: str) -> bool:
    """Whether the kit's job writes one part a node for the test (not one across the nodes)."""
    return test.endswith("-node") or test in ("dcgm",) or test.startswith("fio-")


def _coverage(groups: Mapping[str, NodeGroup], figures: Mapping[str, Mapping[str, expected.Expected]],
              source: str, marked: Iterable[tuple[str, str, str]]) -> tuple[list[Row], set[tuple[str, str]]]:
    """A kit job's output file holds a part for each of its tests, and for a test it runs on each
    node, one a node of the group (the job asks for all of them): where parts are missing, the
    output was cut short (a job killed, a time limit) or a node never answered. A FAIL row per job
    of the file that lacks some, and the tests it covers (not 'not run')."""
    found: dict[tuple[str, str], dict[str, set[str]]] = {}
    for group_name, test, node in marked:
        found.setdefault((group_name, _job(test)), {}).setdefault(test, set()).add(node)
    rows: list[Row] = []
    covered: set[tuple[str, str]] = set()
    for (group_name, job), tests in found.items():
        group = groups[group_name]
        wanted = [t for t in figures[group_name] if _job(t) == job]
        covered.update((group_name, t) for t in wanted)
        gaps = [f"no part for {t}" for t in wanted if t not in tests]
        for test in wanted:
            hosts = tests.get(test, set()) - {"all"}
            if test in tests and _per_node(test) and len(hosts) < group.max_count:
                gaps.append(f"{test} from {len(hosts)} of the group's {group.max_count} nodes")
        if gaps:
            rows.append(Row(group_name, f"{job}-job", "-", Verdict.FAIL,
                            note=f"the kit's {job} job's output is cut short or a node did not answer: "
                                 + "; ".join(gaps[:6]) + (f"; and {len(gaps) - 6} more" if len(gaps) > 6 else ""),
                            source=source, basis=f"the kit's {job} job writes every test of it on every node",
                            unmeasured="parts of the job's output are missing"))
    return rows, covered


@dataclass
class _Judging:
    """What judge_results gathers over the files."""

    rows: list[Row] = field(default_factory=list)
    seen: set[tuple[str, str]] = field(default_factory=set)
    fio: dict[tuple[str, str], dict[str, _FioPoint]] = field(default_factory=dict)
    judged_files: set[str] = field(default_factory=set)
    why: dict[str, list[str]] = field(default_factory=dict)
    refused: list[tuple[str, str]] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)

    def refuse(self, source: str, part: NodePart, refusals: Iterable[Refusal], what: str) -> None:
        for refusal in list(refusals)[:5]:
            self.refused.append((source, f"line {part.file_line(refusal.line)}: {refusal.why} ({what}: not judged)"))


class _Run(Protocol):
    @property
    def refused(self) -> tuple[Refusal, ...]: ...


_R = TypeVar("_R", bound=_Run)


def _each(judging: _Judging, source: str, part: NodePart, results: Sequence[_R], build: Callable[[_R], Row],
          what: str, each: str) -> None:
    """A row for each run (or document) of a part, or its refusals where it is not understood."""
    for index, result in enumerate(results, 1):
        if result.refused:
            judging.refuse(source, part, result.refused, what)
            continue
        row = build(result)
        judging.judged_files.add(source)
        if len(results) > 1:
            row = replace(row, note=f"{each} {index} of {len(results)} in the part; " + row.note)
        judging.rows.append(row)


def _judge_part(judging: _Judging, model: ClusterModel, group: NodeGroup, test: str, node: str, part: NodePart,
                source: str, figure: expected.Expected, nccl: Optional[NcclResult] = None) -> None:
    judging.seen.add((group.name, test))
    where = f"{test} of node {node}" if node != "all" else test
    if test.startswith("nccl-"):
        _each(judging, source, part, (nccl,) if nccl is not None else parse_nccl_runs(part.text),
              lambda run: _nccl(group, test, node, run, figure, source), f"the nccl-tests run of {where}", "run")
    elif test == "dcgm":
        _each(judging, source, part, parse_dcgm_runs(part.text), lambda result: _dcgm(group, node, result, source),
              f"the dcgmi diag result of {where}", "result")
    elif test == "smoke":
        runs = parse_smoke_runs(part.text)
        _each(judging, source, part, runs, lambda run: _smoke(group, node, run, source),
              f"the smoke test of {where}", "run")
        saved = [c for run in runs if not run.refused for c in _checkpoints(group, node, run, source)]
        judging.checkpoints += saved
        judging.rows += [_checkpoint_row(c) for c in saved]
    else:  # fio
        measured = parse_fio_any(part.text)
        if measured.refused:
            judging.refuse(source, part, measured.refused, f"the fio result of {where}")
        else:
            judging.judged_files.add(source)
        judging.fio.setdefault((group.name, test), {})[node] = _fio_point(measured, source, part.host is None)


def _plain(judging: _Judging, model: ClusterModel, figures: Mapping[str, Mapping[str, expected.Expected]],
           groups: Mapping[str, NodeGroup], source: str, part: NodePart) -> None:
    """A part outside the kit's markers, recognized by its content: each nccl-tests run of it placed
    on its own."""
    kind = detect(part.text)
    if kind is None:
        judging.why.setdefault(source, []).append("empty" if not part.text.strip() else NOT_A_TOOL)
        return
    runs: tuple[Optional[NcclResult], ...] = parse_nccl_runs(part.text) if kind == "nccl" else (None,)
    for run in runs:
        if run is not None and run.refused:
            judging.refuse(source, part, run.refused, "its nccl-tests run")
            continue
        where, reason = place_plain(model, figures, groups, source, part.text, run, kind)
        if where is None:
            judging.why.setdefault(source, []).append(reason)
            continue
        group_name, test, node = where
        _judge_part(judging, model, groups[group_name], test, node, part, source, figures[group_name][test], run)


def judge_results(model: ClusterModel, files: Mapping[str, str],
                  skipped: Iterable[tuple[str, str]] = (), unreadable: Iterable[tuple[str, str]] = ()) -> VerifyReport:
    """The verdicts of the results `files` (path -> text): the kit's output files (parts under its
    node markers) and plain outputs of the tools, recognized by their content; a kit's, source or
    note file (not_a_result) is not judged, whatever it mentions. A result a parser does not
    understand is not judged and refused (the report's `refused`: exit 2), with its file and line.
    `skipped`: (file, why) of the files not read, not results; `unreadable`: (file, why) of the
    files and directories that could not be read, refused too."""
    figures = expected.expectations(model)
    groups = {g.name: g for g in expected.gpu_groups(model)}
    judging = _Judging()
    covered_by_jobs: set[tuple[str, str]] = set()
    for source, text in files.items():
        if (reason := not_a_result(source, text)) is not None:
            judging.why.setdefault(source, []).append(reason)
            continue
        if bad := marker_refusals(text):
            judging.refused += [(source, f"{r.text()} (the file is not judged)") for r in bad[:5]]
            continue
        marked: list[tuple[str, str, str]] = []
        for part in joined(split_by_node(text), ("smoke",)):
            if part.host is None and part.group is None and part.test is None:
                _plain(judging, model, figures, groups, source, part)
                continue
            group_name, test, node = part.group or "-", part.test or "-", part.host or "-"
            if group_name not in groups or test not in figures.get(group_name, {}):
                judging.why.setdefault(source, []).append(
                    f"the kit's marker names node {node}, group {group_name}, test {test}: not a group "
                    "and test of this cluster's kit")
                continue
            marked.append((group_name, test, node))
            _judge_part(judging, model, groups[group_name], test, node, part, source, figures[group_name][test])
        rows, covered = _coverage(groups, figures, source, marked)
        judging.rows.extend(rows)
        covered_by_jobs |= covered
    judging.rows.extend(_fio_rows(model, groups, figures, judging.fio))
    rows = judging.rows
    kit = kit_groups(files)
    for group_name, tests in figures.items():
        for test, figure in tests.items():
            # a group the kit left out (the team it ran as cannot hold it) has no job to wait for
            if (group_name, test) not in judging.seen | covered_by_jobs and (kit is None or group_name in kit):
                rows.append(Row(group_name, test, "-", Verdict.WARN, unit=figure.unit, note="no result: not run",
                                basis=figure.basis, unmeasured="no result: not run"))
        # the stragglers of the inside-node runs, named per operation
        for operation in expected.NCCL_OPERATIONS:
            test = f"nccl-{operation}-node"
            busbw: dict[str, Optional[float]] = {}
            for r in rows:
                if r.group == group_name and r.test == test and r.node not in ("-", "slow"):
                    value = r.measured if r.measured is not None and math.isfinite(r.measured) else None
                    known = busbw.get(r.node, value)  # of a node's several runs, the slowest
                    busbw[r.node] = None if value is None or known is None else min(value, known)
            peak = tests[test].peak if test in tests else None
            if len(busbw) > 1 and peak is not None:
                slow = slow_nodes(busbw, peak, tests[test].warn_ratio)
                if slow:
                    rows.append(Row(group_name, test, "slow", Verdict.FAIL, unit="GB/s",
                                    note=f"below {tests[test].warn_at:g} GB/s: {', '.join(slow)}",
                                    basis=tests[test].basis, unmeasured="a row naming the slow nodes"))
    order = {g: i for i, g in enumerate(groups)}
    rows.sort(key=lambda r: (order.get(r.group, len(order)), r.test, r.node))
    not_judged = list(skipped) + list(unreadable)
    refused = list(unreadable) + judging.refused
    refused_files = {source for source, _ in judging.refused}
    for source in files:
        reasons = list(dict.fromkeys(judging.why.get(source, [])))
        if source not in judging.judged_files:
            if source in refused_files and not reasons:
                continue  # listed with its lines not understood

            not_judged.append((source, "; ".join(reasons) or "no result in it"))
        elif noted := [r for r in reasons if r not in ("empty", NOT_A_TOOL)]:
            # a part that is some tool's output, not judged; text around the results (a job's own
            # lines before the first marker) is no result and goes unsaid
            not_judged.append((source, "a part of it: " + "; ".join(noted)))
    return VerifyReport(model.name, tuple(rows), judged=len(judging.judged_files), not_judged=tuple(not_judged),
                        refused=tuple(refused), checkpoints=tuple(judging.checkpoints))
