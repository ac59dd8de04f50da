"""The acceptance kit of a cluster (`fmcluster jobs SPEC -o DIR`): ready-to-run jobs in the native
form of its control plane that show the cluster delivers what was paid for before the first
real job, and whose outputs `fmcluster verify` judges against fmcluster.model.expected. Pure: no AWS
call, no aws_cdk.

Slurm (pcs, hyperpod-slurm): per GPU node group (a partition) four batch scripts, each on every
node of the group (`--nodes` its size, `--exclusive`):

- `nccl.sbatch`: nccl-tests' all_reduce, all_gather and reduce_scatter inside each node (all
  nodes at once) and across all nodes, in the container image (Enroot and Pyxis:
  `srun --container-image`), with the EFA / NCCL environment the node bootstrap writes;
- `dcgm.sbatch`: NVIDIA DCGM diagnostics (`dcgmi diag -r 2 -j`) on every node;
- `fio.sbatch`: write then read on the shared file system (every node at once, sized to the
  file system) and on /scratch;
- `smoke.sbatch`: `torchrun` on every GPU of the group: a few FSDP steps of a small model
  (`smoke.py`), which prints the lines `fmcluster verify` reads.

Every script writes to `results/` of the directory it is submitted from (the kit's copy on the
shared file system), one file per job (`GROUP-TEST-JOBID.out`); per-node parts are marked
`==> fmcluster node=HOST group=GROUP test=TEST <==`. Each node's lines of a step are kept together
(`srun --label`, regrouped by the script), so concurrent nodes never interleave.
"""

from __future__ import annotations

import json
import math
import shlex
from typing import TYPE_CHECKING, NamedTuple

from fmcluster.facts import node as node_facts
from fmcluster.model import expected
from fmcluster.node import bootstrap

if TYPE_CHECKING:
    from fmcluster.model.cluster import ClusterModel, NodeGroup

# The images the jobs run. nccl-tests and fio: the reference image of docker/ (built and pushed by
# the team: docker/README.md); the PyTorch smoke test: NVIDIA's PyTorch container (multi-arch:
# x86_64 and arm64), pinned. Enroot image URIs name the registry with '#'.
NCCL_TESTS_DIR = "/opt/nccl-tests/build"  # where the reference image installs nccl-tests' binaries
PYTORCH_IMAGE_REF = "nvcr.io/nvidia/pytorch:25.01-py3"  # NGC PyTorch 25.01: CUDA 12.8, Blackwell and Grace
PYTORCH_IMAGE = PYTORCH_IMAGE_REF.replace("/", "#", 1)  # as Enroot names it
SMOKE_STEPS = 20
RESULTS = "results"
MARKER = "==> fmcluster node={node} group={group} test={test} <=="
SLURM_PLANES = ("pcs", "hyperpod-slurm")


class KitFile(NamedTuple):
    path: str  # relative to the kit's directory
    content: str
    executable: bool = False


def largest_message(group: NodeGroup) -> str:
    """nccl-tests' largest size (-e): 16 GiB where the GPU has the memory for its buffers (80 GiB
    or more; AWS's GB200/B300 runs go to 64G and fail at 128G), else 8 GiB."""
    gpu = group.instance.gpu
    return "16G" if gpu is not None and gpu.memory_gib >= 80 else "8G"


# fio (fio_sbatch; the Kubernetes kit's fio.sh, fmcluster.kits.kubernetes). fio's --size is per
# job: each of the FIO_JOBS jobs of a node writes its own file of that size. The read pass reads
# the files the write pass wrote (the same job name, directory, size and job count, so fio lays
# out nothing new), and the files are deleted at the end, also when the job fails or is cancelled.
FIO_JOBS = 8  # fio --numjobs: files written (then read) at once on each node
FIO_FRACTION = 0.10  # all nodes and jobs of a run together write at most this share of the capacity
FIO_MAX_JOB_MIB = 8 * 1024  # and each fio job at most 8 GiB (64 GiB a node)
GIB = 2 ** 30


