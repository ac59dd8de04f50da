"""`fmcluster validate` (spec files, or pipeline files with --pipeline) and `fmcluster schema`
(the spec's JSON Schema)."""

from __future__ import annotations

import argparse

from fmcluster.cli.core import INVALID, SPEC_HELP, Command, done, format_help, stdin_twice


def cmd_validate(args: argparse.Namespace) -> int:
    from fmcluster.spec import loader

    if (refused := stdin_twice(args.specs)) is not None:
        return refused
    if args.pipeline:
        from fmcluster.deploy import pipeline

        report = pipeline.run(args.specs)
    else:
        report = loader.run(args.specs)
    return done(loader.render(report, args.format), loader.exit_code(report))


def cmd_schema(args: argparse.Namespace) -> int:
    from fmcluster.spec import schema

    report = schema.run()
    return done(schema.render(report, "json"), schema.exit_code(report))


def _validate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("specs", nargs="+", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help=format_help(text="`FILE: ok` on stdout per valid file; each problem on stderr, at its "
                                         "line and column, with the line, a caret and a hint",
                                    json="on stdout a list of {file, ok, diagnostics}, each diagnostic with "
                                         "line, column, severity, path, message, hint and rule"))
    p.add_argument("--pipeline", action="store_true",
                   help="the files are GitOps pipeline files (such as examples/pipeline/pipeline.yaml): check each "
                        "and every spec it lists")
    p.set_defaults(func=cmd_validate)


def _schema_args(p: argparse.ArgumentParser) -> None:
    p.set_defaults(func=cmd_schema)


VALIDATE = Command(
    "check spec files (or pipeline files); print ok or located errors",
    "Check spec files: their YAML, every field and every rule across fields. Each problem is shown at "
    "the line and column of its field, with a hint where one helps. Reads no account and never imports "
    "aws_cdk.",
    ("fmcluster validate examples/p5-pcs.yaml examples/p5en-eks.yaml",
     "fmcluster validate --pipeline examples/pipeline/pipeline.yaml --format json"),
    ((0, "every file is valid (warnings do not count)"),
     (2, f"a file is invalid, or {INVALID}")),
    _validate_args, "fmcluster.spec.loader")


SCHEMA = Command(
    "print the JSON Schema of the spec",
    "Print the JSON Schema of the spec, for editors that complete and check YAML as it is typed.",
    ("fmcluster schema > cluster-spec.schema.json",),
    ((0, "the schema was printed"),
     (2, INVALID)),
    _schema_args, "fmcluster.spec.schema")
