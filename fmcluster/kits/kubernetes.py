"""The acceptance kit of a Kubernetes cluster (`eks`, `hyperpod-eks`): the Slurm kit's four jobs
(fmcluster.kits.jobs) as Kueue-admitted manifests, with the same output markers, so `fmcluster verify`
reads both alike. Pure: no AWS call, no aws_cdk.

Sources and details: docs/research-notes.md, "fmcluster/kits/kubernetes.py"."""

from __future__ import annotations

import math
import textwrap
from typing import Any, Optional

import yaml

from fmcluster.facts import kubernetes as k8s
from fmcluster.facts import node as node_facts
from fmcluster.kits import reference, serving
from fmcluster.kits.common import (
    FIO_JOBS,
    PYTORCH_IMAGE_REF,
    RESULTS,
    SMOKE_CHECKPOINT_BYTES,
    SMOKE_STEPS,
    FioTarget,
    KitFile,
    checkpoint_seconds,
    claim_channel,
    compute_domain,
    environment,
    expected_json,
    figures_table,
    instance_store_gib,
    kit_groups,
    largest_message,
    left_out_lines,
    shm,
)
from fmcluster.kits.kubernetes_scripts import NODE_NAME_FILE, TORCHRUN_STOP_S, scripts
from fmcluster.kubernetes import charts, kueue
from fmcluster.kubernetes import manifests as kubernetes
from fmcluster.kubernetes.capacity_end import MAX_EXEC_TIME_LABEL, with_kubernetes_ends
from fmcluster.model.cluster import ClusterModel, NodeGroup
from fmcluster.model.teams import Team

KUBERNETES_PLANES = ("eks", "hyperpod-eks")
KIT_CONFIG_MAP = "fmcluster-acceptance"
KIT_MOUNT = "/kit"
ACCEPTANCE_LABEL = k8s.LABEL_PREFIX + "acceptance"  # every kit object: its test

# The image of the nccl and fio jobs: the group's reference image (fmcluster.kits.reference), its
# account reference.ACCOUNT until submit-all.sh fills it in where the spec names none; without a
# reference image (images.reference: false), this placeholder until `IMAGE=... ./submit-all.sh`
# puts the user's image in (the Slurm kit reads IMAGE the same way).
IMAGE_PLACEHOLDER = "fmcluster.invalid/set-IMAGE-to-the-reference-image:latest"

# NVIDIA's DCGM image: NVIDIA/DCGM tag v4.6.0 docker/Makefile (DCGM_VERSION 4.4.1, FULL_VERSION
# 4.4.1-2, tag FULL_VERSION-ubuntu22.04, linux/amd64 and linux/arm64), published on NGC under
# nvcr.io/nvidia/cloud-native. Its entry point is nv-hostengine; the job runs dcgmi beside it.
DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.4.1-2-ubuntu22.04"
NODE_NAME_ENV = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
COMPLETE_CONDITIONS = ("Succeeded", "Complete", "Failed")
LOG_LABELS = {  # the labels of the pods whose logs are a job's output
    "MPIJob": "training.kubeflow.org/job-name={name},training.kubeflow.org/job-role=launcher",
    "PyTorchJob": "training.kubeflow.org/job-name={name},training.kubeflow.org/replica-type=master",
    "Job": "batch.kubernetes.io/job-name={name}",
}
TESTS = ("dcgm", "nccl", "fio", "smoke")


def image(model: ClusterModel, group: NodeGroup) -> str:
    """The image of a group's nccl and fio jobs as the manifests name it: its reference image, in
    the spec's account or reference.ACCOUNT; IMAGE_PLACEHOLDER without one."""
    built = model.reference_image(group)
    return IMAGE_PLACEHOLDER if built is None else built.uri(model.spec.account or reference.ACCOUNT,
                                                             model.spec.region)


def _name(group: NodeGroup, test: str) -> str:
    return f"{group.name}-{test}"


# What a job declares to Kueue (MAX_EXEC_TIME_LABEL) beyond its activeDeadlineSeconds. Kueue counts
# from its Admitted transition (v0.18.3 workload_controller.go reconcileMaxExecutionTime), before it
# unsuspends the job, whose deadline counts from its startTime, set at the unsuspension; the job is
# Failed only once its pods have ended (their grace period: SMOKE_GRACE_S at most). Declared equal,
# Kueue would stop the job first, by deactivating it: suspended, never Failed, collect.sh would wait
# for it until its TIMEOUT. With this margin the job's own deadline ends it, Kueue's is a backstop.
DEADLINE_MARGIN_S = 300


