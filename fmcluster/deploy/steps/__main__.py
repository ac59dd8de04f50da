"""`python -m fmcluster.deploy.steps NAME [ARGS...]`: run the installed step program NAME (NAME.sh
of this package) with bash, its exit status the command's. The programs run `fmcluster` as
$FMCLUSTER (a clone's .venv/bin/fmcluster by default): here it defaults to the `fmcluster` of
this installation, so a project that installed fmcluster with pip needs no path of its own."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


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


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    names = steps()
    if not args or args[0] in ("-h", "--help"):
        print("usage: python -m fmcluster.deploy.steps NAME [ARGS...]\n"
              "run one of the GitOps pipeline's step programs: " + ", ".join(names))
        return 0 if args else 2
    name = args[0].removesuffix(".sh")
    if name not in names:
        print(f"error: no step program {args[0]!r}; one of: {', '.join(names)}", file=sys.stderr)
        return 2
    env = dict(os.environ)
    env.setdefault("FMCLUSTER", fmcluster_program())
    env.setdefault("PYTHON", sys.executable)
    bash = shutil.which("bash") or "/bin/bash"
    os.execve(bash, [bash, str(HERE / f"{name}.sh"), *args[1:]], env)
    return 127  # not reached: execve replaces the process or raises


if __name__ == "__main__":
    sys.exit(main())
