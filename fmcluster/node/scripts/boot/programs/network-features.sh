#!/bin/bash
# fmcluster: publish this node's place in EC2's network as Slurm node features, so that a job can
# ask for nodes under one network node (`sbatch --constraint="[nn3-A|nn3-B]"`: Slurm's matching
# OR, every allocated node shares one of the listed features; the kit's placement.sh writes it).
# Written by the node bootstrap to /usr/local/lib/fmcluster/network-features and run by
# fmcluster-network-features.service at every boot, after slurmd (scripts/boot/network-features.sh).
# AWS PCS owns slurm.conf and takes no TopologyPlugin setting (it configures topology/block itself
# only for UltraServer groups), so features are the topology a PCS cluster can be given.
#
# Usage: network-features SLURM_BIN [ATTEMPTS [RETRY_SECONDS]]   set them (the unit, at every boot)
#        network-features --restore SLURM_BIN   set them again when Slurm lost them (the restore unit)
#        network-features --clear SLURM_BIN [ATTEMPTS [RETRY_SECONDS]]   at each start of slurmd:
#                        only this boot's network features on the node (none before the unit's first run)
#        network-features --leave SLURM_BIN [ATTEMPTS [RETRY_SECONDS]]   when the instance goes (the
#                        unit's stop, before slurmd's): no network features left on the Slurm node
#   SLURM_BIN       Slurm's commands, first on PATH (AWS PCS keeps them under
#                   /opt/aws/pcs/scheduler/slurm-VERSION/bin, on no PATH a unit gets)
#   ATTEMPTS        how many times to try (EC2 answers a new instance's topology some time after
#   RETRY_SECONDS   its launch; scontrol fails until slurmd has registered), and the wait between
#   FMCLUSTER_LIB   (environment) where slurm-node.sh is installed, beside this program
#
# 1. The instance id and region from the instance metadata service (IMDSv2).
# 2. `aws ec2 describe-instance-topology --instance-ids ID` (AWS CLI v2; EC2 API Reference,
#    DescribeInstanceTopology; IAM action ec2:DescribeInstanceTopology): NetworkNodes lists the
#    network nodes above the instance, top-down (the last is the one the instance is connected
#    to): 3 on most supported types, 4 on p6-b200 and p6-b300. An instance not in the answer yet,
#    or without network nodes yet, is asked again.
# 3. Features nn1-ID .. nnN-ID, layer 1 the top (ID: the network node's id without its "nn-";
#    Slurm's constraint parser takes every character but , & | * [ ] ( ) in a feature name:
#    src/slurmctld/job_scheduler.c, _feature_string2list), set with `scontrol update` as the
#    available and active features of this node (its Slurm name: slurm-node.sh's slurm_node, shared
#    with node-health, resolved once per boot and kept in NODE_CACHE under /run: where the name is
#    not the host's, resolving it dumps slurmctld's whole node table), every other feature kept.
# 4. The features are kept in CACHE (under /run: a stop and start moves an instance, a reboot
#    empties /run). Slurm forgets features set with scontrol when slurmctld restarts without -R or
#    is reconfigured (scontrol(1), AvailableFeatures): fmcluster-network-features-restore.service
#    runs `--restore` when slurmd gets a new configuration and every few minutes: one `scontrol
#    show node` that finds them there, else sets them again from CACHE (no EC2 call; nothing to do
#    without CACHE).
# 5. `--clear`: a new instance under a Slurm node name an earlier one had (AWS PCS replaces an
#    instance so) finds that instance's features on the node: slurmctld keeps them. slurmd's unit
#    runs `--clear` after each start of slurmd (ExecStartPost=, bounded): the node's network
#    features become this boot's (CACHE: a restart of slurmd keeps them), or none before the
#    unit's first run, so the node takes no job placed by an earlier instance's place in the
#    network. Not before slurmd: with auth/slurm a client gets its credential from the SACK socket
#    slurmd serves (/run/slurm/sack.socket), and AWS PCS runs configless (slurm.conf comes with
#    slurmd), so scontrol cannot work earlier. Tried every RETRY_SECONDS until slurmd answers.
#    slurmd tells systemd it is ready before it registers, so this runs while the node joins: a
#    job can still be placed there by the old features in that moment, and on a dynamic node that
#    is powered down (no instance, the features kept) before any instance runs. Hence also
# 6. `--leave`: the instance's own features leave the Slurm node when it shuts down or is
#    terminated cleanly: fmcluster-network-features.service stays active (RemainAfterExit=) and
#    runs it as its ExecStop=, before slurmd's stop (it is ordered after slurmd), while scontrol
#    still works. An instance that dies without a clean shutdown leaves them for `--clear`.
# Exit status 0 once set; 1 when it could not (the unit fails: `systemctl status` shows why).
set -uo pipefail
MODE="set"
[[ "${1:-}" != --restore && "${1:-}" != --clear && "${1:-}" != --leave ]] || { MODE=${1#--}; shift; }
SLURM_BIN=${1:?usage: network-features [--restore|--clear|--leave] SLURM_BIN [ATTEMPTS [RETRY_SECONDS]]}
ATTEMPTS=${2:-40}
RETRY_SECONDS=${3:-15}
ROOT=${FMCLUSTER_ROOT:-}
CACHE=$ROOT/run/fmcluster-network-features
NODE_CACHE=$ROOT/run/fmcluster-slurm-node  # the node's Slurm name, resolved once per boot
# slurm_node: the node's Slurm name (shared with node-health), installed beside this program in
# FMCLUSTER_LIB (its units' environment), wherever this copy of the program runs from
# shellcheck source=/dev/null
source "$ROOT${FMCLUSTER_LIB:-/usr/local/lib/fmcluster}/slurm-node.sh"
# Slurm's commands first (under test, FMCLUSTER_ROOT set, the stand-ins on PATH stay first)
export PATH="${FMCLUSTER_ROOT:+$PATH:}$SLURM_BIN:$PATH"

log() {
  printf 'fmcluster-network-features: %s\n' "$*" >&2
}

# notice: a line the journal keeps under its units' LogLevelMax=notice (syslog level 5: journald
# reads the prefix on a unit's output), what changed on the node
notice() {
  printf '%sfmcluster-network-features: %s\n' "${JOURNAL_STREAM:+<5>}" "$*" >&2
}

# scontrol, bounded: a slurmctld that does not answer never holds the unit (Slurm's from PATH)
scontrol() {
  timeout 30 scontrol "$@"
}

metadata() {  # metadata PATH: one value of the instance metadata service (IMDSv2)
  local token
  token=$(curl -sf -X PUT "http://169.254.169.254/latest/api/token" -H 'X-aws-ec2-metadata-token-ttl-seconds: 60') || return 1
  curl -sf -H "X-aws-ec2-metadata-token: $token" "http://169.254.169.254/latest/meta-data/$1"
}

# features: this instance's network nodes, top-down, as features (comma-separated); status 1
# when EC2 has none for it (yet). `--output text` prints a list of strings tab-separated on one
# line, and nothing for an empty one (AWS CLI, checked against a served DescribeInstanceTopology).
features() {
  local instance region nodes node layer=0 out=""
  instance=$(metadata instance-id) && region=$(metadata placement/region) || return 1
  nodes=$(aws ec2 describe-instance-topology --instance-ids "$instance" --region "$region" \
    --query 'Instances[].NetworkNodes[]' --output text) || return 1
  for node in $nodes; do
    node=${node#nn-}
    [[ "$node" =~ ^[A-Za-z0-9._-]+$ ]] || return 1
    out+="${out:+,}nn$((++layer))-$node"
  done
  [[ -n "$out" ]] && printf '%s\n' "$out"
}

# kept LINE KEY: the features of KEY= in an `scontrol -o show node` line that are no network node's
kept() {
  printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | tr ',' '\n' | grep -Ev '^(nn[0-9]+-.*|\(null\))?$' |
    paste -sd, -
}

# node_name: the node's Slurm name, from NODE_CACHE, else resolved (slurm_node) and kept there;
# nothing when Slurm does not answer or knows no such node (then nothing is kept)
node_name() {
  local node
  if [[ -s "$NODE_CACHE" ]]; then
    printf '%s\n' "$(<"$NODE_CACHE")"
    return
  fi
  node=$(slurm_node)
  [[ -n "$node" ]] || return 0
  printf '%s\n' "$node" >"$NODE_CACHE"
  printf '%s\n' "$node"
}

# set_features FEATURES: on this node, its other features kept (FEATURES empty: none of them left);
# status 0 set, 3 already so, else scontrol's
set_features() {
  local node line available active
  node=$(node_name)
  [[ -n "$node" ]] || return 1
  line=$(scontrol -o show node "$node") || return 1
  available=$(kept "$line" AvailableFeatures)
  active=$(kept "$line" ActiveFeatures)
  available+="${available:+${1:+,}}$1" active+="${active:+${1:+,}}$1"
  if [[ "$line" == *" AvailableFeatures=${available:-(null)} ActiveFeatures=${active:-(null)} "* ]]; then
    return 3
  fi
  scontrol update nodename="$node" AvailableFeatures="$available" ActiveFeatures="$active"
}

# retry_set FEATURES: set_features FEATURES, tried ATTEMPTS times RETRY_SECONDS apart until Slurm
# takes them (status 0) or already has them (3); 1 when it never did (slurmd not registered)
retry_set() {
  local attempt rc
  for ((attempt = 1; attempt <= ATTEMPTS; attempt++)); do
    ((attempt > 1)) && sleep "$RETRY_SECONDS"
    set_features "$1"
    rc=$?
    ((rc == 0 || rc == 3)) && return "$rc"
  done
  return 1
}

main() {
  local attempt rc wanted=""
  [[ -s "$CACHE" ]] && wanted=$(<"$CACHE")
  case "$MODE" in
    restore)
      [[ -n "$wanted" ]] || return 0  # never set on this boot: the unit's to do
      set_features "$wanted"
      rc=$?
      ((rc != 3)) || return 0
      ((rc == 0)) && notice "Slurm had lost them (slurmctld restarted or reconfigured): set again: $wanted"
      return "$rc" ;;
    leave)
      retry_set ""
      if (($? != 1)); then
        notice "network features removed: the instance goes"
        return 0
      fi
      log "could not remove the network features after $ATTEMPTS attempts: the next instance's slurmd start will"
      return 1 ;;
    clear)
      retry_set "$wanted"
      rc=$?
      ((rc == 3)) && return 0
      if ((rc == 0)); then
        notice "network features of an earlier instance removed${wanted:+, those of this boot kept: $wanted}"
        return 0
      fi
      log "could not clear the network features after $ATTEMPTS attempts (slurmd not registered?)"
      return 1 ;;
  esac
  for ((attempt = 1; attempt <= ATTEMPTS; attempt++)); do
    ((attempt > 1)) && sleep "$RETRY_SECONDS"
    if [[ -z "$wanted" ]] && ! wanted=$(features); then
      log "attempt $attempt: no network nodes from EC2 for this instance (yet)"
      continue
    fi
    printf '%s\n' "$wanted" >"$CACHE"
    set_features "$wanted"
    rc=$?
    if ((rc == 0 || rc == 3)); then
      ((rc == 0)) || log "already set"
      log "network features $wanted"
      return 0
    fi
    log "attempt $attempt: scontrol failed (slurmd not registered yet?)"
  done
  log "gave up after $ATTEMPTS attempts: jobs will not be placed by network topology on this node"
  return 1
}

main
