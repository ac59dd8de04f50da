"""`fmcluster jobs`: the acceptance kit of every Slurm example, its scripts shellchecked, their
#SBATCH options held to the model, the expected figures to fmcluster.model.expected, and the script
parts that run on the login node (the regrouping of per-node output) run for real. The
Kubernetes kits: tests/kits/test_jobs_kubernetes.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fmcluster.cli import main as cli
from fmcluster.kits import common, jobs, verify
from fmcluster.model import expected
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from tests.support import fake_slurm
from tests.support.fake_slurm import relocated
from tests.support.paths import EXAMPLES_DIR, ROOT

SLURM_EXAMPLES = sorted(p.relative_to(ROOT).as_posix() for p in (EXAMPLES_DIR).glob("*.yaml")
                        if loader.load(p).spec.orchestrator.type in jobs.SLURM_PLANES)
SHELLCHECK = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")


def model_of(example):
    return resolve(loader.load(ROOT / example).spec)


def kit_groups(model):
    """The GPU groups the default kit (run as the first team, where there are teams) has jobs for."""
    return common.kit_groups(model, model.teams[0] if model.teams else None)[0]


def sbatch_options(text: str) -> dict[str, str]:
    return dict(re.findall(r"^#SBATCH --([a-z-]+)(?:=(\S+))?$", text, re.MULTILINE))


@pytest.fixture(scope="module", params=SLURM_EXAMPLES)
def kit(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("kit")
    assert cli(["jobs", request.param, "-o", str(out)]) == 0
    return model_of(request.param), out


def test_every_gpu_group_gets_its_four_jobs(kit):
    model, out = kit
    groups = [g.name for g in kit_groups(model)]
    assert groups
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == sorted(
        [".fmcluster-kit", "README.md", "expected.json", "image/Dockerfile", "placement.sh", "smoke.py",
         "submit-all.sh"]
        + [f"{g}/{t}.sbatch" for g in groups for t in ("dcgm", "fio", "nccl", "smoke")])
    assert all((out / f"{g}/nccl.sbatch").stat().st_mode & 0o111 for g in groups)


def test_scripts_pass_shellcheck(kit):
    _, out = kit
    scripts = [*map(str, out.glob("*/*.sbatch")), str(out / "submit-all.sh"), str(out / "placement.sh")]
    result = subprocess.run([SHELLCHECK, "--shell=bash", *scripts], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_sbatch_options_follow_the_spec(kit):
    model, out = kit
    for group in kit_groups(model):
        for test in ("dcgm", "fio", "nccl", "smoke"):
            options = sbatch_options((out / f"{group.name}/{test}.sbatch").read_text())
            assert options["partition"] == group.name  # a partition per node group
            assert options["nodes"] == str(group.max_count)
            assert "exclusive" in options
            assert options["output"] == "results/%x-%j.out"
            tasks = group.gpus if test == "nccl" else 1
            assert options["ntasks-per-node"] == str(tasks)


def test_nccl_runs_inside_each_node_and_across_all_nodes(kit):
    model, out = kit
    for group in kit_groups(model):
        text = (out / f"{group.name}/nccl.sbatch").read_text()
        assert "for op in all_reduce all_gather reduce_scatter; do" in text
        assert f"--ntasks={group.gpus} --nodelist=\"$host\"" in text
        assert f"-e {common.largest_message(group)}" in text
        assert "source /etc/profile.d/fmcluster-nccl.sh" in text  # the node's EFA / NCCL environment
        assert '--container-image="$IMAGE"' in text


def test_expected_figures_are_the_models(kit):
    model, out = kit
    written = json.loads((out / "expected.json").read_text())
    names = {g.name for g in kit_groups(model)}
    assert written == {g: {t: e.as_dict() for t, e in tests.items()}
                       for g, tests in expected.expectations(model).items() if g in names}


def test_smoke_script_compiles(kit):
    _, out = kit
    compile((out / "smoke.py").read_text(), "smoke.py", "exec")


def test_expected_figures_come_from_the_catalog():
    p5 = expected.expectations(model_of("examples/p5-pcs.yaml"))["gpu"]
    assert p5["nccl-all_reduce-nodes"].peak == 400  # 3,200 Gbps of EFA
    assert p5["nccl-all_reduce-nodes"].pass_at == 340 and p5["nccl-all_reduce-nodes"].warn_at == 240
    assert p5["nccl-all_reduce-node"].peak == 450  # NVLink 4: 900 GB/s both ways
    assert p5["fio-fsx"].peak == pytest.approx(1171.875)  # 4,800 GiB at 250 MB/s/TiB
    assert p5["fio-scratch"].peak is None and p5["dcgm"].peak is None
    gb200 = expected.expectations(model_of("examples/p6e-gb200-pcs.yaml"))["gb200"]
    assert gb200["nccl-all_reduce-nodes"].peak == 900  # one UltraServer: NVLink, not EFA
    assert "one UltraServer" in gb200["nccl-all_reduce-nodes"].basis


def test_an_unwritable_directory_is_an_error_not_a_traceback(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert cli(["jobs", "examples/p5-pcs.yaml", "-o", str(blocker / "kit")]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_regroup_keeps_each_nodes_lines_together(tmp_path):
    """The per-node steps' output, as `srun --label` interleaves it, regrouped under markers."""
    model = model_of("examples/p5-pcs.yaml")
    script = jobs.dcgm_sbatch(model, model.node_groups[0])
    function = script[script.index("regroup() {"):script.index("\n}\n", script.index("regroup() {")) + 3]
    interleaved = "\n".join(["  0: fmcluster-host ip-10-0-0-1", " 1: fmcluster-host ip-10-0-0-2", "  1: b1",
                             "  0: a1", "  1: b2", "stray line", "  0: a2", ""])
    result = subprocess.run(["bash", "-c", f'GROUP=gpu\n{function}\nregroup dcgm'], input=interleaved,
                            capture_output=True, text=True, check=True)
    assert result.stdout == ("==> fmcluster node=ip-10-0-0-1 group=gpu test=dcgm <==\na1\na2\n"
                             "==> fmcluster node=ip-10-0-0-2 group=gpu test=dcgm <==\nb1\nb2\n"
                             "==> fmcluster node=all group=gpu test=dcgm <==\nstray line\n")


