# shellcheck shell=bash
# Instance-store NVMe disks as one scratch volume at SCRATCH_PATH, the same on every boot.
#
# The Deep Learning AMIs set the instance store up themselves: DLAMI_NVME_UNIT
# (dlami-nvme.service) mounts it at DLAMI_NVME_PATH (/opt/dlami/nvme) on every boot. Where that
# unit exists, the script waits for it (never building an array on disks the unit is still
# claiming) and bind-mounts its mount at SCRATCH_PATH; the fstab line requires the unit
# (x-systemd.requires: Requires= and After=), so after a reboot the bind waits for the unit's
# mount instead of binding the empty directory on the root volume. `nofail`: the bind is not
# ordered before local-fs.target, so the unit, whatever its own ordering, forms no cycle with it.
#
# Elsewhere the script stripes the disks into a RAID 0 array with mdadm (one disk is formatted
# directly), formats it once and mounts it by file-system UUID: after a reboot the array
# assembles from its superblocks under whatever md name, and the UUID finds it. NVME_DISK_COUNT
# (from the instance catalog) is how many disks to wait for.

# Resolved device paths of the instance-store disks, one a line. /dev/disk/by-id holds several
# links per disk (with and without a namespace suffix), so the links are resolved and deduplicated.
instance_store_disks() {
  local link
  for link in "$ROOT"/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_*; do
    if [[ -e "$link" && "$link" != *-part* ]]; then
      readlink -f "$link"
    fi
  done | sort -u
}

# The disks, once all NVME_DISK_COUNT have appeared or SCRATCH_WAIT_SECONDS have passed.
wait_for_disks() {
  local waited=0
  local -a disks=()
  while :; do
    mapfile -t disks < <(instance_store_disks)
    if ((${#disks[@]} >= NVME_DISK_COUNT || waited >= SCRATCH_WAIT_SECONDS)); then
      break
    fi
    sleep 2
    waited=$((waited + 2))
  done
  if ((${#disks[@]} > 0)); then
    printf '%s\n' "${disks[@]#"$ROOT"}"
  fi
}

# lsblk_first COLUMNS AWK_PROGRAM DISK...: the first value the awk program picks from lsblk's
# view of each disk and what is built on it; nothing when there is none.
lsblk_first() {
  local columns=$1 program=$2 disk found
  shift 2
  for disk in "$@"; do
    found=$(lsblk -nrpo "$columns" "$disk" | awk "$program")
    if [[ -n "$found" ]]; then
      printf '%s\n' "$found"
      return 0
    fi
  done
}

# bind_scratch SOURCE OPTIONS: SCRATCH_PATH as a bind mount of SOURCE, kept in fstab.
bind_scratch() {
  mount --bind "$1" "$SCRATCH_PATH"
  add_fstab "$1" "$SCRATCH_PATH" none "bind,nofail,$2"
  chmod 1777 "$ROOT$SCRATCH_PATH"
  log "$SCRATCH_PATH is $1 (bind mount)"
}

# The state of the AMI's instance-store unit once it is no longer starting ("absent" without
# one): active, failed or inactive, after at most DLAMI_WAIT_SECONDS.
dlami_nvme_state() {
  local state waited=0
  if ! systemctl cat "$DLAMI_NVME_UNIT" >/dev/null 2>&1; then
    echo absent
    return 0
  fi
  while :; do
    state=$(systemctl show -p ActiveState --value "$DLAMI_NVME_UNIT")
    if [[ "$state" == active || "$state" == failed ]] || ((waited >= DLAMI_WAIT_SECONDS)); then
      break
    fi
    sleep 2
    waited=$((waited + 2))
  done
  echo "$state"
}

setup_scratch() {
  install -d -m 1777 "$ROOT$SCRATCH_PATH"
  if mountpoint -q "$SCRATCH_PATH"; then
    log "$SCRATCH_PATH is mounted already"
    return 0
  fi
  local unit_state
  unit_state=$(dlami_nvme_state)
  if [[ "$unit_state" != absent ]]; then
    if mountpoint -q "$DLAMI_NVME_PATH"; then
      bind_scratch "$DLAMI_NVME_PATH" "x-systemd.requires=$DLAMI_NVME_UNIT"
      return 0
    fi
    log "warning: $DLAMI_NVME_UNIT is $unit_state and $DLAMI_NVME_PATH is not mounted"
  fi

  local -a disks=()
  mapfile -t disks < <(wait_for_disks)
  if ((${#disks[@]} == 0)); then
    log "error: no instance-store NVMe disk found (expected $NVME_DISK_COUNT); $SCRATCH_PATH not set up"
    return 1
  fi
  if ((${#disks[@]} != NVME_DISK_COUNT)); then
    log "warning: found ${#disks[@]} instance-store NVMe disks, expected $NVME_DISK_COUNT; using those found"
  fi

  # A disk, or what is built on it, may be mounted already (by the AMI, or an earlier run).
  local mounted
  mounted=$(lsblk_first MOUNTPOINT 'NF { print; exit }' "${disks[@]}")
  if [[ -n "$mounted" ]]; then
    bind_scratch "$mounted" "x-systemd.requires-mounts-for=$mounted"
    return 0
  fi

  # The disks may form an md array already (assembled at boot from an earlier run).
  local device
  # shellcheck disable=SC2016  # an awk program, not shell
  device=$(lsblk_first NAME,TYPE '$2 ~ /^raid/ { print $1; exit }' "${disks[@]}")
  if [[ -z "$device" ]]; then
    if ((${#disks[@]} == 1)); then
      device=${disks[0]}
    else
      device=$SCRATCH_ARRAY
      log "striping ${#disks[@]} disks into RAID 0 $device"
      mdadm --create "$device" --level=0 --raid-devices="${#disks[@]}" --run "${disks[@]}"
    fi
  fi
  if [[ -z "$(blkid -s TYPE -o value "$device" || true)" ]]; then
    log "formatting $device (ext4)"
    mkfs.ext4 -F -q -m 0 -E nodiscard -L scratch "$device"
  fi
  local uuid fstype
  uuid=$(blkid -s UUID -o value "$device")
  fstype=$(blkid -s TYPE -o value "$device")
  mount -o defaults,noatime "$device" "$SCRATCH_PATH"
  chmod 1777 "$ROOT$SCRATCH_PATH"
  add_fstab "UUID=$uuid" "$SCRATCH_PATH" "$fstype" "defaults,noatime,nofail,x-systemd.device-timeout=30s"
  log "mounted $device at $SCRATCH_PATH"
}
