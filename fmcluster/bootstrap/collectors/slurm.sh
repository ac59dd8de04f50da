#!/bin/bash
# fmcluster textfile collector: Slurm node states in the Prometheus text format, on stdout.
# `sinfo -h -N -o '%N %T'` lists every node (once per partition; counted once) with its state;
# the state's flag suffixes (* ~ # ! % $ @ ^ - +) are dropped and the states are counted as
# slurm_nodes_STATE, the names of the Slurm exporter the slurm alert rules use (down, fail,
# drain, alloc, idle, mix, comp, other).
set -euo pipefail
# Slurm's commands are not on a systemd unit's PATH: SageMaker HyperPod has them in /opt/slurm/bin,
# AWS PCS in /opt/aws/pcs/scheduler/slurm-VERSION/bin.
for dir in /opt/slurm/bin /opt/aws/pcs/scheduler/slurm-*/bin; do
  if [[ -x "$dir/sinfo" ]]; then PATH="$PATH:$dir"; fi
done

declare -A count=([alloc]=0 [comp]=0 [down]=0 [drain]=0 [fail]=0 [idle]=0 [mix]=0 [other]=0)
while read -r node state; do
  [[ -n "$node" ]] || continue
  state=${state%%[*~#!%\$@^+-]*}
  case "$state" in
    allocated | alloc) key=alloc ;;
    completing | comp) key=comp ;;
    down) key=down ;;
    drained | draining | drain) key=drain ;;
    fail | failing) key=fail ;;
    idle) key=idle ;;
    mixed | mix) key=mix ;;
    *) key=other ;;
  esac
  count[$key]=$((count[$key] + 1))
done < <(sinfo -h -N -o '%N %T' | sort -u)

for key in alloc comp down drain fail idle mix other; do
  printf '# TYPE slurm_nodes_%s gauge\nslurm_nodes_%s %s\n' "$key" "$key" "${count[$key]}"
done
