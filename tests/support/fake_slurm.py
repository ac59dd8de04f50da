"""Stand-ins for Slurm's job-side commands, to RUN the kit's batch scripts (fmcluster.kits.jobs,
fmcluster.kits.serving) on this machine: `srun` runs each task of a step here, one per node of the
step (`--nodes`, `--nodelist`, `--exclude` over the job's hosts), with `--label`'s "N: " prefix,
and ignores the options that need a cluster (--mpi, --cpu-bind, --container-mounts); `hostname`
answers each task's node name; `scontrol show hostnames|node` answers from the job's hosts. Pyxis
is modelled on each node of a step before its task: the image imported (FAKE_ENROOT_IMPORT, a
script run with the image and the step's environment, reads it as Enroot would; FAKE_PYXIS=1
prints Pyxis' own progress lines on the task's stderr), or, with --container-name, the node's named
container reused, as Pyxis does (see SRUN); `enroot list` and `enroot remove -f` answer for those
containers on the task's node. The scripts' own programs (fio, vllm, ray, curl, ...) are real where
Debian has them, else the test adds its own stand-ins (`extra`); `relocated` moves a script's fio
runs onto directories here. A real localhost Slurm (tests/support/slurm_cluster.py) can run the
same scripts unchanged."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from fmcluster.kits import jobs

SRUN = r'''#!/bin/bash
# stand-in srun: each task of the step runs here, as one of the job's hosts (FAKE_HOSTS)
label=0 nodes= nodelist= exclude= image= name=
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in
    --label | -l) label=1 ;;
    --nodes=*) nodes=${1#*=} ;;
    --nodelist=*) nodelist=${1#*=} ;;
    --exclude=*) exclude=${1#*=} ;;
    --container-image=*) image=${1#*=} ;;
    --container-name=*) name=${1#*=} ;;
    *) ;;  # --container-mounts, --ntasks..., --mpi, --cpu-bind, --overlap: no container here
  esac
  shift
done
printf '%s\n' "srun image=$image name=$name nodelist=$nodelist exclude=$exclude nodes=$nodes $*" \
  >>"$FAKE_SLURM_DIR/srun.log"
read -r -a all <<<"$FAKE_HOSTS"
hosts=()
if [[ -n "$nodelist" ]]; then
  IFS=, read -r -a hosts <<<"$nodelist"
else
  for h in "${all[@]}"; do [[ ",$exclude," == *",$h,"* ]] || hosts+=("$h"); done
  [[ -n "$nodes" ]] && hosts=("${hosts[@]:0:$nodes}")
fi
# Pyxis on each node of the step, before its task (NVIDIA/pyxis v0.24.0 pyxis_slurmstepd.c,
# slurm_spank_user_init and enroot_container_create). With --container-name=NAME (no flags: "auto"),
# the container pyxis_NAME (the default scope, "global"; pyxis_JOBID_NAME with FAKE_PYXIS_SCOPE=job)
# in the node's Enroot data path (FAKE_SLURM_DIR/enroot/HOST) is reused when it is there: no import,
# no progress line. Else the image is imported (FAKE_ENROOT_IMPORT; FAKE_PYXIS=1: the progress lines
# slurmstepd prints on the task's stderr, "importing" only for a step of one task, "imported" always,
# which srun --label prefixes as the task's own, as seen on a real Slurm with the tests' Pyxis
# stand-in) and, named, made there and kept after the step. The check and the making are apart, as in
# Pyxis (user_init lists the containers, the first task creates it): a step that made the same
# container in between fails this one, as `enroot create` does ("File already exists").
pyxis() {
  [[ -n "$image" ]] || return 0
  local data="$FAKE_SLURM_DIR/enroot/$FAKE_HOSTNAME" container=
  if [[ -n "$name" ]]; then
    [[ "$name" != *:* ]] || { echo "pyxis stand-in: flags of --container-name are not modelled" >&2; return 1; }
    container=pyxis_$name
    [[ "${FAKE_PYXIS_SCOPE:-global}" == job ]] && container=pyxis_${SLURM_JOB_ID}_$name
    [[ -d "$data/$container" ]] && return 0  # "pyxis: reusing existing container filesystem"
  fi
  if [[ -n "${FAKE_ENROOT_IMPORT:-}" ]]; then
    bash "$FAKE_ENROOT_IMPORT" "$image" >"$(mktemp "$FAKE_SLURM_DIR/import.XXXXXX")" 2>&1
  fi
  if [[ "${FAKE_PYXIS:-0}" == 1 ]]; then
    (( ${#hosts[@]} == 1 )) && echo "pyxis: importing docker image: $image" >&2
    echo "pyxis: imported docker image: $image" >&2
  fi
  if [[ -n "$container" ]] && ! { mkdir -p "$data" && mkdir "$data/$container" 2>/dev/null; }; then
    echo "pyxis: failed to create container filesystem for image: $image (File already exists: $data/$container)" >&2
    return 1
  fi
}
task() {
  pyxis || return 1  # the task fails, as Pyxis fails it (slurm_spank_task_init)
  "$@"
}
pids=()
for i in "${!hosts[@]}"; do
  if (( label )); then
    (FAKE_HOSTNAME=${hosts[$i]} task "$@" 2>&1 | sed -u "s/^/$i: /") &
  else
    FAKE_HOSTNAME=${hosts[$i]} task "$@" &
  fi
  pids+=("$!")
done
trap 'kill -TERM "${pids[@]}" 2>/dev/null' TERM INT
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
exit "$rc"
'''

# enroot on a node (the task's, FAKE_HOSTNAME): `list` (the containers' names, an error without any
# data path) and `remove -f NAME` (an error for one not there), over what the srun stand-in's Pyxis
# made: NVIDIA/enroot v4.1.2 src/runtime.sh, runtime::list and runtime::remove
ENROOT = r'''#!/bin/bash
data="$FAKE_SLURM_DIR/enroot/${FAKE_HOSTNAME:?enroot stand-in: no node}"
case "$1 ${2:-}" in
  "list ")
    cd "$data" 2>/dev/null || { echo "[ERROR] No such file or directory: $data" >&2; exit 1; }
    ls -1 ;;
  "remove -f")
    if [[ -z "${3:-}" || "$3" == */* || ! -d "$data/$3" ]]; then
      echo "[ERROR] No such file or directory: $data/${3:-}" >&2
      exit 1
    fi
    rm -rf "${data:?}/$3"
    printf '%s\n' "$FAKE_HOSTNAME $3" >>"$FAKE_SLURM_DIR/enroot-removed.log" ;;
  *) echo "enroot stand-in: $*" >&2; exit 1 ;;
esac
'''

HOSTNAME = '#!/bin/bash\necho "${FAKE_HOSTNAME:-$(/bin/hostname)}"\n'

SCONTROL = r'''#!/bin/bash
# stand-in scontrol: the job's hosts (FAKE_HOSTS), each with the address 10.0.0.N
read -r -a all <<<"$FAKE_HOSTS"
case "$1 $2" in
  "show hostnames") printf '%s\n' "${all[@]}" ;;
  "show node")
    for i in "${!all[@]}"; do
      [[ "${all[$i]}" == "$3" ]] || continue
      echo "NodeName=$3 Arch=x86_64 CoresPerSocket=48"
      echo "   NodeAddr=10.0.0.$((i + 1)) NodeHostName=$3 Version=22.05.8"
    done ;;
  *) echo "scontrol stand-in: $*" >&2; exit 1 ;;
esac
'''


# aws (`extra={"aws": AWS}`): `sts get-caller-identity` answers FAKE_ACCOUNT (or fails as the CLI does without
# credentials, FAKE_STS_FAILS=1); `ecr get-login-password` a token of the region (or fails as ECR
# denies a role without ecr:GetAuthorizationToken, FAKE_ECR_FAILS=1); each call logged
AWS = r'''#!/bin/bash
printf '%s\n' "$*" >>"$FAKE_SLURM_DIR/aws.log"
case "$1 $2" in
  "sts get-caller-identity")
    if [[ ${FAKE_STS_FAILS:-0} == 1 ]]; then
      printf '\nUnable to locate credentials. You can configure credentials by running "aws configure".\n' >&2
      exit 253
    fi
    echo "$FAKE_ACCOUNT" ;;
  "ecr get-login-password")
    if [[ ${FAKE_ECR_FAILS:-0} == 1 ]]; then
      printf '\nAn error occurred (AccessDeniedException) when calling the GetAuthorizationToken operation: '\
'User: arn:aws:sts::1:assumed-role/node/i-1 is not authorized to perform: ecr:GetAuthorizationToken\n' >&2
      exit 254
    fi
    echo "ecr-token-${4:?}" ;;
  *) echo "fake aws: $*" >&2; exit 2 ;;
esac
'''


def stand_ins(root: Path, extra: dict[str, str] | None = None) -> Path:
    """A bin directory with srun, hostname, scontrol and enroot (and `extra`: name -> script text)."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, text in {"srun": SRUN, "hostname": HOSTNAME, "scontrol": SCONTROL, "enroot": ENROOT,
                       **(extra or {})}.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def job_environment(root: Path, hosts: list[str], bin_dir: Path, **extra: str) -> dict[str, str]:
    """What sbatch gives a batch script, for the job's `hosts`, with the stand-ins first on PATH."""
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_SLURM_DIR": str(root),
            "FAKE_HOSTS": " ".join(hosts), "SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": ",".join(hosts),
            "SLURM_NNODES": str(len(hosts)), "SLURM_SUBMIT_DIR": str(root), "SLURM_ARRAY_TASK_ID": "0",
            **extra}


