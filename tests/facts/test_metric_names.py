"""Every metric name in every PromQL expression of the alert rules (fmcluster/observability/rules)
and the dashboards (fmcluster/observability/dashboards) is one that something fmcluster deploys
really emits: our own collectors RUN here (stand-ins for sinfo and nvidia-smi, a sysfs tree of the
EFA driver's counters) with their output read back; the third-party exporters from vendored lists
with their provenance (tests/data/metrics/); `up` is Prometheus' own. Every expression is first
checked to parse (promtool check rules), then its names are read by a tokenizer that drops
strings, label matchers, ranges, grouping clauses, functions and keywords."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import yaml

from fmcluster import observability
from fmcluster.kubernetes import charts
from fmcluster.node import accounting
from fmcluster.node import shell as node_shell
from tests.support.collectors import run_collector
from tests.support.paths import DATA
from tests.support.tools import promtool

METRICS = DATA / "metrics"
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
            "offset", "inf", "nan"}


def vendored(name: str) -> set[str]:
    return {line.strip() for line in (METRICS / name).read_text().splitlines()
            if line.strip() and not line.startswith("#")}


def expressions() -> list[tuple[str, str]]:
    """(where, PromQL) of every alert rule and every dashboard panel target and variable query."""
    found = []
    for path in observability.rule_files():
        for group in yaml.safe_load(path.read_text())["groups"]:
            found += [(f"{path.name}:{r.get('alert') or r.get('record')}", r["expr"]) for r in group["rules"]]

    def walk(node, where):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "expr" and isinstance(value, str):
                    found.append((where, value))
                elif key == "query" and isinstance(value, str) and value.startswith("label_values("):
                    found.append((where, value[len("label_values("):].rsplit(",", 1)[0]))  # its series selector
                else:
                    walk(value, where)
        elif isinstance(node, list):
            for item in node:
                walk(item, where)

    for path in observability.dashboard_files():
        walk(json.loads(path.read_text()), path.name)
    return found


def grafana_to_promql(expr: str) -> str:
    return re.sub(r"\$\{?__\w+\}?", "5m", expr).replace("$cluster", "demo")


def metric_names(expr: str) -> set[str]:
    text = grafana_to_promql(expr)
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', text)  # strings
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges and subqueries
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)  # label lists
    text = re.sub(r"\boffset\s+\S+", " ", text)
    names = set()
    for match in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", text):
        name, call = match.group(1), match.group(2)
        if not call and name.lower() not in KEYWORDS:
            names.add(name)
    return names


def test_the_tokenizer():
    assert metric_names('max by (cluster, node) (up{job="slurm"}) == 0') == {"up"}
    assert metric_names('sum by (node) (rate(node_x_total{cluster="$cluster", device!~"lo|docker.*"}[5m])) '
                        '- on (node) group_left(gpu) max without (a) (b_c:d offset 1h) > bool 0') == {
        "node_x_total", "b_c:d"}
    assert metric_names("1 - avg(x) / y unless z and w or v") == {"x", "y", "z", "w", "v"}


def test_every_expression_parses(tmp_path):
    rules = {"groups": [{"name": "all", "rules": [{"record": f"fmcluster:expr_{i}", "expr": grafana_to_promql(e)}
                                                  for i, (_, e) in enumerate(expressions())]}]}
    (tmp_path / "all.yaml").write_text(yaml.safe_dump(rules))
    result = subprocess.run([promtool(), "check", "rules", str(tmp_path / "all.yaml")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def textfile_names(text: str) -> set[str]:
    return {re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0) for line in text.splitlines()
            if line and not line.startswith("#")}


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> dict[str, set[str]]:
    """The names our own collectors print, run here."""
    tmp = tmp_path_factory.mktemp("collectors")
    out: dict[str, set[str]] = {}
    sinfo = "printf '%s\\n' 'a1 idle' 'a2 down*' 'a3 drained' 'a4 allocated' 'a5 mixed' 'a6 fail' 'a7 completing'"
    out["slurm"] = textfile_names(run_collector(tmp, "slurm", {"sinfo": sinfo}, STATE_DIR=tmp / "slurm"))
    out["slurm"] |= textfile_names(run_collector(tmp, "slurm", {"sinfo": "exit 1"}, STATE_DIR=tmp / "slurm"))
    smi = """if [[ "$1" == --query-remapped-rows* ]]; then echo '00000000:53:00.0, 0'; exit 0; fi
