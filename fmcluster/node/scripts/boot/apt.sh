# shellcheck shell=bash
# apt-get at first boot races unattended-upgrades and apt-daily for the dpkg lock ("Could not
# get lock /var/lib/dpkg/lock-frontend"). apt_get waits for the dpkg lock up to
# APT_LOCK_TIMEOUT_SECONDS (DPkg::Lock::Timeout) and retries the whole command APT_ATTEMPTS
# times, APT_RETRY_SECONDS apart (`apt-get update` fails at once on the lists lock).

apt_get() {
  local attempt
  for ((attempt = 1; attempt <= APT_ATTEMPTS; attempt++)); do
    if DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$APT_LOCK_TIMEOUT_SECONDS" "$@"; then
      return 0
    fi
    if ((attempt < APT_ATTEMPTS)); then
      log "apt-get $1 failed (attempt $attempt of $APT_ATTEMPTS); retrying in ${APT_RETRY_SECONDS}s"
      sleep "$APT_RETRY_SECONDS"
    fi
  done
  log "error: apt-get $* failed $APT_ATTEMPTS times"
  return 1
}
