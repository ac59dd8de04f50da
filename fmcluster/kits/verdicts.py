"""`fmcluster verify SPEC RESULTS...`: the acceptance kit's outputs (fmcluster.kits.jobs), parsed
(fmcluster.kits.verify) and held to the cluster's figures (fmcluster.model.expected), per node group and per
node: PASS, WARN or FAIL, with the slow nodes named. Pure: no AWS call.

Sources and details: docs/research-notes.md, "fmcluster/kits/verdicts.py"."""

from __future__ import annotations

import json
import os
import re
import stat
import textwrap
from collections import Counter
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Iterable, Mapping, Optional

from fmcluster.facts import catalog
from fmcluster.facts import node as node_facts
from fmcluster.kits import verify
from fmcluster.kits.verify import Verdict
from fmcluster.model import expected

if TYPE_CHECKING:
    from fmcluster.model.cluster import ClusterModel, NodeGroup


@dataclass(frozen=True)
class Row:
    group: str
    test: str
    node: str  # a host, "all" (a run across nodes or a sum), "-" (not run), or "unknown node (FILE)"
    verdict: Verdict
    measured: Optional[float] = None
    pass_at: Optional[float] = None
    warn_at: Optional[float] = None
    unit: str = ""
    note: str = ""
    source: str = ""  # the results file ("a, b": the files of a sum over nodes); "" for a row of no file
    # the figure above which the measurement is impossible on its path (the physical limit plus
    # fmcluster.model.expected.MEASUREMENT_MARGIN); None without a figure
    impossible_above: Optional[float] = None


@dataclass(frozen=True)
class VerifyReport:
    cluster: str
    rows: tuple[Row, ...]
    error: Optional[str] = None  # a results file that cannot be read: nothing judged
    judged: int = 0  # the files of which a result was judged
    not_judged: tuple[tuple[str, str], ...] = ()  # (file, why) for each file, or part of one, not judged

    @property
    def verdict(self) -> Verdict:
        return verify.worst([r.verdict for r in self.rows])

    def as_dict(self) -> dict[str, object]:
        groups: dict[str, list[dict[str, object]]] = {}
        for row in self.rows:
            groups.setdefault(row.group, []).append({k: (v.value if isinstance(v, Verdict) else v)
                                                     for k, v in asdict(row).items() if k != "group"})
        judged = self.error is None and self.judged > 0
        out: dict[str, object] = {
            "cluster": self.cluster, "verdict": self.verdict.value if judged else None, "judged": self.judged,
            "groups": {g: {"verdict": verify.worst([Verdict(r["verdict"]) for r in rows]).value,
                           "results": rows} for g, rows in groups.items()},
            "not_judged": [{"file": source, "reason": why} for source, why in self.not_judged]}
        if self.error is not None:
            out["error"] = self.error
        return out


def _judged(group: str, test: str, node: str, measured: Optional[float], figure: expected.Expected,
            source: str, note: str = "") -> Row:
    judgement = verify.judge_expected(measured, figure)
    if judgement is None:
        verdict = Verdict.PASS if measured is not None else Verdict.FAIL
        note = note or ("measured, not judged: " + figure.basis if measured is not None else "nothing measured")
        return Row(group, test, node, verdict, measured, unit=figure.unit, note=note, source=source)
    return Row(group, test, node, judgement.verdict, measured, figure.pass_at, figure.warn_at, figure.unit,
               note or judgement.note, source)


def gpu_named(gpu: catalog.Gpu, name: str) -> bool:
    """Whether a GPU's name as a tool prints it is the catalog's GPU. nccl-tests prints the
    driver's name ("NVIDIA H100 80GB HBM3", "NVIDIA GB200", "NVIDIA B300 SXM6 AC"; older drivers
    without "NVIDIA ": "A100-SXM4-40GB"): the catalog's model must be one of its words (so GB200 is
    not B200, GH200 not H200, H800 not H100), a memory size it states must be the catalog's within
    15% (A100 40GB is not A100 80GB), and a GPU the catalog gives NVLink (SXM) is not a PCIe or NVL
    card of the same model."""
    words = [w for w in re.split(r"[^A-Z0-9]+", name.upper()) if w]
    if gpu.name.upper() not in words:
        return False
    sizes = [int(size) for size in re.findall(r"(?<![0-9])([0-9]+)\s*GB\b", name, re.IGNORECASE)]
    if any(abs(size - gpu.memory_gib) > 0.15 * gpu.memory_gib for size in sizes):
        return False
    return gpu.nvlink_gbps is None or not {"PCIE", "NVL"} & set(words)


