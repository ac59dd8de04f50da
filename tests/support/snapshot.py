"""Every output of every example, written to one folder, to show that a change to the code
changes none of them (or exactly the ones it should): the templates and assets of `fmcluster
synth`, the plans in every format, the acceptance kits, the JSON Schemas and the stack policies,
and the GitOps pipeline's assembly.

    python -m tests.support.snapshot DIR            write the outputs of this checkout to DIR
    python -m tests.support.snapshot DIR --compare OTHER
                                                    then compare DIR with an earlier snapshot

Take a snapshot before a refactoring (from a checkout of the commit before it), another after,
and compare: every file byte for byte, the command outputs with the snapshot's own folder name
taken out. Exit 1 when anything differs. The node scripts are inside the templates' user data
(packed: `fmcluster.node.shell.unpack` reads them) and the lifecycle assets.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import EXAMPLES_DIR, ROOT


def fmcluster(*args: str, out: Path | None = None) -> str:
    result = subprocess.run([sys.executable, "-m", "fmcluster", *args], cwd=ROOT, capture_output=True, text=True)
    text = result.stdout + result.stderr + f"exit {result.returncode}\n"
    if out is not None:
        out.write_text(text)
    return text


def snapshot(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    fmcluster("schema", out=folder / "schema.json")
    fmcluster("plan", "--json-schema", out=folder / "plan-schema.json")
    fmcluster("stack-policy", out=folder / "stack-policy.json")
    fmcluster("stack-policy", "--lift", out=folder / "stack-policy-lift.json")
    for spec in sorted(EXAMPLES_DIR.glob("*.yaml")):
        name = spec.stem
        fmcluster("synth", str(spec), "-o", str(folder / f"{name}.cdk.out"), out=folder / f"{name}.synth.txt")
        for fmt in ("text", "markdown", "json"):
            fmcluster("plan", str(spec), "--format", fmt, out=folder / f"{name}.plan.{fmt}")
        fmcluster("jobs", str(spec), "-o", str(folder / f"{name}.kit"), out=folder / f"{name}.jobs.txt")
    cdk = ROOT / "node_modules" / ".bin" / "cdk"
    if cdk.exists():
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{cdk.parent}{os.pathsep}"
                                     f"{os.environ.get('PATH', '')}", "CDK_DISABLE_VERSION_CHECK": "true"}
        subprocess.run([str(cdk), "synth", "-q", "-c", "pipeline=examples/pipeline/pipeline.yaml",
                        "-o", str(folder / "pipeline.cdk.out")], cwd=ROOT, env=env, capture_output=True)


def differences(old: Path, new: Path) -> list[str]:
    """Files only in one snapshot, or whose bytes differ (the command outputs compared with each
    snapshot's folder name replaced, as they print the paths they wrote)."""
    found: list[str] = []

    def walk(cmp: filecmp.dircmp[str], where: Path) -> None:
        found.extend(f"only in {old.name}: {where / n}" for n in cmp.left_only)
        found.extend(f"only in {new.name}: {where / n}" for n in cmp.right_only)
        for name in cmp.common_files:
            a, b = Path(cmp.left, name).read_bytes(), Path(cmp.right, name).read_bytes()
            if name.endswith(".txt"):
                a, b = a.replace(str(old).encode(), b"DIR"), b.replace(str(new).encode(), b"DIR")
            if a != b:
                found.append(f"differs: {where / name}")
        for name, sub in cmp.subdirs.items():
            walk(sub, where / name)

    walk(filecmp.dircmp(old, new, ignore=[]), Path("."))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.snapshot", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="where to write this checkout's outputs")
    parser.add_argument("--compare", type=Path, metavar="OTHER", help="an earlier snapshot to compare with")
    args = parser.parse_args(argv)
    snapshot(args.folder.resolve())
    if args.compare is None:
        return 0
    found = differences(args.compare.resolve(), args.folder.resolve())
    sys.stdout.write("".join(f"{line}\n" for line in found) or "identical\n")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
