"""The `fmcluster` command line. Exit codes: 0 success, 1 a check or guard failed, 2 the spec
or the command line is invalid. Heavy modules (aws_cdk, boto3) are imported only by the
commands that need them, and argparse only when the command line is more than `validate SPEC...`."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from fmcluster import __version__

if TYPE_CHECKING:
    import argparse

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
        import json

        print(json.dumps(report, indent=2))
        status = EXIT_OK if all(r["ok"] for r in report) else EXIT_INVALID
    return status


def cmd_schema(args) -> int:
    import json

    from fmcluster.spec import json_schema

    print(json.dumps(json_schema(), indent=2, sort_keys=False))
    return EXIT_OK


def _load_valid(path: str):
    """The ClusterSpec of a valid spec file, or None after printing its problems on stderr.
    Warnings are printed either way."""
    from fmcluster import loader

    result = loader.load(path)
    _print_diagnostics(result.diagnostics)
    if not result.ok:
        errors = len(result.errors)
        print(f"{path}: {errors} error{'s' if errors != 1 else ''}", file=sys.stderr)
        return None
    return result.spec


def _positive_number(text: str) -> float:
    import argparse  # already imported: argparse calls this

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number such as 70e9, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _window(text: str):
    """START/END, two ISO 8601 times (UTC unless they say otherwise)."""
    import argparse  # already imported: argparse calls this
    from datetime import datetime, timezone

    try:
        start, end = (datetime.fromisoformat(part.strip().replace("Z", "+00:00")) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected START/END in ISO 8601, such as 2026-12-01T00:00Z/2026-12-08T00:00Z, got {text!r}") from None
    start, end = (t if t.tzinfo else t.replace(tzinfo=timezone.utc) for t in (start, end))
    if end <= start:
        raise argparse.ArgumentTypeError(f"the window ends before it starts: {text!r}")
    return start, end


def cmd_plan(args) -> int:
    from fmcluster import plan, plan_render

    if args.json_schema:
        import json

        print(json.dumps(plan.json_schema(), indent=2))
        return EXIT_OK
    if not args.spec:
        print("error: plan needs a SPEC (or --json-schema)", file=sys.stderr)
        return EXIT_INVALID
    spec = _load_valid(args.spec)
    if spec is None:
        return EXIT_INVALID
    import yaml

    raw = yaml.safe_load(open(args.spec, encoding="utf-8"))
    report = plan.build(spec, raw, args.checkpoint_params)
    sys.stdout.write(plan_render.RENDERERS[args.format](report))
    return EXIT_OK


def cmd_preflight(args) -> int:
    from fmcluster import preflight

    spec = _load_valid(args.spec)
    if spec is None:
        return EXIT_INVALID
    return preflight.main(spec, args.format, args.window)


def cmd_diff(args) -> int:
    from fmcluster import diff

    old, new = _load_valid(args.old), _load_valid(args.new)
    if old is None or new is None:
        return EXIT_INVALID
    from fmcluster import synth

    path = {id(old): args.old, id(new): args.new}
    return diff.main(old, new, args.format, args.allow_data_loss, names=(args.old, args.new),
                     synthesize=lambda spec: synth.templates(path[id(spec)]))


def cmd_synth(args) -> int:
    from fmcluster import synth

    return synth.synth(args.specs, args.output)


def _validate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("specs", nargs="+", metavar="SPEC")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=cmd_validate)


def _synth_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("specs", nargs="+", metavar="SPEC")
    p.add_argument("-o", "--output", default="cdk.out", metavar="DIR", help="assembly directory (default cdk.out)")
    p.set_defaults(func=cmd_synth)


def _plan_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", nargs="?", metavar="SPEC")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    p.add_argument("--checkpoint-params", type=_positive_number, metavar="N",
                   help="model size for the checkpoint write time, such as 70e9 (default 70e9)")
    p.add_argument("--json-schema", action="store_true", help="print the JSON Schema of --format json")
    p.set_defaults(func=cmd_plan)


def _preflight_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--window", type=_window, metavar="START/END",
                   help="ISO 8601 times the cluster must run, such as 2026-12-01T00:00Z/2026-12-08T00:00Z "
                        "(checked against Capacity Block start and end; default: now)")
    p.set_defaults(func=cmd_preflight)


def _diff_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("old", metavar="OLD")
    p.add_argument("new", metavar="NEW")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--allow-data-loss", action="store_true",
                   help="exit 0 even when a stateful resource (file system, bucket, key) is replaced or removed")
    p.set_defaults(func=cmd_diff)


def _schema_args(p: argparse.ArgumentParser) -> None:
    p.set_defaults(func=cmd_schema)


# name -> (help, the function that adds its arguments)
COMMANDS = {
    "validate": ("check spec files; print ok or located errors", _validate_args),
    "synth": ("synthesize the CDK cloud assembly of one or more specs", _synth_args),
    "plan": ("what a spec builds, what it can do and what it costs", _plan_args),
    "preflight": ("read-only checks of the target account (needs AWS credentials)", _preflight_args),
    "diff": ("what changing a spec from OLD to NEW does to deployed resources", _diff_args),
    "schema": ("print the JSON Schema of the spec", _schema_args),
}


def _terminal_columns() -> int:
    """COLUMNS, else the width of the terminal on stdout, else 80 (as shutil.get_terminal_size)."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 80


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The command line. Given the arguments, only the named command's parser is built (the
    others cost time and are not needed); without a known command, all of them, for the help
    and the error that lists them."""
    import argparse
    import functools

    # argparse's formatter, told the terminal width up front: argparse makes a formatter for
    # every argument it adds and, without a width, imports shutil (and with it zlib, bz2 and
    # lzma) to ask for it, a cost paid on every run for help that is rarely printed.
    help_formatter = functools.partial(argparse.HelpFormatter, width=_terminal_columns() - 2)  # argparse's margin
    parser = argparse.ArgumentParser(
        prog="fmcluster", description="Validate, review and synthesize GPU cluster specs for AWS.",
        formatter_class=help_formatter)
    parser.add_argument("--version", action="version", version=f"fmcluster {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = argv[0] if argv and argv[0] in COMMANDS else None
    for name, (help_text, add_arguments) in COMMANDS.items():
        if wanted in (None, name):
            add_arguments(sub.add_parser(name, help=help_text, formatter_class=help_formatter))
    return parser


def plain_validate(argv: list[str]):
    """The arguments of `validate SPEC...` with no option (as an editor or a pre-commit hook
    runs it), read without argparse: importing argparse (with gettext and locale) and building
    its parser take about 8 ms, a sixth of what `fmcluster validate` costs beyond pydantic. None
    for any other command line, which argparse reads (options, help and errors alike)."""
    specs = argv[1:]
    if argv[:1] != ["validate"] or not specs or any(arg.startswith("-") for arg in specs):
        return None
    import types

    return types.SimpleNamespace(command="validate", specs=specs, format="text", func=cmd_validate)


PLUGINS_OFF = ("__all__", "1", "true")  # the PYDANTIC_DISABLE_PLUGINS values that turn every plugin off


def no_pydantic_plugins() -> None:
    """Turn pydantic's plugins off: fmcluster uses none (a caller's own setting wins).

    pydantic looks for plugins through importlib.metadata when the first model is built; with
    plugins off its loader returns none, but importing it still imports importlib.metadata, the
    biggest single cost of `fmcluster validate` after pydantic itself. So, with plugins off and
    the loader not yet imported, an equivalent one that finds no plugins takes its place
    (tests/test_cli.py holds it to pydantic's own behaviour)."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    name = "pydantic.plugin._loader"
    if os.environ["PYDANTIC_DISABLE_PLUGINS"] in PLUGINS_OFF and name not in sys.modules:
        import types

        loader = types.ModuleType(name, "fmcluster: no pydantic plugins (PYDANTIC_DISABLE_PLUGINS is set)")
        loader.get_plugins = lambda: ()
        sys.modules[name] = loader


def main(argv: list[str] | None = None) -> int:
    """Run a command line; without `argv`, that of this process (the `fmcluster` program and
    `python -m fmcluster`), which then ends when this returns."""
    no_pydantic_plugins()
    whole_process = argv is None
    argv = sys.argv[1:] if argv is None else argv
    args = plain_validate(argv) or build_parser(argv).parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:  # `fmcluster schema | head`
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    finally:
        if whole_process and args.command == "validate":
            _leave_the_heap_to_exit()


def _leave_the_heap_to_exit() -> None:
    """Exclude every object alive now from garbage collection. As it shuts down, Python collects
    garbage, and once it has dropped the modules that is the whole heap, pydantic's schemas and
    validators included: tearing it down object by object took about 30 ms of a 380 ms
    `fmcluster validate`, more than the run itself. Those objects are left to the end of the
    process instead (atexit handlers, flushing stdout and stderr and freeing by reference count
    happen as before). For validate only: it holds nothing else that needs finalizing (no jsii
    kernel, no AWS client, no file open for writing)."""
    import gc

    gc.freeze()


if __name__ == "__main__":
    raise SystemExit(main())
