"""`fmcluster verify SPEC RESULTS...` on what users have: plain outputs of nccl-tests, dcgmi diag and
fio (recognized by their content), alone, in a directory, or mixed with the kit's grouped files. Each exit code is
seen as a user runs it, `python -m fmcluster verify`; the other tests call the same `main` in-process.

Fixtures: tests/data/verify-plain/ (written after NVIDIA/nccl-tests' src/common.cu and fio's normal
report, see its PROVENANCE.md) and the real outputs of tests/data/verify/."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fmcluster.cli import main
from fmcluster.kits import jobs, verify
from tests.support.paths import DATA, ROOT

PLAIN = DATA / "verify-plain"
REAL = DATA / "verify"
SPEC = "examples/p5-pcs.yaml"  # group gpu: 16 x p5.48xlarge (EFA: PASS from 340 GB/s, FAIL below 240), /fsx
HEALTHY = PLAIN / "nccl-all_reduce-2x-p5-healthy.txt"
SLOW = PLAIN / "nccl-all_reduce-2x-p5-slow.txt"
NO_DEBUG = PLAIN / "nccl-all_reduce-2x-p5-no-nccl-debug.txt"  # 362 GB/s, no NCCL_DEBUG=INFO lines
ONE_NODE = PLAIN / "nccl-all_reduce-1x-p5-one-node.txt"  # 8 x H100 on ip-10-1-0-11, 479 GB/s
FIO_TEXT = PLAIN / "fio-write-fsx-8-jobs.txt"
FIO_JSON = REAL / "fio-write-virtualclient-fio-3.26.json"
DCGM_PASS = REAL / "dcgm-diag-r2-virtualclient.json"
DCGM_FAIL = REAL / "dcgm-diag-r3-8x-h100-fail.txt"
TABLE_ONLY = REAL / "nccl-all_reduce-2x-p5-slurm-srun-label-table-only.txt"


def fmcluster_cli(*args: str, process=False):
    """`fmcluster ARGS...` from the repository's root: its exit code, standard output and error. With
    `process`, as a user runs it, `python -m fmcluster` in a process of its own (the tests of each exit
    code, and those a hang would stop: it has a timeout); else the same `main` in this process, which
    saves a Python start and the spec's imports a call."""
    if process:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        done = subprocess.run([sys.executable, "-m", "fmcluster", *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)
        return done.returncode, done.stdout, done.stderr
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def verify_cli(*results, fmt="text", spec=SPEC, process=False):
    """`fmcluster verify SPEC RESULTS... --format FMT` (fmcluster_cli)."""
    return fmcluster_cli("verify", spec, *map(str, results), "--format", fmt, process=process)


def results(stdout):
    return [(r["test"], r["node"], r["verdict"], r["measured"]) for g in json.loads(stdout)["groups"].values()
            for r in g["results"] if r["note"] != "no result: not run"]


def test_garbage_is_not_judged_and_exits_2(tmp_path):
    garbage = tmp_path / "results.txt"
    garbage.write_text("garbage\n")
    code, out, err = verify_cli(garbage, process=True)
    assert code == 2 and out == ""
    assert f"{garbage}: not judged: not an output of nccl-tests" in err and "nothing judged" in err


def test_an_empty_directory_exits_2(tmp_path):
    assert verify_cli(tmp_path)[0] == 2


def test_a_healthy_2_node_all_reduce_passes_with_its_nodes_named():
    code, out, err = verify_cli(HEALTHY, fmt="json", process=True)
    assert code == 0, err
    assert results(out) == [("nccl-all_reduce-nodes", "ip-10-1-0-11,ip-10-1-0-12", "PASS", 479.71)]


def test_a_slow_2_node_all_reduce_fails_and_exits_1():
    code, out, _ = verify_cli(SLOW, process=True)
    assert code == 1
    assert [line.split()[:4] for line in out.splitlines() if line.startswith("FAIL")] == \
        [["FAIL", "gpu", "nccl-all_reduce-nodes", "ip-10-1-0-11,ip-10-1-0-12"]]


def test_a_dcgm_failure_exits_1_and_a_pass_0():
    """dcgmi does not print its host: the NODE says so and names the file, not as a host. The
    passing JSON (DCGM 3) names no GPU either: a WARN, which exits 0."""
    code, out, _ = verify_cli(DCGM_FAIL, fmt="json")
    assert code == 1 and results(out) == [("dcgm", f"unknown node ({DCGM_FAIL.name})", "FAIL", None)]
    code, out, _ = verify_cli(DCGM_PASS, fmt="json")
    assert code == 0 and results(out) == [("dcgm", f"unknown node ({DCGM_PASS.name})", "WARN", None)]
    (row,) = [r for g in json.loads(out)["groups"].values() for r in g["results"] if r["test"] == "dcgm"]
    assert row["source"] == str(DCGM_PASS)
    code, out, _ = verify_cli(DCGM_FAIL)
    (line,) = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert line.split()[3:5] == ["unknown", "node"]


def test_fio_text_is_read():
    result = verify.parse(FIO_TEXT.read_text())
    assert result.complete and result.read_bw == 0 and result.write_bw == pytest.approx(2950 * 1024 ** 2)
    assert result.jobs == (verify.FioJob("fmcluster", 8, 0.0, 0.0, 0.0, 0.0, 0, 0),)
    assert not verify.parse_fio_text(FIO_TEXT.read_text().split("Run status")[0]).complete


def test_a_directory_is_read_recursively_and_mixes_plain_and_kit_files(tmp_path):
    (tmp_path / "nccl" / "2-nodes").mkdir(parents=True)
    shutil.copy(HEALTHY, tmp_path / "nccl" / "2-nodes" / "all_reduce.log")
    (tmp_path / "fsx").mkdir()
    shutil.copy(FIO_TEXT, tmp_path / "fsx" / "fio.txt")  # the file system from the path: fio's text has none
    (tmp_path / "scratch").mkdir()
    shutil.copy(FIO_JSON, tmp_path / "scratch" / "ip-10-1-0-11.json")
    # the kit's grouped form: the dcgm job's file, one part per node of the group's 16
    hosts = [f"ip-10-1-0-{i}" for i in range(11, 27)]
    (tmp_path / "gpu-dcgm-7.out").write_text("".join(jobs.MARKER.format(node=host, group="gpu", test="dcgm") + "\n"
                                                     + DCGM_PASS.read_text() for host in hosts))
    (tmp_path / "notes.md").write_text("# what we ran\n")
    code, out, err = verify_cli(tmp_path, fmt="json")
    assert code == 0, err
    assert sorted(results(out)) == sorted([
        ("nccl-all_reduce-nodes", "ip-10-1-0-11,ip-10-1-0-12", "PASS", 479.71),
        ("fio-fsx-write", "all", "PASS", 3093.3),
        ("fio-scratch-write", "unknown node (ip-10-1-0-11.json)", "PASS", 192.6),
        # the hosts from the kit's markers; DCGM 3's JSON names no GPU
        *[("dcgm", host, "WARN", None) for host in hosts],
    ])
    assert json.loads(out)["not_judged"] == [
        {"file": str(tmp_path / "notes.md"), "reason": "a Markdown note (.md): a source, kit or note file, "
                                                       "not a result"}]
    # one failing result among them: exit 1
    shutil.copy(SLOW, tmp_path / "nccl" / "slow.log")
    assert verify_cli(tmp_path)[0] == 1


def test_nccl_without_its_rank_lines_is_not_judged():
    code, out, err = verify_cli(TABLE_ONLY)
    assert code == 2 and "'# Rank' lines" in err


def test_runs_one_after_the_other_in_one_log_are_each_judged(tmp_path):
    """A job that ran all_reduce_perf twice into one file: the slow second run is not hidden by the
    first, nor the first by the second."""
    log = tmp_path / "nccl.log"
    command = "+ srun --mpi=pmix /opt/nccl-tests/build/all_reduce_perf -b 1M -e 16G -f 2 -g 1\n"
    log.write_text(command + HEALTHY.read_text() + command + SLOW.read_text())
    code, out, _ = verify_cli(log, fmt="json")
    assert code == 1
    assert sorted(results(out)) == [("nccl-all_reduce-nodes", "ip-10-1-0-11,ip-10-1-0-12", "FAIL", 91.97),
                                    ("nccl-all_reduce-nodes", "ip-10-1-0-11,ip-10-1-0-12", "PASS", 479.71)]
    # a run cut short after a complete one is a run of its own, truncated: a FAIL
    log.write_text(HEALTHY.read_text() + SLOW.read_text().split("# Out of bounds")[0])
    code, out, _ = verify_cli(log, fmt="json")
    assert code == 1 and [r[2] for r in sorted(results(out))] == ["FAIL", "PASS"]


@pytest.mark.parametrize("spec, group", [("examples/p6-b200-hyperpod-slurm.yaml", "eval"),  # B200 and H100 groups
                                         ("examples/p5-hyperpod-eks.yaml", "train")])  # 8 and 1 H100 a node
def test_on_several_gpu_groups_nccl_finds_its_group_and_the_rest_is_not_judged(spec, group):
    code, out, err = verify_cli(HEALTHY, DCGM_PASS, fmt="json", spec=spec, process=True)
    assert code == 0, err
    judged = [(g, r["test"]) for g, rows in json.loads(out)["groups"].items() for r in rows["results"]
              if r["measured"] is not None]
    assert judged == [(group, "nccl-all_reduce-nodes")]
    assert f"{DCGM_PASS}: not judged: a dcgm output without the kit's marker, and the cluster has 2 GPU groups" \
        in err


def test_the_text_table_fits_100_columns():
    """Real outputs give long notes and host lists: the notes go under their rows, a host list
    wraps after a comma."""
    code, out, _ = verify_cli(REAL, PLAIN)
    assert code == 1
    lines = out.splitlines()
    assert max(map(len, lines)) <= 100
    assert lines[0].split() == ["VERDICT", "GROUP", "TEST", "NODE", "MEASURED", "PASS", "AT"]
    wrapped = next(i for i, line in enumerate(lines) if "nccl-tests-efa-16-worker-0," in line)
    assert lines[wrapped].split()[-4:] == ["nccl-tests-efa-16-worker-0,", "43.8", "GB/s", "340"]
    assert lines[wrapped + 1].strip() == "nccl-tests-efa-16-worker-1"
    # the files not judged in a section of their own, each named with why, not as rows of group "-"
    assert not any(line.startswith(("WARN     -", "FAIL     -")) for line in lines)
    section = lines[lines.index("NOT JUDGED (7 files)"):-1]
    assert f"  {REAL / 'PROVENANCE.md'}" in section and f"  {TABLE_ONLY}" in section
    assert "    an nccl-tests output without its '# Rank' lines: it does not say whether it ran on one node or" \
        in section


@pytest.mark.parametrize("spec, source", [(SPEC, "smoke.py"), ("examples/p5-hyperpod-eks.yaml", "kit.yaml")])
def test_the_kit_s_own_files_are_not_judged(tmp_path, spec, source):
    """`fmcluster jobs` then `fmcluster verify` on the kit's directory: its smoke.py (which prints
    the smoke test's lines; on Kubernetes folded into kit.yaml), scripts, manifests, README and
    expected.json are listed as not judged, never a FAIL; the results beside them are judged. Their
    content alone (renamed, without the #! line) is no result either."""
    kit = tmp_path / "acc"
    assert fmcluster_cli("jobs", spec, "-o", str(kit))[0] == 0
    sources = sorted(str(p) for p in kit.rglob("*") if p.is_file())
    assert str(kit / source) in sources and str(kit / "expected.json") in sources
    assert "fmcluster-smoke ok world_size" in (kit / source).read_text()

    code, out, err = verify_cli(kit, fmt="json", spec=spec)
    assert code == 2, err
    report = json.loads(out)
    assert report["verdict"] is None and report["judged"] == 0
    assert sorted(entry["file"] for entry in report["not_judged"]) == sources
    assert not [r for g in report["groups"].values() for r in g["results"] if r["verdict"] == "FAIL"]
    (kit / "results").mkdir()
    shutil.copy(HEALTHY, kit / "results" / "gpu-nccl-7.out")
    code, out, _ = verify_cli(kit, spec=spec)
    assert code == 0 and "FAIL" not in out and "  " + str(kit / source) in out.splitlines()
    assert results(verify_cli(kit, fmt="json", spec=spec)[1]) == [
        ("nccl-all_reduce-nodes", "ip-10-1-0-11,ip-10-1-0-12", "PASS", 479.71)]
    bare = tmp_path / "bare"
    bare.mkdir()
    for path in map(Path, sources):
        text = path.read_text()
        name = path.relative_to(kit).as_posix().replace("/", "-") + ".txt"
        (bare / name).write_text(text.split("\n", 1)[1] if text.startswith("#!") else text)
    code, out, err = verify_cli(bare, spec=spec)
    assert code == 2 and out == "" and err.count(": not judged: not an output of") == len(sources), err


def test_a_note_that_mentions_the_tools_is_not_judged(tmp_path):
    """The fixtures' PROVENANCE.md names dcgmi's `Successfully ran diagnostic for group.`, nccl-tests'
    and fio's lines in its prose: not a result, as a note or under any other name."""
    for note in (REAL / "PROVENANCE.md", PLAIN / "PROVENANCE.md"):
        code, out, err = verify_cli(note)
        assert (code, out) == (2, "") and "not judged: a Markdown note" in err
        renamed = tmp_path / (note.parent.name + "-notes.txt")
        renamed.write_text(note.read_text())
        code, out, err = verify_cli(renamed)
        assert (code, out) == (2, "") and f"{renamed}: not judged: not an output of" in err, out
    assert "`Successfully ran diagnostic for group.`" in (REAL / "PROVENANCE.md").read_text()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_or_socket_in_the_results_is_not_opened(tmp_path):
    """A FIFO blocks whoever opens it until a writer comes: it, a socket and the like are listed,
    not opened (the timeout only stops a hung run)."""
    import socket

    shutil.copy(HEALTHY, tmp_path / "all_reduce.log")
    os.mkfifo(tmp_path / "pipe")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock"))
        code, out, err = verify_cli(tmp_path, fmt="json", process=True)
        assert code == 0, err
        assert json.loads(out)["not_judged"] == [
            {"file": str(tmp_path / "pipe"), "reason": "a FIFO, not a regular file: not opened"},
            {"file": str(tmp_path / "sock"), "reason": "a socket, not a regular file: not opened"}]
        code, out, err = verify_cli(tmp_path / "pipe", fmt="json", process=True)
        assert code == 2 and json.loads(out)["not_judged"][0]["reason"].startswith("a FIFO")


def test_a_file_over_the_size_bound_is_not_read(tmp_path):
    big = tmp_path / "huge.log"
    big.write_text(HEALTHY.read_text())
    with big.open("r+b") as handle:
        handle.truncate(verify.MAX_RESULT_BYTES + 1)  # sparse: no disk used
    code, out, err = verify_cli(big, fmt="json")
    assert code == 2, err
    assert json.loads(out)["not_judged"] == [
        {"file": str(big), "reason": "64.0 MiB, over the 64 MiB a result is read to: not read"}]


def test_json_is_printed_whatever_the_exit_code(tmp_path):
    """--format json: the one object on stdout when nothing is judged (2) and when a file cannot be
    read, with the files not judged and why; the verdict null where nothing was judged."""
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("garbage\n")
    code, out, err = verify_cli(garbage, fmt="json")
    report = json.loads(out)
    assert code == 2 and report["verdict"] is None and report["judged"] == 0
    assert report["not_judged"] == [{"file": str(garbage), "reason": "not an output of nccl-tests (*_perf), "
                                     "dcgmi diag, fio (JSON or text) or the kit's smoke test"}]
    code, out, err = verify_cli(tmp_path / "missing.out", fmt="json")
    report = json.loads(out)
    assert code == 2 and report["verdict"] is None and report["error"].startswith("cannot read")
    # judged and not judged together: the rows hold results only, the rest is in not_judged
    code, out, _ = verify_cli(HEALTHY, garbage, fmt="json")
    report = json.loads(out)
    assert code == 0 and report["verdict"] == "WARN" and report["judged"] == 1
    assert list(report["groups"]) == ["gpu"] and [e["file"] for e in report["not_judged"]] == [str(garbage)]


def test_a_plain_smoke_output_names_its_host(tmp_path):
    log = tmp_path / "smoke.log"
    log.write_text("".join(f"[default0]:fmcluster-smoke step={i} loss={1.5 - i / 10} tokens_per_s=1000.0 "
                           f"host=ip-10-1-0-11 rank=0\n" for i in range(1, 4))
                   + "[default0]:fmcluster-smoke ok world_size=128 steps=3\n")
    code, out, err = verify_cli(log, fmt="json")
    assert code == 0, err
    assert results(out) == [("smoke", "ip-10-1-0-11", "PASS", 1000.0)]


def test_a_part_not_judged_of_a_judged_file_is_listed_and_a_job_s_own_lines_are_not(tmp_path):
    log = tmp_path / "nccl.log"
    log.write_text("+ module load nccl-tests\n" + HEALTHY.read_text() + TABLE_ONLY.read_text())
    code, out, _ = verify_cli(log, fmt="json")
    report = json.loads(out)
    assert code == 0 and report["judged"] == 1
    assert report["not_judged"] == [{"file": str(log), "reason": "a part of it: an nccl-tests output without its "
                                     "'# Rank' lines: it does not say whether it ran on one node or several"}]
    log.write_text("+ module load nccl-tests\n" + HEALTHY.read_text())
    assert json.loads(verify_cli(log, fmt="json")[1])["not_judged"] == []


def test_without_nccl_info_lines_a_figure_only_efa_carries_is_evidence_of_efa():
    """A healthy 2 x p5 run at 362 GB/s with no NCCL_DEBUG=INFO lines. On HyperPod's nodes the one
    ENA interface is on card 0 (100 Gbps), so TCP could carry at most 23.4 GB/s of busbw: the
    figure is EFA's. On PCS's nodes every EFA card's `efa` interface carries ENA too: the figure
    does not tell, a WARN as before."""
    code, out, err = verify_cli(NO_DEBUG, fmt="json", spec="examples/p5-hyperpod-eks.yaml")
    assert code == 0, err
    (row,) = [r for r in json.loads(out)["groups"]["train"]["results"] if r["measured"] is not None]
    assert (row["test"], row["verdict"], row["measured"]) == ("nccl-all_reduce-nodes", "PASS", 362.1)
    assert row["note"].startswith("EFA inferred, the output has no NCCL INFO lines: 362.1 GB/s is above 23.4 GB/s")
    code, out, _ = verify_cli(NO_DEBUG, fmt="json")
    assert code == 0 and results(out) == [("nccl-all_reduce-nodes", "ip-10-1-0-21,ip-10-1-0-22", "WARN", 362.1)]


def test_an_impossible_figure_fails_and_says_why(tmp_path):
    log = tmp_path / "all_reduce-node.log"
    log.write_text(ONE_NODE.read_text().replace("478.97", "1992.40"))
    code, out, _ = verify_cli(ONE_NODE, log, fmt="json")
    assert code == 1
    found = {r["source"]: r for g in json.loads(out)["groups"].values() for r in g["results"] if r["source"]}
    assert found[str(ONE_NODE)]["verdict"] == "PASS" and found[str(ONE_NODE)]["impossible_above"] == 866.25
    assert found[str(log)]["verdict"] == "FAIL"
    assert found[str(log)]["note"].startswith("impossible: 1,992.4 GB/s is above 787.5 GB/s, the most NVLink can "
                                              "carry (p5.48xlarge: H100 at 900 GB/s NVLink per GPU")



def test_a_long_unknown_node_breaks_after_a_slash_in_its_column():
    """"unknown node (FILE)" with a long path wraps in the NODE column after a `/`, the columns
    after it aligned on the row's first line, within 100 columns."""
    from fmcluster.kits.verify.judging import Verdict
    from fmcluster.kits.verify.report import Row, VerifyReport, render_text

    node = "unknown node (/results/2026-01-19/storage/ip-10-1-0-11.us-west-2.compute.internal/scratch-write.json)"
    rows = (Row("gpu", "fio-scratch-write", node, Verdict.PASS, 192.6, 100.0, unit="GB/s"),
            Row("gpu", "smoke", "ip-10-1-0-11", Verdict.PASS))
    lines = render_text(VerifyReport("c", rows, judged=1)).splitlines()
    assert max(map(len, lines)) <= 100
    at = lines[0].index("MEASURED")
    assert lines[1][at:].split() == ["192.6", "GB/s", "100"] and lines[-2][at:].split() == ["-", "-"]
    column = lines[0].index("NODE")
    assert "".join(line[column:at].strip() for line in lines[1:-2]) == node
    assert all(line[column:at].rstrip().endswith(("/", "(")) for line in lines[1:-3])

def test_every_row_names_its_file(tmp_path):
    """In the text, a `file:` line under each row (after its wrapped hosts), in the JSON `source`;
    the rows of no file (a test not run) name none."""
    shutil.copy(ONE_NODE, tmp_path / "node-a.log")
    shutil.copy(HEALTHY, tmp_path / "nodes.log")
    shutil.copy(DCGM_FAIL, tmp_path / "dcgm.txt")
    code, out, _ = verify_cli(tmp_path)
    assert code == 1
    lines = out.splitlines()
    for test, name in (("nccl-all_reduce-node ", "node-a.log"), ("nccl-all_reduce-nodes", "nodes.log"),
                       ("dcgm ", "dcgm.txt")):
        at = next(i for i, line in enumerate(lines) if line.split()[2:3] == [test.strip()] and "-" not in
                  line.split()[3:4])
        under = next(line for line in lines[at + 1:] if line.startswith("    "))
        assert under == f"    file: {tmp_path / name}", (test, lines[at:at + 4])
    not_run = next(i for i, line in enumerate(lines) if line.startswith("WARN     gpu    smoke"))
    assert not lines[not_run + 1].startswith("    file:")
    code, out, _ = verify_cli(tmp_path, fmt="json")
    sources = {r["test"]: r["source"] for r in json.loads(out)["groups"]["gpu"]["results"]}
    assert sources["nccl-all_reduce-node"] == str(tmp_path / "node-a.log") and sources["smoke"] == ""
    assert sources["dcgm"] == str(tmp_path / "dcgm.txt")
