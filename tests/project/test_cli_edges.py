"""The command line at its edges: output paths it cannot write, Node.js missing or of another line,
and Ctrl-C. A mutation test of the
output paths of `synth` and `jobs` (a regular file, a path under one, a dangling link, a FIFO, a
pseudo file system: cases that fail for root too, which ignores mode bits), and Ctrl-C while a
command reads a file, while the CDK app synthesizes and while `diff` synthesizes. The contract:
no traceback; a path it cannot write is an `error: PATH: ...` line with a hint, exit 2, nothing
written; Ctrl-C is one line, `fmcluster: interrupted`, exit 130, and stops the CDK app's
processes (jsii's Node.js included)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from fmcluster.cli import main
from fmcluster.deploy import synth
from fmcluster.facts import nodejs
from tests.support.nodeless import fmcluster, stand_in_node, venv_without_node
from tests.support.paths import ROOT

SPEC = "examples/p6-b300-pcs.yaml"  # an example without placeholders: nothing but what is tested on stderr
INTERRUPTED = "fmcluster: interrupted\n"


def _file(tmp: Path) -> str:
    (tmp / "file").write_text("kept\n")
    return str(tmp / "file")


def _under_file(tmp: Path) -> str:
    return str(Path(_file(tmp)) / "out")


def _deep_under_file(tmp: Path) -> str:
    return str(Path(_file(tmp)) / "a" / "b")


def _dangling_link(tmp: Path) -> str:
    (tmp / "link").symlink_to(tmp / "nowhere" / "x")
    return str(tmp / "link")


def _link_to_file(tmp: Path) -> str:
    (tmp / "link").symlink_to(_file(tmp))
    return str(tmp / "link")


def _fifo(tmp: Path) -> str:
    os.mkfifo(tmp / "fifo")
    return str(tmp / "fifo")


def _proc(tmp: Path) -> str:
    return "/proc/fmcluster-out"


def _proc_itself(tmp: Path) -> str:
    return "/proc/self"


BAD_OUTPUTS: dict[str, Callable[[Path], str]] = {
    "regular-file": _file, "under-a-file": _under_file, "deep-under-a-file": _deep_under_file,
    "dangling-link": _dangling_link, "link-to-a-file": _link_to_file, "fifo": _fifo, "in-proc": _proc,
    "proc-dir": _proc_itself,
}


def _snapshot(tmp: Path) -> dict[str, str]:
    return {str(p.relative_to(tmp)): ("dir" if p.is_dir() and not p.is_symlink() else "other")
            for p in tmp.rglob("*")}


@pytest.mark.parametrize("case", BAD_OUTPUTS)
def test_synth_refuses_an_output_it_cannot_write_before_synthesizing(case, tmp_path, capsys, monkeypatch):
    """Refused before the CDK app runs: a located error, a hint, exit 2, and nothing written."""
    out = BAD_OUTPUTS[case](tmp_path)
    before = _snapshot(tmp_path)
    monkeypatch.setattr(synth, "run_app", lambda *a: pytest.fail("the CDK app ran for an unwritable output"))
    assert main(["synth", SPEC, "-o", out]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert captured.out == ""
    assert len(lines) == 2 and lines[0].startswith(f"error: {out}: ") and lines[1].startswith("  hint: "), lines
    assert _snapshot(tmp_path) == before
    if case == "regular-file":
        assert Path(out).read_text() == "kept\n"


@pytest.mark.parametrize("case", BAD_OUTPUTS)
def test_jobs_refuses_an_output_it_cannot_write(case, tmp_path, capsys):
    out = BAD_OUTPUTS[case](tmp_path)
    assert main(["jobs", SPEC, "-o", out]) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if not line.startswith("warning")]
    assert captured.out == "" and len(lines) == 2, captured.err
    assert lines[0].startswith(f"fmcluster jobs: cannot write {out}: ") and lines[1].startswith("  hint: ")


@pytest.mark.parametrize("target", ["new/deeper", "exists", "."])
def test_a_writable_output_passes_the_check_and_is_left_as_it_was(target, tmp_path, monkeypatch):
    """The check probes, and leaves nothing behind (the app removes a directory it made when it fails)."""
    (tmp_path / "exists").mkdir()
    monkeypatch.chdir(tmp_path)
    before = _snapshot(tmp_path)
    assert synth.output_problem(target) is None
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("case", ["regular-file", "under-a-file"])
def test_the_cdk_app_itself_words_a_file_system_error_in_one_line(case, tmp_path):
    """Past the check (a directory that turns into a file meanwhile; `cdk synth -o`), the app's
    Node.js side fails: one located line and a hint, exit 2, no traceback."""
    out = BAD_OUTPUTS[case](tmp_path)
    env = {**os.environ, "CDK_OUTDIR": out, "CDK_CONTEXT_JSON": '{"spec": "%s"}' % SPEC,
           "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", synth.APP_MODULE], cwd=ROOT, env=env, capture_output=True,
                            text=True)
    lines = result.stderr.splitlines()
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len(lines) == 2 and lines[0].startswith(f"error: {out}: cannot write the cloud assembly ("), lines
    assert lines[1].startswith("  hint: ")


# ---- Ctrl-C ---------------------------------------------------------------------------------

def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent, session) of a process; None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1]), int(fields[3])


def _processes() -> Iterator[int]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


def _live_in_session(session: int) -> list[int]:
    return [pid for pid in _processes() if (s := _stat(pid)) and s[2] == session and s[0] != "Z"]


def _as_a_foreground_job() -> None:
    """What an interactive shell does for a foreground job: SIGINT and SIGQUIT at their defaults
    and not blocked. A test run started in the background of a script (`make test &`, some CI
    runners) ignores SIGINT, and a thread of a test worker may block it; both stay so across
    exec, and the program would never see Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGQUIT})