def _metadata(model: ClusterModel, name: str, test: str, team: Optional[Team], *, queued: bool = True,
              seconds: Optional[int] = None) -> dict[str, Any]:
    """A kit object's metadata: in the namespace kueue.job_queue gives (the team's, where there are
    teams), and a job there in its LocalQueue at the team's own priority class, declaring to Kueue
    the `seconds` it runs at most, where known (its activeDeadlineSeconds, and DEADLINE_MARGIN_S:
    MAX_EXEC_TIME_LABEL, which holds it back from a group whose capacity ends sooner)."""
    namespace, queue, priority = kueue.job_queue(model, team)
    labels = {ACCEPTANCE_LABEL: test}
    if queued:
        labels[kueue.QUEUE_NAME_LABEL] = queue
        if priority is not None:
            labels[kueue.PRIORITY_CLASS_LABEL] = priority
    if seconds is not None:
        labels[MAX_EXEC_TIME_LABEL] = str(seconds + DEADLINE_MARGIN_S)
    return {"name": name, "namespace": namespace, "labels": labels}


def _placement(group: NodeGroup) -> dict[str, Any]:
    return kueue.flavor_placement(group)


def _kit_volume() -> tuple[dict[str, Any], dict[str, Any]]:
    return ({"name": "kit", "configMap": {"name": KIT_CONFIG_MAP, "defaultMode": 0o555}},
            {"name": "kit", "mountPath": KIT_MOUNT, "readOnly": True})


def _accelerators(group: NodeGroup) -> dict[str, Any]:
    """All the node's GPUs and EFA interfaces (extended resources: limits only, requests follow)."""
    limits: dict[str, Any] = {kueue.GPU_RESOURCE: group.gpus}
    if group.efa_interfaces:
        limits[kueue.EFA_RESOURCE] = group.efa_interfaces
    return {"limits": limits}


def _template(group: NodeGroup, pod: dict[str, Any]) -> dict[str, Any]:
    """A pod template with the tightest placement that fits (kueue.topology_request): inside one
    NVLink domain where the group fits in one, else preferably one; on a network-placed group
    preferably under one network node of the lowest layer. Every pod set of a job on the group's
    nodes asks, its launcher too: Kueue gives a TAS flavor only to pod sets that ask, where the
    ClusterQueue also has flavors without topology."""
    annotations = kueue.topology_request(group)
    if annotations:
        return {"metadata": {"annotations": annotations}, "spec": pod}
    return {"spec": pod}


def kit_config_map(model: ClusterModel, team: Optional[Team] = None) -> dict[str, Any]:
    meta = _metadata(model, KIT_CONFIG_MAP, "kit", team, queued=False)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": scripts()}


# --- the jobs -----------------------------------------------------------------------------------


def nccl_manifests(model: ClusterModel, group: NodeGroup, team: Optional[Team] = None) -> list[dict[str, Any]]:
    name = _name(group, "nccl")
    env = environment(group)
    kit_volume, kit_mount = _kit_volume()
    shm_volume, shm_mount = shm()
    launcher_env = [{"name": "GROUP", "value": group.name}, {"name": "GPUS", "value": str(group.gpus)},
                    {"name": "SIZE", "value": largest_message(group)},
                    {"name": "NCCL_VARS", "value": " ".join(e["name"] for e in env)}, *env]
    launcher = {"restartPolicy": "OnFailure", **_placement(group),
                "containers": [{"name": "launcher", "image": image(model, group),
                                "command": ["bash", f"{KIT_MOUNT}/nccl.sh"], "env": launcher_env,
                                "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
                                "volumeMounts": [kit_mount]}],
                "volumes": [kit_volume]}
    worker_container = {
        "name": "worker", "image": image(model, group),
        # the operator's default worker command is sshd (kubeflow/mpi-operator v0.6.0
        # pkg/controller/mpi_job_controller.go); first the node's name, for the launcher's markers
        "command": ["bash", "-c", f'printf %s "$NODE_NAME" >{NODE_NAME_FILE} && exec /usr/sbin/sshd -De'],
        "env": [dict(NODE_NAME_ENV), *env], "resources": _accelerators(group), "volumeMounts": [shm_mount]}
    worker = {**_placement(group), "containers": [worker_container], "volumes": [shm_volume]}
    claim_channel(group, name, worker, worker_container)
    mpijob = {
        "apiVersion": charts.MPIJOB_API, "kind": "MPIJob", "metadata": _metadata(model, name, "nccl", team),
        "spec": {"slotsPerWorker": group.gpus, "mpiImplementation": "OpenMPI",
                 "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 6},
                 "mpiReplicaSpecs": {
                     "Launcher": {"replicas": 1, "template": _template(group, launcher)},
                     "Worker": {"replicas": group.max_count, "template": _template(group, worker)}}}}
    return [*compute_domain(group, name), mpijob]


