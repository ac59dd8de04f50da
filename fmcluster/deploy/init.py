"""`fmcluster init DIR`: a new directory with a cluster project of the user's own, from which
`fmcluster validate`, `fmcluster plan`, `fmcluster synth` and `npx cdk synth` work without a clone
of fmcluster:

    cluster.yaml                      the spec: the chosen control plane and GPU instance type, with
                                      the examples' defaults and a comment on every field
    cdk.json                          runs the installed CDK app (the console script APP_SCRIPT) on
                                      cluster.yaml, with the repository's CDK settings
    .gitignore                        what synthesis and a virtual environment leave behind
    .github/workflows/fmcluster.yml   on every pull request: validate, plan and diff against the
                                      base branch's spec
    requirements.txt                  the fmcluster the project runs (this install's Git commit), which
                                      the workflow and the GitOps pipeline install
    pipeline.yaml                     the GitOps pipeline that deploys cluster.yaml on every merge
                                      (`cdk deploy -c pipeline=pipeline.yaml`, once)
    .github/workflows/deploy.yml      without CodePipeline: on every push to main, deploy cluster.yaml
                                      from GitHub Actions, in a protected environment, with an OIDC role
                                      (fmcluster.deploy.init_workflows)
    .github/oidc-role.yaml            that role's CloudFormation template (`aws cloudformation deploy`,
                                      once)

The spec is written only when it validates: the rules of fmcluster validate are what decides
whether an instance type runs on a control plane (P6e-GB200 only as UltraServers, and not on
HyperPod Slurm), so a combination they refuse is refused here with their message. Nothing is
ever written over: DIR must be new or empty, and each file is created exclusively.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Optional, Sequence

import yaml

from fmcluster.deploy.init_choices import (  # noqa: F401
    DEFAULT_INSTANCE_TYPE,
    DEFAULT_ORCHESTRATOR,
    DEFAULT_REGION,
    ORCHESTRATORS,
    instance_types,
)
from fmcluster.deploy.init_workflows import (
    DEPLOY_WORKFLOW_FILE,
    ROLE_FILE,
    ROLE_VARIABLE,
    deploy_workflow,
    oidc_role,
    role_command,
)
from fmcluster.deploy.init_workflows import environment as deploy_environment
from fmcluster.facts import catalog, controlplanes, regions
from fmcluster.facts.controlplanes import CAPACITY_BLOCK, ON_DEMAND
from fmcluster.model.cluster import CLUSTER, NETWORK, STORAGE, resolve
from fmcluster.spec import loader, placeholders
from fmcluster.spec.diagnostics import control_characters, dotted, one_line
from fmcluster.spec.models import ClusterSpec, region_problem

FORMATS = ("text",)
SPEC_FILE = "cluster.yaml"
WORKFLOW_FILE = ".github/workflows/fmcluster.yml"
REQUIREMENTS_FILE = "requirements.txt"
PIPELINE_FILE = "pipeline.yaml"
# The CDK app as a console script of the installed package (pyproject.toml, [project.scripts]):
# on PATH wherever `fmcluster` is (pip, pipx, uv tool), so cdk.json names no interpreter.
APP_SCRIPT = "fmcluster-cdk-app"
# The examples' AZ IDs in us-east-1: of P5 capacity, and the Dallas Local Zone of the P6e-GB200
# UltraServer Capacity Blocks (examples/p6e-gb200-pcs.yaml)
EXAMPLE_AZ_IDS = {"us-east-1": "use1-az4"}
EXAMPLE_ULTRASERVER_ZONES = {"us-east-1": "use1-dfw2-az1"}
# Placeholders the user replaces (`put yours`): documentation values, which fmcluster.spec.placeholders
# finds (validate warns of them, preflight and a deploy refuse them)
PLACEHOLDER_RESERVATION = placeholders.RESERVATION_ID
PLACEHOLDER_ACCOUNT = placeholders.ACCOUNT
PLACEHOLDER_CIDR = placeholders.ACCESS_CIDR
PLACEHOLDER_SOURCE = "git+https://github.com/OWNER/fmcluster"
# Sizes of the examples: a Slurm cluster of 16 nodes, a Kubernetes one of 8
EXAMPLE_COUNT = {"slurm": 16, "kubernetes": 8}
COMMENT_COLUMN = 40
CONTROL_CHARACTER_RULE = "control-character"  # whose hint, about YAML, init replaces by its flag's


@dataclass(frozen=True)
class InitReport:
    directory: str
    orchestrator: str
    instance_type: str
    written: tuple[str, ...] = ()  # the project's files, relative to `directory`
    error: Optional[str] = None  # why nothing (or not everything) was written
    hint: Optional[str] = None
    warnings: tuple[str, ...] = ()  # what validate warns of the written spec, formatted
    cluster: str = ""  # the spec's name, and its region
    region: str = DEFAULT_REGION


# --- the spec ------------------------------------------------------------------------------------


def _scalar(value: object) -> str:
    """A YAML scalar or flow list that reads back as `value`: plain where it can be, quoted otherwise."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    text = str(value)
    try:  # plain when it reads back as itself, a comment after it included
        plain = yaml.safe_load(f"key: {text}  # comment") == {"key": text} and not text.startswith(("-", "?", " "))
    except yaml.YAMLError:
        plain = False
    if plain:
        return text
    return json.dumps(text)


