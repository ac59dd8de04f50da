# shellcheck shell=bash
# Instance-store NVMe disks as one scratch volume at SCRATCH_PATH: several disks are striped
# into a RAID 0 array with mdadm, a single disk is formatted directly. NVME_DISK_COUNT (from
# the instance catalog) is how many disks to wait for.

# Resolved device paths of the instance-store disks, one a line. /dev/disk/by-id holds several
# links per disk (with and without a namespace suffix), so the links are resolved and deduplicated.
instance_store_disks() {
  local link
  for link in /dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_*; do
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
    printf '%s\n' "${disks[@]}"
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

setup_scratch() {
  if mountpoint -q "$SCRATCH_PATH"; then
    log "$SCRATCH_PATH is mounted already"
    return 0
  fi
  local -a disks=()
  mapfile -t disks < <(wait_for_disks)
  if ((${#disks[@]} == 0)); then
    log "warning: no instance-store NVMe disk found (expected $NVME_DISK_COUNT); $SCRATCH_PATH not set up"
    return 0
  fi
  if ((${#disks[@]} != NVME_DISK_COUNT)); then
    log "warning: found ${#disks[@]} instance-store NVMe disks, expected $NVME_DISK_COUNT; using those found"
  fi
  install -d -m 1777 "$SCRATCH_PATH"

  # A disk, or an array built on it, may be mounted already: the Deep Learning AMIs mount the
  # instance store at /opt/dlami/nvme at boot.
  local mounted
  mounted=$(lsblk_first MOUNTPOINT 'NF { print; exit }' "${disks[@]}")
  if [[ -n "$mounted" ]]; then
    log "instance store is mounted at $mounted already: bind-mounting it at $SCRATCH_PATH"
    mount --bind "$mounted" "$SCRATCH_PATH"
    add_fstab "$mounted" "$SCRATCH_PATH" none "bind,nofail"
    chmod 1777 "$SCRATCH_PATH"
    return 0
  fi

  # The disks may form an md array already (assembled at boot).
  local device
  # shellcheck disable=SC2016  # an awk program, not shell
  device=$(lsblk_first NAME,TYPE '$2 ~ /^raid/ { print $1; exit }' "${disks[@]}")
  if [[ -z "$device" ]]; then
    if ((${#disks[@]} == 1)); then
      device=${disks[0]}
    else
      device=$SCRATCH_ARRAY
      log "striping ${#disks[@]} disks into RAID 0 $device"
      mdadm --create "$device" --level=0 --raid-devices="${#disks[@]}" --force --run "${disks[@]}"
    fi
  fi
  if [[ -z "$(blkid -s TYPE -o value "$device" || true)" ]]; then
    log "formatting $device (ext4)"
    mkfs.ext4 -F -q -m 0 -E nodiscard -L scratch "$device"
  fi
  mount -o defaults,noatime "$device" "$SCRATCH_PATH"
  chmod 1777 "$SCRATCH_PATH"

  local uuid fstype
  uuid=$(blkid -s UUID -o value "$device")
  fstype=$(blkid -s TYPE -o value "$device")
  add_fstab "UUID=$uuid" "$SCRATCH_PATH" "$fstype" "defaults,noatime,nofail,x-systemd.device-timeout=30s"
  log "mounted $device at $SCRATCH_PATH"
}
