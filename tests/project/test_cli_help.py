"""`fmcluster COMMAND --help` says what the command does, explains every argument, shows command
lines that parse, and gives the command's exit codes; `fmcluster --help` lists the exit codes too.
Read from COMMANDS and the parser: a new command or argument is held to it without a test edit."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys

import pytest

from fmcluster.cli import COMMANDS, build_parser, main
from tests.support.paths import ROOT

SHELL_OPERATORS = {">", ">>", "<", "|", "&&", ";"}  # an example may redirect what it prints


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def without_help(parser: argparse.ArgumentParser) -> list[str]:
    """The arguments of `parser` whose help is empty or missing."""
    return [action.dest for action in parser._actions
            if not (action.help or "").strip() or action.help == argparse.SUPPRESS]


def help_of(name: str, capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"] if name else ["--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


def section(text: str, heading: str) -> list[str]:
    """The indented lines under `heading:` up to the next blank line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().lower() == f"{heading}:")
    found = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        found.append(line.strip())
    return found


def command_line(example: str) -> list[str]:
    """The arguments of an example, before any redirection or pipe, without the program's name."""
    words = shlex.split(example)
    cut = next((i for i, word in enumerate(words) if word in SHELL_OPERATORS), len(words))
    return words[1:cut]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_describes_the_command(name, capsys):
    shown = help_of(name, capsys)
    description = shown.split("\n\n")[1]  # after the usage
    assert " ".join(description.split()) == " ".join(COMMANDS[name].description.split())
    examples = section(shown, "examples")
    assert examples and all(line.startswith(f"fmcluster {name} ") for line in examples), examples
    codes: dict[int, str] = {}
    for line in section(shown, "exit codes"):  # a long meaning goes on in lines of its own
        first, rest = line.split(None, 1)
        if first.isdigit():
            codes[int(first)] = rest
        else:
            assert codes, line
            codes[max(codes)] += " " + line
    assert {0, 2, 130} <= set(codes) and all(codes.values()), codes


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_argument_is_explained(name):
    assert not without_help(subparsers(build_parser())[name])


def test_an_argument_without_help_is_caught():
    parser = argparse.ArgumentParser()
    parser.add_argument("--explained", help="what it does")
    parser.add_argument("--bare")
    assert without_help(parser) == ["bare"]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_format_is_explained(name):
    """--format's help names what each of its choices gives."""
    for action in subparsers(build_parser())[name]._actions:
        if "--format" in action.option_strings:
            assert all(re.search(rf"\b{choice}\b[^:;]*:", action.help) for choice in action.choices), action.help


@pytest.mark.parametrize(("name", "example"), [(name, example) for name, command in sorted(COMMANDS.items())
                                               for example in command.examples])
def test_every_example_parses(name, example):
    args = build_parser().parse_args(command_line(example))
    assert args.command == name
    # main builds only the named command's arguments: the same command line, the same namespace
    assert vars(build_parser(name).parse_args(command_line(example))) == vars(args)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_parser_of_one_command_lists_every_command(name, capsys):
    """`fmcluster --help` and a misspelt command read the same with main's parser of one command."""
    for parser in (build_parser(), build_parser(name)):
        with pytest.raises(SystemExit):
            parser.parse_args(["--help"])
        with pytest.raises(SystemExit):
            parser.parse_args(["nosuch"])
    out, err = capsys.readouterr()
    helps = out.split("usage: fmcluster [-h]")[1:]
    assert len(helps) == 2 and helps[0] == helps[1] and all(n in helps[0] for n in COMMANDS)
    refusals = [line for line in err.splitlines() if "invalid choice" in line]
    assert len(refusals) == 2 and refusals[0] == refusals[1]


def test_the_command_lines_help_lists_the_exit_codes(capsys):
    shown = help_of("", capsys)
    codes = [line.split()[0] for line in section(shown, "exit codes (what each means for a command: "
                                                          "fmcluster command --help)")]
    assert codes == ["0", "1", "2", "130"]
    assert all(name in shown for name in COMMANDS)


@pytest.mark.parametrize("example", COMMANDS["verify"].examples)
def test_the_examples_of_verify_run_as_written_from_the_root(example):
    """verify reads what it is given and writes nothing: its examples run, as written, from the
    checkout's root, and judge something (0 or 1, not 2: nothing judged, or a path that is not there)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "fmcluster", *command_line(example)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    assert done.stdout.strip()
