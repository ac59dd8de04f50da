#!/usr/bin/env python3
"""CDK entry point: what `cdk synth` runs (cdk.json "app"), the same program `fmcluster synth` runs.

    cdk synth -c spec=PATH[,PATH...]        the stacks of one or more clusters (default spec from cdk.json)
    cdk synth -c pipeline=PIPELINE_FILE     the GitOps pipeline stack (NAME-pipeline) that deploys the
                                            clusters a pipeline file lists (examples/pipeline/pipeline.yaml)

The program itself is fmcluster_cdk/synthesis.py.
"""

import sys

from fmcluster_cdk.synthesis import main

sys.exit(main())
