"""The scripts of the Kubernetes acceptance kit's pods (fmcluster.kits.kubernetes): one ConfigMap,
mounted at /kit, so they are files that can be read and checked (shellcheck), not strings inside
YAML. Pure."""

from __future__ import annotations

from fmcluster.kits.common import SMOKE_PY
from fmcluster.model import expected

NODE_NAME_FILE = "/tmp/fmcluster-node"  # nosec B108: inside the worker container, read by the launcher
MPI_PREFIX = "/opt/amazon/openmpi"  # the reference image's Open MPI (the EFA installer's)
# torchrun passes a SIGTERM on to its workers and kills those left this long after (PyTorch 2.6,
# torch/distributed/elastic/multiprocessing/api.py: PContext.close's timeout)
TORCHRUN_STOP_S = 30

NCCL_SH = r'''#!/bin/bash
# fmcluster acceptance: nccl-tests on the MPI operator's launcher. Each worker wrote its node's
# name to NODE_NAME_FILE; each step's output is marked with the node it ran on.
# Environment: GROUP, GPUS (per node), SIZE (largest message), NCCL_VARS (the variables to pass).
set -uo pipefail
: "${GROUP:?}" "${GPUS:?}" "${SIZE:?}"
read -ra vars <<<"${NCCL_VARS:-}"
mpi=(mpirun --allow-run-as-root --prefix MPI_PREFIX --bind-to none -x NCCL_DEBUG=INFO)
for var in "${vars[@]}"; do mpi+=(-x "$var"); done
# the operator's hostfile: one worker a line, "HOST slots=N"; it names it in the launcher's environment
mapfile -t hosts < <(awk '{print $1}' "${OMPI_MCA_orte_default_hostfile:-/etc/mpi/hostfile}")
# every worker answers over ssh (its sshd may still be starting) before anything is measured;
# one that never does fails the launcher, which the operator restarts
declare -A node
for host in "${hosts[@]}"; do
  for (( try = 1; try <= ${WORKER_WAIT_TRIES:-30}; try++ )); do
    node[$host]=$("${mpi[@]}" -H "$host:1" -np 1 cat NODE_NAME_FILE 2>/dev/null) && [[ -n ${node[$host]} ]] && break
    node[$host]=""
    sleep "${WORKER_WAIT_SECONDS:-10}"
  done
  [[ -n ${node[$host]} ]] || { echo "worker $host does not answer over ssh" >&2; exit 1; }
done
tmp=$(mktemp -d)
for op in OPERATIONS; do
  for host in "${hosts[@]}"; do
    "${mpi[@]}" -H "$host:$GPUS" -np "$GPUS" "${op}_perf" -b 8 -e "$SIZE" -f 2 -g 1 -c 1 -n 20 \
      >"$tmp/$host.$op" 2>&1 &
  done
  wait
  for host in "${hosts[@]}"; do
    echo "==> fmcluster node=${node[$host]} group=$GROUP test=nccl-$op-node <=="
    awk 1 "$tmp/$host.$op"
  done
  if (( ${#hosts[@]} > 1 )); then
    echo "==> fmcluster node=all group=$GROUP test=nccl-$op-nodes <=="
    "${mpi[@]}" -np $(( ${#hosts[@]} * GPUS )) -npernode "$GPUS" "${op}_perf" -b 8 -e "$SIZE" -f 2 -g 1 -c 1 \
      -n 50 2>&1
  fi
done
rm -rf "$tmp"
'''.replace("MPI_PREFIX", MPI_PREFIX).replace("NODE_NAME_FILE", NODE_NAME_FILE).replace(
    "OPERATIONS", " ".join(expected.NCCL_OPERATIONS))
DCGM_SH = r'''#!/bin/bash
# fmcluster acceptance: DCGM diagnostics (level 2, JSON) of this pod's node, beside a host engine
# of its own. Environment: GROUP, NODE_NAME.
set -uo pipefail
nv-hostengine -n -f /dev/null &
for _ in $(seq 30); do dcgmi discovery -l >/dev/null 2>&1 && break; sleep 2; done
echo "==> fmcluster node=${NODE_NAME:?} group=${GROUP:?} test=dcgm <=="
dcgmi diag -r 2 -j 2>&1 || true
'''
FIO_SH = r'''#!/bin/bash
# fmcluster acceptance: fio on each TARGET (test:directory:MiB, space-separated), this pod's node's
# share: FIO_JOBS jobs of MiB each (fio's --size is per job), written, then the same files read back
# (the same job name, size and count: fio lays out nothing new), the read pass only after a complete
# write; the node's files deleted after each target and on any exit (a failure, the pod's SIGTERM),
# and fmcluster-fio above them once it is empty. Environment: GROUP, NODE_NAME, TARGETS, FIO_JOBS.
set -uo pipefail
dir=""
remove() {
  if [[ -n "$dir" ]]; then rm -rf "$dir"; rmdir "${dir%/*}" 2>/dev/null; fi
  dir=""
}
trap remove EXIT
trap 'exit 143' TERM INT HUP
for target in ${TARGETS:?}; do
  IFS=: read -r test directory mib <<<"$target"
  echo "==> fmcluster node=${NODE_NAME:?} group=${GROUP:?} test=$test <=="
  dir="$directory/fmcluster-fio/$NODE_NAME"
  mkdir -p "$dir" || exit 1
  for rw in write read; do
    if ! fio --name=fmcluster --directory="$dir" --rw="$rw" --bs=1M --size="${mib}M" --numjobs="${FIO_JOBS:?}" \
      --ioengine=libaio --direct=1 --group_reporting --output-format=json 2>&1; then
      echo "fio $rw failed on $NODE_NAME"
      break
    fi
  done
  remove
done
'''


