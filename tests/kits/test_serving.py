"""Serving: how a model of a given size is placed on a node group (fmcluster.facts.inference), the spec's
`serving` section and its rules at their field paths, the resolved ClusterModel.serving, the plan's
serving tables with and without the section, and the serving jobs (fmcluster.kits.serving): the sbatch
script shellchecked and its #SBATCH options held to the model, the LeaderWorkerSet and Service."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fmcluster.facts import catalog, inference, software
from fmcluster.facts import kubernetes as k8s
from fmcluster.kits import common, serving
from fmcluster.kubernetes import charts, kueue
from fmcluster.kubernetes import manifests as kubernetes
from fmcluster.model.cluster import resolve
from fmcluster.node import nccl as node_nccl
from fmcluster.plan import compute_rows
from fmcluster.plan import render as plan_render
from fmcluster.plan import report as plan
from fmcluster.spec.rules import serving as rules
from tests.support import fake_slurm
from tests.support.paths import DATA
from tests.support.specs import base_spec, findings, messages, paths, validated, with_, without
from tests.support.ultraserver import gb200

SHELLCHECK = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
LWS_CRD = DATA / "crds" / "leaderworkerset.x-k8s.io_leaderworkersets_v1.json"
P5 = catalog.catalog()["p5.48xlarge"]
LLAMA_70B = {"name": "meta-llama/Llama-3.1-70B-Instruct", "path": "/fsx/models/Llama-3.1-70B-Instruct",
             "parameters_billions": 70}


def served(params: float = 70, dtype: str = "bf16", nodes: int = 2, instance_type: str = "p5.48xlarge",
           **section) -> dict:
    """The base spec (PCS, Lustre at /fsx) serving a model of `params` billions on its group `gpu`."""
    spec = with_(base_spec(), "node_groups[0].count", nodes)
    spec = with_(spec, "node_groups[0].instance_type", instance_type)
    model = {**LLAMA_70B, "parameters_billions": params, "dtype": dtype}
    return with_(spec, "serving", {"node_group": "gpu", "model": model, **section})


def model_of(spec: dict):
    return resolve(validated(spec))


# ---- the placement ---------------------------------------------------------------------------

def test_70b_bf16_on_p5_takes_four_h100s():
    """140 GB (130.4 GiB) of weights: 2 x 80 GiB leave 128 GiB for weights (80% of 160), too little;
    4 x 80 GiB leave 256 GiB: TP 4, two replicas to a node, 157.6 GiB left for the KV cache."""
    p = inference.place(P5, 2, 70, "bf16")
    assert round(p.weights_gib, 1) == 130.4
    assert (p.tensor_parallel, p.pipeline_parallel, p.gpus_per_replica) == (4, 1, 4)
    assert (p.replicas_per_unit, p.replicas_fit) == (2, 4)
    assert round(p.kv_cache_gib, 1) == round(0.9 * 320 - p.weights_gib, 1) == 157.6
    assert not inference._fits(p.weights_gib, 2, 80, 0.9)


def test_405b_bf16_on_p5_needs_two_nodes():
    """754 GiB: one node's 8 x 80 GiB leave 512 GiB for weights; two nodes 1,024: TP 8 x PP 2."""
    p = inference.place(P5, 4, 405, "bf16")
    assert (p.tensor_parallel, p.pipeline_parallel, p.gpus_per_replica) == (8, 2, 16)
    assert (p.replicas_per_unit, p.replicas_fit, p.units(2)) == (1, 2, 2)
    alone = inference.place(P5, 1, 405, "bf16")
    assert not alone.fits and alone.pipeline_parallel == 2 and alone.replicas_fit == 0


def test_8b_fits_one_gpu_with_a_replica_per_gpu():
    p = inference.place(P5, 3, 8, "bf16")
    assert (p.tensor_parallel, p.pipeline_parallel, p.replicas_fit) == (1, 1, 24)
    assert p.units(24) == 3 and p.units(9) == 2


@pytest.mark.parametrize("instance_type, params, dtype, tp, pp", [
    ("p5.48xlarge", 70, "fp8", 2, 1),  # 65.2 GiB: just over one H100's 64 GiB
    ("p5.48xlarge", 405, "fp8", 8, 1),
    ("p5e.48xlarge", 70, "bf16", 2, 1),  # H200 141 GiB
    ("p5e.48xlarge", 405, "bf16", 8, 1),
    ("p6-b200.48xlarge", 70, "bf16", 1, 1),  # B200 179 GiB: 143 GiB for weights
    ("p6-b200.48xlarge", 405, "fp4", 2, 1),  # 188.6 GiB of FP4 weights
    ("p5.4xlarge", 70, "fp8", 1, 2),  # one GPU a node: pipeline parallel across two nodes
    ("g6e.12xlarge", 70, "bf16", 4, 1),  # 4 x L40S (44.7 GiB): 143 GiB for weights
    ("p6e-gb200.36xlarge", 405, "bf16", 4, 2),
])
def test_tensor_parallel_inside_a_node_pipeline_parallel_across(instance_type, params, dtype, tp, pp):
    p = inference.place(catalog.catalog()[instance_type], 4, params, dtype)
    assert (p.tensor_parallel, p.pipeline_parallel) == (tp, pp)