def _group_gpus(group: NodeGroup) -> str:
    gpu = group.instance.gpu
    model = (gpu.product_name or f"NVIDIA {gpu.name}") if gpu is not None else "no GPU"
    return f"group {group.name} is {group.instance_type}: {group.gpus} x {model}"


def _ran_on(per_node: Counter[str], names: Iterable[str]) -> str:
    counts = " or ".join(str(c) for c in sorted(set(per_node.values())))
    return f"{counts} x {' and '.join(dict.fromkeys(names))}" + (
        f" a node, {len(per_node)} nodes" if len(per_node) > 1 else "")


def nccl_gpus(group: NodeGroup, result: verify.NcclResult) -> tuple[Verdict, str]:
    """The GPUs an nccl-tests run names (its `# Rank` lines) held to the group's: (PASS, "") where
    every rank's GPU is the group's and each node ran the group's GPU count, FAIL naming both
    where not, WARN where the output names none."""
    named = [rank for rank in result.ranks if rank.name]
    if not named:
        return Verdict.WARN, "the output names no GPU (no '# Rank' lines): its GPU model and count are not checked"
    per_node = Counter(rank.host for rank in result.ranks)
    gpu = group.instance.gpu
    if gpu is not None and all(gpu_named(gpu, rank.name) for rank in named) \
            and set(per_node.values()) == {group.gpus}:
        return Verdict.PASS, ""
    return Verdict.FAIL, f"log ran on {_ran_on(per_node, (rank.name for rank in named))}; {_group_gpus(group)}"


def dcgm_gpus(group: NodeGroup, result: verify.DcgmResult) -> tuple[Verdict, str]:
    """The GPUs `dcgmi diag` names (their PCI device IDs) held to the group's, as nccl_gpus."""
    if not result.device_ids:
        return Verdict.WARN, ("the output names no GPU (DCGM 3's JSON lists no device IDs): its GPU model and "
                              "count are not checked")
    gpu = group.instance.gpu
    ids = [int(device, 16) for device in result.device_ids]
    if gpu is not None and all(device in gpu.pci_device_ids for device in ids) and len(ids) == group.gpus:
        return Verdict.PASS, ""

    def name(device: int) -> str:
        known = catalog.gpu_of_pci_device(device)
        return f"{known.product_name} (PCI device {device:04X})" if known else f"PCI device {device:04X}"

    counts = Counter(map(name, ids))
    ran = " and ".join(f"{count} x {model}" for model, count in counts.items())
    return Verdict.FAIL, f"dcgmi diag ran on {ran}; {_group_gpus(group)}"


def _impossible(measured: Optional[float], ceiling: expected.Ceiling, what: str = "") -> str:
    return f"impossible: {what}{_number(measured)} {ceiling.unit} is above {ceiling.describe()}"


def _with(row: Row, verdict: Verdict, note: str) -> Row:
    """The row with a verdict no better than its own and a note before its own."""
    notes = "; ".join(n for n in (note, row.note) if n)
    return replace(row, verdict=verify.worst([row.verdict, verdict]), note=notes)


def _nccl(group: NodeGroup, test: str, node: str, text: str, figure: expected.Expected, source: str) -> Row:
    result = verify.parse_nccl_tests(text)
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
            row = _with(row, Verdict.PASS, f"EFA inferred, the output has no NCCL INFO lines: {_number(result.busbw)} "
                                           f"GB/s is above {ena.describe()}")
        else:
            row = _with(row, Verdict.WARN, "the output does not say whether NCCL used EFA (run with NCCL_DEBUG=INFO), "
                                           f"nor does its {_number(result.busbw)} GB/s: it is within {ena.describe()}")
    return _with(row, gpus, gpus_note) if gpus is Verdict.WARN else row


