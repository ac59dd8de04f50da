"""The acceptance kit of a cluster (`fmcluster jobs SPEC -o DIR`): ready-to-run jobs in the native
form of its control plane that show the cluster delivers what was paid for before the first
real job, and whose outputs `fmcluster verify` judges against fmcluster.model.expected. Pure: no AWS
call, no aws_cdk.

Sources and details: docs/research-notes.md, "fmcluster/kits/jobs.py"."""

from __future__ import annotations

import shlex
import textwrap

from fmcluster.facts import node as node_facts
from fmcluster.kits import kubernetes as jobs_kubernetes
from fmcluster.kits import placement, reference, serving
from fmcluster.kits.common import (
    FIO_JOBS,
    PYTORCH_IMAGE_REF,
    RESULTS,
    SMOKE_CHECKPOINT_BYTES,
    SMOKE_PY,
    SMOKE_STEPS,
    FioTarget,
    KitFile,
    expected_json,
    figures_table,
    instance_store_gib,
    kit_groups,
    largest_message,
    left_out_lines,
)
from fmcluster.model import expected
from fmcluster.model.cluster import ClusterModel, NodeGroup
from fmcluster.model.teams import Team
from fmcluster.node import nccl, topology

# The images the jobs run. nccl-tests and fio: the group's reference image, built by NAME-reference
# (fmcluster.kits.reference), or IMAGE; the PyTorch smoke test: NVIDIA's PyTorch container
# (multi-arch: x86_64 and arm64), pinned. Enroot image URIs name the registry with '#'.
NCCL_TESTS_DIR = "/opt/nccl-tests/build"  # where the reference image installs nccl-tests' binaries
PYTORCH_IMAGE = PYTORCH_IMAGE_REF.replace("/", "#", 1)  # as Enroot names it
MARKER = "==> fmcluster node={node} group={group} test={test} <=="
SLURM_PLANES = ("pcs", "hyperpod-slurm")


def fio_targets(model: ClusterModel, group: NodeGroup) -> list[FioTarget]:
    """Where fio_sbatch measures, and how much: the shared file system (every node of the group at
    once) and the node's instance store at /scratch (the catalog's NVMe disks of the instance type,
    each node its own); each run writes at most FIO_FRACTION of the capacity, FIO_MAX_JOB_MIB a job."""
    targets = []
    lustre = model.spec.storage.lustre
    if lustre is not None:
        targets.append(FioTarget.sized("fio-fsx", lustre.mount_path, lustre.storage_capacity_gib,
                                       max(group.max_count, 1)))
    if group.instance.nvme_disks:
        targets.append(FioTarget.sized("fio-scratch", node_facts.SCRATCH_PATH, instance_store_gib(group), 1))
    return targets


_REGROUP = r'''# regroup TEST: the `srun --label` output on stdin, each task's lines together under its node's
# marker (each task prints "fmcluster-host HOST" first)
regroup() {
  awk -v group="$GROUP" -v test="$1" '
    match($0, /^ *[0-9]+: /) {
      id = substr($0, 1, RLENGTH - 2) + 0; line = substr($0, RLENGTH + 1)
      if (id > last) last = id
      if (line ~ /^fmcluster-host /) { host[id] = substr(line, 16); next }
      text[id] = text[id] line "\n"; seen[id] = 1; next
    }
    { other = other $0 "\n" }
    END {
      for (i = 0; i <= last; i++) if (i in seen || i in host)
        printf "==> fmcluster node=%s group=%s test=%s <==\n%s", (i in host ? host[i] : "task" i), group, test, text[i]
      if (other != "") printf "==> fmcluster node=all group=%s test=%s <==\n%s", group, test, other
    }'
}
'''


def _header(model: ClusterModel, group: NodeGroup, test: str, hours: int, minutes: int = 0) -> list[str]:
    return ["#!/bin/bash",
            f"# fmcluster acceptance job {test} of node group {group.name} ({group.max_count} x "
            f"{group.instance_type}) of cluster {model.name}: `sbatch {group.name}/{test}.sbatch` from the kit's",
            "# directory on the shared file system; `fmcluster verify SPEC results/*` judges the output.",
            f"#SBATCH --job-name={group.name}-{test}",
            f"#SBATCH --partition={group.name}",
            f"#SBATCH --nodes={group.max_count}",
            "#SBATCH --exclusive",
            "#SBATCH --wait-all-nodes=1",
            "#SBATCH --time={:02d}:{:02d}:00".format(*divmod(hours * 60 + minutes, 60)),
            f"#SBATCH --output={RESULTS}/%x-%j.out",
            "set -uo pipefail",
            f"GROUP='{group.name}'",  # a node group name: [a-z][a-z0-9-]*
            'mkdir -p "$SLURM_SUBMIT_DIR/' + RESULTS + '"']


