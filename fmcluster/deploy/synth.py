"""Synthesis from the command line: `fmcluster synth SPEC...` runs the CDK app.

The CDK app is the CDK side's (fmcluster_cdk/synthesis.py: what app.py, and so `cdk synth`, runs).
`fmcluster synth` runs it as the CDK CLI runs an app, a process whose environment names the
output directory (CDK_OUTDIR) and the context (CDK_CONTEXT_JSON: the working directory's cdk.json's,
as the CLI passes it, and the specs), so both commands give the same assembly through the same
checks; its report is a summary of the assembly (`--assembly DIR`: of one already written, such as
`make synth`'s). The templates do not depend on a cdk.json: the app sets its CDK feature flags
itself. Pure: nothing here imports aws_cdk.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from fmcluster import APART, DEPLOY_ACCOUNT, PROGRESS_FD, WARNED
from fmcluster.deploy import assembly
from fmcluster.facts import nodejs

# the CDK app program (app.py, cdk.json's "app", runs it too): its __main__ stays, the CDK's app contract
APP_MODULE = "fmcluster_cdk.synthesis"


def cdk_json(start: Path | None = None) -> dict[str, Any]:
    """The cdk.json of `start` (default: the working directory), as the CDK CLI reads it; {} without one."""
    candidate = (start or Path.cwd()) / "cdk.json"
    if candidate.is_file():
        config: dict[str, Any] = json.loads(candidate.read_text())
        return config
    return {}


def app_context(config: Mapping[str, Any]) -> dict[str, Any]:
    """Context the CDK CLI passes to an app from cdk.json, so a synthesis outside the CLI matches it."""
    context = dict(config.get("context", {}))
    context.setdefault("aws:cdk:enable-path-metadata", config.get("pathMetadata", True))
    context.setdefault("aws:cdk:enable-asset-metadata", config.get("assetMetadata", True))
    context.setdefault("aws:cdk:version-reporting", config.get("versionReporting", True))
    return context


Steps = Callable[[str], None]  # told each step of the CDK app as it starts ("building the stacks of ...")


def run_app(context: Mapping[str, Any], outdir: str, steps: Steps | None = None, warned: bool = False,
            apart: bool = False) -> int:
    """Run the CDK app with cdk.json's context and `context`, into `outdir`: its exit code. jsii
    runs on the venv's Node.js where there is one, unless the caller names one (fmcluster.facts.nodejs.pin).
    With `steps`, the app says each step it starts on a pipe of its own (PROGRESS_FD), and each
    is passed on as it comes; without, the app says nothing more than it would to `cdk synth`.
    `warned`: the caller has printed the specs' warnings (WARNED), so the app says their errors only.
    `apart`: each spec of the context an assembly of its own, in `outdir`/N (APART)."""
    # without DEPLOY_ACCOUNT: these templates are to read and compare, not to deploy, so a spec's
    # placeholders stay warnings here (the app refuses them where the CDK CLI found credentials)
    env = {**{k: v for k, v in os.environ.items() if k not in (DEPLOY_ACCOUNT, APART)}, "CDK_OUTDIR": str(outdir),
           "CDK_CONTEXT_JSON": json.dumps({**app_context(cdk_json()), **context})}
    if warned:
        env[WARNED] = "1"
    if apart:
        env[APART] = "1"
    nodejs.pin(env)
    # The app runs in a session of its own, so that Ctrl-C reaches this process alone (the app
    # and jsii's Node.js would each die mid-call, with a traceback); on any interrupt the
    # whole session, Node.js included, is stopped here before the exception goes on.
    # SIGTERM and SIGHUP (`timeout`, a closed terminal) no longer reach the app either: meanwhile
    # they end this process as their default would (exit 128 + N), after stopping the app.
    ending = (signal.SIGTERM, signal.SIGHUP)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, _exit_on) for sig in ending} if main_thread else {}
    reader: threading.Thread | None = None
    try:
        if steps is None:
            app = subprocess.Popen([sys.executable, "-m", APP_MODULE], env=env, start_new_session=True)
        else:
            read_end, write_end = os.pipe()
            try:
                app = subprocess.Popen([sys.executable, "-m", APP_MODULE], start_new_session=True,
                                       env={**env, PROGRESS_FD: str(write_end)}, pass_fds=(write_end,))
            finally:
                os.close(write_end)  # the app holds the only write end: the pipe ends when it does
            reader = threading.Thread(target=_pass_on, args=(read_end, steps), name="fmcluster-steps", daemon=True)
            reader.start()
        try:
            return app.wait()
        except BaseException:
            stop(app)
            raise
    finally:
        if reader is not None:  # done at once: the pipe ended with the app (a bound, should a child keep it)
            reader.join(timeout=10)
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def _pass_on(read_end: int, steps: Steps) -> None:
    """Each line the app writes on its progress pipe, to `steps`, until the pipe ends."""
    with os.fdopen(read_end, "r", encoding="utf-8", errors="replace") as pipe:
        for line in pipe:
            if line.strip():
                steps(line.strip())


def _exit_on(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def stop(process: subprocess.Popen[bytes]) -> None:
    """Kill a process started in a session of its own, and everything it started, and reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:  # already gone
        pass
    process.wait()