class FioTarget(NamedTuple):
    test: str  # fio-fsx or fio-scratch
    path: str  # the file system's mount
    capacity_gib: float  # the file system's capacity: the whole Lustre file system, or one node's instance store
    writers: int  # the nodes that write to that capacity at once: every node of the group, or the node itself
    job_mib: int  # fio --size: MiB each fio job writes

    @property
    def written_gib(self) -> float:
        """What one run writes to that capacity, all its nodes and jobs together."""
        return self.writers * FIO_JOBS * self.job_mib / 1024

    @classmethod
    def sized(cls, test: str, path: str, capacity_gib: float, writers: int) -> "FioTarget":
        """A target whose runs write at most FIO_FRACTION of `capacity_gib`, FIO_MAX_JOB_MIB a job."""
        mib = math.floor(capacity_gib * 1024 * FIO_FRACTION / (writers * FIO_JOBS))
        return cls(test, path, float(capacity_gib), writers, max(1, min(FIO_MAX_JOB_MIB, mib)))


def instance_store_gib(group: NodeGroup) -> float:
    """A node's instance store (the catalog's NVMe disks together), GiB."""
    return group.instance.nvme_total_gb * 1e9 / GIB


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


def _header(model: ClusterModel, group: NodeGroup, test: str, hours: int) -> list[str]:
    return ["#!/bin/bash",
            f"# fmcluster acceptance job {test} of node group {group.name} ({group.max_count} x "
            f"{group.instance_type}) of cluster {model.name}: `sbatch {group.name}/{test}.sbatch` from the kit's",
            "# directory on the shared file system; `fmcluster verify SPEC results/*` judges the output.",
            f"#SBATCH --job-name={group.name}-{test}",
            f"#SBATCH --partition={group.name}",
            f"#SBATCH --nodes={group.max_count}",
            "#SBATCH --exclusive",
            "#SBATCH --wait-all-nodes=1",
            f"#SBATCH --time={hours:02d}:00:00",
            f"#SBATCH --output={RESULTS}/%x-%j.out",
            "set -uo pipefail",
            f"GROUP='{group.name}'",  # a node group name: [a-z][a-z0-9-]*
            'mkdir -p "$SLURM_SUBMIT_DIR/' + RESULTS + '"']


def _image_lines() -> list[str]:
    return [': "${IMAGE:?set IMAGE to the reference image (docker/README.md), such as '
            'docker://ACCOUNT.dkr.ecr.REGION.amazonaws.com#fmcluster/acceptance:TAG}"',
            "# the EFA / NCCL environment of the node (fmcluster's bootstrap); Pyxis passes it into the container",
            f"# shellcheck source=/dev/null\n[[ -r {bootstrap.NCCL_ENV_FILE} ]] && source {bootstrap.NCCL_ENV_FILE}"]


