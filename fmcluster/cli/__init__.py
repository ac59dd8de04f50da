"""The `fmcluster` command line: the only package that prints (fmcluster.terminal draws the
progress line of long commands on the stream given it here, when that is a terminal). Every
command has one shape: its engine module's `run(...)` returns a report (a frozen dataclass; the
plan's is a frozen pydantic model, for its JSON Schema), `render(report, fmt)` gives what goes to
stdout and to stderr, and `exit_code(report)` the exit code: 0 success, 1 a check or guard
failed, 2 the spec or the command line is invalid (or a file it names cannot be read or
written), 130 Ctrl-C: one line and no traceback, wherever it arrives. Heavy modules (aws_cdk,
boto3) are imported only by the commands that need them.

A module per command, or per small family of them (validate, synth, plan, preflight, diff, kits,
pipeline, destroy, init), holds the command's arguments, its dispatch over that shape and its
Command (help, examples, exit codes, engine module); core holds what they share, program the
table of commands (COMMANDS), the parser and `main`, the entry point of the `fmcluster` program
and of `python -m fmcluster`. The modules import core and the layers below (plan, deploy,
kits); program imports the command modules; none imports this package."""

from fmcluster.cli.core import Command
from fmcluster.cli.program import COMMANDS, build_parser, main

__all__ = ["COMMANDS", "Command", "build_parser", "main"]