def _nccl_environment() -> list[str]:
    return ["# the EFA / NCCL environment of the node (fmcluster's bootstrap); Pyxis passes it into the container",
            f"# shellcheck source=/dev/null\n[[ -r {nccl.NCCL_ENV_FILE} ]] && source {nccl.NCCL_ENV_FILE}"]


# The nccl and fio steps run the image as one Pyxis named container a node for the whole job
# (NVIDIA/pyxis v0.24.0, args.c and README, --container-name; pyxis_slurmstepd.c,
# slurm_spank_user_init): a step that finds the container on its node reuses its filesystem and
# imports nothing, so each node imports and unpacks the image once a job, not at every step. It
# lives in the node's own Enroot data path (ENROOT_DATA_PATH on the instance store or /tmp:
# fmcluster/node/scripts/boot/containers.sh), so two nodes never share one. The cluster's pyxis.conf
# sets no container_scope, so Pyxis names it pyxis_NAME (the default scope, "global") and leaves it
# after the job (only container_scope=job has its epilog remove it, pyxis_slurmd.c): the job removes
# the kit's containers from its nodes itself, before its first step (what a cancelled job, or a killed
# run of this one, left: a requeued job keeps its id, and a half-made filesystem would be reused) and
# when it ends; its nodes are its alone (--exclusive). Two steps starting at once on one node would
# both create it and one fail (enroot create: "File already exists"): the steps that run at the same
# time here are each on a node of its own.
CONTAINER_PREFIX = "fmcluster-kit"
_CONTAINERS = r'''# the image runs as one named container on each node for the whole job (each node imports it once)
CONTAINER=PREFIX-$SLURM_JOB_ID
# shellcheck disable=SC2016  # expanded on each node
DROP='command -v enroot >/dev/null || exit 0
for name in $(enroot list 2>/dev/null); do
  case $name in
    pyxis_PREFIX-[0-9]* | pyxis_[0-9]*_PREFIX-[0-9]*)
      enroot remove -f "$name" >/dev/null 2>&1 || echo "fmcluster: $(hostname): cannot remove container $name" ;;
  esac
done'
containers=0  # 1 once a step may have made one
drop_containers() {  # the kit's named containers on every node of the job: removed (--overlap: at once)
  srun --overlap --nodes="$SLURM_NNODES" --ntasks="$SLURM_NNODES" --ntasks-per-node=1 bash -c "$DROP" 2>/dev/null
  return 0
}
finish() {  # when the job ends, however it ends
  if (( containers )); then drop_containers; fi
  remove "${cleanup[@]}"
}
trap finish EXIT
trap 'exit 143' TERM INT HUP'''.replace("PREFIX", CONTAINER_PREFIX)
# before the first container step: what earlier runs left on the job's nodes removed
_FIRST_CONTAINER = ["drop_containers  # what an earlier job (cancelled) or run (killed) left on the nodes",
                    "containers=1"]


def _image_lines(model: ClusterModel, group: NodeGroup) -> list[str]:
    """IMAGE, the group's reference image unless set (fmcluster.kits.reference), and what the job
    leaves removed when it ends (reference.CLEANUP, the named containers)."""
    return [reference.CLEANUP, _CONTAINERS, *reference.slurm_lines(model, group)]


