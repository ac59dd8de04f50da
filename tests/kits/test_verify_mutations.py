"""`fmcluster verify` under mutated results: the formats the kit writes (its jobs' output files,
under its node markers) and the plain tools' outputs of tests/data/verify*, each healthy as given
(exit 0), cut at every line, lines doubled, swapped and cut mid-line, numbers in exponent form,
with their signs flipped, made huge or impossible, statuses renamed, re-encoded, NULs inserted,
JSON nested deep, paths unreadable. What holds: nothing ends in a traceback, the JSON is strict,
and a mutated result either judges exactly as the healthy one or does not exit 0. The
mutations are a fixed, seeded set; the command's run() is called in-process.

The cluster: examples/p5-pcs.yaml with its GPU group of 2 nodes (ip-10-1-0-11 and -12, the
hosts of the plain nccl-tests outputs), so the kit's files hold every node's part and stay small."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Iterator

import pytest

from fmcluster.kits import jobs, verify
from fmcluster.kits.verify import command
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from tests.support.paths import DATA, ROOT

SEED = 42
PLAIN, REAL = DATA / "verify-plain", DATA / "verify"
HOSTS = ("ip-10-1-0-11", "ip-10-1-0-12")
HEALTHY = (PLAIN / "nccl-all_reduce-2x-p5-healthy.txt").read_text()  # 2 x p5, 479.71 GB/s, EFA named
NO_DEBUG = (PLAIN / "nccl-all_reduce-2x-p5-no-nccl-debug.txt").read_text()  # 362.1 GB/s, no INFO lines: a WARN
ONE_NODE = (PLAIN / "nccl-all_reduce-1x-p5-one-node.txt").read_text()  # 8 x H100 on ip-10-1-0-11, 478.97 GB/s
A3 = (REAL / "nccl-all_reduce-2x-a3-mega-h100.txt").read_text()  # 2 x 8 H100, root and Group columns: a WARN
DCGM_FAIL = (REAL / "dcgm-diag-r3-8x-h100-fail.txt").read_text()
# the failing table as a passing run prints it (every result Pass): 8 x H100, device 2330
DCGM_TEXT = re.sub(r"\| (Fail|Skip) - All( *)\|", r"| Pass      \2|", DCGM_FAIL)
DCGM_R2 = (REAL / "dcgm-diag-r2-virtualclient.json").read_text()  # DCGM 3 JSON, no device IDs: a WARN
DCGM_R3 = (REAL / "dcgm-diag-r3-virtualclient.json").read_text()
FIO_TEXT = (PLAIN / "fio-write-fsx-8-jobs.txt").read_text()  # 3,093 MB/s of writes, fio's normal report
FIO_WRITE = (REAL / "fio-write-virtualclient-fio-3.26.json").read_text()
FIO_RW = (REAL / "fio-readwrite-virtualclient-fio-3.26.json").read_text()
FIO_2 = (REAL / "fio-randrw-pkb-gce-pd-fio-2.17.json").read_text()
WRONG_FORMS = ("1", "1.67772e+07", "-3", "2e+00", "inf", "nan")
STATUS_FORMS = ("Failed", "PASS", "pass", "Passed", "Unknown", "Pass!")


def smoke_output(prefix: str = "") -> str:
    lines = [f"{prefix}fmcluster-smoke step={i} loss={2.0 - i / 10:.6f} tokens_per_s={50000.0 + i:.1f} "
             f"host={HOSTS[0]} rank=0" for i in range(1, 6)]
    return "\n".join([*lines, f"{prefix}fmcluster-smoke ok world_size=16 steps=5", ""])


def requeued_smoke_output() -> str:
    """The kit's smoke job stopped by the end signal after step 3 and run again (requeued): its
    output file holds both runs, each under the marker, the second resuming from the checkpoint
    (fmcluster.kits.common.SMOKE_PY, fmcluster.kits.jobs.smoke_sbatch: --open-mode=append)."""
    lines = [line for line in smoke_output("[default0]:").splitlines() if line]
    path = "/fsx/acceptance/checkpoints/10/step-000003"
    figures = f"step=3 seconds=2.481 bytes=1210123456 path={path}"
    return marked("smoke", [("all", "\n".join([*lines[:3], f"[default0]:fmcluster-smoke checkpoint {figures}",
                                               "fmcluster: smoke stopped on a signal, its checkpoint saved: job 10 "
                                               "requeued", ""])),
                            ("all", "\n".join([f"[default0]:fmcluster-smoke resumed {figures}", *lines[3:], ""]))])


def fio_document(direction: str, mb_per_s: float) -> str:
    """fio 3.26's JSON of the kit's run (FIO_WRITE, with the keys verify reads: its options,
    latencies and disks left out), `direction` moving `mb_per_s`, its bytes over its time as fio
    computes bw_bytes."""
    document = json.loads(FIO_WRITE)
    job = document["jobs"][0]
    keep = ("io_bytes", "io_kbytes", "bw_bytes", "bw", "iops", "runtime", "total_ios")
    job.update({side: {k: job["write"][k] for k in keep} for side in ("read", "write")})
    other = "read" if direction == "write" else "write"
    job[other].update(dict.fromkeys(keep, 0))
    job[direction]["io_bytes"] = int(mb_per_s * 1e6 * job[direction]["runtime"] / 1000)
    job[direction]["bw_bytes"] = 1000 * job[direction]["io_bytes"] // job[direction]["runtime"]
    job[direction]["bw"] = job[direction]["bw_bytes"] // 1024
    job[direction]["io_kbytes"] = job[direction]["io_bytes"] >> 10
    job["jobname"] = "fmcluster"
    job = {k: job[k] for k in ("jobname", "groupid", "error", "read", "write", "job_runtime")}
    return json.dumps({"fio version": document["fio version"], "jobs": [job]}, indent=2) + "\n"


def marked(test: str, parts: list[tuple[str, str]]) -> str:
    return "".join(jobs.MARKER.format(node=node, group="gpu", test=test) + "\n" + text for node, text in parts)


def kit_files() -> dict[str, str]:
    """The output file of each of the kit's jobs on the 2-node group, as its jobs write them."""
    nccl = ""
    for operation in ("all_reduce", "all_gather", "reduce_scatter"):
        nccl += marked(f"nccl-{operation}-node", [(host, ONE_NODE.replace(HOSTS[0], host)) for host in HOSTS])
        nccl += marked(f"nccl-{operation}-nodes", [("all", HEALTHY)])
    fio = "".join(marked(test, [(host, fio_document("write", mb) + fio_document("read", mb)) for host in HOSTS])
                  for test, mb in (("fio-fsx", 600.0), ("fio-scratch", 1500.0)))
    return {"gpu-nccl-7.out": nccl, "gpu-dcgm-8.out": marked("dcgm", [(host, DCGM_TEXT) for host in HOSTS]),
            "gpu-fio-9.out": fio, "gpu-smoke-10.out": marked("smoke", [("all", smoke_output("[default0]:"))]),
            "gpu-smoke-11.out": requeued_smoke_output()}


