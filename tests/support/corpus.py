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

An unsuppressed cdk-nag error stops the app (CDK refuses to write an assembly with an error
annotation): every test that reads that example then fails with nag's message, which is recorded
so that the synthesis is not tried again in the same run.

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
from pathlib import Path
from typing import Any, Callable

from tests.support.examples import CLEAN_ENV
from tests.support.locks import locked
from tests.support.paths import ROOT

NAG = {"nag": "true"}  # the context every corpus assembly is synthesized with
# fmcluster synth's own call of the app, with a context of the caller's: CONTEXT_JSON OUTDIR
RUN_APP = ("import json, sys; from fmcluster.deploy.synth import run_app; "
           "sys.exit(run_app(json.loads(sys.argv[1]), sys.argv[2]))")


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
        with `text`, of that spec text named `spec` (a variant of an example). Made on first use."""
        content = text if text is not None else (ROOT / spec).read_text()
        key = _digest(spec, content, json.dumps(NAG, sort_keys=True))
        folder = self.root / "assemblies" / key
        done, failed = folder / ".complete", self.root / "assemblies" / f"{key}.failed"
        if not done.exists():
            with locked(self.root / "assemblies" / f"{key}.lock"):
                if failed.exists():  # once a run: every reader of a spec that fails says why, at once
                    raise SynthesisError(failed.read_text())
                if not done.exists():
                    try:
                        self._synthesize(spec, text, folder)
                    except SynthesisError as error:
                        failed.write_text(str(error))
                        raise
                    done.write_text(spec + "\n")
        return folder / "cdk.out"

    @staticmethod
    def _synthesize(spec: str, text: str | None, folder: Path) -> None:
        """The app run by the function `fmcluster synth` runs it with (fmcluster.deploy.synth.run_app:
        cdk.json's context, the venv's Node.js), in a process of its own without AWS credentials."""
        shutil.rmtree(folder, ignore_errors=True)  # a worker that died half-way
        folder.mkdir(parents=True)
        path = spec
        if text is not None:  # the app reads a file: the variant's text, under the name it is known by
            path = str(folder / Path(spec.partition("+")[0]).name)
            Path(path).write_text(text)
        context = json.dumps({**NAG, "spec": path})
        result = subprocess.run([sys.executable, "-c", RUN_APP, context, str(folder / "cdk.out")], cwd=ROOT,
                                env=CLEAN_ENV, capture_output=True, text=True)
        if result.returncode != 0 or "Traceback" in result.stderr:
            raise SynthesisError(f"{spec}: the app exited {result.returncode}\n{result.stderr}")

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
