"""The Slurm kit's nccl and fio jobs run their image as one Pyxis named container a node for the whole
job (fmcluster.kits.jobs: `--container-name`), so each node imports and unpacks the image once a job,
not at every step: the batch scripts run with bash against tests/support/fake_slurm.py, whose srun
models Pyxis v0.24.0's named containers on each node (a container there is reused and nothing
imported; one is made where none is; two steps making the same one at once fail one, as `enroot
create` does) and whose enroot lists and removes them. The same on a real Slurm with the Pyxis
stand-in: tests/kits/test_slurm_kits.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fmcluster.kits import jobs
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from tests.support import fake_slurm
from tests.support.paths import EXAMPLES_DIR

ACCOUNT = "210987654321"  # the node role's, as the fake STS answers
NCCL_TEST = '#!/bin/bash\necho "$0 on $FAKE_HOSTNAME"\n'
HOSTS = ["gpu-1", "gpu-2", "gpu-3"]
NAME = f"{jobs.CONTAINER_PREFIX}-4242"  # the job's container: the prefix and the job's id
# each import, by node, slow enough that two steps on one node at once would both import and one fail
IMPORT = '#!/bin/bash\nprintf "%s %s\\n" "$FAKE_HOSTNAME" "$1" >>"$FAKE_SLURM_DIR/imports.log"\nsleep 0.3\n'


def run(tmp_path: Path, test: str = "nccl", env: dict[str, str] | None = None):
    """The group's `test` batch script run on HOSTS; (the result, the imports as (node, image), the
    srun log's container steps as (name, nodelist), the containers removed as (node, container))."""
    model = p5()
    group = model.node_groups[0]
    script = {"nccl": jobs.nccl_sbatch, "fio": jobs.fio_sbatch}[test](model, group)
    if test == "fio":
        script = fake_slurm.relocated(script, model, group, tmp_path, 1)
    tests = tmp_path / "nccl-tests"
    tests.mkdir()
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        (tests / f"{op}_perf").write_text(NCCL_TEST)
        (tests / f"{op}_perf").chmod(0o755)
    (tmp_path / "import.sh").write_text(IMPORT)
    (tmp_path / "home").mkdir()
    result = fake_slurm.run_batch(script, tmp_path, HOSTS, timeout=60, extra={
        "aws": fake_slurm.AWS, "fio": "#!/bin/bash\necho '{\"jobs\": []}'\n"}, env={
        "HOME": str(tmp_path / "home"), "FAKE_ACCOUNT": ACCOUNT, "NCCL_TESTS": str(tests),
        "FAKE_ENROOT_IMPORT": str(tmp_path / "import.sh"), **(env or {})})
    imported = [tuple(line.split()) for line in _lines(tmp_path / "imports.log")]
    steps = re.findall(r"^srun image=\S+ name=(\S*) nodelist=(\S*)", _text(tmp_path / "srun.log"), re.MULTILINE)
    removed = [tuple(line.split()) for line in _lines(tmp_path / "enroot-removed.log")]
    return result, imported, steps, removed


def p5():
    return resolve(loader.load(EXAMPLES_DIR / "p5-pcs.yaml").spec)


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def _lines(path: Path) -> list[str]:
    return _text(path).splitlines()


def containers(tmp_path: Path) -> dict[str, list[str]]:
    """Node -> the containers in its Enroot data path (fake_slurm's Pyxis)."""
    root = tmp_path / "enroot"
    nodes = sorted(root.iterdir()) if root.exists() else []
    return {node.name: sorted(c.name for c in node.iterdir()) for node in nodes}


def test_each_node_imports_the_image_once_a_job_and_the_containers_go(tmp_path):
    """Six nccl phases (each collective inside every node at once, then across them): every step
    names the job's container, each node imports the image once (the steps that run at once are on
    nodes of their own: with a slow import, two on one node would fail one), and the job removes its
    containers from every node when it ends."""
    result, imported, steps, removed = run(tmp_path)
    assert result.returncode == 0, result.stdout
    model = p5()
    uri = model.reference_image(model.node_groups[0]).enroot_uri(ACCOUNT, "us-east-1")
    assert sorted(imported) == [(host, uri) for host in HOSTS]
    assert len(steps) == 3 * (len(HOSTS) + 1)  # each collective: a step a node, then one across
    assert {name for name, _ in steps} == {NAME}
    assert sorted(removed) == [(host, f"pyxis_{NAME}") for host in HOSTS]
    assert containers(tmp_path) == {host: [] for host in HOSTS}