def nccl_sbatch(model: ClusterModel, group: NodeGroup) -> str:
    gpus, size = group.gpus, largest_message(group)
    lines = _header(model, group, "nccl", 2)
    lines.insert(7, f"#SBATCH --ntasks-per-node={gpus}")
    lines += _image_lines(model, group) + _nccl_environment()
    lines += ["# NCCL names its network and libfabric provider at INFO: how `fmcluster verify` sees EFA in use",
              "export NCCL_DEBUG=INFO",
              f"NCCL_TESTS=${{NCCL_TESTS:-{NCCL_TESTS_DIR}}}",
              'mapfile -t HOSTS < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
              'tmp=$(mktemp -d)',
              'cleanup+=("$tmp")',
              *_FIRST_CONTAINER,
              f"for op in {' '.join(expected.NCCL_OPERATIONS)}; do",
              "  # inside each node: every node at once, one step each",
              '  for host in "${HOSTS[@]}"; do',
              f'    srun --nodes=1 --ntasks={gpus} --nodelist="$host" --mpi=pmix --cpu-bind=none \\',
              '      --container-image="$IMAGE" --container-name="$CONTAINER" "$NCCL_TESTS/${op}_perf" '
              f'-b 8 -e {size} -f 2 -g 1 -c 1 -n 20 >"$tmp/$host.$op" 2>&1 &',
              "  done",
              "  wait",
              '  for host in "${HOSTS[@]}"; do',
              '    echo "==> fmcluster node=$host group=$GROUP test=nccl-$op-node <=="',
              '    awk 1 "$tmp/$host.$op"  # with its last newline, before the next marker',
              "  done",
              "  # across every node of the group",
              '  if (( ${#HOSTS[@]} > 1 )); then',
              '    echo "==> fmcluster node=all group=$GROUP test=nccl-$op-nodes <=="',
              '    srun --mpi=pmix --cpu-bind=none --container-image="$IMAGE" --container-name="$CONTAINER" \\',
              '      "$NCCL_TESTS/${op}_perf" '
              f'-b 8 -e {size} -f 2 -g 1 -c 1 -n 50 2>&1',
              "  fi",
              "done",
              'rm -rf "$tmp"', ""]
    return "\n".join(lines)


def dcgm_sbatch(model: ClusterModel, group: NodeGroup) -> str:
    lines = _header(model, group, "dcgm", 1)
    lines.insert(7, "#SBATCH --ntasks-per-node=1")
    lines += [_REGROUP,
              "# DCGM on the node itself (the Deep Learning AMIs carry it): diagnostics level 2, JSON",
              "# shellcheck disable=SC2016  # expanded on each node",
              "srun --label --ntasks-per-node=1 bash -c "
              "'echo \"fmcluster-host $(hostname)\"; dcgmi diag -r 2 -j 2>&1 || true' | regroup dcgm", ""]
    return "\n".join(lines)


# fio on one node (in the container), with the job's directory of one file system, MiB a job and
# the job count as $1 $2 $3: write then read the same files (the same job name, size and count:
# fio lays out nothing new for the read pass), the read pass only after a complete write, and the
# node's files deleted on any exit (a failure, or the SIGTERM of scancel / the time limit).
FIO_NODE = """host=$(hostname); echo "fmcluster-host $host"
dir="$1/$host"
trap 'rm -rf "$dir"' EXIT
trap 'exit 143' TERM INT HUP
mkdir -p "$dir" || exit 1
for rw in write read; do
  fio --name=fmcluster --directory="$dir" --rw="$rw" --bs=1M --size="$2M" --numjobs="$3" \\
    --ioengine=libaio --direct=1 --group_reporting --output-format=json &
  wait "$!" || { echo "fio $rw failed on $host: $?"; exit 1; }
done"""


def fio_sbatch(model: ClusterModel, group: NodeGroup) -> str:
    lines = _header(model, group, "fio", 1)
    lines.insert(7, "#SBATCH --ntasks-per-node=1")
    targets = fio_targets(model, group)
    if not targets:
        lines += ["echo 'no file system and no instance store on this group: nothing to measure'", ""]
        return "\n".join(lines)
    lines += _image_lines(model, group)
    lines += [_REGROUP]
    mounts = ",".join(f"{t.path}:{t.path}" for t in targets)
    lines += [f"FIO_JOBS={FIO_JOBS}",
              "# shellcheck disable=SC2016  # expanded on each node",
              f"FIO_NODE={shlex.quote(FIO_NODE)}",
              "# what is left of a run (a node killed mid-run) is deleted when the job ends, however it ends",
              "# (cleanup): the shared file system's whole job directory, and this node's part of /scratch",
              "# fio_run TEST MOUNT MIB: fio on every node at once, MIB a job, FIO_JOBS jobs a node",
              "fio_run() {",
              '  local dir="$2/fmcluster-fio/$SLURM_JOB_ID"',
              '  cleanup+=("$dir")',
              '  srun --label --ntasks-per-node=1 --container-image="$IMAGE" --container-name="$CONTAINER" \\',
              f'    --container-mounts={mounts} \\',
              '    bash -c "$FIO_NODE" fio "$dir" "$3" "$FIO_JOBS" | regroup "$1"',
              '  remove "$dir"',
              "}",
              *_FIRST_CONTAINER]
    for t in targets:
        scope = f"all {t.writers} nodes together" if t.test == "fio-fsx" else "each node on its own disks"
        lines += [f"# {t.test}: {t.job_mib} MiB x {FIO_JOBS} jobs a node, {t.written_gib:.1f} GiB written by {scope} "
                  f"({t.written_gib / t.capacity_gib:.1%} of {t.capacity_gib:.0f} GiB), then read back; direct I/O",
                  f"fio_run {t.test} {t.path} {t.job_mib}"]
    lines.append("")
    return "\n".join(lines)


