"""Synthesizing a spec's whole app for the NAME-images tests (tests/cdk/test_images_stack.py,
tests/cdk/test_reference_images.py): its templates by stack, NAME-images also without its
reference images' part (the node images' tests read that)."""

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
    if "images" in made:  # the node images' part here ("images"), the whole template as "images-all"
        made["images-all"] = made["images"]
        made["images"] = node_images_only(made["images"])
    return made


def node_images_only(template: dict) -> dict:
    """NAME-images without its reference images' resources and outputs (the constructs under
    reference-ARCH, fmcluster_cdk.stacks.images), which nothing of the node images refers to."""
    def reference(item: dict) -> bool:
        return "/reference-" in json.dumps(item.get("Metadata", {})) or "reference" in json.dumps(item.get("Value", ""))
    return {**template, "Resources": {k: v for k, v in template["Resources"].items() if not reference(v)},
            "Outputs": {k: v for k, v in template.get("Outputs", {}).items() if not reference(v)}}
