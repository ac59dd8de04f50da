#!/bin/bash
# fmcluster: the end of this node's Capacity Block, handled on Slurm. Written by the node program to
# /usr/local/lib/fmcluster/capacity-end and run by fmcluster-capacity-end.service at boot (after
# slurmd) and every few minutes by its timer (scripts/boot/capacity-end.sh), as root (a Slurm super
# user: slurmctld takes root's requests as the SlurmUser's, src/common/slurm_protocol_api.c
# validate_slurm_user / validate_super_user; on AWS PCS through slurmd's SACK socket).
#
# Usage: capacity-end SETTINGS_FILE   (/etc/fmcluster/capacity-end.env)
#   SLURM_BIN            Slurm's commands (AWS PCS keeps them on no PATH a unit gets)
#   RESERVATION_ID       the group's Capacity Block (cr-...); "" asks EC2 for this instance's
#   TERMINATION_MINUTES  EC2 terminates the block's instances from this long before its end
#                        (30; 60 for an UltraServer block: EC2 User Guide, Capacity Blocks)
#   SIGNAL_MINUTES       the running jobs are signalled this long before that
#   SIGNAL               what they get, as sbatch --signal names it: SIG (every job step, not the
#                        batch shell: `scancel --signal=SIG`) or B:SIG (the batch shell only:
#                        `scancel --batch --signal=SIG`); sbatch(1) --signal, scancel(1)
#   STATE_DIR            where the last end EC2 gave and the jobs signalled are kept
#   FMCLUSTER_LIB        where slurm-node.sh is (the node's Slurm name)
# Under test: FMCLUSTER_ROOT (files under it), FMCLUSTER_NOW (the clock, seconds since the epoch).
#
# 1. The block's end: EC2 DescribeCapacityReservations' EndDate for RESERVATION_ID (the instance's
#    CapacityReservationId from DescribeInstances where the group names none: the instance
#    metadata service has no category for it, EC2 User Guide, "Instance metadata categories"),
#    read at every run, for `fmcluster capacity extend` moves it; the last answer is kept in
#    STATE_DIR and used while EC2 does not answer.
# 2. RECLAIM = end - TERMINATION_MINUTES: one Slurm reservation per block, fmcluster-end-ID
#    (created by the first node, updated by the others: each adds itself), Flags=MAINT,IGNORE_JOBS
#    (made over running jobs, which go on), Users=root, from RECLAIM to the end. slurmctld starts
#    no job on a node whose time limit would reach into a reservation the job cannot use
#    (src/slurmctld/reservation.c, job_test_resv: the node is taken out for the job), so nothing
#    starts that EC2 would cut; jobs that end before RECLAIM still run. A moved end moves it.
# 3. At RECLAIM - SIGNAL_MINUTES: the running jobs of this node are signalled once each (by the
#    first of their nodes in the reservation, so a job of many nodes gets one signal), as the job
#    would have asked with --signal=SIG@SECONDS, and the node drained with the reason
#    "fmcluster-capacity-end: ...": no job starts there again. An end moved past that time (an
#    extension) returns a node this program drained to service.
# Idempotent: a run that finds everything so changes nothing. Exit status 0, 1 when Slurm or EC2
# could not be asked (the timer tries again).
set -uo pipefail
ROOT=${FMCLUSTER_ROOT:-}
# shellcheck source=/dev/null
source "${1:?usage: capacity-end SETTINGS_FILE}"
export PATH="${FMCLUSTER_ROOT:+$PATH:}$SLURM_BIN:$PATH"
# scontrol reads and shows times in local time: in UTC, an hour repeated at a daylight-saving change
# never reads back as another time (and the reservation moved again on every run)
export TZ=UTC
# shellcheck source=/dev/null
source "$ROOT${FMCLUSTER_LIB:-/usr/local/lib/fmcluster}/slurm-node.sh"
REASON="fmcluster-capacity-end"
NOW=${FMCLUSTER_NOW:-$(date +%s)}
STATE=$ROOT$STATE_DIR

log() {
  printf 'fmcluster-capacity-end: %s\n' "$*" >&2
}

scontrol() {
  timeout 30 scontrol "$@"
}

metadata() {  # metadata PATH: one value of the instance metadata service (IMDSv2)
  local token
  token=$(curl -sf -X PUT "http://169.254.169.254/latest/api/token" -H 'X-aws-ec2-metadata-token-ttl-seconds: 60') || return 1
  curl -sf -H "X-aws-ec2-metadata-token: $token" "http://169.254.169.254/latest/meta-data/$1"
}

# slurm_time EPOCH: the time as scontrol takes and shows it (local time)
slurm_time() {
  date -d "@$1" +%Y-%m-%dT%H:%M:%S
}