# The smoke job's own end: the cluster's end_signal (node_groups[].capacity: what fmcluster's nodes
# send the running jobs end_signal_minutes before a Capacity Block, a training plan or a spot
# instance ends, fmcluster/node/scripts/boot/programs/capacity-end.sh), asked for with sbatch
# --signal as a job would ask for it itself, that long before its time limit, so Slurm signals it the
# same way at the end of its own time too; --requeue and --open-mode=append: the run that resumes
# is the same job, its output after the first run's. torchrun (PyTorch 2.6, the container's:
# torch/distributed/elastic/multiprocessing/api.py, PContext.start) catches SIGTERM, SIGINT,
# SIGHUP and SIGQUIT and passes them on to its workers (then gives them 30 s); any other signal
# has its default action on torchrun, which for SIGUSR1 ends it at once, and Slurm then kills its
# workers mid-checkpoint (a step's processes go with its task). So torchrun runs with any other end
# signal ignored, which its workers inherit (an ignored signal stays ignored across execve and
# Python's subprocess), and smoke.py catches it itself. With B: only the batch shell gets the
# signal; it passes it on to the step through srun, which forwards signals to the step's tasks
# (srun(1), SIGNALS).
TORCHRUN_SIGNALS = ("TERM", "INT", "HUP", "QUIT")
CHECKPOINTS = "checkpoints"  # beside results/: the smoke job's, one directory a job (CHECKPOINTS/JOBID)


def end_signal(group: NodeGroup) -> tuple[str, bool]:
    """The group's end signal (capacity.end_signal) by its name without SIG (USR1), and whether it
    goes to the batch shell only (B:)."""
    raw = group.capacity.end_signal
    batch = raw.startswith("B:")
    name = raw[2:] if batch else raw
    return (name[3:] if name.startswith("SIG") else name), batch


