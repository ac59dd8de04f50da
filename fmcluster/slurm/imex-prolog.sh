#!/bin/bash
# Slurm prolog: NVIDIA IMEX for the nodes of one job on UltraServer instances (p6e-gb200,
# p6e-gb300), so that their GPUs reach each other over NVLink across instances. The pattern of
# the AWS PCS User Guide ("Configure UltraServer instances"); set as the cluster's
# Prolog=PATH with PrologFlags=Alloc,NoHold, so that it runs on every node of the allocation
# before the job starts.
#
# On each node of an exclusive job on an UltraServer instance type:
#   1. the IMEX default channel (/dev/nvidia-caps-imex-channels/channel0) exists;
#   2. /etc/nvidia-imex/nodes_config.cfg lists the job's nodes (their NodeAddr), and only them:
#      an IMEX domain is the job's nodes, never the whole UltraServer;
#   3. nvidia-imex is restarted to read it.
# Other jobs and instance types: nothing (exit 0). A failure exits 1: Slurm drains the node with
# the reason "Prolog error" and requeues the job, rather than run it without NVLink between nodes.
#
# Environment: SLURM_NODELIST and SLURM_JOB_OVERSUBSCRIBE (Slurm's), ROOT (tests: the sandbox root).
# `imex-prolog --check` only exits 0: slurmd's drop-in runs it before slurmd starts, so a node
# whose prolog is missing or not executable never takes a job (fmcluster/bootstrap/prolog.sh).
set -uo pipefail

ROOT=${FMCLUSTER_ROOT:-}
LOG=$ROOT/var/log/fmcluster-imex-prolog.log
NODES_CONFIG=$ROOT/etc/nvidia-imex/nodes_config.cfg
CHANNELS=$ROOT/dev/nvidia-caps-imex-channels
ULTRASERVER_TYPES='^p6e-gb(200|300)\.'

say() {
  printf '%s imex-prolog job %s: %s\n' "$(date -u +%FT%TZ)" "${SLURM_JOB_ID:-?}" "$*" >>"$LOG" 2>/dev/null
  logger -t fmcluster-imex-prolog -- "$*" 2>/dev/null || true
}

fail() {
  say "error: $*"
  echo "fmcluster-imex-prolog: $*" >&2
  exit 1
}

instance_type() {  # IMDSv2
  local token
  token=$(curl -sf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' \
    http://169.254.169.254/latest/api/token) || return 1
  curl -sf -H "X-aws-ec2-metadata-token: $token" http://169.254.169.254/latest/meta-data/instance-type
}

main() {
  mkdir -p "${LOG%/*}" 2>/dev/null
  local type
  if ! type=$(instance_type); then
    fail "cannot read the instance type from the instance metadata service"
  fi
  [[ "$type" =~ $ULTRASERVER_TYPES ]] || exit 0
  if [[ ! "${SLURM_JOB_OVERSUBSCRIBE:-}" =~ ^(NO|TOPO)$ ]]; then
    say "job is not exclusive (oversubscribe ${SLURM_JOB_OVERSUBSCRIBE:-unset}): IMEX left as it is; submit with --exclusive"
    exit 0
  fi
  systemctl is-enabled --quiet nvidia-imex.service ||
    fail "nvidia-imex.service is not enabled on this $type node: the AMI needs NVIDIA's IMEX packages"

  local major
  major=$(awk '$2 == "nvidia-caps-imex-channels" { print $1 }' "$ROOT/proc/devices")
  [[ "$major" =~ ^[0-9]+$ ]] || fail "no nvidia-caps-imex-channels device in /proc/devices: is the NVIDIA driver loaded?"
  mkdir -p "$CHANNELS" || fail "cannot create $CHANNELS"
  if [[ ! -e "$CHANNELS/channel0" ]]; then
    mknod "$CHANNELS/channel0" c "$major" 0 || fail "cannot create the IMEX channel $CHANNELS/channel0"
  fi

  local addresses
  addresses=$(scontrol -ao show node "${SLURM_NODELIST:?}" | sed -n 's/.* NodeAddr=\([^ ]*\).*/\1/p')
  [[ -n "$addresses" ]] || fail "scontrol lists no NodeAddr for $SLURM_NODELIST"
  mkdir -p "${NODES_CONFIG%/*}" || fail "cannot create ${NODES_CONFIG%/*}"
  if ! { printf '%s\n' "$addresses" >"$NODES_CONFIG.tmp" && mv "$NODES_CONFIG.tmp" "$NODES_CONFIG"; }; then
    fail "cannot write $NODES_CONFIG"
  fi

  timeout 15 systemctl stop nvidia-imex.service || true
  pkill -9 -x nvidia-imex || true  # a daemon that did not stop in time
  timeout 60 systemctl start nvidia-imex.service || fail "nvidia-imex.service did not start"
  say "IMEX domain of $(wc -l <"$NODES_CONFIG") nodes: $(tr '\n' ' ' <"$NODES_CONFIG")"
}

[[ "${1:-}" == --check ]] && exit 0
main "$@"
