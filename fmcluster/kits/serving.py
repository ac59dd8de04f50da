"""The serving jobs of a cluster's `serving` section: the model served by vLLM on its node group,
in the replicas and the tensor x pipeline parallel layout the model resolved
(ClusterModel.serving; fmcluster.facts.inference). Pure: no AWS call, no aws_cdk.

Sources and details: docs/research-notes.md, "fmcluster/kits/serving.py"."""

from __future__ import annotations

import math
import shlex
from typing import Any, Optional

from fmcluster.facts import inference
from fmcluster.facts.inference import Serving
from fmcluster.kits import common, placement
from fmcluster.kubernetes import charts, kueue
from fmcluster.model.cluster import ClusterModel, NodeGroup
from fmcluster.node import nccl

RAY_PORT = 6379  # Ray's default GCS port (`ray start --head`)
# The serving job's outputs: a directory of their own, so that the acceptance kit's results/
# (`fmcluster verify SPEC results/*`) holds only what verify judges.
RESULTS = "serving"
# The image variable of the serving job: not the acceptance kit's IMAGE, which the kit's README
# has the operator export (the acceptance image has neither vLLM nor Ray).
IMAGE_VARIABLE = "SERVE_IMAGE"
# Before the weights are read: the container starts, Ray forms, vLLM profiles memory and captures
# CUDA graphs. fmcluster's allowance, not a measured figure.
STARTUP_FLOOR_S = 900
PROBE_PERIOD_S = 10
# LeaderWorkerSet 0.10.0 labels (kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go):
# every pod has the set's name and its index in its group; a leader's is "0" (the controller
# selects leaders so). The set's own headless Service takes the set's name.
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
# Kueue topology-aware scheduling of a LeaderWorkerSet (kubernetes-sigs/kueue v0.18.3
# site/content/en/docs/tasks/run/leaderworkerset.md): both templates carry the (required or
# preferred) topology and one pod-set group name, so a leader and its workers are placed together
# (pkg/controller/jobframework/tas.go reads the group name with either request).
PODSET_GROUP_ANNOTATION = "kueue.x-k8s.io/podset-group-name"
CONTAINER_MOUNTS_FLAGS = "ro"
HEAD_ADDR = '"$HEAD_ADDR"'  # the Ray head's address in the Slurm containers (exported by the batch script)
LWS_LEADER = '"$(LWS_LEADER_ADDRESS)"'  # the leader's address in an LWS pod (Kubernetes expands it)


def _serving(model: ClusterModel) -> tuple[Serving, NodeGroup]:
    serving = model.serving
    if serving is None:
        raise ValueError(f"{model.name} has no serving section: nothing to serve")
    return serving, model.group(serving.group)


def serving_name(model: ClusterModel) -> str:
    """The LeaderWorkerSet's name (at most 38 characters: Kueue's limit for a LeaderWorkerSet is 39)."""
    return f"{model.name}-serve"


def startup_seconds(model: ClusterModel) -> int:
    """How long a start may take: STARTUP_FLOOR_S, plus every served replica's weights read at once
    at the file system's aggregate baseline throughput (each node reads its own part, so the
    replicas share the file system's throughput)."""
    serving, _ = _serving(model)
    lustre = model.spec.storage.lustre
    if lustre is None:
        raise ValueError(f"{model.name} has no file system to read the weights from")
    read = serving.replicas * serving.placement.weights_gib * inference.GIB / (lustre.throughput_mbps * 1e6)
    return STARTUP_FLOOR_S + math.ceil(read / 60) * 60


def vllm_arguments(serving: Serving, port: str) -> list[str]:
    """`vllm serve`'s arguments (the port: a number or a shell expression)."""
    args = [shlex.quote(serving.path), "--served-model-name", shlex.quote(serving.name),
            "--tensor-parallel-size", str(serving.tensor_parallel),
            "--pipeline-parallel-size", str(serving.pipeline_parallel),
            "--gpu-memory-utilization", f"{serving.gpu_memory_utilization:g}", "--port", port]
    if serving.pipeline_parallel > 1:
        args += ["--distributed-executor-backend", "ray"]
    if serving.max_model_len:
        args += ["--max-model-len", str(serving.max_model_len)]
    return args


