"""Synthesis speed against the floor every CDK app pays, and growth with node groups.

    python bench/synth.py [--runs N]

Measures, each as the median of N runs in fresh processes with the same venv and the same
CDK settings (cdk.json's context):
- floor: a minimal CDK app (one stack, one S3 bucket);
- `fmcluster synth` of the default example (cdk.json's spec);
- `fmcluster synth` of a spec with 1 and with 64 p5.48xlarge node groups.
Prints the figures and ratios against the targets, writes bench/results/synth.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import median_seconds, report  # noqa: E402
from fmcluster.synth import app_context, cdk_json  # noqa: E402
ENV = dict(os.environ, JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20", AWS_EC2_METADATA_DISABLED="true")

MINIMAL_APP = """
import json, sys
import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
context = json.load(open(sys.argv[1]))
app = cdk.App(outdir=sys.argv[2], context=context)
stack = cdk.Stack(app, "floor")
s3.Bucket(stack, "Bucket")
app.synth()
"""


def spec_with_groups(count: int) -> str:
    groups = "".join(f"""
  - name: gpu{i:02d}
    instance_type: p5.48xlarge
    count: 1
""" for i in range(count))
    return f"""name: bench{count}
region: us-east-1
availability_zone_id: use1-az4
storage:
  buckets: [{{name: datasets}}]
  lustre:
    storage_capacity_gib: 4800
    links: [{{bucket: datasets, path: /datasets, import: [NEW]}}]
orchestrator: {{type: pcs}}
node_groups:{groups}"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    py = sys.executable
    default_spec = json.loads((ROOT / "cdk.json").read_text())["context"]["spec"]
    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp, "minimal_app.py")
        app.write_text(MINIMAL_APP)
        one, many = Path(tmp, "one.yaml"), Path(tmp, "many.yaml")
        one.write_text(spec_with_groups(1))
        many.write_text(spec_with_groups(64))
        context = Path(tmp, "context.json")  # the context fmcluster synth gives its app
        context.write_text(json.dumps(app_context(cdk_json(ROOT))))
        floor = median_seconds([py, str(app), str(context)], args.runs, env=ENV, outdir=True)
        default = median_seconds([py, "-m", "fmcluster", "synth", default_spec, "-o"], args.runs, env=ENV, outdir=True)
        t_one = median_seconds([py, "-m", "fmcluster", "synth", str(one), "-o"], args.runs, env=ENV, outdir=True)
        t_many = median_seconds([py, "-m", "fmcluster", "synth", str(many), "-o"], args.runs, env=ENV, outdir=True)
    figures = {
        "minimal_cdk_app_s": round(floor, 3),
        "default_example_s": round(default, 3),
        "one_node_group_s": round(t_one, 3),
        "sixty_four_node_groups_s": round(t_many, 3),
        "ratio_default_to_minimal": round(default / floor, 2),
        "ratio_64_to_1_groups": round(t_many / t_one, 2),
        "targets": {"ratio_default_to_minimal": 1.5, "ratio_64_to_1_groups": 3.0},
    }
    figures["targets_met"] = (figures["ratio_default_to_minimal"] <= 1.5 and figures["ratio_64_to_1_groups"] <= 3.0)
    report(figures, "synth")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