def test_readme_shows_real_jobs_output(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli(["jobs", str(ROOT / "examples/p5-pcs.yaml"), "-o", "acceptance"]) == 0
    printed = capsys.readouterr().out
    readme = (ROOT / "docs" / "acceptance.md").read_text()
    assert f"$ fmcluster jobs examples/p5-pcs.yaml -o acceptance\n{printed}```" in readme


# ---------------------------------------------------------------------------------------------
# fio.sbatch, run: stand-ins for srun / hostname (tests/support/fake_slurm.py), fio real where installed

FIO = shutil.which("fio")
FIO_RECORDER = r'''#!/bin/bash
# stand-in fio: records its arguments, writes nothing, prints a small JSON report
printf '%s\n' "$FAKE_HOSTNAME $*" >>"$FAKE_SLURM_DIR/fio.log"
echo '{"fio version": "fio-3.33", "jobs": [{"jobname": "fmcluster", "groupid": 0, "error": 0,
  "read": {"bw_bytes": 1000000}, "write": {"bw_bytes": 1000000}}]}'
'''
# the real fio, and after each run the files of its directory (inode, size, name) in a file of its own
FIO_WATCHER = r'''#!/bin/bash
FIO_BIN "$@"; rc=$?
for a in "$@"; do case $a in --directory=*) d=${a#*=} ;; --rw=*) rw=${a#*=} ;; esac; done
log=$(mktemp "$FAKE_SLURM_DIR/fio-run.XXXXXX")
{ echo "$rw $d"; find "$d" -type f -printf '%i %s %f\n' | sort; } >"$log"
exit "$rc"
'''


def fio_args(line: str) -> dict[str, str]:
    return dict(re.findall(r"--([a-z_]+)=(\S+)", line))


@pytest.mark.parametrize("example", SLURM_EXAMPLES)
def test_fio_writes_a_small_share_of_each_file_system_and_reads_the_same_files(example, tmp_path):
    """Every fio command line the job runs, on every node: fio's --size is per job, so a node writes
    size x numjobs; on the shared file system all nodes write at once. Together at most
    FIO_FRACTION (10%) of the capacity (the Lustre file system's; the instance store of the node
    type, from the catalog), at most FIO_MAX_JOB_MIB a job; the read pass the write pass's files."""
    model = model_of(example)
    for group in expected.gpu_groups(model):
        root = tmp_path / group.name
        root.mkdir()
        hosts = [f"{group.name}-{i}" for i in range(1, group.max_count + 1)]
        script = relocated(jobs.fio_sbatch(model, group), model, group, root)
        result = fake_slurm.run_batch(script, root, hosts, extra={"fio": FIO_RECORDER}, env={"IMAGE": "docker://x"})
        assert result.returncode == 0, result.stdout
        calls = [(line.split(" ", 1)[0], fio_args(line)) for line in (root / "fio.log").read_text().splitlines()]
        lustre = model.spec.storage.lustre
        capacities = {"fio-fsx": (lustre.storage_capacity_gib if lustre else 0, len(hosts)),
                      "fio-scratch": (group.instance.nvme_total_gb * 1e9 / 2 ** 30, 1)}
        for test, (capacity, sharing) in capacities.items():
            runs = [(host, a) for host, a in calls if f"/{test}/" in a["directory"]]
            if not capacity:
                assert not runs
                continue
            writes = [a for _, a in runs if a["rw"] == "write"]
            reads = [a for _, a in runs if a["rw"] == "read"]
            assert sorted(h for h, a in runs if a["rw"] == "write") == sorted(hosts)  # every node, once
            # the read pass: the same files as the write pass (name, directory, size, job count)
            same = ("name", "directory", "size", "numjobs")
            assert sorted(tuple(a[k] for k in same) for a in reads) == sorted(tuple(a[k] for k in same) for a in writes)
            per_node = [int(a["size"].removesuffix("M")) * int(a["numjobs"]) / 1024 for a in writes]
            assert all(int(a["size"].removesuffix("M")) <= common.FIO_MAX_JOB_MIB for a in writes)
            # on the shared file system all nodes at once; on /scratch each node its own disks
            written = sum(per_node) if sharing > 1 else max(per_node)
            assert 0 < written <= common.FIO_FRACTION * capacity, (test, written, capacity)
        # nothing of the job's is left; the directory the jobs make theirs in stays (another may be making its own)
        assert [p.name for p in root.glob("fio-*/fmcluster-fio/*")] == [], "the job's files are left behind"


@pytest.mark.skipif(FIO is None, reason="fio is not installed (apt-get install fio)")
def test_fio_real_runs_read_back_what_they_wrote_and_delete_it(tmp_path):
    """The job's fio command lines, run for real at 2 MiB a job on two 'nodes': the read pass
    finds the write pass's files (the same inodes, no new file laid out), and nothing is left."""
    model = model_of("examples/p5-pcs.yaml")
    group = model.node_groups[0]
    script = relocated(jobs.fio_sbatch(model, group), model, group, tmp_path, mib=2)
    watcher = FIO_WATCHER.replace("FIO_BIN", FIO)
    result = fake_slurm.run_batch(script, tmp_path, ["gpu-1", "gpu-2"], extra={"fio": watcher},
                                  env={"IMAGE": "docker://x"})
    assert result.returncode == 0, result.stdout
    runs: dict[tuple[str, str], list[str]] = {}
    for log in tmp_path.glob("fio-run.*"):
        head, *files = log.read_text().splitlines()
        rw, directory = head.split(" ", 1)
        runs[(rw, directory)] = files
    directories = {d for _, d in runs}
    assert len(directories) == 4  # fio-fsx and fio-scratch, each node
    for directory in directories:
        written = runs[("write", directory)]
        assert len(written) == common.FIO_JOBS and all(f.split()[1] == str(2 * 2 ** 20) for f in written)
        assert runs[("read", directory)] == written, directory  # the same files, nothing laid out
    report = verify.split_by_node(result.stdout)
    assert sorted((p.host, p.test) for p in report) == sorted(
        (h, t) for h in ("gpu-1", "gpu-2") for t in ("fio-fsx", "fio-scratch"))
    assert all(verify.parse_fio(p.text).complete and verify.parse_fio(p.text).read_bw > 0 for p in report)
    assert not list(tmp_path.glob("fio-*/fmcluster-fio/*")), "the job's files are left behind"  # the parent stays


def test_fio_cancelled_mid_run_deletes_its_files(tmp_path):
    """scancel / the time limit: SIGTERM to every process of the job while fio writes; each node's
    files and the job's directory are deleted all the same."""
    model = model_of("examples/p5-pcs.yaml")
    group = model.node_groups[0]
    script = relocated(jobs.fio_sbatch(model, group), model, group, tmp_path, mib=1)
    slow = ('#!/bin/bash\nfor a in "$@"; do case $a in --directory=*) d=${a#*=} ;; esac; done\n'
            'touch "$d/fmcluster.0.0"; echo started >>"$FAKE_SLURM_DIR/started"; sleep 60\n')
    result = fake_slurm.run_batch(script, tmp_path, ["gpu-1", "gpu-2"], extra={"fio": slow},
                                  env={"IMAGE": "docker://x"}, signal_after=3, timeout=30)
    assert (tmp_path / "started").read_text().count("started") == 2
    assert result.returncode != 0
    assert not list(tmp_path.glob("fio-*/fmcluster-fio/*")), sorted(map(str, tmp_path.glob("fio-*/**/*")))