def test_the_fio_job_imports_once_a_node_for_both_file_systems(tmp_path):
    result, imported, steps, removed = run(tmp_path, "fio")
    assert result.returncode == 0, result.stdout
    assert len(steps) == 2 and {name for name, _ in steps} == {NAME}  # /fsx, then /scratch
    assert sorted(host for host, _ in imported) == HOSTS
    assert sorted(removed) == [(host, f"pyxis_{NAME}") for host in HOSTS]


def test_what_earlier_runs_left_is_removed_before_the_first_step(tmp_path):
    """Before its first step the job removes the kit's containers from its nodes (its nodes are its
    alone): one a cancelled kit job left, and a half-made one of a killed run of this job (a
    requeued job keeps its id; Pyxis would reuse it and import nothing); the user's own stay."""
    data = tmp_path / "enroot" / "gpu-2"
    for left in (f"pyxis_{jobs.CONTAINER_PREFIX}-4100", f"pyxis_{NAME}", "pyxis_my-dev"):
        (data / left).mkdir(parents=True)
    result, imported, _, removed = run(tmp_path, "fio")
    assert result.returncode == 0, result.stdout
    assert sorted(host for host, _ in imported) == HOSTS  # gpu-2 too: its half-made container was gone
    assert removed[:2] == [("gpu-2", f"pyxis_{jobs.CONTAINER_PREFIX}-4100"), ("gpu-2", f"pyxis_{NAME}")]
    assert containers(tmp_path) == {"gpu-1": [], "gpu-2": ["pyxis_my-dev"], "gpu-3": []}


def test_a_job_scoped_pyxis_names_them_by_job_and_they_go_too(tmp_path):
    """With Pyxis' container_scope=job its names carry the job's id (pyxis_JOBID_NAME): the job
    finds and removes those as well."""
    result, imported, _, removed = run(tmp_path, env={"FAKE_PYXIS_SCOPE": "job"})
    assert result.returncode == 0, result.stdout
    assert sorted(host for host, _ in imported) == HOSTS
    assert sorted(removed) == [(host, f"pyxis_4242_{NAME}") for host in HOSTS]


# --- the stand-in holds to Pyxis' semantics ---------------------------------------------------------

STEPS = '''#!/bin/bash
srun --nodelist=gpu-1 --container-image=docker://x#y:1 --container-name=c true & a=$!
srun --nodelist=gpu-1 --container-image=docker://x#y:1 --container-name=c true & b=$!
wait $a; ra=$?; wait $b; rb=$?
echo "at once: $ra $rb"
srun --nodes=2 --container-image=docker://x#y:1 --container-name=c true; echo "after: $?"
srun --nodes=2 --container-image=docker://x#y:1 true; echo "unnamed: $?"
'''


@pytest.mark.parametrize("pyxis", ["1", "0"])
def test_the_srun_stand_in_reuses_a_named_container_and_races_as_pyxis_does(tmp_path, pyxis):
    """Two steps on one node that make the same named container at once: one fails as `enroot
    create` does; a later step reuses it on that node (no import, no progress line) and makes its own
    on the other; an unnamed step imports on every node, each time."""
    (tmp_path / "import.sh").write_text(IMPORT)
    result = fake_slurm.run_batch(STEPS, tmp_path, ["gpu-1", "gpu-2"], env={
        "FAKE_ENROOT_IMPORT": str(tmp_path / "import.sh"), "FAKE_PYXIS": pyxis})
    assert result.returncode == 0, result.stdout
    outcome = sorted(re.search(r"at once: (\d+) (\d+)", result.stdout).groups())
    assert outcome == ["0", "1"] and "File already exists" in result.stdout
    assert "after: 0" in result.stdout and "unnamed: 0" in result.stdout
    hosts = [line.split()[0] for line in _lines(tmp_path / "imports.log")]
    assert hosts[:3] == ["gpu-1", "gpu-1", "gpu-2"] and sorted(hosts[3:]) == ["gpu-1", "gpu-2"]
    assert containers(tmp_path) == {"gpu-1": ["pyxis_c"], "gpu-2": ["pyxis_c"]}
    if pyxis == "1":  # the progress lines: for each import only (the race's two, gpu-2's, the unnamed step's two)
        assert result.stdout.count("pyxis: imported docker image: docker://x#y:1") == 5