def nccl_sbatch(model: ClusterModel, group: NodeGroup) -> str:
    gpus, size = group.gpus, largest_message(group)
    lines = _header(model, group, "nccl", 2)
    lines.insert(7, f"#SBATCH --ntasks-per-node={gpus}")
    lines += _image_lines()
    lines += ["# NCCL names its network and libfabric provider at INFO: how `fmcluster verify` sees EFA in use",
              "export NCCL_DEBUG=INFO",
              f"NCCL_TESTS=${{NCCL_TESTS:-{NCCL_TESTS_DIR}}}",
              'mapfile -t HOSTS < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
              'tmp=$(mktemp -d)',
              f"for op in {' '.join(expected.NCCL_OPERATIONS)}; do",
              "  # inside each node: every node at once, one step each",
              '  for host in "${HOSTS[@]}"; do',
              f'    srun --nodes=1 --ntasks={gpus} --nodelist="$host" --mpi=pmix --cpu-bind=none \\',
              '      --container-image="$IMAGE" "$NCCL_TESTS/${op}_perf" '
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
              '    srun --mpi=pmix --cpu-bind=none --container-image="$IMAGE" "$NCCL_TESTS/${op}_perf" '
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
    lines += _image_lines()[:1]
    lines += [_REGROUP]
    targets = fio_targets(model, group)
    if not targets:
        lines += ["echo 'no file system and no instance store on this group: nothing to measure'", ""]
        return "\n".join(lines)
    mounts = ",".join(f"{t.path}:{t.path}" for t in targets)
    lines += [f"FIO_JOBS={FIO_JOBS}",
              "# shellcheck disable=SC2016  # expanded on each node",
              f"FIO_NODE={shlex.quote(FIO_NODE)}",
              "# what is left of a run (a node killed mid-run) is deleted when the job ends, however it ends:",
              "# the shared file system's whole job directory, and this node's part of /scratch",
              "cleanup=()",
              "remove() {  # remove DIR...: each job directory, and fmcluster-fio above it once empty",
              '  local dir; for dir; do rm -rf "$dir"; rmdir "${dir%/*}" 2>/dev/null; done',
              "  return 0",
              "}",
              "trap 'remove \"${cleanup[@]}\"' EXIT",
              "trap 'exit 143' TERM INT HUP",
              "# fio_run TEST MOUNT MIB: fio on every node at once, MIB a job, FIO_JOBS jobs a node",
              "fio_run() {",
              '  local dir="$2/fmcluster-fio/$SLURM_JOB_ID"',
              '  cleanup+=("$dir")',
              f'  srun --label --ntasks-per-node=1 --container-image="$IMAGE" --container-mounts={mounts} \\',
              '    bash -c "$FIO_NODE" fio "$dir" "$3" "$FIO_JOBS" | regroup "$1"',
              '  remove "$dir"',
              "}"]
    for t in targets:
        scope = f"all {t.writers} nodes together" if t.test == "fio-fsx" else "each node on its own disks"
        lines += [f"# {t.test}: {t.job_mib} MiB x {FIO_JOBS} jobs a node, {t.written_gib:.1f} GiB written by {scope} "
                  f"({t.written_gib / t.capacity_gib:.1%} of {t.capacity_gib:.0f} GiB), then read back; direct I/O",
                  f"fio_run {t.test} {t.path} {t.job_mib}"]
    lines.append("")
    return "\n".join(lines)


def smoke_sbatch(model: ClusterModel, group: NodeGroup) -> str:
    lines = _header(model, group, "smoke", 1)
    lines.insert(7, "#SBATCH --ntasks-per-node=1")
    lines += _image_lines()[1:]
    lines += [f"PYTORCH_IMAGE=${{PYTORCH_IMAGE:-{PYTORCH_IMAGE}}}",
              'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
              'echo "==> fmcluster node=all group=$GROUP test=smoke <=="',
              "# one torchrun per node, every GPU a rank; rendezvous on the first node",
              'srun --ntasks-per-node=1 --container-image="$PYTORCH_IMAGE" '
              '--container-mounts="$SLURM_SUBMIT_DIR:/kit" \\',
              f'  torchrun --nnodes="$SLURM_NNODES" --nproc-per-node={group.gpus} --rdzv-backend=c10d \\',
              '  --rdzv-endpoint="$head:29500" --rdzv-id="$SLURM_JOB_ID" '
              f'/kit/smoke.py --steps {SMOKE_STEPS} 2>&1', ""]
    return "\n".join(lines)


SMOKE_PY = '''"""fmcluster's PyTorch smoke test: a few FSDP steps of a small transformer on every GPU of the
job, to show the whole path works (CUDA, NCCL over NVLink and EFA, torchrun's rendezvous). Rank 0
prints `fmcluster-smoke step=N loss=L tokens_per_s=T host=H rank=0` per step and a last line
`fmcluster-smoke ok world_size=W steps=N` (or `fmcluster-smoke failed reason=...`), which
`fmcluster verify` reads."""

import argparse
import math
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=1024, nhead=16, dim_feedforward=4096, batch_first=True)
    model = FSDP(torch.nn.TransformerEncoder(layer, num_layers=8).cuda())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch, length = 8, 512
    data = torch.randn(batch, length, 1024, device="cuda")
    target = torch.randn(batch, length, 1024, device="cuda")
    host = socket.gethostname()
    for step in range(1, args.steps + 1):
        start = time.time()
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(data), target)
        loss.backward()
        optimizer.step()
        value = loss.detach()
        dist.all_reduce(value)
        value = value.item() / world
        torch.cuda.synchronize()
        if rank == 0:
            rate = batch * length * world / (time.time() - start)
            print(f"fmcluster-smoke step={step} loss={value:.6f} tokens_per_s={rate:.1f} host={host} rank=0",
                  flush=True)
        if not math.isfinite(value):
            if rank == 0:
                print("fmcluster-smoke failed reason=loss-not-finite", flush=True)
            return 1
    if rank == 0:
        print(f"fmcluster-smoke ok world_size={world} steps={args.steps}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def figures_table(model: ClusterModel) -> list[str]:
    """The README's table of what each job of each group is judged against (fmcluster.model.expected)."""
    lines = ["| Group | Nodes | Job | Judged against |", "|---|---|---|---|"]
    figures = expected.expectations(model)
    for group in expected.gpu_groups(model):
        for test, figure in figures[group.name].items():
            against = (f"{figure.pass_at:g} {figure.unit} (PASS), {figure.warn_at:g} (WARN): {figure.basis}"
                       if figure.peak is not None else figure.basis)
            lines.append(f"| {group.name} | {group.max_count} | {test} | {against} |")
    return lines


def expected_json(model: ClusterModel) -> KitFile:
    """expected.json: every group's expected figures, as `fmcluster verify` judges them."""
    return KitFile("expected.json", json.dumps(
        {g: {t: e.as_dict() for t, e in tests.items()} for g, tests in expected.expectations(model).items()},
        indent=2) + "\n")


def readme(model: ClusterModel) -> str:
    mount = model.spec.storage.lustre.mount_path if model.spec.storage.lustre else "a shared directory"
    lines = [f"# Acceptance kit of {model.name} ({model.control_plane.type})", "",
             f"Written by `fmcluster jobs`. Copy this directory to {mount} (the jobs write `results/` next to",
             "it, from every node), build and push the reference image (docker/README.md), then on a login node:",
             "", "```", "export IMAGE=docker://ACCOUNT.dkr.ecr.REGION.amazonaws.com#fmcluster/acceptance:TAG",
             "./submit-all.sh", "```", "",
             f"and when the jobs are done, where fmcluster is installed: `fmcluster verify SPEC {RESULTS}/*`.", ""]
    if model.serving is not None:
        from fmcluster.kits import serving

        group = model.serving.group
        lines += [f"The serving job (not an acceptance job: `submit-all.sh` leaves it out) serves {model.serving.name} "
                  f"on {group}", f"in `{model.serving.image}`, or the image in `{serving.IMAGE_VARIABLE}` (the "
                  "acceptance jobs' `IMAGE` is not used: it has no vLLM):", "", "```",
                  f"mkdir -p {serving.RESULTS} && sbatch {group}/serve.sbatch", "```", "",
                  f"Its output, with each server's URL once it is ready, is in `{serving.RESULTS}/`, apart from "
                  f"`{RESULTS}/`,", "which holds only what `fmcluster verify` judges.", ""]
    lines += figures_table(model)
    return "\n".join(lines) + "\n"


def submit_all(model: ClusterModel) -> str:
    lines = ["#!/bin/bash", "# Submit every acceptance job of the kit (from its directory).", "set -euo pipefail",
             'cd "$(dirname "$0")"', 'mkdir -p ' + RESULTS]
    for group in expected.gpu_groups(model):
        for test in ("dcgm", "nccl", "fio", "smoke"):
            lines.append(f"sbatch {group.name}/{test}.sbatch")
    return "\n".join(lines) + "\n"


def slurm_kit(model: ClusterModel) -> list[KitFile]:
    files = [KitFile("README.md", readme(model)), KitFile("submit-all.sh", submit_all(model), True),
             KitFile("smoke.py", SMOKE_PY), expected_json(model)]
    for group in expected.gpu_groups(model):
        for test, render in (("nccl", nccl_sbatch), ("dcgm", dcgm_sbatch), ("fio", fio_sbatch),
                             ("smoke", smoke_sbatch)):
            files.append(KitFile(f"{group.name}/{test}.sbatch", render(model, group), True))
    if model.serving is not None:  # the spec's model, served on its group (fmcluster.kits.serving)
        from fmcluster.kits import serving

        files.append(KitFile(f"{model.serving.group}/serve.sbatch", serving.slurm_serve_sbatch(model), True))
    return files


def kit(model: ClusterModel) -> list[KitFile]:
    """The acceptance kit of a cluster, in the native form of its control plane: sbatch scripts for
    Slurm (pcs, hyperpod-slurm), Kueue-admitted manifests for Kubernetes (fmcluster.kits.kubernetes)."""
    if model.control_plane.type in SLURM_PLANES:
        return slurm_kit(model)
    from fmcluster.kits import kubernetes as jobs_kubernetes

    return jobs_kubernetes.kubernetes_kit(model)
