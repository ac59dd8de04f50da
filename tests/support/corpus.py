"""The cloud assemblies of the example specs, synthesized once per test run and read by every test
that checks what an example synthesizes. Not a test module.

A run used to synthesize the eight examples about fifteen times each, one module at a time. Here
each spec (an example, or a variant of one as text) is synthesized once, by the CDK app as
`fmcluster synth` runs it (fmcluster.deploy.synth.run_app: cdk.json's context, the venv's Node.js;
in a process without AWS credentials), with cdk-nag on (`-c nag=true`: it adds its findings
and acknowledgements to the assembly's metadata and changes no template byte;
tests/cdk/test_examples_synth.py holds a fresh `fmcluster synth` and the CDK CLI's assembly to the
corpus, byte for byte). The assemblies live in a directory every pytest-xdist worker of the run
shares, each made under a file lock by whichever worker asks first (the pattern pytest-xdist
documents for session data), and are read-only by contract: a test that changes files copies
the assembly first.

Specs asked for together are made together: the first example asked for brings every example not
made yet, and a module can ask for its variants at once (`assemblies`). They are synthesized by
one run of the app, each spec an App of its own written apart (as `fmcluster diff` runs OLD and
NEW: fmcluster.deploy.synth.run_app with `apart`), which writes each assembly byte for byte as
the app alone does (tests/cdk/test_examples_synth.py and tests/project/test_wheel.py hold the
corpus to `fmcluster synth`'s): the app's start (Python, aws_cdk, Node.js, the aws-cdk-lib
modules) is paid once, not once a spec, about two thirds of the CPU of the eight examples.

An unsuppressed cdk-nag error stops the app (CDK refuses to write an assembly with an error
annotation): every test that reads that example then fails with nag's message, which is recorded
so that the synthesis is not tried again in the same run. Where a run of several specs fails, each
is made again alone, so that the failure is recorded for the spec that fails.

cfn-lint's verdict on a template is memoized the same way, by the template's bytes: a template
that two specs or two modules synthesize alike is linted once a run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import warnings
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable, Sequence

from tests.support.examples import CLEAN_ENV
from tests.support.locks import locked
from tests.support.paths import EXAMPLES, ROOT

NAG = {"nag": "true"}  # the context every corpus assembly is synthesized with
# fmcluster synth's own call of the app, with a context of the caller's: CONTEXT_JSON OUTDIR [apart]
# (`apart`: each spec of the context written apart, to OUTDIR/N, as `fmcluster diff` runs the app)
RUN_APP = ("import json, sys; from fmcluster.deploy.synth import run_app; "
           "sys.exit(run_app(json.loads(sys.argv[1]), sys.argv[2], apart=sys.argv[3:] == ['apart']))")


class SynthesisError(AssertionError):
    """The app failed on a spec of the corpus (its stderr)."""


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


class Corpus:
    """Assemblies and lint verdicts of one test run, under `root` (shared by the run's workers)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    # --- assemblies ------------------------------------------------------------------------

    def assembly(self, spec: str, *, text: str | None = None) -> Path:
        """The cloud assembly of `spec` (a path relative to the repository, examples/NAME.yaml) or,
        with `text`, of that spec text named `spec` (a variant of an example). Made on first use;
        an example together with every other example not made yet."""
        together = [(e, None) for e in EXAMPLES] if text is None and spec in EXAMPLES else [(spec, text)]
        self.assemblies(together)
        key = self._key(spec, text)
        failed = self._failed(key)
        if failed.exists():
            raise SynthesisError(failed.read_text())
        return self._folder(key) / "cdk.out"

    def assemblies(self, specs: Sequence[tuple[str, str | None]]) -> None:
        """Make the assemblies of `specs` (each a spec and its text, as `assembly` takes them) that
        are not made yet, in one run of the app. Each spec's lock is taken in the order of the keys,
        so two workers asking for overlapping sets never deadlock (one waits for the other's run)."""
        wanted = {self._key(spec, text): (spec, text) for spec, text in specs}
        with ExitStack() as held:
            todo = []
            for key in sorted(wanted):
                if self._done(key).exists():
                    continue
                held.enter_context(locked(self.root / "assemblies" / f"{key}.lock"))
                if not self._done(key).exists() and not self._failed(key).exists():
                    todo.append((key, *wanted[key]))
            if len(todo) > 1 and self._synthesize_apart(todo):
                return
            for key, spec, text in todo:  # alone: the one that fails is recorded as failing
                try:
                    self._synthesize(spec, text, self._folder(key))
                except SynthesisError as error:
                    self._failed(key).write_text(str(error))
                    continue
                self._done(key).write_text(spec + "\n")

    def _key(self, spec: str, text: str | None) -> str:
        content = text if text is not None else (ROOT / spec).read_text()
        return _digest(spec, content, json.dumps(NAG, sort_keys=True))

    def _folder(self, key: str) -> Path:
        return self.root / "assemblies" / key

    def _done(self, key: str) -> Path:
        return self._folder(key) / ".complete"

    def _failed(self, key: str) -> Path:
        return self.root / "assemblies" / f"{key}.failed"

    @staticmethod
    def _spec_file(spec: str, text: str | None, folder: Path) -> str:
        """The file the app reads for `spec`: the spec itself, or the variant's text written into
        the assembly's folder under the name it is known by."""
        shutil.rmtree(folder, ignore_errors=True)  # a worker that died half-way
        folder.mkdir(parents=True)
        if text is None:
            return spec
        path = folder / Path(spec.partition("+")[0]).name
        path.write_text(text)
        return str(path)

    @staticmethod
    def _run_app(files: list[str], outdir: Path, apart: bool = False) -> subprocess.CompletedProcess[str] | None:
        """The app on the spec files, run by the function `fmcluster synth` runs it with
        (fmcluster.deploy.synth.run_app: cdk.json's context, the venv's Node.js; `apart`: as
        `fmcluster diff` runs it), in a process of its own without AWS credentials: None when it
        wrote its assemblies, else its run (an exit code, or a traceback on its stderr)."""
        context = json.dumps({**NAG, "spec": ",".join(files)})
        result = subprocess.run([sys.executable, "-c", RUN_APP, context, str(outdir), *(["apart"] if apart else [])],
                                cwd=ROOT, env=CLEAN_ENV, capture_output=True, text=True)
        return result if result.returncode != 0 or "Traceback" in result.stderr else None

    @classmethod
    def _synthesize(cls, spec: str, text: str | None, folder: Path) -> None:
        """The assembly of one spec, by a run of the app of its own."""
        failed = cls._run_app([cls._spec_file(spec, text, folder)], folder / "cdk.out")
        if failed is not None:
            raise SynthesisError(f"{spec}: the app exited {failed.returncode}\n{failed.stderr}")

    def _synthesize_apart(self, todo: list[tuple[str, str, str | None]]) -> bool:
        """The specs of `todo` (key, spec, text) in one run of the app, each written apart and then
        moved to its own folder, marked made. False, with nothing marked, when the run fails (said
        in a warning: a failure of the run alone would otherwise pass unseen, only slower)."""
        files = [self._spec_file(spec, text, self._folder(key)) for key, spec, text in todo]
        out = self.root / "assemblies" / f"apart-{os.getpid()}"
        shutil.rmtree(out, ignore_errors=True)
        try:
            failed = self._run_app(files, out, apart=True)
            if failed is not None:
                warnings.warn(f"the app exited {failed.returncode} on {len(todo)} specs at once; each is made "
                              f"alone:\n{failed.stderr[-4000:]}", stacklevel=2)
                return False
            for n, (key, spec, _) in enumerate(todo, 1):
                (out / str(n)).rename(self._folder(key) / "cdk.out")
                self._done(key).write_text(spec + "\n")
            return True
        finally:
            shutil.rmtree(out, ignore_errors=True)

    # --- results kept as JSON ----------------------------------------------------------------

    def _kept(self, kind: str, key: str, make: Callable[[], Any]) -> Any:
        """What `make` returns, made once a run for `key` under `kind`, whichever worker asks first,
        and kept as JSON (written whole, then renamed: a reader never sees half of it)."""
        cache = self.root / kind / f"{key}.json"
        if not cache.exists():
            with locked(self.root / kind / f"{key}.lock"):
                if not cache.exists():
                    partial = cache.with_suffix(f".{os.getpid()}.tmp")
                    partial.write_text(json.dumps(make()))
                    partial.replace(cache)
        return json.loads(cache.read_text())

    def in_process(self, spec: object) -> dict[str, dict]:
        """The templates of a spec model (a ClusterSpec) as tests.support.examples.in_process
        synthesizes them in the asking process (fmcluster_cdk.synthesis.build_app, without cdk-nag:
        what `fmcluster diff` compares): once a run per resolved spec, whichever worker asks first,
        so that the base specs that several modules and every worker diff against are built once."""
        from tests.support.examples import in_process

        resolved = json.dumps(spec.resolved(), sort_keys=True)  # type: ignore[attr-defined]
        return self._kept("in-process", _digest(resolved, "in-process"), lambda: in_process(spec))

    # --- cfn-lint ----------------------------------------------------------------------------

    def lint_errors(self, template: Path) -> list[str]:
        """cfn-lint's error-level findings (E rules) on `template`, each with the template's name and
        line: once a run per distinct template."""
        from cfnlint.version import __version__ as cfn_lint_version

        key = _digest(hashlib.sha256(template.read_bytes()).hexdigest(), cfn_lint_version)
        found = self._kept("cfn-lint", key, lambda: _lint(template))
        return [line.replace("{template}", template.name) for line in found]


def _lint(template: Path) -> list[str]:
    """cfn-lint on one template file; each error as `RULE: MESSAGE ({template}:LINE)`."""
    from tests.support.cfn_lint import findings

    return [f"{m.rule.id}: {m.message} ({{template}}:{m.linenumber})" for m in findings(template)
            if m.rule.id.startswith("E")]


def shared_root(tmp_path_factory: object, worker_id: str) -> Path:
    """The run's directory that every xdist worker shares: the parent of the workers' base
    temporary directories (one per run), or the base directory itself without xdist."""
    base: Path = tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    return (base.parent if worker_id != "master" else base) / "corpus"
