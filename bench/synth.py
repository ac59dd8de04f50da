"""Synthesis speed against the floor every CDK app pays, and growth with node groups.

    python bench/synth.py [--runs N]

Each figure is the median of N round-robin runs in fresh processes, same venv, same cdk.json
context:
- floor: a minimal CDK app (one stack, one S3 bucket) with the same context and App settings as
  fmcluster's own synthesis (CDK's built-in CloudFormation validation off, as in
  `fmcluster_cdk.synthesis.new_app`; cfn-lint checks fmcluster's templates in the tests), importing
  nothing of fmcluster;
- for reference, the same minimal app with CDK's default App settings (validation on);
- `fmcluster synth` of the default example (cdk.json's spec);
- `fmcluster synth` of an EKS spec with 1 and with 64 p5.48xlarge node groups (64: the most a
  Kubernetes plane takes, one Kueue flavor each; AWS PCS takes 10 compute node groups).
Targets: default example <= 2x floor (issue 14: typed CDK resources, which cdk-nag can see, may
cost that much); 64 groups <= 3x 1 group (issue 9).
Writes bench/results/synth.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import exit_code, medians, report, target  # noqa: E402

from fmcluster.deploy.synth import app_context, cdk_json  # noqa: E402
from fmcluster_cdk.feature_flags import FEATURE_FLAGS  # noqa: E402
from fmcluster_cdk.synthesis import APP_SETTINGS  # noqa: E402

# The floor imports nothing of fmcluster's. Its context (cdk.json's, as `fmcluster synth` gives
# its app), the feature flags fmcluster's apps set (fmcluster_cdk.feature_flags) and its App
# settings (fmcluster_cdk.synthesis.APP_SETTINGS, or none: CDK's defaults) come from a JSON file.
MINIMAL_APP = """
import json, sys
import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
given = json.load(open(sys.argv[1]))
app = cdk.App(outdir=sys.argv[2], context=given["context"], post_cli_context=given["flags"], **given["settings"])
s3.Bucket(cdk.Stack(app, "floor"), "Bucket")
app.synth()
"""

RUNS = 5


def spec_with_groups(count: int) -> str:
    groups = "".join(f"""
  - name: gpu{i:02d}
    instance_type: p5.48xlarge
    count: 1
""" for i in range(count))
    return f"""name: bench{count}
region: us-east-1
availability_zone_id: use1-az4
network: {{extra_availability_zone_ids: [use1-az6]}}
storage:
  buckets: [{{name: datasets}}]
  lustre:
    storage_capacity_gib: 4800
    links: [{{bucket: datasets, path: /datasets, import: [NEW]}}]
orchestrator: {{type: eks, admin_role_arn: "arn:aws:iam::111122223333:role/Admin"}}
node_groups:{groups}"""


def measure(runs: int) -> dict:
    py = sys.executable
    default_spec = json.loads((ROOT / "cdk.json").read_text())["context"]["spec"]
    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp, "minimal_app.py")
        app.write_text(MINIMAL_APP)
        one, many = Path(tmp, "one.yaml"), Path(tmp, "many.yaml")
        one.write_text(spec_with_groups(1))
        many.write_text(spec_with_groups(64))
        context = app_context(cdk_json(ROOT))
        same, defaults = Path(tmp, "fmcluster-settings.json"), Path(tmp, "cdk-defaults.json")
        flags = dict(FEATURE_FLAGS)
        same.write_text(json.dumps({"context": context, "flags": flags, "settings": APP_SETTINGS}))
        defaults.write_text(json.dumps({"context": context, "flags": flags, "settings": {}}))
        synth = [py, "-m", "fmcluster", "synth"]
        times = medians({"floor": [py, str(app), str(same)],
                         "floor_cdk_defaults": [py, str(app), str(defaults)],
                         "default": synth + [default_spec, "-o"],
                         "one": synth + [str(one), "-o"],
                         "many": synth + [str(many), "-o"]}, runs, outdir=True)
    wall = {name: t["wall_s"] for name, t in times.items()}
    return {
        "runs": runs,
        "minimal_cdk_app": times["floor"],
        "minimal_cdk_app_cdk_default_settings": times["floor_cdk_defaults"],
        "default_example": times["default"] | {"spec": default_spec},
        "one_node_group": times["one"],
        "sixty_four_node_groups": times["many"],
        "targets": [
            target(wall["default"] / wall["floor"], 2.0, "fmcluster synth default example / minimal CDK app (wall)"),
            target(wall["many"] / wall["one"], 3.0, "64 node groups / 1 node group (wall)"),
        ],
        "for_reference": {"default_example_over_minimal_app_with_cdk_defaults":
                          round(wall["default"] / wall["floor_cdk_defaults"], 2)},
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=RUNS)
    figures = measure(parser.parse_args().runs)
    report(figures, "synth")
    return exit_code(figures["targets"])


if __name__ == "__main__":
    raise SystemExit(main())
