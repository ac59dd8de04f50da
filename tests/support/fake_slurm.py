"""Stand-ins for Slurm's job-side commands, to RUN the kit's batch scripts (fmcluster.kits.jobs,
fmcluster.kits.serving) on this machine: `srun` runs each task of a step here, one per node of the
step (`--nodes`, `--nodelist`, `--exclude` over the job's hosts), with `--label`'s "N: " prefix,
and ignores the options that need a cluster (Pyxis' --container-*, --mpi, --cpu-bind) but can
print Pyxis' own progress lines on each task's stderr (FAKE_PYXIS=1); `hostname`
answers each task's node name; `scontrol show hostnames|node` answers from the job's hosts. The
scripts' own programs (fio, vllm, ray, curl, ...) are real where Debian has them, else the test
adds its own stand-ins (`extra`); `relocated` moves a script's fio runs onto directories here. A real
localhost Slurm (tests/support/slurm_cluster.py) can run the same scripts unchanged."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from fmcluster.kits import jobs

SRUN = r'''#!/bin/bash
# stand-in srun: each task of the step runs here, as one of the job's hosts (FAKE_HOSTS)
label=0 nodes= nodelist= exclude= image=
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in
    --label | -l) label=1 ;;
    --nodes=*) nodes=${1#*=} ;;
    --nodelist=*) nodelist=${1#*=} ;;
    --exclude=*) exclude=${1#*=} ;;
    --container-image=*) image=${1#*=} ;;
    *) ;;  # --container-image, --container-mounts, --ntasks..., --mpi, --cpu-bind: no container here
  esac
  shift
done
printf '%s\n' "srun image=$image nodelist=$nodelist exclude=$exclude nodes=$nodes $*" >>"$FAKE_SLURM_DIR/srun.log"
read -r -a all <<<"$FAKE_HOSTS"
hosts=()
if [[ -n "$nodelist" ]]; then
  IFS=, read -r -a hosts <<<"$nodelist"
else
  for h in "${all[@]}"; do [[ ",$exclude," == *",$h,"* ]] || hosts+=("$h"); done
  [[ -n "$nodes" ]] && hosts=("${hosts[@]:0:$nodes}")
fi
# Pyxis (FAKE_PYXIS=1): each node's slurmstepd prints its progress lines on the task's stderr before
# the task starts (pyxis_slurmstepd.c, slurm_spank_user_init: "importing" only for a step of one
# task, "imported" always), so srun --label prefixes them as the task's own lines (seen on a real
# Slurm with the tests' Pyxis stand-in, tests/kits/test_slurm_kits.py)
task() {
  if [[ -n "$image" && "${FAKE_PYXIS:-0}" == 1 ]]; then
    (( ${#hosts[@]} == 1 )) && echo "pyxis: importing docker image: $image" >&2
    echo "pyxis: imported docker image: $image" >&2
  fi
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


def stand_ins(root: Path, extra: dict[str, str] | None = None) -> Path:
    """A bin directory with srun, hostname and scontrol (and `extra`: name -> script text)."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, text in {"srun": SRUN, "hostname": HOSTNAME, "scontrol": SCONTROL, **(extra or {})}.items():
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
