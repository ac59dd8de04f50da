"""The GitOps pipeline file: which cluster specs the `NAME-pipeline` stack deploys, from which
repository, in which waves. Validated like a spec, with located errors; never imports aws_cdk.

The command, `fmcluster validate --pipeline`, is fmcluster.deploy.pipeline.

Sources and details: docs/research-notes.md, "fmcluster/spec/pipeline.py"."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Annotated, Optional

from pydantic import Field, ValidationError

from fmcluster.spec import loader, placeholders
from fmcluster.spec.diagnostics import Diagnostic, Problem, dotted, error, has_errors, sort_key, warning
from fmcluster.spec.diagnostics import Path as FieldPath
from fmcluster.spec.models import Account, ClusterSpec, Model, Name, Region, _pattern

EXAMPLE = "examples/pipeline/pipeline.yaml"

ConnectionArn = Annotated[str, _pattern(
    "arn", r"arn:aws[a-z-]*:(codeconnections|codestar-connections):[a-z0-9-]+:[0-9]{12}:connection/[0-9a-f-]{36}",
    "CodeConnections connection ARN",
    "arn:aws:codeconnections:REGION:ACCOUNT:connection/ID, from the Developer Tools console "
    "(Settings > Connections) or `aws codeconnections list-connections`")]
Repository = Annotated[str, _pattern(
    "repository", r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+", "repository", "owner/name, such as my-org/gpu-clusters")]
Branch = Annotated[str, _pattern(
    "branch", r"[A-Za-z0-9_][A-Za-z0-9_./-]{0,254}", "branch name", "such as main")]
SpecPath = Annotated[str, _pattern(
    "path", r"[A-Za-z0-9_.][A-Za-z0-9_./-]*\.ya?ml", "spec path",
    "a .yaml file relative to the repository root, such as examples/p5-pcs.yaml")]


class SourceSpec(Model):
    connection_arn: ConnectionArn
    repository: Repository
    branch: Branch = "main"


class ClusterEntry(Model):
    spec: SpecPath
    protected: bool = False  # a manual approval before this cluster's stage deploys
    # let a reviewed change that replaces or removes a file system, bucket or key through
    # (`fmcluster diff --allow-data-loss`); remove it again once deployed
    allow_data_loss: bool = False


class WaveSpec(Model):
    name: Name
    clusters: list[ClusterEntry] = Field(min_length=1)


class PipelineSpec(Model):
    name: Name
    account: Account
    region: Region
    source: SourceSpec
    waves: list[WaveSpec] = Field(min_length=1)


@dataclass(frozen=True)
class Deployment:
    """One cluster of a wave: the path of its spec in the repository and the spec itself."""

    path: str
    spec: ClusterSpec
    protected: bool = False
    allow_data_loss: bool = False

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass
class Pipeline:
    file: str  # the pipeline file, relative to the repository root
    config: PipelineSpec
    waves: list[tuple[str, list[Deployment]]]

    @property
    def deployments(self) -> list[Deployment]:
        return [d for _, wave in self.waves for d in wave]


@dataclass
class PipelineLoad:
    file: str
    pipeline: Optional[Pipeline] = None
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.pipeline is not None and not has_errors(self.diagnostics)


def deployed_parameter(cluster: str) -> str:
    """The SSM parameter where the pipeline records what it last deployed of a cluster, as
    `COMMIT:SPEC_PATH` (what `git show` reads)."""
    return f"/fmcluster/{cluster}/deployed-spec"


def load(path: str | Path, root: str | Path | None = None, deploying: bool = False) -> PipelineLoad:
    """Load and check a pipeline file and every spec it lists. Spec paths are read relative to
    `root` (default: the working directory, the repository root where `cdk synth` runs). A
    placeholder in the file or a spec (fmcluster.spec.placeholders) is a warning, as `validate`
    says it; `deploying` (the CDK app where the pipeline may be deployed), an error."""
    root = Path(root) if root is not None else Path.cwd()
    result = PipelineLoad(_relative(Path(path), root))
    doc, result.diagnostics = loader.read_mapping(path, "pipeline file", EXAMPLE, "name: gpu-clusters")
    if doc is None:
        return result
    if (spec_file := loader.cluster_spec_file(doc)) is not None:
        result.diagnostics = [spec_file]
        return result
    problems = loader.duplicate_keys(doc)
    try:
        config = PipelineSpec.model_validate(doc.data)
    except ValidationError as exc:
        problems += loader.model_problems(exc, doc.data, PipelineSpec)
        config = None
    spec_diagnostics: list[Diagnostic] = []
    if config is not None:
        problems += [warning(f.path, f"{f.message}: a placeholder", f.hint, rule=placeholders.RULE)
                     for f in placeholders.found(config)]
        waves, found, spec_diagnostics = _load_specs(config, root, deploying)
        problems += found
        result.pipeline = Pipeline(result.file, config, waves)
    own = sorted([loader.locate(p, doc) for p in problems], key=sort_key)
    # the specs' own are refused where they are read (_load_specs): refused twice, a hint says it twice
    result.diagnostics = (placeholders.refused(own) if deploying else own) + spec_diagnostics
    return result


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _load_specs(config: PipelineSpec, root: Path, deploying: bool = False
                ) -> tuple[list[tuple[str, list[Deployment]]], list[Problem], list[Diagnostic]]:
    problems: list[Problem] = []
    diagnostics: list[Diagnostic] = []
    waves: list[tuple[str, list[Deployment]]] = []
    seen_waves: dict[str, int] = {}
    seen_paths: dict[str, FieldPath] = {}
    seen_names: dict[str, FieldPath] = {}
    for w, wave in enumerate(config.waves):
        if wave.name in seen_waves:
            problems.append(error(("waves", w, "name"), f"wave `{wave.name}` is named twice",
                                  f"waves[{seen_waves[wave.name]}] has the same name"))
        seen_waves.setdefault(wave.name, w)
        deployments: list[Deployment] = []
        for c, entry in enumerate(wave.clusters):
            at = ("waves", w, "clusters", c, "spec")
            if ".." in PurePosixPath(entry.spec).parts:
                problems.append(error(at, f"'{entry.spec}' leaves the repository",
                                      "name the spec by its path from the repository root"))
                continue
            if entry.spec in seen_paths:
                problems.append(error(at, f"{entry.spec} is listed twice",
                                      f"it is already at {_dotted(seen_paths[entry.spec])}"))
                continue
            seen_paths[entry.spec] = at
            spec_file = root / entry.spec
            if not spec_file.is_file():
                problems.append(error(at, f"no spec file {entry.spec} in the repository",
                                      "spec paths are relative to the repository root"))
                continue
            loaded = loader.load(spec_file)
            own = [_renamed(d, entry.spec) for d in loaded.diagnostics]
            diagnostics += placeholders.refused(own) if deploying else own
            if not loaded.ok or loaded.spec is None:  # ok: a spec without errors
                count = len(loaded.errors)
                problems.append(error(at, f"{entry.spec} is not a valid spec ({count} error{'s' * (count != 1)})",
                                      f"fmcluster validate {entry.spec}"))
                continue
            held = sum(d.rule == placeholders.RULE for d in own)
            if deploying and held:
                problems.append(error(at, f"{entry.spec} holds {held} placeholder{'s' * (held != 1)}, and the pipeline "
                                          "deploys it", f"put yours: fmcluster validate {entry.spec} lists them"))
                continue
            spec = loaded.spec
            if spec.name in seen_names:
                problems.append(error(at, f"cluster `{spec.name}` is already deployed by "
                                          f"{_dotted(seen_names[spec.name])}",
                                      "two specs naming the same cluster would deploy the same stacks"))
                continue
            seen_names[spec.name] = at
            if spec.account and spec.account != config.account:
                problems.append(warning(at, f"cluster `{spec.name}` deploys to account {spec.account}, "
                                            f"the pipeline runs in {config.account}",
                                        f"bootstrap it to trust the pipeline: npx cdk bootstrap "
                                        f"aws://{spec.account}/{spec.region} --trust {config.account} "
                                        "--cloudformation-execution-policies ARN"))
            deployments.append(Deployment(entry.spec, spec, entry.protected, entry.allow_data_loss))
        waves.append((wave.name, deployments))
    return waves, problems, diagnostics


def _dotted(path: FieldPath) -> str:
    """The entry of a spec path: waves[0].clusters[1]."""
    return dotted(path[:-1])


def _renamed(d: Diagnostic, file: str) -> Diagnostic:
    """A spec's diagnostic, named by the spec's path in the repository."""
    return replace(d, file=file)