# The smoke pods' script: the pod's first process, so the SIGTERM of its end (an eviction, a
# preemption: kubelet signals a container's first process only) comes to it; it passes the signal on
# to torchrun, which passes it on to its workers and gives them TORCHRUN_STOP_S to end; smoke.py
# saves a checkpoint. A pod so ended exits 143 (128 + SIGTERM, as a shell reports a process the
# signal ended), and so does every other pod of the job whose run stopped with it (smoke.py's
# stopped mark: the ranks agree to stop; a pod that exited 0 would be a succeeded replica, and a
# succeeded Master the whole job succeeded: pkg/controller.v1/pytorch/pytorchjob_controller.go
# UpdateJobStatus), which the job's ExitCode restart policy retries (kubeflow/training-operator:
# pkg/util/train IsRetryableExitCode, 128 and over; pkg/controller.v1/common/pod.go ReconcilePods
# deletes the failed pod and makes it anew), and its next run resumes. Any other end exits 0, a
# failure of the test too (verify FAILs its output): the pinned operator (v1-855e096, 2023-08) marks
# an ExitCode job Restarting, not Failed, when a pod exits 1 to 127 (pytorchjob_controller.go
# UpdateJobStatus: any failure of a policy other than Never; kubeflow/training-operator issue 2044,
# fixed after the pin by pull request 2071), and it would hold its quota until activeDeadlineSeconds.
SMOKE_SH = r'''#!/bin/bash
# fmcluster acceptance: the PyTorch smoke test on this pod's node, torchrun on every GPU (the
# training operator gives it its PET_* settings). The pod's SIGTERM is passed on to torchrun, and so
# to smoke.py, which saves a checkpoint into CHECKPOINTS (on the shared file system; "" none) and
# resumes from it when the pod runs again; a pod ended so, or whose run stopped so on another pod's
# SIGTERM, exits 143 (restarted: the job's ExitCode policy), any other 0 (the job completes, a failed
# test's too: verify judges the output). Environment: GROUP, STEPS, CHECKPOINTS.
set -uo pipefail
echo "==> fmcluster node=all group=${GROUP:?} test=smoke <=="
args=(/kit/smoke.py --steps "${STEPS:?}")
if [[ -n ${CHECKPOINTS:-} ]]; then args+=(--checkpoint-dir "$CHECKPOINTS" --signal TERM); fi
ended=0
trap 'ended=1; [[ -n ${pid:-} ]] && kill -TERM "$pid" 2>/dev/null' TERM
torchrun "${args[@]}" &
pid=$!
wait "$pid"; rc=$?
while kill -0 "$pid" 2>/dev/null; do wait "$pid"; rc=$?; done  # a trapped signal ends wait early
# 143 too where the run stopped with its checkpoint saved on another pod's SIGTERM (every rank stops
# at the same step): a pod that ended 0 has succeeded, and is never run again (the Master's: the job)
if (( ended )) || [[ -n ${CHECKPOINTS:-} && -e $CHECKPOINTS/stopped ]]; then exit 143; fi
# any other end is the pod's success, a failed test's too (fmcluster verify judges the output: its failed
# line, or no ok line): the job's operator leaves an ExitCode job whose pod exited 1 to 127 Restarting,
# not Failed, until its activeDeadlineSeconds, its quota held the while
if (( rc != 0 )); then echo "fmcluster: torchrun exited $rc (the pod exits 0: only a stopped run restarts)"; fi
exit 0
'''


def scripts() -> dict[str, str]:
    """The kit's scripts, by file name (the ConfigMap's keys)."""
    return {"nccl.sh": NCCL_SH, "dcgm.sh": DCGM_SH, "fio.sh": FIO_SH, "smoke.sh": SMOKE_SH, "smoke.py": SMOKE_PY}
