"""What the acceptance kits share, whatever their control plane: a kit's file, the results
directory, the PyTorch smoke test, nccl-tests' message size, fio's targets and sizes, the table
of expected figures, and the pieces of a Kubernetes pod the acceptance and serving kits both
build (EFA / NCCL environment, /dev/shm, the IMEX channel of an UltraServer job)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Optional

from fmcluster.kubernetes import manifests as kubernetes
from fmcluster.model import expected
from fmcluster.model.cluster import ClusterModel, NodeGroup
from fmcluster.model.teams import Team
from fmcluster.node import nccl

PYTORCH_IMAGE_REF = "nvcr.io/nvidia/pytorch:25.01-py3"  # NGC PyTorch 25.01: CUDA 12.8, Blackwell and Grace
SMOKE_STEPS = 20
RESULTS = "results"


@dataclass(frozen=True)
class KitFile:
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


@dataclass(frozen=True)
class FioTarget:
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


# What a checkpoint of smoke.py holds (DCP: each rank its shard, together the whole): the weights of
# its model, 8 TransformerEncoderLayers of d_model 1024 and feed-forward 4096 (each: the attention's
# in- and out-projections 4d^2 + 4d, the feed-forward's two layers 2df + d + f, two LayerNorms 4d),
# and AdamW's two moments of each, all fp32: 12 bytes a parameter (about 1.2 GB).
SMOKE_PARAMETERS = 8 * (4 * 1024 ** 2 + 4 * 1024 + 2 * 1024 * 4096 + 1024 + 4096 + 4 * 1024)
SMOKE_CHECKPOINT_BYTES = SMOKE_PARAMETERS * 12


def checkpoint_seconds(model: ClusterModel) -> Optional[float]:
    """How long smoke.py's checkpoint takes at the Lustre file system's baseline throughput (None
    without one)."""
    lustre = model.spec.storage.lustre
    return None if lustre is None else SMOKE_CHECKPOINT_BYTES / (lustre.throughput_mbps * 1e6)


SMOKE_PY = '''"""fmcluster's PyTorch smoke test: a few FSDP steps of a small transformer on every GPU of the
job, to show the whole path works (CUDA, NCCL over NVLink and EFA, torchrun's rendezvous). Rank 0
prints `fmcluster-smoke step=N loss=L tokens_per_s=T host=H rank=0` per step and a last line
`fmcluster-smoke ok world_size=W steps=N` (or `fmcluster-smoke failed reason=...`), which
`fmcluster verify` reads.

With --checkpoint-dir DIR (the job's own directory on the shared file system) it also shows that a
job stopped by a signal resumes where it stopped. On SIGTERM, or the signal --signal names (what
the cluster sends before a Capacity Block ends), every rank finishes its step and they agree to
stop (an all_reduce of their flags: one rank's signal stops them all at the same step); they save
the model's and optimizer's state and the step with torch.distributed.checkpoint (DCP: each rank
writes its own shard, rank 0 the metadata) into DIR/.step-N.partial, which rank 0 renames to
DIR/step-N once every rank's part is written, prints `fmcluster-smoke checkpoint step=N seconds=S
bytes=B path=P`, and leaves DIR/stopped (what the job's script reads: run it again); then they
exit. A run resumes from the newest DIR/step-N (one cut short keeps its .partial name and is never
read) and prints `fmcluster-smoke resumed step=N seconds=S bytes=B path=P` (the figures of the
checkpoint it read); a run that completes removes DIR. PyTorch's recipe ("Getting Started with
Distributed Checkpoint (DCP)"): get_state_dict / set_state_dict (FSDP's sharded state dicts) and
dcp.save / dcp.load; in a world of one GPU the same calls, the collectives over one rank."""

import argparse
import json
import math
import os
import re
import shutil
import signal
import socket
import sys
import time

STOP = []  # the signals that came: the run stops after its step


def stop(signum, frame):
    STOP.append(signum)


def arguments():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--checkpoint-dir", default="", help="the job's checkpoints (none: no checkpoint)")
    parser.add_argument("--signal", default="USR1", help="besides TERM, the signal that stops the run (USR1, ...)")
    return parser.parse_args()


def newest(directory):
    """The newest complete checkpoint of the job's directory: (its step, its path), or None."""
    steps = [int(found.group(1)) for found in map(re.compile(r"step-(\\d+)").fullmatch, os.listdir(directory))
             if found]
    return (max(steps), os.path.join(directory, f"step-{max(steps):06d}")) if steps else None


def resume(model, optimizer, directory, rank):
    """The step the run goes on from: the newest checkpoint's, loaded into the model and optimizer;
    0 without one. Rank 0 first removes what a run cut short left (.partial directories) and the
    stopped mark of the run before."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    if rank == 0:
        os.makedirs(directory, exist_ok=True)
        for name in os.listdir(directory):
            if name.endswith(".partial"):
                shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
        if os.path.exists(os.path.join(directory, "stopped")):
            os.remove(os.path.join(directory, "stopped"))
    dist.barrier()
    found = newest(directory)
    if found is None:
        return 0
    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optim": optim_state, "step": 0}
    dcp.load(state, checkpoint_id=found[1])
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    if rank == 0:
        with open(os.path.join(found[1], "fmcluster.json")) as source:
            saved = json.load(source)
        print(f"fmcluster-smoke resumed step={state['step']} seconds={saved['seconds']:.3f} bytes={saved['bytes']} "
              f"path={found[1]}", flush=True)
    return state["step"]


def save(model, optimizer, step, directory, rank):
    """A checkpoint of the step, from every rank: written under a temporary name, renamed once whole."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict
    start = time.time()
    partial = os.path.join(directory, f".step-{step:06d}.partial")
    final = os.path.join(directory, f"step-{step:06d}")
    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optim": optim_state, "step": step}, checkpoint_id=partial)
    dist.barrier()
    if rank == 0:
        seconds = float(f"{time.time() - start:.3f}")  # as the line prints it, and the resumed line after it
        size = sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(partial) for name in names)
        with open(os.path.join(partial, "fmcluster.json"), "w") as out:
            json.dump({"step": step, "seconds": seconds, "bytes": size}, out)
        shutil.rmtree(final, ignore_errors=True)
        os.rename(partial, final)
        for name in os.listdir(directory):  # the older checkpoints: the newest is the one a run reads
            if name.startswith("step-") and name != os.path.basename(final):
                shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
        with open(os.path.join(directory, "stopped"), "w") as out:
            out.write(f"{step}\\n")
        print(f"fmcluster-smoke checkpoint step={step} seconds={seconds:.3f} bytes={size} path={final}", flush=True)
    dist.barrier()


def main() -> int:
    args = arguments()
    if args.checkpoint_dir:  # caught before torch loads (seconds), so an early signal is not lost
        for name in {"TERM", args.signal.upper().removeprefix("SIG")}:
            signal.signal(getattr(signal, "SIG" + name), stop)
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

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
    done = resume(model, optimizer, args.checkpoint_dir, rank) if args.checkpoint_dir else 0
    for step in range(done + 1, args.steps + 1):
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
        if args.checkpoint_dir and step < args.steps:
            flag = torch.tensor([1.0 if STOP else 0.0], device="cuda")
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)  # one rank's signal stops every rank here
            if flag.item() > 0:
                save(model, optimizer, step, args.checkpoint_dir, rank)
                dist.destroy_process_group()
                return 0
    if rank == 0:
        print(f"fmcluster-smoke ok world_size={world} steps={args.steps}", flush=True)
        if args.checkpoint_dir:
            shutil.rmtree(args.checkpoint_dir, ignore_errors=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


@dataclass(frozen=True)
class LeftOut:
    """A GPU node group the kit has no jobs for: the team it runs as cannot hold the whole group."""

    group: str
    why: str  # such as "team research may hold at most 32 of its 64 GPUs"
    hint: str  # who may run its jobs

    @property
    def line(self) -> str:
        return f"node group {self.group} left out: {self.why}; {self.hint}"


def kit_groups(model: ClusterModel, team: Optional[Team] = None
               ) -> tuple[tuple[NodeGroup, ...], tuple[LeftOut, ...]]:
    """The GPU node groups the kit has jobs for, and those it leaves out. Each acceptance job asks
    for every node of its group at once: a queue (a Kueue ClusterQueue, a Slurm account's GrpTRES
    or a partition's AllowAccounts) that lets the team hold fewer of the group's GPUs never starts
    it. So a kit run as `team` covers only the groups whose every GPU the team may hold
    (Team.burst); without teams, every GPU group."""
    groups = expected.gpu_groups(model)
    if team is None:
        return groups, ()
    owners = {g: t.name for t in model.teams for g in t.dedicated}
    kept: list[NodeGroup] = []
    left: list[LeftOut] = []
    for group in groups:
        need = group.max_count * group.gpus
        held = team.burst(group.name) if group.name in team.group_gpus else 0
        if held >= need:
            kept.append(group)
            continue
        if group.name in owners:
            why = f"it is dedicated to team {owners[group.name]}"
        else:
            borrow = "as many as are idle" if team.borrow_limit is None else f"borrow {team.borrow_limit}"
            why = (f"team {team.name} may hold at most {held} of its {need} GPUs (guarantee "
                   f"{team.guaranteed.get(group.name, 0)}, {borrow}) and each job asks for every node")
        able = [t.name for t in model.teams if t.name != team.name
                and group.name in t.group_gpus and t.burst(group.name) >= need]
        hint = (f"run the kit as a team that may hold it (fmcluster jobs SPEC --team {able[0]})"
                if able else "no team may hold it whole: run its jobs before teams start work, from an account "
                             "or namespace outside the teams' quotas")
        left.append(LeftOut(group.name, why, hint))
    return tuple(kept), tuple(left)


def left_out_lines(left: tuple[LeftOut, ...]) -> list[str]:
    """The README's paragraph on the groups the kit leaves out (none: no lines)."""
    if not left:
        return []
    return ["Node groups without jobs in this kit (`fmcluster verify` does not expect them):", "",
            *(f"- {item.line}" for item in left), ""]


def figures_table(model: ClusterModel, groups: Optional[tuple[NodeGroup, ...]] = None) -> list[str]:
    """The README's table of what each job of each group (default: every GPU group) is judged
    against (fmcluster.model.expected)."""
    lines = ["| Group | Nodes | Job | Judged against |", "|---|---|---|---|"]
    figures = expected.expectations(model)
    for group in expected.gpu_groups(model) if groups is None else groups:
        for test, figure in figures[group.name].items():
            against = (f"{figure.pass_at:g} {figure.unit} (PASS), {figure.warn_at:g} (WARN): {figure.basis}"
                       if figure.peak is not None else figure.basis)
            lines.append(f"| {group.name} | {group.max_count} | {test} | {against} |")
    return lines


def expected_json(model: ClusterModel, groups: Optional[tuple[NodeGroup, ...]] = None) -> KitFile:
    """expected.json: the expected figures of each group the kit has jobs for (default: every GPU
    group), as `fmcluster verify` judges them. The kit's submit-all.sh copies it into results/:
    verify then expects results of these groups only (fmcluster.kits.verify.files.kit_groups)."""
    names = None if groups is None else {g.name for g in groups}
    return KitFile("expected.json", json.dumps(
        {g: {t: e.as_dict() for t, e in tests.items()} for g, tests in expected.expectations(model).items()
         if names is None or g in names}, indent=2) + "\n")


# The huge pages of libfabric's EFA provider: a container that asks for no hugepages-2Mi gets a
# hugetlb limit of 0, and a huge page it touches anyway is a SIGBUS. AWS's EKS nccl-tests sample
# asks for 5,120 MiB of them; fmcluster's nodes do not reserve any, so the kit's MPI and torchrun
# ranks turn the provider's use of them off (libfabric fi_efa(7): FI_EFA_USE_HUGE_PAGE).
NO_HUGE_PAGES = nccl.NcclSetting(
    "FI_EFA_USE_HUGE_PAGE", "0", "no huge pages in the container: the pod asks for none (hugetlb limit 0)")


def environment(group: NodeGroup, *, efa: Optional[bool] = None) -> list[dict[str, str]]:
    """The node bootstrap's EFA / NCCL settings (fmcluster.node.nccl) as container env, and no
    huge pages (NO_HUGE_PAGES) where EFA is used; `efa`: whether the pod uses it (default: the
    group's)."""
    efa = group.efa if efa is None else efa
    settings = list(nccl.nccl_settings(group.instance, efa))
    if efa:
        settings.append(NO_HUGE_PAGES)
    return [{"name": s.name, "value": s.value} for s in settings]


def shm() -> tuple[dict[str, Any], dict[str, Any]]:
    """/dev/shm in memory (NCCL's and PyTorch's shared memory): the volume and its mount."""
    return ({"name": "dshm", "emptyDir": {"medium": "Memory"}}, {"name": "dshm", "mountPath": "/dev/shm"})


CHANNEL_CLAIM = "imex-channel"  # a pod's name for its claim of the job's IMEX channel


def compute_domain(group: NodeGroup, name: str, *, namespace: str = "") -> list[dict[str, Any]]:
    """The ComputeDomain `name` of a job on an UltraServer group (none elsewhere); it grows with the
    job (numNodes 0). The kit's manifests() sets the namespace; the serving kit gives its own."""
    if not group.ultraserver:
        return []
    return [kubernetes.compute_domain_manifest(name, namespace=namespace, num_nodes=0)]


def claim_channel(group: NodeGroup, name: str, pod: dict[str, Any], container: dict[str, Any]) -> None:
    """An UltraServer pod claims the IMEX channel of its job's ComputeDomain `name` (the template
    the driver makes for it; Kueue charges kueue.IMEX_CHANNEL_RESOURCE for it, one a pod)."""
    if group.ultraserver:
        pod["resourceClaims"] = [{"name": CHANNEL_CLAIM,
                                  "resourceClaimTemplateName": kubernetes.channel_claim_template(name)}]
        container["resources"]["claims"] = [{"name": CHANNEL_CLAIM}]