def _ray_head(serving: Serving, size: str, node_ip: str | None = None) -> str:
    """Shell (inside the container) that starts the Ray head (on `node_ip` where given, else the
    address Ray finds), waits for `size` Ray nodes and runs vLLM."""
    count = "import ray; ray.init(address=\"auto\", logging_level=\"ERROR\"); " \
            "print(sum(1 for n in ray.nodes() if n[\"Alive\"]))"
    ip = f" --node-ip-address={node_ip}" if node_ip else ""
    return "\n".join([
        f"ray start --head --port={RAY_PORT}{ip} --disable-usage-stats || exit 1",
        f"until [ \"$(python3 -c '{count}' 2>/dev/null || echo 0)\" -ge {size} ]; do",
        "  echo \"waiting for the Ray workers\"; sleep 5",
        "done",
        "exec vllm serve " + " ".join(vllm_arguments(serving, str(inference.PORT)))])


def _ray_worker(head: str) -> str:
    """Shell (inside the container) that waits for the head's Ray port, then joins it."""
    return "\n".join([f"until (exec 3<>/dev/tcp/{head}/{RAY_PORT}) 2>/dev/null; do sleep 5; done",
                      f"exec ray start --address={head}:{RAY_PORT} --block --disable-usage-stats"])


def _side_by_side(serving: Serving) -> str:
    """Shell (inside the container) that runs COUNT replicas on one node, each on its own TP GPUs
    and port (PORT, PORT + 1, ...)."""
    tp = serving.tensor_parallel
    return "\n".join([
        "pids=()",
        "for (( i = 0; i < COUNT; i++ )); do",
        f"  first=$(( i * {tp} ))",
        f"  CUDA_VISIBLE_DEVICES=$(seq -s, \"$first\" $(( first + {tp - 1} ))) \\",
        "    vllm serve " + " ".join(vllm_arguments(serving, "$(( PORT + i ))")) + " &",
        "  pids+=(\"$!\")",
        "done",
        "# the step ends as soon as any replica does, so that the batch script sees it",
        "wait -n; rc=$?",
        "echo \"a vLLM server exited (status $rc): stopping this node's replicas\" >&2",
        "kill \"${pids[@]}\" 2>/dev/null; wait",
        "exit $(( rc ? rc : 1 ))"])


# --- Slurm ------------------------------------------------------------------------------------

_STEPS = r'''# step NAME COMMAND...: a step in the background; $state/NAME holds its exit status once it ends
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
step() {
  local name=$1; shift
  { "$@"; echo "$?" >"$state/$name"; } &
}
# ended NAME...: the first of these steps that has ended, with its status ("" while all run)
ended() {
  local name
  for name; do [[ -e "$state/$name" ]] && { echo "$name status=$(<"$state/$name")"; return; }; done
  return 0
}'''


def _health_wait(timeout: int, name: str, steps: list[str]) -> list[str]:
    """Bash: wait for /health on every server ("ADDR:PORT" of `servers`), each while the steps it
    runs in (`server_steps`, names of `step`) all live: a step that ends fails the job at once.
    Once all are ready, the job lasts while every step does."""
    return [f"deadline=$(( SECONDS + {timeout} ))",
            f"probe={PROBE_PERIOD_S}",
            'for i in "${!servers[@]}"; do',
            '  server=${servers[$i]}',
            '  until curl -sf -o /dev/null "http://$server/health"; do',
            "    # shellcheck disable=SC2086  # a list of step names",
            "    gone=$(ended ${server_steps[$i]})",
            '    if [[ -n "$gone" ]]; then',
            '      echo "fmcluster-serve failed reason=server-exited server=$server step=$gone"; exit 1',
            "    fi",
            "    if (( SECONDS > deadline )); then",
            f'      echo "fmcluster-serve failed reason=not-ready-after-{timeout}s server=$server"; exit 1',
            "    fi",
            '    sleep "$probe"',
            "  done",
            f'  echo "fmcluster-serve ready model={name} url=http://$server/v1"',
            "done",
            "wait -n  # serving until a step ends",
            f'echo "fmcluster-serve stopped reason=server-exited step=$(ended {" ".join(steps)})"',
            "exit 1"]