# name -> (the results path, relative: a plain fio output's file system comes from it; its text)
FIXTURES: dict[str, tuple[str, str]] = {
    **{name: (f"results/{name}", text) for name, text in kit_files().items()},
    "healthy": ("nccl/all_reduce.log", HEALTHY), "no-debug": ("nccl/no-debug.log", NO_DEBUG),
    "one-node": ("nccl/one-node.log", ONE_NODE), "a3": ("nccl/a3.log", A3), "dcgm-text": ("dcgm/diag.txt", DCGM_TEXT),
    "dcgm-r2": ("dcgm/r2.json", DCGM_R2), "dcgm-r3": ("dcgm/r3.json", DCGM_R3), "fio-text": ("fsx/fio.txt", FIO_TEXT),
    "fio-write": ("scratch/write.json", FIO_WRITE), "fio-rw": ("scratch/rw.json", FIO_RW),
    "fio-2": ("scratch/fio2.json", FIO_2), "smoke": ("smoke.log", smoke_output()),
}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    spec = tmp_path_factory.mktemp("spec") / "p5-2.yaml"
    text = (ROOT / "examples/p5-pcs.yaml").read_text()
    spec.write_text(re.sub(r"(\n    count:) 16\b", r"\1 2", text, count=1))
    loaded = resolve(loader.load(spec).spec)
    assert [g.max_count for g in loaded.node_groups if g.instance.is_gpu] == [2]
    return loaded


