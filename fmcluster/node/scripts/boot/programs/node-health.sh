#!/bin/bash
# fmcluster: is this node, in service, still healthy? Written by the node bootstrap (health.sh) to
# /usr/local/lib/fmcluster/node-health; its settings are /etc/fmcluster/node-health.env (rendered
# per node group from the instance catalog, the spec's `health` section and fmcluster.facts.health):
#   EXPECTED_GPUS    GPUs the instance type has (0: no GPU check)
#   EXPECTED_EFA     EFA devices the node group's layout has (0: no EFA check)
#   NVLINK           1: the GPUs are joined by NVLink (every link must be active)
#   REQUIRED_MOUNTS  mount points that must be mounted and answer (space-separated)
#   REPLACE_XIDS     the XIDs after which the node needs a new GPU (space-separated): fault `xid`
#   RESET_XIDS       the XIDs after which it needs a GPU reset or a reboot (space-separated; from
#                    fmcluster.facts.health.RESET_XIDS, as REPLACE_XIDS; an older node-health.env
#                    without it: 63 64 74 94): fault `xid-reset`; the same XID on the same GPU in
#                    the boot right after the reboot, on the same instance, is an `xid` fault
#   NODE_FAULTS      the faults of kind "node" (drained until the node passes again)
#   RESET_FAULTS     the faults of kind "reset" (default xid-reset ecc-reset): drained, then
#                    rebooted; every other fault is of kind "hardware" (drained, then replaced once
#                    its jobs ended). `ecc-reset`: uncorrected volatile ECC errors, a row remap or a
#                    page retirement pending a reset (XIDs 63, 64, 94 leave them: NVIDIA's A100
#                    memory error management guide); still there in the boot right after the reboot,
#                    on the same GPU, they are an `ecc` fault, as a failed row remap always is
#   TEXTFILE_DIR     where to write the textfile metrics
#   COMMAND_TIMEOUT  seconds any one command may take (nvidia-smi, stat of a mount, scontrol...)
#   DCGM_LEVEL, DCGM_TIMEOUT  the DCGM diagnostic run on an idle node (`dcgmi diag -r LEVEL`)
#   SLURM_BIN        Slurm's commands (Slurm gives a HealthCheckProgram no useful PATH; AWS PCS:
#                    /opt/aws/pcs/scheduler/slurm-VERSION/bin, SageMaker HyperPod: /opt/slurm/bin)
#   REASON_PREFIX    the prefix of every drain reason this program sets (fmcluster-health)
#   REPLACE          1: a node drained for a hardware fault and without jobs is replaced, once per
#                    fault and instance (a marker in STATE_DIR): where Slurm's power saving manages
#                    the node (a dynamic node), by Slurm (`scontrol update state=POWER_DOWN_ASAP`:
#                    the plane's SuspendProgram ends the instance, and Slurm clears the drain when
#                    it powers the node down, so the node's next job gets a new instance); else by
#                    asking the cluster's replacer (FMCLUSTER_LIB/request-replacement SLUG TEXT).
#                    A node drained for a reset-class fault is rebooted by Slurm instead, once per
#                    instance (`scontrol reboot ASAP nextstate=RESUME`: Slurm resumes it once it is
#                    back). Without a RebootProgram (`scontrol show config`: "(null)") it is not
#                    asked: Slurm 24.11 to 25.11 accept the request and do nothing (slurmd logs
#                    "RebootProgram isn't defined"; the node goes DOWN "reboot timed out"), 26.05
#                    refuses it; then a dynamic node is powered down (a new instance resets its
#                    GPUs too) and a static one stays drained for a person
#
# `node-health [--idle]`: run the checks (the DCGM diagnostic only with --idle: the node has no
# job); exit 0 when healthy, 1 with one line per fault on standard output, "SLUG TEXT" (SLUG one
# of fmcluster.facts.health.FAULT_SLUGS). Either way the textfile metrics fmcluster_node_healthy
# (1/0), fmcluster_node_fault{fault="SLUG"} (1 per fault found) and
# fmcluster_node_health_checked_timestamp_seconds are written.
#
# `node-health --slurm`: what Slurm's HealthCheckProgram, or the timer fmcluster-node-health.timer,
# runs: the checks (with --idle when Slurm says the node is IDLE), then
# - a fault: the node is drained, reason "fmcluster-health: SLUG: TEXT [i-...]" (`sinfo -R`; the
#   instance the fault was found on, from its DMI board asset tag), unless a person (or anything
#   else) drained it with another reason: that drain is never touched;
# - healthy again after a drain of ours for a node-kind fault (a file system): resumed;
# - healthy, drained by us on another instance (the reason names another instance id: AWS PCS
#   replaced the instance under the same Slurm node name, and slurmctld keeps DRAIN and its reason
#   across it, clearing them only on resume, power down or ResumeTimeout: Slurm, node_mgr.c):
#   resumed, whatever the fault was (a reason without an id is taken as this instance's);
# - drained by us for a hardware fault and no job left (IDLE+DRAIN, not MIXED/ALLOCATED+DRAIN,
#   which is "draining"): with REPLACE=1, powered down (a dynamic node) or its replacement
#   requested, once per fault and instance (a marker in STATE_DIR holding the instance id);
# - drained by us for a reset-class fault only: with REPLACE=1, rebooted by Slurm once per instance
#   (the marker STATE_DIR/reset holds the instance, the boot it was asked in, the boot after it,
#   and the XIDs and ECC findings, each with its GPU, it was asked for);
# - powered down by Slurm (a dynamic node) only from IDLE+DRAIN: a DOWN+DRAIN node powered down
#   stays DOWN, never used again;
# - being powered down or rebooted by Slurm (POWER_DOWN, POWERING_DOWN, POWERED_DOWN, REBOOT_*):
#   checked, never drained or resumed (a drain set while Slurm powers a node down would outlive
#   the instance: Slurm makes a powered-down node available only when it is not drained).
# Every external command runs under `timeout`, but the probes of the mounts: they run in the
# background, all at once, waited for at most COMMAND_TIMEOUT seconds together (`timeout` cannot end
# a process stuck in the kernel on a file system that does not answer), and a probe still stuck is
# never started again (check_mounts), so a hung file system or driver never hangs it (slurmd kills
# a HealthCheckProgram after 60 s: the "slurm" runner's timeouts are shorter).
# slurmd gives its HealthCheckProgram SLURMD_NODENAME and no other variable (no PATH, no
# SLURM_CONF): Slurm's commands are called by SLURM_BIN, and scontrol reads its own default slurm.conf.
set -uo pipefail
ROOT=${FMCLUSTER_ROOT:-}
# shellcheck source=/dev/null
source "$ROOT${NODE_HEALTH_ENV:-/etc/fmcluster/node-health.env}"
T=${COMMAND_TIMEOUT:-30}
STATE_DIR=${STATE_DIR:-/var/lib/fmcluster/health}
RESET_XIDS=${RESET_XIDS:-63 64 74 94}
RESET_FAULTS=${RESET_FAULTS:-xid-reset ecc-reset}

