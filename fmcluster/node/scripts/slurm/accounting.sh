#!/bin/bash
# fmcluster-accounting FILE: the cluster's teams as Slurm accounting, from FILE (written by
# fmcluster.node.accounting from the spec), applied idempotently with sacctmgr:
#   qos NAME PRIORITY PREEMPTS         a priority class: its Priority, the QOSes it preempts (a,b or -)
#   account NAME SHARES GRPTRES QOS DEFAULT   a team: Fairshare, GrpTRES (or -), its QOS list, DefaultQOS
#   member ACCOUNT USER                a user of the team
#   group ACCOUNT GROUP                a Linux group whose members (getent) are users of the team
#   partition NAME ACCOUNT             a dedicated node group's partition: only ACCOUNT may use it
#                                      (AllowAccounts, set with scontrol where slurm.conf does not);
#                                      ACCOUNT - : open to every team (AllowAccounts=ALL where it
#                                      names only fmcluster's accounts or ones that are gone, as it
#                                      does after the group stops being dedicated; an administrator's
#                                      own AllowAccounts is left alone)
# Only what differs is changed, so a second run changes nothing. The accounts it manages carry
# Organization=fmcluster: such an account that FILE no longer names is removed from this cluster
# (ClusterName: a slurmdbd's other clusters keep theirs), its users' associations first, and then
# itself once no cluster has it; so is a user's association FILE no longer has. A user's default
# account on this cluster is always one that stays: one of the user's teams, or else another
# account the user keeps here (Slurm refuses to remove a default while others remain). Slurm
# refuses to remove an association that has jobs running or pending: that removal fails, is
# reported, and is made by the next run after the jobs have ended. Other accounts (root, an administrator's own) and other
# QOSes are left alone. A group that cannot be looked up removes nobody from its team.
# Exit 0: all applied; 1: a change failed (the rest was still made); 2: FILE unusable.
# Settings: SLURM_BIN (where sacctmgr and scontrol are: Slurm's commands are on no PATH of a
# boot script on PCS or HyperPod), GETENT, ALLOWED (the accounts fmcluster has ever named in a
# partition's AllowAccounts, one a line: what tells a removed team's account from one an
# administrator named before creating it).
set -uo pipefail

FILE=${1:-}
SLURM_BIN=${SLURM_BIN:-/usr/bin}
ALLOWED=${ALLOWED:-/var/lib/fmcluster/accounting-allowed-accounts}
GETENT=${GETENT:-getent}
SACCTMGR=$SLURM_BIN/sacctmgr
MARK=fmcluster
changes=0
failures=0

log() { printf 'fmcluster-accounting: %s\n' "$*"; }
query() { "$SACCTMGR" --noheader --parsable2 "$@"; }
sorted() { tr ',' '\n' | sed '/^$/d' | LC_ALL=C sort -u | paste -sd, -; }

# apply ARGS...: one change, said and made (sacctmgr --immediate: without asking), counted. Where
# several nodes run the program at once (the login nodes of AWS PCS), another may have made the
# same change between this run's query and its change: sacctmgr then finds nothing to add, modify
# or delete, which is said and not counted as a failure. Its words for that (exit status 1):
# "Nothing new added.", "Nothing deleted"; since Slurm 23.11 (so on every AWS PCS release) an
# account's add says "Already existing account A on cluster C" (slurmdbd's words) and a user's
# "Request didn't affect anything" then "Nothing added." (checked with 24.11 and 26.05).
apply() {
  local out
  log "$*"
  if out=$("$SACCTMGR" --immediate "$@" 2>&1); then
    changes=$((changes + 1))
  elif grep -Eq '^ *(Nothing (new added|added|modified|deleted)|Already existing account )' <<<"$out"; then
    log "already so (another run made it): ${out//$'\n'/ }"
  else
    log "failed: ${out//$'\n'/ }"
    failures=$((failures + 1))
  fi
}