class Verify:
    """verify.run on one results file (written at its fixture's path, over the one before), its
    outcome: (exit code, the rows that hold a result)."""

    def __init__(self, model, root: Path) -> None:
        self.model, self.root = model, root

    def outcome(self, path: str, content: str | bytes, *more: Path) -> tuple[int, tuple[tuple[object, ...], ...]]:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)
        report = verify.run(self.model, [str(target), *map(str, more)])
        json.dumps(report.as_dict(), allow_nan=False)  # strict JSON: no NaN, no Infinity (ValueError)
        rows = tuple(sorted((r.group, r.test, r.node, r.verdict.value, r.measured) for r in report.rows
                            if r.source or r.node == "slow"))
        return verify.exit_code(report), rows


@pytest.fixture(scope="module")
def judge(model, tmp_path_factory):
    return Verify(model, tmp_path_factory.mktemp("mutations"))


@pytest.fixture(scope="module")
def bases(judge):
    return {name: judge.outcome(path, text) for name, (path, text) in FIXTURES.items()}


def test_every_fixture_is_healthy_as_given(bases):
    """Each passes (or warns: no NCCL INFO lines, DCGM 3's JSON names no GPU) and is judged."""
    for name, (code, rows) in bases.items():
        assert code == 0 and rows, name
        assert all(verdict in ("PASS", "WARN") for *_, verdict, _ in rows), (name, rows)


def lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def truncations(text: str) -> Iterator[tuple[str, str]]:
    """The text cut after each of its lines, and mid-line at seeded places."""
    kept = lines(text)
    for i in range(len(kept)):
        yield f"cut after line {i}", "".join(kept[:i])
    rng = random.Random(f"{SEED}:{len(text)}")
    for at in sorted(rng.sample(range(1, len(text)), 24)):
        yield f"cut at byte {at}", text[:at]


def sampled(text: str, count: int) -> list[int]:
    rng = random.Random(f"{SEED}:{text[:80]}")
    total = len(lines(text))
    return sorted(rng.sample(range(total), min(count, total)))


def doublings(text: str) -> Iterator[tuple[str, str]]:
    kept = lines(text)
    for i in sampled(text, 24):
        yield f"line {i + 1} doubled", "".join(kept[:i + 1] + kept[i:])


def swaps(text: str) -> Iterator[tuple[str, str]]:
    kept = lines(text)
    for i in sampled(text, 24):
        if i + 1 < len(kept) and kept[i] != kept[i + 1]:
            yield f"lines {i + 1} and {i + 2} swapped", "".join(kept[:i] + [kept[i + 1], kept[i]] + kept[i + 2:])


def nuls(text: str) -> Iterator[tuple[str, str]]:
    rng = random.Random(f"{SEED}:nul:{len(text)}")
    for at in sorted(rng.sample(range(len(text)), 12)):
        yield f"NUL at {at}", text[:at] + "\x00" + text[at:]


_NUMBER = re.compile(r"(?<![\w.+-])(\d+\.\d+|\d+)(?![\w.])")


def numbers(text: str) -> list[re.Match[str]]:
    """The numbers of the text's lines (sampled), where a mutation changes one."""
    rng = random.Random(f"{SEED}:numbers:{len(text)}")
    found = [m for m in _NUMBER.finditer(text)]
    return sorted(rng.sample(found, min(16, len(found))), key=lambda m: m.start())


def replaced(text: str, match: re.Match[str], value: str) -> str:
    return text[:match.start()] + value + text[match.end():]