_started: list[subprocess.Popen[str]] = []


def _cli(*args: str) -> subprocess.Popen[str]:
    """The real program in a process group of its own, as a shell runs a foreground job."""
    cli = subprocess.Popen([sys.executable, "-m", "fmcluster", *args], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True,
                           preexec_fn=_as_a_foreground_job, env={**os.environ, "PYTHONPATH": str(ROOT)})
    _started.append(cli)
    return cli


@pytest.fixture(autouse=True)
def _no_program_outlives_its_test() -> Iterator[None]:
    """Any program a test started and left running (a failed test) is killed at the test's end,
    so that nothing stays blocked on a FIFO or holds a pipe open."""
    yield
    while _started:
        cli = _started.pop()
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
            cli.communicate()


def _ctrl_c(cli: subprocess.Popen[str]) -> tuple[int, str, str]:
    """Ctrl-C as a terminal sends it: SIGINT to the whole foreground process group. A program
    that ignores it is killed after a bound, so that the test fails instead of hanging."""
    os.killpg(cli.pid, signal.SIGINT)
    try:
        out, err = cli.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        status = [line for line in Path(f"/proc/{cli.pid}/status").read_text().splitlines()
                  if line.startswith(("State", "Threads", "Sig"))]
        os.killpg(cli.pid, signal.SIGKILL)
        out, err = cli.communicate()
        pytest.fail(f"the program did not end on Ctrl-C: {status} {err}")
    return cli.returncode, out, err


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def _app_with_node(cli: subprocess.Popen[str]) -> int:
    """Wait until the CLI's CDK app runs and its jsii Node.js is up (a jsii call can be under way);
    the app's process id, which is its session's."""
    while cli.poll() is None:
        for pid in _processes():
            stat = _stat(pid)
            if stat and stat[1] == cli.pid and any("node" in _cmdline(p) for p in _live_in_session(pid) if p != pid):
                return pid
        time.sleep(0.1)  # a poll, not a measure: the synthesis gets the CPU meanwhile
    pytest.fail(f"the CLI ended before its CDK app started: {cli.communicate()}")