# group_members GROUP: its members, one a line: the group's own list and the users whose
# primary group it is (getent group lists only the former), in lower case
group_members() {
  local entry gid
  entry=$("$GETENT" group "$1") || return 1
  gid=$(cut -d: -f3 <<<"$entry")
  {
    cut -d: -f4 <<<"$entry" | tr ',' '\n' | sed '/^$/d'
    "$GETENT" passwd | awk -F: -v gid="$gid" '$4 == gid { print $1 }'
  } | tr '[:upper:]' '[:lower:]' # as sacctmgr stores user names
}

if [[ -z $FILE || ! -r $FILE ]]; then
  log "usage: fmcluster-accounting FILE (a readable teams file)"
  exit 2
fi
if [[ ! -x $SACCTMGR ]]; then
  log "no sacctmgr at $SACCTMGR"
  exit 2
fi
CLUSTER=$("$SLURM_BIN/scontrol" show config | awk '$1 == "ClusterName" { print $3 }')
if [[ -z $CLUSTER ]]; then
  log "no ClusterName from scontrol show config"
  exit 2
fi

declare -A qos_priority=() qos_preempt=() account_line=() wanted=() unsure=() allow=()
qoses=() accounts=()
while read -r kind a b c d e rest; do
  case $kind in
    '' | '#'*) ;;
    qos)
      qoses+=("$a")
      qos_priority[$a]=$b
      qos_preempt[$a]=$(sorted <<<"${c#-}")
      ;;
    account)
      accounts+=("$a")
      account_line[$a]="$b|${c#-}|$(sorted <<<"$d")|$e"
      ;;
    member) wanted["$a|${b,,}"]=1 ;;
    partition) allow[$a]=$b ;;
    group)
      if members=$(group_members "$b"); then
        while read -r user; do [[ -z $user ]] || wanted["$a|$user"]=1; done <<<"$members"
      else
        log "group $b of $a: not found by getent; no user of $a is removed this time"
        unsure[$a]=1
        failures=$((failures + 1))
      fi
      ;;
    *)
      log "$FILE: unknown line: $kind $a $b $c $d $e $rest"
      exit 2
      ;;
  esac
done <"$FILE"

# --- the priority classes: every QOS first (one may preempt another), then their settings
for q in "${qoses[@]}"; do
  query show qos "name=$q" format=name | grep -qx "$q" || apply add qos "$q"
done
for q in "${qoses[@]}"; do
  IFS='|' read -r priority preempt mode < <(query show qos "name=$q" format=priority,preempt,preemptmode)
  if [[ ${priority:-} != "${qos_priority[$q]}" || $(sorted <<<"${preempt:-}") != "${qos_preempt[$q]}" ||
    ${mode:-} != requeue ]]; then
    apply modify qos where "name=$q" set "Priority=${qos_priority[$q]}" "Preempt=${qos_preempt[$q]}" \
      PreemptMode=requeue
  fi
done

# --- the teams' accounts, on this cluster
declare -A organization=() have_account=() have_user=() accounts_of=()
while IFS='|' read -r name org; do organization[$name]=$org; done < <(query show account format=account,organization)
while IFS='|' read -r account user shares grptres qos default; do
  if [[ -z $user ]]; then
    have_account[$account]="$shares|$grptres|$(sorted <<<"$qos")|$default"
    continue
  fi
  accounts_of[$user]+="$account "
  [[ ${organization[$account]:-} == "$MARK" ]] && have_user["$account|$user"]=1
done < <(query show assoc "cluster=$CLUSTER" format=account,user,fairshare,grptres,qos,defaultqos)