def smoke_sbatch(model: ClusterModel, group: NodeGroup) -> str:
    name, batch = end_signal(group)
    seconds = group.capacity.end_signal_minutes * 60
    lines = _header(model, group, "smoke", 1, group.capacity.end_signal_minutes)
    lines[7:7] = ["#SBATCH --ntasks-per-node=1", "#SBATCH --requeue", "#SBATCH --open-mode=append",
                  f"#SBATCH --signal={group.capacity.end_signal}@{seconds}"]
    lines += _nccl_environment()
    torchrun = (f'torchrun --nnodes="$SLURM_NNODES" --nproc-per-node={group.gpus} --rdzv-backend=c10d \\\n'
                '  --rdzv-endpoint="$head:29500" --rdzv-id="$SLURM_JOB_ID" /kit/smoke.py --steps "$SMOKE_STEPS" \\\n'
                f'  --checkpoint-dir "$CHECKPOINTS" --signal {name} 2>&1 &')
    if name not in TORCHRUN_SIGNALS:
        torchrun = f"bash -c 'trap \"\" {name}; exec \"$@\"' torchrun " + torchrun
    lines += [f"PYTORCH_IMAGE=${{PYTORCH_IMAGE:-{PYTORCH_IMAGE}}}",
              f"SMOKE_STEPS=${{SMOKE_STEPS:-{SMOKE_STEPS}}}",
              'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
              "# this job's checkpoints, on the shared file system beside results/ (a requeued run keeps the job's id)",
              f'CHECKPOINTS="$SLURM_SUBMIT_DIR/{CHECKPOINTS}/$SLURM_JOB_ID"',
              'mkdir -p "$CHECKPOINTS"',
              'echo "==> fmcluster node=all group=$GROUP test=smoke <=="',
              "# one torchrun per node, every GPU a rank; rendezvous on the first node. On SIGTERM or "
              f"SIG{name} every rank",
              "# finishes its step, they save a checkpoint and end; smoke.py leaves $CHECKPOINTS/stopped"]
    # A B: signal goes on through scancel, not srun: srun SIGKILLs its tasks on SIGTERM, SIGHUP and SIGQUIT,
    # prints their status on SIGINT and keeps SIGALRM and SIGCONT (Slurm src/srun/signals.c _forward_signal,
    # 24.11's srun_job.c alike); scancel without --batch signals the job's steps, not the batch shell.
    if batch:
        lines += [f"# SIG{name} comes to this shell only (--signal=B:{name}): scancel passes it on to the job's step",
                  "# (to every process of it, as --signal without B: does; not to this shell: scancel(1) --batch)",
                  f"trap 'scancel --signal={name} \"$SLURM_JOB_ID\"' {name}"]
    if name not in TORCHRUN_SIGNALS:
        lines += [f"# torchrun passes on only SIGTERM, SIGINT, SIGHUP and SIGQUIT and would end at once on SIG{name}:",
                  f"# it runs with SIG{name} ignored, which its workers inherit and smoke.py catches",
                  "# shellcheck disable=SC2016  # expanded in the step"]
    lines += ['srun --ntasks-per-node=1 --container-image="$PYTORCH_IMAGE" '
              '--container-mounts="$SLURM_SUBMIT_DIR:/kit,$CHECKPOINTS:$CHECKPOINTS" \\',
              "  " + torchrun,
              "step=$!",
              'wait "$step"; rc=$?',
              'while kill -0 "$step" 2>/dev/null; do wait "$step"; rc=$?; done  # a trapped signal ends wait early',
              'if [[ -e "$CHECKPOINTS/stopped" ]]; then',
              '  rm -f "$CHECKPOINTS/stopped"',
              '  echo "fmcluster: smoke stopped on a signal, its checkpoint saved: job $SLURM_JOB_ID requeued"',
              '  scontrol requeue "$SLURM_JOB_ID" && exit 0',
              "fi",
              'rmdir "$CHECKPOINTS" 2>/dev/null  # smoke.py removes it once it completes',
              'exit "$rc"', ""]
    return "\n".join(lines)


def smoke_end_lines(model: ClusterModel, groups: tuple[NodeGroup, ...]) -> list[str]:
    """The README's paragraph on the smoke job living through the end of its capacity."""
    if not groups:
        return []
    name, batch = end_signal(groups[0])
    scancel = f"scancel {'--batch ' if batch else ''}--signal={name} JOBID"
    text = ("The smoke job also shows a job living through the end of its capacity. On SIGTERM, or its group's end "
            "signal (node_groups[].capacity.end_signal: what fmcluster's nodes send the running jobs before a "
            "Capacity Block, a training plan or a spot instance ends; the job asks for it itself, sbatch's "
            "`--signal`, end_signal_minutes before its own time limit), every rank finishes its step, smoke.py saves "
            f"a checkpoint into `{CHECKPOINTS}/JOBID/` beside `{RESULTS}/` (about "
            f"{SMOKE_CHECKPOINT_BYTES / 1e9:.1f} GB), the job requeues itself, and its next run resumes from it; "
            "`fmcluster verify` reports the checkpoint's write time. To see it without an end, signal the job "
            f"while it runs: `{scancel}` (`SMOKE_STEPS=2000 sbatch {groups[0].name}/smoke.sbatch` runs long "
            "enough). Slurm starts a requeued job again once AuthInfo's cred_expire has passed (120 s by default).")
    return [*textwrap.wrap(text, 100, break_long_words=False, break_on_hyphens=False), ""]


