"""Synthesizing a spec's whole app for the image tests (tests/cdk/test_images_stack.py,
tests/cdk/test_reference_images.py): its templates by stack (NAME-images' node images as "images",
NAME-reference's reference GPU images as "reference")."""

from __future__ import annotations

import json

from tests.support.paths import ROOT


def synthesize(spec, outdir) -> dict[str, dict]:
    """{stack name suffix: template} of the spec's whole app, as fmcluster synthesizes it (a nested
    stack's under its file name)."""
    from fmcluster.deploy.synth import app_context, cdk_json
    from fmcluster_cdk.synthesis import build_app

    build_app([spec], str(outdir), app_context(cdk_json(ROOT))).synth()
    made = {p.name.removesuffix(".template.json").removeprefix(f"{spec.name}-"): json.loads(p.read_text())
            for p in outdir.glob(f"{spec.name}-*.template.json")}
    made.update({p.name: json.loads(p.read_text()) for p in outdir.glob("*.nested.template.json")})
    return made
