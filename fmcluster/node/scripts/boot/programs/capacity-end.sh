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
#   PARTITION            the group's Slurm partition (fmcluster gives each node group its own)
#   TERMINATION_MINUTES  the instances are terminated from this long before the end (EC2, a block: 30,
#                        60 for an UltraServer block, EC2 User Guide, Capacity Blocks; SageMaker, a
#                        plan: 30, "Reserved Capacity termination process")
#   SIGNAL_MINUTES       the running jobs are signalled this long before that
#   SIGNAL               what they get, as sbatch --signal names it (slurm-jobs.sh)
#   READ_MINUTES         the end is read again once the saved answer is older than a random half to
#                        whole of this (30) ...
#   NEAR_MINUTES         ... and at every run from this long before the signal to the reclaim (10)
#   GRACE_SECONDS        how long a job's first node has to signal it before another of its nodes does
#   SLURM_SECONDS        each Slurm command's bound (slurm-jobs.sh; 30 when unset)
#   STATE_DIR            where the ends read, the block found and the jobs signalled are kept
#   FMCLUSTER_LIB        where slurm-node.sh and slurm-jobs.sh are
# Under test: FMCLUSTER_ROOT (files under it), FMCLUSTER_NOW (the clock, seconds since the epoch).
#
# 1. ID, what this node's end is read for: capacity-block, RESERVATION_ID, else the instance's
#    CapacityReservationId from DescribeInstances (the instance metadata service has no category
#    for it, EC2 User Guide, "Instance metadata categories"), asked once per boot (an instance
#    stays in its reservation while it runs: EC2 changes it only on a stopped instance,
#    ModifyInstanceCapacityReservationAttributes) and kept in STATE_DIR/block with the boot's id;
#    training-plan, the plan's name and the instance type. Everything kept is kept per ID
#    (STATE_DIR/end-ID, signalled-ID-END), so a node in another block, or given another
#    reservation_id, never acts on an end read for the old one.
# 2. The end ("END DUE", in STATE_DIR/end-ID; the last answer is used while EC2 or SageMaker does
#    not answer, and while it is fresh; `fmcluster capacity extend` moves the end):
#    - capacity-block: EC2 DescribeCapacityReservations' EndDate for ID;
#    - training-plan: SageMaker DescribeTrainingPlan's ReservedCapacitySummaries of this node's
#      instance type (the plan's own StartTime and EndTime where it lists none): the end of the
#      reserved capacity that holds now, carried on through each that starts by its end (a plan's
#      reserved capacities may be discontinuous, and SageMaker's "View training plan details" says
#      the plan goes back to Scheduled only in a gap between them; back to back, the instances
#      are taken to stay); the region is the plan ARN's.
#    Read when none is kept, when the one kept is older than DUE (a random READ_MINUTES/2 to
#    READ_MINUTES after it was read), and at every run from NEAR_MINUTES before the signal to the
#    reclaim. EC2 throttles each API per account and Region with a token bucket:
#    DescribeCapacityReservations, a non-mutating action, holds 100 and gets 20 a second, and
#    DescribeInstances with a filter the same (without one, 50 and 10) ("Request throttling for the
#    Amazon EC2 API"); SageMaker publishes no rate for DescribeTrainingPlan. Every 2 minutes, 1,000
#    nodes would ask 8.3 a second, 42% of that rate, all the block's life; with READ_MINUTES 30 they
#    ask 1000/(0.75 x 1800 s) = 0.74 a second (4%), and 8.3 a second only for the NEAR_MINUTES +
#    SIGNAL_MINUTES before the reclaim. An extension can be paid until 35 minutes before the end
#    (EC2 User Guide, "Extend Capacity Blocks"), inside the signal's window: there every run reads,
#    and NEAR_MINUTES (3 or more runs of the timer, which runs at most 190 s apart) puts a fresh
#    answer before the signal however old the last was. Far from the end an extension is seen up
#    to READ_MINUTES late, which moves nothing but the reservation's start: a job whose time limit
#    reaches past the old reclaim waits that much longer; none is cut.
# 3. RECLAIM = end - TERMINATION_MINUTES: one Slurm reservation per block or plan, fmcluster-end-ID,
#    Flags=MAINT,IGNORE_JOBS (made over running jobs, which go on), Users=root, from RECLAIM to the
#    end, over every node of PARTITION where the group's nodes are all in one block or plan (a
#    block named by RESERVATION_ID, a training plan), not only those that have run this program: a
#    node powered down (an AWS PCS dynamic node, idle~), not up yet or whose program fails is in it
#    too. slurmctld takes a reservation's nodes out of a job's candidates before it picks any, so
#    it never powers one up for a job that would reach into the reservation (src/slurmctld/
#    node_scheduler.c, job_test_resv before the nodes are picked; reservation.c, job_test_resv:
#    bit_and_not of the reservation's nodes), and so nothing starts that the end would cut; jobs
#    that end before RECLAIM still run. A node that is in another fmcluster-end reservation (its
#    block is another: a new instance under the same Slurm name after reservation_id changed) is
#    left out, and each node leaves the fmcluster-end reservations of blocks and plans it is not in.
#    On a group targeting a resource group of UltraServer blocks, whose nodes may be in several
#    blocks with other ends, each node adds only itself. A moved end moves the reservation.
# 4. At RECLAIM - SIGNAL_MINUTES the node is drained with the reason "fmcluster-capacity-end: ID is
#    reclaimed from ..." (no job starts there again), then its running jobs are signalled once each
#    (slurm-jobs.sh signal_jobs), as the job would have asked with --signal=SIG@SECONDS: by the first
#    of their nodes in the reservation, so that a job of many nodes gets one signal; where that node
#    has not done it GRACE_SECONDS after the signal time (its instance gone, slurmd down, its program
#    failing), by the first of the job's other nodes drained for this end, which has run past it.
#    The signal is recorded in the job's AdminComment ("fmcluster-capacity-end:ID@END SIGNAL by
#    NODE"), which every node reads first. An end moved past that time (an extension) returns a node
#    this program drained to service.
# Idempotent: a run that finds everything so changes nothing. Exit status 0; 1 when Slurm, EC2 or
# SageMaker could not be asked or a job could not be signalled (the timer tries again), or when the
# AWS CLI is missing (said once in the journal, at every run in the unit's state).
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
STATUS=0 AWS_CLI=1 END="" RESERVATIONS=""

