"""`fmcluster jobs`: the acceptance kit of every Slurm example, its scripts shellchecked, their
#SBATCH options held to the model, the expected figures to fmcluster.expected, and the script
parts that run on the login node (the regrouping of per-node output) run for real. The
Kubernetes kits: tests/test_jobs_kubernetes.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fmcluster import expected, jobs, loader
from fmcluster.cli import main as cli
from fmcluster.model import resolve

ROOT = Path(__file__).resolve().parent.parent
SLURM_EXAMPLES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "examples").glob("*.yaml")
                        if loader.load(p).spec.orchestrator.type in jobs.SLURM_PLANES)
SHELLCHECK = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")


def model_of(example):
    return resolve(loader.load(ROOT / example).spec)


def sbatch_options(text: str) -> dict[str, str]:
    return dict(re.findall(r"^#SBATCH --([a-z-]+)(?:=(\S+))?$", text, re.MULTILINE))


@pytest.fixture(scope="module", params=SLURM_EXAMPLES)
def kit(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("kit")
    assert cli(["jobs", request.param, "-o", str(out)]) == 0
    return model_of(request.param), out


def test_every_gpu_group_gets_its_four_jobs(kit):
    model, out = kit
    groups = [g.name for g in expected.gpu_groups(model)]
    assert groups
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == sorted(
        ["README.md", "expected.json", "smoke.py", "submit-all.sh"]
        + [f"{g}/{t}.sbatch" for g in groups for t in ("dcgm", "fio", "nccl", "smoke")])
    assert all((out / f"{g}/nccl.sbatch").stat().st_mode & 0o111 for g in groups)


def test_scripts_pass_shellcheck(kit):
    _, out = kit
    scripts = [*map(str, out.glob("*/*.sbatch")), str(out / "submit-all.sh")]
    result = subprocess.run([SHELLCHECK, "--shell=bash", *scripts], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_sbatch_options_follow_the_spec(kit):
    model, out = kit
    for group in expected.gpu_groups(model):
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
    for group in expected.gpu_groups(model):
        text = (out / f"{group.name}/nccl.sbatch").read_text()
        assert "for op in all_reduce all_gather reduce_scatter; do" in text
        assert f"--ntasks={group.gpus} --nodelist=\"$host\"" in text
        assert f"-e {jobs.largest_message(group)}" in text
        assert "source /etc/profile.d/fmcluster-nccl.sh" in text  # the node's EFA / NCCL environment
        assert '--container-image="$IMAGE"' in text


def test_expected_figures_are_the_models(kit):
    model, out = kit
    written = json.loads((out / "expected.json").read_text())
    assert written == {g: {t: e.as_dict() for t, e in tests.items()}
                       for g, tests in expected.expectations(model).items()}


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
    readme = (ROOT / "README.md").read_text()
    assert f"$ fmcluster jobs examples/p5-pcs.yaml -o acceptance\n{printed}```" in readme