@dataclass(frozen=True)
class _FioPoint:
    write: Optional[float]  # MB/s
    read: Optional[float]
    source: str
    plain: bool = False  # a plain fio output: a direction it did not run is left out, not failed


def _mbps(bytes_per_s: Optional[float]) -> Optional[float]:
    return None if bytes_per_s is None else round(bytes_per_s / 1e6, 1)


_TOOLS = "nccl-tests (*_perf), dcgmi diag, fio (JSON or text) or the kit's smoke test"
_NOT_A_TOOL = f"not an output of {_TOOLS}"


def _hosts(hosts: tuple[str, ...]) -> str:
    return ",".join(hosts) if len(hosts) <= 4 else f"{hosts[0]}+{len(hosts) - 1} more"


def _fio_test(model: ClusterModel, tests: Mapping[str, expected.Expected], source: str, text: str) -> Optional[str]:
    """Which file system a plain fio output measured: a mount path in its job options (JSON:
    "directory" or "filename"; text: an echoed --directory= or filename=), else a results path with
    the mount's name as a word (".../fsx/fio.json", "fio-scratch.txt"), else the cluster's only fio
    test."""
    candidates = [t for t in ("fio-fsx", "fio-scratch") if t in tests]
    mounts = {"fio-scratch": node_facts.SCRATCH_PATH}
    if model.spec.storage.lustre is not None:
        mounts["fio-fsx"] = model.spec.storage.lustre.mount_path
    paths = re.findall(r'"?(?:directory|filename)"?\s*[=:]\s*"?([^\s",]+)', text)
    for test in candidates:
        mount = mounts.get(test, "").rstrip("/")
        if mount and any(p == mount or p.startswith(mount + "/") for p in paths):
            return test
    words = set(re.split(r"[^a-z0-9]+", source.lower()))  # the results path's words: ".../fsx/fio.json"
    named = [t for t in candidates if os.path.basename(mounts.get(t, "").rstrip("/")).lower() in words]
    if len(named) == 1:
        return named[0]
    return candidates[0] if len(candidates) == 1 else None


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


def unknown_node(source: str) -> str:
    """The NODE of a plain output that does not name its host: the file, said so, not as a host."""
    return f"unknown node ({os.path.basename(source) or source})"


# files that are a kit's, a source or a note, whatever they mention: suffix -> what it is
_NOT_RESULTS = {".py": "a Python source", ".sh": "a shell script", ".sbatch": "an sbatch script",
                ".yaml": "a YAML file", ".yml": "a YAML file", ".md": "a Markdown note",
                ".rst": "a reStructuredText note", ".toml": "a TOML file", ".ipynb": "a notebook",
                ".html": "an HTML page"}


def not_a_result(source: str, text: str) -> Optional[str]:
    """Why a file is not a result whatever it holds (a kit's script, manifest, README or
    expected.json, a source, a note), else None."""
    name = os.path.basename(source)
    suffix = os.path.splitext(name)[1].lower()
    if suffix in _NOT_RESULTS:
        return f"{_NOT_RESULTS[suffix]} ({suffix}): a source, kit or note file, not a result"
    if text.startswith("#!"):
        return "a script (it starts with #!), not a result"
    if name == "expected.json":
        return "the kit's expected figures (expected.json: the node groups it has jobs for), not a result"
    return None


def kit_groups(files: Mapping[str, str]) -> Optional[set[str]]:
    """The node groups the kit had jobs for, from its expected.json among `files` (its
    submit-all.sh copies it into results/; listed as not judged, a kit file); None without one:
    every GPU group is expected."""
    found: Optional[set[str]] = None
    for source, text in files.items():
        if os.path.basename(source) != "expected.json":
            continue
        try:
            figures = json.loads(text)
        except ValueError:
            continue
        if isinstance(figures, dict):
            found = (found or set()) | set(figures)
    return found