# GrpTRES=gres/gpu=N only where Slurm tracks gres/gpu (AccountingStorageTRES): elsewhere (AWS PCS,
# whose slurm.conf fmcluster does not set) sacctmgr refuses every limit on it, so the account is
# made without it and the limit skipped, said once a run
gpu_tracked=0
query show tres format=type,name | grep -qx 'gres|gpu' && gpu_tracked=1
for a in "${accounts[@]}"; do
  IFS='|' read -r shares grptres qos default <<<"${account_line[$a]}"
  if [[ -n $grptres ]] && ((!gpu_tracked)); then
    log "account $a: GrpTRES=$grptres skipped: this Slurm does not track gres/gpu (AccountingStorageTRES)"
    grptres=""
    account_line[$a]="$shares||$qos|$default"
  fi
  if [[ -z ${have_account[$a]+x} ]]; then
    apply add account "$a" "Cluster=$CLUSTER" "Organization=$MARK" "Description=fmcluster team $a" \
      "Fairshare=$shares" "QOS=$qos" "DefaultQOS=$default"
    [[ -z $grptres ]] || apply modify account where "name=$a" "cluster=$CLUSTER" set "GrpTRES=$grptres"
  elif [[ ${have_account[$a]} != "${account_line[$a]}" ]]; then
    limit=()
    ((gpu_tracked)) && limit=("GrpTRES=${grptres:-gres/gpu=-1}")
    apply modify account where "name=$a" "cluster=$CLUSTER" set "Fairshare=$shares" \
      "${limit[@]}" "QOS=$qos" "DefaultQOS=$default"
  fi
  if [[ ${organization[$a]:-$MARK} != "$MARK" ]]; then
    log "account $a exists and is not fmcluster's (Organization=${organization[$a]}): its users are still managed"
  fi
done