def _assert_interrupted(code: int, out: str, err: str) -> None:
    assert (code, err) == (130, INTERRUPTED), (code, err)
    assert "Traceback" not in out


def _assert_gone(session: int) -> None:
    """Nothing of the app's session is left (SIGKILL is delivered at once, but reaping is not)."""
    left = _live_in_session(session)
    for _ in range(10_000):
        if not left:
            return
        os.sched_yield()
        left = _live_in_session(session)
    pytest.fail(f"processes of the CDK app outlived the CLI: {left}")


def _sleeping_in_read(cli: subprocess.Popen[str]) -> None:
    """Wait until the program sleeps in read(2) on the pipe. A signal that arrives between the
    FIFO's open and that read is taken by Python's C handler, and the exception waits for the
    interpreter's next check, which the blocking read then holds off (the race is a few
    microseconds wide: a person's Ctrl-C meets a command already blocked, as this one is then)."""
    wchan = Path(f"/proc/{cli.pid}/wchan")
    while cli.poll() is None:
        try:
            where = wchan.read_text().strip()
        except OSError:
            return
        if "pipe_read" in where or (where in ("", "0") and (_stat(cli.pid) or ("",))[0] == "S"):
            return  # (a kernel that hides wchan: asleep, the nearest sign)
        os.sched_yield()


def test_ctrl_c_while_reading_a_file_is_one_line(tmp_path):
    """`plan --preflight REPORT` blocks on a FIFO with no writer until the test opens it: Ctrl-C
    then arrives while the command reads, in its own process."""
    fifo = _fifo(tmp_path)
    cli = _cli("plan", SPEC, "--preflight", fifo)
    writer = None
    while writer is None and cli.poll() is None:
        try:  # succeeds once the CLI has the FIFO open for reading
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            os.sched_yield()
    assert writer is not None, cli.communicate()
    _sleeping_in_read(cli)
    try:
        _assert_interrupted(*_ctrl_c(cli))
    finally:
        os.close(writer)


def test_ctrl_c_during_synth_stops_the_cdk_app_and_is_one_line(tmp_path):
    out = tmp_path / "cdk.out"
    cli = _cli("synth", SPEC, "-o", str(out))
    app = _app_with_node(cli)
    _assert_interrupted(*_ctrl_c(cli))
    _assert_gone(app)
    assert not out.exists(), "an interrupted synth left the directory it made"


def test_ctrl_c_during_diff_stops_the_cdk_app_and_is_one_line():
    cli = _cli("diff", SPEC, SPEC)
    app = _app_with_node(cli)
    _assert_interrupted(*_ctrl_c(cli))
    _assert_gone(app)


def test_sigterm_during_synth_stops_the_cdk_app_too(tmp_path):
    """`timeout` and a closed terminal send SIGTERM or SIGHUP to the CLI alone: the app, in a
    session of its own, must not outlive it. The exit is the signal's, 128 + N, without a traceback."""
    cli = _cli("synth", SPEC, "-o", str(tmp_path / "cdk.out"))
    app = _app_with_node(cli)
    os.kill(cli.pid, signal.SIGTERM)
    out, err = cli.communicate(timeout=300)
    assert cli.returncode == 128 + signal.SIGTERM and "Traceback" not in err + out, (cli.returncode, err)
    _assert_gone(app)


# ---- Node.js missing or of another line ------------------------------------------------------

@pytest.fixture(scope="module")
def nodeless(tmp_path_factory) -> Path:
    """An interpreter with this checkout's packages and no Node.js beside it (as an installed
    package has none)."""
    return venv_without_node(tmp_path_factory.mktemp("nodeless") / "venv")


def _one_line(result: subprocess.CompletedProcess[str], *words: str) -> str:
    lines = result.stderr.splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr and "!!" not in result.stderr
    assert all(w in lines[0] for w in ("Node.js 22 or 24 (LTS)", *words)), lines[0]
    return lines[0]


