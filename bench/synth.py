"""Synthesis speed against the floor every CDK app pays, and growth with node groups.

    python bench/synth.py [--runs N]

Each figure is the median of N round-robin runs in fresh processes, same venv, same cdk.json
context:
- floor: a minimal CDK app (one stack, one S3 bucket) with the same context and App settings as
  fmcluster's own synthesis (CDK's built-in CloudFormation validation off and no creation stack
  traces, as in `fmcluster_cdk.synthesis.new_app`; cfn-lint checks fmcluster's templates in the tests), importing
  nothing of fmcluster;
- for reference, the same minimal app with CDK's default App settings (validation on);
- `fmcluster synth` of the default example (cdk.json's spec);
- `fmcluster synth` of an EKS spec with 1 and with 64 p5.48xlarge node groups (64: the most a
  Kubernetes plane takes, one Kueue flavor each; AWS PCS takes 10 compute node groups).
- for reference, the module floor: the minimal app that also loads, in Python and in Node.js, the
  aws-cdk-lib service module of every resource type the default example's templates hold (one
  read of each type's L1 class): what any app that makes those resources pays before it makes
  one, and how much of the 2x the modules alone take.
Targets: default example <= 2x floor (issue 14: typed CDK resources, which cdk-nag can see, may
cost that much); 64 groups <= 3x 1 group (issue 9).
Writes bench/results/synth.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import ENV, exit_code, medians, report, target  # noqa: E402

from fmcluster.deploy.synth import app_context, cdk_json  # noqa: E402
from fmcluster_cdk.feature_flags import FEATURE_FLAGS  # noqa: E402
from fmcluster_cdk.synthesis import APP_SETTINGS, DEFAULT_CONTEXT  # noqa: E402

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

# The minimal app, plus one static read of each L1 class its JSON file names (MODULE.CLASS): Python
# imports the module, and Node.js loads its part of aws-cdk-lib, as any app that makes such a
# resource does.
MODULE_FLOOR_APP = MINIMAL_APP.replace("app.synth()", """import importlib
for name in given["classes"]:
    module, cls = name.rsplit(".", 1)
    getattr(importlib.import_module(module), cls).CFN_RESOURCE_TYPE_NAME
app.synth()""")


def l1_classes(assembly: Path) -> list[str]:
    """aws_cdk.MODULE.CfnTYPE of every AWS resource type in an assembly's templates (nested
    ones included), one per service module: AWS::EC2::VPC is aws_cdk.aws_ec2.CfnVPC."""
    import importlib

    by_module: dict[str, str] = {}
    for path in sorted(assembly.glob("*.template.json")):
        for resource in json.loads(path.read_text()).get("Resources", {}).values():
            kind = resource["Type"].split("::")
            if kind[0] != "AWS" or kind[1] in ("CDK", "CloudFormation"):
                continue  # the core module, which the floor loads already
            module = f"aws_cdk.aws_{kind[1].lower()}"
            if module not in by_module and hasattr(importlib.import_module(module), f"Cfn{kind[2]}"):
                by_module[module] = f"{module}.Cfn{kind[2]}"
    return sorted(by_module.values())

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
        app, module_app = Path(tmp, "minimal_app.py"), Path(tmp, "module_floor_app.py")
        app.write_text(MINIMAL_APP)
        module_app.write_text(MODULE_FLOOR_APP)
        one, many = Path(tmp, "one.yaml"), Path(tmp, "many.yaml")
        one.write_text(spec_with_groups(1))
        many.write_text(spec_with_groups(64))
        context = {**DEFAULT_CONTEXT, **app_context(cdk_json(ROOT))}
        same, defaults = Path(tmp, "fmcluster-settings.json"), Path(tmp, "cdk-defaults.json")
        flags = dict(FEATURE_FLAGS)
        same.write_text(json.dumps({"context": context, "flags": flags, "settings": APP_SETTINGS}))
        defaults.write_text(json.dumps({"context": context, "flags": flags, "settings": {}}))
        synth = [py, "-m", "fmcluster", "synth"]
        assembly = Path(tmp, "default-assembly")
        subprocess.run(synth + [default_spec, "-o", str(assembly)], cwd=ROOT, env=ENV, check=True, capture_output=True)
        classes = l1_classes(assembly)
        with_classes = Path(tmp, "module-floor.json")
        with_classes.write_text(json.dumps({"context": context, "flags": flags, "settings": APP_SETTINGS,
                                            "classes": classes}))
        times = medians({"floor": [py, str(app), str(same)],
                         "module_floor": [py, str(module_app), str(with_classes)],
                         "floor_cdk_defaults": [py, str(app), str(defaults)],
                         "default": synth + [default_spec, "-o"],
                         "one": synth + [str(one), "-o"],
                         "many": synth + [str(many), "-o"]}, runs, outdir=True)
    wall = {name: t["wall_s"] for name, t in times.items()}
    return {
        "runs": runs,
        "minimal_cdk_app": times["floor"],
        "minimal_cdk_app_cdk_default_settings": times["floor_cdk_defaults"],
        "module_floor": times["module_floor"] | {"classes": classes},
        "default_example": times["default"] | {"spec": default_spec},
        "one_node_group": times["one"],
        "sixty_four_node_groups": times["many"],
        "targets": [
            target(wall["default"] / wall["floor"], 2.0, "fmcluster synth default example / minimal CDK app (wall)"),
            target(wall["many"] / wall["one"], 3.0, "64 node groups / 1 node group (wall)"),
        ],
        "for_reference": {"default_example_over_minimal_app_with_cdk_defaults":
                          round(wall["default"] / wall["floor_cdk_defaults"], 2),
                          "module_floor_over_minimal_app": round(wall["module_floor"] / wall["floor"], 2),
                          "default_example_over_module_floor": round(wall["default"] / wall["module_floor"], 2)},
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=RUNS)
    figures = measure(parser.parse_args().runs)
    report(figures, "synth")
    return exit_code(figures["targets"])


if __name__ == "__main__":
    raise SystemExit(main())
