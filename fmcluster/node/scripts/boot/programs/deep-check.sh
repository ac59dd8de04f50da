#!/bin/bash
# fmcluster: the deep check of a new GPU node, before its first job. Written by the node bootstrap to
# /usr/local/lib/fmcluster/deep-check and run by node-ready (DEEP_CHECK=1 in node-ready.env) once
# per instance, after its other checks passed: on the first boot of a new Capacity Block's node, of
# a scale-out, of a replacement. node-ready keeps the verdict (DEEP_CHECK_MARKER, keyed by the
# instance ID): a reboot does not run it again, a new instance does.
#   1. NVIDIA DCGM's diagnostic, `dcgmi diag -r DEEP_DCGM_LEVEL -j` (the Deep Learning AMIs carry
#      DCGM; level 2 "normally lasting approximately two minutes": NVIDIA, dcgmi-diag reference).
#      It fails when dcgmi cannot run or exits non-zero, or when any result of its JSON is "Fail"
#      (DCGM 3 and 4 both write `"status" : "Fail"`).
#   2. nccl-tests' all_reduce_perf over every GPU of the node in one process (`-g EXPECTED_GPUS`,
#      8 B to 1 GiB), the first of NCCL_TESTS (globs; the DLAMIs' EFA installer puts its nccl-tests
#      under /usr/local/cuda-X/efa/test-cuda-X/), under MPIRUN -np 1 where there is one. It fails when the binary is missing, exits
#      non-zero, reports wrong values, or its bus bandwidth at the largest size (the better of out of
#      place and in place, as `fmcluster verify` reads it) is below NCCL_BUSBW_FLOOR GB/s (the FAIL
#      line of the node-local figure `fmcluster verify` holds the acceptance kit to; 0: not judged).
# Each tool is bounded by `timeout`, together within DEEP_CHECK_SECONDS. Exit 0 when the node
# passed; 1 with one line per fault, "deep-dcgm TEXT" or "deep-nccl TEXT". Writes the textfile
# metrics fmcluster_node_deep_check_passed, _duration_seconds and _busbw_gbps; the tools' output goes
# to DEEP_CHECK_LOG.
set -uo pipefail
ROOT=${FMCLUSTER_ROOT:-}
# shellcheck source=/dev/null
source "$ROOT${NODE_READY_ENV:-/etc/fmcluster/node-ready.env}"

REASONS=()
BUSBW=""
LOG="$ROOT$DEEP_CHECK_LOG"

note() {
  printf '%s fmcluster-deep-check: %s\n' "$(date -u +%FT%TZ)" "$*" >>"$LOG"
}

dcgm() {
  local out rc=0 started=$SECONDS
  # dcgmi talks to DCGM's host engine, which a typical installation runs as nvidia-dcgm.service
  # (NVIDIA, DCGM "Customizing the systemd Service"): started if it is not running.
  if ! systemctl is-active --quiet nvidia-dcgm.service; then
    systemctl start nvidia-dcgm.service >/dev/null 2>&1 || note "nvidia-dcgm.service did not start"
  fi
  out=$(timeout "$DCGM_SECONDS" dcgmi diag -r "$DEEP_DCGM_LEVEL" -j 2>&1) || rc=$?
  printf '%s\n' "$out" >>"$LOG"
  note "dcgmi diag -r $DEEP_DCGM_LEVEL: exit $rc after $((SECONDS - started)) s"
  if ((rc == 124)); then
    REASONS+=("deep-dcgm dcgmi diag -r $DEEP_DCGM_LEVEL did not finish in $DCGM_SECONDS s")
  elif grep -Eiq '"status"[[:space:]]*:[[:space:]]*"fail' <<<"$out"; then
    REASONS+=("deep-dcgm DCGM diagnostic level $DEEP_DCGM_LEVEL failed: $(failed_tests <<<"$out")")
  elif ((rc != 0)); then
    REASONS+=("deep-dcgm dcgmi diag -r $DEEP_DCGM_LEVEL could not run (exit $rc): $(tail -n 1 <<<"$out")")
  fi
}

# failed_tests: the names of the tests whose results say Fail, from dcgmi's JSON (the "name" seen
# last before each failing status).
failed_tests() {
  awk 'match($0, /"name"[[:space:]]*:[[:space:]]*"[^"]*"/) { s = substr($0, RSTART, RLENGTH); sub(/^"name"[[:space:]]*:[[:space:]]*"/, "", s); sub(/"$/, "", s); name = s }
       tolower($0) ~ /"status"[[:space:]]*:[[:space:]]*"fail/ && !seen[name]++ { out = out (out ? ", " : "") name }
       END { print (out ? out : "a test") }'
}

