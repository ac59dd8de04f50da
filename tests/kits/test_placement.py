"""Topology-aware placement in the Slurm kits (fmcluster.kits.placement, fmcluster.node.topology):
placement.sh keyed on the plane, submit-all.sh submitting every multi-node EFA group's jobs through
it, the serving job's submit line, and the plan's phrase per group. placement.sh's choices against
a real Slurm: tests/node/test_network_features_slurm.py; here, submit-all.sh runs with stand-ins for
sinfo (its `-h -N -p P -o '%N %t %f'` output) and sbatch (which records its arguments)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fmcluster.kits import jobs, placement, serving
from fmcluster.model import cluster as cluster_model
from fmcluster.model.cluster import resolve
from fmcluster.node import topology
from fmcluster.spec import loader
from tests.support.paths import EXAMPLES_DIR
from tests.support.specs import base_spec, validated, with_

SHELLCHECK = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
X, Y, Z = "nn3-c3e50490a237cb0f1", "nn3-c3e50490a237cb0f2", "nn3-c3e50490a237cb0f3"
LAYER2, LAYER1 = "nn2-b27c0d1e2f3a4b501", "nn1-a1f0e5d4c3b2a1901"


def example(name: str):
    return cluster_model.resolve(loader.load(EXAMPLES_DIR / name).spec)


def sinfo_lines(count: int) -> str:
    """`sinfo -h -N -p gpu -o '%N %t %f'` of `count` p5 nodes: half under X, half under Y (layer 3),
    all under one layer-2 and one layer-1 node, one drained node under Z, one without features yet."""
    lines = []
    for i in range(1, count + 1):
        leaf = X if i <= count // 2 else Y
        lines.append(f"gpu-{i} idle gpu,{LAYER1},{LAYER2},{leaf}")
    lines.append(f"gpu-{count + 1} drain {LAYER1},nn2-b27c0d1e2f3a4b502,{Z}")
    lines.append(f"gpu-{count + 2} idle~ (null)")
    return "\n".join(lines) + "\n"


def kit_dir(tmp_path: Path, model) -> Path:
    out = tmp_path / "kit"
    for f in jobs.kit(model):
        path = out / f.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f.content)
        path.chmod(0o755 if f.executable else 0o644)
    return out


def standins(tmp_path: Path, sinfo: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text("#!/bin/sh\n[ \"$*\" = \"-h -N -p $4 -o %N %t %f\" ] || exit 2\n"
                                   f"cat <<'EOF'\n{sinfo}EOF\n")
    (bin_dir / "sbatch").write_text(f"#!/bin/bash\nprintf '%s|' \"$@\" >>{tmp_path}/sbatch.calls\n"
                                    f"echo >>{tmp_path}/sbatch.calls\necho 'Submitted batch job 1'\n")
    for name in ("sinfo", "sbatch"):
        (bin_dir / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_pcs_submit_all_places_every_multi_node_job(tmp_path):
    """p5-pcs (16 x p5.48xlarge, EFA): each of the group's four jobs goes through placement.sh, the
    constraint one argument; the partition holds 16 usable nodes under the layer-2 node, 8 under X
    and 8 under Y: no layer-3 node holds 16, so the layer-2 node is asked for."""
    model = example("p5-pcs.yaml")
    out = kit_dir(tmp_path, model)
    text = (out / "submit-all.sh").read_text()
    assert [line for line in text.splitlines() if line.startswith("submit ")] == [
        f"submit 16 gpu gpu/{t}.sbatch" for t in ("dcgm", "nccl", "fio", "smoke")]
    env = standins(tmp_path, sinfo_lines(16))
    ran = subprocess.run(["bash", "submit-all.sh"], cwd=out, env=env, capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0, ran.stderr
    calls = (tmp_path / "sbatch.calls").read_text().splitlines()
    assert calls == [f"--constraint={LAYER2}|gpu/{t}.sbatch|" for t in ("dcgm", "nccl", "fio", "smoke")]


@pytest.mark.parametrize("nodes, printed", [(8, f"--constraint=[{X}|{Y}]"), (9, f"--constraint={LAYER2}"),
                                            (16, f"--constraint={LAYER2}"), (17, ""), (1, f"--constraint=[{X}|{Y}]")])
def test_placement_sh_asks_for_the_tightest_network_node(tmp_path, nodes, printed):
    """The lowest layer where a network node holds NODES usable nodes (a drained node and one
    without features do not count), every such node of it, the fullest first; else nothing."""
    out = kit_dir(tmp_path, example("p5-pcs.yaml"))
    env = standins(tmp_path, sinfo_lines(16))
    ran = subprocess.run(["bash", "placement.sh", str(nodes), "gpu"], cwd=out, env=env, capture_output=True,
                         text=True, timeout=30)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == printed


def test_placement_sh_does_not_count_powered_down_nodes(tmp_path):
    """Slurm keeps a powered-down node's features, but its next instance may sit elsewhere in the
    network: nodes powered off (~), powering up (#), powering down (%) or pending power down (!)
    are not counted (sinfo(1), NODE STATE CODES)."""
    out = kit_dir(tmp_path, example("p5-pcs.yaml"))
    powered = "".join(f"gpu-p{i} {state} gpu,{LAYER1},{LAYER2},{X}\n"
                      for i, state in enumerate(("idle~", "idle#", "idle%", "idle!", "mix!", "alloc%")))
    env = standins(tmp_path, sinfo_lines(16) + powered)
    ran = subprocess.run(["bash", "placement.sh", "9", "gpu"], cwd=out, env=env, capture_output=True, text=True,
                         timeout=30)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == f"--constraint={LAYER2}"  # X holds 8 usable nodes, not 14


def test_placement_sh_offers_at_most_64_network_nodes(tmp_path):
    """slurmctld takes at most 64 options in one matching OR (MAX_FEATURES): the fullest 64."""
    lines = [f"n{i} idle nn3-{i // 2:03d}" for i in range(200)] + ["x1 idle nn3-zz", "x2 idle nn3-zz", "x3 idle nn3-zz"]
    out = kit_dir(tmp_path, example("p5-pcs.yaml"))
    ran = subprocess.run(["bash", "placement.sh", "2", "gpu"], cwd=out, env=standins(tmp_path, "\n".join(lines) + "\n"),
                         capture_output=True, text=True, timeout=30)
    options = ran.stdout.strip().removeprefix("--constraint=[").removesuffix("]").split("|")
    assert len(options) == placement.MAX_OPTIONS and options[0] == "nn3-zz"


def test_hyperpod_placement_sh_prints_nothing(tmp_path):
    """HyperPod configures Slurm's topology itself: placement.sh asks for nothing there."""
    model = example("p6-b200-hyperpod-slurm.yaml")
    out = kit_dir(tmp_path, model)
    assert "PLACEMENT=none" in (out / "placement.sh").read_text()
    ran = subprocess.run(["bash", "placement.sh", "4", "train"], cwd=out, env=standins(tmp_path, sinfo_lines(4)),
                         capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0 and ran.stdout == ""


def test_ultraserver_groups_are_submitted_plainly():
    """PCS's block topology places an UltraServer group's jobs: no placement.sh for them."""
    text = jobs.submit_all(example("p6e-gb200-pcs.yaml"))
    assert "submit()" not in text and "sbatch gb200/nccl.sbatch" in text


@pytest.mark.parametrize("name", ["p5-pcs.yaml", "p6-b200-hyperpod-slurm.yaml", "p6e-gb200-pcs.yaml"])
def test_kit_scripts_pass_shellcheck(tmp_path, name):
    if SHELLCHECK is None:
        pytest.skip("shellcheck is not installed (make tools)")
    out = kit_dir(tmp_path, example(name))
    result = subprocess.run([SHELLCHECK, "--shell=bash", str(out / "placement.sh"), str(out / "submit-all.sh")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def served(params: float, nodes: int):
    """The base spec (PCS, Lustre at /fsx) serving a model of `params` billions (bf16) on `nodes` p5."""
    spec = with_(with_(base_spec(), "node_groups[0].count", nodes), "node_groups[0].instance_type", "p5.48xlarge")
    model = {"name": "meta-llama/Llama-3.1-405B-Instruct", "path": "/fsx/models/llama",
             "parameters_billions": params, "dtype": "bf16"}
    return resolve(validated(with_(spec, "serving", {"node_group": "gpu", "model": model})))


def test_multi_node_serving_is_submitted_through_placement():
    """A replica of 2 nodes (405B in bf16 on p5: TP 8 x PP 2) asks for one network node; one of one node does not."""
    two = served(405, 4)
    assert two.serving.pipeline_parallel == 2
    assert serving.submit_line(two) == 'c=$(./placement.sh 2 gpu); sbatch ${c:+"$c"} gpu/serve.sbatch'
    assert serving.submit_line(two) in serving.slurm_serve_sbatch(two)
    assert serving.submit_line(two) in jobs.readme(two)
    one = served(70, 2)
    assert serving.submit_line(one) == "sbatch gpu/serve.sbatch"


@pytest.mark.parametrize("name, group, phrase", [
    ("p5-pcs.yaml", "gpu", "network features from EC2 instance topology; jobs ask for one layer-3 network node"),
    ("p6-b300-pcs.yaml", "b300", "network features from EC2 instance topology; jobs ask for one layer-4 network node"),
    ("p6-b300-pcs.yaml", "cpu", None),
    ("p6e-gb200-pcs.yaml", "gb200", "PCS block topology: one UltraServer"),
    ("p6-b200-hyperpod-slurm.yaml", "train", "HyperPod's automatic Slurm topology"),
    ("p5en-eks.yaml", "gpu", None),
])
def test_plan_phrase_per_group(name, group, phrase):
    model = example(name)
    assert topology.slurm_group_placement(model, model.group(group)) == phrase
    features = phrase is not None and "features" in phrase
    assert topology.publishes_network_features(model, model.group(group)) == features


def test_readme_explains_placement_where_it_asks():
    assert "`c=$(./placement.sh 16 gpu); sbatch ${c:+\"$c\"} JOB`" in jobs.readme(example("p5-pcs.yaml"))
    assert "placement.sh" not in jobs.readme(example("p6-b200-hyperpod-slurm.yaml"))
