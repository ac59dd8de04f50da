"""The Slurm kits on a real Slurm (issue 24), on a localhost cluster of every GPU group of the
example at full size, each group its partition with fmcluster's partition settings
(tests/support/slurm_cluster.py: Debian's slurmctld and slurmd): for every Slurm example, every batch script
of `fmcluster jobs` (the serving job's too) checked by `sbatch --test-only`; for FULL_RUNS, the kit
then submitted with its own submit-all.sh, every job run to completion, and what the jobs wrote
judged by `fmcluster verify`, which must PASS.

Real: Slurm (scheduling, srun steps across the nodes, --label, --exclusive, the batch
environment), the scripts, fio (files laid out, written and read back, direct I/O), Python. Stand-ins,
only for what a test machine lacks: the GPU tools (tests/support/gpu_standins: nccl-tests' binaries, dcgmi,
torchrun with a torch stand-in under the kit's real smoke.py, hostname answering the Slurm node
name, since every slurmd shares one machine), Pyxis (tests/support/pyxis_standin: its options registered,
its import lines printed, its named containers kept in each node's Enroot data path on its /scratch,
which the stand-in `enroot` lists and removes, the task run on the host), and the nodes' /fsx and /scratch (directories
of the test, bound over those paths in slurmd's own mount namespace). fio runs for real at a
thousandth of the sizes the kit asks for (tests/support/gpu_standins/fio, which records what was asked).

The AWS PCS examples' scripts are checked on the Slurm releases PCS runs, from their roots as PCS
lays them out (auth/slurm: SlurmCluster's `release`, the Pyxis stand-in built against each
release's spank.h): every PCS example on 26.05, p5-pcs on 24.11 too (the others on 24.11 add
little and cost most: 24.11's slurmctld here now and then answers a request only after 5 s,
which the 18- and 32-node examples hit); the HyperPod example's on this machine's Debian Slurm
22.05 with munge, as HyperPod authenticates. The full runs stay on 22.05: their jobs run this machine's
Python, fio and stand-ins, which a release's root (a minimal Debian) has not. Left unverified
against PCS: PCS's own slurm.conf (only the partitions and the options the kits need are
configured here).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fmcluster.model import cluster as cluster_model
from fmcluster.model import expected
from fmcluster.spec import loader
from tests.support import slurm_roots
from tests.support.locks import host_directories
from tests.support.paths import EXAMPLES_DIR, ROOT, SUPPORT
from tests.support.slurm_cluster import PCS_RELEASES, SlurmCluster, release_id, require_slurm

STANDINS = SUPPORT / "gpu_standins"
PYXIS_STANDIN = SUPPORT / "pyxis_standin" / "spank_pyxis_standin.c"  # and its `enroot` next to it
ENROOT_DATA_PATH = "/scratch/enroot/data"  # each node's, as its enroot.conf puts it on the instance store
SLURM_EXAMPLES = sorted(p.name for p in (EXAMPLES_DIR).glob("*.yaml")
                        if cluster_model.resolve(loader.load(p).spec).control_plane.scheduler == "slurm")
PCS_EXAMPLES = [e for e in SLURM_EXAMPLES
                if cluster_model.resolve(loader.load(EXAMPLES_DIR / e).spec).control_plane.type == "pcs"]
# (example, release): PCS's examples on the newest release PCS runs, the reference one (p5-pcs) on
# every release; the others on this machine's Slurm (None)
CHECKED = [(e, r) for e in SLURM_EXAMPLES
           for r in ((PCS_RELEASES if e == "p5-pcs.yaml" else PCS_RELEASES[-1:]) if e in PCS_EXAMPLES else (None,))]
# The kit's mount points on a node (the example's mount_path, SCRATCH_PATH), and /kit, where the smoke
# job mounts the kit's directory inside its container (--container-mounts=$SLURM_SUBMIT_DIR:/kit):
# with the tasks on the host, the test binds the kit there for every node instead.
NODE_PATHS = ("/fsx", "/scratch", "/kit")
FIO_SCALE = 1024  # fio writes a thousandth of what the kit asks (tests/support/gpu_standins/fio)


def build_pyxis(out: Path, release: str | None = None) -> Path:
    """The Pyxis stand-in, built with the real gcc against the spank.h of Debian's Slurm, or of
    `release` (its root's)."""
    require_slurm(release)
    include = Path("/usr/include") if release is None else slurm_roots.root(release) / "usr/include"
    if shutil.which("gcc") is None or not (include / "slurm/spank.h").exists():
        message = "the Pyxis stand-in needs gcc and libslurm-dev (make tools)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-shared",
                    *([] if release is None else [f"-I{include}"]), "-o", str(out), str(PYXIS_STANDIN)],
                   check=True, capture_output=True, text=True)
    return out


