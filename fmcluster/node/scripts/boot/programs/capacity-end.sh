#!/bin/bash
# fmcluster: the end of this node's reserved capacity, handled on Slurm: an AWS PCS Capacity Block
# (EC2) or a SageMaker HyperPod training plan (SageMaker). Written by the node program to
# /usr/local/lib/fmcluster/capacity-end and run by fmcluster-capacity-end.service at boot (after
# slurmd) and every few minutes by its timer (scripts/boot/capacity-end.sh), as root (a Slurm super
# user: slurmctld takes root's requests as the SlurmUser's, src/common/slurm_protocol_api.c
# validate_slurm_user / validate_super_user; on AWS PCS through slurmd's SACK socket, on HyperPod
# with munge).
#
# Usage: capacity-end SETTINGS_FILE   (/etc/fmcluster/capacity-end.env)
#   SLURM_BIN            Slurm's commands (AWS PCS and HyperPod keep them on no PATH a unit gets)
#   END_SOURCE           where the end comes from: capacity-block (EC2) or training-plan (SageMaker)
#   RESERVATION_ID       capacity-block: the group's block (cr-...); "" asks EC2 for this instance's
#   TRAINING_PLAN_ARN    training-plan: the group's plan
#   PLAN_INSTANCE_TYPE   training-plan: this node's type as the plan names it (ml.p5.48xlarge)
#   TERMINATION_MINUTES  the instances are terminated from this long before the end (EC2, a block: 30,
#                        60 for an UltraServer block, EC2 User Guide, Capacity Blocks; SageMaker, a
#                        plan: 30, "Reserved Capacity termination process")
#   SIGNAL_MINUTES       the running jobs are signalled this long before that
#   SIGNAL               what they get, as sbatch --signal names it (slurm-jobs.sh)
#   STATE_DIR            where the last end read and the jobs signalled are kept
#   FMCLUSTER_LIB        where slurm-node.sh and slurm-jobs.sh are
# Under test: FMCLUSTER_ROOT (files under it), FMCLUSTER_NOW (the clock, seconds since the epoch).
#
# 1. The end, read at every run (`fmcluster capacity extend` moves it; the last answer is kept in
#    STATE_DIR and used while EC2 or SageMaker does not answer), as "ID END":
#    - capacity-block: EC2 DescribeCapacityReservations' EndDate for RESERVATION_ID (the instance's
#      CapacityReservationId from DescribeInstances where the group names none: the instance
#      metadata service has no category for it, EC2 User Guide, "Instance metadata categories");
#      ID the block;
#    - training-plan: SageMaker DescribeTrainingPlan's ReservedCapacitySummaries of this node's
#      instance type (the plan's own StartTime and EndTime where it lists none): the end of the
#      reserved capacity that holds now, carried on through each that starts by its end (a plan's
#      reserved capacities may be discontinuous, and SageMaker's "View training plan details" says
#      the plan goes back to Scheduled only in a gap between them; back to back, the instances
#      are taken to stay); the region is the plan ARN's; ID the plan's name and the instance type.
# 2. RECLAIM = end - TERMINATION_MINUTES: one Slurm reservation per block or plan, fmcluster-end-ID
#    (created by the first node, updated by the others: each adds itself), Flags=MAINT,IGNORE_JOBS
#    (made over running jobs, which go on), Users=root, from RECLAIM to the end. slurmctld starts
#    no job on a node whose time limit would reach into a reservation the job cannot use
#    (src/slurmctld/reservation.c, job_test_resv: the node is taken out for the job), so nothing
#    starts that the end would cut; jobs that end before RECLAIM still run. A moved end moves it.
# 3. At RECLAIM - SIGNAL_MINUTES: the running jobs of this node are signalled once each (by the
#    first of their nodes in the reservation, so a job of many nodes gets one signal), as the job
#    would have asked with --signal=SIG@SECONDS, and the node drained with the reason
#    "fmcluster-capacity-end: ...": no job starts there again. An end moved past that time (an
#    extension) returns a node this program drained to service.
# Idempotent: a run that finds everything so changes nothing. Exit status 0, 1 when Slurm, EC2 or
# SageMaker could not be asked (the timer tries again).
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
# shellcheck source=/dev/null
source "$ROOT${FMCLUSTER_LIB:-/usr/local/lib/fmcluster}/slurm-jobs.sh"
REASON="fmcluster-capacity-end"
NOW=${FMCLUSTER_NOW:-$(date +%s)}
STATE=$ROOT$STATE_DIR
SOURCE=${END_SOURCE:-capacity-block}
WHAT="Capacity Block" FROM=EC2
[[ "$SOURCE" != training-plan ]] || WHAT="training plan" FROM=SageMaker
# a time as the AWS CLI prints one: only a full ISO 8601 time is read (`date -d ""` is today's
# midnight, and an empty or odd answer must never read as an end that has come: the nodes would drain)
ISO='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:?[0-9]{2})$'

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

