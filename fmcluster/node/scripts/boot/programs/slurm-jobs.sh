# shellcheck shell=bash
# fmcluster: what the node programs that take a node out of service before its instance goes share
# (capacity-end: the end of a Capacity Block or training plan; interruption: a spot interruption
# notice): installed beside them as FMCLUSTER_LIB/slurm-jobs.sh and sourced from there, after
# slurm-node.sh. The program that sources it defines `scontrol` (under `timeout`), `log` and SIGNAL,
# what the jobs get, as sbatch --signal names it: SIG (every job step, not the batch shell:
# `scancel --signal=SIG`) or B:SIG (the batch shell only: `scancel --batch --signal=SIG`); sbatch(1)
# --signal, scancel(1).

# field KEY LINE: the value of KEY= in an `scontrol -o show` line
field() {
  printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -1
}

# reason_of LINE: the Reason= of an `scontrol -o show node` line (the last field: it holds spaces)
reason_of() {
  printf '%s\n' "$1" | sed -n 's/.* Reason=\(.*\)$/\1/p'
}

# in_list NAME LIST: NAME is one of LIST's hosts (a Slurm host list)
in_list() {
  [[ -n "$2" && "$2" != "(null)" ]] && scontrol show hostnames "$2" | grep -qx "$1"
}

# signal_jobs GOING NODE SENT WHY: signal the running jobs of NODE once each (their ids kept in the
# file SENT), each by the first of its nodes that is in GOING (a Slurm host list: the nodes whose
# instances go), so that a job of many nodes gets one signal; NODE when none is. WHY ends the log line.
# Fails when squeue or a scancel failed (a job left unsignalled: the caller may try again).
signal_jobs() {
  local job list first n jobs failed=0 args=(--signal="${SIGNAL#B:}")
  [[ "$SIGNAL" != B:* ]] || args=(--batch "${args[@]}")
  touch "$3"
  jobs=$(squeue -h -w "$2" -t RUNNING -o '%i %N') || return 1
  while read -r job list <&3; do
    [[ -n "$job" ]] || continue
    grep -qx "$job" "$3" && continue
    first=""
    for n in $(scontrol show hostnames "$list"); do
      if in_list "$n" "$1"; then first=$n; break; fi
    done
    [[ "${first:-$2}" == "$2" ]] || continue
    if scancel "${args[@]}" "$job"; then
      printf '%s\n' "$job" >>"$3"
      log "job $job signalled ($SIGNAL): $4"
    else
      failed=1
    fi
  done 3<<<"$jobs"
  return "$failed"
}