@pytest.mark.parametrize("instance_type", [t for t in catalog.known_names(gpu_only=True)])
@pytest.mark.parametrize("params, dtype", inference.STANDARD_MODELS)
def test_the_placement_is_the_smallest_that_leaves_the_kv_cache_floor(instance_type, params, dtype):
    """The rule itself, on every GPU type: weights <= (0.9 - 0.1) x the replica's GPU memory, a
    power-of-two TP dividing the node's GPUs, and no smaller layout would do."""
    it = catalog.catalog()[instance_type]
    p = inference.place(it, 64, params, dtype)
    assert p.fits and p.gpus_per_node % p.tensor_parallel == 0
    assert p.tensor_parallel & (p.tensor_parallel - 1) == 0 or p.tensor_parallel == it.gpu_count
    assert p.weights_gib <= 0.8 * p.replica_memory_gib
    assert p.kv_cache_gib >= p.reserve_gib - 1e-9
    smaller = p.tensor_parallel // 2 if p.pipeline_parallel == 1 else it.gpu_count * (p.pipeline_parallel - 1)
    if smaller:
        assert p.weights_gib > 0.8 * smaller * it.gpu.memory_gib
    assert p.pipeline_parallel == 1 or p.tensor_parallel == it.gpu_count


def test_a_cpu_group_places_nothing():
    p = inference.place(catalog.catalog()["c7i.8xlarge"], 4, 8, "bf16")
    assert (p.fits, p.tensor_parallel, p.replicas_fit, p.units(1)) == (False, 0, 0, 0)


def test_the_share_vllm_takes_is_the_spec_s():
    tight = inference.place(P5, 2, 70, "bf16", gpu_memory_utilization=0.5)  # 40% of 4 x 80 GiB: 128 < 130.4
    assert (tight.tensor_parallel, tight.gpu_memory_utilization) == (8, 0.5)
    model = model_of(served(70, gpu_memory_utilization=0.5))
    assert model.serving.tensor_parallel == 8
    assert "--gpu-memory-utilization 0.5 " in serving.slurm_serve_sbatch(model)


# ---- the spec --------------------------------------------------------------------------------

def test_serving_is_absent_by_default_and_shown_as_such():
    spec = validated(base_spec())
    assert spec.serving is None and spec.resolved()["serving"] is None
    assert resolve(spec).serving is None


def test_the_section_s_defaults():
    section = validated(served()).serving
    assert (section.engine, section.image, section.replicas, section.model.dtype) == (
        "vllm", software.VLLM_IMAGE, None, "bf16")
    assert section.gpu_memory_utilization == inference.GPU_MEMORY_UTILIZATION == 0.9
    assert re.fullmatch(r"vllm/vllm-openai:v\d+\.\d+\.\d+", software.VLLM_IMAGE)


def test_a_valid_serving_section_has_no_findings():
    assert paths(served()) == set()


@pytest.mark.parametrize("path, value", [
    ("serving.model.revision", "main"), ("serving.port", 8080), ("serving.engine", "sglang"),
    ("serving.model.dtype", "int4"), ("serving.model.name", "two words"), ("serving.model.path", "models/x"),
    ("serving.model.parameters_billions", 0), ("serving.replicas", 0), ("serving.gpu_memory_utilization", 1.0),
    ("serving.image", "vllm/vllm-openai:v1 ; rm -rf /"),
])
def test_malformed_fields_are_errors_at_their_path(path, value):
    found = paths(with_(served(), path, value))
    assert path in found or path.rsplit(".", 1)[0] in found, found


def test_the_model_is_required():
    assert "serving.model" in paths(without(served(), "serving.model"))


# ---- the rules -------------------------------------------------------------------------------

def test_serving_node_group_exists():
    spec = with_(served(), "serving.node_group", "gpus")
    (message,) = messages(spec, "serving.node_group")
    assert "there is no node group 'gpus'" in message and "| a GPU node group of node_groups: gpu" in message
    assert findings(rules.serving_node_group, served()) == []


def test_serving_node_group_has_gpus():
    spec = with_(served(), "node_groups[1]", {"name": "cpu", "instance_type": "c7i.8xlarge", "count": 2})
    spec = with_(spec, "serving.node_group", "cpu")
    (message,) = messages(spec, "serving.node_group")
    assert "'cpu' (c7i.8xlarge) has no GPUs" in message and "gpu" in message.split("|")[1]


def test_serving_needs_a_file_system():
    spec = without(served(), "storage.lustre")
    (message,) = messages(spec, "serving.model.path")
    assert "FSx for Lustre, and the cluster has none" in message
    assert findings(rules.serving_file_system, served()) == []


@pytest.mark.parametrize("path", ["/data/models/x", "/fsx", "/fsxmodels/x"])
def test_serving_model_path_is_under_the_mount_path(path):
    spec = with_(served(), "serving.model.path", path)
    (message,) = messages(spec, "serving.model.path")
    assert f"{path} is not under the file system's mount path /fsx" in message
    assert "/fsx/models/Llama-3.1-70B-Instruct" in message  # the hint