def readme(model: ClusterModel, team: Team | None = None) -> str:
    mount = model.spec.storage.lustre.mount_path if model.spec.storage.lustre else "a shared directory"
    lines = [f"# Acceptance kit of {model.name} ({model.control_plane.type})", "",
             f"Written by `fmcluster jobs`. Copy this directory to {mount} (the jobs write `results/` next to",
             "it, from every node), then on a login node:", "", "```", "./submit-all.sh", "```", "",
             f"and when the jobs are done, where fmcluster is installed: `fmcluster verify SPEC {RESULTS}/*`.", "",
             *reference.readme_lines(model, kit_groups(model, team)[0], slurm=True),
             *smoke_end_lines(model, kit_groups(model, team)[0])]
    placed = [g for g in kit_groups(model, team)[0] if g.max_count > 1 and placement.placed(model, g)]
    if placed and topology.placement_plane(model) == "features":
        lines += ["`submit-all.sh` submits each multi-node group's jobs through `placement.sh NODES PARTITION`, "
                  "which asks Slurm", "to keep a job's nodes under one network node of EC2's instance topology "
                  "(the lowest layer that holds", "them; nothing when none does); for a job of your own: "
                  f"`c=$(./placement.sh {placed[0].max_count} {placed[0].name}); sbatch ${{c:+\"$c\"}} JOB`.", ""]
    if model.serving is not None:
        group = model.serving.group
        lines += [f"The serving job (not an acceptance job: `submit-all.sh` leaves it out) serves {model.serving.name} "
                  f"on {group}", f"in `{model.serving.image}`, or the image in `{serving.IMAGE_VARIABLE}` (the "
                  "acceptance jobs' `IMAGE` is not used: it has no vLLM):", "", "```",
                  f"mkdir -p {serving.RESULTS} && {serving.submit_line(model)}", "```", "",
                  f"Its output, with each server's URL once it is ready, is in `{serving.RESULTS}/`, apart from "
                  f"`{RESULTS}/`,", "which holds only what `fmcluster verify` judges.", ""]
    groups, left = kit_groups(model, team)
    lines += [*left_out_lines(left), *figures_table(model, groups)]
    return "\n".join(lines) + "\n"


def submit_all(model: ClusterModel, team: Team | None = None) -> str:
    lines = ["#!/bin/bash", "# Submit every acceptance job of the kit (from its directory).", "set -euo pipefail",
             'cd "$(dirname "$0")"', 'mkdir -p ' + RESULTS,
             f"cp expected.json {RESULTS}/  # the groups fmcluster verify expects results of"]
    groups = kit_groups(model, team)[0]
    placed = [g for g in groups if g.max_count > 1 and placement.placed(model, g)]
    if placed:
        lines += placement.SUBMIT_FUNCTION
    for group in groups:
        for test in ("dcgm", "nccl", "fio", "smoke"):
            if group in placed:
                lines.append(f"submit {group.max_count} {group.name} {group.name}/{test}.sbatch")
            else:
                lines.append(f"sbatch {group.name}/{test}.sbatch")
    return "\n".join(lines) + "\n"


def as_team(script: str, team: Team | None) -> str:
    """An sbatch script run as `team`: its Slurm account and its default QOS (the priority class
    the accounting program gives the account, fmcluster.node.accounting), right after the
    partition line; the script unchanged without a team."""
    if team is None:
        return script
    lines = script.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("#SBATCH --partition="))
    lines[at + 1:at + 1] = [f"#SBATCH --account={team.name}", f"#SBATCH --qos={team.priority}"]
    return "\n".join(lines)


def slurm_kit(model: ClusterModel, team: Team | None = None) -> list[KitFile]:
    groups = kit_groups(model, team)[0]
    files = [KitFile("README.md", readme(model, team)), KitFile("submit-all.sh", submit_all(model, team), True),
             KitFile(placement.FILE, placement.placement_sh(model), True),
             KitFile("smoke.py", SMOKE_PY), expected_json(model, groups), reference.recipe()]
    for group in groups:
        for test, render in (("nccl", nccl_sbatch), ("dcgm", dcgm_sbatch), ("fio", fio_sbatch),
                             ("smoke", smoke_sbatch)):
            files.append(KitFile(f"{group.name}/{test}.sbatch", as_team(render(model, group), team), True))
    if model.serving is not None:  # the spec's model, served on its group (fmcluster.kits.serving)
        files.append(KitFile(f"{model.serving.group}/serve.sbatch",
                             as_team(serving.slurm_serve_sbatch(model), team), True))
    return files


def kit(model: ClusterModel, team: Team | None = None) -> list[KitFile]:
    """The acceptance kit of a cluster, in the native form of its control plane: sbatch scripts for
    Slurm (pcs, hyperpod-slurm), Kueue-admitted manifests for Kubernetes (fmcluster.kits.kubernetes);
    run as `team` (its Slurm account, its namespace's queue) on a cluster with teams."""
    if model.control_plane.type in SLURM_PLANES:
        return slurm_kit(model, team)

    return jobs_kubernetes.kubernetes_kit(model, team)
