#!/bin/bash
# fmcluster: is this node ready to take jobs? Written by the node bootstrap to
# /usr/local/lib/fmcluster/node-ready; its settings are /etc/fmcluster/node-ready.env
# (rendered per node group from the instance catalog and the spec):
#   EXPECTED_GPUS       GPUs the instance type has (0: no GPU check)
#   REQUIRED_MOUNTS     mount points that must be mounted (the file system, /scratch), space-separated;
#                       one that is missing but in /etc/fstab is mounted again
#   LNET_EFA            1: LNet must have EFA interfaces (an EFA-enabled file system)
#   READY_WAIT_SECONDS  how long to wait for the node to become ready (GPUs and mounts can come
#                       up late at boot), checking every 5 seconds
#   TEXTFILE_DIR        where to write the textfile metric fmcluster_node_ready (1 ready, 0 not,
#                       with the reasons in the label `reason`)
#   ENROOT_VERSION      the Enroot `enroot version` must print ("" or unset: no container runtime
#                       check); then also PYXIS_PLUGIN must exist, PYXIS_CONF load it, GPU nodes
#                       have nvidia-container-cli (Enroot's GPU hook), and ENROOT_DIRS exist (made
#                       again, mode 1777, once every mount is up: a stop and start empties /scratch)
#   SLURMD_PLUGSTACK    the plugstack.conf slurmd really reads, when it is not the node's own
#                       ("": none): SageMaker HyperPod's slurmd runs configless, from the controller's
#                       files cached in /var/spool/slurmd/conf-cache; it must include PYXIS_CONF by name
#   IMEX                1: nvidia-imex.service must be enabled (UltraServer Slurm nodes: the IMEX
#                       prolog restarts it for each job; missing or not enabled, every job fails)
#   AWS_CLI             1: the AWS CLI (aws) must be installed (the Slurm nodes of a Capacity Block
#                       or training plan: capacity-end reads the end with it; without it the end
#                       would cut their jobs unwarned)
#   DEEP_CHECK          1: once every other check passed, the deep check (DEEP_CHECK_PROGRAM: a DCGM
#                       diagnostic and a node-local NCCL test) runs once per instance; its verdict is
#                       kept in DEEP_CHECK_MARKER (the instance ID, then its reasons, one a line), so
#                       a reboot reads it back and a new instance runs it again; a node that failed
#                       it is never ready (a hardware fault: the node is replaced). slurmd never
#                       starts there, so the health check cannot ask for that: where the node has
#                       FMCLUSTER_LIB/request-replacement, node-ready asks once per instance
#                       (DEEP_CHECK_MARKER.replacement holds the instance id once the queue took it)
# Exit status 0 when ready; 1 when not, with one line per reason on standard output, each
# "SLUG TEXT" (SLUG: a Kubernetes label value such as gpus-7-of-8).
#
# On AWS PCS it is slurmd's ExecStartPre (slurmd never starts on a node that is not ready); on
# Amazon EKS the node's user data runs it before kubelet registers the node, which is then
# tainted fmcluster.dev/not-ready; on SageMaker HyperPod Slurm a node that is not ready is
# drained with the reasons.
set -uo pipefail
ROOT=${FMCLUSTER_ROOT:-}
# shellcheck source=/dev/null
source "$ROOT${NODE_READY_ENV:-/etc/fmcluster/node-ready.env}"
INTERVAL=5

REASONS=()

check() {
  REASONS=()
  local gpus mount efa
  if ((EXPECTED_GPUS > 0)); then
    gpus=$({ nvidia-smi -L 2>/dev/null || true; } | grep -c '^GPU ' || true)
    if ((gpus < EXPECTED_GPUS)); then
      REASONS+=("gpus-$gpus-of-$EXPECTED_GPUS $gpus of $EXPECTED_GPUS GPUs visible")
    fi
  fi
  for mount in $REQUIRED_MOUNTS; do
    if ! mountpoint -q "$mount" && awk -v m="$mount" '$2 == m { found = 1 } END { exit !found }' "$ROOT/etc/fstab" 2>/dev/null; then
      mount "$mount" >/dev/null 2>&1 || true
    fi
    if ! mountpoint -q "$mount"; then
      REASONS+=("mount${mount//\//-} $mount is not mounted")
    fi
  done
  if [[ -n "${ENROOT_VERSION:-}" ]]; then
    check_containers
  fi
  if ((${IMEX:-0})) && ! systemctl is-enabled --quiet nvidia-imex.service; then
    REASONS+=("imex nvidia-imex.service is missing or not enabled")
  fi
  if ((${AWS_CLI:-0})) && ! command -v aws >/dev/null; then
    REASONS+=("aws-cli the AWS CLI (aws) is not installed: the capacity's end could not be read")
  fi
  if ((LNET_EFA)); then
    efa=$({ lnetctl net show --net efa 2>/dev/null || true; } | grep -c '@efa' || true)
    if ((efa == 0)); then
      REASONS+=("lnet-efa LNet has no EFA interface: the file system would be read over TCP")
    fi
  fi
}