def test_serving_model_path_follows_the_mount_path():
    spec = with_(with_(served(), "storage.lustre.mount_path", "/lustre"), "serving.model.path", "/lustre/m/70b")
    assert findings(rules.serving_model_path, spec) == []
    assert "serving.model.path" in paths(with_(spec, "serving.model.path", "/fsx/m/70b"))


def test_serving_dtype_supported_fp4_only_on_gpus_with_fp4():
    (message,) = messages(served(dtype="fp4"), "serving.model.dtype")
    assert "H100 GPUs have no FP4" in message and "B200" in message
    assert paths(served(405, "fp4", instance_type="p6-b200.48xlarge")) == set()
    assert paths(served(8, "fp8", instance_type="p4d.24xlarge")) == set()  # FP8 weights run on A100 (weight-only)


def test_serving_model_fits_in_the_group():
    spec = served(405, nodes=1)
    (message,) = messages(spec, "serving.model.parameters_billions")
    assert "405B parameters in bf16 are 754.4 GiB" in message and "needs 2 x p5.48xlarge" in message
    assert "has at most 1" in message and "grow the group to 2 nodes" in message
    assert findings(rules.serving_model_fits, served(405, nodes=2)) == []


def test_serving_model_fits_counts_the_elastic_maximum():
    spec = with_(without(served(405), "node_groups[0].count"), "node_groups[0].min_count", 0)
    assert findings(rules.serving_model_fits, with_(spec, "node_groups[0].max_count", 2)) == []
    assert findings(rules.serving_model_fits, with_(spec, "node_groups[0].max_count", 1))


def test_serving_replicas_fit():
    spec = served(70, replicas=5)  # 2 x p5: 4 replicas of TP 4
    (message,) = messages(spec, "serving.replicas")
    assert "5 replicas asked for, 4 fit" in message and "4 x 1 GPUs" in message and "replicas: 4" in message
    assert findings(rules.serving_replicas_fit, served(70, replicas=4)) == []


def test_serving_image_efa_warns_of_a_replica_across_nodes_in_vllms_own_image():
    """405B in bf16 takes two p5 nodes: in the upstream image, NCCL between them would not use EFA."""
    spec = served(405, nodes=2)
    (message,) = messages(spec, "serving.image", "warning")
    assert "spans 2 nodes of 'gpu'" in message and "TCP sockets" in message
    assert "fmcluster/data/docker/Dockerfile.serving" in message
    assert findings(rules.serving_image_efa, served(70, nodes=2)) == []  # one node a replica
    own = served(405, nodes=2, image="123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm-efa:0.33.0")
    assert findings(rules.serving_image_efa, own) == []
    assert findings(rules.serving_image_efa, with_(spec, "node_groups[0].efa", False)) == []


def test_rules_that_cannot_place_stay_quiet():
    """A missing group is one finding, not four."""
    spec = with_(served(405, replicas=9, nodes=1), "serving.node_group", "nope")
    assert paths(spec) == {"serving.node_group"}


# ---- the model -------------------------------------------------------------------------------

def test_the_model_resolves_the_placement_once():
    s = model_of(served(70)).serving
    assert (s.name, s.path, s.group, s.engine, s.image) == (
        LLAMA_70B["name"], LLAMA_70B["path"], "gpu", "vllm", software.VLLM_IMAGE)
    assert (s.tensor_parallel, s.pipeline_parallel, s.replicas, s.units) == (4, 1, 4, 2)
    assert s.placement == inference.place(P5, 2, 70, "bf16")
    assert model_of(served(70, replicas=3)).serving.replicas == 3


# ---- the plan --------------------------------------------------------------------------------

def _plan(spec: dict) -> plan.Plan:
    return plan.build(validated(spec), spec)


def test_the_plan_shows_the_standard_sizes_on_every_gpu_group():
    spec = with_(base_spec(), "node_groups[1]", {"name": "cpu", "instance_type": "c7i.8xlarge", "count": 2})
    p = _plan(spec)
    gpu, cpu = p.node_groups
    assert cpu.serving is None and p.serving is None
    assert [f.model for f in gpu.serving] == ["8B bf16", "8B fp8", "70B bf16", "70B fp8", "405B bf16", "405B fp8"]
    big = gpu.serving[4]
    assert (big.tensor_parallel, big.pipeline_parallel, big.replicas_fit, big.fits) == (8, 2, 1, True)
    text = plan_render.render_text(p)
    assert "Serving (replicas that fit at each group's maximum size)" in text
    assert re.search(r"^    70B bf16 +130\.4 GiB +4 x 1 +4 +157\.6 GiB +4$", text, re.MULTILINE)


def test_a_model_that_does_not_fit_says_what_it_needs():
    p = _plan(with_(base_spec(), "node_groups[0].count", 1))
    row = compute_rows.serving_rows(p.node_groups[0])[5]  # 405B bf16 on one p5
    assert row == ["405B bf16", "754.4 GiB", "needs 2 nodes of 1", "-", "-", "0"]