FAULTS=()
fault() { FAULTS+=("$1 $2"); }

# gpu_key BUS: a GPU's PCI domain, bus and device, as the kernel log's XIDs ("PCI:0000:53:00") and
# nvidia-smi ("00000000:53:00.0") both name it: 0:53:00. The domain tells GPUs apart where their
# buses are the same: a p6e-gb200's four are 00000008, 00000009, 00000018 and 00000019:01:00.0.
gpu_key() {
  local s=${1#PCI:} domain
  s=${s%.*}
  s=${s,,}
  domain=${s%:*:*}
  [[ "$domain" =~ ^[0-9a-f]+$ ]] || domain=0
  printf '%x:%s\n' "$((16#$domain))" "${s: -5}"
}

# reset_fault SLUG KEY BUS TEXT: a finding a GPU reset clears (KEY: xidN or ecc): fault SLUG-reset,
# or SLUG "... again after a reboot" where this is the boot right after a reboot this instance was
# asked for KEY on the same GPU (AGAIN, from the marker). RESET_KEYS: what a reboot is asked for.
AGAIN=" " RESET_KEYS=()
reset_fault() {
  local key
  key="$2@$(gpu_key "$3")"
  if [[ "$AGAIN" == *" $key "* ]]; then
    fault "$1" "$4 again after a reboot"
  else
    fault "$1-reset" "$4"
    RESET_KEYS+=("$key")
  fi
}

# A value nvidia-smi prints in brackets is an error ("[GPU requires reset]", "[Unknown Error]"),
# except "[N/A]" and "[Not Supported]": the field does not apply to this GPU.
bad_value() { [[ "$1" == \[* && "$1" != "[N/A]" && "$1" != "[Not Supported]" ]]; }
yes_or_positive() { [[ "$1" == Yes || ("$1" =~ ^[0-9]+$ && "$1" -gt 0) ]]; }

check_gpus() {
  local out n i bus ecc pend fail line rc
  # `nvidia-smi -L`: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)", one line per GPU.
  out=$(timeout "$T" nvidia-smi -L 2>&1)
  rc=$?
  if ((rc == 124)); then
    fault gpu-state "nvidia-smi does not answer (${T}s)"
    return 1
  elif ((rc != 0)); then
    # A GPU fallen off the bus (exit 15): nvidia-smi lists the others and, in the lost one's place,
    # "Unable to determine the device handle for GPU 0000:73:00.0: GPU is lost.  Reboot ...": the
    # reason is that line, else the first that is no GPU's listing ("GPU 0: ...") nor one of its
    # MIG devices' (indented: "  MIG 3g.40gb Device 0: ..."); the first line may be a healthy GPU's.
    line=$(grep -m 1 -E 'Unable to determine|GPU is lost|Unknown Error' <<<"$out" ||
      grep -m 1 -v -E '^(GPU |[[:space:]])' <<<"$out")
    fault gpu-state "nvidia-smi fails: ${line:-${out%%$'\n'*}}"
    return 1
  fi
  n=$(grep -c '^GPU ' <<<"$out")
  ((n >= EXPECTED_GPUS)) || fault gpu-count "$n of $EXPECTED_GPUS GPUs visible"
  # One line per GPU: "0, 00000000:53:00.0, 0, No" (uncorrected volatile ECC errors; retired
  # pages pending: Yes/No; "[N/A]" where the GPU has none: HBM GPUs remap rows instead).
  if ! out=$(timeout "$T" nvidia-smi --query-gpu=index,pci.bus_id,ecc.errors.uncorrected.volatile.total,retired_pages.pending \
    --format=csv,noheader,nounits 2>&1); then
    fault gpu-state "nvidia-smi --query-gpu fails: ${out%%$'\n'*}"
    return 1
  fi
  while IFS=, read -r i bus ecc pend; do
    i=${i// /} bus=${bus// /} ecc=${ecc# } pend=${pend# }
    for line in "$i" "$bus" "$ecc" "$pend"; do
      if bad_value "$line"; then
        fault gpu-state "GPU $i ($bus): $line"
        continue 2
      fi
    done
    # volatile: since the driver last loaded; a reset clears them (XID 94: a contained error)
    ! yes_or_positive "$ecc" || reset_fault ecc ecc "$bus" "GPU $i ($bus): $ecc uncorrected ECC errors"
    [[ "$pend" != Yes ]] || reset_fault ecc ecc "$bus" "GPU $i ($bus): retired pages pending a reset"
  done <<<"$out"
  # Row remapping (Ampere and later): "00000000:53:00.0, 0, 0" (pending, failure: 0/1 or No/Yes).
  # GPUs without it answer "[N/A]" or fail the query: neither is a fault. A pending remap takes
  # effect at the next reset (XID 63: "reset gpu to activate"); a failed one needs a new GPU.
  if out=$(timeout "$T" nvidia-smi --query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure \
    --format=csv,noheader,nounits 2>/dev/null); then
    while IFS=, read -r bus pend fail; do
      bus=${bus// /} pend=${pend// /} fail=${fail// /}
      ! yes_or_positive "$fail" || fault ecc "GPU $bus: row remapping failed"
      ! yes_or_positive "$pend" || reset_fault ecc ecc "$bus" "GPU $bus: row remap pending a reset"
    done <<<"$out"
  fi
  # `nvidia-smi nvlink -s`: "GPU 0: NVIDIA H100 ... (UUID: ...)", then "\t Link 0: 26.562 GB/s"
  # per link, or "\t Link 4: <inactive>" for a link that is down.
  if ((${NVLINK:-0})) && out=$(timeout "$T" nvidia-smi nvlink -s 2>/dev/null); then
    out=$(awk '/^GPU [0-9]+:/ { g = $2; sub(":", "", g) }
               /Link [0-9]+: <inactive>/ { n++; l = $2; sub(":", "", l); s = s (s ? ", " : "") "GPU " g " link " l }
               END { if (n) print n " NVLink links inactive: " s }' <<<"$out")
    [[ -z "$out" ]] || fault nvlink "${out:0:160}"
  fi
  return 0
}

# This boot's id (a reboot changes it).
boot_id() {
  local b=""
  read -r b 2>/dev/null <"$ROOT/proc/sys/kernel/random/boot_id" || true
  printf '%s\n' "$b"
}

# The marker STATE_DIR/reset, written when a reboot was asked for: "INSTANCE BOOT [AFTER]", then
# one line per finding it was asked for ("xid94@53:00", "ecc@53:00"). In the boot right after the
# reboot (AFTER: the first boot that reads it on the same instance writes itself there), AGAIN
# holds those findings; in any other boot, or on another instance, nothing.
load_reset_marker() {
  local f="$ROOT$STATE_DIR/reset" instance="" boot="" after="" me now
  local -a keys=()
  AGAIN=" "
  { read -r instance boot after && mapfile -t keys; } 2>/dev/null <"$f" || return 0
  me=$(instance_id)
  now=$(boot_id)
  [[ "$instance" == "${me:-unknown}" && "$boot" != "$now" ]] || return 0
  if [[ -z "$after" ]]; then
    { printf '%s %s %s\n' "$instance" "$boot" "$now"; ((${#keys[@]} == 0)) || printf '%s\n' "${keys[@]}"; } \
      2>/dev/null >"$f.tmp" && mv "$f.tmp" "$f" || return 0
  elif [[ "$after" != "$now" ]]; then
    return 0
  fi
  AGAIN=" ${keys[*]} "
}

# XIDs since boot, from the kernel log: "NVRM: Xid (PCI:0000:b9:00): 79, pid=..., name=..., ..."
# (older drivers: "NVRM: Xid (0000:03:00): 14, Channel 00000001"). A reset-class XID is `xid-reset`,
# or `xid` in the boot right after a reboot this instance was asked for the same XID on that GPU.
check_xids() {
  local log line xid dev seen=" "
  log=$(timeout "$T" journalctl -k -b -o cat --no-pager 2>/dev/null) || log=$(timeout "$T" dmesg 2>/dev/null) || return 0
  while IFS= read -r line; do
    [[ "$line" =~ NVRM:\ Xid\ \(([^\)]*)\):\ ([0-9]+), ]] || continue
    dev=${BASH_REMATCH[1]} xid=${BASH_REMATCH[2]}
    [[ "$seen" != *" $xid@$dev "* ]] || continue
    if [[ " $REPLACE_XIDS " == *" $xid "* ]]; then
      fault xid "XID $xid on $dev"
    elif [[ " $RESET_XIDS " == *" $xid "* ]]; then
      reset_fault xid "xid$xid" "$dev" "XID $xid on $dev"
    else
      continue
    fi
    seen+="$xid@$dev "
  done < <(grep -F 'NVRM: Xid' <<<"$log")
}

# EFA devices: /sys/class/infiniband/NAME whose device's driver is efa.
check_efa() {
  local dev n=0
  for dev in "$ROOT"/sys/class/infiniband/*; do
    [[ "$(readlink "$dev/device/driver" 2>/dev/null)" == */efa ]] && n=$((n + 1))
  done
  ((n >= EXPECTED_EFA)) || fault efa "$n of $EXPECTED_EFA EFA devices present"
}

# Each mount mounted, and answering `stat -f` in time (a hung Lustre or NFS server blocks it).
# Nothing touches a mount point in the foreground: a stat on a server that does not answer sleeps
# uninterruptibly in the kernel (D state), which no signal ends, so `timeout` would wait for it, and
# this check with it. Whether a mount is mounted comes from the kernel's mount table (MOUNTINFO),
# which is read and never touches the file system; only `stat -f` does, in the background. Every
# mount's probe starts at once, and they are polled together with builtins for T seconds (0.1 s
# steps for the first second, then 1 s), so two dead mounts take T seconds, not 2 T, against
# slurmd's 60 s limit. A probe still running then does not answer: it is sent SIGTERM (a probe in
# D state dies of it only once the server answers) and left behind, never waited for. Its process
# id stays in PROBE_DIR/probe-MOUNT until it ends; while that process lives (`kill -0`, and its
# /proc/PID/cmdline is still that `stat -f`: ids are reused) the mount is not probed again but
# does not answer "(stuck since TIME)" at once, so that stuck probes never pile up, one per run.
# A `stat -f` that fails on a mounted file system (EIO, ENOTCONN, ESTALE) "fails", with stat's
# error: it is neither "not mounted" nor "does not answer".
MOUNTINFO=${MOUNTINFO:-/proc/self/mountinfo}
PROBE_DIR=${PROBE_DIR:-/run/fmcluster/health}

# mounted M: whether M is a mount point: the fifth field of a line of MOUNTINFO (a space, tab,
# newline or backslash in it as \040, \011, \012, \134)
mounted() {
  local want=${1//\\/\\134} point _
  want=${want// /\\040}
  while read -r _ _ _ _ point _; do
    [[ "$point" == "$want" ]] && return 0
  done <"$MOUNTINFO"
  return 1
}

# probe_file M: where the probe of mount M keeps its process id, named as systemd escapes a path
# (/fsx -> probe-fsx, /mnt/a-b -> probe-mnt-a\x2db, / -> probe--)
probe_file() {
  local path=${1#/} name="" c i
  path=${path%/}
  for ((i = 0; i < ${#path}; i++)); do
    c=${path:i:1}
    if [[ "$c" == / ]]; then
      name+=-
    elif [[ "$c" == [A-Za-z0-9_] || ("$c" == . && i -gt 0) ]]; then
      name+=$c
    else
      printf -v c '\\x%02x' "'$c"
      name+=$c
    fi
  done
  printf '%s/probe-%s\n' "$ROOT$PROBE_DIR" "${name:--}"
}

# probe_alive FILE M: whether the probe of mount M that FILE names ("PID SINCE") still runs; its
# SINCE in STUCK_SINCE
probe_alive() {
  local pid="" since="" args=()
  read -r pid since 2>/dev/null <"$1" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  mapfile -d '' -t args 2>/dev/null <"/proc/$pid/cmdline" || return 1
  [[ " ${args[*]} " == *"stat -f $ROOT$2 "* ]] || return 1
  STUCK_SINCE=$since
}

check_mounts() {
  local m f i rc err waited alive
  local -a mounts=() verdicts=() pids=() files=()
  for m in $REQUIRED_MOUNTS; do
    [[ "$m" == / ]] || m=${m%/}
    i=${#mounts[@]}
    mounts[i]=$m
    if ! mounted "$m"; then
      verdicts[i]="$m is not mounted"
      continue
    fi
    f=$(probe_file "$m")
    if probe_alive "$f" "$m"; then
      verdicts[i]="$m does not answer (stuck since $STUCK_SINCE)"
      continue
    fi
    mkdir -p "${f%/*}"
    # its own standard streams: a probe left behind must hold no pipe of the caller's open
    stat -f "$ROOT$m" </dev/null >/dev/null 2>"$f.err" &
    pids[i]=$!
    files[i]=$f
    printf '%s %(%Y-%m-%dT%H:%M:%S%z)T\n' "$!" -1 >"$f"
  done
  waited=0  # tenths of a second
  while ((waited < T * 10)); do
    alive=0
    for i in "${!pids[@]}"; do
      ! kill -0 "${pids[i]}" 2>/dev/null || { alive=1; break; }
    done
    ((alive)) || break
    if ((waited < 10)); then
      sleep 0.1
      waited=$((waited + 1))
    else
      sleep 1
      waited=$((waited + 10))
    fi
  done
  for i in "${!pids[@]}"; do
    m=${mounts[i]} f=${files[i]}
    if kill -0 "${pids[i]}" 2>/dev/null; then
      kill "${pids[i]}" 2>/dev/null
      verdicts[i]="$m does not answer (${T}s)"
      continue
    fi
    wait "${pids[i]}"
    rc=$?
    err=""
    read -r err 2>/dev/null <"$f.err" || true
    rm -f "$f" "$f.err"
    # "stat: cannot read file system information for '/fsx': Transport endpoint is not connected"
    err=${err##*: }
    ((rc == 0)) || verdicts[i]="$m fails (stat -f: ${err:-exit $rc})"
  done
  for i in "${!mounts[@]}"; do
    [[ -z "${verdicts[i]:-}" ]] || fault filesystem "${verdicts[i]}"
  done
}

# The DCGM diagnostic's table: "| GPU Memory                | Fail - All      |": a row whose
# result is Fail. dcgmi missing, or its host engine not answering, is no verdict on the GPUs.
check_dcgm() {
  local out failed
  command -v dcgmi >/dev/null || return 0
  out=$(timeout "${DCGM_TIMEOUT:-120}" dcgmi diag -r "${DCGM_LEVEL:-1}" 2>&1)
  failed=$(awk -F'|' '$3 ~ /^ *Fail/ { gsub(/^ +| +$/, "", $2); s = s (s ? ", " : "") $2 } END { print s }' <<<"$out")
  [[ -z "$failed" ]] || fault dcgm "dcgmi diag -r ${DCGM_LEVEL:-1} fails: ${failed:0:120}"
}

run_checks() {
  local idle=$1 gpus=0
  FAULTS=() RESET_KEYS=()
  if ((EXPECTED_GPUS > 0)); then
    load_reset_marker
    check_gpus && gpus=1
    check_xids
    ((!idle || !gpus)) || check_dcgm
  fi
  ((${EXPECTED_EFA:-0} == 0)) || check_efa
  check_mounts
  write_metrics
}

write_metrics() {
  local dir="$ROOT$TEXTFILE_DIR" f healthy=1
  ((${#FAULTS[@]} == 0)) || healthy=0
  mkdir -p "$dir"
  {
    printf '# HELP fmcluster_node_healthy 1 when the last health check passed (fmcluster node-health)\n'
    printf '# TYPE fmcluster_node_healthy gauge\nfmcluster_node_healthy %s\n' "$healthy"
    printf '# HELP fmcluster_node_fault 1 for each fault the last health check found\n'
    printf '# TYPE fmcluster_node_fault gauge\n'
    for f in "${FAULTS[@]}"; do printf '%s\n' "${f%% *}"; done | sort -u | while read -r f; do
      printf 'fmcluster_node_fault{fault="%s"} 1\n' "$f"
    done
    printf '# HELP fmcluster_node_health_checked_timestamp_seconds when the last health check ran\n'
    printf '# TYPE fmcluster_node_health_checked_timestamp_seconds gauge\n'
    printf 'fmcluster_node_health_checked_timestamp_seconds %s\n' "$(date +%s)"
  } >"$dir/fmcluster-health.prom.tmp"
  mv "$dir/fmcluster-health.prom.tmp" "$dir/fmcluster-health.prom"
}

scontrol() { timeout "$T" "$SLURM_BIN/scontrol" "$@"; }

# slurm_node: the node's Slurm name (shared with network-features), installed beside this program in
# FMCLUSTER_LIB (node-health.env), wherever this copy of the program runs from
# shellcheck source=/dev/null
source "$ROOT$FMCLUSTER_LIB/slurm-node.sh"

# This instance's id: EC2 Nitro instances carry it as their DMI board asset tag (as node-ready and
# deep-check read it); nothing when there is none.
instance_id() {
  local id=""
  read -r id <"$ROOT/sys/devices/virtual/dmi/id/board_asset_tag" 2>/dev/null || true
  [[ "$id" =~ ^i-[0-9a-f]+$ ]] && printf '%s\n' "$id"
}

field() { awk -v k="$1=" '{ for (i = 1; i <= NF; i++) if (index($i, k) == 1) { print substr($i, length(k) + 1); exit } }'; }

# The cluster's configuration (`scontrol show config`, fetched once: "SuspendProgram = /usr/...");
# empty when scontrol does not answer. `setting NAME`: a value of it ("(null)" where unset).
CONFIG=""
slurm_config() { CONFIG=$(scontrol show config 2>/dev/null) || CONFIG=""; }
setting() { awk -v k="$1" '$1 == k && $2 == "=" { $1 = ""; $2 = ""; sub(/^ +/, ""); print; exit }' <<<"$CONFIG"; }

# power_saved NODE LINE: whether Slurm's power saving manages NODE (LINE: its `scontrol -o show node`),
# that is whether it is a dynamic node, one Slurm powers down itself when idle (Slurm, "Power Saving
# Guide"): a SuspendProgram is set, the node is not in SuspendExcNodes (a set with a count, "a[1-9]:2",
# counts as excluded) and none of its partitions is in SuspendExcParts or has SuspendTime INFINITE
# (its own, else the cluster's). A static node (AWS PCS's minimum count, every SageMaker HyperPod
# node) is not: Slurm never powers it down.
power_saved() {
  local node=$1 line=$2 program exc parts time global partition
  [[ -n "$CONFIG" ]] || return 1
  program=$(setting SuspendProgram)
  [[ -n "$program" && "$program" != "(null)" ]] || return 1
  exc=$(setting SuspendExcNodes)
  if [[ -n "$exc" && "$exc" != "(null)" && "$exc" != NONE ]]; then
    # every node of every set, counts dropped: "a[1-9]:2,b[1,3]" -> a1..a9 b1 b3
    scontrol show hostnames "$(sed -E 's/:[0-9]+//g' <<<"$exc")" 2>/dev/null | grep -qxF "$node" && return 1
  fi
  parts=$(setting SuspendExcParts)
  global=$(setting SuspendTime)
  for partition in $(field Partitions <<<"$line" | tr , ' '); do
    [[ ",$parts," != *",$partition,"* ]] || return 1
    time=$(scontrol -o show partition "$partition" 2>/dev/null | field SuspendTime)
    [[ -n "$time" && "$time" != GLOBAL ]] || time=$global
    [[ "$time" != NONE* && "$time" != INFINITE* && "$time" != -1* ]] || return 1
  done
  return 0
}

slurm_mode() {
  local node line state reason slug first rc=0 f g id owner="" tag=""
  node=$(slurm_node)
  [[ -n "$node" ]] || { printf 'node-health: this host is no Slurm node\n' >&2; return 2; }
  line=$(scontrol -o show node "$node") || { printf 'node-health: scontrol cannot show %s\n' "$node" >&2; return 2; }
  state=$(field State <<<"$line")
  # "Reason=fmcluster-health: xid: XID 79 on PCI:0000:b9:00 [root@2026-01-01T00:00:00]": to the end.
  reason=""
  [[ "$line" != *" Reason="* ]] || reason=${line#* Reason=}
  # (the trailing "[USER@TIME]" that scontrol adds only: our own "[i-...]" stays)
  local by_whom='^(.*) \[[^] ]*@[^] ]*\]$' on_instance=' \[(i-[0-9a-f]+)\]$'
  [[ ! "$reason" =~ $by_whom ]] || reason=${BASH_REMATCH[1]}
  id=$(instance_id)
  [[ -z "$id" ]] || tag=" [$id]"
  # the instance our drain was set on: "fmcluster-health: SLUG: TEXT [i-...]" (none: an older reason)
  [[ ! "$reason" =~ $on_instance ]] || owner=${BASH_REMATCH[1]}
  run_checks "$([[ "${state%%+*}" == IDLE ]] && echo 1 || echo 0)"
  ((${#FAULTS[@]} == 0)) || { printf '%s\n' "${FAULTS[@]}"; rc=1; }
  # Slurm is powering the node down or rebooting it: it leaves, or comes back, without our help
  if [[ "$state" =~ (^|\+)(POWER_DOWN|POWERING_DOWN|POWERED_DOWN|REBOOT_[A-Z]+)(\+|$) ]]; then
    printf 'node-health: %s is %s: left to Slurm\n' "$node" "$state" >&2
    return "$rc"
  fi
  local ours=0 drained=0
  [[ "$reason" == "$REASON_PREFIX:"* ]] && ours=1
  [[ "$state" == *DRAIN* ]] && drained=1
  if ((drained && !ours)); then
    printf 'node-health: %s drained by another (%s): left alone\n' "$node" "$reason" >&2
    return "$rc"
  fi
  if ((rc == 0)); then
    slug=${reason#"$REASON_PREFIX: "}
    slug=${slug%%:*}
    if ((drained)) && [[ -n "$owner" && -n "$id" && "$owner" != "$id" ]]; then
      # drained on the instance this one replaced: its fault left with it
      scontrol update nodename="$node" state=resume &&
        printf 'node-health: %s resumed (drained on %s, now %s)\n' "$node" "$owner" "$id" >&2
    elif ((drained)) && [[ " $NODE_FAULTS " == *" $slug "* ]]; then
      scontrol update nodename="$node" state=resume && printf 'node-health: %s resumed\n' "$node" >&2
    fi
    return 0
  fi
  first=${FAULTS[0]}
  f="$REASON_PREFIX: ${first%% *}: ${first#* }"
  ((${#FAULTS[@]} == 1)) || f+=" (+$((${#FAULTS[@]} - 1)) more)"
  # at most 200 characters, the instance id kept at the end
  f="${f:0:$((200 - ${#tag}))}$tag"
  if [[ "$reason" != "$f" ]]; then
    scontrol update nodename="$node" state=drain reason="$f" && printf 'node-health: %s drained: %s\n' "$node" "$f" >&2
    drained=1
  fi
  ((${REPLACE:-0} && drained)) || return "$rc"
  mkdir -p "$ROOT$STATE_DIR"
  local hardware=() resets=() dynamic=0 base=${state%%+*}
  for g in "${FAULTS[@]}"; do
    if [[ " $RESET_FAULTS " == *" ${g%% *} "* ]]; then
      resets+=("$g")
    elif [[ " $NODE_FAULTS " != *" ${g%% *} "* ]]; then
      hardware+=("$g")
    fi
  done
  ((${#hardware[@]} + ${#resets[@]} > 0)) || return "$rc"
  slurm_config
  ! power_saved "$node" "$line" || dynamic=1
  # Only reset-class faults: Slurm reboots the node once its jobs end (ASAP) and resumes it when it
  # is back; asked once per instance and boot.
  if ((${#hardware[@]} == 0)); then
    local boot asked="" asked_boot=""
    boot=$(boot_id)
    read -r asked asked_boot _ 2>/dev/null <"$ROOT$STATE_DIR/reset" || true
    [[ "$asked $asked_boot" != "${id:-unknown} $boot" ]] || return "$rc"
    if [[ "$(setting RebootProgram)" == "(null)" ]]; then
      # Slurm 24.11 to 25.11 would accept the reboot and do nothing (slurmd: "RebootProgram isn't
      # defined"), the node going DOWN after ResumeTimeout; 26.05 refuses it
      if ((!dynamic)); then
        printf 'node-health: Slurm cannot reboot %s (no RebootProgram in scontrol show config): it stays drained for a person (%s)\n' \
          "$node" "${resets[0]}" >&2
        return "$rc"
      fi
      # a dynamic node: a new instance resets its GPUs too
      hardware=("${resets[@]}")
    elif scontrol reboot ASAP nextstate=RESUME reason="$f" "$node" >&2; then
      { printf '%s %s\n' "${id:-unknown}" "$boot"; printf '%s\n' "${RESET_KEYS[@]}"; } >"$ROOT$STATE_DIR/reset"
      printf 'node-health: %s to be rebooted by Slurm once its jobs end (%s)\n' "$node" "${resets[0]}" >&2
      return "$rc"
    else
      printf 'node-health: Slurm refuses to reboot %s (Slurm 26.05 without a RebootProgram): it stays drained for a person\n' \
        "$node" >&2
      return "$rc"
    fi
  fi
  # A hardware fault on a drained node without jobs (not MIXED/ALLOCATED+DRAIN): replaced once per
  # fault and instance (the marker holds the instance id: the root volume is the instance's own, but
  # an image made from a node would carry it to others). Slurm powers a node down only from
  # IDLE+DRAIN: from DOWN+DRAIN it clears DRAIN but leaves it DOWN (POWERED_DOWN+DOWN, never used
  # again); the replacer takes a DOWN+DRAIN node too.
  if ((dynamic)) && [[ "$base" == DOWN ]]; then
    printf 'node-health: %s is %s: powered down once Slurm has it IDLE+DRAIN\n' "$node" "$state" >&2
    return "$rc"
  fi
  [[ "$base" == IDLE || "$base" == DOWN ]] || return "$rc"
  for g in "${hardware[@]}"; do
    [[ "$(cat "$ROOT$STATE_DIR/replace-${g%% *}" 2>/dev/null)" != "${id:-unknown}" ]] || continue
    if ((dynamic)); then
      # a dynamic node: Slurm powers it down (the plane's SuspendProgram ends the instance) and
      # clears the drain as it does; the node's next job gets a new instance
      if scontrol update nodename="$node" state=POWER_DOWN_ASAP >&2; then
        printf '%s\n' "${id:-unknown}" >"$ROOT$STATE_DIR/replace-${g%% *}"
        printf 'node-health: %s powered down by Slurm for a new instance (%s)\n' "$node" "$g" >&2
        break
      fi
    elif timeout "$T" "$ROOT$FMCLUSTER_LIB/request-replacement" "${g%% *}" "${g#* }"; then
      printf '%s\n' "${id:-unknown}" >"$ROOT$STATE_DIR/replace-${g%% *}"
    fi
  done
  return "$rc"
}

main() {
  case "${1:-}" in
    --slurm) slurm_mode ;;
    --idle) run_checks 1; ((${#FAULTS[@]} == 0)) || { printf '%s\n' "${FAULTS[@]}"; return 1; } ;;
    *) run_checks 0; ((${#FAULTS[@]} == 0)) || { printf '%s\n' "${FAULTS[@]}"; return 1; } ;;
  esac
}

main "$@"