check_containers() {
  local dir
  if [[ "$({ enroot version 2>/dev/null || true; })" != "$ENROOT_VERSION" ]]; then
    REASONS+=("containers-enroot Enroot $ENROOT_VERSION is not installed")
  fi
  if [[ ! -e "$ROOT$PYXIS_PLUGIN" ]] || ! grep -qxF "required $PYXIS_PLUGIN" "$ROOT$PYXIS_CONF" 2>/dev/null; then
    REASONS+=("containers-pyxis the Pyxis plugin is not installed")
  fi
  if [[ -n "${SLURMD_PLUGSTACK:-}" ]] && ! grep -qxF "include $PYXIS_CONF" "$ROOT$SLURMD_PLUGSTACK" 2>/dev/null; then
    REASONS+=("containers-plugstack slurmd's plugstack.conf does not load Pyxis: the controller's must include $PYXIS_CONF")
  fi
  if ((EXPECTED_GPUS > 0)) && ! command -v nvidia-container-cli >/dev/null; then
    REASONS+=("containers-gpu nvidia-container-cli is missing: containers would see no GPU")
  fi
  for dir in $ENROOT_DIRS; do
    if [[ ! -d "$ROOT$dir" && ${#REASONS[@]} -eq 0 ]]; then
      mkdir -p "$ROOT$dir" && chmod 1777 "$ROOT$dir"
    fi
    if [[ ! -d "$ROOT$dir" ]]; then
      REASONS+=("containers-dirs $dir is missing")
      break
    fi
  done
}

# instance_id: this instance's ID (EC2 Nitro instances carry it as their DMI board asset tag), or
# "unknown" (then the marker is kept for whatever instance this is).
instance_id() {
  local id=""
  read -r id <"$ROOT/sys/devices/virtual/dmi/id/board_asset_tag" 2>/dev/null || true
  printf '%s\n' "${id:-unknown}"
}

# deep_check: the deep check's reasons into REASONS, run on this instance's first pass only.
deep_check() {
  local marker="$ROOT$DEEP_CHECK_MARKER" id out rc=0
  id=$(instance_id)
  if [[ -f "$marker" && "$(head -n 1 "$marker")" == "$id" ]]; then
    mapfile -t -O "${#REASONS[@]}" REASONS < <(tail -n +2 "$marker")
    return
  fi
  printf 'fmcluster-node-ready: deep check of instance %s (at most %s s)\n' "$id" "$DEEP_CHECK_SECONDS" >&2
  out=$(timeout "$DEEP_CHECK_SECONDS" "$ROOT$DEEP_CHECK_PROGRAM") || rc=$?
  if ((rc != 0)) && [[ -z "$out" ]]; then
    out="deep-check the deep check did not finish (exit $rc)"
  fi
  mkdir -p "$(dirname "$marker")"
  printf '%s\n%s' "$id" "${out:+$out$'\n'}" >"$marker.tmp" && mv "$marker.tmp" "$marker"
  mapfile -t -O "${#REASONS[@]}" REASONS < <(printf '%s' "${out:+$out$'\n'}")
}

# deep_check_replacement: a node that failed its deep check asks the cluster's node replacer for a
# new instance (FMCLUSTER_LIB/request-replacement SLUG TEXT, the first deep-check reason), once per
# instance; a request the queue did not take is asked again at the next run (slurmd's gate). Bounded
# by REPLACEMENT_SECONDS (the request retries on its own: 3 attempts, 10 s apart), inside the 60 s
# slurmd's TimeoutStartSec keeps beyond the readiness wait and the deep check.
deep_check_replacement() {
  local lib=${FMCLUSTER_LIB:-${DEEP_CHECK_PROGRAM%/*}} marker="$ROOT$DEEP_CHECK_MARKER.replacement" id line
  [[ -x "$ROOT$lib/request-replacement" ]] || return 0
  line=$(grep -m 1 '^deep-' <<<"$(printf '%s\n' "${REASONS[@]}")") || return 0
  id=$(instance_id)
  [[ ! -f "$marker" || "$(head -n 1 "$marker")" != "$id" ]] || return 0
  if timeout "${REPLACEMENT_SECONDS:-45}" "$ROOT$lib/request-replacement" "${line%% *}" "${line#* }"; then
    printf '%s\n' "$id" >"$marker"
    printf 'fmcluster-node-ready: replacement requested: %s\n' "$line" >&2
  else
    printf 'fmcluster-node-ready: the replacement request failed: asked again at the next run\n' >&2
  fi
}

write_metric() {
  local ready=$1 reason=$2 dir="$ROOT$TEXTFILE_DIR"
  mkdir -p "$dir"
  {
    printf '# HELP fmcluster_node_ready 1 when the node may take jobs (fmcluster node-ready), 0 with the reasons\n'
    printf '# TYPE fmcluster_node_ready gauge\n'
    printf 'fmcluster_node_ready{reason="%s"} %s\n' "$reason" "$ready"
  } >"$dir/fmcluster-ready.prom.tmp"
  mv "$dir/fmcluster-ready.prom.tmp" "$dir/fmcluster-ready.prom"
}

main() {
  local waited=0 line texts=()
  while :; do
    check
    if ((${#REASONS[@]} == 0 || waited >= READY_WAIT_SECONDS)); then
      break
    fi
    sleep "$INTERVAL"
    waited=$((waited + INTERVAL))
  done
  if ((${#REASONS[@]} == 0 && ${DEEP_CHECK:-0})); then
    deep_check
    ((${#REASONS[@]} == 0)) || deep_check_replacement
  fi
  if ((${#REASONS[@]} == 0)); then
    write_metric 1 ""
    printf 'fmcluster-node-ready: ready\n' >&2
    return 0
  fi
  for line in "${REASONS[@]}"; do
    printf '%s\n' "$line"
    texts+=("${line#* }")
  done
  local joined
  joined=$(printf '%s; ' "${texts[@]}")
  write_metric 0 "${joined%; }"
  printf 'fmcluster-node-ready: not ready: %s\n' "${joined%; }" >&2
  return 1
}

main "$@"