def submit_line(model: ClusterModel) -> str:
    """The command that submits the serving job: through the kit's placement.sh when a replica
    spans nodes (fmcluster.kits.placement), so that its nodes sit under one network node."""
    serving, group = _serving(model)
    return placement.submit_command(model, group, serving.pipeline_parallel, f"{group.name}/serve.sbatch")


def slurm_serve_sbatch(model: ClusterModel) -> str:
    """The batch script that serves the spec's model on its group's partition (docs/research-notes.md).
    Every step is tracked on its own (`step`, `ended`): the Ray head, its workers, or a node's
    side-by-side replicas (whose step ends as soon as one of them does)."""
    serving, group = _serving(model)
    tp, pp, placed = serving.tensor_parallel, serving.pipeline_parallel, serving.placement
    units, per_unit, timeout = serving.units, placed.replicas_per_unit, startup_seconds(model)
    image = f'--container-image="${IMAGE_VARIABLE}"'
    lines = [
        "#!/bin/bash",
        f"# fmcluster serving job of cluster {model.name}: {serving.name} on node group {group.name} "
        f"({group.max_count} x {group.instance_type}),",
        f"# {serving.replicas} replicas of {tp} x {pp} GPUs (tensor x pipeline parallel), {per_unit} per task "
        f"of {pp} node{'s' if pp > 1 else ''}.",
        f"# `mkdir -p {RESULTS} && {submit_line(model)}` from the kit's directory on the shared file "
        f"system; each server's URL is in {RESULTS}/",
        f"# once it is ready. The image: {IMAGE_VARIABLE} (default {serving.image}; not the acceptance jobs' IMAGE).",
        f"#SBATCH --job-name={group.name}-serve",
        f"#SBATCH --partition={group.name}",
        f"#SBATCH --nodes={pp}",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --exclusive",
        "#SBATCH --wait-all-nodes=1",
        f"#SBATCH --array=0-{units - 1}",
        f"#SBATCH --output={RESULTS}/%x-%A_%a.out",
        "set -uo pipefail",
        f'{IMAGE_VARIABLE}="${{{IMAGE_VARIABLE}:-{serving.image}}}"',
        f"MODEL_PATH={shlex.quote(serving.path)}",
        'mkdir -p "$SLURM_SUBMIT_DIR/' + RESULTS + '"',
        "# the EFA / NCCL environment of the node (fmcluster's bootstrap); Pyxis passes it into the container",
        f"# shellcheck source=/dev/null\n[[ -r {nccl.NCCL_ENV_FILE} ]] && source {nccl.NCCL_ENV_FILE}",
        "export HF_HUB_OFFLINE=1  # the weights are on the file system: never ask a hub",
        f'mounts="$MODEL_PATH:$MODEL_PATH:{CONTAINER_MOUNTS_FLAGS}"',
        'mapfile -t hosts < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        'head="${hosts[0]}"',
        "# the head's address as Slurm knows it (NodeAddr), which the other nodes reach",
        "addr=$(scontrol show node \"$head\" | awk -F'NodeAddr=' 'NF > 1 {split($2, a, \" \"); print a[1]; exit}')",
        'addr="${addr:-$head}"',
        _STEPS,
        "servers=() server_steps=()",
    ]
    if pp == 1:
        lines += [
            f"# this task's replicas: {per_unit} on its node, the last task the rest of the {serving.replicas}",
            f"count=$(( {serving.replicas} - SLURM_ARRAY_TASK_ID * {per_unit} ))",
            f"(( count > {per_unit} )) && count={per_unit}",
            f"export COUNT=$count PORT={inference.PORT}",
            "# shellcheck disable=SC2016  # expanded in the container",
            f'step node srun --nodes=1 --ntasks=1 {image} --container-mounts="$mounts" \\',
            f"  bash -c {shlex.quote(_side_by_side(serving))}",
            'for (( i = 0; i < count; i++ )); do servers+=("$addr:$(( PORT + i ))") server_steps+=(node); done',
        ]
    else:
        lines += [
            "export HEAD_ADDR=\"$addr\"",
            f"# the Ray head, then vllm serve, on the first node; a Ray worker on each of the other {pp - 1}",
            "# shellcheck disable=SC2016  # expanded in the container",
            f'step head srun --nodes=1 --ntasks=1 --nodelist="$head" {image} --container-mounts="$mounts" \\',
            f"  bash -c {shlex.quote(_ray_head(serving, str(pp), HEAD_ADDR))}",
            "# shellcheck disable=SC2016  # expanded in the container",
            f'step workers srun --nodes={pp - 1} --ntasks={pp - 1} --ntasks-per-node=1 --kill-on-bad-exit=1 '
            f'--exclude="$head" {image} --container-mounts="$mounts" \\',
            f"  bash -c {shlex.quote(_ray_worker(HEAD_ADDR))}",
            'servers+=("$addr:' + str(inference.PORT) + '") server_steps+=("head workers")',
        ]
    lines += [f"# loading the weights: up to {timeout} s (STARTUP_FLOOR_S and every replica's weights at the "
              "file system's baseline)",
              *_health_wait(timeout, serving.name, ["node"] if pp == 1 else ["head", "workers"]), ""]
    return "\n".join(lines)