def _nccl_group(groups: Mapping[str, NodeGroup], result: verify.NcclResult) -> list[str]:
    """The GPU groups an nccl-tests run can be of: its GPUs' name (the rank lines' "NVIDIA H100 80GB
    HBM3") holds the group's GPU as a word, and it ran the group's GPUs on a node."""
    per_host: dict[str, int] = {}
    for rank in result.ranks:
        per_host[rank.host] = per_host.get(rank.host, 0) + 1
    names = {rank.name for rank in result.ranks}
    return [name for name, group in groups.items()
            if group.instance.gpu is not None and all(gpu_named(group.instance.gpu, n) for n in names)
            and max(per_host.values(), default=0) == group.gpus]


def _plain(model: ClusterModel, figures: Mapping[str, Mapping[str, expected.Expected]],
           groups: Mapping[str, NodeGroup], source: str, text: str) -> tuple[Optional[tuple[str, str, str]], str]:
    """A result outside the kit's markers, recognized by its content: ((group, test, node), "") or
    (None, why it is not judged). The group: the cluster's only GPU group, or for nccl-tests the one
    whose GPU and GPU count its rank lines show. The node: the hosts the output names (nccl-tests'
    rank lines, the smoke test's host=), else "unknown node (FILE)": dcgmi and fio do not print the
    host."""
    kind = verify.detect(text)
    if kind is None:
        return None, ("empty" if not text.strip() else _NOT_A_TOOL)
    result = verify.parse_nccl_tests(text) if kind == "nccl" else None
    matched = _nccl_group(groups, result) if result is not None else []
    if len(figures) == 1:
        group_name = next(iter(figures))
    elif len(matched) == 1:
        group_name = matched[0]
    elif result is not None and result.ranks and not matched:
        per_node = Counter(rank.host for rank in result.ranks)
        return None, (f"an nccl-tests output of {_ran_on(per_node, (rank.name for rank in result.ranks))}: no GPU "
                      f"group of this cluster has that ({', '.join(_group_gpus(g) for g in groups.values())})")
    else:
        return None, (f"a {kind} output without the kit's marker, and the cluster has "
                      f"{len(figures) or 'no'} GPU groups ({', '.join(figures) or '-'}): it does not say which")
    tests = figures[group_name]
    name = unknown_node(source)
    if kind == "smoke":
        hosts = verify.parse_smoke(text).hosts
        return (group_name, kind, _hosts(hosts) if hosts else name), ""
    if kind == "dcgm":
        return (group_name, kind, name), ""
    if kind == "fio":
        test = _fio_test(model, tests, source, text)
        if test is None:
            found = [t for t in tests if t.startswith("fio-")]
            return None, ("an fio output, and the cluster has no fio figure" if not found else
                          f"an fio output that does not say its file system ({' or '.join(found)}): "
                          "name the file after the test or keep fio's --directory in the output")
        return (group_name, test, name), ""
    assert result is not None
    if result.operation is None:
        return None, "an nccl-tests output that does not name its collective (no *_perf name, no table to tell it)"
    if not result.hosts:
        return None, ("an nccl-tests output without its '# Rank' lines: it does not say whether it ran on one "
                      "node or several")
    test = f"nccl-{result.operation}-{'nodes' if len(result.hosts) > 1 else 'node'}"
    if test not in tests:
        return None, f"nccl-tests {result.operation} on {len(result.hosts)} node(s): the cluster has no figure {test}"
    return (group_name, test, _hosts(result.hosts)), ""


_NCCL_RUN_END = re.compile(r"^.*#\s*Avg bus bandwidth\s*:.*$\n?", re.MULTILINE)