@pytest.fixture(scope="module")
def pyxis_standin(tmp_path_factory) -> Path:
    """The Pyxis stand-in for Debian's Slurm."""
    return build_pyxis(tmp_path_factory.mktemp("pyxis") / "spank_pyxis.so")


@pytest.fixture(scope="module")
def pyxis_of(tmp_path_factory):
    """release -> the Pyxis stand-in built for it (None: Debian's), each built once."""
    built: dict[str | None, Path] = {}

    def of(release: str | None) -> Path:
        if release not in built:
            built[release] = build_pyxis(tmp_path_factory.mktemp("pyxis") / "spank_pyxis.so", release)
        return built[release]

    return of


@pytest.fixture(scope="module")
def node_paths():
    """NODE_PATHS exist as mount points (empty; made when missing, removed when no worker holds
    them any more: tests.support.locks.host_directories), so each slurmd can bind the test's
    directories over them in its own namespace."""
    with host_directories(NODE_PATHS):
        yield


def kit(spec_path: Path, out: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "fmcluster", "jobs", str(spec_path), "-o", str(out)],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def example_cluster(tmp_path: Path, example: str | Path, pyxis: Path, kit_dir: Path,
                    release: str | None = None, extra: tuple[str, ...] = ()) -> tuple[SlurmCluster, dict]:
    """A localhost cluster of the example's GPU groups at full size, a partition each (named as the
    kit's), with the Pyxis stand-in, each node its own /scratch; and its groups' node names.
    `example`: an example's name, or a spec's path; `release`: Slurm of that AWS PCS release (the
    test's directory and the stand-in's visible); `extra`: more lines of slurm.conf."""
    resolved = cluster_model.resolve(loader.load(EXAMPLES_DIR / example).spec)
    groups = [g for g in resolved.node_groups if g.instance.gpu_count]
    members, first = {}, 1
    for group in groups:
        members[group.name] = [f"node{i}" for i in range(first, first + group.max_count)]
        first += group.max_count
    fsx = tmp_path / "fsx"
    fsx.mkdir()

    def node_scratch(node: str) -> dict[str, str]:
        """Each node its own /scratch (its instance store), where PMIx keeps its per-step directories
        too: several slurmd on one host would otherwise share /tmp/spmix_appdir_UID_JOB.STEP."""
        scratch = tmp_path / "scratch" / node
        (scratch / "pmix").mkdir(parents=True, exist_ok=True)
        return {"/scratch": str(scratch)}

    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "mpi.conf").write_text("PMIxCliTmpDirBase=/scratch/pmix\n")
    (tmp_path / "plugstack.conf").write_text(f"required {pyxis} record={tmp_path / 'pyxis.record'}\n")
    gpus = max(g.instance.gpu_count for g in groups)
    cluster = SlurmCluster(tmp_path / "slurm", first - 1, cpus=max(gpus, 2), gres=f"gpu:{gpus}",
                           extra=[f"PlugStackConfig={tmp_path}/plugstack.conf", "SlurmdParameters=config_overrides",
                                  "MpiDefault=none", *extra],
                           partitions=members, partition_settings={g.name: g.partition_settings for g in groups},
                           binds={"/fsx": str(fsx), "/kit": str(kit_dir)}, node_binds=node_scratch,
                           release=release, shared=(str(tmp_path), str(pyxis.parent)))
    return cluster, members


# aws on the nodes: STS answers the account of the node's role (ACCOUNT), ECR a token (the batch
# scripts name the reference image by it and give Enroot credentials: tests/kits/test_reference_image_kits.py)
ACCOUNT = "210987654321"
FAKE_AWS = f'''#!/bin/bash
case "$1 $2" in
  "sts get-caller-identity") echo {ACCOUNT} ;;
  "ecr get-login-password") echo ecr-token ;;
  *) exit 2 ;;
esac
'''


