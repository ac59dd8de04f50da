#!/bin/bash
# fmcluster textfile collector: Slurm node states in the Prometheus text format, on stdout.
# `sinfo -h -N -o '%N %T'` lists every node (once per partition; counted once) with its state;
# the state's flag suffixes (* ~ # ! % $ @ ^ - +) are dropped and the states are counted as
# slurm_nodes_STATE, the names of the Slurm exporter the slurm alert rules use (down, fail,
# drain, alloc, idle, mix, comp, other).
# slurm_scrape_success is 1 when sinfo answered, 0 when it did not (slurmctld down or unreachable):
# then the counts are the last good ones (kept in STATE_DIR), never zeros that would clear the
# node alerts, and the SlurmScrapeFailing alert fires on the 0.
set -euo pipefail
STATE_DIR=${STATE_DIR:-/var/lib/fmcluster/state-slurm}
# Slurm's commands are not on a systemd unit's PATH: SageMaker HyperPod has them in /opt/slurm/bin,
# AWS PCS in /opt/aws/pcs/scheduler/slurm-VERSION/bin.
for dir in /opt/slurm/bin /opt/aws/pcs/scheduler/slurm-*/bin; do
  if [[ -x "$dir/sinfo" ]]; then PATH="$PATH:$dir"; fi
done
mkdir -p "$STATE_DIR"
last="$STATE_DIR/last-good.prom"

success() {
  printf '# HELP slurm_scrape_success 1 when sinfo answered, 0 when it did not (the counts are the last good ones)\n'
  printf '# TYPE slurm_scrape_success gauge\nslurm_scrape_success %s\n' "$1"
}

if ! listing=$(timeout 30 sinfo -h -N -o '%N %T' 2>/dev/null); then  # a hung slurmctld is a failed scrape
  echo "sinfo failed: keeping the last good counts" >&2
  if [[ -r "$last" ]]; then cat "$last"; fi
  success 0
  exit 0
fi

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
done < <(printf '%s\n' "$listing" | sort -u)

for key in alloc comp down drain fail idle mix other; do
  printf '# TYPE slurm_nodes_%s gauge\nslurm_nodes_%s %s\n' "$key" "$key" "${count[$key]}"
done >"$last.tmp"
mv "$last.tmp" "$last"
cat "$last"
success 1