def _per_node_job(model: ClusterModel, group: NodeGroup, test: str, container: dict[str, Any],
                  volumes: list[dict[str, Any]], hours: int, team: Optional[Team]) -> dict[str, Any]:
    """An Indexed Job with one pod on every node of the group (pod anti-affinity on the host)."""
    name = _name(group, test)
    if kueue.group_topology(group) is not None:
        # Kueue's topology-aware scheduling assigns each pod a node by free capacity alone (it reads
        # no pod anti-affinity: kubernetes-sigs/kueue v0.18.3 pkg/cache/scheduler), so on a TAS
        # flavor the pod holds the node's GPUs, which only one pod can: one pod a node there too
        container["resources"].setdefault("limits", {})[kueue.GPU_RESOURCE] = group.gpus
    pod = {"restartPolicy": "Never", **_placement(group),
           "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
               {"labelSelector": {"matchLabels": {"batch.kubernetes.io/job-name": name}},
                "topologyKey": kueue.HOSTNAME_LABEL}]}},
           "containers": [container], "volumes": volumes}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": _metadata(model, name, test, team, seconds=hours * 3600),
            "spec": {"completionMode": "Indexed", "completions": group.max_count,
                     "parallelism": group.max_count, "backoffLimit": 0,
                     "activeDeadlineSeconds": hours * 3600, "template": _template(group, pod)}}


def dcgm_manifests(model: ClusterModel, group: NodeGroup, team: Optional[Team] = None) -> list[dict[str, Any]]:
    kit_volume, kit_mount = _kit_volume()
    container = {"name": "dcgm", "image": DCGM_IMAGE, "command": ["bash", f"{KIT_MOUNT}/dcgm.sh"],
                 "env": [{"name": "GROUP", "value": group.name}, dict(NODE_NAME_ENV)],
                 # NVIDIA's DCGM container documentation runs diagnostics with SYS_ADMIN
                 "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}},
                 "resources": {"limits": {kueue.GPU_RESOURCE: group.gpus}}, "volumeMounts": [kit_mount]}
    return [_per_node_job(model, group, "dcgm", container, [kit_volume], 1, team)]


# The pod's /scratch on eks: an emptyDir on the node's root volume, at most this size (a pod that
# writes more is evicted); on hyperpod-eks the node's instance store (hostPath /scratch).
SCRATCH_EMPTY_DIR_GIB = 64


def fio_targets(model: ClusterModel, group: NodeGroup) -> list[tuple[FioTarget, dict[str, Any]]]:
    """Each place the fio job measures (common.FioTarget: at most a tenth of its capacity written, as
    on Slurm), with the pod's volume there."""
    targets = []
    lustre = model.spec.storage.lustre
    if lustre is not None:
        targets.append((FioTarget.sized("fio-fsx", lustre.mount_path, lustre.storage_capacity_gib,
                                        max(group.max_count, 1)),
                        {"name": "fsx", "persistentVolumeClaim": {"claimName": kubernetes.LUSTRE_CLAIM}}))
    if group.instance.nvme_disks:
        if model.control_plane.type == "hyperpod-eks":
            scratch: dict[str, Any] = {"name": "scratch", "hostPath": {"path": node_facts.SCRATCH_PATH,
                                                                       "type": "Directory"}}
            capacity = instance_store_gib(group)
        else:
            scratch = {"name": "scratch", "emptyDir": {"sizeLimit": f"{SCRATCH_EMPTY_DIR_GIB}Gi"}}
            capacity = SCRATCH_EMPTY_DIR_GIB
        targets.append((FioTarget.sized("fio-scratch", node_facts.SCRATCH_PATH, capacity, 1), scratch))
    return targets