# epoch TIME: an ISO 8601 TIME in seconds since the epoch; fails on anything else
epoch() {
  [[ "$1" =~ $ISO ]] && date -d "$1" +%s 2>/dev/null
}

# plan_time TIME: a time of SageMaker's answer in seconds since the epoch: ISO 8601 (the AWS CLI v2's
# default) or the seconds themselves, as SageMaker's JSON protocol sends them and the AWS CLI v1
# prints them by default (cli_timestamp_format: wire, awscli/customizations/scalarparse.py); ten
# digits, so that no odd number reads as an end long past
plan_time() {
  if [[ "$1" =~ ^[0-9]{10}(\.[0-9]+)?$ ]]; then printf '%s\n' "${1%%.*}"; else epoch "$1"; fi
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
      end=$(aws ec2 describe-capacity-reservations --region "$region" --capacity-reservation-ids "$id" \
        --query 'CapacityReservations[0].EndDate' --output text) &&
        end=$(epoch "$end") && printf '%s %s\n' "$id" "$end" >"$STATE/end"
    fi
  fi
  [[ -s "$STATE/end" ]] && cat "$STATE/end"
}

# plan_end: "ID END" from SageMaker (the reserved capacities of this node's type, or the plan's own
# times where it lists none), else the last answer kept
plan_end() {
  local region name id rows start end span s e at=$NOW found=0 more=1 spans=()
  IFS=: read -r _ _ _ region _ <<<"$TRAINING_PLAN_ARN"
  name=${TRAINING_PLAN_ARN##*/} id="${TRAINING_PLAN_ARN##*/}-${PLAN_INSTANCE_TYPE#ml.}"
  if rows=$(aws sagemaker describe-training-plan --region "$region" --training-plan-name "$name" --output text \
    --query "ReservedCapacitySummaries[?InstanceType=='$PLAN_INSTANCE_TYPE'].[StartTime,EndTime] || [[StartTime,EndTime]]"); then
    while read -r start end; do
      start=$(plan_time "$start") && end=$(plan_time "$end") && spans+=("$start $end")
    done <<<"$rows"
    # the reserved capacity that holds now, then each that starts by the end reached
    while ((more)); do
      more=0
      for span in "${spans[@]}"; do
        read -r s e <<<"$span"
        if ((s <= at && e > at)); then at=$e found=1 more=1; fi
      done
    done
    ((found)) && printf '%s %s\n' "$id" "$at" >"$STATE/end"
  fi
  [[ -s "$STATE/end" ]] && cat "$STATE/end"
}

# reserve NAME NODE START END: the end's reservation from START to END, with NODE in it
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
    log "reservation $1 moved: from $(slurm_time "$3") (the $WHAT's end moved)"
  fi
}

main() {
  local node id end reclaim signal_at name line state reason
  install -d -m 0755 "$STATE"
  node=$(slurm_node)
  [[ -n "$node" ]] || { log "Slurm does not answer, or knows no node of this host"; return 1; }
  if [[ "$SOURCE" == training-plan ]]; then
    read -r id end < <(plan_end) || true
  else
    read -r id end < <(block_end) || true
  fi
  [[ "${end:-}" =~ ^[0-9]+$ ]] || { log "no end for the $WHAT from $FROM (yet)"; return 1; }
  reclaim=$((end - TERMINATION_MINUTES * 60)) signal_at=$((end - (TERMINATION_MINUTES + SIGNAL_MINUTES) * 60))
  name="fmcluster-end-$id"
  if ((NOW < reclaim)); then
    reserve "$name" "$node" "$reclaim" "$end" || { log "could not create or update the reservation $name"; return 1; }
  fi
  line=$(scontrol -o show node "$node") || return 1
  state=$(field State "$line") reason=$(reason_of "$line")
  if ((NOW < signal_at)); then
    if [[ "$reason" == "$REASON"* && "$state" == *DRAIN* ]]; then
      scontrol update nodename="$node" state=resume || return 1
      log "$node back in service: the $WHAT now ends at $(slurm_time "$end")"
    fi
    return 0
  fi
  signal_jobs "$(field Nodes "$(scontrol -o show reservation "$name" 2>/dev/null)")" "$node" \
    "$STATE/signalled-$id-$end" "the $WHAT ends"
  if [[ "$state" != *DRAIN* ]]; then
    scontrol update nodename="$node" state=drain \
      reason="$REASON: $id is reclaimed from $(slurm_time "$reclaim")" || return 1
    log "$node drained: its $WHAT $id is reclaimed from $(slurm_time "$reclaim")"
  fi
}

main
