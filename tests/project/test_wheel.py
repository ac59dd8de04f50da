"""The wheel is the product: built from the repository, installed into a fresh venv outside it, its
`fmcluster` runs without the repository (no cdk.json, no examples/, no node_modules but Node.js
itself, no CDK CLI) and synthesizes the same cloud assembly, byte for byte, as the repository's
own `fmcluster synth` (what `make synth` writes); `--help`, `validate` and `plan` answer as the
repository's do.

Offline and quick: the fresh venv gets no download. Its runtime dependencies are this venv's
installed copies of exactly the distributions the runtime needs (the closure of
[project].dependencies, read from their metadata), linked into a folder of their own that a .pth
file names. So the wheel runs with the runtime alone, never with a test tool; and never with this
venv's editable install of the project (its `__editable__` finder .pth and its dist-info are not
linked; a folder a .pth file names is not a site directory, so its .pth files would not run anyway).
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from fmcluster.facts import nodejs
from tests.support.paths import ROOT, copy_checkout

pytestmark = pytest.mark.synth

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXAMPLE = "examples/p5-pcs.yaml"
SPEC = "cluster.yaml"  # the example, copied into a directory of the user's


def runtime_closure() -> dict[str, metadata.Distribution]:
    """Name -> this venv's distribution, of every distribution the runtime needs: [project]
    dependencies and what they require in turn (with the extras asked for), markers evaluated here."""
    found: dict[str, metadata.Distribution] = {}
    seen: set[tuple[str, str]] = set()
    todo = [Requirement(r) for r in PROJECT["dependencies"]]
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name not in found:
            found[name] = metadata.distribution(name)
            assert requirement.specifier.contains(found[name].version, prereleases=True), (name, found[name].version)
        for extra in ("", *requirement.extras):
            if (name, extra) in seen:
                continue
            seen.add((name, extra))
            environment = {**default_environment(), "extra": extra}
            todo += [required for required in map(Requirement, found[name].requires or [])
                     if required.marker is None or required.marker.evaluate(environment)]
    return found


def link_runtime(into: Path) -> list[str]:
    """Link the runtime closure's files (packages, modules, dist-info) into `into`: the top-level
    entries of site-packages each distribution's RECORD names. Returns the names linked."""
    site = Path(sysconfig.get_paths()["purelib"])
    into.mkdir()
    linked: set[str] = set()
    for distribution in runtime_closure().values():
        for file in distribution.files or []:
            top = file.parts[0]
            if top in linked or top == ".." or top.endswith(".pth") or top == "__pycache__":
                continue
            source = Path(distribution.locate_file(top))
            if source.parent == site and source.exists():
                (into / top).symlink_to(source)
                linked.add(top)
    return sorted(linked)


def build_wheel(tmp: Path) -> Path:
    """The wheel of a copy of the repository (its tracked and new files), built as a user's pip
    builds it, with the venv's setuptools and without build isolation or network."""
    source = copy_checkout(tmp / "src")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps",
                    "--no-build-isolation", "--no-index", "-w", str(tmp / "dist"), str(source)],
                   check=True, capture_output=True, text=True)
    (wheel,) = (tmp / "dist").glob("fmcluster-*-py3-none-any.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv, outside the repository, with the wheel installed (its `fmcluster` script
    written by pip) and the runtime linked in: the venv's path."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(tmp)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(subprocess.run([str(venv / "bin/python"), "-c", "import sysconfig; print(sysconfig.get_paths()"
                                "['purelib'])"], capture_output=True, text=True, check=True).stdout.strip())
    linked = link_runtime(tmp / "runtime")
    assert "aws_cdk" in linked and not [name for name in linked if name.startswith(("fmcluster", "__editable__"))]
    (site / "fmcluster-runtime.pth").write_text(f"{tmp / 'runtime'}\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"), "install", "--quiet",
                    "--disable-pip-version-check", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True, text=True)
    return venv


def user_env(venv: Path, tmp: Path) -> dict[str, str]:
    """A user's environment: the venv's scripts and Node.js (jsii's runtime, from PATH) on PATH,
    and nothing of the repository (no PYTHONPATH, no CDK CLI)."""
    node = tmp / "node-only"
    node.mkdir(exist_ok=True)
    if not (node / "node").exists():
        (node / "node").symlink_to(ROOT / "node_modules/.bin/node" if (ROOT / "node_modules/.bin/node").exists()
                                   else shutil.which("node") or "node")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "AWS_", "CDK_", "JSII_", "VIRTUAL_ENV"))}
    env.update(PATH=os.pathsep.join([str(venv / "bin"), str(node), "/usr/bin", "/bin"]),
               AWS_EC2_METADATA_DISABLED="true", CDK_DISABLE_VERSION_CHECK="true")
    return env


def user_dir(tmp: Path, example: str = EXAMPLE) -> Path:
    """A directory of a user's: the example spec (as SPEC), and no cdk.json."""
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    shutil.copy(ROOT / example, work / SPEC)
    return work