# --- Kubernetes -------------------------------------------------------------------------------

def environment(group: NodeGroup, *, efa: bool) -> list[dict[str, str]]:
    """Container env: the node bootstrap's EFA / NCCL settings (fmcluster.node.nccl; EFA's only
    for pods that ask for the EFA interfaces), no huge pages with EFA, no hub."""
    return [*common.environment(group, efa=efa), {"name": "HF_HUB_OFFLINE", "value": "1"}]


def _probe(period: int, failures: int) -> dict[str, Any]:
    return {"httpGet": {"path": "/health", "port": inference.PORT}, "periodSeconds": period,
            "failureThreshold": failures}


def _container(name: str, image: str, script: str, group: NodeGroup, *, gpus: int, efa: bool,
               mount: str) -> dict[str, Any]:
    limits: dict[str, Any] = {kueue.GPU_RESOURCE: gpus}
    if efa:
        limits[kueue.EFA_RESOURCE] = group.efa_interfaces
    return {"name": name, "image": image, "command": ["bash", "-c", script],
            "env": environment(group, efa=efa), "resources": {"limits": limits},
            "volumeMounts": [{"name": "weights", "mountPath": mount, "readOnly": True}, common.shm()[1]]}


def _serve_probes(container: dict[str, Any], startup: int) -> dict[str, Any]:
    """The server's container: port 8000, ready on /health; a start of up to `startup` seconds."""
    container["ports"] = [{"name": "http", "containerPort": inference.PORT}]
    container["startupProbe"] = _probe(PROBE_PERIOD_S, math.ceil(startup / PROBE_PERIOD_S))
    container["readinessProbe"] = _probe(PROBE_PERIOD_S, 3)
    return container


def _template(group: NodeGroup, container: dict[str, Any], claim: str, annotations: dict[str, str],
              domain: str | None = None) -> dict[str, Any]:
    """A pod template; its pod claims the IMEX channel of the ComputeDomain `domain` where given
    (common.claim_channel)."""
    pod = {**kueue.flavor_placement(group), "containers": [container],
           "volumes": [{"name": "weights", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}},
                       common.shm()[0]]}
    if domain is not None:
        common.claim_channel(group, domain, pod, container)
    return {"metadata": {"annotations": dict(annotations)}, "spec": pod} if annotations else {"spec": pod}


def _annotations(model: ClusterModel, group: NodeGroup, pp: int) -> dict[str, str]:
    """The tightest placement of a replica that fits (Kueue topology). UltraServer groups: inside
    one NVLink domain, required where one holds the replica, else preferred. A network-placed
    group (kueue.network_placed): under one network node of the lowest layer, preferred.
    Several nodes a replica: the leader and workers in one pod-set group, placed together. A
    group whose flavor has no topology: none."""
    domain = group.nvlink_domain
    if group.ultraserver:
        fits = domain is not None and pp <= domain.instances
        annotation = kueue.REQUIRED_TOPOLOGY_ANNOTATION if fits else kueue.PREFERRED_TOPOLOGY_ANNOTATION
        annotations = {annotation: kueue.NVLINK_CLIQUE_LABEL}
    else:
        annotations = kueue.topology_request(group)
    if annotations and pp > 1:
        annotations[PODSET_GROUP_ANNOTATION] = serving_name(model)
    return annotations


