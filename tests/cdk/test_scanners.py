"""The security scanners users run over CloudFormation, on every example's templates and the
pipeline's: checkov (all its CloudFormation checks) and cfripper (on the templates it can parse;
pycfmodel refuses some valid ones). A finding fails the test unless tests/data/scanner-allowlist.yaml
accepts it, each entry with its reason; an entry that no longer matches a finding fails it too.

The scanners live in their own environment (.venv-scan, from requirements-scan.txt: `make
install`): checkov pins networkx and boto3 below the project's. FMCLUSTER_SCAN_BIN names another
folder of their executables (checkov, and the python that has cfripper). Without them the tests
skip, and fail in CI.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.examples import CLEAN_ENV
from tests.support.paths import DATA, EXAMPLES, ROOT, SUPPORT

pytestmark = pytest.mark.synth

SCAN_BIN = Path(os.environ.get("FMCLUSTER_SCAN_BIN", ROOT / ".venv-scan" / "bin"))
ALLOWLIST = DATA / "scanner-allowlist.yaml"
PIPELINE_FILE = "examples/pipeline/pipeline.yaml"
ACCOUNT = "111122223333"  # the examples' account


def scanner(name: str) -> Path:
    path = SCAN_BIN / name
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{path} missing: make install creates .venv-scan")
        pytest.skip(f"{path} missing (make install creates .venv-scan)")
    return path


@pytest.fixture(scope="module")
def outdir(tmp_path_factory, corpus) -> Path:
    """Every example's templates in one folder (each from the run's corpus; the stack names of the
    examples differ), and the pipeline's assembly in another."""
    out = tmp_path_factory.mktemp("scan")
    from fmcluster.deploy.synth import run_app

    (out / "examples").mkdir()
    for example in EXAMPLES:
        for template in corpus.assembly(example).glob("*.template.json"):
            assert not (out / "examples" / template.name).exists(), template.name
            shutil.copyfile(template, out / "examples" / template.name)
    env_before = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(CLEAN_ENV)
        assert run_app({"pipeline": PIPELINE_FILE}, str(out / "pipeline")) == 0
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    return out


def templates(outdir: Path) -> list[Path]:
    return sorted(outdir.rglob("*.template.json"))


def name(outdir: Path, path: Path) -> str:
    """A template's name in findings: its folder under the output (examples, pipeline, a stage's
    assembly) and file name."""
    return path.relative_to(outdir).as_posix()


@pytest.fixture(scope="module")
def checkov_findings(outdir) -> set[str]:
    """`checkov TEMPLATE RESOURCE_ID CHECK` of every failed check, one checkov run over all."""
    checkov = scanner("checkov")
    result = subprocess.run([str(checkov), "--framework", "cloudformation", "--directory", str(outdir), "--output",
                             "json", "--quiet", "--compact", "--skip-download", "--no-fail-on-crash"],
                            capture_output=True, text=True, env={**CLEAN_ENV, "LOG_LEVEL": "ERROR"})
    assert result.returncode in (0, 1), result.stderr[-2000:]
    reports = json.loads(result.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    assert [r["summary"]["parsing_errors"] for r in reports] == [0] * len(reports)
    assert sum(r["summary"]["resource_count"] for r in reports) > 500
    return {f"checkov {name(outdir, Path(f['file_abs_path']))} {f['resource'].split('.', 1)[1]} {f['check_id']}"
            for r in reports for f in r["results"]["failed_checks"]}


@pytest.fixture(scope="module")
def cfripper_scan(outdir) -> dict:
    python = scanner("python")
    result = subprocess.run([str(python), str(SUPPORT / "scanners" / "cfripper_scan.py"), ACCOUNT,
                             *map(str, templates(outdir))], capture_output=True, text=True, env=CLEAN_ENV)
    assert result.returncode == 0, result.stderr[-2000:]
    return {name(outdir, Path(p)): v for p, v in json.loads(result.stdout).items()}


def cfripper_findings(scan: dict) -> set[str]:
    return {f"cfripper {template} {resource} {f['rule']}" for template, v in scan.items()
            for f in v.get("failures", []) for resource in f["resource_ids"] or ["-"]}


def allowlist() -> list[dict]:
    entries = yaml.safe_load(ALLOWLIST.read_text())
    for entry in entries:
        assert set(entry) == {"finding", "reason"}, entry
        assert entry["reason"].strip() and "\n" not in entry["reason"].strip(), entry
    return entries


def unexplained(found: set[str], entries: list[dict]) -> tuple[list[str], list[str]]:
    """(findings no entry accepts, entries that accept no finding)."""
    accepted = {e["finding"]: [f for f in found if fnmatch.fnmatchcase(f, e["finding"])] for e in entries}
    matched = {f for fs in accepted.values() for f in fs}
    return sorted(found - matched), sorted(p for p, fs in accepted.items() if not fs)


def test_cfripper_parses_the_templates_that_matter(cfripper_scan):
    """cfripper's model (pycfmodel) refuses some templates (storage, observability, the Slurm
    clusters': types it does not know); it must read the EKS clusters', the node groups', the
    networks' and the pipeline's, where the IAM is."""
    parsed = {t for t, v in cfripper_scan.items() if "failures" in v}
    assert "pipeline/gpu-clusters-pipeline.template.json" in parsed
    for suffix in ("-network.template.json", ".nested.template.json"):
        assert any(t.endswith(suffix) for t in parsed), suffix
    assert any(t.startswith("examples/") and t.endswith("eks-cluster.template.json") for t in parsed)


def test_no_finding_outside_the_allowlist(checkov_findings, cfripper_scan):
    found = checkov_findings | cfripper_findings(cfripper_scan)
    assert found  # the scanners ran and found what the allow-list explains
    new, stale = unexplained(found, allowlist())
    assert not new, "findings no entry of tests/data/scanner-allowlist.yaml accepts:\n" + "\n".join(new)
    assert not stale, "allow-list entries that match no finding (remove them):\n" + "\n".join(stale)


def test_the_allowlist_is_short():
    assert len(allowlist()) <= 40