log() {
  printf 'fmcluster-capacity-end: %s\n' "$*" >&2
}

aws() {
  timeout 60 aws "$@"
}

metadata() {  # metadata PATH: one value of the instance metadata service (IMDSv2)
  local token
  token=$(curl -sf --max-time 2 -X PUT "http://169.254.169.254/latest/api/token" \
    -H 'X-aws-ec2-metadata-token-ttl-seconds: 60') || return 1
  curl -sf --max-time 2 -H "X-aws-ec2-metadata-token: $token" "http://169.254.169.254/latest/meta-data/$1"
}

# have_aws: whether the AWS CLI is on PATH; its absence is said once (a marker in STATE_DIR) and
# makes the exit status 1 at every run, so that systemd shows the unit failed
have_aws() {
  if type -P aws >/dev/null; then
    rm -f "$STATE/no-aws-cli"
    return 0
  fi
  [[ -e "$STATE/no-aws-cli" ]] || log "the AWS CLI (aws) is not installed on this node: the end of its $WHAT" \
    "cannot be read from $FROM (fmcluster's images have it from their base, the Deep Learning AMI; an own" \
    "ami_id must carry it too)"
  touch "$STATE/no-aws-cli"
  AWS_CLI=0 STATUS=1
  return 1
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

# block_id: the Capacity Block of this node (step 1), else fails
block_id() {
  local boot="" kept="" id="" region instance
  if [[ -n "$RESERVATION_ID" ]]; then
    printf '%s\n' "$RESERVATION_ID"
    return
  fi
  read -r boot 2>/dev/null <"$ROOT/proc/sys/kernel/random/boot_id" || true
  [[ ! -s "$STATE/block" ]] || read -r kept id <"$STATE/block"
  if [[ -z "$boot" || "$kept" != "$boot" || ! "$id" =~ ^cr-[0-9a-f]+$ ]]; then
    ((AWS_CLI)) && region=$(metadata placement/region) && instance=$(metadata instance-id) || return 1
    # a filter: EC2's larger token bucket for DescribeInstances (step 2)
    id=$(aws ec2 describe-instances --region "$region" --filters "Name=instance-id,Values=$instance" \
      --query 'Reservations[].Instances[].CapacityReservationId' --output text) || return 1
    [[ "$id" =~ ^cr-[0-9a-f]+$ ]] || return 1
    [[ -z "$boot" ]] || printf '%s %s\n' "$boot" "$id" >"$STATE/block"
  fi
  printf '%s\n' "$id"
}

# block_read ID: the block's end from EC2, in seconds since the epoch
block_read() {
  local region end
  region=$(metadata placement/region) || return 1
  end=$(aws ec2 describe-capacity-reservations --region "$region" --capacity-reservation-ids "$1" \
    --query 'CapacityReservations[0].EndDate' --output text) || return 1
  epoch "$end"
}

# plan_read: the end from SageMaker, in seconds since the epoch, as the functions of the cluster read
# it (fmcluster_cdk/constructs/handler_lib/training_plans.py): none once the plan is Expired or
# Failed; else of the reserved capacities of this node's type that are Active or Scheduled (not one
# Pending its payment, Expired or Failed), or of the plan's own times and Status where it lists none.
# The answer's first row is the plan's own (plan, Status, StartTime, EndTime), a row a capacity after.
plan_read() {
  local region name rows kind status start end span s e at=$NOW found=0 more=1 listed=0 own="" spans=()
  IFS=: read -r _ _ _ region _ <<<"$TRAINING_PLAN_ARN"
  name=${TRAINING_PLAN_ARN##*/}
  rows=$(aws sagemaker describe-training-plan --region "$region" --training-plan-name "$name" --output text \
    --query "[[['plan',Status,StartTime,EndTime]], ReservedCapacitySummaries[].[InstanceType,Status,StartTime,EndTime]][]") \
    || return 1
  while read -r kind status start end; do
    if [[ "$kind" == plan && -z "$own" ]]; then
      [[ "$status" != Expired && "$status" != Failed ]] || return 1
      own="$status $start $end"
      continue
    fi
    listed=1
    [[ "$kind" == "$PLAN_INSTANCE_TYPE" ]] || continue
    [[ "$status" == Active || "$status" == Scheduled ]] || continue
    start=$(plan_time "$start") && end=$(plan_time "$end") && spans+=("$start $end")
  done <<<"$rows"
  if ((!listed)) && [[ -n "$own" ]]; then
    read -r status start end <<<"$own"
    if [[ "$status" == Active || "$status" == Scheduled ]]; then
      start=$(plan_time "$start") && end=$(plan_time "$end") && spans+=("$start $end")
    fi
  fi
  # the reserved capacity that holds now, then each that starts by the end reached
  while ((more)); do
    more=0
    for span in "${spans[@]}"; do
      read -r s e <<<"$span"
      if ((s <= at && e > at)); then at=$e found=1 more=1; fi
    done
  done
  ((found)) && printf '%s\n' "$at"
}

# near END: from NEAR_MINUTES before the signal to the reclaim, every run reads the end
near() {
  (($1 - (TERMINATION_MINUTES + SIGNAL_MINUTES + NEAR_MINUTES) * 60 <= NOW && NOW < $1 - TERMINATION_MINUTES * 60))
}

# read_end ID: the end for ID in END (step 2): the one kept, or read again where it is due
read_end() {
  local kept="$STATE/end-$1" end="" due=0 fresh half=$((READ_MINUTES * 30))
  [[ ! -s "$kept" ]] || read -r end due <"$kept"
  [[ "$end" =~ ^[0-9]+$ && "$due" =~ ^[0-9]+$ ]] || end="" due=0
  if [[ -z "$end" ]] || ((NOW >= due)) || near "$end"; then
    if ((AWS_CLI)); then
      if [[ "$SOURCE" == training-plan ]]; then fresh=$(plan_read); else fresh=$(block_read "$1"); fi
    fi
    if [[ "${fresh:-}" =~ ^[0-9]+$ ]]; then
      end=$fresh due=$((NOW + half + ((RANDOM << 15) | RANDOM) % (half + 1)))
      printf '%s %s\n' "$end" "$due" >"$kept.tmp" && mv "$kept.tmp" "$kept"
    fi
  fi
  END=$end
}

# resv_nodes NAME: the nodes of reservation NAME in RESERVATIONS (a Slurm host list)
resv_nodes() {
  field Nodes "$(grep "^ReservationName=$1 " <<<"$RESERVATIONS")"
}

# others NAME: the fmcluster-end reservations in RESERVATIONS other than NAME
others() {
  sed -n 's/^ReservationName=\(fmcluster-end-[^ ]*\) .*/\1/p' <<<"$RESERVATIONS" | grep -vx "$1"
}

# reserve NAME NODE START END WHOLE: the end's reservation from START to END, with NODE and the nodes
# of WHOLE (a host list; "": none) that are in no other fmcluster-end reservation in it (step 3)
reserve() {
  local line nodes start end n other list=""
  local -a add=()
  local -A claimed=() have=()
  for other in $(others "$1"); do
    for n in $(hostnames "$(resv_nodes "$other")"); do claimed[$n]=1; done
  done
  line=$(grep "^ReservationName=$1 " <<<"$RESERVATIONS")
  nodes=$(field Nodes "$line")
  for n in $(hostnames "$nodes"); do have[$n]=1; done
  for n in "$2" $(hostnames "$5"); do
    [[ -n "${have[$n]:-}" || ( "$n" != "$2" && -n "${claimed[$n]:-}" ) ]] || { add+=("$n"); have[$n]=1; }
  done
  if ((${#add[@]})); then list=$(IFS=,; scontrol show hostlist "${add[*]}") || return 1; fi
  if [[ -z "$line" ]]; then
    scontrol create reservation reservationname="$1" starttime="$(slurm_time "$3")" \
      endtime="$(slurm_time "$4")" flags=maint,ignore_jobs users=root nodes="$list" >/dev/null || return 1
    log "reservation $1 made: nothing starts on $list that would run past $(slurm_time "$3")"
    return 0
  fi
  start=$(date -d "$(field StartTime "$line")" +%s) end=$(date -d "$(field EndTime "$line")" +%s)
  if ((${#add[@]})); then
    # Nodes+= (Slurm 23.02 and later: PCS's releases) adds under slurmctld's lock, so nodes adding
    # themselves at once lose none of each other; an older Slurm refuses it, and gets the list back
    scontrol update reservationname="$1" nodes+="$list" flags=ignore_jobs >/dev/null 2>&1 \
      || scontrol update reservationname="$1" nodes="$nodes,$list" flags=ignore_jobs >/dev/null || return 1
    log "reservation $1: $list added"
  fi
  if ((start != $3 || end != $4)); then
    scontrol update reservationname="$1" starttime="$(slurm_time "$3")" endtime="$(slurm_time "$4")" \
      >/dev/null || return 1
    log "reservation $1 moved: from $(slurm_time "$3") (the $WHAT's end moved)"
  fi
}

# leave_others NAME NODE: NODE out of every fmcluster-end reservation other than NAME (step 3): of a
# block or plan it is not in; one left with no node is deleted
leave_others() {
  local other nodes rest failed=0
  for other in $(others "$1"); do
    nodes=$(resv_nodes "$other")
    in_list "$2" "$nodes" || continue
    rest=$(hostnames "$nodes" | grep -vx "$2" | paste -sd, -)
    if [[ -z "$rest" ]]; then
      scontrol delete reservationname="$other" >/dev/null || { failed=1; continue; }
    else
      scontrol update reservationname="$other" nodes-="$2" >/dev/null 2>&1 \
        || scontrol update reservationname="$other" nodes="$rest" >/dev/null || { failed=1; continue; }
    fi
    log "$2 left the reservation $other: its $WHAT is ${1#fmcluster-end-}"
  done
  return "$failed"
}

main() {
  local node id reclaim signal_at name line state reason whole="" backup="" drained
  install -d -m 0755 "$STATE"
  node=$(slurm_node)
  [[ -n "$node" ]] || { log "Slurm does not answer, or knows no node of this host"; return 1; }
  have_aws || true
  if [[ "$SOURCE" == training-plan ]]; then
    id="${TRAINING_PLAN_ARN##*/}-${PLAN_INSTANCE_TYPE#ml.}"
  else
    # (without the AWS CLI, which was said, nothing more is)
    id=$(block_id) || { ((!AWS_CLI)) || log "no Capacity Block for this instance from EC2 (yet)"; return 1; }
  fi
  read_end "$id"
  [[ "$END" =~ ^[0-9]+$ ]] || { ((!AWS_CLI)) || log "no end for the $WHAT from $FROM (yet)"; return 1; }
  reclaim=$((END - TERMINATION_MINUTES * 60)) signal_at=$((END - (TERMINATION_MINUTES + SIGNAL_MINUTES) * 60))
  name="fmcluster-end-$id"
  RESERVATIONS=$(scontrol -o show reservation) || { log "Slurm does not answer"; return 1; }
  if [[ -n "${PARTITION:-}" && ( "$SOURCE" == training-plan || -n "$RESERVATION_ID" ) ]]; then
    whole=$(field Nodes "$(scontrol -o show partition "$PARTITION")")
  fi
  if ((NOW < reclaim)); then
    reserve "$name" "$node" "$reclaim" "$END" "$whole" \
      || { log "could not create or update the reservation $name"; return 1; }
  fi
  leave_others "$name" "$node" || STATUS=1
  line=$(scontrol -o show node "$node") || return 1
  state=$(field State "$line") reason=$(reason_of "$line")
  if ((NOW < signal_at)); then
    if [[ "$reason" == "$REASON"* && "$state" == *DRAIN* ]]; then
      scontrol update nodename="$node" state=resume || return 1
      log "$node back in service: the $WHAT now ends at $(slurm_time "$END")"
    fi
    return "$STATUS"
  fi
  drained="$REASON: $id is reclaimed from $(slurm_time "$reclaim")"
  if [[ "$state" != *DRAIN* ]]; then
    if scontrol update nodename="$node" state=drain reason="$drained"; then
      log "$node drained: its $WHAT $id is reclaimed from $(slurm_time "$reclaim")"
    else
      log "could not drain $node" && STATUS=1
    fi
  fi
  ((NOW < signal_at + GRACE_SECONDS)) || backup=$(drained_by "$drained")
  signal_jobs "$node" "$STATE/signalled-$id-$END" "$REASON:$id@$END" "the $WHAT ends" \
    "$(field Nodes "$(scontrol -o show reservation "$name" 2>/dev/null)")" "$backup" || STATUS=1
  return "$STATUS"
}

main