def run_batch(script: str, root: Path, hosts: list[str], *, extra: dict[str, str] | None = None,
              env: dict[str, str] | None = None, timeout: float = 120,
              signal_after: float | None = None) -> subprocess.CompletedProcess[str]:
    """Run a batch script as its first node would, stdout and stderr into one output file (as
    sbatch's --output); with `signal_after`, SIGTERM its whole process group that many seconds in,
    as scancel and the time limit do. When the script ends, whatever it left running is killed (as
    Slurm ends the job's steps)."""
    path = root / "job.sbatch"
    path.write_text(script)
    bin_dir = stand_ins(root, extra)
    output = root / "job.out"
    with output.open("w") as out:
        proc = subprocess.Popen(["bash", str(path)], cwd=root, env=job_environment(root, hosts, bin_dir, **(env or {})),
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        if signal_after is not None:
            try:
                proc.wait(timeout=signal_after)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=timeout)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, output.read_text(), "")


def relocated(script: str, model, group, root: Path, mib: int | None = None) -> str:
    """The script with each `fio_run TEST MOUNT MIB` line on a directory of `root` (and `mib`)."""
    for target in jobs.fio_targets(model, group):
        line = f"fio_run {target.test} {target.path} {target.job_mib}"
        assert script.count(f"\n{line}\n") == 1, line
        (root / target.test).mkdir()
        script = script.replace(line, f"fio_run {target.test} {root / target.test} {mib or target.job_mib}")
    return script