OUTPUT_HINT = "name a directory you can write: fmcluster synth SPEC -o DIR"


def output_problem(outdir: str) -> str | None:
    """Why the app could not write its assembly into `outdir`, found before it runs (it takes
    seconds to fail otherwise); None when it can."""
    problem = _unwritable(outdir)
    if problem is None:
        return None
    reason, from_the_system = problem
    return f"{outdir}: cannot write there ({reason})" if from_the_system else f"{outdir}: {reason}"


def _unwritable(directory: str) -> tuple[str, bool] | None:
    """Why a directory, or one made at `directory`, cannot be written, and whether the reason is
    the system's (an errno's words); None when it can. A probe
    file or directory is made and removed at once, so permissions, read-only file systems and
    pseudo file systems (/proc) all count, whoever runs it."""
    path = Path(directory)
    try:
        if path.exists() or path.is_symlink():
            if not path.is_dir():
                return "exists and is not a directory", False
            fd, probe = tempfile.mkstemp(dir=path, prefix=".fmcluster-probe-")
            os.close(fd)
            os.unlink(probe)
            return None
        ancestor = path.parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            return f"{ancestor} is a file, not a directory", False
        os.rmdir(tempfile.mkdtemp(dir=ancestor, prefix=".fmcluster-probe-"))
    except OSError as exc:
        return str(exc.strerror or exc), True
    return None


def node_tmpdir() -> tuple[str, str]:
    """(variable, directory): where jsii's Node.js makes its temporary directories, as Node.js's
    os.tmpdir() picks it on Linux and macOS: the first of TMPDIR, TMP and TEMP that is set and
    not empty, else /tmp (variable ""), a trailing slash dropped. Python's tempfile passes over a
    directory it cannot use; Node.js does not, so this is the one to check."""
    for variable in ("TMPDIR", "TMP", "TEMP"):
        value = os.environ.get(variable, "")
        if value:
            return variable, value.rstrip("/") or "/"
    return "", "/tmp"


def jsii_cache_root() -> tuple[str, str] | None:
    """(variable, directory): where jsii's Node.js keeps its package cache, as its runtime picks it
    (JSII_RUNTIME_PACKAGE_CACHE_ROOT, else HOME's .cache/aws/jsii/package-cache, else one in the
    temporary directory); None when the cache is off (JSII_RUNTIME_PACKAGE_CACHE=disabled)."""
    if os.environ.get("JSII_RUNTIME_PACKAGE_CACHE", "enabled").lower() != "enabled":
        return None
    root = os.environ.get("JSII_RUNTIME_PACKAGE_CACHE_ROOT", "")
    if root:
        return "JSII_RUNTIME_PACKAGE_CACHE_ROOT", root
    home = os.environ.get("HOME", "") or _passwd_home()
    if home and os.path.isabs(home):
        cache = "Library/Caches/com.amazonaws.jsii/package-cache" if sys.platform == "darwin" else \
            ".cache/aws/jsii/package-cache"
        return "HOME", os.path.join(home, cache)
    variable, tmp = node_tmpdir()
    return variable, os.path.join(tmp, f"aws-jsii-package-cache-{os.getuid()}")


def _passwd_home() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError):
        return ""


