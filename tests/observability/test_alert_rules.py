"""Alert rules (fmcluster/observability/rules/*.yaml): `promtool check rules` on every file,
and every alert explains itself (summary) and says what to do (runbook).

promtool comes from the Debian package `prometheus` (`make tools`). Where it is missing the
check is skipped locally and fails in CI (CI set), so that a CI image without it cannot pass.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from fmcluster import observability
from fmcluster.facts import health as health_facts
from tests.support.paths import DATA, ROOT
from tests.support.tools import promtool

RULE_FILES = observability.rule_files()


def test_there_are_rule_files():
    assert {p.stem for p in RULE_FILES} >= {"gpu", "efa", "node", "lustre", "slurm"}


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_promtool_check_rules(path):
    result = subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_summary_and_runbook():
    alerts = observability.alerts()
    assert alerts
    for alert in alerts:
        annotations = alert.get("annotations", {})
        assert annotations.get("summary"), alert["alert"]
        assert annotations.get("runbook"), alert["alert"]
        assert alert.get("labels", {}).get("severity") in {"critical", "warning", "info"}, alert["alert"]


def test_runbook_anchors_exist():
    """Every runbook annotation points at a heading of docs/runbooks.md."""
    text = (ROOT / observability.RUNBOOKS_DOC).read_text()
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in re.findall(r"^#+ (.+)$", text, re.M)}
    for alert in observability.alerts():
        doc, _, anchor = alert["annotations"]["runbook"].partition("#")
        assert doc == observability.RUNBOOKS_DOC and anchor in anchors, alert["alert"]


def test_alert_names_unique():
    names = [a["alert"] for a in observability.alerts()]
    assert len(names) == len(set(names))


def test_gpu_health_covers_the_issue():
    alerts = {a["alert"]: a for a in observability.alerts()}
    for name in ("GpuXidDrainAndReboot", "GpuXidDrainAndReplace", "GpuDoubleBitEccError",
                 "GpuSingleBitEccRateRising", "GpuRowRemapFailure", "GpuThermalThrottling", "GpuPowerThrottling",
                 "GpuMissing", "EfaRetransmitTimeouts", "EfaRetransmitsHigh", "NodeDown", "LustreClientError"):
        assert name in alerts
    # the XIDs in NVIDIA's catalog's two buckets, as the health check acts on them: reset-class ones
    # reboot the node, replace-class ones replace it (fmcluster.facts.health)
    def xids(name: str) -> set[int]:
        return {int(x) for x in re.findall(r"== (\d+)", alerts[name]["expr"])}

    assert xids("GpuXidDrainAndReboot") == set(health_facts.RESET_XIDS)
    assert xids("GpuXidDrainAndReplace") == set(health_facts.REPLACE_XIDS)
    assert xids("GpuXidOther") == set(health_facts.DRAIN_XIDS)  # every other XID
    assert "fmcluster_expected_gpus" in alerts["GpuMissing"]["expr"]


RULE_TESTS = sorted((DATA / "rules").glob("*_test.yaml"))


def test_there_are_rule_unit_tests():
    assert {p.name for p in RULE_TESTS} >= {"gpu_test.yaml"}


@pytest.mark.parametrize("path", RULE_TESTS, ids=lambda p: p.name)
def test_promtool_rule_unit_tests(path):
    """`promtool test rules`: the alerts fire (and stay quiet) on series labelled the way the
    Slurm nodes' agents and the EKS managed scraper label them (tests/data/rules/)."""
    result = subprocess.run([promtool(), "test", "rules", str(path)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
