"""What every command of the command line shares: printing a rendered report and returning its
exit code, refusing a command line argparse lets through, loading the specs a command takes
(their problems printed as `fmcluster validate` prints them), the help's shared pieces, and
Command, what a command module declares of its command."""

from __future__ import annotations

import argparse
import sys
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from fmcluster.spec.loader import LoadResult
    from fmcluster.spec.models import ClusterSpec

EXIT_OK, EXIT_INVALID = 0, 2  # the commands derive theirs (1: a check failed) from their reports
EXIT_INTERRUPTED = 130  # Ctrl-C, for every command: 128 + SIGINT, as a shell reports it
SPEC_HELP = "a spec file (- reads it from standard input)"
INVALID = "the command line is invalid"
HELP_WIDTH = 100  # the widest line of a command's exit codes


def done(rendered: tuple[str, str], code: int) -> int:
    """Print a rendered report (stderr, then stdout) and return the command's exit code."""
    out, err = rendered
    sys.stderr.write(err)
    sys.stdout.write(out)
    return code


def invalid(message: str) -> int:
    """A command line that argparse lets through but the command refuses."""
    print(f"error: {message}", file=sys.stderr)
    return EXIT_INVALID


def stdin_twice(specs: list[str]) -> int | None:
    """EXIT_INVALID, after saying so, when `-` (standard input, read once) is given twice."""
    if specs.count("-") > 1:
        return invalid("`-` (standard input) can stand for one SPEC only")
    return None


def load_valid(path: str, fmt: str = "text") -> ClusterSpec | None:
    """The ClusterSpec of a valid spec file, or None after printing its problems (as
    `_valid_all`)."""
    from fmcluster.spec import loader

    return valid(path, loader.load(path), fmt)


def valid(path: str, result: LoadResult, fmt: str = "text") -> ClusterSpec | None:
    """The spec of a load result, or None after printing its problems (as `_valid_all`)."""
    specs = valid_all([(path, result)], fmt)
    return specs[0] if specs else None


def valid_all(results: list[tuple[str, LoadResult]], fmt: str) -> list[ClusterSpec] | None:
    """The specs of load results, or None after printing the problems of all of them: what
    `fmcluster validate` prints, in the command's format, so that `--format json` gives JSON on
    stdout whatever stops the command. Warnings of valid specs go to stderr as text either way:
    stdout is the command's own report then."""
    from fmcluster.spec import loader

    report = loader.ValidateReport(tuple(loader.checked(path, result) for path, result in results))
    if all(result.ok for _, result in results):
        sys.stderr.write(loader.render(report, "text")[1])
        return [result.spec for _, result in results if result.spec is not None]
    if fmt == "json":
        sys.stdout.write(loader.render(report, "json")[0])
    else:
        sys.stderr.write(loader.render(report, "text")[1])  # the problems, not the `FILE: ok` lines
    return None


def positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number such as 70e9, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def format_help(**formats: str) -> str:
    """The help of --format: what each format gives, the first the default."""
    first, *_ = formats
    return "; ".join(f"{name}{' (default)' if name == first else ''}: {gives}" for name, gives in formats.items())


@dataclass(frozen=True)
class Command:
    """A command of `fmcluster`: its one-line help (in `fmcluster --help`), what `fmcluster NAME
    --help` says of it, the function that adds its arguments, and the module of its run, render
    and exit_code. Ctrl-C (exit 130) is the same for every command and is added to its exit codes."""
    help: str
    description: str
    examples: tuple[str, ...]
    exit_codes: tuple[tuple[int, str], ...]
    add_arguments: Callable[[argparse.ArgumentParser], None]
    module: str

    def epilog(self) -> str:
        codes = (*self.exit_codes, (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"))
        return "\n".join(["examples:", *(f"  {line}" for line in self.examples), "", "exit codes:",
                          *(textwrap.fill(meaning, HELP_WIDTH, initial_indent=f"  {code:<4} ",
                                          subsequent_indent=" " * 7) for code, meaning in codes)])
