"""Progress of long work: shown on a terminal (one line, rewritten, cleared at the end), never in a
pipe, a file or CI. The display is tested against a stream that says it is a terminal; the
commands against a real pseudo-terminal, as a user's shell gives them one."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from fmcluster.cli import main
from fmcluster.deploy import synth
from fmcluster.terminal import CLEAR, Progress, wanted
from tests.support.paths import ROOT

SPEC = "examples/p5-pcs.yaml"
TERMINAL = {"TERM": "xterm-256color"}


class Screen(io.StringIO):
    """A stream that says it is a terminal (the hardware the display is for)."""

    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("env, terminal, shown", [
    (TERMINAL, True, True),
    ({}, True, True),  # no TERM: still a terminal
    ({**TERMINAL, "CI": "true"}, True, False),
    ({**TERMINAL, "CI": "1"}, True, False),
    ({**TERMINAL, "CI": "false"}, True, True),
    ({"TERM": "dumb"}, True, False),
    (TERMINAL, False, False),  # a pipe or a file
])
def test_progress_is_shown_on_a_terminal_outside_ci_only(env, terminal, shown):
    assert wanted(Screen() if terminal else io.StringIO(), env) is shown


def test_a_step_rewrites_one_line_with_its_seconds_and_the_end_clears_it():
    screen, clock = Screen(), Clock()
    with Progress(screen, TERMINAL, clock=clock) as progress:
        progress.step("starting the CDK app")
        clock.now += 7
        progress._draw()  # what the ticker does each second
        progress.step("writing the templates")
    shown = screen.getvalue()
    assert shown == (f"{CLEAR}fmcluster: starting the CDK app{CLEAR}fmcluster: starting the CDK app (7 s)"
                     f"{CLEAR}fmcluster: writing the templates{CLEAR}")
    assert "\n" not in shown, "progress must not add lines to the command's output"


def test_progress_off_writes_nothing_and_an_unused_display_clears_nothing():
    screen = Screen()
    with Progress(screen, {**TERMINAL, "CI": "true"}) as progress:
        progress.step("building")
    with Progress(screen, TERMINAL):
        pass
    assert screen.getvalue() == ""


def test_the_line_is_cleared_when_the_work_is_interrupted():
    screen = Screen()
    with pytest.raises(KeyboardInterrupt), Progress(screen, TERMINAL) as progress:
        progress.step("building the stacks of llm-pretrain")
        raise KeyboardInterrupt
    assert screen.getvalue().endswith(CLEAR)


def test_a_terminal_that_goes_away_ends_the_display_without_an_error():
    class Gone(Screen):
        def write(self, text: str) -> int:
            raise OSError(5, "Input/output error")

    with Progress(Gone(), TERMINAL) as progress:
        progress.step("building")
        progress.step("writing")


@pytest.mark.parametrize("terminal", [True, False])
def test_synth_asks_the_app_for_its_steps_only_on_a_terminal(terminal, monkeypatch, tmp_path):
    """Without a terminal, the app is not asked for steps at all (no pipe, no thread)."""
    asked = []
    monkeypatch.setattr(synth, "run", lambda paths, outdir, steps=None: asked.append(steps) or synth.SynthReport(
        outdir, error="stopped here", hint="test"))
    monkeypatch.setattr(sys, "stderr", Screen() if terminal else io.StringIO())
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    main(["synth", SPEC, "-o", str(tmp_path / "out")])
    assert (asked[0] is not None) is terminal


class _Writes(io.StringIO):
    """A stream that keeps each write apart: what a terminal can receive between two of them."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)


def test_the_app_writes_each_diagnostic_whole_where_steps_are_drawn(monkeypatch):
    """The CLI draws its steps on the terminal the app writes its diagnostics to: a step drawn
    between a diagnostic's text and its newline would stay on the screen (as seen under load). So
    the app writes each diagnostic in one write, from a cleared line to its newline."""
    from fmcluster.spec import loader
    from fmcluster_cdk import synthesis

    diagnostics = loader.load(ROOT / SPEC).diagnostics
    assert len(diagnostics) >= 2 and all(not d.is_error for d in diagnostics)  # the example's placeholders
    stream = _Writes()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setenv(synthesis.PROGRESS_FD, "9")
    monkeypatch.delenv(synthesis.WARNED, raising=False)
    synthesis._report(diagnostics)
    assert stream.writes == [f"{CLEAR}{d.format()}\n" for d in diagnostics]


