"""Where a plain output belongs (one outside the kit's markers, recognized by its content): the
cluster's node group, its test and its node, or why it cannot be told; each run of a plain
nccl-tests log (fmcluster.kits.verify.nccl.parse_nccl_runs) placed on its own. Pure."""

from __future__ import annotations

import os
import re
from collections import Counter
from typing import TYPE_CHECKING, Mapping, Optional

from fmcluster.facts import node as node_facts
from fmcluster.kits.verify.detect import detect
from fmcluster.kits.verify.gpus import gpu_named, group_gpus, ran_on
from fmcluster.kits.verify.nccl import NcclResult, parse_nccl_tests
from fmcluster.kits.verify.smoke import parse_smoke_runs
from fmcluster.model import expected

if TYPE_CHECKING:
    from fmcluster.model.cluster import ClusterModel, NodeGroup


_TOOLS = "nccl-tests (*_perf), dcgmi diag, fio (JSON or text) or the kit's smoke test"
NOT_A_TOOL = f"not an output of {_TOOLS}"


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


def unknown_node(source: str) -> str:
    """The NODE of a plain output that does not name its host: the file, said so, not as a host."""
    return f"unknown node ({os.path.basename(source) or source})"


def _nccl_group(groups: Mapping[str, NodeGroup], result: NcclResult) -> list[str]:
    """The GPU groups an nccl-tests run can be of: its GPUs' name (the rank lines' "NVIDIA H100 80GB
    HBM3") holds the group's GPU as a word, and it ran the group's GPUs on a node."""
    per_host: dict[str, int] = {}
    for rank in result.ranks:
        per_host[rank.host] = per_host.get(rank.host, 0) + 1
    names = {rank.name for rank in result.ranks}
    return [name for name, group in groups.items()
            if group.instance.gpu is not None and all(gpu_named(group.instance.gpu, n) for n in names)
            and max(per_host.values(), default=0) == group.gpus]


def place_plain(model: ClusterModel, figures: Mapping[str, Mapping[str, expected.Expected]],
                groups: Mapping[str, NodeGroup], source: str, text: str, nccl: Optional[NcclResult] = None,
                kind: Optional[str] = None) -> tuple[Optional[tuple[str, str, str]], str]:
    """A result outside the kit's markers, recognized by its content: ((group, test, node), "") or
    (None, why it is not judged). The group: the cluster's only GPU group, or for nccl-tests the one
    whose GPU and GPU count its rank lines show. The node: the hosts the output names (nccl-tests'
    rank lines, the smoke test's host=), else "unknown node (FILE)": dcgmi and fio do not print the
    host. `nccl`: the run of nccl-tests to place, where the text holds several (parse_nccl_runs);
    `kind`: what detect says the text is, where the caller knows."""
    kind = "nccl" if nccl is not None else kind or detect(text)
    if kind is None:
        return None, ("empty" if not text.strip() else NOT_A_TOOL)
    result = (nccl or parse_nccl_tests(text)) if kind == "nccl" else None
    matched = _nccl_group(groups, result) if result is not None else []
    if len(figures) == 1:
        group_name = next(iter(figures))
    elif len(matched) == 1:
        group_name = matched[0]
    elif result is not None and result.ranks and not matched:
        per_node = Counter(rank.host for rank in result.ranks)
        return None, (f"an nccl-tests output of {ran_on(per_node, (rank.name for rank in result.ranks))}: no GPU "
                      f"group of this cluster has that ({', '.join(group_gpus(g) for g in groups.values())})")
    else:
        return None, (f"a {kind} output without the kit's marker, and the cluster has "
                      f"{len(figures) or 'no'} GPU groups ({', '.join(figures) or '-'}): it does not say which")
    tests = figures[group_name]
    name = unknown_node(source)
    if kind == "smoke":
        hosts = tuple(dict.fromkeys(host for run in parse_smoke_runs(text) for host in run.hosts))
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
