#!/usr/bin/env python3
"""CDK entry point: `cdk synth -c spec=PATH[,PATH...]` (default spec from cdk.json)."""

import sys

import aws_cdk as cdk

from fmcluster.synth import load_specs

app = cdk.App()
paths = [p for p in str(app.node.try_get_context("spec") or "").split(",") if p]
if not paths:
    sys.exit("fmcluster: no spec given; run cdk synth -c spec=examples/p5-pcs.yaml")
specs, diagnostics = load_specs(paths)
for diagnostic in diagnostics:
    print(diagnostic.format(), file=sys.stderr)
if len(specs) != len(paths):
    sys.exit(2)
from stacks.app import build  # noqa: E402

for spec in specs:
    build(app, spec)
app.synth()
