#!/bin/bash
# fmcluster: EC2's interruption notice of this node's spot instance, handled on Slurm. Written by
# the node program to /usr/local/lib/fmcluster/interruption and run for as long as the node runs by
# fmcluster-interruption.service (scripts/boot/interruption.sh; systemd starts it again should it
# end), as root (a Slurm super user, as capacity-end).
#
# Usage: interruption SETTINGS_FILE   (/etc/fmcluster/interruption.env)
#   SLURM_BIN        Slurm's commands (AWS PCS keeps them on no PATH a unit gets)
#   SIGNAL           what the running jobs get, as sbatch --signal names it (slurm-jobs.sh)
#   POLL_SECONDS     how often the notice is looked for (2)
#   BACKOFF_SECONDS  the longest wait between looks while the metadata service fails (60)
#   TOKEN_SECONDS    how long an IMDSv2 token is asked for (21600, its most)
#   SLURM_SECONDS    each Slurm command's bound (slurm-jobs.sh; 30 when unset)
#   STATE_DIR        where the jobs signalled for a notice are kept
#   FMCLUSTER_LIB    where slurm-node.sh and slurm-jobs.sh are
# Under test: FMCLUSTER_ROOT (files under it), FMCLUSTER_POLLS (return after that many looks).
#
# EC2 gives a spot instance a notice two minutes before it stops or terminates it (none before a
# hibernation, which begins at once): the instance metadata item spot/instance-action, 404 until
# then, then {"action": "terminate|stop|hibernate", "time": "...Z"}; EC2 recommends looking every 5
# seconds (EC2 User Guide, "Spot Instance interruption notices"). aws-node-termination-handler
# looks every 2 seconds (cmd/node-termination-handler.go: time.Tick(2 * time.Second)), as this does,
# with one IMDSv2 token asked for again before it expires (or when refused: 401), each request
# bounded by 2 seconds, and, while the service does not answer, a wait that doubles up to
# BACKOFF_SECONDS (back to POLL_SECONDS with its next answer). A rebalance recommendation
# (events/recommendations/rebalance) is not acted on: it comes without a time, often long before any
# interruption or none, and draining on it would idle the node (the termination handler too acts on
# it only when asked: enableRebalanceMonitoring, default false).
#
# On a notice (each once): the node is drained at once, reason "fmcluster-interruption: spot ACTION
# at TIME [i-...]" (its instance), unless something else drained it, so that no job starts there
# again; then its running jobs are signalled once each with SIGNAL (slurm-jobs.sh signal_jobs: by the
# first of their nodes that this program drained for an interruption, so that a job of many nodes
# interrupted together gets one signal as a rule; the signal is recorded in the job's AdminComment,
# "fmcluster-interruption SIGNAL by NODE", and a job that holds it is not signalled again by another
# node's notice; two nodes that drain in the same instant may each signal it), as the job would have
# asked with --signal: a job that checkpoints on the signal has the two minutes. With no
# notice at start (404), a node this program drained is returned to service: its instance was
# stopped and started again, or AWS PCS launched another instance under the node's Slurm name
# (slurmctld keeps a drain and its reason across instances: node-health.sh says where in Slurm); so
# too when a notice other than terminate's goes while this runs (a hibernated instance resumed,
# and this program with it); a powered-down node's drain Slurm clears itself. Exit status: none
# while it runs.
set -uo pipefail
ROOT=${FMCLUSTER_ROOT:-}
# shellcheck source=/dev/null
source "${1:?usage: interruption SETTINGS_FILE}"
export PATH="${FMCLUSTER_ROOT:+$PATH:}$SLURM_BIN:$PATH"
# shellcheck source=/dev/null
source "$ROOT${FMCLUSTER_LIB:-/usr/local/lib/fmcluster}/slurm-node.sh"
# shellcheck source=/dev/null
source "$ROOT${FMCLUSTER_LIB:-/usr/local/lib/fmcluster}/slurm-jobs.sh"
REASON="fmcluster-interruption"
IMDS="http://169.254.169.254/latest"
STATE=$ROOT$STATE_DIR
TOKEN="" TOKEN_AT=0 INSTANCE="" HANDLED="" CODE="" NOTICE=""

log() {
  printf 'fmcluster-interruption: %s\n' "$*" >&2
}