def environment_problem(node: bool = True) -> tuple[str, str | None] | None:
    """(error, hint) when jsii's Node.js cannot run in this environment, found before the app
    runs; None when it can. A temporary directory it cannot make fails the app with a long
    traceback; a package cache under a HOME it cannot write (HOME=/proc/x) is worse: Node.js's
    recursive mkdir never returns on some file systems, /proc among them, and the app runs on
    at 100% CPU. With `node`, a Node.js that is missing or of a line jsii does not support too
    (one line, no hint: fmcluster.facts.nodejs); `synth` leaves that to the app, which checks
    the spec first."""
    variable, tmp = node_tmpdir()
    # Node.js makes its temporary directories in this one (mkdtemp), never makes it
    problem = _unwritable(tmp) if os.path.isdir(tmp) else (os.strerror(errno.ENOENT), True)
    if problem is not None:
        named = f"{variable}={os.environ[variable]}" if variable else tmp
        return (f"{named}: cannot create a temporary directory there ({problem[0]})",
                f"set {variable or 'TMPDIR'} to a directory you can write, such as /tmp")
    cache = jsii_cache_root()
    if cache is not None:
        variable, root = cache
        problem = _unwritable(root)
        if problem is not None:
            named = f"{variable}={os.environ[variable]}" if variable in os.environ else root
            hint = "set JSII_RUNTIME_PACKAGE_CACHE_ROOT to a directory you can write"
            if variable != "JSII_RUNTIME_PACKAGE_CACHE_ROOT":
                hint = f"set {variable or 'HOME'} to a directory you can write, or {hint} for the cache"
            return f"{named}: jsii cannot make its package cache there ({root}: {problem[0]})", hint
    missing = nodejs.problem() if node else None
    return (missing, None) if missing is not None else None