def _nccl_runs(text: str) -> list[str]:
    """A plain nccl-tests log cut after each run's `# Avg bus bandwidth` line (a job that runs
    all_reduce_perf, then all_gather_perf, into one file): each run with the lines before it (its
    command line, NCCL's lines); what follows the last is a run of its own only where it is one (a
    run cut short)."""
    runs: list[str] = []
    start = 0
    for end in _NCCL_RUN_END.finditer(text):
        runs.append(text[start:end.end()])
        start = end.end()
    tail = text[start:]
    if not runs or verify.detect(tail) == "nccl":
        runs.append(tail)
    return runs


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
        parts = [verify.NodePart(None, None, None, run)
                 if part.host is None and part.group is None and part.test is None else part
                 for part in verify.split_by_node(text)
                 for run in (_nccl_runs(part.text) if part.host is None and verify.detect(part.text) == "nccl"
                             else [part.text])]
        for part in parts:
            if part.host is None and part.group is None and part.test is None:
                where, reason = _plain(model, figures, groups, source, part.text)
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
                dcgm = verify.parse_dcgm_diag(part.text)
                failed = ", ".join(f"{t.name}: {' '.join(t.messages)[:120]}" for t in dcgm.failed)
                note = failed or ("; ".join(dcgm.errors) if dcgm.errors else "every test passed")
                row = Row(group_name, test, node, dcgm.verdict, note=note, source=source)
                gpus, gpus_note = dcgm_gpus(group, dcgm)
                rows.append(_with(row, gpus, gpus_note))
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
                measured = verify.parse_fio_any(part.text)
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
            slow = verify.slow_nodes(per_node, None, 0.8)  # against the group's median
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
                slow = verify.slow_nodes(busbw, peak, tests[test].warn_ratio)
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
        elif noted := [r for r in reasons if r not in ("empty", _NOT_A_TOOL)]:
            # a part that is some tool's output, not judged; text around the results (a job's own
            # lines before the first marker) is no result and goes unsaid
            not_judged.append((source, "a part of it: " + "; ".join(noted)))
    return VerifyReport(model.name, tuple(rows), judged=len(judged_files), not_judged=tuple(not_judged))


def _number(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:,.1f}".rstrip("0").rstrip(".")


WIDTH = 100  # the text table's lines fit a terminal or a review tool this wide
NARROWEST_NODE = 24  # a host list wraps after a comma no narrower than this


def _host_lines(cell: str, width: int) -> list[str]:
    """A NODE cell on lines of at most `width`, a host list broken after a comma, "unknown node
    (FILE)" at its spaces (one name longer than that stays whole)."""
    lines = [""]
    for piece in re.findall(r"[^, ]+[, ]?|[, ]", cell):
        if lines[-1] and len(lines[-1]) + len(piece.rstrip(" ")) > width:
            lines[-1] = lines[-1].rstrip(" ")
            lines.append(piece)
        else:
            lines[-1] += piece
    return [line.rstrip(" ") for line in lines]


