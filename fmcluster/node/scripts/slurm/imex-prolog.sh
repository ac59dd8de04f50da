#!/bin/bash
# Slurm prolog: NVIDIA IMEX for the nodes of one job on UltraServer instances (p6e-gb200,
# p6e-gb300), so that their GPUs reach each other over NVLink across instances. The pattern of
# the AWS PCS User Guide ("Configure UltraServer instances"); set as the cluster's
# Prolog=PATH with PrologFlags=Alloc,NoHold, so that it runs on every node of the allocation
# before the job starts. Installed on the UltraServer nodes only (fmcluster.node.bootstrap renders it
# per node group); the cluster's other nodes get a prolog that does nothing (no-imex-prolog.sh).
#
# On each node of an exclusive job:
#   1. the IMEX default channel (/dev/nvidia-caps-imex-channels/channel0) exists;
#   2. /etc/nvidia-imex/nodes_config.cfg lists the job's nodes (their NodeAddr), and only them:
#      an IMEX domain is the job's nodes, never the whole UltraServer;
#   3. nvidia-imex is restarted to read it, its command service on (config.cfg);
#   4. the prolog waits for the domain to be UP (below): IMEX_WAIT_SECONDS of pauses between
#      polls at most, each poll bounded to 10 s.
# Jobs that are not exclusive: nothing (exit 0). A failure exits 1: Slurm drains the node with the
# reason "Prolog error" and requeues the job, rather than run it without NVLink between nodes.
#
# Slurm runs a prolog with its own environment and no PATH (bash then falls back to its built-in
# default, /usr/local/bin:...:/bin:.), and AWS PCS keeps Slurm's commands in
# /opt/aws/pcs/scheduler/slurm-VERSION/bin, SageMaker HyperPod in /opt/slurm/bin: on no default
# PATH. So the script sets PATH itself, Slurm's bin directory (SLURM_BIN, rendered) first.
#
# Environment: SLURM_NODELIST and SLURM_JOB_OVERSUBSCRIBE (Slurm's, 23.02 and later),
# FMCLUSTER_ROOT (tests: the sandbox root; its PATH then comes before the script's own).
# `imex-prolog --check` only exits 0: slurmd's drop-in runs it before slurmd starts, so a node
# whose prolog is missing or not executable never takes a job (fmcluster/node/scripts/boot/prolog.sh).
set -uo pipefail

# Settings: fmcluster.node.bootstrap.imex_prolog replaces these lines (the whole line, NAME=...).
ROOT=${FMCLUSTER_ROOT:-}
SLURM_BIN=/opt/slurm/bin
# How long the domain may take to be UP. Every node of the job runs this prolog at the
# allocation (PrologFlags=Alloc), so the daemons start within seconds of each other; NVIDIA's
# daemon is READY once it has connected to every node of nodes_config.cfg (quorum), and AWS
# ParallelCluster's own GB200 test allows 45 s for that. 120 s is well past it; a domain not UP
# by then has a node that cannot join (its daemon failed, TCP 50000 blocked), and the job would
# only fail later in NCCL's MNNVL set-up. Slurm waits for the prolog (no PrologEpilogTimeout).
IMEX_WAIT_SECONDS=120
export PATH=${FMCLUSTER_ROOT:+$PATH:}$SLURM_BIN:/usr/sbin:/usr/bin:/sbin:/bin

LOG=$ROOT/var/log/fmcluster-imex-prolog.log
NODES_CONFIG=$ROOT/etc/nvidia-imex/nodes_config.cfg
CONFIG=$ROOT/etc/nvidia-imex/config.cfg
CHANNELS=$ROOT/dev/nvidia-caps-imex-channels

say() {
  printf '%s imex-prolog job %s: %s\n' "$(date -u +%FT%TZ)" "${SLURM_JOB_ID:-?}" "$*" >>"$LOG" 2>/dev/null
  logger -t fmcluster-imex-prolog -- "$*" 2>/dev/null || true
}

fail() {
  say "error: $*"
  echo "fmcluster-imex-prolog: $*" >&2
  exit 1
}

# command_service: IMEX's command service on (IMEX_CMD_ENABLED=1, IMEX_CMD_PORT=50005 in
# config.cfg, each line replaced or added), which nvidia-imex-ctl -N asks for the domain's state;
# NVIDIA's packaged config.cfg has it off, and the GB200 prologs of AWS's references turn it on the
# same way before the daemon starts. Read when nvidia-imex starts (restarted below).
command_service() {
  local setting
  for setting in IMEX_CMD_ENABLED=1 IMEX_CMD_PORT=50005; do
    if grep -q "^${setting%%=*}=" "$CONFIG" 2>/dev/null; then
      sed -i "s/^${setting%%=*}=.*/$setting/" "$CONFIG" || return 1
    else
      echo "$setting" >>"$CONFIG" || return 1
    fi
  done
}

main() {
  mkdir -p "${LOG%/*}" 2>/dev/null
  if [[ ! "${SLURM_JOB_OVERSUBSCRIBE:-}" =~ ^(NO|TOPO)$ ]]; then
    say "job is not exclusive (oversubscribe ${SLURM_JOB_OVERSUBSCRIBE:-unset}): IMEX left as it is; submit with --exclusive"
    exit 0
  fi
  systemctl is-enabled --quiet nvidia-imex.service ||
    fail "nvidia-imex.service is not enabled: the AMI needs NVIDIA's IMEX packages"

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

  command_service || fail "cannot turn on IMEX's command service in $CONFIG"
  timeout 15 systemctl stop nvidia-imex.service || true
  pkill -9 -x nvidia-imex || true  # a daemon that did not stop in time
  timeout 60 systemctl start nvidia-imex.service || fail "nvidia-imex.service did not start"
  # `nvidia-imex-ctl -N`: the whole domain's status (NVIDIA IMEX guide, "The nvidia-imex-ctl
  # Tool"), each node READY or not, ending "Domain State: UP" once all are connected.
  local waited=0
  until [[ "$(timeout 10 nvidia-imex-ctl -N 2>/dev/null)" =~ Domain\ State:\ UP ]]; do
    ((waited < IMEX_WAIT_SECONDS)) || fail "IMEX domain not UP after ${IMEX_WAIT_SECONDS}s (nvidia-imex-ctl -N)"
    sleep 5
    waited=$((waited + 5))
  done
  say "IMEX domain UP, $(wc -l <"$NODES_CONFIG") nodes: $(tr '\n' ' ' <"$NODES_CONFIG")"
}

[[ "${1:-}" == --check ]] && exit 0
main "$@"