def test_synth_and_diff_without_node_say_so_in_one_line(nodeless, tmp_path):
    """No `node` on PATH (and none beside the interpreter): one line naming the lines it takes,
    exit 2, before the CDK app imports anything of the CDK; nothing written."""
    out = tmp_path / "cdk.out"
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    _one_line(fmcluster(nodeless, "synth", SPEC, "-o", str(out), path=str(empty)), "no `node` on PATH")
    assert not out.exists()
    _one_line(fmcluster(nodeless, "diff", SPEC, SPEC, path=str(empty)), "no `node` on PATH")


def test_synth_checks_the_spec_before_node(nodeless, tmp_path):
    """An invalid spec is said as `validate` says it, without Node.js (there is none to start)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    result = fmcluster(nodeless, "synth", "tests/data/bad-spec.yaml", "-o", str(tmp_path / "out"), path=str(empty))
    validated = fmcluster(nodeless, "validate", "tests/data/bad-spec.yaml", path=str(empty))
    assert result.returncode == validated.returncode == 2 and "Node.js" not in result.stderr
    assert result.stderr == validated.stderr.rsplit("\n", 2)[0] + "\n"  # less validate's count line
    assert not (tmp_path / "out").exists()


def test_node_20_is_refused_in_one_line_before_jsii_prints_its_banner(nodeless, tmp_path):
    """A Node.js of a line jsii no longer supports (Debian's 20): refused by its version, with the
    lines it takes, instead of jsii's end-of-life banner as b'!!...' lines."""
    bin_dir = stand_in_node(tmp_path / "node20", "v20.20.2")
    _one_line(fmcluster(nodeless, "synth", SPEC, "-o", str(tmp_path / "out"), path=str(bin_dir)),
              "Node.js v20.20.2 (node on PATH)")
    _one_line(fmcluster(nodeless, "synth", SPEC, "-o", str(tmp_path / "out"), path=os.environ["PATH"],
                        JSII_NODE=str(bin_dir / "node")), f"Node.js v20.20.2 (JSII_NODE={bin_dir / 'node'})")


def test_the_system_s_node_of_another_line_is_refused(nodeless, tmp_path):
    """The real program, where the machine has one of a line jsii does not support (Debian's 20)."""
    system = [p for p in os.environ["PATH"].split(os.pathsep) if p and not p.startswith(str(ROOT))
              and (Path(p) / "node").exists()]
    found = nodejs.version("node", {"PATH": os.pathsep.join(system)}) if system else None
    if found is None or int(found[1:].split(".")[0]) in nodejs.SUPPORTED_MAJORS:
        pytest.skip(f"no Node.js of an unsupported line on this machine's PATH ({found})")
    _one_line(fmcluster(nodeless, "synth", SPEC, "-o", str(tmp_path / "out"), path=os.pathsep.join(system)),
              f"Node.js {found} (node on PATH)")


# ---- placeholders where the templates may be deployed ------------------------------------------

def test_the_cdk_app_refuses_placeholders_where_it_may_deploy(tmp_path):
    """Run by the CDK CLI with credentials (it sets CDK_DEFAULT_ACCOUNT, as for `cdk deploy`), the
    app refuses a spec's placeholders as located errors, exit 2, before Node.js starts (there is
    none here) and writing nothing; accepting the warning in the spec changes nothing."""
    spec = tmp_path / "cluster.yaml"
    spec.write_text((ROOT / "examples/p5-pcs.yaml").read_text() + "accepted_warnings:\n"
                    "  - rule: placeholder-values\n    reason: an example\n")
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path / "out"), "CDK_CONTEXT_JSON": '{"spec": "%s"}' % spec,
           "CDK_DEFAULT_ACCOUNT": "381492756031", "JSII_NODE": str(tmp_path / "no-node")}
    result = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True)
    errors = [line for line in result.stderr.splitlines() if ": error: " in line]
    assert result.returncode == 2 and "Traceback" not in result.stderr and "Node.js" not in result.stderr
    assert [e.split(": error: ")[1].split(":")[0] for e in errors] == [
        "node_groups[0].capacity.reservation_id", "observability.alert_email"], result.stderr
    assert errors[0].startswith(f"{spec}:41:23: error: ") and errors[0].endswith("[placeholder-values]")
    assert "the CDK app refuses placeholders wherever its templates may be deployed" in result.stderr
    assert not (tmp_path / "out").exists()
    # without credentials nothing can be deployed from here: the spec passes on to Node.js
    del env["CDK_DEFAULT_ACCOUNT"]
    result = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 2 and ": error: " not in result.stderr
    assert result.stderr.splitlines()[-1].startswith(f"error: Node.js not found (JSII_NODE={tmp_path / 'no-node'}")