@pytest.mark.parametrize("mutations", [truncations, doublings, swaps, nuls], ids=lambda f: f.__name__)
@pytest.mark.parametrize("name", FIXTURES)
def test_a_mutated_result_judges_as_the_healthy_one_or_does_not_pass(judge, bases, mutations, name):
    """Cut at every line (and mid-line), a line doubled, two lines swapped, a NUL inserted: the
    result is judged exactly as before (a cut after the tool's last line, a doubled blank line,
    a doubled NCCL INFO line), or the command exits 1 or 2, never 0 with other rows."""
    path, text = FIXTURES[name]
    tried = 0
    for what, mutated in mutations(text):
        if mutated == text:
            continue
        tried += 1
        code, rows = judge.outcome(path, mutated)
        assert code != 0 or rows == bases[name][1], (name, what, rows)
    assert tried


@pytest.mark.parametrize("name", FIXTURES)
def test_numbers_changed_judge_as_before_or_do_not_pass(judge, bases, name):
    """Each sampled number of each output: in exponent form (the same value, as %e prints it) it
    judges as before; negated or made 5,000 digits long, the result judges as before (a number
    no verdict reads) or does not exit 0."""
    path, text = FIXTURES[name]
    for match in numbers(text):
        value = float(match.group(1))
        same = replaced(text, match, f"{value:e}")
        code, rows = judge.outcome(path, same)
        assert code != 0 or rows == bases[name][1], (name, "exponent", match.group(1))
        for what, mutated in (("negated", replaced(text, match, "-" + match.group(1))),
                              ("huge", replaced(text, match, "9" * 5000))):
            code, rows = judge.outcome(path, mutated)
            assert code != 0 or rows == bases[name][1], (name, what, match.group(1), match.start())


def test_exponent_forms_of_a_table_are_read_as_their_values(judge, bases):
    """Every time, algbw and busbw of the healthy table in %e form: judged exactly as printed."""
    table = re.compile(r"^( +\d+ +\d+ +float +sum +-1)(.*)$", re.MULTILINE)

    def exponents(found: re.Match[str]) -> str:
        return found.group(1) + re.sub(r"\d+\.\d+", lambda m: f"  {float(m.group(0)):.6e}", found.group(2))

    mutated = table.sub(exponents, HEALTHY)
    assert mutated.count("e+") > 40
    assert judge.outcome("nccl/exponents.log", mutated) == bases["healthy"]


def wrong_positions(text: str) -> list[tuple[int, int]]:
    """The spans of #wrong in the rows of an nccl-tests table (the 9th and 13th columns)."""
    spans = []
    for row in re.finditer(r"^ +\d+ +\d+ +float +sum +-1(?: +\S+){8}$", text, re.MULTILINE):
        columns = list(re.finditer(r"\S+", row.group(0)))
        spans += [(row.start() + columns[i].start(), row.start() + columns[i].end()) for i in (8, 12)]
    return spans


@pytest.mark.parametrize("form", WRONG_FORMS)
def test_any_wrong_value_in_any_form_fails(judge, form):
    """nccl-tests prints #wrong with %g: a count of 16,777,216 is `1.67772e+07`, not 0, and
    values of opposite signs do not cancel."""
    spans = wrong_positions(HEALTHY)
    assert len(spans) == 30
    for start, end in spans[::7]:
        code, rows = judge.outcome("nccl/wrong.log", HEALTHY[:start] + form + HEALTHY[end:])
        assert code == 1 and rows[0][3] == "FAIL", (form, start)
    (a, b), (c, d) = spans[-2], spans[-1]
    cancel = HEALTHY[:a] + "5" + HEALTHY[b:c] + "-5" + HEALTHY[d:]
    assert judge.outcome("nccl/cancel.log", cancel)[0] == 1


@pytest.mark.parametrize("form", STATUS_FORMS)
def test_an_unknown_dcgm_status_never_passes(judge, form):
    """Every status of the passing outputs, text (each row) and JSON (each result), renamed to a
    status dcgmi does not print: not judged (exit 2), never a pass."""
    for name in ("dcgm-text", "dcgm-r2", "dcgm-r3", "gpu-dcgm-8.out"):
        path, text = FIXTURES[name]
        statuses = list(re.finditer(r"(?<=\| )Pass(?= )|(?<=\"status\" : \")Pass|(?<=\"status\": \")Pass", text))
        assert statuses, name
        for match in statuses[::3]:
            code, _ = judge.outcome(path, replaced(text, match, form))
            assert code == 2, (name, form, match.start())