class _Lines:
    """A YAML document built field by field, each with its comment at COMMENT_COLUMN."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def comment(self, text: str) -> None:
        self.lines += [f"# {line}".rstrip() for line in text.splitlines()]

    def blank(self) -> None:
        self.lines.append("")

    def field(self, indent: int, key: str, value: object, comment: str, item: bool = False) -> None:
        lead = " " * indent + ("- " if item else "")
        text = f"{lead}{key}:" + ("" if value is None else f" {_scalar(value)}")
        self.lines.append(f"{text.ljust(COMMENT_COLUMN - 2)}  # {comment}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _regional_az_ids(region: str, avoid: str, count: int) -> list[str]:
    """`count` AZ IDs of the region other than `avoid`: az1, az2, ... (every region has those)."""
    prefix = regions.az_id_prefix(region) or "use1"
    return [az for az in (f"{prefix}-az{n}" for n in range(1, count + 3)) if az != avoid][:count]


def default_az_id(region: str, orchestrator: str, instance_type: str) -> str:
    """The examples' AZ ID for the region: the Local Zone of the UltraServer blocks where the
    control plane reaches one (not HyperPod's), else that of P5 capacity, else the region's az1."""
    instance = catalog.get(instance_type)
    if (instance is not None and instance.ultraserver and not controlplanes.get(orchestrator).hyperpod
            and region in EXAMPLE_ULTRASERVER_ZONES):
        return EXAMPLE_ULTRASERVER_ZONES[region]
    return EXAMPLE_AZ_IDS.get(region) or regions.example_az_id(region)


def spec_text(orchestrator: str, instance_type: str, name: str, region: str, az_id: str) -> str:
    """The spec of a new project: the examples' choices for the control plane, one GPU node group."""
    plane = controlplanes.get(orchestrator)
    instance = catalog.get(instance_type)
    if instance is None:
        raise ValueError(f"unknown instance type {instance_type!r}")
    kubernetes = plane.scheduler == "kubernetes"
    d = _Lines()
    d.comment(f"The cluster spec of {one_line(name)}, written by `fmcluster init`: {instance_type} on {orchestrator}.\n"
              "Every field says what it is; placeholders say `put yours`. `fmcluster validate cluster.yaml`\n"
              "checks it, `fmcluster plan cluster.yaml` shows what it builds and costs, and\n"
              "`fmcluster schema` prints its JSON Schema for editors.")
    d.field(0, "name", name, "the cluster's name: prefixes every stack and bucket")
    d.field(0, "region", region, "the AWS region")
    local_zone = regions.is_local_zone(az_id)
    d.field(0, "availability_zone_id", az_id,
            "the Local Zone of the UltraServer block: put yours" if local_zone
            else "AZ ID of the GPU capacity, not an AZ name: put yours")
    regional = plane.min_availability_zones - (0 if local_zone else 1)
    if regional > 0:
        d.blank()
        d.field(0, "network", None, "the VPC (vpc_cidr: 10.0.0.0/16 by default)")
        d.field(2, "extra_availability_zone_ids", _regional_az_ids(region, az_id, regional),
                "subnets in AZs of the region: for the control plane" if local_zone
                else "EKS needs subnets in two AZs")

    d.blank()
    d.field(0, "storage", None, "S3 buckets and an FSx for Lustre file system")
    d.field(2, "buckets", None, "S3 buckets (datasets, checkpoints, ...)")
    d.field(4, "name", "datasets", "short name; the S3 name adds cluster, account, region", item=True)
    d.field(4, "name", "checkpoints", "a second bucket, for checkpoints", item=True)
    d.field(6, "versioned", True, "S3 versioning (default false)")
    d.field(2, "lustre", None, "an FSx for Lustre file system (none if left out)")
    d.field(4, "storage_capacity_gib", 4800, "GiB, can only grow: 1200 or a multiple of 2400")
    d.field(4, "deployment_type", "PERSISTENT_2", "or PERSISTENT_1, SCRATCH_2")
    d.field(4, "throughput_per_tib", 250, "MB/s per TiB: 125, 250, 500 or 1000")
    d.field(4, "mount_path", "/fsx", "where the nodes mount the file system")
    d.field(4, "links", None, "data repository associations, at most 8")
    d.field(6, "bucket", "datasets", "a bucket of storage.buckets, by name", item=True)
    d.field(8, "path", "/datasets", "the file-system path linked to the bucket")
    d.field(8, "import", ["NEW", "CHANGED", "DELETED"], "S3 events imported into the file system")
    d.field(6, "bucket", "checkpoints", "a bucket of storage.buckets, by name", item=True)
    d.field(8, "path", "/checkpoints", "the file-system path linked to the bucket")
    d.field(8, "export", ["NEW", "CHANGED", "DELETED"], "file-system events exported to the bucket")

    others = ", ".join(t for t in ORCHESTRATORS if t != orchestrator)
    versions = plane.versions
    d.blank()
    d.field(0, "orchestrator", None, "the control plane")
    d.field(2, "type", orchestrator, f"or {others}")
    d.field(2, "version", plane.default_version,
            f"{plane.version_label}, quoted: " + (f"{versions[0]} to {versions[-1]}" if len(versions) > 1
                                                  else f"{versions[0]} only"))
    d.field(2, "login", None, "the system nodes" if kubernetes else "the login nodes")
    d.field(4, "instance_type", "m7i.2xlarge", "a CPU type (c7i, m7i, r7i, c7a, m7a)")
    d.field(4, "count", 2 if kubernetes else 1,
            "how many system nodes: 1 to 16" if kubernetes else "how many login nodes, 0 to 16")
    if kubernetes:
        d.field(2, "admin_role_arn", f"arn:aws:iam::{PLACEHOLDER_ACCOUNT}:role/MlPlatformAdmin",
                "IAM role given cluster-admin access: put yours")
        d.field(2, "public_access_cidrs", [PLACEHOLDER_CIDR],
                "who may reach the public API endpoint: put your office's or VPN's")
        d.field(2, "namespace", "training", "namespace of the Lustre claim and the Kueue queue")

    d.blank()
    d.field(0, "node_groups", None, "the node groups, at least one")
    d.field(2, "name", "gpu", "the Kubernetes node-group label" if kubernetes else "the Slurm partition's name",
            item=True)
    gpus = f"{instance.gpu_count} x {instance.gpu.name if instance.gpu else 'GPU'}"
    efa = (f", {len(instance.efa_layout_cards)} EFA interface{'s' if len(instance.efa_layout_cards) != 1 else ''}"
           if instance.efa_supported else "")
    d.field(4, "instance_type", instance_type, f"{gpus}{efa}")
    if instance.ultraserver:
        server = catalog.ULTRASERVERS[instance.ultraservers[-1]]
        d.field(4, "count", server.instances, f"one UltraServer of {server.instances} instances")
    else:
        d.field(4, "count", EXAMPLE_COUNT[plane.scheduler],
                "fixed size: the block's instances" if instance.capacity_block
                else "fixed size; or min_count and max_count")
    d.field(4, "capacity", None, "how the instances are bought")
    if instance.capacity_block:
        d.field(6, "type", CAPACITY_BLOCK, "a Capacity Block for ML; or on-demand, reservation, spot")
        if plane.hyperpod:
            d.field(6, "training_plan_arn",
                    f"arn:aws:sagemaker:{region}:{PLACEHOLDER_ACCOUNT}:training-plan/{name}",
                    "the SageMaker training plan: put yours")
        else:
            d.field(6, "reservation_id", PLACEHOLDER_RESERVATION, "the block's cr-... id: put yours")
        if instance.ultraserver:
            d.field(6, "ultraserver_type", instance.ultraservers[-1], "the UltraServer type of the block")
    else:
        d.field(6, "type", ON_DEMAND, "the default; or reservation, capacity-block, spot")
    d.field(4, "root_volume_gib", 512, "encrypted gp3 root volume, GiB")

    d.blank()
    d.field(0, "observability", None, "metrics, dashboards and alerts")
    d.field(2, "prometheus", True, "Amazon Managed Prometheus, GPU-health alerts")

    d.blank()
    d.field(0, "tags", None, "tags on every resource")
    d.field(2, "team", "ml-platform", "a tag, key: value")
    return d.text()


# --- the other files -----------------------------------------------------------------------------


def cdk_json() -> str:
    """The repository's cdk.json settings, with the installed app and the project's spec."""
    config = {"app": APP_SCRIPT, "notices": False, "context": {"spec": SPEC_FILE, "cli-telemetry": False}}
    return json.dumps(config, indent=2) + "\n"


GITIGNORE = """\
# CDK outputs (fmcluster synth, npx cdk synth) and lookups
cdk.out/
cdk.context.json
.cdk.staging/
# Python and Node.js environments
.venv/
__pycache__/
*.pyc
node_modules/
"""


def install_source(distribution: metadata.Distribution | None = None) -> str:
    """Where CI installs fmcluster from: the Git repository and commit of this install (or of
    `distribution`) when it came from one (its direct_url.json, PEP 610: `pipx install git+URL`),
    else a placeholder to replace (a wheel file, a clone)."""
    try:
        dist = distribution or metadata.distribution("fmcluster")
        found = json.loads(dist.read_text("direct_url.json") or "{}")
    except (metadata.PackageNotFoundError, json.JSONDecodeError):
        return PLACEHOLDER_SOURCE
    if not isinstance(found, dict):
        return PLACEHOLDER_SOURCE
    url, vcs = found.get("url"), found.get("vcs_info")
    if (isinstance(url, str) and url.startswith("https://") and isinstance(vcs, dict) and vcs.get("vcs") == "git"
            and re.fullmatch(r"[0-9a-f]{40}", str(vcs.get("commit_id")))):
        return f"git+{url}@{vcs['commit_id']}"
    return PLACEHOLDER_SOURCE


def requirements(source: str) -> str:
    """requirements.txt: the one pin of the fmcluster the project runs (PEP 508, `NAME @ URL`)."""
    where = ("put yours: the README's REPO, at the commit you installed" if source == PLACEHOLDER_SOURCE
             else "the install init ran from")
    return ("# The fmcluster this project runs, installed from here by the pull-request workflow and by\n"
            "# the GitOps pipeline's steps (pip install -r requirements.txt). Move the commit to upgrade.\n"
            f"fmcluster @ {source}  # {where}\n")


def pipeline_file(name: str, region: str) -> str:
    """pipeline.yaml: the GitOps pipeline of the project's one cluster, its placeholders marked."""
    d = _Lines()
    d.comment("The GitOps pipeline of this project: every merge to `branch` deploys cluster.yaml, after a")
    d.comment("diff against what was last deployed (a change that would lose data stops it). Check it with")
    d.comment("  fmcluster validate --pipeline pipeline.yaml")
    d.comment("and deploy it once, with the account's credentials: npx aws-cdk deploy -c pipeline=pipeline.yaml --all")
    d.field(0, "name", name, "the pipeline, and its stack NAME-pipeline")
    d.field(0, "account", PLACEHOLDER_ACCOUNT, "where the pipeline runs: put yours")
    d.field(0, "region", region, "and its region")
    d.field(0, "source", None, "a CodeConnections connection, approved in the console first")
    d.field(2, "connection_arn", f"arn:aws:codeconnections:{region}:{PLACEHOLDER_ACCOUNT}:connection/"
            f"{placeholders.CONNECTION_ID}", "put yours")
    d.field(2, "repository", placeholders.REPOSITORY, "put yours: this project's repository, owner/name")
    d.field(2, "branch", "main", "the branch whose merges deploy")
    d.field(0, "waves", None, "one after the other")
    d.field(2, "name", "clusters", "a wave's clusters deploy in parallel", item=True)
    d.field(4, "clusters", None, "the specs of the wave")
    d.field(6, "spec", SPEC_FILE, "paths from the project's root", item=True)
    d.field(8, "protected", True, "a manual approval before each deploy")
    return d.text()


def workflow(source: str) -> str:
    return f"""\
# Reviews a change of the cluster spec on every pull request, without AWS credentials: validate
# it, plan it (the plan in the job summary), and say what the change does to deployed resources
# (fmcluster diff against the base branch's spec; it fails when a file system, bucket or key
# would be replaced or removed).
name: fmcluster

on:
  pull_request:

permissions:
  contents: read

defaults:
  run:
    shell: bash  # -e and -o pipefail: a failing fmcluster fails its step, piped or not

env:
  SPEC: {SPEC_FILE}

jobs:
  review:
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/checkout@v7.0.1
        with:
          fetch-depth: 0  # the base branch, for fmcluster diff
      - uses: actions/setup-python@v7.0.0
        with:
          python-version: "3.12"
      - uses: actions/setup-node@v7.0.0
        with:
          node-version: "24"  # fmcluster diff synthesizes: the CDK's jsii runs Node.js 22 or 24
          package-manager-cache: false
      - name: Install fmcluster
        run: python -m pip install -r {REQUIREMENTS_FILE}  # the project's pin
      - name: Validate
        run: fmcluster validate "$SPEC"
      - name: Plan
        run: fmcluster plan "$SPEC" --format markdown | tee -a "$GITHUB_STEP_SUMMARY"
      - name: Diff against the base branch
        run: |
          if git show "origin/$BASE:$SPEC" > "$RUNNER_TEMP/base.yaml" 2> /dev/null; then
            fmcluster diff "$RUNNER_TEMP/base.yaml" "$SPEC"
          else
            echo "$SPEC is new on this branch: nothing deployed to compare with"
          fi
        env:
          BASE: ${{{{ github.base_ref }}}}
"""


def files(text: str, spec: ClusterSpec, source: str) -> dict[str, str]:
    """The project's files by path, in the order they are written: `text` is the spec file, `spec`
    the same validated. The pipeline file and the deploy workflow name the cluster, its region and
    its network, storage and cluster stacks as the spec's model does."""
    model = resolve(spec)
    name, region = model.name, model.region
    network, storage, cluster = (model.stack(NETWORK), model.stack(STORAGE), model.stack(CLUSTER))
    assert network is not None and storage is not None and cluster is not None  # every cluster has them
    return {SPEC_FILE: text, "cdk.json": cdk_json(), ".gitignore": GITIGNORE, WORKFLOW_FILE: workflow(source),
            REQUIREMENTS_FILE: requirements(source), PIPELINE_FILE: pipeline_file(name, region),
            DEPLOY_WORKFLOW_FILE: deploy_workflow(name, region, SPEC_FILE, REQUIREMENTS_FILE, network.name,
                                                  storage.name, cluster.name),
            ROLE_FILE: oidc_role(name, region)}


# --- the command ---------------------------------------------------------------------------------


def run(directory: str, orchestrator: str = DEFAULT_ORCHESTRATOR, instance_type: str = DEFAULT_INSTANCE_TYPE,
        name: str | None = None, region: str = DEFAULT_REGION, az_id: str | None = None) -> InitReport:
    """Write the project into `directory` (new, or empty), or say why not, writing nothing."""
    def refuse(error: str, hint: str | None = None) -> InitReport:
        return InitReport(directory, orchestrator, instance_type, error=error, hint=hint)

    if not directory:  # Path("") is the working directory: init never writes there unasked
        return refuse("the project's directory is named by an empty string",
                      "name a new directory, such as fmcluster init my-cluster (. for the working directory)")
    target = Path(directory)
    if target.exists() and not target.is_dir():
        return refuse(f"{directory} exists and is not a directory", "name a new directory")
    if target.is_dir() and any(target.iterdir()):
        return refuse(f"{directory} is not empty; init writes only into a new or empty directory",
                      "name a new directory: init never writes over files")
    if orchestrator not in ORCHESTRATORS:
        return refuse(f"unknown orchestrator {orchestrator!r}", "one of " + ", ".join(ORCHESTRATORS))
    if instance_type not in instance_types():
        return refuse(f"unknown GPU instance type {instance_type!r}", "one of " + ", ".join(instance_types()))
    if (wrong_region := region_problem(region)) is not None:
        # a line break's hint in a spec is about YAML's block scalars, not a command line's
        hint = None if control_characters(region) else wrong_region[1]
        return refuse(f"--region: {wrong_region[0]}", hint or "an AWS region such as us-east-1")
    cluster = name if name is not None else os.path.basename(os.path.abspath(directory)).lower()
    zone = az_id or default_az_id(region, orchestrator, instance_type)
    text = spec_text(orchestrator, instance_type, cluster, region, zone)
    loaded = loader.load_text(text, os.path.join(directory, SPEC_FILE))  # its diagnostics name the file written
    problems = loaded.errors
    if problems:
        # what the instance type cannot do on the control plane first: the reason of the refusal
        first = min(problems, key=lambda d: ("instance_type" not in dotted(d.path), orchestrator not in d.message))
        where = dotted(first.path)
        hint = first.hint
        if where == "name":
            hint = f"pass --name {suggested_name(cluster) or 'NAME'}" + (
                f"; {first.hint}" if first.hint and first.rule != CONTROL_CHARACTER_RULE else "")
        elif where == "availability_zone_id":
            hint = f"pass --az-id, an AZ ID of {region} such as {regions.example_az_id(region)}"
        combination = f"{instance_type} on {orchestrator}: " if "instance_type" in where else ""
        return refuse(f"{combination}{where}: {first.message}", hint)
    written: list[str] = []
    try:
        assert loaded.spec is not None  # no errors: the spec validated
        for path, content in files(text, loaded.spec, install_source()).items():
            out = target / path
            out.parent.mkdir(parents=True, exist_ok=True)
            with open(out, "x", encoding="utf-8") as handle:  # never over a file that appeared meanwhile
                handle.write(content)
            written.append(path)
    except OSError as exc:
        return InitReport(directory, orchestrator, instance_type, tuple(written),
                          f"cannot write {directory}: {exc.strerror or exc}",
                          "name a directory you can write: fmcluster init DIR")
    # a warning is the user's to read and to accept in the spec (accepted_warnings), never init's
    warnings = tuple(d.format() for d in loaded.diagnostics if d.severity == "warning")
    return InitReport(directory, orchestrator, instance_type, tuple(written), warnings=warnings,
                      cluster=cluster, region=region)


def suggested_name(name: str) -> str | None:
    """A cluster name the spec takes, made from one it refuses (My_Cluster: my-cluster): lower
    case, each run of other characters a hyphen, starting with a letter, at most 32 characters;
    None when nothing of it is left, or it stays too short."""
    candidate = re.sub(r"[^a-z0-9]+", "-", name.lower())
    candidate = re.sub(r"^[^a-z]+", "", candidate)[:32].strip("-")
    return candidate if candidate != name and re.fullmatch(r"[a-z][a-z0-9-]{2,31}", candidate) else None


def next_commands(report: InitReport) -> Sequence[str]:
    return (f"cd {shlex.quote(report.directory)}", f"fmcluster validate {SPEC_FILE}", f"fmcluster plan {SPEC_FILE}",
            "npx aws-cdk synth -q    # or: fmcluster synth " + SPEC_FILE)


def render(report: InitReport, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr): the files written and the commands to run next; or the refusal, one line
    and its hint one more, escaped as validate's diagnostics are (a value may hold a line break)."""
    if report.error is not None:
        hint = f"  hint: {one_line(report.hint)}\n" if report.hint else ""
        return "", f"error: {one_line(report.error)}\n{hint}"
    lines = [f"{report.directory}: a cluster of {report.instance_type} on {report.orchestrator}"]
    lines += [f"  wrote {os.path.join(report.directory, path)}" for path in report.written]
    lines += [f"next: replace the `put yours` placeholders of {SPEC_FILE}, then"]
    lines += [f"  {command}" for command in next_commands(report)]
    if DEPLOY_WORKFLOW_FILE in report.written:
        lines += [f"to deploy from GitHub Actions ({DEPLOY_WORKFLOW_FILE}), once, with the account's credentials:",
                  f"  {role_command(report.cluster, report.region, '  ')}",
                  f"then set the repository variable {ROLE_VARIABLE} to that stack's RoleArn output, and create",
                  f"the repository's environment {deploy_environment(report.cluster)} with required reviewers, "
                  "before the first push"]
    return "\n".join(lines) + "\n", "".join(f"{warning}\n" for warning in report.warnings)


def exit_code(report: InitReport) -> int:
    """2 when nothing (or not everything) could be written."""
    return 2 if report.error is not None else 0