def run(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)


def repository(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The repository's own fmcluster (this venv, this tree's code), in `cwd`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AWS_EC2_METADATA_DISABLED": "true"}
    return run([sys.executable, "-m", "fmcluster", *args], cwd, env)


def assembly(outdir: Path) -> dict[str, bytes]:
    return {p.relative_to(outdir).as_posix(): p.read_bytes() for p in sorted(outdir.rglob("*")) if p.is_file()}


def test_the_project_comes_from_the_wheel_alone(installed, tmp_path):
    """Both packages from the venv's site-packages, the runtime from the linked folder, and no
    test tool importable."""
    code = ("import importlib.util as u, fmcluster, fmcluster_cdk, aws_cdk; "
            "print(fmcluster.__file__, fmcluster_cdk.__file__, aws_cdk.__file__, u.find_spec('pytest'), "
            "u.find_spec('moto'), u.find_spec('__editable___fmcluster_0_1_0_finder'))")
    result = run([str(installed / "bin/python"), "-c", code], tmp_path, user_env(installed, tmp_path))
    assert result.returncode == 0, result.stderr
    ours, cdk_side, cdk_lib, *absent = result.stdout.split()
    assert ours.startswith(str(installed)) and cdk_side.startswith(str(installed)), result.stdout
    assert not cdk_lib.startswith(str(ROOT)), cdk_lib
    assert absent == ["None", "None", "None"], result.stdout


def test_help(installed, tmp_path):
    result = run(["fmcluster", "--help"], tmp_path, user_env(installed, tmp_path))
    assert result.returncode == 0, result.stderr
    assert "synth" in result.stdout and "validate" in result.stdout and "plan" in result.stdout


