"""`fmcluster step NAME ARGS`: a project of one's own (no clone of fmcluster) runs the pipeline's
step programs from the installed package, with the installation's fmcluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fmcluster.deploy import steps as runner

FAKE_AWS = """#!/bin/bash
# each call the step makes, its arguments NUL-separated, in a file of its own; every stack exists
n=$(ls "$AWS_CALLS" | wc -l)
printf '%s\\0' "$@" > "$AWS_CALLS/$n"
"""


def run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("FMCLUSTER", "PYTHON")}
    return subprocess.run([sys.executable, "-m", "fmcluster", "step", *args], cwd=cwd, env={**environ, **env},
                          capture_output=True, text=True, timeout=60)


def git_repository(path: Path, message: str) -> Path:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)

    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", message)
    return path


def test_every_program_of_the_package_is_a_step():
    assert runner.steps() == ["allowance", "diff-deployed", "guard-change-set", "protect-storage", "record-deployed",
                              "review-comment"]


def test_a_step_runs_from_anywhere_with_its_arguments(tmp_path):
    """No fmcluster/ directory here: the installed program runs, in this directory (git reads HEAD)."""
    repo = git_repository(tmp_path, "Deploy it\n\nAllow-Data-Loss: llm-pretrain")
    allowed = run(["allowance", "llm-pretrain"], repo)
    assert (allowed.returncode, allowed.stdout) == (0, "--allow-data-loss\n"), allowed.stderr
    assert "trailer 'Allow-Data-Loss: llm-pretrain'" in allowed.stderr
    other = run(["allowance.sh", "b300-research"], repo)  # the file's name works too
    assert (other.returncode, other.stdout) == (0, "")


def test_the_installations_fmcluster_runs_the_commands_of_a_step(tmp_path):
    """protect-storage.sh runs $FMCLUSTER stack-policy: the runner points it at this installation's
    fmcluster (beside the interpreter), whatever is on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aws").write_text(FAKE_AWS)
    (bin_dir / "aws").chmod(0o755)
    calls = tmp_path / "calls"
    calls.mkdir()
    result = run(["protect-storage", "llm-pretrain-storage"], tmp_path, PATH=f"{bin_dir}:/usr/bin:/bin",
                 AWS_CALLS=str(calls))
    assert result.returncode == 0, result.stderr
    assert "stack policy set" in result.stdout
    describe, put = ((calls / str(n)).read_text().split("\0")[:-1] for n in range(len(list(calls.iterdir()))))
    assert describe[:4] == ["cloudformation", "describe-stacks", "--stack-name", "llm-pretrain-storage"]
    assert put[:5] == ["cloudformation", "set-stack-policy", "--stack-name", "llm-pretrain-storage",
                       "--stack-policy-body"]
    policy = json.loads(put[5])
    assert any(s["Effect"] == "Deny" for s in policy["Statement"])  # fmcluster stack-policy's, not lifted
    assert runner.fmcluster_program() == str(Path(sys.executable).parent / "fmcluster")


def test_unknown_steps_and_no_step_are_refused_in_a_line(tmp_path):
    unknown = run(["deploy-everything"], tmp_path)
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert unknown.stderr.startswith("error: no step program 'deploy-everything'; one of: allowance, ")
    bare = run([], tmp_path)
    assert bare.returncode == 2 and "usage: fmcluster step" in bare.stderr
    helped = run(["--help"], tmp_path)
    assert helped.returncode == 0 and "diff-deployed" in helped.stdout
