"""The `fmcluster` command line. Exit codes: 0 success, 1 a check or guard failed, 2 the spec
or the command line is invalid. Heavy modules (aws_cdk, boto3) are imported only by the
commands that need them."""

from __future__ import annotations

import argparse
import json
import sys

from fmcluster import __version__

EXIT_OK, EXIT_CHECK_FAILED, EXIT_INVALID = 0, 1, 2


def _print_diagnostics(diagnostics, stream=None) -> None:
    stream = stream or sys.stderr
    for d in diagnostics:
        print(d.format(), file=stream)


def cmd_validate(args) -> int:
    from fmcluster import loader

    status = EXIT_OK
    report = []
    for path in args.specs:
        result = loader.load(path)
        if args.format == "json":
            report.append({"file": path, "ok": result.ok,
                           "diagnostics": [d.as_dict() for d in result.diagnostics]})
            continue
        _print_diagnostics(result.diagnostics)
        if result.ok:
            print(f"{path}: ok")
        else:
            errors = len(result.errors)
            print(f"{path}: {errors} error{'s' if errors != 1 else ''}", file=sys.stderr)
        if not result.ok:
            status = EXIT_INVALID
    if args.format == "json":
        print(json.dumps(report, indent=2))
        status = EXIT_OK if all(r["ok"] for r in report) else EXIT_INVALID
    return status


def cmd_schema(args) -> int:
    from fmcluster.spec import json_schema

    print(json.dumps(json_schema(), indent=2, sort_keys=False))
    return EXIT_OK


def cmd_synth(args) -> int:
    from fmcluster import synth

    return synth.synth(args.specs, args.output)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fmcluster", description="Validate, review and synthesize GPU cluster specs for AWS.")
    parser.add_argument("--version", action="version", version=f"fmcluster {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("validate", help="check spec files; print ok or located errors")
    p.add_argument("specs", nargs="+", metavar="SPEC")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("synth", help="synthesize the CDK cloud assembly of one or more specs")
    p.add_argument("specs", nargs="+", metavar="SPEC")
    p.add_argument("-o", "--output", default="cdk.out", metavar="DIR", help="assembly directory (default cdk.out)")
    p.set_defaults(func=cmd_synth)

    p = sub.add_parser("schema", help="print the JSON Schema of the spec")
    p.set_defaults(func=cmd_schema)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:  # `fmcluster schema | head`
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
