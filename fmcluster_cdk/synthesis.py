"""Synthesis: the one entry point of the CDK app, for `cdk synth` and for `fmcluster synth`.

Sources and details: docs/research-notes.md, "fmcluster_cdk/synthesis.py"."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from fmcluster import APART, DEPLOY_ACCOUNT, PROGRESS_FD, WARNED
from fmcluster.facts import nodejs
from fmcluster.spec.loader import load_specs
from fmcluster.spec.models import ClusterSpec

if TYPE_CHECKING:  # imported where an app is made: importing aws_cdk starts Node.js (jsii)
    import aws_cdk as cdk

# cdk.App props of every fmcluster app. CDK's built-in CloudFormation validation is off: it
# compiles a WebAssembly rule engine in the Node process on every synth (about 5 s of CPU, more
# than the rest of a cluster's synthesis), and cfn-lint already checks every template of every
# example in the test suite, with more rules. The templates are the same either way.
APP_SETTINGS: Mapping[str, Any] = {"builtin_cloud_formation_validation": False}
# Context every fmcluster app starts from; cdk.json, the app's environment and `-c` override it.
# No creation stack trace in the stacks' metadata: CDK captures one for every resource (an Error
# made and parsed, about a tenth of the Node.js CPU of a synthesis), and under jsii it holds only
# frames of the jsii runtime, never a line of Python. CDK documents the key as a switch for speed;
# the CDK CLI's --debug (CDK_DEBUG) captures them again. The templates are the same either way.
DEFAULT_CONTEXT: Mapping[str, Any] = {"aws:cdk:disable-creation-stack-traces": True}


def new_app(outdir: Optional[str] = None, context: Optional[Mapping[str, Any]] = None) -> cdk.App:
    """A CDK app as fmcluster makes them. Without arguments, the output directory and context
    come from the environment the CDK CLI (or `fmcluster synth`) sets. DEFAULT_CONTEXT is the
    context's start: `context`, cdk.json and `-c` win over it. The feature flags are post-CLI
    context: they win over all of them."""
    import aws_cdk as cdk

    from fmcluster_cdk.feature_flags import FEATURE_FLAGS

    kwargs: dict[str, Any] = {"outdir": outdir} if outdir else {}
    return cdk.App(context={**DEFAULT_CONTEXT, **(context or {})}, post_cli_context=dict(FEATURE_FLAGS),
                   **APP_SETTINGS, **kwargs)


def build_app(specs: Sequence[ClusterSpec], outdir: Optional[str] = None,
              context: Optional[Mapping[str, Any]] = None) -> cdk.App:
    """An app with the stacks of every spec (in-process; tests and benchmarks use it)."""
    from fmcluster_cdk.stacks.app import build

    app = new_app(outdir, context)
    for spec in specs:
        build(app, spec)
    return app


def _step(text: str) -> None:
    """Say the step this program starts, one line on the progress pipe `fmcluster synth` and
    `fmcluster diff` open on a terminal (PROGRESS_FD); nothing without one (as under `cdk synth`)."""
    fd = os.environ.get(PROGRESS_FD, "")
    if fd.isdigit():
        try:
            os.write(int(fd), f"{text}\n".encode())
        except OSError:  # the reader has gone: progress is never worth a failed synthesis
            pass


def _say(text: str) -> None:
    """`text` as a line on stderr. On a terminal that shows the steps (PROGRESS_FD) it starts on a
    cleared line, not after a step, and is written whole, its newline with it: the CLI draws its
    steps on the same terminal meanwhile, and a step drawn between a line's text and its newline
    (print writes them apart) would stay on the screen, or clear the text."""
    clear = "\r\x1b[K" if os.environ.get(PROGRESS_FD, "").isdigit() else ""
    sys.stderr.write(f"{clear}{text}\n")
    sys.stderr.flush()


def _report(diagnostics: Sequence[Any]) -> None:
    """Each diagnostic on stderr (`_say`); warnings only where the caller has not said them (WARNED)."""
    for diagnostic in diagnostics:
        if diagnostic.is_error or not os.environ.get(WARNED):
            _say(diagnostic.format())


def _pipeline(path: str, deploying: bool) -> int:
    # imported here: a cluster's synthesis, the common case, needs neither the pipeline's spec
    # nor CDK Pipelines and CodeBuild
    from fmcluster.spec import pipeline

    loaded = pipeline.load(path, deploying=deploying)
    _report(loaded.diagnostics)
    if not loaded.ok or loaded.pipeline is None:
        return 2
    if not _node_runs():
        return 2
    from fmcluster_cdk.stacks.pipeline import pipeline_stack

    app = new_app()
    _step("building the pipeline stack")
    pipeline_stack(app, loaded.pipeline)
    _step("writing the template")
    app.synth()
    return 0


def _context() -> dict[str, Any]:
    """The context the CDK CLI (or `fmcluster synth`) passes, read as cdk.App reads it but
    without starting Node.js: CDK_CONTEXT_JSON, and the file of what did not fit in it."""
    context: dict[str, Any] = {}
    for text in (os.environ.get("CDK_CONTEXT_JSON") or "{}",
                 _read(os.environ.get("CONTEXT_OVERFLOW_LOCATION_ENV", ""))):
        found = json.loads(text) if text else {}
        context.update(found if isinstance(found, dict) else {})
    return context


def _read(path: str) -> str:
    if not path:
        return ""
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def deploying(environ: Mapping[str, str] | None = None) -> bool:
    """Whether these templates may be deployed: the CDK CLI runs the app with credentials (it
    tells the app their account), as `cdk deploy`, the pipeline's own synthesis in CodeBuild and a
    GitHub Actions deploy all do. The CLI does not say which command runs, so `cdk synth` with
    credentials counts too. Without credentials nothing can be deployed from here: the README's
    `npx aws-cdk synth`, `make synth` and `fmcluster synth` write templates to read."""
    return bool((os.environ if environ is None else environ).get(DEPLOY_ACCOUNT))


def _node_runs() -> bool:
    """Whether the Node.js jsii will run is one the app runs on (after saying why not, in one
    line); jsii is pointed at the venv's Node.js where there is one, as `fmcluster synth` does."""
    nodejs.pin(os.environ)
    problem = nodejs.problem()
    if problem is not None:
        _say(f"error: {problem}")
    return problem is None


