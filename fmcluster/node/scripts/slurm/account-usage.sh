#!/bin/bash
# fmcluster textfile collector of a cluster with teams (installed with fmcluster-accounting):
# slurm_account_gpus_allocated{account,user}, the GPUs running jobs hold per Slurm account (a team)
# and user, from `squeue`'s allocated TRES (gres/gpu=N: Slurm lists it where GPUs are tracked as a
# TRES, AccountingStorageTRES=gres/gpu); nothing while no job runs, or when squeue does not answer.
set -uo pipefail
SLURM_BIN=${SLURM_BIN:-/usr/bin}
if usage=$(timeout 30 "$SLURM_BIN/squeue" -h -t RUNNING -O 'Account:128,UserName:64,tres-alloc:512' 2>/dev/null); then
  declare -A gpus=()
  while read -r account user tres; do
    [[ -n "$account" && ",$tres," == *,gres/gpu=* ]] || continue
    held=${tres#*gres/gpu=}
    held=${held%%,*}
    [[ "$held" =~ ^[0-9]+$ ]] || continue
    key="account=\"$account\",user=\"$user\""
    gpus[$key]=$((${gpus[$key]:-0} + held))
  done <<<"$usage"
  printf '# HELP slurm_account_gpus_allocated GPUs held by running jobs, per Slurm account and user\n'
  printf '# TYPE slurm_account_gpus_allocated gauge\n'
  for key in "${!gpus[@]}"; do
    printf 'slurm_account_gpus_allocated{%s} %s\n' "$key" "${gpus[$key]}"
  done
fi
