"""The templates depend on the spec and the code alone: the CDK feature flags are the app's
(fmcluster_cdk/feature_flags.py, post-CLI context), not cdk.json's. So `cdk synth` in the
repository, `fmcluster synth` with the repository's cdk.json, without any, and beside a cdk.json
or a `-c` that says otherwise write the same cloud assembly, byte for byte; and the flags matter
(an app without them writes other templates), so the comparison can fail."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest

from fmcluster.spec import loader
from fmcluster_cdk.feature_flags import FEATURE_FLAGS
from fmcluster_cdk.stacks.app import build
from fmcluster_cdk.synthesis import APP_SETTINGS, new_app
from tests.support.paths import ROOT

pytestmark = pytest.mark.synth

EXAMPLE = "examples/p5-pcs.yaml"
CDK = ROOT / "node_modules/.bin/cdk"
WEAK = "@aws-cdk/core:defaultCrossStackReferences"
# The worktree's code first (also in the app's process), whichever fmcluster the venv has installed.
ENV = {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))},
       "AWS_EC2_METADATA_DISABLED": "true", "CDK_DISABLE_VERSION_CHECK": "true", "CDK_DISABLE_CLI_TELEMETRY": "true",
       "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
       "PATH": os.pathsep.join([str(Path(sys.executable).parent), str(ROOT / "node_modules/.bin"), os.environ["PATH"]])}


def assembly(outdir: Path) -> dict[str, bytes]:
    """Every file of a cloud assembly (templates, assets, manifest, tree), by its path in it."""
    return {p.relative_to(outdir).as_posix(): p.read_bytes() for p in sorted(outdir.rglob("*")) if p.is_file()}


def fmcluster_synth(cwd: Path, spec: str, outdir: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "fmcluster", "synth", spec, "-o", str(outdir)], cwd=cwd, env=ENV,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]


def cdk_synth(outdir: Path, *context: str) -> None:
    args = [a for c in (f"spec={EXAMPLE}", *context) for a in ("-c", c)]
    result = subprocess.run([str(CDK), "synth", "-q", *args, "-o", str(outdir)], cwd=ROOT, env=ENV,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, bytes]:
    """`fmcluster synth` of the example in the repository (its cdk.json beside it), as `make synth` runs."""
    outdir = tmp_path_factory.mktemp("repository") / "cdk.out"
    fmcluster_synth(ROOT, EXAMPLE, outdir)
    return assembly(outdir)


def test_cdk_json_holds_only_what_the_cdk_cli_reads():
    """The app to run, and the CLI's own settings; the default spec for `cdk synth` (`make synth`)."""
    config = json.loads((ROOT / "cdk.json").read_text())
    assert set(config) <= {"app", "notices", "context"}
    assert set(config["context"]) == {"spec", "cli-telemetry"}
    assert not [key for key in config["context"] if key.startswith("@")]


def test_without_a_cdk_json(tmp_path, reference):
    """From a directory with no cdk.json (an installed package's user), the same bytes."""
    work = tmp_path / "elsewhere"
    work.mkdir()
    shutil.copy(ROOT / EXAMPLE, work / "cluster.yaml")
    fmcluster_synth(work, "cluster.yaml", tmp_path / "out")
    assert assembly(tmp_path / "out") == reference


def test_beside_a_cdk_json_that_says_otherwise(tmp_path, reference):
    """`fmcluster synth` passes the working directory's cdk.json context to the app, as the CDK CLI
    does; feature flags there (strong references, every boolean flag flipped) change nothing."""
    work = tmp_path / "other-project"
    work.mkdir()
    flipped = {key: (not value if isinstance(value, bool) else value) for key, value in FEATURE_FLAGS.items()}
    (work / "cdk.json").write_text(json.dumps({"app": "true", "context": {**flipped, WEAK: "strong"}}))
    shutil.copy(ROOT / EXAMPLE, work / "cluster.yaml")
    fmcluster_synth(work, "cluster.yaml", tmp_path / "out")
    assert assembly(tmp_path / "out") == reference


@pytest.mark.skipif(not CDK.exists(), reason="CDK CLI not installed (make install)")
def test_the_cdk_cli_with_and_without_a_flag_on_its_command_line(tmp_path, reference):
    cdk_synth(tmp_path / "cli")
    assert assembly(tmp_path / "cli") == reference
    cdk_synth(tmp_path / "strong", f"{WEAK}=strong")
    assert assembly(tmp_path / "strong") == reference


def templates(app: cdk.App) -> dict[str, str]:
    return {stack.stack_name: json.dumps(stack.template) for stack in app.synth().stacks}


def test_the_flags_make_the_templates(tmp_path):
    """Without the app's flags (a plain cdk.App), the references between the stacks are exports
    (Fn::ImportValue) instead of weak ones (Fn::GetStackOutput): the comparisons above can fail."""
    spec = loader.load(ROOT / EXAMPLE).spec
    assert spec is not None
    ours, plain = new_app(str(tmp_path / "ours")), cdk.App(outdir=str(tmp_path / "plain"), **APP_SETTINGS)
    build(ours, spec)
    build(plain, spec)
    ours_text, plain_text = "".join(templates(ours).values()), "".join(templates(plain).values())
    assert FEATURE_FLAGS[WEAK] == "weak"
    assert "Fn::GetStackOutput" in ours_text and "Fn::GetStackOutput" not in plain_text
    assert plain_text.count("Fn::ImportValue") > ours_text.count("Fn::ImportValue")


CREATION_STACK = "aws:cdk:creationStack"  # the metadata entry of a resource's creation stack trace
NO_CREATION_STACKS = "aws:cdk:disable-creation-stack-traces"


def test_the_assembly_holds_no_creation_stack_traces(reference):
    """CDK would keep each resource's creation stack in the stacks' metadata: under jsii only frames
    of its runtime, at a tenth of the synthesis's Node.js CPU (fmcluster_cdk.synthesis.DEFAULT_CONTEXT)."""
    metadata = [name for name in reference if name.endswith(".metadata.json")]
    assert metadata and not [name for name in metadata if CREATION_STACK.encode() in reference[name]]


@pytest.mark.parametrize(("context", "traced"), [(None, False), ({NO_CREATION_STACKS: False}, True)])
def test_a_context_of_the_callers_asks_for_them_again(tmp_path, context, traced):
    """The default is context's start: the caller's (cdk.json, `-c`) wins over it."""
    app = new_app(str(tmp_path), context)
    cdk.CfnResource(cdk.Stack(app, "S"), "Topic", type="AWS::SNS::Topic")
    stack = app.synth().get_stack_artifact("S")
    assert bool(stack.find_metadata_by_type(CREATION_STACK)) == traced


def test_an_api_the_cdk_deprecates_fails_the_synthesis_that_calls_it(tmp_path):
    """tests/conftest.py sets jsii's JSII_DEPRECATED=fail for every app of a run, in process and
    started from it: a call of an API that aws-cdk-lib will remove (a user's synthesis would print
    "[WARNING] ... is deprecated" and go on) fails the test that reaches it."""
    stack = cdk.Stack(new_app(str(tmp_path)), "S")
    first, second = (cdk.CfnResource(stack, name, type="AWS::SNS::Topic") for name in ("A", "B"))
    with pytest.raises(RuntimeError, match=r"^DeprecationError: aws-cdk-lib\.CfnResource#addDependsOn is deprecated"):
        first.add_depends_on(second)