def kubernetes_serve_manifests(model: ClusterModel, *, namespace: str, queue: str, claim: str,
                               priority: Optional[str] = None) -> list[dict[str, Any]]:
    """The LeaderWorkerSet and the Service that serve the spec's model (docs/research-notes.md), in
    `namespace`, admitted through the Kueue LocalQueue `queue` (at the WorkloadPriorityClass
    `priority`, where a team's; Kueue 0.18.3's LeaderWorkerSet webhook copies the label to the pod
    templates), the weights read from the Lustre PersistentVolumeClaim `claim` (mounted read-only
    at the file system's mount path).

    On an UltraServer group, a replica of several nodes (PP > 1) has an IMEX channel in every pod:
    NCCL checks Multi-Node NVLink when a communicator spans more than one node (NVIDIA/nccl
    src/init.cc, NCCL_MNNVL_ENABLE's default 2) and fails without a channel in the container
    (src/mnnvl.cc: "MNNVL ... is available but not working ... Check the IMEX channel
    configuration"). So the set has one ComputeDomain, first, which every pod of every replica
    claims, as the acceptance kit's jobs do (common.compute_domain, claim_channel; NVIDIA's
    DRA driver: one ComputeDomain a workload, its daemons following the pods, a domain a clique).
    A replica of one node (PP 1) gets none: its communicators never leave the node, so NCCL does not
    check MNNVL, and the driver gives a node's channel to one pod at a time, which replicas sharing
    a node could not all have."""
    serving, group = _serving(model)
    lustre = model.spec.storage.lustre
    if lustre is None:
        raise ValueError(f"{model.name} has no file system to read the weights from")
    name, pp, mount = serving_name(model), serving.pipeline_parallel, lustre.mount_path
    startup, annotations = startup_seconds(model), _annotations(model, group, pp)
    template: dict[str, Any] = {"size": pp, "restartPolicy": "RecreateGroupOnPodRestart"}
    domains = common.compute_domain(group, name, namespace=namespace) if pp > 1 else []
    domain = name if domains else None
    if pp == 1:
        serve = "exec vllm serve " + " ".join(vllm_arguments(serving, str(inference.PORT)))
        container = _container("vllm", serving.image, serve, group, gpus=serving.tensor_parallel, efa=False,
                               mount=mount)
        template["workerTemplate"] = _template(group, _serve_probes(container, startup), claim, annotations)
    else:
        efa = group.efa_interfaces > 0
        leader = _container("vllm-leader", serving.image,
                            _ray_head(serving, "$(LWS_GROUP_SIZE)"), group,
                            gpus=group.gpus, efa=efa, mount=mount)
        worker = _container("vllm-worker", serving.image, _ray_worker(LWS_LEADER), group,
                            gpus=group.gpus, efa=efa, mount=mount)
        template["leaderTemplate"] = _template(group, _serve_probes(leader, startup), claim, annotations, domain)
        template["workerTemplate"] = _template(group, worker, claim, annotations, domain)
    labels = {kueue.QUEUE_NAME_LABEL: queue}
    if priority is not None:
        labels[kueue.PRIORITY_CLASS_LABEL] = priority
    lws = {"apiVersion": charts.LWS_API, "kind": "LeaderWorkerSet",
           "metadata": {"name": name, "namespace": namespace, "labels": labels},
           "spec": {"replicas": serving.replicas, "leaderWorkerTemplate": template}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"{name}-api", "namespace": namespace},
               "spec": {"type": "ClusterIP", "selector": {LWS_NAME_LABEL: name, LWS_WORKER_INDEX_LABEL: "0"},
                        "ports": [{"name": "http", "port": inference.PORT, "targetPort": inference.PORT,
                                   "protocol": "TCP"}]}}
    return [*domains, lws, service]