def kit_environment(cluster: SlurmCluster, tmp_path: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """What the operator's shell has (no IMAGE: the kit runs the reference image, as its README
    says) and the stand-ins first on PATH, a fake aws too; the nodes' Enroot data path."""
    aws = tmp_path / "aws-bin"
    aws.mkdir(exist_ok=True)
    (aws / "aws").write_text(FAKE_AWS)
    (aws / "aws").chmod(0o755)
    return {**cluster.env, "PATH": f"{STANDINS}:{PYXIS_STANDIN.parent}:{aws}:{os.environ['PATH']}",
            "ENROOT_DATA_PATH": ENROOT_DATA_PATH,  # the stand-ins' (Pyxis passes the job's environment to Enroot)
            "STANDIN_FIO_RECORD": str(tmp_path / "fio.record"), "STANDIN_FIO_SCALE": str(FIO_SCALE),
            "PYTHONDONTWRITEBYTECODE": "1", "NCCL_TESTS": str(STANDINS),
            "STANDIN_TORCH_DIR": str(tmp_path / "torchrun"),  # the torch stand-in's rendezvous, the test's own
            **(env or {})}


def check_scripts(cluster: SlurmCluster, kit_dir: Path, environment: dict[str, str]) -> None:
    """Every batch script of the kit (the serving job's too) through `sbatch --test-only`."""
    scripts = sorted(kit_dir.glob("*/*.sbatch"))
    assert scripts
    for script in scripts:
        checked = subprocess.run([cluster.client("sbatch"), "--test-only", script.relative_to(kit_dir).as_posix()],
                                 cwd=kit_dir, env=environment, capture_output=True, text=True, timeout=30)
        assert checked.returncode == 0 and "to start at" in checked.stderr, (script.name, checked.stderr)


@pytest.mark.parametrize(("example", "release"), CHECKED,
                         ids=[f"{example}-{release_id(release)}" for example, release in CHECKED])
def test_every_batch_script_of_every_slurm_kit_is_accepted(example, release, tmp_path, pyxis_of, node_paths):
    """sbatch --test-only of every script of the kit (and the serving job) on a cluster with every
    GPU group of the example at full size, each its partition with fmcluster's partition settings."""
    kit_dir = tmp_path / "kit"
    kit(EXAMPLES_DIR / example, kit_dir)
    cluster, _ = example_cluster(tmp_path, example, pyxis_of(release), kit_dir, release)
    with cluster:
        check_scripts(cluster, kit_dir, kit_environment(cluster, tmp_path))


def run_kit(tmp_path: Path, example: str, pyxis: Path, *, env: dict[str, str] | None = None):
    """The example's kit submitted with its submit-all.sh and every job waited for (each must
    complete): (the resolved model, the kit directory, the Pyxis stand-in's record, what was asked of
    fio, the groups' node names). The cluster is stopped."""
    resolved = cluster_model.resolve(loader.load(EXAMPLES_DIR / example).spec)
    kit_dir = tmp_path / "kit"
    kit(EXAMPLES_DIR / example, kit_dir)
    cluster, members = example_cluster(tmp_path, example, pyxis, kit_dir)
    environment = kit_environment(cluster, tmp_path, env)
    with cluster:
        check_scripts(cluster, kit_dir, environment)
        submitted = subprocess.run(["bash", "submit-all.sh"], cwd=kit_dir, env=environment, capture_output=True,
                                   text=True, timeout=60)
        assert submitted.returncode == 0, submitted.stderr
        jobs = [line.split()[-1] for line in submitted.stdout.splitlines() if line.startswith("Submitted batch job")]
        assert jobs
        for job in jobs:
            state = cluster.wait_job(job, timeout=300)
            assert state["JobState"] == "COMPLETED", (state, cluster.logs())
    return resolved, kit_dir, tmp_path / "pyxis.record", tmp_path / "fio.record", members


def verify(example: str, kit_dir: Path) -> subprocess.CompletedProcess:
    results = sorted(str(p) for p in (kit_dir / "results").glob("*"))
    return subprocess.run([sys.executable, "-m", "fmcluster", "verify", str(EXAMPLES_DIR / example), *results,
                           "--format", "json"], cwd=ROOT, capture_output=True, text=True)


# The kits run in full: the p5 PCS example (16 x p5.48xlarge, EFA across nodes) and the UltraServer
# one (18 x p6e-gb200.36xlarge, 4 GPUs a node, its partition exclusive); the others' scripts are
# held to sbatch --test-only above (each full run takes most of a minute on two cores).
# NCCL's bus bandwidth at the largest size (GB/s) inside a node and across nodes, the same for each
# collective: healthy figures of the type, within what its links carry for each (H100: NVLink 4,
# 450 GB/s a GPU and direction, inside; EFA's 400 GB/s a node across 16 nodes, at most 423 GB/s of
# busbw; GB200: NVLink 5, 900 GB/s a GPU and direction, inside and across the UltraServer's NVLink
# domain), and the GPUs' names as NVIDIA's driver gives them.
FULL_RUNS = {"p5-pcs.yaml": ("420", "380", "NVIDIA H100 80GB HBM3"),
             "p6e-gb200-pcs.yaml": ("830", "780", "NVIDIA GB200")}


@pytest.fixture(scope="module", params=sorted(FULL_RUNS))
def ran(request, tmp_path_factory, pyxis_standin, node_paths):
    """(example, run_kit's result) of a kit run at full node count, NCCL's figures healthy."""
    example = request.param
    node, nodes, gpu = FULL_RUNS[example]
    return example, run_kit(tmp_path_factory.mktemp(example.split(".")[0]), example, pyxis_standin,
                            env={"STANDIN_BUSBW_NODE": node, "STANDIN_BUSBW_NODES": nodes, "STANDIN_GPU": gpu})


def test_every_job_of_the_kit_completes_and_verify_passes(ran):
    """Every job completed on every node; verify judged every test of every group, and nothing
    failed or went unread: NCCL inside each node and across all, DCGM, fio, the smoke test (fio's
    /fsx total, this machine's disk against the file system's figure, only judged)."""
    example, (resolved, kit_dir, _, _, members) = ran
    result = verify(example, kit_dir)
    text = result.stdout
    report = json.loads(text)
    rows = {(group, row["test"], row["node"]): row for group, judged in report["groups"].items()
            for row in judged["results"]}
    # fio's /fsx total is this machine's one disk, shared by every slurmd, held against the
    # file system's figure: it is judged (measured, against the model's figure), but its verdict
    # is the test machine's, not the kit's, and is left out of the verdict here
    figures = expected.expectations(resolved)
    disk = [key for key in rows if key[1].startswith("fio-fsx-") and key[2] == "all"]
    assert disk, sorted(rows)
    for group, test, node in disk:
        row = rows[group, test, node]
        assert row["measured"] and row["pass_at"] == figures[group]["fio-fsx"].pass_at, row
    failed = [row for key, row in rows.items() if row["verdict"] == "FAIL" and key not in disk]
    assert not failed, failed
    assert result.returncode == (1 if any(rows[key]["verdict"] == "FAIL" for key in disk) else 0), result.stderr
    # only the kit's expected.json (submit-all.sh copies it into results/: the groups to expect) is no result
    assert [Path(entry["file"]).name for entry in report["not_judged"]] == ["expected.json"]
    for test in ("nccl-all_reduce-node", "nccl-all_reduce-nodes", "nccl-all_gather-nodes",
                 "nccl-reduce_scatter-nodes", "dcgm", "fio-fsx-write", "smoke"):
        assert f'"test": "{test}"' in text, test


def test_every_container_step_asked_for_the_kits_images(ran):
    """What Pyxis was asked, node by node of each step: each group's reference image (x86_64 on p5,
    arm64 on GB200) in the account the node's STS named everywhere but the smoke test's PyTorch
    image, on every node; the nccl and fio jobs' steps in the job's named container, imported once a
    node and job and reused by its other steps; the jobs' Enroot credentials gone."""
    _, (resolved, kit_dir, record, _, members) = ran
    lines = [dict(field.split("=", 1) for field in line.split("\t")[2:]) | {"step": line.split("\t")[0],
                                                                          "node": line.split("\t")[1]}
             for line in record.read_text().splitlines()]
    references = {resolved.reference_image(g).enroot_uri(ACCOUNT, resolved.spec.region)
                  for g in resolved.node_groups if g.name in members}
    assert len(references) == 1
    pytorch = "nvcr.io#nvidia/pytorch:25.01-py3"
    assert {fields["image"] for fields in lines} == references | {pytorch}
    assert {fields["node"] for fields in lines} == {node for nodes in members.values() for node in nodes}
    named: dict[tuple[str, str], list[str]] = {}  # (job, node) -> the setups of its steps, in order
    for fields in lines:
        job = fields["step"].split(".")[0]
        if fields["image"] == pytorch:
            assert (fields["name"], fields["setup"]) == ("", "import")
            continue
        assert fields["name"] == f"pyxis_fmcluster-kit-{job}", fields
        named.setdefault((job, fields["node"]), []).append(fields["setup"])
    assert named and all(setups[0] == "import" and set(setups[1:]) <= {"reuse"} for setups in named.values())
    assert max(len(setups) for setups in named.values()) == 6  # the nccl job: six steps a node, one import
    assert not any((kit_dir / ".enroot").iterdir())  # the directory stays, for the jobs that make theirs there


def test_fio_wrote_within_the_file_system_and_left_nothing(ran):
    """fio was asked, all nodes and jobs together, for at most a tenth of the file system on /fsx
    (FACTS: --size is per job), read back what it wrote, and left nothing on /fsx or /scratch (the
    directories its jobs make theirs in stay, empty); nor did the jobs' named containers."""
    example, (resolved, kit_dir, _, fio_record, _) = ran
    asked = [dict(field.split("=", 1) for field in line.split("\t")[1:])
             for line in fio_record.read_text().splitlines()]
    fsx = [a for a in asked if a["--directory"].startswith("/fsx/")]
    assert {a["--rw"] for a in fsx} == {"write", "read"}
    written = sum(int(a["--size"].rstrip("MG")) * (1024 if a["--size"].endswith("G") else 1) * int(a["--numjobs"])
                  for a in fsx if a["--rw"] == "write")  # MiB, every node
    capacity = resolved.spec.storage.lustre.storage_capacity_gib * 1024
    assert written <= capacity / 10, (written, capacity)
    base = kit_dir.parent
    assert [p.relative_to(base).as_posix() for p in (base / "fsx").rglob("*")] == ["fsx/fmcluster-fio"]
    assert not [p for p in (base / "scratch").rglob("*") if p.is_file()]
    assert not [p for p in (base / "scratch").glob("*/enroot/data/*")]  # the containers


# The smoke job's end: the kit's smoke job on a cluster of 2 x p5 (16 ranks of the torch stand-in,
# each step a quarter of a second), signalled as fmcluster's capacity-end does before a Capacity
# Block ends: its nodes drained (nothing starts there again) and the job signalled with the group's
# end_signal (`scancel --signal=USR1`, or `--batch` for B:USR1). It saves a checkpoint, requeues
# itself and waits for nodes; once they are back it resumes from the checkpoint and completes, and
# verify passes it, the checkpoint's write time reported.
def two_node_spec(tmp_path: Path, end_signal: str) -> Path:
    """examples/p5-pcs.yaml with 2 nodes, without its teams (their guarantees are of 16), and `end_signal`."""
    spec = tmp_path / "p5-2.yaml"
    text = (EXAMPLES_DIR / "p5-pcs.yaml").read_text().split("\nteams:")[0]
    text = re.sub(r"(\n    count:) 16\b", r"\1 2", text, count=1)
    text, found = re.subn(r"\n      type: capacity-block\b.*\n",
                          lambda m: f"{m.group(0)}      end_signal: '{end_signal}'\n", text, count=1)
    assert found == 1
    spec.write_text(text)
    return spec


def wait_for(what: str, check, timeout: float = 60.0):
    """check()'s first true answer, asked every 0.2 s; bounded."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if answer := check():
            return answer
        time.sleep(0.2)
    raise TimeoutError(what)


# B:TERM: the batch shell passes it on, not through srun (which would SIGKILL the tasks on a SIGTERM)
@pytest.mark.parametrize("end_signal", ["USR1", "B:USR1", "B:TERM"])
def test_the_smoke_job_saves_on_the_end_signal_and_resumes_when_run_again(end_signal, tmp_path, pyxis_standin,
                                                                          node_paths):
    spec = two_node_spec(tmp_path, end_signal)
    kit_dir = tmp_path / "kit"
    kit(spec, kit_dir)
    script = (kit_dir / "gpu/smoke.sbatch").read_text()
    assert f"#SBATCH --signal={end_signal}@900" in script and "#SBATCH --requeue" in script
    cluster, members = example_cluster(tmp_path, spec, pyxis_standin, kit_dir)
    nodes = ",".join(members["gpu"])
    environment = kit_environment(cluster, tmp_path, {"SMOKE_STEPS": "60", "STANDIN_STEP_SECONDS": "0.25",
                                                            "STANDIN_RESUMED_STEP_SECONDS": "0"})
    (kit_dir / "results").mkdir()  # as submit-all.sh makes it: Slurm opens the job's output file there
    with cluster:
        submitted = subprocess.run([cluster.client("sbatch"), "--parsable", "gpu/smoke.sbatch"], cwd=kit_dir,
                                   env=environment, capture_output=True, text=True, timeout=30)
        assert submitted.returncode == 0, submitted.stderr
        job = submitted.stdout.strip().split(";")[0]
        output = kit_dir / "results" / f"gpu-smoke-{job}.out"
        wait_for("a step", lambda: output.exists() and "fmcluster-smoke step=2 " in output.read_text())
        cluster.run("scontrol", "update", f"nodename={nodes}", "state=drain", "reason=fmcluster-capacity-end: test")
        batch = ["--batch"] if end_signal.startswith("B:") else []
        cluster.run("scancel", *batch, f"--signal={end_signal.removeprefix('B:')}", job)
        state = cluster.wait_job(job, timeout=60, until=lambda j: j.get("JobState") == "PENDING"
                                 and int(j.get("Restarts", "0")) == 1)
        assert state["JobState"] == "PENDING", (state, cluster.logs())
        first = output.read_text()
        saved = re.findall(r"^fmcluster-smoke checkpoint step=(\d+) seconds=(\S+) bytes=(\d+) path=(\S+)$", first,
                           re.MULTILINE)
        assert len(saved) == 1, first
        step, seconds, size, path = saved[0]
        checkpoint = Path(path)
        assert checkpoint == kit_dir / "checkpoints" / job / f"step-{int(step):06d}"
        assert sorted(p.name for p in checkpoint.iterdir()) == sorted(
            [".metadata", "fmcluster.json", *(f"__{rank}_0.distcp" for rank in range(16))])  # DCP's: a file a rank
        assert json.loads((checkpoint / "fmcluster.json").read_text()) == {
            "step": int(step), "seconds": float(seconds), "bytes": int(size)}
        assert not (checkpoint.parent / "stopped").exists()  # read by the job's script, which requeued it
        assert f"step={int(step) + 1} " not in first and "fmcluster-smoke ok" not in first
        # the nodes back (the next block); Slurm holds a requeued job back for AuthInfo's cred_expire
        # (slurm.conf(5), 120 s by default: its EligibleTime the requeue's plus 121 s here), which the
        # test does not wait for: it lets the job start now
        cluster.run("scontrol", "update", f"nodename={nodes}", "state=resume")
        cluster.run("scontrol", "update", f"jobid={job}", "starttime=now")
        state = cluster.wait_job(job, timeout=120)
        assert state["JobState"] == "COMPLETED", (state, cluster.logs())
    text = output.read_text()
    assert text.startswith(first) and text.count("==> fmcluster node=all group=gpu test=smoke <==") == 2
    assert f"\nfmcluster-smoke resumed step={step} seconds={seconds} bytes={size} path={path}\n" in text
    assert "fmcluster-smoke ok world_size=16 steps=60" in text
    assert not (kit_dir / "checkpoints" / job).exists()  # removed once the run completed
    report = json.loads(subprocess.run([sys.executable, "-m", "fmcluster", "verify", str(spec), str(output),
                                        "--format", "json"], cwd=ROOT, capture_output=True, text=True).stdout)
    rows = {row["test"]: row for row in report["groups"]["gpu"]["results"] if row["node"] == "all"}
    assert rows["smoke"]["verdict"] == "PASS", rows["smoke"]
    assert rows["smoke-checkpoint"]["measured"] == float(seconds), rows["smoke-checkpoint"]
    assert report["checkpoints"] == [{"group": "gpu", "node": "all", "source": str(output), "step": int(step),
                                      "seconds": float(seconds), "bytes": int(size),
                                      "bytes_per_s": int(size) / float(seconds) if float(seconds) else None,
                                      "path": path, "resumed": True,
                                      "line": "checkpoint"}]