# block_end: "ID END" (END in seconds since the epoch), from EC2, else the last answer kept
block_end() {
  local region instance id="$RESERVATION_ID" end
  if region=$(metadata placement/region); then
    if [[ -z "$id" ]] && instance=$(metadata instance-id); then
      id=$(aws ec2 describe-instances --region "$region" --instance-ids "$instance" \
        --query 'Reservations[].Instances[].CapacityReservationId' --output text)
    fi
    if [[ "$id" =~ ^cr-[0-9a-f]+$ ]]; then
      # only a full ISO 8601 time is read: `date -d ""` is today's midnight, and an empty or odd
      # answer must never read as an end that has come (the nodes would drain now)
      end=$(aws ec2 describe-capacity-reservations --region "$region" --capacity-reservation-ids "$id" \
        --query 'CapacityReservations[0].EndDate' --output text) &&
        [[ "$end" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:?[0-9]{2})$ ]] &&
        end=$(date -d "$end" +%s 2>/dev/null) && printf '%s %s\n' "$id" "$end" >"$STATE/end"
    fi
  fi
  [[ -s "$STATE/end" ]] && cat "$STATE/end"
}

# in_list NAME LIST: NAME is one of LIST's hosts (a Slurm host list)
in_list() {
  [[ -n "$2" && "$2" != "(null)" ]] && scontrol show hostnames "$2" | grep -qx "$1"
}

# field KEY LINE: the value of KEY= in an `scontrol -o show` line
field() {
  printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -1
}

# reserve NAME NODE START END: the block's reservation from START to END, with NODE in it
reserve() {
  local line nodes start end
  line=$(scontrol -o show reservation "$1" 2>/dev/null | grep "^ReservationName=$1 ")
  if [[ -z "$line" ]]; then
    scontrol create reservation reservationname="$1" starttime="$(slurm_time "$3")" \
      endtime="$(slurm_time "$4")" flags=maint,ignore_jobs users=root nodes="$2" >/dev/null || return 1
    log "reservation $1 made: nothing starts on $2 that would run past $(slurm_time "$3")"
    return 0
  fi
  nodes=$(field Nodes "$line")
  start=$(date -d "$(field StartTime "$line")" +%s) end=$(date -d "$(field EndTime "$line")" +%s)
  if ! in_list "$2" "$nodes"; then
    # Nodes+= (Slurm 23.02 and later: PCS's releases) adds under slurmctld's lock, so nodes adding
    # themselves at once lose none of each other; an older Slurm refuses it, and gets the list back
    scontrol update reservationname="$1" nodes+="$2" flags=ignore_jobs >/dev/null 2>&1 \
      || scontrol update reservationname="$1" nodes="$nodes,$2" flags=ignore_jobs >/dev/null || return 1
    log "reservation $1: $2 added"
  fi
  if ((start != $3 || end != $4)); then
    scontrol update reservationname="$1" starttime="$(slurm_time "$3")" endtime="$(slurm_time "$4")" \
      >/dev/null || return 1
    log "reservation $1 moved: from $(slurm_time "$3") (the block's end moved)"
  fi
}

# signal_jobs NAME NODE KEY: signal the running jobs of NODE whose first node in the reservation is
# NODE, each once for the end KEY
signal_jobs() {
  local nodes job list first n sent="$STATE/signalled-$3" args=(--signal="${SIGNAL#B:}")
  [[ "$SIGNAL" != B:* ]] || args=(--batch "${args[@]}")
  nodes=$(field Nodes "$(scontrol -o show reservation "$1" 2>/dev/null)")
  touch "$sent"
  squeue -h -w "$2" -t RUNNING -o '%i %N' | while read -r job list; do
    grep -qx "$job" "$sent" && continue
    first=""
    for n in $(scontrol show hostnames "$list"); do
      if in_list "$n" "$nodes"; then first=$n; break; fi
    done
    [[ "${first:-$2}" == "$2" ]] || continue
    if scancel "${args[@]}" "$job"; then
      printf '%s\n' "$job" >>"$sent"
      log "job $job signalled ($SIGNAL): the Capacity Block ends"
    fi
  done
}

main() {
  local node id end reclaim signal_at name line state reason
  install -d -m 0755 "$STATE"
  node=$(slurm_node)
  [[ -n "$node" ]] || { log "Slurm does not answer, or knows no node of this host"; return 1; }
  read -r id end < <(block_end) || true
  [[ "${end:-}" =~ ^[0-9]+$ ]] || { log "no end for the Capacity Block from EC2 (yet)"; return 1; }
  reclaim=$((end - TERMINATION_MINUTES * 60)) signal_at=$((end - (TERMINATION_MINUTES + SIGNAL_MINUTES) * 60))
  name="fmcluster-end-$id"
  if ((NOW < reclaim)); then
    reserve "$name" "$node" "$reclaim" "$end" || { log "could not create or update the reservation $name"; return 1; }
  fi
  line=$(scontrol -o show node "$node") || return 1
  state=$(field State "$line") reason=$(printf '%s\n' "$line" | sed -n 's/.* Reason=\(.*\)$/\1/p')
  if ((NOW < signal_at)); then
    if [[ "$reason" == "$REASON"* && "$state" == *DRAIN* ]]; then
      scontrol update nodename="$node" state=resume || return 1
      log "$node back in service: the block now ends at $(slurm_time "$end")"
    fi
    return 0
  fi
  signal_jobs "$name" "$node" "$id-$end"
  if [[ "$state" != *DRAIN* ]]; then
    scontrol update nodename="$node" state=drain \
      reason="$REASON: $id is reclaimed from $(slurm_time "$reclaim")" || return 1
    log "$node drained: its Capacity Block $id is reclaimed from $(slurm_time "$reclaim")"
  fi
}

main