# token: an IMDSv2 token in TOKEN, asked for again a minute before it expires
token() {
  if [[ -z "$TOKEN" ]] || ((SECONDS >= TOKEN_AT + TOKEN_SECONDS - 60)); then
    TOKEN=$(curl -sf --max-time 2 -X PUT "$IMDS/api/token" -H "X-aws-ec2-metadata-token-ttl-seconds: $TOKEN_SECONDS") \
      || { TOKEN=""; return 1; }
    TOKEN_AT=$SECONDS
  fi
}

# look: the HTTP status of spot/instance-action in CODE (000: no answer), its body in NOTICE
look() {
  local out
  CODE=000 NOTICE=""
  token || return 0
  out=$(curl -s --max-time 2 -w '\n%{http_code}' -H "X-aws-ec2-metadata-token: $TOKEN" "$IMDS/meta-data/spot/instance-action") \
    || return 0
  CODE=${out##*$'\n'} NOTICE=${out%$'\n'*}
  [[ "$CODE" != 401 ]] || TOKEN=""  # expired or refused: a new one next time
}

# instance: this instance's id in INSTANCE, once (for the drain's reason)
instance() {
  [[ -n "$INSTANCE" ]] || INSTANCE=$(curl -sf --max-time 2 -H "X-aws-ec2-metadata-token: $TOKEN" \
    "$IMDS/meta-data/instance-id") || INSTANCE=""
}

# act: the notice in NOTICE handled, once
act() {
  local action time node line
  action=$(sed -n 's/.*"action" *: *"\([a-z]*\)".*/\1/p' <<<"$NOTICE")
  time=$(sed -n 's/.*"time" *: *"\([^"]*\)".*/\1/p' <<<"$NOTICE")
  [[ "$action-$time" != "$HANDLED" ]] || return 0
  node=$(slurm_node)
  [[ -n "$node" ]] || { log "a notice ($action at $time), but Slurm does not answer"; return 1; }
  line=$(scontrol -o show node "$node") || return 1
  if [[ "$(field State "$line")" != *DRAIN* ]]; then
    instance
    scontrol update nodename="$node" state=drain reason="$REASON: spot $action at $time${INSTANCE:+ [$INSTANCE]}" \
      || return 1
    log "$node drained: EC2 interrupts its spot instance ($action) at $time"
  fi
  signal_jobs "$node" "$STATE/signalled-$action-$time" "$REASON" "EC2 interrupts the spot instance at $time" \
    "$(drained_by "$REASON:")" || return 1
  HANDLED="$action-$time"
}

# back_in_service: with no notice, the node returned to service where this program drained it
back_in_service() {
  local node line
  node=$(slurm_node)
  [[ -n "$node" ]] || return 1
  line=$(scontrol -o show node "$node") || return 1
  if [[ "$(field State "$line")" == *DRAIN* && "$(reason_of "$line")" == "$REASON:"* ]]; then
    scontrol update nodename="$node" state=resume || return 1
    log "$node back in service: no interruption notice on this instance"
  fi
}

main() {
  local delay=$POLL_SECONDS looks=0 checked=0 retry=0 failing=0
  install -d -m 0755 "$STATE"
  while :; do
    look
    case "$CODE" in
      200 | 404)
        ((!failing)) || log "the instance metadata service answers again"
        failing=0 delay=$POLL_SECONDS
        if [[ "$CODE" == 200 ]]; then
          act || log "could not drain the node or signal its jobs: trying again"
        else
          # a notice gone while this runs: the instance hibernated and resumed, and this with it (a
          # stopped one starts this again; a terminated one does not come back): look again
          [[ -z "$HANDLED" || "$HANDLED" == terminate-* ]] || HANDLED="" checked=0 retry=0
          if ((!checked && SECONDS >= retry)); then
            # Slurm may not answer yet (slurmd starts after this): again in 30 seconds, not every look
            if back_in_service; then checked=1; else retry=$((SECONDS + 30)); fi
          fi
        fi
        ;;
      *)
        ((failing)) || log "the instance metadata service does not answer (HTTP $CODE): looking less often"
        failing=1 delay=$((delay * 2 > BACKOFF_SECONDS ? BACKOFF_SECONDS : delay * 2))
        ;;
    esac
    looks=$((looks + 1))
    [[ -z "${FMCLUSTER_POLLS:-}" ]] || ((looks < FMCLUSTER_POLLS)) || return 0
    sleep "$delay"
  done
}

main