def test_the_plan_marks_the_served_model():
    p = _plan(served(70, replicas=3))
    rows = p.node_groups[0].serving
    assert [f.served for f in rows] == [False] * 6 + [True]
    mine = rows[-1]
    assert (mine.model, mine.tensor_parallel, mine.replicas_fit, mine.replicas_served) == (LLAMA_70B["name"], 4, 4, 3)
    assert (p.serving.node_group, p.serving.replicas, p.serving.units, p.serving.port) == ("gpu", 3, 2, 8000)
    text = plan_render.render_text(p)
    name = re.escape(LLAMA_70B["name"])  # its row: " (served)" on its line or wrapped onto the next
    row = rf"^    {name}( \(served\) .* 3 served of 4| .* 3 served of 4\n    \(served\))$"
    assert re.search(row, text, re.MULTILINE)
    assert (f"serving {LLAMA_70B['name']} from {LLAMA_70B['path']} on gpu: 3 replicas of 4 x 1 GPUs"
            in " ".join(text.split()))
    markdown = plan_render.render_markdown(p)
    assert "#### Serving" in markdown and f"| {LLAMA_70B['name']} (served) | 130.4 GiB | 4 x 1 |" in markdown
    again = plan.Plan.model_validate(json.loads(plan_render.render_json(p)))
    assert again == p and "serving.replicas" not in p.defaulted and "serving.engine" in p.defaulted


# ---- the Slurm job ---------------------------------------------------------------------------

def sbatch_options(text: str) -> dict[str, str]:
    return dict(re.findall(r"^#SBATCH --([a-z-]+)(?:=(\S+))?$", text, re.MULTILINE))