def _on_a_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """The program with its standard error on a pseudo-terminal (stdout a pipe, as in
    `fmcluster synth ... > summary.txt`): exit code, stdout, what the terminal received."""
    master, slave = pty.openpty()
    program = subprocess.Popen([sys.executable, "-m", "fmcluster", *args], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=slave, env={**env, "PYTHONPATH": str(ROOT)})
    os.close(slave)
    received = b""
    while True:
        ready, _, _ = select.select([master], [], [], 600)
        if not ready:
            program.kill()
            pytest.fail("the program wrote nothing for 10 minutes")
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the program has closed the terminal's last descriptor
            break
        if not chunk:
            break
        received += chunk
    os.close(master)
    out, _ = program.communicate(timeout=600)
    return program.returncode, out.decode(), received.decode()


@pytest.fixture(scope="module")
def user_env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "CI"}, **TERMINAL}


def test_synth_on_a_terminal_shows_the_apps_steps_then_clears_them(tmp_path, user_env):
    code, out, screen = _on_a_terminal(["synth", SPEC, "-o", str(tmp_path / "cdk.out")], user_env)
    assert code == 0, screen
    steps = [part for part in screen.split(CLEAR) if part]
    assert steps[0] == "fmcluster: starting the CDK app"
    for step in (f"reading {SPEC}", "building the stacks of llm-pretrain", "writing the templates"):
        assert any(s.startswith(f"fmcluster: {step}") for s in steps), (step, steps)
    assert screen.endswith(CLEAR), "the steps leave no line behind"
    # what stays on the screen: the spec's warnings (its placeholders), each on a line of its own,
    # as validate prints them; no step is left before or between them
    visible = [line.split(CLEAR)[-1] for line in screen.split("\r\n")]
    validated = subprocess.run([sys.executable, "-m", "fmcluster", "validate", SPEC], cwd=ROOT, capture_output=True,
                               text=True, env=user_env)
    assert visible == validated.stderr.splitlines() + [""], screen
    assert out.splitlines()[0].startswith("llm-pretrain-network: "), "stdout is the summary, as without a terminal"
    assert Path(tmp_path / "cdk.out" / "manifest.json").is_file()


def test_synth_on_a_terminal_in_ci_is_as_quiet_as_in_a_pipe(tmp_path, user_env):
    code, out, screen = _on_a_terminal(["synth", SPEC, "-o", str(tmp_path / "cdk.out")], {**user_env, "CI": "true"})
    validated = subprocess.run([sys.executable, "-m", "fmcluster", "validate", SPEC], cwd=ROOT, capture_output=True,
                               text=True, env=user_env)
    assert (code, screen.replace("\r\n", "\n")) == (0, validated.stderr)  # the spec's warnings, no step
    assert out.splitlines()[0].startswith("llm-pretrain-network: ")


def test_diff_on_a_terminal_names_the_spec_each_step_is_for(user_env):
    code, out, screen = _on_a_terminal(["diff", SPEC, SPEC], user_env)
    assert code == 0, screen
    steps = [part for part in screen.split(CLEAR) if part]
    for role in ("OLD", "NEW"):
        assert f"fmcluster: {role}: building the stacks of llm-pretrain" in {s.split(" (")[0] for s in steps}, steps
    assert screen.endswith(CLEAR)
    assert out.startswith(f"fmcluster diff: {SPEC} -> {SPEC}\n")


@pytest.mark.parametrize("ci, terminal, shown", [(None, True, True), ("true", True, False), (None, False, False)])
def test_make_install_says_its_steps_on_a_terminal_only(ci, terminal, shown, user_env):
    """`make install`'s steps (the Makefile's `step`), through a target that says one."""
    env = {k: v for k, v in user_env.items() if k != "CI"} | ({"CI": ci} if ci else {})
    probe = ["make", "-s", "-C", str(ROOT), "--eval", 'probe: ; $(call step,"installing the probe")', "probe"]
    if terminal:
        master, slave = pty.openpty()
        done = subprocess.run(probe, stderr=slave, stdout=subprocess.PIPE, env=env, timeout=600)
        os.close(slave)
        try:
            said = os.read(master, 4096).decode()
        except OSError:  # EIO: nothing was written before make closed the terminal
            said = ""
        os.close(master)
    else:
        done = subprocess.run(probe, capture_output=True, text=True, env=env, timeout=600)
        said = done.stderr
    assert done.returncode == 0
    assert (said.strip() == "make: installing the probe") is shown, said
    assert shown or said == ""
