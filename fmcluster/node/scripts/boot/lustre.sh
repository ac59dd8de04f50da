# shellcheck shell=bash
# Mount the FSx for Lustre file system FSX_SOURCE (DNS_NAME@tcp:/MOUNT_NAME) at FSX_MOUNT_PATH,
# retrying while the network and the file system come up, and keep it in /etc/fstab. The source
# names the file system's management server over TCP even where LNet has EFA: the client learns
# the servers' EFA addresses by discovery and sends bulk data over EFA (FSX_MOUNT_OPTIONS then
# require fmcluster-lnet-efa.service, so that a reboot configures LNet before it mounts).

mount_lustre() {
  install -d -m 0755 "$ROOT$FSX_MOUNT_PATH"
  add_fstab "$FSX_SOURCE" "$FSX_MOUNT_PATH" lustre "$FSX_MOUNT_OPTIONS"
  local attempt
  for ((attempt = 1; attempt <= FSX_MOUNT_ATTEMPTS; attempt++)); do
    if mountpoint -q "$FSX_MOUNT_PATH"; then
      log "$FSX_MOUNT_PATH is mounted"
      return 0
    fi
    if mount -t lustre -o relatime,flock "$FSX_SOURCE" "$FSX_MOUNT_PATH"; then
      log "mounted $FSX_SOURCE at $FSX_MOUNT_PATH"
      return 0
    fi
    log "mounting $FSX_SOURCE failed (attempt $attempt of $FSX_MOUNT_ATTEMPTS); retrying in ${FSX_RETRY_SECONDS}s"
    sleep "$FSX_RETRY_SECONDS"
  done
  log "error: could not mount $FSX_SOURCE at $FSX_MOUNT_PATH"
  return 1
}
