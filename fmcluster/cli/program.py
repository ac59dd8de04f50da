"""The `fmcluster` program: its commands, in the order `fmcluster --help` lists them, the parser
they make, and `main`, which runs a command line and turns what escapes a command (Ctrl-C, a
reader that has gone, a file that cannot be read or written) into one line and an exit code."""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Callable

from fmcluster import __version__
from fmcluster.cli import capacity, destroy, diff, init, kits, pipeline, plan, preflight, synth, validate
from fmcluster.cli.core import EXIT_INTERRUPTED, EXIT_INVALID, EXIT_OK, Command

COMMANDS: dict[str, Command] = {
    "init": init.INIT,
    "validate": validate.VALIDATE,
    "synth": synth.SYNTH,
    "plan": plan.PLAN,
    "preflight": preflight.PREFLIGHT,
    "diff": diff.DIFF,
    "capacity": capacity.CAPACITY,
    "schema": validate.SCHEMA,
    "jobs": kits.JOBS,
    "verify": kits.VERIFY,
    "stack-policy": pipeline.STACK_POLICY,
    "step": pipeline.STEP,
    "change-set": pipeline.CHANGE_SET,
    "destroy": destroy.DESTROY,
}

EXIT_CODES = """exit codes (what each means for a command: fmcluster COMMAND --help):
  0    success
  1    a check or guard failed
  2    the spec or the command line is invalid
  130  interrupted (Ctrl-C)"""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command line. With `only` (a command's name), the other commands are
    named with their one-line help (what `fmcluster --help` lists) but their arguments, description
    and epilog are left out: a command line of `only` parses as with the whole parser, and a run
    builds no more than it reads (some commands' arguments import their choices)."""
    parser = argparse.ArgumentParser(
        prog="fmcluster", description="Validate, review and synthesize GPU cluster specs for AWS.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXIT_CODES)
    parser.add_argument("--version", action="version", version=f"fmcluster {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name, help=command.help)
            continue
        command.add_arguments(sub.add_parser(
            name, help=command.help, description=textwrap.fill(command.description, 79),
            epilog=command.epilog(), formatter_class=argparse.RawDescriptionHelpFormatter))
    return parser


def _command_of(argv: list[str]) -> str | None:
    """The command a command line names: its first word that is not an option (fmcluster's own
    options, --version and --help, take no value), where that is a command."""
    first = next((word for word in argv if not word.startswith("-")), None)
    return first if first in COMMANDS else None


def main(argv: list[str] | None = None) -> int:
    """Run a command line; without `argv`, that of this process (the `fmcluster` program and
    `python -m fmcluster`)."""
    try:
        words = sys.argv[1:] if argv is None else argv
        args = build_parser(_command_of(words)).parse_args(words)
        command: Callable[[argparse.Namespace], int] = args.func  # set_defaults(func=...) of each command
        return command(args)
    except BrokenPipeError:  # `fmcluster schema | head`: the reader has gone, so has stdout
        _drop_stdout()
        return EXIT_OK
    except KeyboardInterrupt:  # Ctrl-C, anywhere; the CDK app, if one runs, is already stopped (synth.run_app)
        return _interrupted()
    except OSError as exc:  # a file the command reads or writes, where its module does not say so itself
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}\n  hint: check the path and its permissions", file=sys.stderr)
        return EXIT_INVALID


def _interrupted() -> int:
    """Say so in one line; a second Ctrl-C meanwhile is ignored, so it cannot end in a traceback."""
    import signal
    import threading

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
    try:
        sys.stdout.flush()
    except OSError:
        _drop_stdout()
    print("fmcluster: interrupted", file=sys.stderr)
    if previous is not None:
        signal.signal(signal.SIGINT, previous)
    return EXIT_INTERRUPTED


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush finds no broken pipe
    (Python's documentation, "Note on SIGPIPE")."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout (a test's capture)
        pass
