#!/bin/bash
# Recording fakes of the operating-system commands the node scripts call, for tests/support/sandbox.py.
#
# tests/support/sandbox.py links every faked command name in the sandbox's bin/ to this file and puts
# bin/ first on PATH; the file dispatches on the name it was called by. Every call is recorded
# (state/calls: the virtual clock, the command and its arguments, separated by US characters)
# and behaves as a small model of a node, kept in state/:
#   clock        virtual seconds since boot; `sleep` advances it and never really sleeps
#   events       "SECONDS<TAB>FUNCTION": things that happen on their own at a time (disks that
#                appear late, the AMI's unit that finishes); run once the clock passes them
#   mounts       "TARGET<TAB>SOURCE<TAB>FSTYPE<TAB>BACKING<TAB>EXTRA", BACKING one of
#                instance-store, root (the root EBS volume), lustre, nfs; EXTRA lnet=efa|tcp for lustre
#   nfs/, hidden/  an NFS server's files, and what an NFS mount hides (mount_nfs)
#   blockdevs    "PARENT<TAB>DEVICE<TAB>TYPE": what is built on each instance-store disk
#   filesystems  "DEVICE<TAB>TYPE<TAB>UUID"
#   lnet         "NET<TAB>INTERFACE" once `lnetctl lnet configure` ran
#   units/NAME   the state of a unit (active, failed)
# scenario.sh (written by the test from a tests.support.sandbox.Scenario) sets how the world behaves.
set -uo pipefail