def test_the_wheel_ships_every_file_of_the_packages(installed):
    """Every file the repository holds under the two packages (code, node scripts, Lambda handlers,
    alert rules, dashboards, prices) is installed: a data file in a new folder cannot be left out."""
    site = Path(subprocess.run([str(installed / "bin/python"), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    tracked = subprocess.run(["git", "ls-files", "fmcluster", "fmcluster_cdk"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    assert len(tracked) > 100
    assert [name for name in tracked if not (site / name).is_file()] == []


# One example of each control plane: their assets (lifecycle scripts, Lambda handlers, charts'
# values) come from the installed package's data.
SYNTHESIZED = [EXAMPLE, "examples/p5-hyperpod-eks.yaml", "examples/p6-b200-hyperpod-slurm.yaml",
               "examples/p6e-gb200-eks.yaml"]


@pytest.mark.parametrize("example", SYNTHESIZED)
def test_synth_writes_the_repository_s_assembly(installed, tmp_path, example, corpus):
    """From a directory of the user's, without the repository's cdk.json or CDK CLI. The reference
    is the repository's assembly of the example in the run's corpus (synthesized with cdk-nag on:
    its acknowledgements in the stacks' metadata are the only difference allowed)."""
    work = user_dir(tmp_path, example)
    result = run(["fmcluster", "synth", SPEC, "-o", "cdk.out"], work, user_env(installed, tmp_path))
    assert result.returncode == 0, result.stderr[-4000:]
    assert "-cluster" in result.stdout
    ours, theirs = assembly(work / "cdk.out"), without_nag(assembly(corpus.assembly(example)))
    assert any(name.endswith(".template.json") for name in ours)
    assert sorted(ours) == sorted(theirs)
    assert [name for name in ours if comparable(name, ours[name]) != theirs[name]] == []


NAG_ENTRY = "aws:cdk:acknowledged-rules"  # what cdk-nag's suppressions add to a stack's metadata


def comparable(name: str, content: bytes) -> object:
    """A file of an assembly as compared: its bytes, a stack's metadata file as its JSON."""
    return json.loads(content) if name.endswith(".metadata.json") else content


def without_nag(files: dict[str, bytes]) -> dict[str, object]:
    """An assembly synthesized with `-c nag=true` as it would be without: the stacks' metadata less
    cdk-nag's acknowledgements (the templates and every other file are the same bytes)."""
    found: dict[str, object] = {}
    for name, content in files.items():
        if not name.endswith(".metadata.json"):
            found[name] = content
            continue
        kept = {path: [e for e in map(_without_nag, entries) if e is not None]
                for path, entries in json.loads(content).items()}
        found[name] = {path: entries for path, entries in kept.items() if entries}
    return found


def _without_nag(entry: dict) -> dict | None:
    """A metadata entry less cdk-nag's acknowledgements (AwsSolutions-*); None when nothing is left."""
    if entry["type"] != NAG_ENTRY:
        return entry
    rules = {key: why for key, why in entry["data"].items() if "AwsSolutions-" not in key}
    return {**entry, "data": rules} if rules else None


@pytest.mark.parametrize("args", [["validate", SPEC], ["plan", SPEC], ["plan", SPEC, "--format", "json"]])
def test_validate_and_plan_answer_as_the_repository_s(installed, tmp_path, args):
    work = user_dir(tmp_path)
    ours = run(["fmcluster", *args], work, user_env(installed, tmp_path))
    theirs = repository(args, work)
    assert ours.returncode == theirs.returncode == 0, ours.stderr + theirs.stderr
    assert (ours.stdout, ours.stderr) == (theirs.stdout, theirs.stderr)
    assert ours.stdout.strip()


@pytest.mark.parametrize("example", ["examples/p6e-gb200-pcs.yaml", "examples/p6e-gb200-eks.yaml"])
def test_jobs_writes_the_repository_s_kit(installed, tmp_path, example):
    """The acceptance kit (its scripts and manifests come from package data) as the repository's."""
    work = user_dir(tmp_path, example)
    ours = run(["fmcluster", "jobs", SPEC, "-o", "kit"], work, user_env(installed, tmp_path))
    theirs = repository(["jobs", SPEC, "-o", "reference-kit"], work)
    assert ours.returncode == theirs.returncode == 0, ours.stderr + theirs.stderr
    kit, reference = assembly(work / "kit"), assembly(work / "reference-kit")
    assert kit and kit == reference


def test_an_init_project_synthesizes_with_the_cdk_cli(installed, tmp_path):
    """`fmcluster init` writes a project whose cdk.json runs the wheel's console script of the CDK
    app: the CDK CLI (the repository's pinned one, by its path: a user's comes from npx)
    synthesizes it there, with nothing of the repository on PATH."""
    env = user_env(installed, tmp_path)
    made = run(["fmcluster", "init", "my-cluster", "--orchestrator", "eks"], tmp_path, env)
    assert made.returncode == 0, made.stderr
    project = tmp_path / "my-cluster"
    assert (installed / "bin" / json.loads((project / "cdk.json").read_text())["app"]).is_file()
    cdk = ROOT / "node_modules" / ".bin" / "cdk"
    if not cdk.exists():
        pytest.skip("node_modules is not installed (make install)")
    result = run([str(cdk), "synth", "-q"], project, env)
    assert result.returncode == 0, result.stderr[-4000:]
    assert {"my-cluster-network.template.json", "my-cluster-cluster.template.json"} <= set(
        os.listdir(project / "cdk.out"))
    assert not (project / "cdk.context.json").exists()
    # its GitOps pipeline too (issue 39): the same CLI, the file init wrote, nothing of a clone
    piped = run([str(cdk), "synth", "-q", "-c", "pipeline=pipeline.yaml", "-o", "pipeline.out"], project, env)
    assert piped.returncode == 0, piped.stderr[-4000:]
    pipeline = json.loads((project / "pipeline.out/my-cluster-pipeline.template.json").read_text())
    steps = pipeline_steps(pipeline)
    pinned = "python -m pip install -r requirements.txt"  # the project's one pin of fmcluster
    assert steps["Synth"] == [pinned, f"npm install -g aws-cdk@{nodejs.CDK_CLI_VERSION}",
                              "fmcluster validate --pipeline pipeline.yaml",
                              "cdk synth -q -c nag=true -c pipeline=pipeline.yaml"]
    step = "fmcluster step"  # the installed step programs: the project has no copy
    assert steps["Diff"][0] == pinned
    assert f"{step} diff-deployed /fmcluster/my-cluster/deployed-spec cluster.yaml" in steps["Diff"][1]
    assert steps["Guard"] == [pinned, f"{step} guard-change-set my-cluster my-cluster-storage PipelineChange "
                                      "--region us-east-1"]
    assert steps["Record"] == [pinned, f"{step} record-deployed /fmcluster/my-cluster/deployed-spec cluster.yaml",
                               f"{step} protect-storage my-cluster-storage"]
    assert not any("make " in c for commands in steps.values() for c in commands)


def pipeline_steps(template: dict) -> dict[str, list[str]]:
    """The install and build commands of each CodeBuild step of a synthesized pipeline, by its
    action's name less the wave and cluster (Synth, Diff, Guard, Record)."""
    (stages,) = [r["Properties"]["Stages"] for r in template["Resources"].values()
                 if r["Type"] == "AWS::CodePipeline::Pipeline"]
    found = {}
    for action in (a for stage in stages for a in stage["Actions"]):
        name = action["Name"].rsplit(".", 1)[-1]
        project = action.get("Configuration", {}).get("ProjectName")
        if name in ("Synth", "Diff", "Guard", "Record") and isinstance(project, dict) and "Ref" in project:
            spec = json.loads(template["Resources"][project["Ref"]]["Properties"]["Source"]["BuildSpec"])
            phases = spec["phases"]
            found[name] = [c for phase in ("install", "build") for c in phases.get(phase, {}).get("commands", [])]
    return found
