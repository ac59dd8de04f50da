"""`fmcluster verify SPEC RESULTS...` on what users have: plain outputs of nccl-tests, dcgmi diag and
fio (recognized by their content), alone, in a directory, or mixed with the kit's grouped files; run
as a user runs it, `python -m fmcluster verify`, for each exit code.

Fixtures: tests/data/verify-plain/ (written after NVIDIA/nccl-tests' src/common.cu and fio's normal
report, see its PROVENANCE.md) and the real outputs of tests/data/verify/."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from fmcluster.kits import jobs, verify
from tests.support.paths import DATA, ROOT

PLAIN = DATA / "verify-plain"
REAL = DATA / "verify"
SPEC = "examples/p5-pcs.yaml"  # group gpu: 16 x p5.48xlarge (EFA: PASS from 340 GB/s, FAIL below 240), /fsx
HEALTHY = PLAIN / "nccl-all_reduce-2x-p5-healthy.txt"
SLOW = PLAIN / "nccl-all_reduce-2x-p5-slow.txt"
FIO_TEXT = PLAIN / "fio-write-fsx-8-jobs.txt"
FIO_JSON = REAL / "fio-write-virtualclient-fio-3.26.json"
DCGM_PASS = REAL / "dcgm-diag-r2-virtualclient.json"
DCGM_FAIL = REAL / "dcgm-diag-r3-8x-h100-fail.txt"
TABLE_ONLY = REAL / "nccl-all_reduce-2x-p5-slurm-srun-label-table-only.txt"


def verify_cli(*results, fmt="text"):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "fmcluster", "verify", SPEC, *map(str, results), "--format", fmt],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


def results(stdout):
    return [(r["test"], r["node"], r["verdict"], r["measured"]) for g in json.loads(stdout)["groups"].values()
            for r in g["results"] if r["note"] != "no result: not run"]


def test_garbage_is_not_judged_and_exits_2(tmp_path):
    garbage = tmp_path / "results.txt"
    garbage.write_text("garbage\n")
    code, out, err = verify_cli(garbage)
    assert code == 2 and out == ""
    assert f"{garbage}: not judged: not an output of nccl-tests" in err and "nothing judged" in err


def test_an_empty_directory_exits_2(tmp_path):
    assert verify_cli(tmp_path)[0] == 2


def test_a_healthy_2_node_all_reduce_passes_with_its_nodes_named():
    code, out, err = verify_cli(HEALTHY, fmt="json")
    assert code == 0, err
    assert results(out) == [("nccl-all_reduce-nodes", "ip-10-1-0-11,ip-10-1-0-12", "PASS", 479.71)]


def test_a_slow_2_node_all_reduce_fails_and_exits_1():
    code, out, _ = verify_cli(SLOW)
    assert code == 1
    assert [line.split()[:4] for line in out.splitlines() if line.startswith("FAIL")] == \
        [["FAIL", "gpu", "nccl-all_reduce-nodes", "ip-10-1-0-11,ip-10-1-0-12"]]


def test_a_dcgm_failure_exits_1_and_a_pass_0():
    code, out, _ = verify_cli(DCGM_FAIL, fmt="json")
    assert code == 1 and results(out) == [("dcgm", DCGM_FAIL.name, "FAIL", None)]
    code, out, _ = verify_cli(DCGM_PASS, fmt="json")
    assert code == 0 and results(out) == [("dcgm", DCGM_PASS.name, "PASS", None)]


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
    # the kit's grouped form: the dcgm job's file, one part per node
    marker = jobs.MARKER.format(node="ip-10-1-0-12", group="gpu", test="dcgm")
    (tmp_path / "gpu-dcgm-7.out").write_text(marker + "\n" + DCGM_PASS.read_text())
    (tmp_path / "notes.md").write_text("# what we ran\n")
    code, out, err = verify_cli(tmp_path, fmt="json")
    assert code == 0, err
    assert sorted(results(out)) == sorted([
        ("nccl-all_reduce-nodes", "ip-10-1-0-11,ip-10-1-0-12", "PASS", 479.71),
        ("fio-fsx-write", "all", "PASS", 3093.3),
        ("fio-scratch-write", "ip-10-1-0-11.json", "PASS", 192.6),
        ("dcgm", "ip-10-1-0-12", "PASS", None),
        ("-", "-", "WARN", None),  # notes.md
    ])
    assert f"{tmp_path / 'notes.md'}: not judged" in err and "all_reduce.log" not in err
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
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "fmcluster", "verify", spec, str(HEALTHY), str(DCGM_PASS),
                           "--format", "json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    judged = [(g, r["test"]) for g, rows in json.loads(done.stdout)["groups"].items() for r in rows["results"]
              if r["measured"] is not None]
    assert judged == [(group, "nccl-all_reduce-nodes")]
    assert f"{DCGM_PASS}: not judged: a dcgm output without the kit's marker, and the cluster has 2 GPU groups" \
        in done.stderr


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
    assert any(line.startswith("    not judged: ") for line in lines)
