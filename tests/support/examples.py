"""Synthesizing an example spec (examples/*.yaml) through `fmcluster synth` as a user runs it, without AWS
credentials, and reading the templates it writes. Not a test module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from tests.support.paths import ROOT

CLEAN_ENV = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
CLEAN_ENV.update(AWS_EC2_METADATA_DISABLED="true")


def fmcluster_synth(spec: str | Sequence[str], outdir: Path) -> subprocess.CompletedProcess:
    """`fmcluster synth SPEC... -o OUTDIR`: one spec, or several in one app."""
    specs = [spec] if isinstance(spec, str) else list(spec)
    return subprocess.run([sys.executable, "-m", "fmcluster", "synth", *specs, "-o", str(outdir)],
                          cwd=ROOT, env=CLEAN_ENV, capture_output=True, text=True)


def templates(outdir: Path) -> dict[str, str]:
    """Every template file of the assembly, the nested stacks' (*.nested.template.json) included."""
    return {p.name: p.read_text() for p in sorted(outdir.glob("*.template.json"))}


def in_process(spec) -> dict[str, dict]:
    """The CDK app's templates of a spec, synthesized in this process (fmcluster_cdk.synthesis.build_app)."""
    import tempfile

    from fmcluster.deploy import assembly
    from fmcluster.deploy.synth import app_context, cdk_json
    from fmcluster_cdk.synthesis import build_app

    with tempfile.TemporaryDirectory(prefix="fmcluster-diff-test-") as outdir:
        build_app([spec], outdir, app_context(cdk_json(ROOT))).synth()
        return assembly.templates(outdir)