# how the CDK's Node.js side words a file-system error: a Node.js errno code ("ENOTDIR: not a
# directory, mkdir 'x'"), or the App's own check of its output directory
FILE_SYSTEM_ERROR = re.compile(r"^E[A-Z]+: |.* must be a directory$")


def main() -> int:
    """Synthesize what the context asks for (docs/research-notes.md). Returns the exit code."""
    outdir = os.environ.get("CDK_OUTDIR")
    fresh = bool(outdir) and not os.path.exists(str(outdir))
    code = 1
    try:
        code = _main()
    except RuntimeError as exc:  # jsii's error of the Node.js side; only the file system's are the user's
        message = str(exc).splitlines()[0] if str(exc) else ""
        if not FILE_SYSTEM_ERROR.match(message):
            raise
        _say(f"error: {outdir or 'cdk.out'}: cannot write the cloud assembly ({message})\n"
             "  hint: name a directory you can write: fmcluster synth SPEC -o DIR, or cdk synth -o DIR")
        code = 2
    finally:
        if code != 0 and fresh:  # the App made the output directory: a failed synthesis leaves nothing
            shutil.rmtree(str(outdir), ignore_errors=True)
    return code


def _main() -> int:
    """The spec first (an invalid one is said without Node.js ever starting), then Node.js, then
    the app."""
    context = _context()
    may_deploy = deploying()
    pipeline_file = context.get("pipeline")
    if pipeline_file:
        return _pipeline(str(pipeline_file), may_deploy)
    paths = [p for p in str(context.get("spec") or "").split(",") if p]
    if not paths:
        _say("error: no spec given: cdk synth -c spec=examples/p5-pcs.yaml (or fmcluster synth SPEC)")
        return 2
    _step(f"reading {', '.join(paths)}")
    apart = os.environ.get(APART) == "1"
    specs, diagnostics = load_specs(paths, deploying=may_deploy, apart=apart)
    _report(diagnostics)
    if specs is None or not _node_runs():
        return 2
    from fmcluster_cdk.stacks.app import build

    # (output directory, its specs, the steps' prefix): one App of every spec, or under APART
    # (`fmcluster diff`) an App of each, in CDK_OUTDIR/N, as the app alone writes it
    root = os.environ.get("CDK_OUTDIR") or "cdk.out"
    apps = [(os.path.join(root, str(n)), [spec], f"{n}: ") for n, spec in enumerate(specs, 1)] if apart \
        else [(None, specs, "")]
    for outdir, built, prefix in apps:
        app = new_app(outdir)
        for spec in built:
            _step(f"{prefix}building the stacks of {spec.name}")
            build(app, spec)
        _step(f"{prefix}writing the templates")
        app.synth()
    return 0


if __name__ == "__main__":  # `python -m fmcluster_cdk.synthesis`, as `fmcluster synth` runs it
    sys.exit(main())