def fio_manifests(model: ClusterModel, group: NodeGroup, team: Optional[Team] = None) -> list[dict[str, Any]]:
    kit_volume, kit_mount = _kit_volume()
    targets = fio_targets(model, group)
    container = {"name": "fio", "image": image(model, group), "command": ["bash", f"{KIT_MOUNT}/fio.sh"],
                 "env": [{"name": "GROUP", "value": group.name}, dict(NODE_NAME_ENV),
                         {"name": "TARGETS", "value": " ".join(f"{t.test}:{t.path}:{t.job_mib}" for t, _ in targets)},
                         {"name": "FIO_JOBS", "value": str(FIO_JOBS)}],
                 "resources": {"requests": {"cpu": "8", "memory": "8Gi"}},
                 "volumeMounts": [kit_mount, *({"name": v["name"], "mountPath": t.path} for t, v in targets)]}
    if not targets:
        return []
    return [_per_node_job(model, group, "fio", container, [kit_volume, *(v for _, v in targets)], 1, team)]


# The smoke pods end as smoke.sh passes their SIGTERM on (kubernetes_scripts.SMOKE_SH): the
# checkpoint gets torchrun's TORCHRUN_STOP_S, then torchrun and the shell end; the grace period is
# those and Kubernetes' default 30 s more (terminationGracePeriodSeconds' default) for them to end.
# A pod ended so exits 143 and the job restarts it (ExitCode); a failure of the test itself exits 0,
# the job completes and verify FAILs its output (kubernetes_scripts.SMOKE_SH). backoffLimit does not
# bound the restarts: the pinned operator counts the restarts of pods' containers, and an ExitCode
# restart makes the pod anew (kubeflow/training-operator issue 2045); activeDeadlineSeconds does.
# It must not be 0, which fails the job at its first failed pod, the 143 one too (common/job.go).
SMOKE_GRACE_S = TORCHRUN_STOP_S + 30
SMOKE_RESTARTS = 3
SMOKE_DEADLINE_S = 3600


# The last part of a smoke job's checkpoint directory, which submit-all.sh replaces with the
# submission's own (SUBMISSION_LINES): a job submitted again (its name the same) never resumes from
# a checkpoint an earlier submission left, one stopped and then deleted, or failed, before it resumed.
# The pods cannot tell one submission of a name from another themselves (the downward API gives no
# owner's uid, and neither the training operator nor Kueue labels the pods with one).
SUBMISSION = "fmcluster-submission"
SUBMISSION_LINES = [
    "# the smoke jobs' checkpoints: a directory of this submission's own (never an earlier one's)",
    "submission=$(date -u +%Y%m%dT%H%M%SZ)-$$",
    f'edit="${{edit:+$edit;}}s|/{SUBMISSION}|/$submission|"']


def smoke_checkpoints(model: ClusterModel, group: NodeGroup, team: Optional[Team] = None) -> str:
    """Where the group's smoke job keeps its checkpoints: its own directory on the Lustre file
    system, one a submission (SUBMISSION; "" without one: the job saves none)."""
    lustre = model.spec.storage.lustre
    if lustre is None:
        return ""
    namespace, _, _ = kueue.job_queue(model, team)
    return f"{lustre.mount_path}/fmcluster-checkpoints/{namespace}/{_name(group, 'smoke')}/{SUBMISSION}"


