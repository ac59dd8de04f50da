"""`fmcluster synth`: the CDK cloud assembly of specs, or the summary of one already written."""

from __future__ import annotations

import argparse
import sys

from fmcluster.cli.core import INVALID, SPEC_HELP, Command, done, invalid, stdin_twice
from fmcluster.terminal import Progress


def cmd_synth(args: argparse.Namespace) -> int:
    from fmcluster.deploy import synth

    if bool(args.specs) == bool(args.assembly):
        return invalid("synth takes SPEC... (or --assembly DIR, without SPEC)")
    if (refused := stdin_twice(args.specs)) is not None:
        return refused
    if args.output == "":
        return invalid("-o names no directory: give one, such as -o cdk.out")
    if args.assembly:
        report = synth.summarize(args.assembly)
    else:
        with Progress(sys.stderr) as progress:
            progress.step("starting the CDK app")
            report = synth.run(args.specs, args.output, progress.step if progress.on else None)
    return done(synth.render(report, "text"), synth.exit_code(report))


def _synth_args(p: argparse.ArgumentParser) -> None:
    p.usage = "fmcluster synth [-h] [-o DIR] (SPEC [SPEC ...] | --assembly DIR)"
    p.add_argument("specs", nargs="*", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("-o", "--output", default="cdk.out", metavar="DIR", help="assembly directory (default cdk.out)")
    p.add_argument("--assembly", metavar="DIR",
                   help="summarize the cloud assembly already in DIR (such as `npx cdk synth` writes) instead")
    p.set_defaults(func=cmd_synth)


SYNTH = Command(
    "synthesize the CDK cloud assembly of one or more specs",
    "Synthesize the CDK cloud assembly of one or more specs (the same templates as "
    "`npx cdk synth -c spec=SPEC`) and print one line per stack; with --assembly, summarize an assembly "
    "already written. An invalid spec writes nothing.",
    ("fmcluster synth examples/p5-pcs.yaml -o cdk.out",
     "fmcluster synth --assembly cdk.out"),
    ((0, "the assembly was written (or read) and summarized"),
     (1, "the CDK app failed (it said why)"),
     (2, f"a spec is invalid, there is no assembly in the --assembly DIR, or {INVALID}")),
    _synth_args, "fmcluster.deploy.synth")
