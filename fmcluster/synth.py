"""Synthesis: the same cloud assembly from `fmcluster synth SPEC` as from `cdk synth -c spec=SPEC`.

aws_cdk is imported only here, and only when a spec is valid: an invalid spec writes nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterable

from fmcluster import loader
from fmcluster.spec import ClusterSpec

REPO_ROOT = Path(__file__).resolve().parent.parent


def cdk_json(start: Path | None = None) -> dict:
    """The project's cdk.json: the one in the working directory, else the repository's."""
    for candidate in ((start or Path.cwd()) / "cdk.json", REPO_ROOT / "cdk.json"):
        if candidate.is_file():
            return json.loads(candidate.read_text())
    return {}


def app_context(config: dict) -> dict:
    """Context the CDK CLI passes to an app from cdk.json, so in-process synthesis matches it."""
    context = dict(config.get("context", {}))
    context.setdefault("aws:cdk:enable-path-metadata", config.get("pathMetadata", True))
    context.setdefault("aws:cdk:enable-asset-metadata", config.get("assetMetadata", True))
    context.setdefault("aws:cdk:version-reporting", config.get("versionReporting", True))
    return context


def load_specs(paths: Iterable[str]) -> tuple[list[ClusterSpec], list]:
    specs, diagnostics = [], []
    for path in paths:
        result = loader.load(path)
        diagnostics += result.diagnostics
        if result.ok:
            specs.append(result.spec)
    return specs, diagnostics


APP_SETTINGS = {"builtin_cloud_formation_validation": False}  # cdk.App props of every fmcluster app


def new_app(outdir: str | None = None, context: dict | None = None):
    """A CDK app as fmcluster makes them, for `fmcluster synth`, `cdk synth` (app.py) and tests.

    CDK's built-in CloudFormation validation is off: it compiles a WebAssembly rule engine in the
    Node process on every synth (about 5 s of CPU, more than the rest of a cluster's synthesis),
    and cfn-lint already checks every template of every example in the test suite, with more
    rules. `cdk synth` / `fmcluster synth` templates are the same either way."""
    import aws_cdk as cdk

    kwargs = {"outdir": outdir} if outdir else {}
    return cdk.App(context=context, **APP_SETTINGS, **kwargs)


def build_app(specs: list[ClusterSpec], outdir: str | None = None, context: dict | None = None):
    from stacks.app import build

    app = new_app(outdir, context)
    for spec in specs:
        build(app, spec)
    return app


def synth(paths: list[str], outdir: str = "cdk.out") -> int:
    """Validate every spec, then synthesize them all into `outdir`. Returns an exit code."""
    specs, diagnostics = load_specs(paths)
    for d in diagnostics:
        print(d.format(), file=sys.stderr)
    if len(specs) != len(paths):
        return 2
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        print("error: two specs name the same cluster; stack names would clash", file=sys.stderr)
        return 2
    from stacks.cluster import ControlPlaneNotBuilt

    try:
        assembly = build_app(specs, outdir, app_context(cdk_json())).synth()
    except ControlPlaneNotBuilt as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(summary(Path(outdir)))
    return 0


def summary(outdir: Path) -> str:
    """One line per stack of a cloud assembly: resources, a count per main type, template path;
    each nested stack (a node group of NAME-cluster) indented under its parent."""
    from fmcluster import assembly

    lines = []
    for template in assembly.load(outdir).values():
        path = template.path
        resources = template.body.get("Resources", {})
        kinds: dict[str, int] = {}
        for resource in resources.values():
            kind = resource["Type"].split("::", 1)[-1]
            if kind in _SHOWN:
                kinds[kind] = kinds.get(kind, 0) + 1
        shown = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        indent = "  " * template.name.count("/")
        lines.append(f"{indent}{template.name}: {len(resources)} resources ({shown}) -> {path}")
    return "\n".join(lines)


_SHOWN = ("CloudFormation::Stack", "EC2::Subnet", "EC2::NatGateway", "EC2::SecurityGroup", "EC2::PlacementGroup",
          "EC2::LaunchTemplate", "S3::Bucket", "KMS::Key", "FSx::FileSystem", "FSx::DataRepositoryAssociation",
          "PCS::Cluster", "PCS::ComputeNodeGroup", "PCS::Queue", "SageMaker::Cluster", "EKS::Cluster",
          "EKS::Nodegroup", "APS::Workspace", "APS::RuleGroupsNamespace", "APS::Scraper", "Grafana::Workspace",
          "CloudWatch::Alarm")


if __name__ == "__main__":  # `python -m fmcluster.synth cdk.out`: the summary of an assembly
    print(summary(Path(sys.argv[1] if len(sys.argv) > 1 else "cdk.out")))