nccl() {
  local pattern binary="" out rc=0 started=$SECONDS wrong
  for pattern in $NCCL_TESTS; do
    for binary in "$ROOT"$pattern; do
      [[ -x "$binary" ]] && break 2
      binary=""
    done
  done
  if [[ -z "$binary" ]]; then
    REASONS+=("deep-nccl nccl-tests' all_reduce_perf is not installed ($NCCL_TESTS)")
    return
  fi
  # The DLAMIs' nccl-tests link against their CUDA's NCCL and the EFA installer's Open MPI: one
  # process under its mpirun (MPIRUN) where the node has it, as AWS's examples run them, else alone
  # (MPI's singleton start).
  local cuda=${binary%%/efa/*} launch=()
  cuda=${cuda#"$ROOT"}
  if [[ -x "$ROOT$MPIRUN" ]]; then
    launch=("$ROOT$MPIRUN" --allow-run-as-root -np 1 -x LD_LIBRARY_PATH)
  fi
  out=$(LD_LIBRARY_PATH="$cuda/lib:$cuda/lib64:/opt/amazon/openmpi/lib:/opt/amazon/efa/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    timeout "$NCCL_SECONDS" "${launch[@]}" "$binary" -b 8 -e 1G -f 2 -g "$EXPECTED_GPUS" 2>&1) || rc=$?
  printf '%s\n' "$out" >>"$LOG"
  note "all_reduce_perf -g $EXPECTED_GPUS: exit $rc after $((SECONDS - started)) s"
  # The table's rows: size first; the bus bandwidths are the 6th and 2nd fields from the end (out
  # of place, in place), the wrong counts the 5th from the end and the last (both layouts, with or
  # without the root column). The largest size is the last row.
  read -r BUSBW wrong < <(awk '$1 ~ /^[0-9]+$/ && NF >= 12 { oop = $(NF-5); ip = $(NF-1); w = $(NF-4) + $NF;
      best = (ip + 0 > oop + 0) ? ip : oop; total += w } END { if (best != "") print best, total + 0 }' <<<"$out")
  if ((rc == 124)); then
    REASONS+=("deep-nccl all_reduce_perf did not finish in $NCCL_SECONDS s")
  elif ((rc != 0)) || [[ -z "$BUSBW" ]]; then
    REASONS+=("deep-nccl all_reduce_perf failed (exit $rc): $(tail -n 1 <<<"$out")")
  elif ((wrong > 0)); then
    REASONS+=("deep-nccl all_reduce_perf found $wrong wrong values")
  elif awk -v b="$BUSBW" -v f="$NCCL_BUSBW_FLOOR" 'BEGIN { exit !(b + 0 < f + 0) }'; then
    REASONS+=("deep-nccl all_reduce busbw $BUSBW GB/s on $EXPECTED_GPUS GPUs, below $NCCL_BUSBW_FLOOR GB/s")
  fi
}

write_metrics() {
  local passed=$1 seconds=$2 dir="$ROOT$TEXTFILE_DIR"
  mkdir -p "$dir"
  {
    printf '# HELP fmcluster_node_deep_check_passed 1 when the deep check of this instance passed (DCGM diagnostic, node-local NCCL)\n'
    printf '# TYPE fmcluster_node_deep_check_passed gauge\n'
    printf 'fmcluster_node_deep_check_passed %s\n' "$passed"
    printf '# HELP fmcluster_node_deep_check_duration_seconds how long the deep check took\n'
    printf '# TYPE fmcluster_node_deep_check_duration_seconds gauge\n'
    printf 'fmcluster_node_deep_check_duration_seconds %s\n' "$seconds"
    if [[ -n "$BUSBW" ]]; then
      printf '# HELP fmcluster_node_deep_check_busbw_gbps all_reduce bus bandwidth at 1 GiB over the node'"'"'s GPUs\n'
      printf '# TYPE fmcluster_node_deep_check_busbw_gbps gauge\n'
      printf 'fmcluster_node_deep_check_busbw_gbps %s\n' "$BUSBW"
    fi
  } >"$dir/fmcluster-deep-check.prom.tmp"
  mv "$dir/fmcluster-deep-check.prom.tmp" "$dir/fmcluster-deep-check.prom"
}

main() {
  local started=$SECONDS line
  mkdir -p "$(dirname "$LOG")"
  note "deep check of $EXPECTED_GPUS GPUs: DCGM level $DEEP_DCGM_LEVEL, all_reduce floor $NCCL_BUSBW_FLOOR GB/s"
  dcgm
  nccl
  write_metrics "$((${#REASONS[@]} == 0))" "$((SECONDS - started))"
  note "done in $((SECONDS - started)) s: ${#REASONS[@]} fault(s)"
  for line in "${REASONS[@]}"; do
    printf '%s\n' "$line"
  done
  ((${#REASONS[@]} == 0))
}

main "$@"