def smoke_manifests(model: ClusterModel, group: NodeGroup, team: Optional[Team] = None) -> list[dict[str, Any]]:
    name = _name(group, "smoke")
    kit_volume, kit_mount = _kit_volume()
    shm_volume, shm_mount = shm()
    checkpoints = smoke_checkpoints(model, group, team)
    volumes, mounts = [kit_volume, shm_volume], [kit_mount, shm_mount]
    if checkpoints:
        lustre = model.spec.storage.lustre
        assert lustre is not None
        volumes.append({"name": "fsx", "persistentVolumeClaim": {"claimName": kubernetes.LUSTRE_CLAIM}})
        mounts.append({"name": "fsx", "mountPath": lustre.mount_path})

    def replica(count: int) -> dict[str, Any]:
        # the training operator sets torchrun's PET_* variables (nodes, rank, rendezvous); the
        # container must be named "pytorch"
        container = {"name": "pytorch", "image": PYTORCH_IMAGE_REF, "command": ["bash", f"{KIT_MOUNT}/smoke.sh"],
                     "env": [{"name": "GROUP", "value": group.name}, {"name": "STEPS", "value": str(SMOKE_STEPS)},
                             {"name": "CHECKPOINTS", "value": checkpoints}, *environment(group)],
                     "resources": _accelerators(group), "volumeMounts": [dict(m) for m in mounts]}
        pod = {**_placement(group), "terminationGracePeriodSeconds": SMOKE_GRACE_S, "containers": [container],
               "volumes": [dict(v) for v in volumes]}
        claim_channel(group, name, pod, container)
        return {"replicas": count, "restartPolicy": "ExitCode", "template": _template(group, pod)}

    specs = {"Master": replica(1)}
    if group.max_count > 1:
        specs["Worker"] = replica(group.max_count - 1)
    job = {"apiVersion": charts.PYTORCHJOB_API, "kind": "PyTorchJob",
           "metadata": _metadata(model, name, "smoke", team, seconds=SMOKE_DEADLINE_S),
           "spec": {"nprocPerNode": str(group.gpus),
                    "runPolicy": {"backoffLimit": SMOKE_RESTARTS, "activeDeadlineSeconds": SMOKE_DEADLINE_S},
                    "pytorchReplicaSpecs": specs}}
    return [*compute_domain(group, name), job]


RENDERERS = {"dcgm": dcgm_manifests, "nccl": nccl_manifests, "fio": fio_manifests, "smoke": smoke_manifests}


def manifests(model: ClusterModel, group: NodeGroup, test: str, team: Optional[Team] = None
              ) -> list[dict[str, Any]]:
    """The objects of one test of one group, namespaced (ComputeDomains too): in the team's
    namespace and queue where there are teams (kueue.job_queue)."""
    found = RENDERERS[test](model, group, team)
    namespace, _, _ = kueue.job_queue(model, team)
    for manifest in found:
        manifest["metadata"]["namespace"] = namespace
    return found


