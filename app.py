#!/usr/bin/env python3
"""CDK entry point.

    cdk synth -c spec=PATH[,PATH...]        the stacks of one or more clusters (default spec from cdk.json)
    cdk synth -c pipeline=PIPELINE_FILE     the GitOps pipeline stack (NAME-pipeline) that deploys the
                                            clusters a pipeline file lists (examples/pipeline/pipeline.yaml)
"""

import sys

from fmcluster.synth import load_specs, new_app

app = new_app()


def exit_on_errors(diagnostics, ok: bool) -> None:
    for diagnostic in diagnostics:
        print(diagnostic.format(), file=sys.stderr)
    if not ok:
        sys.exit(2)


pipeline_file = app.node.try_get_context("pipeline")
if pipeline_file:
    from fmcluster import pipeline

    loaded = pipeline.load(pipeline_file)
    exit_on_errors(loaded.diagnostics, loaded.ok)
    from stacks.pipeline import pipeline_stack  # noqa: E402

    pipeline_stack(app, loaded.pipeline)
    app.synth()
    sys.exit(0)

paths = [p for p in str(app.node.try_get_context("spec") or "").split(",") if p]
if not paths:
    sys.exit("fmcluster: no spec given; run cdk synth -c spec=examples/p5-pcs.yaml")
specs, diagnostics = load_specs(paths)
exit_on_errors(diagnostics, len(specs) == len(paths))
from stacks.app import build  # noqa: E402

for spec in specs:
    build(app, spec)
app.synth()
