"""Observability content kept in the repository (package data, no CDK): Prometheus alert
rules (``rules/*.yaml``), Grafana dashboards (``dashboards/*.json``) and the scrape
configuration of the EKS managed scraper (``scraper.yaml``).

Every series reaches the workspace with the labels ``cluster`` (the spec's name) and ``node``
(the host name), which the node collector sets as external labels (Slurm control planes) or the
managed scraper's relabelling adds (EKS). The rules group and join on them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

RULES_DIR = Path(__file__).with_name("rules")
DASHBOARDS_DIR = Path(__file__).with_name("dashboards")
SCRAPER_FILE = Path(__file__).with_name("scraper.yaml")
CLUSTER_PLACEHOLDER = "FMCLUSTER_CLUSTER"
RUNBOOKS_DOC = "docs/runbooks.md"


def rule_files() -> list[Path]:
    return sorted(RULES_DIR.glob("*.yaml"))


def rule_file_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def alerts() -> list[dict[str, Any]]:
    """Every alerting rule of every rule file, in file and group order."""
    out: list[dict[str, Any]] = []
    for path in rule_files():
        for group in yaml.safe_load(rule_file_text(path))["groups"]:
            out += [rule for rule in group["rules"] if "alert" in rule]
    return out


def dashboard_files() -> list[Path]:
    return sorted(DASHBOARDS_DIR.glob("*.json"))


def scrape_configuration(cluster: str) -> str:
    """The managed scraper's Prometheus configuration (``scraper.yaml``) for `cluster`."""
    return SCRAPER_FILE.read_text(encoding="utf-8").replace(CLUSTER_PLACEHOLDER, cluster)