CMD=${0##*/}
: "${FAKE_SANDBOX:?the sandbox directory (tests/support/sandbox.py sets it)}"
STATE=$FAKE_SANDBOX/state
ROOTDIR=$FAKE_SANDBOX/root
# shellcheck source=/dev/null
source "$STATE/scenario.sh"
TAB=$'\t'
US=$'\x1f'

# The virtual clock, read into NOW. The hot paths (sleep, mountpoint, timeout: the scripts poll with
# them hundreds of times a test) fork nothing they can avoid: builtins only, no $(...).
read_clock() {
  read -r NOW <"$STATE/clock"
}

record() {
  local line clock
  read -r clock <"$STATE/clock"
  line="$clock${US}$CMD"
  local arg
  for arg in "$@"; do
    arg=${arg//"$ROOTDIR"/}
    line+="${US}${arg//$'\n'/\\n}"
  done
  # One write(2) of the whole line, appended: a fake left running in the background (a stat stuck
  # on a hung mount) may write while another fake writes or the test reads, and the test reads
  # only lines whose newline is written (Sandbox.calls). bash's printf writes up to 4 KiB at once
  # (its output buffer); a longer line goes through dd, which reads it whole and writes it once.
  local LC_ALL=C # ${#line} in bytes, not characters
  if ((${#line} < 4000)); then
    printf '%s\n' "$line" >>"$STATE/calls"
  else
    printf '%s\n' "$line" >"$STATE/calls.$$"
    dd if="$STATE/calls.$$" of="$STATE/calls" oflag=append conv=notrunc bs=64M status=none
    rm -f "$STATE/calls.$$"
  fi
}

# Events due by the clock, each once (state/events.done: those that ran, a line each).
tick() {
  local t=$1 when what ran=""
  : >>"$STATE/events.done"
  IFS= read -r -d '' ran <"$STATE/events.done"
  while IFS=$TAB read -r when what; do
    [[ -n "$when" ]] || continue
    if ((when <= t)) && [[ $'\n'$ran != *$'\n'"$when$TAB$what"$'\n'* ]]; then
      printf '%s\t%s\n' "$when" "$what" >>"$STATE/events.done"
      "$what"
    fi
  done <"$STATE/events"
}

advance() {
  read_clock
  if (($1)); then
    NOW=$((NOW + $1))
    # Replaced whole (a rename), never truncated and rewritten: a fake running beside this one
    # reads the old time or the new, never an empty file.
    printf '%s\n' "$NOW" >"$STATE/clock.$$"
    mv -f "$STATE/clock.$$" "$STATE/clock"
  fi
  tick "$NOW"
}

die() {
  printf '%s: %s\n' "$CMD" "$*" >&2
  exit "${FAKE_RC:-1}"
}

# bash parses a script as it runs it: `serve` runs this command's fake once bash has read it, and
# ends the script before bash reads (parses) the rest of this file. Parsing all of it cost a fake
# call most of its time (2 of 3.5 ms for a `mountpoint`), so the fakes come in sections, from the
# commands the scripts call most to those they call least, each ending in `serve`; a fake calls
# only functions of its own section and of those above it.
serve() {
  if declare -F "fake_$CMD" >/dev/null; then
    "fake_$CMD" "$@"
    exit
  fi
}

# --- the node's devices ----------------------------------------------------------------------

disk() { printf '/dev/nvme%sn1' "$1"; }

# The instance-store disks appear: each with the by-id links udev makes (two names and a
# partition link), pointing at a device file in the sandbox.
ev_disks() {
  local i device links=() by_id=$ROOTDIR/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_AWS
  [[ -d "$ROOTDIR/dev/disk/by-id" ]] || mkdir -p "$ROOTDIR/dev/disk/by-id"
  for ((i = 1; i <= NVME_DISKS; i++)); do
    printf -v device '%s/dev/nvme%sn1' "$ROOTDIR" "$i"
    : >>"$device"
    links+=("$device" "$by_id$i" "$device" "$by_id${i}_1" "$device" "$by_id$i-part1")
  done
  # `ln -sf TARGET LINK` for each pair, in one process: an ln each was half a sandbox's making
  perl -e 'while (my ($target, $link) = splice @ARGV, 0, 2) {
    unlink $link;
    symlink $target, $link or die "ln: $link: $!\n";
  }' "${links[@]}"
}

# The Deep Learning AMI's dlami-nvme.service: an LVM volume over the disks at /opt/dlami/nvme.
DLAMI_LV=/dev/mapper/vg.01-lv_ephemeral
ev_dlami() {
  local i
  if ! grep -q "${TAB}$DLAMI_LV$TAB" "$STATE/blockdevs" 2>/dev/null; then
    for ((i = 1; i <= NVME_DISKS; i++)); do
      printf '%s\t%s\tlvm\n' "$(disk "$i")" "$DLAMI_LV" >>"$STATE/blockdevs"
    done
    printf '%s\text4\tuuid-dlami\n' "$DLAMI_LV" >>"$STATE/filesystems"
  fi
  mkdir -p "$ROOTDIR/opt/dlami/nvme"
  add_mount /opt/dlami/nvme "$DLAMI_LV" ext4 instance-store ""
  echo active >"$STATE/units/dlami-nvme.service"
}

mounted() {
  local target rest
  while IFS=$TAB read -r target rest; do
    [[ "$target" == "$1" ]] && return 0
  done <"$STATE/mounts"
  return 1
}

add_mount() {
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >>"$STATE/mounts"
}

# The backing store of a path: that of the longest mount point above it, else the root volume.
backing_of() {
  awk -F'\t' -v p="$1" '
    { t = $1; if (p == t || index(p, t == "/" ? "/" : t "/") == 1) if (length(t) > best) { best = length(t); b = $4 } }
    END { print (b == "" ? "root" : b) }' "$STATE/mounts"
}

# Whether a device is an instance-store disk or built on one.
on_instance_store() {
  [[ "$1" == /dev/nvme* ]] || awk -F'\t' -v d="$1" '$2 == d { found = 1 } END { exit !found }' "$STATE/blockdevs"
}

fs_field() {  # DEVICE COLUMN (2 type, 3 uuid)
  awk -F'\t' -v d="$1" -v c="$2" '$1 == d { v = $c } END { if (v == "") exit 2; print v }' "$STATE/filesystems"
}

device_of_uuid() {
  awk -F'\t' -v u="$1" '$3 == u { print $1; exit }' "$STATE/filesystems"
}

# --- the commands the scripts poll with ------------------------------------------------------

fake_sleep() {
  record "$@"
  local seconds=${1%s}
  seconds=${seconds%%.*}  # whole seconds: `sleep 0.1` leaves the clock where it is
  advance "${seconds:-0}"
}

# mountpoint [-q] PATH: whether state/mounts has PATH; one whose BACKING is "real" is a real file
# system mounted at ROOT/PATH (a test's FUSE file system, tests/support/frozen_fs.py): the real
# mountpoint runs on it, and blocks in the kernel while that file system does not answer.
fake_mountpoint() {
  record "$@"
  local path=${*: -1} target backing
  while IFS=$TAB read -r target _ _ backing _; do
    if [[ "$target" == "$path" && "$backing" == real ]]; then
      exec /usr/bin/mountpoint "${@:1:$#-1}" "$ROOTDIR$path"
    fi
  done <"$STATE/mounts"
  mounted "$path"
}

# stat: the real one, except on a mount point of HUNG_MOUNTS, whose server does not answer: it
# blocks in uninterruptible sleep (D state), which no signal ends (the fake: SIGTERM ignored, and a
# real sleep of HUNG_SECONDS, past any test; `timeout` cannot end it either).
fake_stat() {
  record "$@"
  local path=${*: -1} m
  for m in $HUNG_MOUNTS; do
    if [[ "${path#"$ROOTDIR"}" == "$m" ]]; then
      trap '' TERM INT HUP
      exec /bin/sleep "${HUNG_SECONDS:-20}"
    fi
  done
  exec /usr/bin/stat "$@"
}

fake_hostname() {
  record "$@"
  printf 'ip-10-1-0-42\n'
}

fake_pkill() { record "$@"; return 1; }  # no such process left

fake_logger() { record "$@"; }

# timeout SECONDS COMMAND...: runs the command (the fakes never take real time).
fake_timeout() {
  record "$@"
  shift
  FAKE_UNDER_TIMEOUT=1 exec "$@"
}

# install: the real one, without owners (no such users in the sandbox), and never outside it.
fake_install() {
  record "$@"
  local -a args=()
  while (($#)); do
    case "$1" in
      -o | -g) shift 2 ;;
      *) args+=("$1"); shift ;;
    esac
  done
  local arg
  for arg in "${args[@]}"; do
    if [[ "$arg" == /* && "$arg" != "$FAKE_SANDBOX"/* ]]; then
      die "sandbox: install outside the sandbox root: $arg"
    fi
  done
  /usr/bin/install "${args[@]}"
}

fake_chown() { record "$@"; }

# Sandbox._tick: the events due when the node starts (no call of the node's).
fake__tick() {
  read_clock
  tick "$NOW"
}

serve "$@"

# --- GPUs ------------------------------------------------------------------------------------

# nvidia-smi, in the formats of NVIDIA's tool (the GPU faults of the scenario all on GPU 0):
#   -L                      "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)" per GPU
#   --query-gpu=index,pci.bus_id,ecc.errors.uncorrected.volatile.total,retired_pages.pending
#     --format=csv,noheader,nounits: "0, 00000000:53:00.0, 0, [N/A]" per GPU (HBM GPUs remap
#     rows instead of retiring pages: "[N/A]"; PAGES_PENDING: "Yes" for GPU 0, retired pages that
#     a reset will take out of use); GPU_ERROR in place of a value ("[GPU requires reset]")
#   --query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure: "00000000:53:00.0, 0, 0"
#     (as the suite's other nvidia-smi stand-ins print remapped_rows.failure; node-health also
#     takes Yes/No, as `nvidia-smi -q` words them)
#   nvlink -s               "GPU 0: NVIDIA ... (UUID: ...)", then "\t Link N: 26.562 GB/s" for
#                           each of 18 links, "\t Link N: <inactive>" for those down
# No GPU: the driver's message, exit 9. NVIDIA_SMI_HANGS: it never returns (the fake: the real
# timeout's exit status 124 under `timeout`, else an error: nothing may call it unbounded).
# GPU_LOST (an index): that GPU fell off the bus (XID 79): every listing prints, in its place,
# "Unable to determine the device handle for GPU 0000:73:00.0: GPU is lost.  Reboot the system to
# recover this GPU" and the others as usual, then exits 15 (nvidia-smi(1): "The GPU has fallen off
# the bus or has otherwise become inaccessible").
gpu_bus() { printf '00000000:%02X:00.0' $((0x53 + 0x10 * $1)); }
fake_nvidia-smi() {
  record "$@"
  if ((NVIDIA_SMI_HANGS)); then
    [[ -n "${FAKE_UNDER_TIMEOUT:-}" ]] && exit 124
    die "hangs: nvidia-smi called without timeout"
  fi
  ((GPUS > 0)) || FAKE_RC=9 die "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
  local i l ecc pend fail
  if [[ -n "$GPU_LOST" ]]; then
    for ((i = 0; i < GPUS; i++)); do
      if ((i == GPU_LOST)); then
        printf 'Unable to determine the device handle for GPU %s: GPU is lost.  Reboot the system to recover this GPU\n' \
          "$(gpu_bus "$i" | sed 's/^0000//')"
      elif [[ "${1:-}" == -L ]]; then
        printf 'GPU %s: NVIDIA %s (UUID: GPU-%08d-0000-0000-0000-000000000000)\n' "$i" "$GPU_MODEL" "$i"
      else
        printf '%s, %s, 0, [N/A]\n' "$i" "$(gpu_bus "$i")"
      fi
    done
    exit 15
  fi
  case "${1:-}" in
    --query-gpu=*)
      for ((i = 0; i < GPUS; i++)); do
        ecc=0 pend='[N/A]'
        ((i == 0)) && ecc=$ECC_ERRORS
        ((i == 0)) && [[ -n "$GPU_ERROR" ]] && ecc=$GPU_ERROR
        ((i == 0 && PAGES_PENDING)) && pend=Yes
        printf '%s, %s, %s, %s\n' "$i" "$(gpu_bus "$i")" "$ecc" "$pend"
      done ;;
    --query-remapped-rows=*)
      for ((i = 0; i < GPUS; i++)); do
        pend=0 fail=0
        ((i == 0 && REMAP_PENDING)) && pend=1
        ((i == 0 && REMAP_FAILURE)) && fail=1
        printf '%s, %s, %s\n' "$(gpu_bus "$i")" "$pend" "$fail"
      done ;;
    nvlink)
      ((NVLINK)) || return 0
      for ((i = 0; i < GPUS; i++)); do
        printf 'GPU %s: NVIDIA %s (UUID: GPU-%08d-0000-0000-0000-000000000000)\n' "$i" "$GPU_MODEL" "$i"
        for ((l = 0; l < 18; l++)); do
          if ((i == 0 && l < NVLINK_INACTIVE)); then
            printf '\t Link %s: <inactive>\n' "$l"
          else
            printf '\t Link %s: 26.562 GB/s\n' "$l"
          fi
        done
      done ;;
    *)
      for ((i = 0; i < GPUS; i++)); do
        printf 'GPU %s: NVIDIA %s (UUID: GPU-%08d-0000-0000-0000-000000000000)\n' "$i" "$GPU_MODEL" "$i"
      done ;;
  esac
}

# journalctl -k -b -o cat: this boot's kernel log, messages only; an XID of XIDS as the NVIDIA
# driver logs it (NVIDIA's Xid guide; AWS's HyperPod resiliency workshop injects the same line):
# "NVRM: Xid (PCI:0000:53:00): 79, pid=<unknown>, name=<unknown>, GPU has fallen off the bus."
fake_journalctl() {
  record "$@"
  local xid
  printf 'Linux version 6.8.0-1021-aws (buildd@lcy02-amd64-035)\n'
  printf 'nvidia-nvlink: Nvlink Core is being initialized, major device number 235\n'
  for xid in $XIDS; do
    printf 'NVRM: Xid (PCI:0000:53:00): %s, pid=<unknown>, name=<unknown>, GPU has fallen off the bus.\n' "$xid"
  done
}

# dcgmi: the suite's stand-in (tests/support/gpu_standins/dcgmi), passing or failing (DCGM).
fake_dcgmi() {
  record "$@"
  STANDIN_DCGM=$DCGM exec "$GPU_STANDINS/dcgmi" "$@"
}

serve "$@"

# --- storage ---------------------------------------------------------------------------------

mount_device() {  # DEVICE TARGET
  local device=$1 target=$2 type
  if [[ "$device" == UUID=* ]]; then
    device=$(device_of_uuid "${device#UUID=}")
    [[ -n "$device" ]] || FAKE_RC=32 die "can't find $1"
  fi
  type=$(fs_field "$device" 2) || FAKE_RC=32 die "$target: wrong fs type, bad option, bad superblock on $device"
  if on_instance_store "$device"; then
    add_mount "$target" "$device" "$type" instance-store ""
  else
    add_mount "$target" "$device" "$type" root ""
  fi
}

mount_lustre() {  # SOURCE TARGET
  local failed
  failed=$(cat "$STATE/lustre-failures" 2>/dev/null || echo 0)
  if ((LUSTRE_MOUNT_FAILS < 0 || failed < LUSTRE_MOUNT_FAILS)); then
    echo $((failed + 1)) >"$STATE/lustre-failures"
    FAKE_RC=5 die "mount.lustre: mount $1 at $2 failed: Input/output error"
  fi
  local lnet=tcp
  if grep -q "^efa$TAB" "$STATE/lnet" 2>/dev/null; then
    lnet=efa
  fi
  add_mount "$2" "$1" lustre lustre "lnet=$lnet"
}

# An NFS export (the shared home) as a node sees it: the server's files are a directory of the
# state per source (state/nfs/SOURCE, '/' as '%'), put in place of the mount point while it is
# mounted; the mount point's own files are set aside meanwhile (state/hidden/TARGET) and come back
# when it is unmounted, as a mount over a directory hides what it holds. Every node of a test
# that shares the state shares the server.
nfs_key() { printf '%s' "${1//\//%}"; }

mount_nfs() {  # SOURCE TARGET
  if ((!NFS_CLIENT)); then
    FAKE_RC=32 die "$2: bad option; for several filesystems (e.g. nfs, cifs) you might need a /sbin/mount.<type> helper program."
  fi
  local failed
  failed=$(cat "$STATE/nfs-failures" 2>/dev/null || echo 0)
  if ((NFS_MOUNT_FAILS < 0 || failed < NFS_MOUNT_FAILS)); then
    echo $((failed + 1)) >"$STATE/nfs-failures"
    FAKE_RC=32 die "mount.nfs: Connection timed out"
  fi
  local export hidden
  export="$STATE/nfs/$(nfs_key "$1")" hidden="$STATE/hidden/$(nfs_key "$2")"
  mkdir -p "$export" "$STATE/hidden"
  mv "$ROOTDIR$2" "$hidden" && mv "$export" "$ROOTDIR$2" || die "cannot model the NFS mount of $2"
  add_mount "$2" "$1" nfs4 nfs ""
}

# A bind mount of / shows the root file system without the mounts on it: what an NFS mount hides
# is there (as links to state/hidden), under the bind's target.
bind_root() {  # TARGET
  local hidden path
  for hidden in "$STATE"/hidden/*; do
    [[ -e "$hidden" ]] || continue
    path=${hidden##*/}
    path=${path//%//}
    mkdir -p "$(dirname "$ROOTDIR$1$path")"
    ln -s "$hidden" "$ROOTDIR$1$path"
  done
}

unmount_nfs() {  # TARGET SOURCE
  mv "$ROOTDIR$1" "$STATE/nfs/$(nfs_key "$2")" && mv "$STATE/hidden/$(nfs_key "$1")" "$ROOTDIR$1"
}

fake_mount() {
  record "$@"
  local type="" options="" bind=0
  local -a args=()
  while (($#)); do
    case "$1" in
      -t) type=$2; shift 2 ;;
      -o) options=$2; shift 2 ;;
      --bind) bind=1; shift ;;
      *) args+=("$1"); shift ;;
    esac
  done
  local source target
  if ((${#args[@]} == 1)); then  # mount TARGET: from /etc/fstab
    target=${args[0]}
    local line
    line=$(awk -v t="$target" '$2 == t { print $1 "\t" $3 "\t" $4 }' "$ROOTDIR/etc/fstab" 2>/dev/null | tail -n1)
    [[ -n "$line" ]] || FAKE_RC=1 die "$target: can't find in /etc/fstab."
    IFS=$TAB read -r source type options <<<"$line"
    [[ ",$options," == *,bind,* ]] && bind=1
  else
    source=${args[0]} target=${args[1]}
  fi
  if mounted "$target"; then
    FAKE_RC=32 die "$target: $source already mounted on $target."
  fi
  [[ -d "$ROOTDIR$target" ]] || FAKE_RC=32 die "$target: mount point does not exist."
  if ((bind)); then
    [[ -d "$ROOTDIR$source" ]] || FAKE_RC=32 die "$source: special device does not exist."
    add_mount "$target" "$source" none "$(backing_of "$source")" bind
    [[ "$source" != / ]] || bind_root "$target"
  elif [[ "$type" == lustre ]]; then
    mount_lustre "$source" "$target"
  elif [[ "$type" == nfs || "$type" == nfs4 ]]; then
    mount_nfs "$source" "$target"
  else
    mount_device "$source" "$target"
  fi
}

fake_umount() {
  record "$@"
  mounted "$1" || FAKE_RC=32 die "$1: not mounted."
  local source
  source=$(awk -F'\t' -v t="$1" '$1 == t && $4 == "nfs" { print $2 }' "$STATE/mounts")
  [[ -z "$source" ]] || unmount_nfs "$1" "$source"
  if awk -F'\t' -v t="$1" '$1 == t && $2 == "/" && $5 == "bind" { found = 1 } END { exit !found }' "$STATE/mounts"; then
    find "$ROOTDIR$1" -mindepth 1 -depth \( -type l -o -type d -empty \) -delete  # bind_root's links
  fi
  awk -F'\t' -v t="$1" '$1 != t' "$STATE/mounts" >"$STATE/mounts.new" && mv "$STATE/mounts.new" "$STATE/mounts"
}

# lsblk -nrpo COLUMNS DISK: the disk and what is built on it (NAME,TYPE or MOUNTPOINT).
fake_lsblk() {
  record "$@"
  local columns=${*: -2:1} disk=${*: -1} child type where
  local -a lines=("$disk${TAB}disk")
  while IFS=$TAB read -r parent child type; do
    [[ "$parent" == "$disk" ]] && lines+=("$child$TAB$type")
  done <"$STATE/blockdevs"
  local line
  for line in "${lines[@]}"; do
    IFS=$TAB read -r child type <<<"$line"
    if [[ "$columns" == MOUNTPOINT ]]; then
      where=$(awk -F'\t' -v s="$child" '$2 == s { print $1; exit }' "$STATE/mounts")
      printf '%s\n' "$where"
    else
      printf '%s %s\n' "$child" "$type"
    fi
  done
}

fake_blkid() {
  record "$@"
  local column=2
  [[ "$2" == UUID ]] && column=3
  fs_field "${*: -1}" "$column"
}

fake_mdadm() {
  record "$@"
  [[ "$1" == --create ]] || return 0
  local device=$2 d
  shift 2
  for d in "$@"; do
    [[ "$d" == /dev/* ]] || continue
    if awk -F'\t' -v p="$d" '$1 == p { found = 1 } END { exit !found }' "$STATE/blockdevs"; then
      die "cannot open $d: Device or resource busy"
    fi
  done
  for d in "$@"; do
    [[ "$d" == /dev/* ]] && printf '%s\t%s\traid0\n' "$d" "$device" >>"$STATE/blockdevs"
  done
  mkdir -p "$ROOTDIR/dev/md"
  touch "$ROOTDIR$device"
}

fake_mkfs.ext4() {
  record "$@"
  local device=${*: -1}
  awk -F'\t' -v s="$device" '$2 == s { found = 1 } END { exit found }' "$STATE/mounts" || die "$device is mounted"
  printf '%s\text4\tuuid-%s\n' "$device" "$(printf '%s' "$device" | cksum | cut -d' ' -f1)" >>"$STATE/filesystems"
}

serve "$@"

# --- systemd ---------------------------------------------------------------------------------

unit_file() { printf '%s/etc/systemd/system/%s' "$ROOTDIR" "$1"; }

unit_exists() {
  [[ -e "$(unit_file "$1")" ]] && return 0
  grep -qxF "$1" "$STATE/package-units" 2>/dev/null && return 0
  case "$1" in
    dlami-nvme.service) [[ "$DLAMI_NVME" != none ]] ;;
    slurmd.service) ((SLURMD)) ;;
    nvidia-imex.service) ((IMEX)) ;;
    *) return 1 ;;
  esac
}

unit_state() {
  local state
  if [[ -e "$STATE/units/$1" ]]; then
    read -r state <"$STATE/units/$1"
    printf '%s\n' "$state"
  elif [[ "$1" == dlami-nvme.service ]] && unit_exists "$1"; then
    echo activating
  else
    echo inactive
  fi
}

# The unit's commands to run at start, drop-ins included, in order: every ExecStartPre=, and the
# ExecStart= of a oneshot unit (a daemon's main process is the package's, not modelled).
exec_lines() {
  local files=() f
  [[ -e "$(unit_file "$1")" ]] && files+=("$(unit_file "$1")")
  for f in "$(unit_file "$1").d"/*.conf; do
    [[ -e "$f" ]] && files+=("$f")
  done
  ((${#files[@]})) || return 0
  sed -n 's/^ExecStartPre=//p' "${files[@]}"
  if grep -qx 'Type=oneshot' "${files[@]}"; then
    sed -n 's/^ExecStart=//p' "${files[@]}"
  fi
}

# systemctl start UNIT: run its commands (node paths under the sandbox root), or the AMI's own
# behaviour for the units the scenario provides.
start_unit() {
  local unit=$1 line rc=0
  case "$unit" in
    dlami-nvme.service)
      if [[ "$DLAMI_NVME" != none ]]; then
        ev_dlami
        return 0
      fi ;;
    nvidia-imex.service)
      if ((IMEX_START_FAILS)) || ! ((IMEX)); then
        echo failed >"$STATE/units/$unit"
        return 1
      fi ;;
  esac
  while IFS= read -r line; do
    [[ -n "$line" ]] || continue
    local -a words
    read -r -a words <<<"$line"
    if ! "$ROOTDIR${words[0]}" "${words[@]:1}"; then
      rc=1
      break
    fi
  done < <(exec_lines "$unit")
  if ((rc)); then
    echo failed >"$STATE/units/$unit"
    printf 'Job for %s failed because the control process exited with error code.\n' "$unit" >&2
    return 1
  fi
  echo active >"$STATE/units/$unit"
}

fake_systemctl() {
  record "$@"
  local verb=$1
  shift
  case "$verb" in
    cat) unit_exists "$1" ;;
    show)
      local unit=${*: -1}
      unit_state "$unit" ;;
    is-active)
      [[ "$(unit_state "${*: -1}")" == active ]] ;;
    start | restart)
      local unit rc=0 block=1
      for unit in "$@"; do
        [[ "$unit" == --no-block ]] && { block=0; continue; }
        start_unit "$unit" || rc=1
      done
      ((block)) || return 0  # --no-block: queued, systemctl does not wait for the outcome
      return "$rc" ;;
    enable)
      local unit now=0
      for unit in "$@"; do
        if [[ "$unit" == --now ]]; then
          now=1
          continue
        fi
        unit_exists "$unit" || die "Unit file $unit does not exist."
        echo "$unit" >>"$STATE/enabled"
      done
      if ((now)); then
        for unit in "$@"; do
          [[ "$unit" == --now ]] || start_unit "$unit" || return 1
        done
      fi ;;
    is-enabled)
      local unit=${*: -1}
      grep -qxF "$unit" "$STATE/enabled" || { [[ "$unit" == nvidia-imex.service ]] && ((IMEX)); } ;;
    stop)
      local unit
      for unit in "$@"; do
        [[ -e "$STATE/units/$unit" ]] && echo inactive >"$STATE/units/$unit"
      done
      return 0 ;;
    disable | daemon-reload) return 0 ;;
    *) die "verb $verb not faked" ;;
  esac
}

serve "$@"

# --- Slurm, the instance metadata service, EC2 -----------------------------------------------

# scontrol -ao show node LIST: one line per node of the scenario's SLURM_NODES (NAME=ADDR ...).
# This node in Slurm, as slurmctld sees it (the health check, network-features.sh):
# `scontrol -o show node [NAME]` prints it in the one-line form of Slurm (SLURM_NAME; its
# NodeHostName is hostname's; features "(null)" when none; Reason last, with who set it and when)
# once it has registered: the first SLURM_UNREGISTERED calls fail ("Node NAME not found"). Its State
# and Reason are state/slurm-node ("STATE<TAB>REASON"), its features state/slurm-features
# (available, then active, a line each). `scontrol update nodename=NAME state=drain reason=...` and
# `state=resume` change the state as slurmctld does (a drained node without jobs is IDLE+DRAIN,
# with jobs MIXED+DRAIN); `AvailableFeatures=A ActiveFeatures=B` set the features.
# `scontrol show config`: state/slurm-config ("RebootProgram = (null)", a line per setting, in
# Slurm's form) after Slurm's heading; nothing where the test wrote none. `scontrol reboot ...`:
# refused (exit 1, as Slurm 26.05 does without a RebootProgram) where state/slurm-reboot-refused is.
fake_scontrol() {
  record "$@"
  if [[ "$*" == "-ao show node "* ]]; then
    local pair
    for pair in $SLURM_NODES; do
      printf 'NodeName=%s Arch=aarch64 CoresPerSocket=72 NodeAddr=%s NodeHostName=%s State=ALLOCATED\n' \
        "${pair%%=*}" "${pair#*=}" "${pair%%=*}"
    done
    return 0
  fi
  local state reason arg new_state="" new_reason="" available active calls
  IFS=$TAB read -r state reason <"$STATE/slurm-node"
  [[ -e "$STATE/slurm-features" ]] || printf '%s\n%s\n' "$SLURM_FEATURES" "$SLURM_FEATURES" >"$STATE/slurm-features"
  { read -r available; read -r active; } <"$STATE/slurm-features"
  case "$*" in
    "show config")
      [[ -e "$STATE/slurm-config" ]] || return 0
      printf 'Configuration data as of 2026-12-02T20:00:00\n'
      cat "$STATE/slurm-config" ;;
    reboot*)
      [[ ! -e "$STATE/slurm-reboot-refused" ]] || die "$(cat "$STATE/slurm-reboot-refused")" ;;
    "-o show node"*)
      calls=0
      [[ ! -e "$STATE/slurm-show-calls" ]] || read -r calls <"$STATE/slurm-show-calls"
      echo $((++calls)) >"$STATE/slurm-show-calls"
      if ((calls <= SLURM_UNREGISTERED)) || [[ -n "${4:-}" && "$4" != "$SLURM_NAME" ]]; then
        FAKE_RC=1 die "Node ${4:-$SLURM_NAME} not found"
      fi
      printf 'NodeName=%s Arch=x86_64 CoresPerSocket=48 CPUAlloc=0 CPUTot=192 AvailableFeatures=%s ' \
        "$SLURM_NAME" "${available:-(null)}"
      printf 'ActiveFeatures=%s Gres=gpu:8 NodeAddr=10.1.0.42 NodeHostName=ip-10-1-0-42 RealMemory=2000000 ' \
        "${active:-(null)}"
      printf 'State=%s ThreadsPerCore=2 Version=25.05.3 Partitions=gpu' "$state"
      [[ -z "$reason" ]] || printf ' Reason=%s [root@2026-12-02T20:00:00]' "$reason"
      printf '\n' ;;
    update*)
      for arg in "${@:2}"; do
        case "$arg" in
          nodename=*) [[ "${arg#*=}" == "$SLURM_NAME" ]] || die "Invalid node name specified" ;;
          state=*) new_state=${arg#state=} ;;
          reason=*) new_reason=${arg#reason=} ;;
          AvailableFeatures=*) available=${arg#*=} ;;
          ActiveFeatures=*) active=${arg#*=} ;;
          *) die "Invalid input: $arg" ;;
        esac
      done
      case "$new_state" in
        drain) [[ "$state" == *DRAIN* ]] || state="$state+DRAIN"; reason=$new_reason ;;
        resume) state=${state%%+*}; reason="" ;;
      esac
      printf '%s\t%s\n' "$state" "$reason" >"$STATE/slurm-node"
      printf '%s\n%s\n' "$available" "$active" >"$STATE/slurm-features" ;;
  esac
}

# curl -o FILE URL: a download, answered from state/downloads/NAME (NAME: the URL's last part;
# the test puts the release files there), the first DOWNLOAD_FAILS attempts failing. Otherwise the
# instance metadata service (IMDSv2): a token for the PUT, then the instance type or id.
fake_curl() {
  record "$@"
  local out="" url="" arg
  local -a args=("$@")
  local i
  for ((i = 0; i < ${#args[@]}; i++)); do
    arg=${args[i]}
    if [[ "$arg" == -o ]]; then
      out=${args[i + 1]}
    elif [[ "$arg" == https://* ]]; then
      url=$arg
    fi
  done
  if [[ -n "$url" ]] && ! ((NETWORK)); then
    FAKE_RC=6 die "curl: (6) Could not resolve host: ${url#https://}"
  fi
  if [[ -n "$out" && -n "$url" ]]; then
    local failed
    failed=$(cat "$STATE/download-failures" 2>/dev/null || echo 0)
    if ((failed < DOWNLOAD_FAILS)); then
      echo $((failed + 1)) >"$STATE/download-failures"
      FAKE_RC=56 die "curl: (56) Recv failure: Connection reset by peer"
    fi
    [[ -e "$STATE/downloads/${url##*/}" ]] || FAKE_RC=22 die "curl: (22) The requested URL returned error: 404"
    cp "$STATE/downloads/${url##*/}" "$out"
    return 0
  fi
  ((IMDS)) || FAKE_RC=7 die "curl: (7) Failed to connect to 169.254.169.254 port 80"
  case "$*" in
    *"-X PUT"*latest/api/token*) printf 'AQAEA-token' ;;
    *meta-data/instance-type*) printf '%s' "$INSTANCE_TYPE" ;;
    *meta-data/instance-id*) printf '%s' "$INSTANCE_ID" ;;
    *meta-data/placement/region*) printf '%s' "$REGION" ;;
    *meta-data/local-ipv4*) printf '10.1.0.42' ;;
    *) FAKE_RC=22 die "curl: (22) The requested URL returned error: 404" ;;
  esac
}

# mknod PATH c MAJOR MINOR: a plain file stands for the device node (no privileges needed).
fake_mknod() {
  record "$@"
  [[ "$1" == "$ROOTDIR"/* ]] || die "mknod outside the sandbox: $1"
  : >"$1"
}

# nvidia-imex-ctl -N: the IMEX domain's status as NVIDIA's tool prints it (the AWS PCS User Guide's
# example: a line per node of nodes_config.cfg, then "Domain State: UP" once every node is READY
# and connected): UP from the virtual time IMEX_UP_AT on, while nvidia-imex.service is active;
# no daemon, no answer.
fake_nvidia-imex-ctl() {
  record "$@"
  [[ "$(unit_state nvidia-imex.service)" == active ]] || die "Connection refused: is nvidia-imex running?"
  # it asks the daemon's command service, which serves only with IMEX_CMD_ENABLED=1 in config.cfg
  grep -qx 'IMEX_CMD_ENABLED=1' "$ROOTDIR/etc/nvidia-imex/config.cfg" 2>/dev/null ||
    die "Connection refused: the IMEX command service is not enabled (IMEX_CMD_ENABLED)"
  local state=DOWN node=READY address i=0
  read_clock
  if [[ "$IMEX_UP_AT" != never ]] && ((NOW >= IMEX_UP_AT)); then
    state=UP
  else
    node=WAITING_FOR_PEERS
  fi
  printf 'Nodes:\n'
  while read -r address; do
    printf 'Node #%-3s - %-15s - %-20s - Version: 570.172\n' "$i" "$address" "$node"
    i=$((i + 1))
  done <"$ROOTDIR/etc/nvidia-imex/nodes_config.cfg"
  printf '\nDomain State: %s\n' "$state"
}
fake_aws() {
  record "$@"
  if [[ "$1 $2" == "ec2 describe-instance-topology" ]]; then
    describe_instance_topology "$@"
    return
  fi
  printf '%s\n' "$SSM_VALUE"
}

# aws ec2 describe-instance-topology --instance-ids ID... [--query Q --output text]: the recorded
# answer the test put in state/topology.json (tests/data/topology/), with only the instances asked
# for, as EC2 answers; none for the first TOPOLOGY_PENDING calls (EC2 has no topology for a new
# instance yet); TOPOLOGY_DENIED: the role lacks ec2:DescribeInstanceTopology. As JSON, or for
# the query Instances[].NetworkNodes[] as the CLI's text output: the ids tab-separated on one
# line, nothing for none (the AWS CLI's, checked against a served answer).
describe_instance_topology() {
  local calls ids=() query="" output=json
  if ((TOPOLOGY_DENIED)); then
    FAKE_RC=254 die "An error occurred (UnauthorizedOperation) when calling the DescribeInstanceTopology operation: You are not authorized to perform this operation."
  fi
  set -- "${@:3}"
  while (($#)); do
    case "$1" in
      --instance-ids) shift; while (($#)) && [[ "$1" != --* ]]; do ids+=("$1"); shift; done; continue ;;
      --query) query=$2; shift ;;
      --output) output=$2; shift ;;
      --region) shift ;;
      *) die "fake aws: option $1 not modelled" ;;
    esac
    shift
  done
  [[ -z "$query" || ("$query" == 'Instances[].NetworkNodes[]' && "$output" == text) ]] ||
    die "fake aws: query $query --output $output not modelled"
  calls=$(($(cat "$STATE/topology-calls" 2>/dev/null || echo 0) + 1))
  echo "$calls" >"$STATE/topology-calls"
  local answer='{"Instances": []}'
  if ((calls > TOPOLOGY_PENDING)) && [[ -e "$STATE/topology.json" ]]; then
    answer=$(cat "$STATE/topology.json")
  fi
  python3 -c 'import json, sys
found = [i for i in json.loads(sys.argv[1])["Instances"] if i["InstanceId"] in sys.argv[3:]]
if sys.argv[2]:
    nodes = [n for i in found for n in i.get("NetworkNodes", [])]
    print("\t".join(nodes)) if nodes else None
else:
    print(json.dumps({"Instances": found}, indent=4))' "$answer" "$query" "${ids[@]}"
}

serve "$@"

# --- packages and their sources --------------------------------------------------------------

fake_apt-get() {
  record "$@"
  local timeout=0 verb=""
  while (($#)); do
    case "$1" in
      -o) [[ "$2" == DPkg::Lock::Timeout=* ]] && timeout=${2#*=}; shift 2 ;;
      -*) shift ;;
      *) verb=$1; break ;;
    esac
  done
  if ((APT_FAILS)) || ! ((NETWORK)); then
    FAKE_RC=100 die "E: Failed to fetch http://archive.ubuntu.com/ubuntu: Temporary failure resolving"
  fi
  local t
  read_clock
  t=$NOW
  if ((t < DPKG_LOCK_UNTIL)); then
    if [[ "$verb" == update ]]; then
      FAKE_RC=100 die "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 812 (unattended-upgr)"
    fi
    if ((t + timeout < DPKG_LOCK_UNTIL)); then
      advance "$timeout"
      FAKE_RC=100 die "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 812 (unattended-upgr)"
    fi
    advance $((DPKG_LOCK_UNTIL - t))
  fi
  if [[ "$verb" == install ]]; then
    local package
    for package in "$@"; do
      case "${package%%=*}" in  # the units the packages ship
        prometheus-node-exporter) echo prometheus-node-exporter.service >>"$STATE/package-units" ;;
        prometheus) echo prometheus.service >>"$STATE/package-units" ;;
      esac
      if [[ "$package" == *=* ]]; then  # PACKAGE=SERIES*: the archive's version of that series
        local version=${package#*=}
        printf '%s %s\n' "${package%%=*}" "${version%\*}ubuntu0.1" >>"$STATE/dpkg"
      fi
      if [[ "$package" == /*.deb ]]; then  # a downloaded package: it must be there
        [[ -e "$ROOTDIR$package" ]] || FAKE_RC=100 die "E: Unsupported file $package given on commandline"
        local name=${package##*/}
        if [[ "$name" == enroot_*.deb ]]; then  # enroot_VERSION-1_ARCH.deb
          name=${name#enroot_}
          printf '%s\n' "${name%%-*}" >"$STATE/enroot-version"
        fi
      fi
    done
  fi
  return 0
}

# dpkg-query -W -f=FORMAT PACKAGE: state/dpkg's "PACKAGE VERSION" lines are the installed
# packages (the image's, and what apt-get install installed); FORMAT's ${Status} and ${Version}
# are filled in. A package not installed: dpkg-query's error, exit 1.
fake_dpkg-query() {
  record "$@"
  local format="" package version
  while (($#)); do
    case "$1" in
      -W) shift ;;
      -f) format=$2; shift 2 ;;
      -f=* | --showformat=*) format=${1#*=}; shift ;;
      *) package=$1; shift ;;
    esac
  done
  version=$(awk -v p="$package" '$1 == p {v = $2} END {print v}' "$STATE/dpkg" 2>/dev/null)
  [[ -n "$version" ]] || FAKE_RC=1 die "dpkg-query: no packages found matching $package"
  # shellcheck disable=SC2016  # dpkg-query's own fields, literally
  format=${format//'${Status}'/install ok installed}
  # shellcheck disable=SC2016
  format=${format//'${Version}'/$version}
  printf '%s' "$format"
}

# enroot: the Enroot `make install` put in ROOT/usr/bin (the stand-in of tests/support/standins.py: it
# prints its version), else the one a downloaded .deb installed (state/enroot-version), else none.
fake_enroot() {
  record "$@"
  [[ -x "$ROOTDIR/usr/bin/enroot" ]] && exec "$ROOTDIR/usr/bin/enroot" "$@"
  [[ -e "$STATE/enroot-version" ]] || FAKE_RC=127 die "enroot: command not found"
  [[ "$1" == version ]] && cat "$STATE/enroot-version"
  return 0
}

# git: the real git, recorded. The repositories are the stand-ins in state/upstream, reached
# through state/gitconfig's insteadOf (tests/support/sandbox.py). The world around it: the first
# DOWNLOAD_FAILS clones find the musl repository (git://git.musl-libc.org, TCP 9418) unreachable,
# so the real git clones the repository, fails on that submodule and leaves the checkout.
fake_git() {
  record "$@"
  local upstream="$STATE/upstream" clones
  if [[ "$1" == clone || "$1" == fetch || "$1" == ls-remote ]] && ! ((NETWORK)); then
    FAKE_RC=128 die "fatal: unable to access 'https://github.com/': Could not resolve host: github.com"
  fi
  upstream_ready
  if [[ "$1" == clone ]]; then
    [[ "${*: -1}" == "$FAKE_SANDBOX"/* ]] || die "clone outside the sandbox: ${*: -1}"
    clones=$(($(cat "$STATE/clones" 2>/dev/null || echo 0) + 1))
    echo "$clones" >"$STATE/clones"
    if ((clones <= DOWNLOAD_FAILS)); then
      [[ -e "$upstream/musl.git" ]] && mv "$upstream/musl.git" "$upstream/musl.unreachable"
    elif [[ -e "$upstream/musl.unreachable" ]]; then
      mv "$upstream/musl.unreachable" "$upstream/musl.git"
    fi
  fi
  exec /usr/bin/git "$@"
}

# The stand-in repositories are copied into the sandbox at the first git call (from FAKE_UPSTREAM,
# the pristine ones; none: Sandbox copied them already), whole, by a rename.
upstream_ready() {
  [[ -n "${FAKE_UPSTREAM:-}" && ! -e "$STATE/upstream" ]] || return 0
  cp -a "$FAKE_UPSTREAM" "$STATE/upstream.$$" || die "cannot copy the stand-in repositories"
  mv -T "$STATE/upstream.$$" "$STATE/upstream" 2>/dev/null || rm -rf "$STATE/upstream.$$"
}

# make: the real make, recorded; in a directory of the sandbox, installing into it.
fake_make() {
  record "$@"
  local arg previous=""
  for arg in "$@"; do
    if [[ "$previous" == -C && "$arg" != "$FAKE_SANDBOX"/* ]]; then
      die "make in a directory outside the sandbox: $arg"
    fi
    if [[ "$arg" == DESTDIR=* && "${arg#DESTDIR=}" != "$FAKE_SANDBOX"/* ]]; then
      die "make outside the sandbox: $arg"
    fi
    previous=$arg
  done
  exec /usr/bin/make "$@"
}

# setcap CAPS FILE (Enroot's `make setcap`): file capabilities need privileges a test does not
# have; the file must exist, and state/enroot-caps records what was set.
fake_setcap() {
  record "$@"
  [[ -e "$2" ]] || die "Failed to set capabilities on file '$2' (No such file or directory)"
  echo "$1 ${2#"$ROOTDIR"}" >>"$STATE/enroot-caps"
}

# aa-enabled -q: whether AppArmor is on (APPARMOR); apparmor_parser: loads a profile.
fake_aa-enabled() {
  record "$@"
  ((APPARMOR))
}

fake_apparmor_parser() {
  record "$@"
  [[ -e "$ROOTDIR${*: -1}" ]] || FAKE_RC=1 die "File ${*: -1} not found, skipping..."
}

fake_nvidia-container-cli() { record "$@"; }

fake_dnf() {
  record "$@"
  ((DNF_LUSTRE)) || FAKE_RC=1 die "Error: Unable to find a match: lustre-client"
  touch "$STATE/lustre-client"
}

serve "$@"

# --- Lustre and kernel modules ---------------------------------------------------------------

lustre_client() { ((LUSTRE_CLIENT)) || [[ -e "$STATE/lustre-client" ]]; }

fake_modinfo() {
  record "$@"
  local module=${*: -1}
  case "$module" in
    efa)
      [[ -n "$EFA_DRIVER" ]] || FAKE_RC=1 die "ERROR: Module efa not found."
      if [[ "$1" == -F ]]; then printf '%s\n' "$EFA_DRIVER"; fi ;;
    kefalnd | lnet | lustre | ksocklnd)
      lustre_client || FAKE_RC=1 die "ERROR: Module $module not found." ;;
    *) FAKE_RC=1 die "ERROR: Module $module not found." ;;
  esac
}

fake_modprobe() {
  record "$@"
  case "$1" in
    kefalnd | lnet | lustre | ksocklnd) lustre_client || die "FATAL: Module $1 not found in directory /lib/modules/6.8.0-aws" ;;
  esac
}

fake_lnetctl() {
  record "$@"
  case "$1 $2" in
    "lnet configure") touch "$STATE/lnet" ;;
    "net del")
      [[ -e "$STATE/lnet" ]] || die "LNet not configured"
      awk -F'\t' -v n="$4" '$1 != n' "$STATE/lnet" >"$STATE/lnet.new" && mv "$STATE/lnet.new" "$STATE/lnet" ;;
    "net add")
      [[ -e "$STATE/lnet" ]] || die "add: LNet not configured"
      local net=$4 interface=$6
      if [[ "$net" == efa && ! -e "$ROOTDIR/sys/class/infiniband/$interface" ]]; then
        die "add: cannot add network: no such device $interface"
      fi
      printf '%s\t%s\n' "$net" "$interface" >>"$STATE/lnet" ;;
    "net show")
      [[ -e "$STATE/lnet" ]] || return 0
      local net=${4:-} n=0 name interface
      while IFS=$TAB read -r name interface; do
        if [[ -z "$net" || "$name" == "$net" ]]; then
          n=$((n + 1))
          printf -- '- net type: %s\n  local NI(s):\n    - nid: 10.1.0.%s@%s\n      interfaces:\n          0: %s\n' \
            "$name" "$n" "$name" "$interface"
        fi
      done <"$STATE/lnet" ;;
    "set discovery" | "udsp add") return 0 ;;
    *) die "$1 $2 not faked" ;;
  esac
}

fake_ip() {
  record "$@"
  printf 'default via 10.1.0.1 dev ens32 proto dhcp src 10.1.0.42 metric 100\n'
}

"fake_$CMD" "$@"
