# shellcheck shell=bash
# fmcluster: what the node programs that take a node out of service before its instance goes share
# (capacity-end: the end of a Capacity Block or training plan; interruption: a spot interruption
# notice): installed beside them as FMCLUSTER_LIB/slurm-jobs.sh and sourced from there, after
# slurm-node.sh. The program that sources it defines `log` and SIGNAL, what the jobs get, as sbatch
# --signal names it: SIG (every job step, not the batch shell: `scancel --signal=SIG`) or B:SIG (the
# batch shell only: `scancel --batch --signal=SIG`); sbatch(1) --signal, scancel(1).
#
# Every Slurm command runs under `timeout` (SLURM_SECONDS, 30 unless the settings say otherwise): a
# slurmctld that does not answer must not hold the program (systemd skips a timer's run while the
# last one still runs, so a hung run would miss the end), and the caller tries again.

scontrol() { timeout "${SLURM_SECONDS:-30}" scontrol "$@"; }
squeue() { timeout "${SLURM_SECONDS:-30}" squeue "$@"; }
sinfo() { timeout "${SLURM_SECONDS:-30}" sinfo "$@"; }
scancel() { timeout "${SLURM_SECONDS:-30}" scancel "$@"; }

# field KEY LINE: the value of KEY= in an `scontrol -o show` line
field() {
  printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -1
}

# reason_of LINE: the Reason= of an `scontrol -o show node` line (the last field: it holds spaces)
reason_of() {
  printf '%s\n' "$1" | sed -n 's/.* Reason=\(.*\)$/\1/p'
}

# hostnames LIST: the hosts of a Slurm host list, one a line (none for "" or "(null)")
hostnames() {
  [[ -n "$1" && "$1" != "(null)" ]] || return 0
  scontrol show hostnames "$1"
}

# in_list NAME LIST: NAME is one of LIST's hosts (a Slurm host list)
in_list() {
  hostnames "$2" | grep -qx "$1"
}

# drained_by PREFIX: the nodes drained with a reason that starts with PREFIX, a Slurm host list
drained_by() {
  sinfo -h -N -o '%N|%E' | awk -F'|' -v r="$1" 'index($2, r) == 1 { print $1 }' | sort -u | paste -sd, -
}

# admin_comment JOB: the job's Restarts (how often Slurm requeued it) on a line, then its
# AdminComment ("" when it has none); fails when Slurm does not know the job. `scontrol show job`
# (not -o) prints the comment on a line of its own, so that its spaces are kept (before Slurm 26.05
# with a space after it).
admin_comment() {
  local out
  out=$(scontrol show job "$1") || return 1
  field Restarts "$(tr '\n' ' ' <<<"$out")"
  sed -n 's/^ *AdminComment=\(.*\)$/\1/p' <<<"$out" | sed 's/ $//'
}

# signal_jobs NODE SENT KEY WHY FIRST [BACKUP]: signal the running jobs of NODE once each, as the job
# would have asked with --signal. A job is signalled by the first of its nodes in FIRST (a Slurm host
# list; NODE when none of them is), or, where BACKUP (a host list) is given, by the first of its other
# nodes in BACKUP: the one that speaks for a first node that is gone, down or not running the program.
# Either records the signal in the job's AdminComment (KEY SIGNAL by NODE: visible to every node, and
# an administrator's field, which the job's owner cannot change): a job whose AdminComment holds KEY
# is not signalled again, by any node. Slurm keeps a job's AdminComment when it requeues the job (a
# node failed: the spot instance went), so a job requeued N times records KEY#N, and its new run is
# signalled for a new interruption or end. Each job is asked about once (its id kept in the file SENT).
# Two nodes that act in the same second may each signal a job: for a job that checkpoints on the
# signal a second checkpoint costs little, a missing one the work since the last. WHY ends the log
# line. Fails when squeue or a scancel failed (a job left unsignalled: the caller may try again).
signal_jobs() {
  local node=$1 sent=$2 key=$3 why=$4 job list n first backup comment restarts mark jobs failed=0
  local args=(--signal="${SIGNAL#B:}")
  local -A going=() spare=()
  [[ "$SIGNAL" != B:* ]] || args=(--batch "${args[@]}")
  for n in $(hostnames "$5"); do going[$n]=1; done
  for n in $(hostnames "${6:-}"); do spare[$n]=1; done
  touch "$sent"
  jobs=$(squeue -h -w "$node" -t RUNNING -o '%i %N') || { log "could not ask Slurm for the running jobs"; return 1; }
  while read -r job list <&3; do
    [[ -n "$job" ]] || continue
    grep -qx "$job" "$sent" && continue
    first="" backup=""
    for n in $(hostnames "$list"); do
      if [[ -z "$first" && -n "${going[$n]:-}" ]]; then
        first=$n
      elif [[ -z "$backup" && -n "${spare[$n]:-}" ]]; then
        backup=$n
      fi
    done
    [[ "${first:-$node}" == "$node" || "$backup" == "$node" ]] || continue
    comment=$(admin_comment "$job") || continue  # gone meanwhile
    restarts=$(head -1 <<<"$comment") comment=$(tail -n +2 <<<"$comment")
    mark=$key
    [[ ! "$restarts" =~ ^[1-9][0-9]*$ ]] || mark="$key#$restarts"
    if [[ "$comment" == *"$mark "* ]]; then
      printf '%s\n' "$job" >>"$sent"
      continue
    fi
    if ! scancel "${args[@]}" "$job"; then
      failed=1
      continue
    fi
    scontrol update jobid="$job" admincomment="${comment:+$comment; }$mark $SIGNAL by $node" \
      || log "job $job: its AdminComment could not be written (another of its nodes may signal it too)"
    printf '%s\n' "$job" >>"$sent"
    log "job $job signalled ($SIGNAL): $why"
  done 3<<<"$jobs"
  return "$failed"
}
