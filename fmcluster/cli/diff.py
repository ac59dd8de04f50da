"""`fmcluster diff`: what changing a spec (or deploying it over its deployed stacks) does to
deployed resources, with the CDK app's steps shown on a terminal."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Callable

from fmcluster.cli.core import (
    EXIT_INVALID,
    INVALID,
    Command,
    done,
    format_help,
    invalid,
    load_valid,
    stdin_twice,
    valid_all,
)
from fmcluster.terminal import Progress

if TYPE_CHECKING:
    from fmcluster.spec.models import ClusterSpec


def cmd_diff(args: argparse.Namespace) -> int:
    from fmcluster.deploy import diff
    from fmcluster.spec import loader

    if args.deployed:
        if len(args.specs) != 1:
            return invalid("diff --deployed takes one SPEC: fmcluster diff --deployed SPEC")
        spec = load_valid(args.specs[0], args.format)
        if spec is None or _node_unusable():
            return EXIT_INVALID
        from fmcluster.deploy import deployed

        with Progress(sys.stderr) as progress:
            report = diff.run_deployed(spec, args.allow_data_loss, name=args.specs[0],
                                       synthesize=_synthesizer(progress, {id(spec): ("SPEC", args.specs[0])}),
                                       read=_reader(progress, deployed.read))
        return done(diff.render(report, args.format), diff.exit_code(report))
    if len(args.specs) != 2:
        return invalid("diff takes OLD and NEW (or --deployed SPEC)")
    if (refused := stdin_twice(args.specs)) is not None:
        return refused
    old_path, new_path = args.specs
    specs = valid_all([(p, loader.load(p)) for p in (old_path, new_path)], args.format)
    if specs is None or _node_unusable():
        return EXIT_INVALID
    old, new = specs
    with Progress(sys.stderr) as progress:
        report = diff.run(old, new, args.allow_data_loss, names=(old_path, new_path),
                          synthesize=_synthesizer(progress, {id(old): ("OLD", old_path), id(new): ("NEW", new_path)}))
    return done(diff.render(report, args.format), diff.exit_code(report))


def _node_unusable() -> bool:
    """True, after saying why, when the CDK app's Node.js cannot run here (missing, of another
    line, a TMPDIR or HOME it cannot write): found before `diff` synthesizes, as `synth` finds it."""
    from fmcluster.deploy import synth

    problem = synth.environment_problem()
    if problem is not None:
        print(f"error: {problem[0]}" + (f"\n  hint: {problem[1]}" if problem[1] else ""), file=sys.stderr)
    return problem is not None


def _synthesizer(progress: Progress,
                 files: dict[int, tuple[str, str]]) -> Callable[[ClusterSpec], dict[str, dict[str, Any]]]:
    """What `diff` synthesizes a spec with: the CDK app on the spec's file (`files`: the spec's
    id -> its role, OLD or NEW, and its path), its steps shown on a terminal under its role. The
    first call runs the app once for every file of `files`, each spec's assembly apart
    (fmcluster.deploy.synth.apart): one start of the CDK for both specs of a diff."""
    from fmcluster.deploy import synth

    roles = list(files.values())
    made: dict[int, dict[str, dict[str, Any]]] = {}

    def said(index: int, text: str) -> None:
        progress.step(f"{roles[index][0]}: {text}" if index >= 0 else text)

    def synthesize(spec: ClusterSpec) -> dict[str, dict[str, Any]]:
        if not made:
            progress.step("starting the CDK app")
            found = synth.apart([path for _, path in roles], said if progress.on else None)
            made.update(zip(files, found, strict=True))
        return made[id(spec)]

    return synthesize


def _reader(progress: Progress, read: Callable[..., Any]) -> Callable[..., Any]:
    """`read`, the deployed stacks' reader of `diff --deployed`, shown as a step on a terminal."""
    def reading(*args: Any, **kwargs: Any) -> Any:
        progress.step("reading the deployed stacks")
        return read(*args, **kwargs)

    return reading


def _diff_args(p: argparse.ArgumentParser) -> None:
    p.usage = "fmcluster diff [-h] [--format {text,json}] [--allow-data-loss] (OLD NEW | --deployed SPEC)"
    p.add_argument("specs", nargs="+", metavar="SPEC",
                   help="OLD and NEW, or with --deployed one SPEC (- reads one from standard input)")
    p.add_argument("--deployed", action="store_true",
                   help="compare SPEC with its cluster's stacks as deployed (reads CloudFormation, read-only)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help=format_help(text="per stack its changes (add, update, replace, remove), what changes "
                                         "and why, then the data loss and refused updates",
                                    json="the same as one object: stacks, data_loss, fails, notes, rolls, new_cluster "
                                          "and the verdict"))
    p.add_argument("--allow-data-loss", action="store_true",
                   help="exit 0 even when a stateful resource (file system, bucket, key, metrics or dashboards "
                        "workspace) is replaced or removed, or when the cluster's name, region or account changes "
                        "(a new cluster beside the old one)")
    p.set_defaults(func=cmd_diff)


DIFF = Command(
    "what changing a spec from OLD to NEW (or deploying SPEC over its deployed stacks) does to "
    "deployed resources",
    "What changing a spec from OLD to NEW does to deployed resources: both are synthesized and their "
    "templates compared, each change judged as CloudFormation would make it. With --deployed, SPEC is "
    "compared with its cluster's stacks as deployed (read-only; needs AWS credentials).",
    ("fmcluster diff examples/p5-pcs.yaml examples/p5en-reservation-pcs.yaml",
     "fmcluster diff --deployed examples/p5-pcs.yaml --format json"),
    ((0, "no stateful resource is replaced or removed, the cluster keeps its name, region and account "
         "(or --allow-data-loss), and no update is refused"),
     (1, "without --allow-data-loss, a stateful resource is replaced or removed, or the cluster's name, "
         "region or account changes (a new cluster beside the old one, its data left behind); with or "
         "without it, an update the service refuses, or nothing could be compared"),
     (2, f"a spec is invalid, or {INVALID}")),
    _diff_args, "fmcluster.deploy.diff")