def test_diff_says_each_warning_once(tmp_path, monkeypatch):
    """`diff` validates both specs and prints their warnings; the CDK app it runs once for both does
    not print them again (FMCLUSTER_WARNED), but would print an error."""
    ran = []
    monkeypatch.setattr(synth, "run_app", lambda context, outdir, steps=None, warned=False, apart=False:
                        ran.append((context["spec"], warned, apart)) or 1)
    spec = str(ROOT / "examples/p5-pcs.yaml")
    with pytest.raises(synth.SynthesisFailed):
        synth.apart([spec, spec])
    assert ran == [(f"{spec},{spec}", True, True)]
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path / "out"), "CDK_CONTEXT_JSON": '{"spec": "examples/p5-pcs.yaml"}',
           "JSII_NODE": str(tmp_path / "no-node")}
    env.pop("CDK_DEFAULT_ACCOUNT", None)
    said = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True).stderr
    quiet = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env={**env, "FMCLUSTER_WARNED": "1"},
                           capture_output=True, text=True).stderr
    assert said.count(": warning: ") == 2 and quiet.count(": warning: ") == 0
    assert said.splitlines()[-1] == quiet.splitlines()[-1] and quiet.startswith("error: Node.js not found")


def test_fmcluster_synth_runs_the_app_as_a_review_never_a_deploy(tmp_path, monkeypatch, capfd):
    """`fmcluster synth` and `fmcluster diff` (synth.run_app) write templates to read: with
    CDK_DEFAULT_ACCOUNT in their own environment (a shell that exports it), the app still gets
    none, so a spec's placeholders stay warnings and it goes on to Node.js (none here)."""
    monkeypatch.setenv("CDK_DEFAULT_ACCOUNT", "381492756031")
    monkeypatch.setenv("JSII_NODE", str(tmp_path / "no-node"))
    code = synth.run_app({"spec": str(ROOT / "examples/p5-pcs.yaml")}, str(tmp_path / "out"))
    err = capfd.readouterr().err
    assert code == 2 and ": error: " not in err and err.count("[placeholder-values]") == 2, err
    assert err.splitlines()[-1].startswith("error: Node.js not found"), err


def test_only_diff_asks_the_app_for_specs_apart(tmp_path, monkeypatch, capfd):
    """FMCLUSTER_APART (each spec an App of its own, names may repeat) reaches the app only where
    synth.run_app is asked for it (`fmcluster diff`), not from the caller's environment: two specs
    of one name are refused as stacks that would clash, or pass on to Node.js (none here)."""
    monkeypatch.setenv("FMCLUSTER_APART", "1")
    monkeypatch.setenv("JSII_NODE", str(tmp_path / "no-node"))
    spec = str(ROOT / "examples/p5-pcs.yaml")
    assert synth.run_app({"spec": f"{spec},{spec}"}, str(tmp_path / "together")) == 2
    assert "their stacks would clash" in capfd.readouterr().err
    assert synth.run_app({"spec": f"{spec},{spec}"}, str(tmp_path / "apart"), apart=True) == 2
    err = capfd.readouterr().err
    assert "would clash" not in err and err.splitlines()[-1].startswith("error: Node.js not found"), err