class SynthesisFailed(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(f"the CDK app exited with {code}")
        self.code = code


def apart(paths: Sequence[str], steps: Callable[[int, str], None] | None = None) -> list[dict[str, dict[str, Any]]]:
    """The templates of each spec file of `paths` (stack name -> template, nested stacks as
    `PARENT/ID`), each spec an assembly of its own, as the app writes it alone: all of them
    synthesized by one run of the app (APART), in a throwaway directory (`-`: the standard input
    already read). What `fmcluster diff` hands to fmcluster.deploy.diff, which has validated the
    specs and said their warnings (the app does not say them again). `steps` is told each step
    with the index in `paths` of the spec it is for (-1: for them all)."""
    from fmcluster.spec import loader  # the spec's models: the app's to import, not each caller's

    with tempfile.TemporaryDirectory(prefix="fmcluster-synth-") as root:
        outdir = os.path.join(root, "cdk.out")
        files = list(paths)
        if loader.STDIN in files:  # the app reads a file: standard input was read once, by the caller
            text = loader.stdin_text()
            stdin = os.path.join(root, "stdin.yaml")
            with open(stdin, "w", encoding="utf-8") as handle:
                handle.write(text if isinstance(text, str) else "")
            files = [stdin if p == loader.STDIN else p for p in files]
        code = run_app({"spec": ",".join(files)}, outdir, _numbered(steps) if steps is not None else None,
                       warned=True, apart=True)
        if code != 0:
            raise SynthesisFailed(code)
        return [assembly.templates(os.path.join(outdir, str(n))) for n in range(1, len(files) + 1)]


def _numbered(steps: Callable[[int, str], None]) -> Steps:
    """The app's steps under APART ("N: STEP", spec N counted from 1; a step for all specs has no
    number) to `steps`, with the spec's index."""
    def step(line: str) -> None:
        number, _, text = line.partition(": ")
        if number.isdigit():
            steps(int(number) - 1, text)
        else:
            steps(-1, line)

    return step


# ---- the command ---------------------------------------------------------------------------

FORMATS = ("text",)
_SHOWN = ("CloudFormation::Stack", "EC2::Subnet", "EC2::NatGateway", "EC2::SecurityGroup", "EC2::PlacementGroup",
          "EC2::LaunchTemplate", "S3::Bucket", "KMS::Key", "FSx::FileSystem", "FSx::DataRepositoryAssociation",
          "PCS::Cluster", "PCS::ComputeNodeGroup", "PCS::Queue", "SageMaker::Cluster", "EKS::Cluster",
          "EKS::Nodegroup", "APS::Workspace", "APS::RuleGroupsNamespace", "APS::Scraper", "Grafana::Workspace",
          "CloudWatch::Alarm", "ImageBuilder::Image")


@dataclass(frozen=True)
class StackSummary:
    name: str  # PARENT/ID for a nested stack
    resources: int
    kinds: tuple[tuple[str, int], ...]  # the main resource types (_SHOWN) it holds, with their counts
    template: Path

    def line(self) -> str:
        shown = f" ({', '.join(f'{n} {k}' for k, n in self.kinds)})" if self.kinds else ""
        return f"{'  ' * self.name.count('/')}{self.name}: {self.resources} resources{shown} -> {self.template}"


@dataclass(frozen=True)
class SynthReport:
    assembly: str  # the cloud assembly's directory
    stacks: tuple[StackSummary, ...] = ()
    app_failed: int = 0  # the CDK app's exit code when it failed (it said why on stderr)
    error: str | None = None  # no assembly to summarize
    hint: str | None = None


def stacks(outdir: Path | str) -> tuple[StackSummary, ...]:
    """Every stack of a cloud assembly, each nested stack (a node group of NAME-cluster) after its parent."""
    found = []
    for template in assembly.load(outdir).values():
        resources = template.body.get("Resources", {})
        kinds: dict[str, int] = {}
        for resource in resources.values():
            kind = resource["Type"].split("::", 1)[-1]
            if kind in _SHOWN:
                kinds[kind] = kinds.get(kind, 0) + 1
        found.append(StackSummary(template.name, len(resources), tuple(sorted(kinds.items())), template.path))
    return tuple(found)


def summary(outdir: Path | str) -> str:
    """One line per stack of a cloud assembly: resources, a count per main type, template path;
    each nested stack indented under its parent."""
    return "\n".join(s.line() for s in stacks(outdir))


def summarize(outdir: str) -> SynthReport:
    """`fmcluster synth --assembly DIR`: the report of an assembly already written (`npx cdk synth`)."""
    if os.path.isdir(outdir) and not os.path.exists(os.path.join(outdir, "manifest.json")):
        return SynthReport(outdir, error=f"{outdir}: no cloud assembly in it (no manifest.json)",
                           hint="synthesize one first: npx cdk synth, or fmcluster synth SPEC -o DIR")
    try:
        return SynthReport(outdir, stacks(outdir))
    except OSError as exc:
        return SynthReport(outdir, error=f"{outdir}: no cloud assembly to read ({exc.strerror or exc})",
                           hint="synthesize one first: npx cdk synth, or fmcluster synth SPEC -o DIR")


def run(paths: list[str], outdir: str = "cdk.out", steps: Steps | None = None) -> SynthReport:
    """`fmcluster synth SPEC...`: the app for every spec into `outdir`, then its summary. An
    output directory it cannot write is refused before the app runs; one the app made is removed
    when it is interrupted, as when it fails."""
    problem = output_problem(outdir)
    if problem is not None:
        return SynthReport(outdir, error=problem, hint=OUTPUT_HINT)
    unusable = environment_problem(node=False)  # Node.js: the app's, after the spec
    if unusable is not None:
        return SynthReport(outdir, error=unusable[0], hint=unusable[1])
    fresh = not os.path.lexists(outdir)
    try:
        code = run_app({"spec": ",".join(paths)}, outdir, steps)
    except BaseException:
        if fresh:
            shutil.rmtree(outdir, ignore_errors=True)
        raise
    return summarize(outdir) if code == 0 else SynthReport(outdir, app_failed=code)


def render(report: SynthReport, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr): one line per stack; nothing when the app failed (it said why)."""
    if report.error is not None:
        return "", f"error: {report.error}\n  hint: {report.hint}\n"
    if report.app_failed:
        return "", ""
    return "\n".join(s.line() for s in report.stacks) + "\n", ""


def exit_code(report: SynthReport) -> int:
    """The app's exit code (2 for an invalid spec); 2 when there is no assembly to read."""
    return 2 if report.error is not None else report.app_failed