# --- the teams' users: added; each one's default account one that stays; then the rest removed
declare -A first=() going=() failed=()
for key in "${!wanted[@]}"; do
  account=${key%%|*} user=${key#*|}
  [[ -n ${have_user[$key]+x} ]] || apply add user "$user" "Account=$account" "Cluster=$CLUSTER"
done
for a in "${accounts[@]}"; do
  for key in "${!wanted[@]}"; do
    [[ ${key%%|*} == "$a" && -z ${first[${key#*|}]+x} ]] && first[${key#*|}]=$a
  done
done
# the associations this run removes: a member no longer in its team, and every user of a team the
# file no longer has (the accounts fmcluster made)
for key in "${!have_user[@]}"; do
  [[ -n ${wanted[$key]+x} || -n ${unsure[${key%%|*}]+x} ]] || going[$key]=1
done
# A user's default account (per cluster: Slurm keeps one on each cluster of the slurmdbd) moves
# before the association goes: sacctmgr refuses to remove a user's default association while the
# user has others ("You can not remove the default account of a user"), and the next run would
# fail the same way. It moves to the user's first team, or else to an account the user keeps on
# this cluster (an administrator's own); a user who keeps nothing loses the last association,
# which Slurm allows.
declare -A users=() default_of=()
for user in "${!first[@]}"; do users[$user]=1; done
for key in "${!going[@]}"; do users[${key#*|}]=1; done
for user in "${!users[@]}"; do
  default=$(query show user "$user" withassoc "cluster=$CLUSTER" format=defaultaccount | head -n 1)
  default_of[$user]=$default
  [[ -n ${wanted["$default|$user"]+x} ]] && continue
  [[ -z ${first[$user]+x} && -z ${going["$default|$user"]+x} ]] && continue # not fmcluster's to move
  target=${first[$user]:-}
  if [[ -z $target ]]; then
    for account in ${accounts_of[$user]:-}; do
      [[ -z ${going["$account|$user"]+x} ]] && target=$account && break
    done
  fi
  if [[ -n $target && $target != "$default" ]]; then
    before=$failures
    apply modify user where "name=$user" "cluster=$CLUSTER" set "DefaultAccount=$target"
    ((failures == before)) && default_of[$user]=$target
  fi
done
# one association at a time: removing an account with all its users' associations in one request
# is refused where a member of two teams is among them, even with every default moved (seen with
# Debian's Slurm 22.05: the refusal names a user for whom the account is the only association,
# whose default it rightly is), so each user's association goes first, then the account. A user's
# default association goes last: a user whose every association goes (its teams, and nothing
# else kept here) keeps the default until the others are gone, as Slurm refuses to remove the
# default "unless we are removing all of the user's accounts"; the associations otherwise go in
# no order (bash's hash order)
for last in 0 1; do
  for key in "${!going[@]}"; do
    account=${key%%|*} user=${key#*|}
    [[ $account == "${default_of[$user]:-}" ]] && is_default=1 || is_default=0
    ((is_default == last)) || continue
    before=$failures
    apply delete user where "name=$user" "account=$account" "cluster=$CLUSTER"
    ((failures == before)) || failed[$account]=1
  done
done

# --- the accounts fmcluster made that the spec no longer has (their users' associations gone above)
for account in "${!organization[@]}"; do
  [[ ${organization[$account]} == "$MARK" && -z ${account_line[$account]+x} ]] || continue
  [[ -z ${failed[$account]+x} ]] || continue # a user with jobs still: the next run removes it
  [[ -z ${have_account[$account]+x} ]] || apply delete account where "name=$account" "cluster=$CLUSTER"
  # the account itself once no cluster of the slurmdbd has it any more
  [[ -z $(query show assoc "account=$account" format=cluster) ]] && apply delete account where "name=$account"
done

# fmcluster_only ACCOUNTS: whether every account of the list (a,b) is fmcluster's: one it made
# (Organization), or one that no longer exists which a list fmcluster wrote named (a team removed
# by this run or an earlier one; ALLOWED). An account that does not exist and that fmcluster never
# named is an administrator's, perhaps not created yet: the list is theirs.
declare -A named=()
if [[ -r $ALLOWED ]]; then
  while IFS= read -r account; do [[ -n $account ]] && named[$account]=1; done <"$ALLOWED"
fi
fmcluster_only() {
  local account
  for account in ${1//,/ }; do
    if [[ -n ${organization[$account]+x} ]]; then
      [[ ${organization[$account]} == "$MARK" ]] || return 1
    else
      [[ -n ${named[$account]+x} ]] || return 1
    fi
  done
}

# the accounts of the dedicated partitions' lists, kept in ALLOWED before any is written
record=()
for partition in "${!allow[@]}"; do
  [[ ${allow[$partition]} == - ]] && continue
  for account in ${allow[$partition]//,/ }; do
    [[ -n ${named[$account]+x} ]] || record+=("$account")
    named[$account]=1
  done
done
if ((${#record[@]})); then
  if ! { mkdir -p "${ALLOWED%/*}" && printf '%s\n' "${record[@]}" >>"$ALLOWED"; }; then
    log "failed: cannot record the accounts of AllowAccounts in $ALLOWED"
    failures=$((failures + 1))
  fi
fi

# --- the partitions of dedicated node groups: their one account; of the other GPU groups: ALL
for partition in "${!allow[@]}"; do
  current=$("$SLURM_BIN/scontrol" --oneliner show partition "$partition" | grep -o 'AllowAccounts=[^ ]*')
  current=${current#AllowAccounts=}
  want=${allow[$partition]}
  if [[ $want == - ]]; then
    # open: a partition Slurm does not have has nothing to open; an administrator's list stays
    [[ -z $current || $current == ALL ]] && continue
    fmcluster_only "$current" || continue
    want=ALL
  fi
  [[ $current == "$want" ]] && continue
  log "scontrol update PartitionName=$partition AllowAccounts=$want"
  if out=$("$SLURM_BIN/scontrol" update "PartitionName=$partition" "AllowAccounts=$want" 2>&1); then
    changes=$((changes + 1))
  else
    log "failed: ${out//$'\n'/ }"
    failures=$((failures + 1))
  fi
done

if ((failures)); then
  log "$changes changes, $failures failed"
  exit 1
fi
if ((changes)); then log "$changes changes"; else log "up to date"; fi