def test_impossible_figures_fail(judge):
    """A busbw above what NVLink or EFA carries, at the largest size or any other, and fio above
    what the file system's servers carry: FAIL, never exit 0."""
    for name, figure in (("healthy", "479.71"), ("healthy", "139.48"), ("one-node", "478.97"), ("a3", "338.82")):
        path, text = FIXTURES[name]
        assert figure in text
        code, rows = judge.outcome(path, text.replace(figure, f"{float(figure) * 100:.2f}", 1))
        assert code == 1 and any(row[3] == "FAIL" for row in rows), (name, figure)
    fio = marked("fio-fsx", [(host, fio_document("write", 40000.0) + fio_document("read", 600.0)) for host in HOSTS])
    code, rows = judge.outcome("results/gpu-fio-11.out", fio)
    assert code == 1 and ("gpu", "fio-fsx-write", "all", "FAIL", 80000.0) in rows


def test_encodings_never_end_in_a_traceback(judge, bases):
    """Latin-1 and UTF-16 files, a byte-order mark, bytes that are no UTF-8: judged as the text
    they hold, or not judged; never exit 0 with other rows."""
    for name, (path, text) in FIXTURES.items():
        for what, content in (("latin-1", text.replace("\n", " caf\xe9\n", 1).encode("latin-1")),
                              ("utf-16", text.encode("utf-16")), ("bom", "\ufeff" + text),
                              ("bad bytes", text.encode() + b"\xff\xfe\x80\n")):
            code, rows = judge.outcome(path, content)
            assert code != 0 or rows == bases[name][1], (name, what)


def deeply(value: str, depth: int = 100_000) -> str:
    return "[" * depth + value + "]" * depth


def test_deep_nesting_never_ends_in_a_traceback(judge, bases, tmp_path):
    """A value of a dcgmi or fio document nested 100,000 deep (deeper than Python's JSON reader
    goes), or 100 deep (deeper than the tools write), and an expected.json nested so beside the
    kit's files: judged as before or not exit 0."""
    for name in ("dcgm-r2", "fio-write", "gpu-fio-9.out"):
        path, text = FIXTURES[name]
        for depth in (100_000, 100):
            target = '"Pass"' if "dcgm" in name else '"fmcluster"' if "gpu-" in name else '"disk_fill"'
            assert target in text, name
            code, rows = judge.outcome(path, text.replace(target, deeply(target, depth), 1))
            assert code != 0 or rows == bases[name][1], (name, depth)
    kit = tmp_path / "kit"
    kit.mkdir()
    (kit / "expected.json").write_text(deeply("{}"))
    path, text = FIXTURES["gpu-dcgm-8.out"]
    assert judge.outcome(path, text, kit / "expected.json") == bases["gpu-dcgm-8.out"]


def test_unreadable_paths_are_refused_and_the_rest_judged(judge, bases, model, tmp_path, monkeypatch):
    """A directory that cannot be listed and a file that cannot be read (made so here: the tests
    may run as root): each listed as not judged, the command exits 2, what could be read is
    judged all the same."""
    results = tmp_path / "results"
    (results / "locked").mkdir(parents=True)
    (results / "healthy.log").write_text(HEALTHY)
    (results / "secret.log").write_text(HEALTHY)
    scandir, read = command.os.scandir, command._read

    def refusing_scandir(path):
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied")
        return scandir(path)

    def refusing_read(path):
        if path.endswith("secret.log"):
            raise PermissionError(13, "Permission denied")
        return read(path)

    monkeypatch.setattr(command.os, "scandir", refusing_scandir)
    monkeypatch.setattr(command, "_read", refusing_read)
    report = verify.run(model, [str(results)])
    assert verify.exit_code(report) == 2 and report.judged == 1
    assert report.refused == ((str(results / "locked"), "a directory that cannot be read: Permission denied"),
                              (str(results / "secret.log"), "cannot read it: Permission denied"))
    assert [r.verdict for r in report.rows if r.source] == [verify.Verdict.PASS]
    _, err = verify.render(report, "text")
    assert f"{results / 'locked'}: not judged: a directory that cannot be read" in err