def shellcheck(tmp_path: Path, **scripts: str) -> None:
    files = []
    for name, text in scripts.items():
        (tmp_path / name).write_text(text if text.startswith("#!") else "#!/bin/bash\n" + text + "\n")
        files.append(str(tmp_path / name))
    result = subprocess.run([SHELLCHECK, "--shell=bash", *files], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("params, nodes", [(405, 4), (8, 3), (70, 2)])
def test_the_sbatch_passes_shellcheck_and_follows_the_model(tmp_path, params, nodes):
    model = model_of(served(params, nodes=nodes))
    s = model.serving
    text = serving.slurm_serve_sbatch(model)
    inner = serving._ray_head(s, "2", serving.HEAD_ADDR) if s.pipeline_parallel > 1 else serving._side_by_side(s)
    shellcheck(tmp_path, **{"serve.sbatch": text, "inner.sh": inner, "worker.sh": serving._ray_worker(
        serving.HEAD_ADDR)})
    options = sbatch_options(text)
    assert options["partition"] == "gpu" and options["nodes"] == str(s.pipeline_parallel)
    assert "exclusive" in options and options["array"] == f"0-{s.units - 1}"
    assert options["output"] == "serving/%x-%A_%a.out"  # not the kit's results/, which verify reads
    assert f"--tensor-parallel-size {s.tensor_parallel} --pipeline-parallel-size {s.pipeline_parallel}" in text
    assert f"--served-model-name {s.name} " in text and "--gpu-memory-utilization 0.9 " in text
    assert f"source {node_nccl.NCCL_ENV_FILE}" in text
    assert 'mounts="$MODEL_PATH:$MODEL_PATH:ro"' in text and f"MODEL_PATH={s.path}" in text
    assert '--container-image="$SERVE_IMAGE" --container-mounts="$mounts"' in text
    assert f'SERVE_IMAGE="${{SERVE_IMAGE:-{software.VLLM_IMAGE}}}"' in text
    assert 'echo "fmcluster-serve ready model=' in text
    assert f"deadline=$(( SECONDS + {serving.startup_seconds(model)} ))" in text
    ray = "ray start --head" in text
    assert ray == (s.pipeline_parallel > 1) == ("--distributed-executor-backend ray" in text)


def test_replicas_of_one_node_share_it(tmp_path):
    model = model_of(served(8, nodes=3, replicas=20))  # 8 a node: tasks of 8, 8 and 4
    text = serving.slurm_serve_sbatch(model)
    assert sbatch_options(text)["array"] == "0-2"
    assert "count=$(( 20 - SLURM_ARRAY_TASK_ID * 8 ))" in text and "(( count > 8 )) && count=8" in text
    assert "--port $(( PORT + i ))" in text and "export COUNT=$count PORT=8000" in text


def test_the_side_by_side_replicas_take_their_own_gpus(tmp_path):
    """Run the in-container loop with a fake vllm: two replicas of TP 4 get GPUs 0-3 and 4-7."""
    s = model_of(served(70)).serving
    (tmp_path / "vllm").write_text('#!/bin/bash\necho "$CUDA_VISIBLE_DEVICES ${*: -1}"\nsleep 1\n')
    (tmp_path / "vllm").chmod(0o755)
    run = subprocess.run(["bash", "-c", serving._side_by_side(s)], capture_output=True, text=True,
                         env={"PATH": f"{tmp_path}:/usr/bin:/bin", "COUNT": "2", "PORT": "8000"})
    assert sorted(run.stdout.split("\n")[:2]) == ["0,1,2,3 8000", "4,5,6,7 8001"]
    assert run.returncode == 1  # a server that exits ends the step (even with status 0)


def test_startup_allows_for_every_replica_reading_its_weights():
    model = model_of(served(405, nodes=4))  # 2 x 754 GiB at 1.17 GB/s (4,800 GiB at 250 MB/s/TiB)
    read = 2 * 754.37 * 2**30 / (model.spec.storage.lustre.throughput_mbps * 1e6)
    assert serving.startup_seconds(model) == serving.STARTUP_FLOOR_S + -(-read // 60) * 60


def test_no_serving_section_no_serving_job():
    with pytest.raises(ValueError, match="no serving section"):
        serving.slurm_serve_sbatch(model_of(base_spec()))


# ---- the Kubernetes manifests ----------------------------------------------------------------

def _eks(spec: dict) -> dict:
    spec = with_(spec, "orchestrator", {"type": "eks", "admin_role_arn": "arn:aws:iam::111122223333:role/admin"})
    return with_(spec, "network.extra_availability_zone_ids", ["use1-az6"])


def manifests(spec: dict) -> list[dict]:
    return serving.kubernetes_serve_manifests(model_of(spec), namespace="ml", queue="llm", claim="fsx-lustre")


def _pod(template: dict) -> tuple[dict, dict]:
    pod = template["spec"]
    (container,) = pod["containers"]
    return pod, container


def test_a_multi_node_replica_is_a_leader_and_its_workers():
    spec = _eks(served(405, nodes=4))
    assert paths(spec) == set()
    lws, service = manifests(spec)
    assert (lws["apiVersion"], lws["kind"]) == (charts.LWS_API, "LeaderWorkerSet")
    assert lws["metadata"] == {"name": "test-cluster-serve", "namespace": "ml",
                               "labels": {kueue.QUEUE_NAME_LABEL: "llm"}}
    assert len(lws["metadata"]["name"]) <= 39  # Kueue's limit for a LeaderWorkerSet's name
    spec_ = lws["spec"]
    assert spec_["replicas"] == 2
    template = spec_["leaderWorkerTemplate"]
    assert (template["size"], template["restartPolicy"]) == (2, "RecreateGroupOnPodRestart")
    group = model_of(spec).group("gpu")
    for role in ("leaderTemplate", "workerTemplate"):
        pod, container = _pod(template[role])
        assert pod["nodeSelector"] == {k8s.NODE_GROUP_LABEL: "gpu"}
        assert pod["tolerations"] == [k8s.GPU_TOLERATION]
        assert container["resources"]["limits"] == {kueue.GPU_RESOURCE: 8, kueue.EFA_RESOURCE: 32}
        assert group.efa_interfaces == 32
        assert {"name": "weights", "persistentVolumeClaim": {"claimName": "fsx-lustre", "readOnly": True}} \
            in pod["volumes"]
        assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in pod["volumes"]
        assert {"name": "weights", "mountPath": "/fsx", "readOnly": True} in container["volumeMounts"]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert {s.name: s.value for s in node_nccl.nccl_settings(group.instance, True)}.items() <= env.items()
        assert env["FI_EFA_USE_HUGE_PAGE"] == "0" and env["HF_HUB_OFFLINE"] == "1"
    _, leader = _pod(template["leaderTemplate"])
    _, worker = _pod(template["workerTemplate"])
    script = leader["command"][2]
    assert "-ge $(LWS_GROUP_SIZE) ]" in script and "--pipeline-parallel-size 2" in script
    assert '--address="$(LWS_LEADER_ADDRESS)":6379' in worker["command"][2]
    assert leader["readinessProbe"]["httpGet"] == {"path": "/health", "port": 8000}
    startup = leader["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= serving.startup_seconds(model_of(spec))
    assert "readinessProbe" not in worker and "ports" not in worker
    assert service["spec"] == {
        "type": "ClusterIP", "selector": {serving.LWS_NAME_LABEL: "test-cluster-serve",
                                          serving.LWS_WORKER_INDEX_LABEL: "0"},
        "ports": [{"name": "http", "port": 8000, "targetPort": 8000, "protocol": "TCP"}]}
    assert service["metadata"]["name"] != lws["metadata"]["name"]  # LWS's own headless Service has that name


def test_replicas_of_one_node_are_pods_of_their_gpus_only():
    lws, _ = manifests(_eks(served(70)))
    template = lws["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 1 and "leaderTemplate" not in template and lws["spec"]["replicas"] == 4
    pod, container = _pod(template["workerTemplate"])
    assert container["resources"]["limits"] == {kueue.GPU_RESOURCE: 4}  # two pods to a node, no EFA
    assert "FI_PROVIDER" not in {e["name"] for e in container["env"]}
    assert container["command"][2].startswith("exec vllm serve /fsx/models/Llama-3.1-70B-Instruct ")
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"


def test_the_container_scripts_pass_shellcheck(tmp_path):
    lws, _ = manifests(_eks(served(405, nodes=4)))
    template = lws["spec"]["leaderWorkerTemplate"]
    scripts = {f"{role}.sh": _pod(template[role])[1]["command"][2] for role in ("leaderTemplate", "workerTemplate")}
    # Kubernetes expands $(VAR) from the container's environment before bash runs the script
    shellcheck(tmp_path, **{name: text.replace("$(LWS_GROUP_SIZE)", "2").replace("$(LWS_LEADER_ADDRESS)", "leader")
                            for name, text in scripts.items()})


def gb200_served(params: float) -> dict:
    spec = with_(gb200(orchestrator_type="eks", version="1.33", extra=("use1-az4", "use1-az6")), "serving",
                 {"node_group": "gb200", "model": {**LLAMA_70B, "parameters_billions": params}})
    return with_(spec, "storage", base_spec()["storage"])


def test_ultraserver_replicas_stay_in_one_nvlink_domain():
    spec = gb200_served(405)
    assert paths(spec) == set()
    _, lws, _ = manifests(spec)
    template = lws["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 2  # 4 x GB200 a node: TP 4 x PP 2
    for role in ("leaderTemplate", "workerTemplate"):
        assert template[role]["metadata"]["annotations"] == {
            kueue.REQUIRED_TOPOLOGY_ANNOTATION: kueue.NVLINK_CLIQUE_LABEL,
            serving.PODSET_GROUP_ANNOTATION: "test-cluster-serve"}
    plain, _ = manifests(_eks(served(405, nodes=4)))  # p5.48xlarge: the network's layer 3, preferred
    for role in ("leaderTemplate", "workerTemplate"):
        assert plain["spec"]["leaderWorkerTemplate"][role]["metadata"]["annotations"] == {
            kueue.PREFERRED_TOPOLOGY_ANNOTATION: "topology.k8s.aws/network-node-layer-3",
            serving.PODSET_GROUP_ANNOTATION: "test-cluster-serve"}


def test_ultraserver_replicas_across_nodes_claim_one_compute_domains_channel():
    """PP 2 on GB200 (4 GPUs a node): NCCL's communicators span two nodes of one NVLink domain, so
    it checks MNNVL and needs an IMEX channel in every container (NVIDIA/nccl src/init.cc,
    src/mnnvl.cc). One ComputeDomain for the set, first (the driver makes its claim template
    before the pods need it), claimed by the leader and the worker of every replica, through the
    acceptance kit's own functions."""
    from tests.support.crds import validate

    spec = gb200_served(405)
    domain, lws, service = manifests(spec)
    assert domain == kubernetes.compute_domain_manifest("test-cluster-serve", namespace="ml")
    validate(domain)
    validate(lws)
    template = lws["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 2
    for role in ("leaderTemplate", "workerTemplate"):
        pod, container = _pod(template[role])
        assert pod["resourceClaims"] == [{"name": "imex-channel",
                                          "resourceClaimTemplateName": "test-cluster-serve-channel"}]
        assert container["resources"]["claims"] == [{"name": "imex-channel"}]
        assert domain["spec"]["channel"]["resourceClaimTemplate"]["name"] == pod["resourceClaims"][0][
            "resourceClaimTemplateName"]
        # whole nodes: one pod a node, as the driver's one channel a node allows
        assert container["resources"]["limits"][kueue.GPU_RESOURCE] == 4
        assert "NCCL_MNNVL_ENABLE" not in {e["name"] for e in container["env"]}
    assert service["kind"] == "Service"


def test_kueue_admits_the_ultraserver_serving_claims():
    """Kueue charges the set one IMEX channel a pod (its DeviceClass mapped), within the flavor's
    quota of one a node (tests/support/kueue.py dra_charge)."""
    from tests.support.kueue import dra_charge, flavor_quota

    spec = gb200_served(405)
    model = model_of(spec)
    documents = manifests(spec)
    lws = documents[1]["spec"]
    pods = lws["replicas"] * lws["leaderWorkerTemplate"]["size"]
    charge = dra_charge(model, documents)
    assert charge == {kueue.IMEX_CHANNEL_RESOURCE: pods}
    assert pods <= flavor_quota(model, "gb200")[kueue.IMEX_CHANNEL_RESOURCE] == model.group("gb200").max_count


def test_ultraserver_replicas_of_one_node_claim_no_channel():
    """PP 1: the replica's communicators stay on its node, NCCL does not check MNNVL (nNodes 1), and
    replicas that share a node could not all hold the node's one channel: no ComputeDomain, no claim."""
    spec = gb200_served(8)
    assert paths(spec) == set()
    documents = manifests(spec)
    assert [d["kind"] for d in documents] == ["LeaderWorkerSet", "Service"]
    pod, container = _pod(documents[0]["spec"]["leaderWorkerTemplate"]["workerTemplate"])
    assert documents[0]["spec"]["leaderWorkerTemplate"]["size"] == 1
    assert "resourceClaims" not in pod and "claims" not in container["resources"]


@pytest.mark.skipif(not LWS_CRD.is_file(), reason=f"no LeaderWorkerSet CRD schema yet ({LWS_CRD.name})")
@pytest.mark.parametrize("params, nodes", [(405, 4), (70, 2)])
def test_the_leaderworkerset_is_valid_against_its_crd(params, nodes):
    from tests.support.crds import validate

    lws, _ = manifests(_eks(served(params, nodes=nodes)))
    validate(lws)


# ---- in the kits that `fmcluster jobs` writes --------------------------------------------------

@pytest.mark.parametrize("kubernetes_plane", [False, True])
def test_fmcluster_jobs_writes_the_serving_job_beside_the_acceptance_kit(tmp_path, kubernetes_plane):
    """With a serving section, the kit carries the serving job of the spec's group: serve.sbatch on
    Slurm, serve.yaml (a LeaderWorkerSet and its Service, validated against Kubernetes' and the
    LWS CRD's schemas) on Kubernetes; the acceptance jobs are the same as without it."""
    import kubernetes_validate
    import yaml

    from fmcluster.kits import jobs
    from tests.support.crds import validate as validate_custom

    spec = served(70, nodes=2)
    if kubernetes_plane:
        spec = _eks(spec)
    model = model_of(spec)
    files = {f.path: f for f in jobs.kit(model)}
    plain = {f.path for f in jobs.kit(model_of(without(spec, "serving")))}
    if kubernetes_plane:
        assert set(files) - plain == {"gpu/serve.yaml"}
        documents = list(yaml.safe_load_all(files["gpu/serve.yaml"].content))
        lws, service = documents
        assert lws["metadata"]["namespace"] == model.spec.orchestrator.namespace
        assert lws["metadata"]["labels"][kueue.QUEUE_NAME_LABEL] == kueue.queue_names(model.spec)[1]
        kubernetes_validate.validate(service, f"{model.spec.orchestrator.version}.0", strict=True)
        if LWS_CRD.exists():
            validate_custom(lws)
        assert "serve" not in files["submit-all.sh"].content
    else:
        assert set(files) - plain == {"gpu/serve.sbatch"}
        assert files["gpu/serve.sbatch"].executable
        assert sbatch_options(files["gpu/serve.sbatch"].content)["partition"] == "gpu"


# ---- the Slurm job, run: stand-ins for srun / scontrol / hostname (tests/support/fake_slurm.py), and for
# vLLM, Ray and the health probe (GPU software and the network). A server is "up" once its
# stand-in has written $FAKE_SLURM_DIR/up/PORT; VLLM_FAIL_PORT's server exits with status 1.

FAKE_VLLM = r'''#!/bin/bash
port=${*: -1}
for (( i = 1; i <= $#; i++ )); do [[ "${!i}" == --port ]] && { j=$((i + 1)); port=${!j}; }; done
echo "vllm $FAKE_HOSTNAME:$port $CUDA_VISIBLE_DEVICES" >>"$FAKE_SLURM_DIR/vllm.log"
if [[ "$port" == "${VLLM_FAIL_PORT:-none}" ]]; then sleep 1; echo "RuntimeError: CUDA error" >&2; exit 1; fi
mkdir -p "$FAKE_SLURM_DIR/up"; touch "$FAKE_SLURM_DIR/up/$port"
exec sleep "${VLLM_STOP_AFTER:-300}"
'''
FAKE_CURL = r'''#!/bin/bash
url=${*: -1}; port=${url##*:}; port=${port%%/*}
[[ -e "$FAKE_SLURM_DIR/up/$port" ]] || exit 7
'''
FAKE_RAY = r'''#!/bin/bash
echo "ray $FAKE_HOSTNAME $*" >>"$FAKE_SLURM_DIR/ray.log"
[[ " $* " == *" --block "* ]] && exec sleep 300
exit 0
'''
FAKE_PYTHON3 = '#!/bin/bash\necho "${RAY_NODES:-2}"\n'  # the head's count of live Ray nodes


def run_serve(model, tmp_path, *, timeout=60, signal_after=None, **env):
    script = serving.slurm_serve_sbatch(model).replace("\nprobe=10\n", "\nprobe=1\n")
    hosts = [f"gpu-{i}" for i in range(1, model.serving.pipeline_parallel + 1)]
    extra = {"vllm": FAKE_VLLM, "curl": FAKE_CURL, "ray": FAKE_RAY, "python3": FAKE_PYTHON3}
    return fake_slurm.run_batch(script, tmp_path, hosts, extra=extra, timeout=timeout, signal_after=signal_after,
                                env={"IMAGE": "docker://acceptance-image", **env})


def srun_images(tmp_path):
    return {m for m in re.findall(r"image=(\S*)", (tmp_path / "srun.log").read_text())}


def test_vllm_dying_on_the_ray_head_fails_the_job_at_once(tmp_path):
    """A replica across two nodes: vLLM exits on the Ray head while the Ray worker step lives on.
    The job says so and ends within seconds, not at the startup deadline (39 minutes here)."""
    model = model_of(served(405, nodes=4))
    assert model.serving.pipeline_parallel == 2 and serving.startup_seconds(model) > 1800
    result = run_serve(model, tmp_path, VLLM_FAIL_PORT="8000")
    assert result.returncode == 1, result.stdout
    assert "fmcluster-serve failed reason=server-exited server=10.0.0.1:8000 step=head status=1" in result.stdout


def test_a_replica_across_nodes_is_ready_and_runs_in_the_serving_image(tmp_path):
    """The same replica healthy: one ready line on the head's address; every step in the serving
    image, never the acceptance kit's IMAGE that the caller's environment has."""
    model = model_of(served(405, nodes=4))
    result = run_serve(model, tmp_path, signal_after=4)
    assert ("fmcluster-serve ready model=meta-llama/Llama-3.1-70B-Instruct url=http://10.0.0.1:8000/v1"
            in result.stdout), result.stdout
    assert "failed" not in result.stdout
    assert srun_images(tmp_path) == {software.VLLM_IMAGE}
    ray = (tmp_path / "ray.log").read_text()
    assert "ray gpu-1 start --head --port=6379 --node-ip-address=10.0.0.1" in ray
    assert "ray gpu-2 start --address=10.0.0.1:6379 --block" in ray


def test_one_of_the_side_by_side_replicas_dying_fails_the_job(tmp_path):
    """Two replicas of TP 4 on one node: the second's vLLM exits; the first is reported ready, the
    second failed, at once."""
    model = model_of(served(70))
    result = run_serve(model, tmp_path, VLLM_FAIL_PORT="8001", SERVE_IMAGE="docker://mirror#vllm/vllm-openai:1")
    assert result.returncode == 1, result.stdout
    lines = [line for line in result.stdout.splitlines() if line.startswith("fmcluster-serve")]
    assert lines == ["fmcluster-serve ready model=meta-llama/Llama-3.1-70B-Instruct url=http://10.0.0.1:8000/v1",
                     "fmcluster-serve failed reason=server-exited server=10.0.0.1:8001 step=node status=1"]
    assert srun_images(tmp_path) == {"docker://mirror#vllm/vllm-openai:1"}
    assert (tmp_path / "serving").is_dir()


def test_a_server_that_stops_after_ready_ends_the_job(tmp_path):
    """Once ready, the job lasts while its steps do: the server stopping ends it, and says so."""
    result = run_serve(model_of(served(405, nodes=4)), tmp_path, VLLM_STOP_AFTER="2")
    assert result.returncode == 1 and "fmcluster-serve ready" in result.stdout
    assert "fmcluster-serve stopped reason=server-exited step=head status=0" in result.stdout


def test_the_kit_readme_tells_the_serving_job_apart(tmp_path):
    """The kit of a spec with a serving section: its README says how to set the acceptance jobs'
    IMAGE and says the serving job takes SERVE_IMAGE and writes to serving/, not results/; the serving
    script never reads IMAGE."""
    from fmcluster.kits import jobs

    model = model_of(served(70))
    files = {f.path: f.content for f in jobs.kit(model)}
    readme, script = files["README.md"], files["gpu/serve.sbatch"]
    assert "IMAGE=docker://" in readme and "fmcluster verify SPEC results/*" in readme
    assert f"`{software.VLLM_IMAGE}`, or the image in `SERVE_IMAGE`" in readme
    assert "mkdir -p serving && sbatch gpu/serve.sbatch" in readme and "`serving/`" in readme
    assert not re.search(r"\$\{?IMAGE\b", script) and "serve.sbatch" not in files["submit-all.sh"]
    assert all(f"{common.RESULTS}/" in sbatch_options(text)["output"] for path, text in files.items()
               if path.endswith(".sbatch") and not path.endswith("serve.sbatch"))


def test_a_teams_serving_goes_to_its_queue_at_its_priority():
    """With teams, the serving LeaderWorkerSet is the team's: its namespace (whose Lustre claim
    fmcluster.kubernetes makes too), its LocalQueue and its priority class, which Kueue's LWS
    webhook copies to the pods."""
    import yaml

    from fmcluster.kits import jobs
    from fmcluster.kubernetes import charts
    from fmcluster.kubernetes import manifests as kubernetes_objects
    from tests.support.crds import validate as validate_custom

    spec = with_(_eks(served(70, nodes=2)), "teams", [
        {"name": "serving", "groups": ["inference"], "gpus": {"gpu": 8}, "priority": "high"},
        {"name": "research", "groups": ["ml-research"], "priority": "low"}])
    model = model_of(spec)
    for team, priority in ((None, "high"), (model.team("research"), "low")):
        files = {f.path: f for f in jobs.kit(model, team)}
        lws, _ = yaml.safe_load_all(files["gpu/serve.yaml"].content)
        namespace = (team or model.teams[0]).name
        assert lws["metadata"]["namespace"] == namespace
        assert lws["metadata"]["labels"] == {kueue.QUEUE_NAME_LABEL: "default", kueue.PRIORITY_CLASS_LABEL: priority}
        if LWS_CRD.exists():
            validate_custom(lws)
        volume = charts.lustre_volume(model, kubernetes_objects.FileSystem("fs-0123", "fs.example", "abc"))
        assert (namespace, kubernetes_objects.LUSTRE_CLAIM) in {
            (d["metadata"]["namespace"], d["metadata"]["name"]) for d in volume if d["kind"] == "PersistentVolumeClaim"}
