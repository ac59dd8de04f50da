"""The GitOps pipeline's step programs (bash, shipped with the package): allowance.sh,
diff-deployed.sh, guard-change-set.sh, record-deployed.sh, protect-storage.sh, review-comment.sh.

`fmcluster step NAME [ARGS...]` runs the installed program NAME: a project of one's own (`fmcluster
init`) has no copy of them, and a clone of fmcluster may still run them by path (`bash
fmcluster/deploy/steps/NAME.sh`). The programs run `fmcluster` as $FMCLUSTER (a clone's
.venv/bin/fmcluster by default); `step` points it at the `fmcluster` of this installation."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Sequence

HERE = Path(__file__).resolve().parent
FORMATS = ("text",)  # a step program prints its own lines


def steps() -> list[str]:
    """The names of the step programs, sorted."""
    return sorted(p.stem for p in HERE.glob("*.sh"))


def fmcluster_program(executable: str = sys.executable) -> str:
    """The `fmcluster` console script of this installation (beside the interpreter), else the one
    on PATH."""
    beside = Path(executable).parent / "fmcluster"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("fmcluster") or "fmcluster"


@dataclass(frozen=True)
class StepReport:
    """The program to run in place of `fmcluster step` (argv, env), or why not (error)."""

    name: str
    argv: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    error: Optional[str] = None


def run(name: str, args: Sequence[str], environ: Optional[Mapping[str, str]] = None) -> StepReport:
    """The command line and environment of step program `name` (NAME or NAME.sh) with `args`."""
    program = name.removesuffix(".sh")
    if program not in steps():
        return StepReport(name, error=f"no step program {name!r}; one of: {', '.join(steps())}")
    env = dict(os.environ if environ is None else environ)
    env.setdefault("FMCLUSTER", fmcluster_program())
    env.setdefault("PYTHON", sys.executable)
    bash = shutil.which("bash", path=env.get("PATH")) or "/bin/bash"
    return StepReport(program, (bash, str(HERE / f"{program}.sh"), *args), env)


def render(report: StepReport, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr) of a refusal; a step that runs prints its own."""
    return "", f"error: {report.error}\n" if report.error else ""


def exit_code(report: StepReport) -> int:
    return 2 if report.error else 0