class _Dumper(yaml.SafeDumper):
    """YAML without anchors and aliases: the same env list on two containers is written twice."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump(documents: list[dict[str, Any]], comment: str) -> str:
    body = "---\n".join(yaml.dump(d, Dumper=_Dumper, sort_keys=False, width=120) for d in documents)
    return "".join(f"# {line}\n" if line else "#\n" for line in comment.splitlines()) + body


# --- submit, collect, README -----------------------------------------------------------------


def submit_all(model: ClusterModel, jobs: list[tuple[str, str]], team: Optional[Team] = None) -> str:
    """Create every job, with each group's image in (fmcluster.kits.reference): IMAGE, when set, in
    place of every reference image and IMAGE_PLACEHOLDER; else the placeholders' account filled in
    (the spec's has none) from the workstation's credentials, and IMAGE required where a group has
    no reference image."""
    namespace, _, _ = kueue.job_queue(model, team)
    images = sorted({image(model, g) for g in kit_groups(model, team)[0]})
    lines = ["#!/bin/bash", "# Create every acceptance job of the kit (from its directory), with its images.",
             "set -euo pipefail", 'cd "$(dirname "$0")"',
             *reference.kubernetes_images(model, images, IMAGE_PLACEHOLDER), *SUBMISSION_LINES]
    lines += ["kubectl apply -f kit.yaml",
              f"mkdir -p {RESULTS} && cp expected.json {RESULTS}/  # the groups fmcluster verify expects results of",
              "submit() {  # FILE: replace an earlier run, then create it with the images",
              '  sed "$edit" "$1" | kubectl delete --ignore-not-found --wait -f - >/dev/null',
              '  sed "$edit" "$1" | kubectl create -f -',
              "}"]
    lines += [f"submit {path}" for path, _ in jobs]
    lines.append(f'echo "submitted; when they have run: ./collect.sh (namespace {namespace})"')
    return "\n".join(lines) + "\n"


def collect(model: ClusterModel, jobs: list[tuple[str, str]], team: Optional[Team] = None) -> str:
    """Wait for each job (any of COMPLETE_CONDITIONS) and write its pods' logs to results/."""
    namespace, _, _ = kueue.job_queue(model, team)
    conditions = "|".join(COMPLETE_CONDITIONS)
    script = textwrap.dedent(f'''\
        #!/bin/bash
        # Wait for every acceptance job of the kit and write its output to {RESULTS}/ (for fmcluster verify).
        set -uo pipefail
        cd "$(dirname "$0")" || exit
        mkdir -p {RESULTS}
        TIMEOUT=${{TIMEOUT:-10800}}  # seconds to wait for each job
        ns={namespace}
        collect() {{  # KIND NAME SELECTOR PODS
          local kind=$1 name=$2 selector=$3 pods=$4 waited=0 state=""
          until [[ $state =~ ^({conditions})$ ]]; do
            state=$(kubectl get "$kind" "$name" -n "$ns" \\
              -o jsonpath='{{range .status.conditions[?(@.status=="True")]}}{{.type}}{{"\\n"}}{{end}}' 2>/dev/null \\
              | grep -E -m1 '^({conditions})$' || true)
            if (( waited >= TIMEOUT )); then echo "$kind/$name: not finished after $TIMEOUT s" >&2; return 1; fi
            [[ -n $state ]] || {{ sleep 30; waited=$(( waited + 30 )); }}
          done
          kubectl logs -n "$ns" -l "$selector" --tail=-1 --max-log-requests="$pods" >"{RESULTS}/$name.out" 2>&1
          echo "$kind/$name: $state, {RESULTS}/$name.out"
        }}
        ''')
    lines = [script.rstrip("\n")]
    for _, manifest_kind_name in jobs:
        kind, name, pods = manifest_kind_name.split(" ")
        lines.append(f"collect {kind.lower()} {name} '{LOG_LABELS[kind].format(name=name)}' {pods}")
    lines.append('echo "now: fmcluster verify SPEC ' + RESULTS + '/*"')
    return "\n".join(lines) + "\n"


def _run_time_lines(model: ClusterModel) -> list[str]:
    """The README's paragraph on the jobs' declared run times (MAX_EXEC_TIME_LABEL)."""
    text = (f"The dcgm, fio and smoke jobs declare their run time to Kueue (label `{MAX_EXEC_TIME_LABEL}`, their "
            f"activeDeadlineSeconds and {DEADLINE_MARGIN_S} s more: the job's own deadline fails it first, "
            "Kueue would stop one that ran longer); the nccl job declares none.")
    if with_kubernetes_ends(model):
        text += (" On a group whose Capacity Block or training plan ends before such a job could finish (before "
                 "the end's signal), fmcluster holds it back: deactivated as soon as Kueue admits it there, it "
                 "stays so until an extension makes room or the signal comes, then Kueue admits it onto another "
                 "group or it waits for the capacity. Declare the label on your own jobs to have them held back "
                 "the same way.")
    return [*textwrap.wrap(text, 100, break_long_words=False, break_on_hyphens=False), ""]


def _smoke_end_lines(model: ClusterModel, team: Optional[Team]) -> list[str]:
    """The README's paragraph on the smoke job living through the end of its capacity."""
    seconds = checkpoint_seconds(model)
    lustre = model.spec.storage.lustre
    if seconds is None or lustre is None:
        text = ("The smoke job saves no checkpoint: the spec has no Lustre file system to keep one on. Its pods' "
                "SIGTERM (an eviction) ends them, and the job runs them again from the start.")
    else:
        namespace, _, _ = kueue.job_queue(model, team)
        text = ("The smoke job also shows a job living through the end of its capacity. On its pods' SIGTERM (an "
                "eviction, as before a Capacity Block ends, or a preemption) every rank finishes its step and "
                f"smoke.py saves a checkpoint into `{lustre.mount_path}/fmcluster-checkpoints/{namespace}/GROUP-smoke/"
                "SUBMISSION` (SUBMISSION: when `submit-all.sh` ran, so a job submitted again starts afresh; "
                f"`{SUBMISSION}` for a job created without it; the directory of a run that never completed stays "
                f"there) on the Lustre claim (about {SMOKE_CHECKPOINT_BYTES / 1e9:.1f} GB: about "
                f"{math.ceil(seconds)} s at the file system's baseline of {lustre.throughput_mbps:,.0f} MB/s, within "
                f"the {TORCHRUN_STOP_S} s "
                f"torchrun gives its workers after a SIGTERM; the pods' grace period is {SMOKE_GRACE_S} s). The pods "
                "then exit 143, which the job's ExitCode restart policy restarts, and the next run resumes from "
                "the checkpoint; `collect.sh` writes the restarted pods' logs, whose resumed line gives "
                "`fmcluster verify` the checkpoint's write time.")
    return [*textwrap.wrap(text, 100, break_long_words=False, break_on_hyphens=False), ""]


def readme(model: ClusterModel, team: Optional[Team] = None) -> str:
    groups, left = kit_groups(model, team)
    namespace, queue, priority = kueue.job_queue(model, team)
    as_team = [] if priority is None else [
        f"They run as team `{namespace}`, at its priority class `{priority}` (label {kueue.PRIORITY_CLASS_LABEL}),",
        "within its quota and what it may borrow; kubectl needs a role of the team (its namespace).", ""]
    lines = [f"# Acceptance kit of {model.name} ({model.control_plane.type})", "",
             "Written by `fmcluster jobs`. With kubectl on the cluster (`aws eks update-kubeconfig`) and the",
             "cluster account's AWS credentials, from this directory:", "",
             "```", "./submit-all.sh", "./collect.sh", "```", "",
             f"The jobs run in namespace `{namespace}` through the Kueue LocalQueue `{queue}`, one group at a time",
             "as quota frees up (each asks for every node of its group). `collect.sh` waits for each job and",
             "writes its logs to `results/`; then, where fmcluster is installed:",
             "`fmcluster verify SPEC results/*`.", "",
             *reference.readme_lines(model, groups, slurm=False), *_run_time_lines(model),
             *_smoke_end_lines(model, team),
             *as_team, *left_out_lines(left), *figures_table(model, groups)]
    return "\n".join(lines) + "\n"


def kubernetes_kit(model: ClusterModel, team: Team | None = None) -> list[KitFile]:
    files = []
    jobs: list[tuple[str, str]] = []  # (path, "KIND NAME PODS") of each job, in submission order
    groups = kit_groups(model, team)[0]
    for group in groups:
        for test in TESTS:
            documents = manifests(model, group, test, team)
            if not documents:
                continue
            path = f"{group.name}/{test}.yaml"
            files.append(KitFile(path, dump(documents, (
                f"fmcluster acceptance job {test} of node group {group.name} ({group.max_count} x "
                f"{group.instance_type}) of cluster {model.name}.\n"
                "Create it with ../submit-all.sh (which puts the image in); ../collect.sh writes its output."))))
            job = documents[-1]
            pods = group.max_count + (1 if job["kind"] == "MPIJob" else 0)
            jobs.append((path, f"{job['kind']} {job['metadata']['name']} {pods}"))
    if model.serving is not None:  # the spec's model, served on its group (fmcluster.kits.serving); not in submit-all
        namespace, queue, priority = kueue.job_queue(model, team)
        served = serving.kubernetes_serve_manifests(model, namespace=namespace, queue=queue,
                                                    claim=kubernetes.LUSTRE_CLAIM, priority=priority)
        files.append(KitFile(f"{model.serving.group}/serve.yaml", dump(served, (
            f"fmcluster serving of {model.serving.name} on node group {model.serving.group} of cluster {model.name}:\n"
            "a LeaderWorkerSet and its Service (and, across UltraServer nodes, the ComputeDomain of its IMEX\n"
            "channel). `kubectl apply -f` it (it is not an acceptance job)."))))
    files[:0] = [
        KitFile("README.md", readme(model, team)),
        KitFile("kit.yaml", dump([kit_config_map(model, team)],
                                 "The scripts of the acceptance jobs, mounted at /kit.")),
        KitFile("submit-all.sh", submit_all(model, jobs, team), True),
        KitFile("collect.sh", collect(model, jobs, team), True),
        expected_json(model, groups), reference.recipe()]
    return files