def render_text(report: VerifyReport) -> str:
    """The verdicts as a table within WIDTH columns where the cells allow: a long host list wraps
    in its column; under each row the file it comes from (`file: PATH`); where the notes do not
    fit beside the rows, each goes on lines of its own under its row too."""
    table = [("VERDICT", "GROUP", "TEST", "NODE", "MEASURED", "PASS AT")]
    notes = ["NOTE"]
    sources = [""]
    for r in report.rows:
        unit = f" {r.unit}" if r.unit and r.measured is not None else ""
        table.append((r.verdict.value, r.group, r.test, r.node, _number(r.measured) + unit, _number(r.pass_at)))
        notes.append(r.note)
        sources.append(r.source)
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    node = table[0].index("NODE")
    room = WIDTH - 2 * (len(widths) - 1) - sum(w for i, w in enumerate(widths) if i != node)
    widths[node] = min(widths[node], max(room, NARROWEST_NODE))
    beside = all(sum(widths) + 2 * len(widths) + len(note) <= WIDTH for note in notes)
    lines = []
    for row, note, source in zip(table, notes, sources, strict=True):
        cells = [_host_lines(cell, w) if i == node else [cell]
                 for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
        height = max(map(len, cells))
        rows = ["  ".join((cell[k] if k < len(cell) else "").ljust(w) for cell, w in zip(cells, widths, strict=True))
                for k in range(height)]
        if beside:
            rows[0] += "  " + note
        if source:
            rows += textwrap.wrap(f"file: {source}", WIDTH, initial_indent="    ", subsequent_indent="      ",
                                  break_on_hyphens=False, break_long_words=False)
        if not beside and note and row is not table[0]:
            rows += textwrap.wrap(note, WIDTH, initial_indent="    ", subsequent_indent="    ",
                                  break_on_hyphens=False)
        lines += rows
    lines += _not_judged_lines(report)
    counts = {v: sum(1 for r in report.rows if r.verdict is v) for v in Verdict}
    lines.append(f"{report.cluster}: {report.verdict.value} ({counts[Verdict.PASS]} pass, {counts[Verdict.WARN]} "
                 f"warn, {counts[Verdict.FAIL]} fail)")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _not_judged_lines(report: VerifyReport) -> list[str]:
    """The section of the files not judged: each file, and under it why."""
    if not report.not_judged:
        return []
    lines = [f"NOT JUDGED ({len(report.not_judged)} file{'s' if len(report.not_judged) > 1 else ''})"]
    for source, why in report.not_judged:
        lines.append("  " + source)
        lines += textwrap.wrap(why, WIDTH, initial_indent="    ", subsequent_indent="    ",
                               break_on_hyphens=False, break_long_words=False)
    return lines


def render_json(report: VerifyReport) -> str:
    return json.dumps(report.as_dict(), indent=2) + "\n"


# ---- the command ---------------------------------------------------------------------------

FORMATS = ("text", "json")
MAX_RESULT_BYTES = 64 * 1024 * 1024  # a results file larger than this is not read


def _walk(path: str) -> list[str]:
    """A file, or every file under a directory (recursively, in name order)."""
    if not os.path.isdir(path):
        return [path]
    found: list[str] = []
    for root, dirs, names in os.walk(path):
        dirs.sort()
        found.extend(os.path.join(root, name) for name in sorted(names))
    return found


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"))


def _read(path: str) -> tuple[Optional[str], str]:
    """(text, "") of a regular file, or (None, why it is not read). Only a regular file is opened
    (stat first, so a FIFO, a socket or a device is never opened: opening a FIFO blocks until a
    writer comes), non-blocking and checked again once open; one over MAX_RESULT_BYTES is not read.
    OSError where the file cannot be stat'ed or read."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        return None, f"{kind}, not a regular file: not opened"
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):  # replaced between the stat and the open
            return None, "not a regular file once opened: not read"
        if info.st_size > MAX_RESULT_BYTES:
            return None, (f"{info.st_size / 2 ** 20:,.1f} MiB, over the {MAX_RESULT_BYTES // 2 ** 20} MiB a "
                          "result is read to: not read")
        data = handle.read(MAX_RESULT_BYTES + 1)
    if len(data) > MAX_RESULT_BYTES:
        return None, f"over the {MAX_RESULT_BYTES // 2 ** 20} MiB a result is read to (it grew): not read"
    return data.decode("utf-8", errors="replace"), ""


def run(model: ClusterModel, paths: Iterable[str]) -> VerifyReport:
    """`fmcluster verify SPEC RESULTS...`: the results files (and every file under a results
    directory) read and judged; what is not a regular file, or too large, is listed, not judged."""
    files: dict[str, str] = {}
    skipped: list[tuple[str, str]] = []
    for given in paths:
        for path in _walk(given):
            try:
                text, why = _read(path)
            except OSError as exc:
                return VerifyReport(model.name, (), error=f"cannot read {path}: {exc.strerror or exc}",
                                    not_judged=tuple(skipped))
            if text is None:
                skipped.append((path, why))
            else:
                files[path] = text
    return judge_results(model, files, skipped)


def render(report: VerifyReport, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr). JSON: the object on stdout whatever the outcome (an error, nothing judged);
    text: the table with its section of the files not judged, or nothing on stdout and why on
    stderr when nothing was judged."""
    notes = "".join(f"fmcluster verify: {source}: not judged: {why}\n" for source, why in report.not_judged)
    if report.error is not None:
        err = notes + f"fmcluster verify: {report.error}\n"
        return (render_json(report) if fmt == "json" else ""), err
    if not report.judged:
        err = notes + "fmcluster verify: nothing judged: no file holds a result fmcluster recognizes\n"
        return (render_json(report) if fmt == "json" else ""), err
    if fmt == "json":
        return render_json(report), notes
    return render_text(report), ""


def exit_code(report: VerifyReport) -> int:
    """0 when at least one result was judged and none failed; 1 when one failed; 2 when nothing could
    be judged (a results file that cannot be read, or none that holds a result)."""
    if report.error is not None or not report.judged:
        return 2
    return 1 if report.verdict is Verdict.FAIL else 0