echo '0, 00000000:53:00.0, GPU-a, 41, 0, 0, 310.5, Not Active, Not Active, Not Active'"""
    out["gpu"] = textfile_names(run_collector(tmp, "gpu", {"nvidia-smi": smi, "journalctl": "exit 1"},
                                              STATE_DIR=tmp / "gpu"))
    # the EFA driver's every counter on one device and port, as sysfs has them
    counters = tmp / "ib/rdmap0s26/ports/1/hw_counters"
    counters.mkdir(parents=True)
    for name in vendored("efa-hw-counters.txt"):
        (counters / name).write_text("0\n")
    out["efa"] = textfile_names(run_collector(tmp, "efa", {}, SYSFS_INFINIBAND=tmp / "ib"))
    # the readiness check's textfile metric (bootstrap/programs/node-ready.sh), on a node with nothing to check
    env = tmp / "node-ready.env"
    env.write_text(f"EXPECTED_GPUS=0\nREQUIRED_MOUNTS=''\nLNET_EFA=0\nREADY_WAIT_SECONDS=0\nTEXTFILE_DIR={tmp}\n"
                   "ENROOT_VERSION=''\n")
    subprocess.run(["bash", str(node_shell.PROGRAMS / "node-ready.sh")],
                   env={"PATH": "/usr/bin:/bin", "NODE_READY_ENV": str(env)}, capture_output=True, text=True)
    out["node-ready"] = set().union(*(textfile_names(p.read_text()) for p in tmp.glob("*.prom")))
    # the continuous health check's (bootstrap/programs/node-health.sh), on a node whose one GPU is gone
    health = tmp / "health"
    health.mkdir()
    env = tmp / "node-health.env"
    env.write_text(f"EXPECTED_GPUS=1\nEXPECTED_EFA=0\nNVLINK=0\nREQUIRED_MOUNTS=''\nREPLACE_XIDS='79'\n"
                   f"NODE_FAULTS=filesystem\nREASON_PREFIX=fmcluster-health\nTEXTFILE_DIR={health}\n"
                   "COMMAND_TIMEOUT=5\nDCGM_LEVEL=1\nDCGM_TIMEOUT=5\nSLURM_BIN=/nonexistent\nREPLACE=0\n"
                   f"FMCLUSTER_LIB={tmp}\n")
    subprocess.run(["bash", str(node_shell.PROGRAMS / "node-health.sh")],
                   env={"PATH": "/usr/bin:/bin", "NODE_HEALTH_ENV": str(env)}, capture_output=True, text=True)
    out["node-health"] = set().union(*(textfile_names(p.read_text()) for p in health.glob("*.prom")))
    # the teams' per-account collector (scripts/slurm/account-usage.sh), a stand-in squeue with a running job
    squeue = tmp / "squeue-bin"
    squeue.mkdir()
    (squeue / "squeue").write_text("#!/bin/sh\necho 'pretrain alice cpu=8,mem=100M,node=1,billing=8,gres/gpu=8'\n")
    (squeue / "squeue").chmod(0o755)
    usage = subprocess.run(["bash", str(accounting.USAGE)], env={"PATH": "/usr/bin:/bin", "SLURM_BIN": str(squeue)},
                           capture_output=True, text=True).stdout
    out["slurm-accounts"] = textfile_names(usage)
    return out


def test_our_collectors_emit_what_they_say(collected):
    assert {"slurm_nodes_down", "slurm_nodes_drain", "slurm_scrape_success"} <= collected["slurm"]
    assert "DCGM_FI_DEV_GPU_TEMP" in collected["gpu"] and "node_amazonefa_retrans_pkts" in collected["efa"]
    assert collected["node-ready"] == {"fmcluster_node_ready"}
    assert collected["node-health"] == {"fmcluster_node_healthy", "fmcluster_node_fault",
                                        "fmcluster_node_health_checked_timestamp_seconds"}
    assert collected["slurm-accounts"] == {"slurm_account_gpus_allocated"}


def emitted(collected: dict[str, set[str]]) -> dict[str, str]:
    """name -> what emits it."""
    sources: dict[str, str] = {"up": "Prometheus (every scrape)"}
    for name in vendored("node-exporter.txt"):
        sources[name] = "node exporter (tests/data/metrics/node-exporter.txt)"
    dcgm = vendored("dcgm-exporter.txt")
    for field, _, _ in charts.DCGM_COUNTERS:
        assert field in dcgm, f"the DCGM exporter knows no field {field}"
        sources[field] = "DCGM exporter (fmcluster.kubernetes.charts.DCGM_COUNTERS)"
    for name in vendored("efa-hw-counters.txt"):
        sources[f"node_amazonefa_{name}"] = "EFA node exporter (tests/data/metrics/efa-hw-counters.txt)"
    for collector, names in collected.items():
        for name in names:
            sources[name] = f"fmcluster collector {collector}"
    # the node bootstrap's own textfile (bootstrap/metrics.sh, setup_metrics): its TYPE lines
    metrics_sh = (node_shell.SCRIPTS / "metrics.sh").read_text()
    written = re.findall(r"# TYPE (fmcluster_\w+) gauge", metrics_sh)
    assert {"fmcluster_expected_gpus", "fmcluster_expected_lustre_mount"} <= set(written)
    for name in written:
        sources[name] = "bootstrap/metrics.sh"
    return sources


def test_every_name_in_the_rules_and_dashboards_is_emitted(collected):
    sources = emitted(collected)
    missing = sorted({(where, name) for where, expr in expressions() for name in metric_names(expr)
                      if name not in sources})
    assert not missing, f"metrics no collector or exporter emits: {missing}"


def test_the_slurm_views_read_the_slurm_collector(collected):
    """The scheduler dashboard and the Slurm rules: every slurm_ name from the collector itself (the
    teams' dashboard: from the teams' per-account collector)."""
    names = {n for _, e in expressions() for n in metric_names(e) if n.startswith("slurm_")}
    ours = collected["slurm"] | collected["slurm-accounts"]
    assert names and names <= ours, names - ours
