"""The verdicts of `fmcluster verify`: the acceptance kit's outputs (fmcluster.kits.jobs), parsed and
held to the cluster's figures (fmcluster.model.expected), per node group and per node: PASS, WARN or
FAIL, with the slow nodes named. Pure: no AWS call, no I/O (the files' texts come in).

Sources and details: docs/research-notes.md, "fmcluster/kits/verify/verdicts.py"."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterable, Mapping, Optional

from fmcluster.kits.verify.dcgm import parse_dcgm_diag
from fmcluster.kits.verify.detect import detect
from fmcluster.kits.verify.files import NodePart, kit_groups, not_a_result, split_by_node
from fmcluster.kits.verify.fio import parse_fio_any
from fmcluster.kits.verify.gpus import dcgm_gpus, nccl_gpus
from fmcluster.kits.verify.judging import Verdict, judge_expected, slow_nodes, worst
from fmcluster.kits.verify.nccl import parse_nccl_tests
from fmcluster.kits.verify.placing import NOT_A_TOOL, nccl_runs, place_plain
from fmcluster.kits.verify.report import Row, VerifyReport, number_text
from fmcluster.kits.verify.smoke import parse_smoke
from fmcluster.model import expected

if TYPE_CHECKING:
    from fmcluster.model.cluster import ClusterModel, NodeGroup


def _judged(group: str, test: str, node: str, measured: Optional[float], figure: expected.Expected,
            source: str, note: str = "") -> Row:
    judgement = judge_expected(measured, figure)
    if judgement is None:
        verdict = Verdict.PASS if measured is not None else Verdict.FAIL
        note = note or ("measured, not judged: " + figure.basis if measured is not None else "nothing measured")
        return Row(group, test, node, verdict, measured, unit=figure.unit, note=note, source=source)
    return Row(group, test, node, judgement.verdict, measured, figure.pass_at, figure.warn_at, figure.unit,
               note or judgement.note, source)


def _impossible(measured: Optional[float], ceiling: expected.Ceiling, what: str = "") -> str:
    return f"impossible: {what}{number_text(measured)} {ceiling.unit} is above {ceiling.describe()}"


def _with(row: Row, verdict: Verdict, note: str) -> Row:
    """The row with a verdict no better than its own and a note before its own."""
    notes = "; ".join(n for n in (note, row.note) if n)
    return replace(row, verdict=worst([row.verdict, verdict]), note=notes)


def _nccl(group: NodeGroup, test: str, node: str, text: str, figure: expected.Expected, source: str) -> Row:
    result = parse_nccl_tests(text)
    base = Row(group.name, test, node, Verdict.FAIL, result.busbw, figure.pass_at, figure.warn_at, "GB/s",
               source=source)
    if not result.complete:
        return replace(base, note="truncated: no summary lines" + (f" ({'; '.join(result.errors)})"
                                                                   if result.errors else ""))
    if result.wrong:
        return replace(base, note=f"{result.wrong} wrong values")
    gpus, gpus_note = nccl_gpus(group, result)
    if gpus is Verdict.FAIL:
        return replace(base, note=gpus_note)
    nodes, ranks = len(result.hosts), len(result.ranks)
    ceiling = expected.nccl_ceiling(group, test, nodes, ranks)
    limit = ceiling.above if ceiling is not None else None
    if ceiling is not None and ceiling.exceeded_by(result.busbw):
        return replace(base, note=_impossible(result.busbw, ceiling), impossible_above=limit)
    # across the nodes of an EFA group that is not one NVLink domain, NCCL must have used EFA
    over_efa = test.endswith("-nodes") and group.efa and not group.one_nvlink_domain
    if over_efa and ((result.ofi_provider and result.ofi_provider != "efa") or result.network == "Socket"):
        return replace(base, impossible_above=limit, note=(
            f"NCCL did not use EFA (network {result.network or '?'}, provider {result.ofi_provider or '?'})"))
    row = replace(_judged(group.name, test, node, result.busbw, figure, source), impossible_above=limit)
    if over_efa and not (result.ofi_provider or result.network) and row.verdict is Verdict.PASS:
        ena = expected.ena_ceiling(group, nodes, ranks)
        if ena.exceeded_by(result.busbw):
            row = _with(row, Verdict.PASS, "EFA inferred, the output has no NCCL INFO lines: "
                                           f"{number_text(result.busbw)} GB/s is above {ena.describe()}")
        else:
            row = _with(row, Verdict.WARN, "the output does not say whether NCCL used EFA (run with NCCL_DEBUG=INFO), "
                                           f"nor does its {number_text(result.busbw)} GB/s: it is within "
                                           f"{ena.describe()}")
    return _with(row, gpus, gpus_note) if gpus is Verdict.WARN else row


@dataclass(frozen=True)
class _FioPoint:
    write: Optional[float]  # MB/s
    read: Optional[float]
    source: str
    plain: bool = False  # a plain fio output: a direction it did not run is left out, not failed


def _mbps(bytes_per_s: Optional[float]) -> Optional[float]:
    return None if bytes_per_s is None else round(bytes_per_s / 1e6, 1)


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
    row = replace(row, impossible_above=ceiling.above)
    cache = " (buffered fio measures the page cache, not the file system: run it with --direct=1)"
    if over:
        host, value = over[0]
        more = f" (and {len(over) - 1} more node{'s' if len(over) > 2 else ''})" if len(over) > 1 else ""
        return replace(row, verdict=Verdict.FAIL, note=_impossible(value, node, f"node {host}'s ") + more + cache)
    if ceiling.exceeded_by(row.measured):
        return replace(row, verdict=Verdict.FAIL, note=_impossible(row.measured, ceiling) + cache)
    return row


def judge_results(model: ClusterModel, files: Mapping[str, str],
                  skipped: Iterable[tuple[str, str]] = ()) -> VerifyReport:
    """The verdicts of the results `files` (path -> text): the kit's output files (parts under its
    node markers) and plain outputs of the tools, recognized by their content; a kit's, source or
    note file (not_a_result) is not judged, whatever it mentions. `skipped`: (file, why) of the
    files not read."""
    figures = expected.expectations(model)
    groups = {g.name: g for g in expected.gpu_groups(model)}
    rows: list[Row] = []
    seen: set[tuple[str, str]] = set()
    fio: dict[tuple[str, str], dict[str, _FioPoint]] = {}
    judged_files: set[str] = set()
    why: dict[str, list[str]] = {}
    for source, text in files.items():
        if (reason := not_a_result(source, text)) is not None:
            why.setdefault(source, []).append(reason)
            continue
        parts = [NodePart(None, None, None, run)
                 if part.host is None and part.group is None and part.test is None else part
                 for part in split_by_node(text)
                 for run in (nccl_runs(part.text) if part.host is None and detect(part.text) == "nccl"
                             else [part.text])]
        for part in parts:
            if part.host is None and part.group is None and part.test is None:
                where, reason = place_plain(model, figures, groups, source, part.text)
                if where is None:
                    why.setdefault(source, []).append(reason)
                    continue
                group_name, test, node = where
            else:
                group_name, test, node = part.group or "-", part.test or "-", part.host or "-"
                if group_name not in groups or test not in figures.get(group_name, {}):
                    why.setdefault(source, []).append(
                        f"the kit's marker names node {node}, group {group_name}, test {test}: not a group "
                        "and test of this cluster's kit")
                    continue
            judged_files.add(source)
            group, figure = groups[group_name], figures[group_name][test]
            seen.add((group_name, test))
            if test.startswith("nccl-"):
                rows.append(_nccl(group, test, node, part.text, figure, source))
            elif test == "dcgm":
                dcgm = parse_dcgm_diag(part.text)
                failed = ", ".join(f"{t.name}: {' '.join(t.messages)[:120]}" for t in dcgm.failed)
                note = failed or ("; ".join(dcgm.errors) if dcgm.errors else "every test passed")
                row = Row(group_name, test, node, dcgm.verdict, note=note, source=source)
                gpus, gpus_note = dcgm_gpus(group, dcgm)
                rows.append(_with(row, gpus, gpus_note))
            elif test == "smoke":
                smoke = parse_smoke(part.text)
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
                measured = parse_fio_any(part.text)
                fio.setdefault((group_name, test), {})[node] = _FioPoint(
                    _mbps(measured.write_bw) if measured.complete else None,
                    _mbps(measured.read_bw) if measured.complete else None, source, part.host is None)
    for (group_name, test), nodes in fio.items():
        figure = figures[group_name][test]
        source = ", ".join(sorted({point.source for point in nodes.values()}))
        for direction in ("write", "read"):
            per_node: dict[str, Optional[float]] = {host: getattr(point, direction) for host, point in nodes.items()}
            if all(point.plain for point in nodes.values()) and all(v == 0 for v in per_node.values()):
                continue  # plain outputs of fio that did not move data this way (a write-only job)
            slow = slow_nodes(per_node, None, 0.8)  # against the group's median
            if test == "fio-fsx":
                values = [v for v in per_node.values() if v is not None]
                total = round(sum(values), 1) if len(values) == len(per_node) else None
                note = (f"{len(per_node)} node{'s' if len(per_node) > 1 else ''} together"
                        + (f"; slow: {', '.join(slow)}" if slow else ""))
                row = _judged(group_name, f"{test}-{direction}", "all", total, figure, source, note=note)
                rows.append(_fsx_possible(model, groups[group_name], row, per_node))
            else:
                for host, value in sorted(per_node.items()):
                    verdict = Verdict.FAIL if value is None else Verdict.WARN if host in slow else Verdict.PASS
                    note = ("nothing measured" if value is None else "below 0.8 of the group's median"
                            if host in slow else "measured, against the group's median")
                    rows.append(Row(group_name, f"{test}-{direction}", host, verdict, value, unit="MB/s", note=note,
                                    source=source))
    covered = kit_groups(files)
    for group_name, tests in figures.items():
        for test, figure in tests.items():
            # a group the kit left out (the team it ran as cannot hold it) has no job to wait for
            if (group_name, test) not in seen and (covered is None or group_name in covered):
                rows.append(Row(group_name, test, "-", Verdict.WARN, unit=figure.unit, note="no result: not run"))
        # the stragglers of the inside-node runs, named per operation
        for operation in expected.NCCL_OPERATIONS:
            test = f"nccl-{operation}-node"
            busbw = {r.node: r.measured for r in rows if r.group == group_name and r.test == test and r.node != "-"}
            peak = tests[test].peak
            if len(busbw) > 1 and peak is not None:
                slow = slow_nodes(busbw, peak, tests[test].warn_ratio)
                if slow:
                    rows.append(Row(group_name, test, "slow", Verdict.FAIL, unit="GB/s",
                                    note=f"below {tests[test].warn_at:g} GB/s: {', '.join(slow)}"))
    order = {g: i for i, g in enumerate(groups)}
    rows.sort(key=lambda r: (order.get(r.group, len(order)), r.test, r.node))
    not_judged = list(skipped)
    for source in files:
        reasons = list(dict.fromkeys(why.get(source, [])))
        if source not in judged_files:
            not_judged.append((source, "; ".join(reasons) or "no result in it"))
        elif noted := [r for r in reasons if r not in ("empty", NOT_A_TOOL)]:
            # a part that is some tool's output, not judged; text around the results (a job's own
            # lines before the first marker) is no result and goes unsaid
            not_judged.append((source, "a part of it: " + "; ".join(noted)))
    return VerifyReport(model.name, tuple(rows), judged=len(judged_files), not_judged=tuple(not_judged))
