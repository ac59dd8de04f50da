# shellcheck shell=bash
# Mount the cluster's shared home HOME_SOURCE (HOME_FSTYPE: nfs, FSx for OpenZFS; or lustre) at
# HOME_PATH, retrying while the network and the file system come up, and keep it in /etc/fstab
# (HOME_FSTAB_OPTIONS: _netdev, and for Lustre over EFA the LNet unit first).
#
# A mount over /home hides what the image keeps there: its default user's home directory (ubuntu,
# with the SSH keys the instance was given). So, as AWS's ParallelCluster and its PCS samples do
# before they put shared storage at /home, the image's home directories are copied into the
# shared file system first: it is mounted at HOME_STAGING, each directory of the image's /home
# that it lacks is copied in with its owner and modes, under a name of this node's and then
# renamed into place without replacing anything (a node booting at the same time never sees half
# a directory, and what is there, the first node's copy, a user's own directory, even an empty one,
# a file or a link, is never replaced), and it is unmounted there before it is mounted at
# HOME_PATH. Partial copies a node left when it died mid-copy, older than this boot, are removed
# first. Every boot: a mounted HOME_PATH is left as it is.

mount_home() {
  install -d -m 0755 "$ROOT$HOME_PATH"
  add_fstab "$HOME_SOURCE" "$HOME_PATH" "$HOME_FSTYPE" "$HOME_FSTAB_OPTIONS"
  local attempt
  for ((attempt = 1; attempt <= HOME_MOUNT_ATTEMPTS; attempt++)); do
    if mountpoint -q "$HOME_PATH"; then
      log "$HOME_PATH is mounted"
      return 0
    fi
    if seed_home && mount "$HOME_PATH"; then
      log "mounted $HOME_SOURCE at $HOME_PATH"
      return 0
    fi
    log "mounting $HOME_SOURCE at $HOME_PATH failed (attempt $attempt of $HOME_MOUNT_ATTEMPTS); retrying in ${HOME_RETRY_SECONDS}s"
    sleep "$HOME_RETRY_SECONDS"
  done
  log "error: could not mount $HOME_SOURCE at $HOME_PATH"
  return 1
}

# seed_home: the image's home directories the shared home lacks, copied into it (see above).
seed_home() {
  local staging=$HOME_STAGING rc=0
  install -d -m 0700 "$ROOT$staging"
  if ! mountpoint -q "$staging"; then
    mount -t "$HOME_FSTYPE" -o "$HOME_MOUNT_OPTIONS" "$HOME_SOURCE" "$staging" || return 1
  fi
  copy_home_entries "$ROOT$HOME_PATH" "$ROOT$staging" || rc=1
  umount "$staging" || rc=1
  return "$rc"
}

# seed_mounted_home: where the shared home was mounted at HOME_PATH before this script ran
# (SageMaker HyperPod mounts it itself), the image's home directories are under it, hidden: a bind
# mount of / at HOME_IMAGE_ROOT shows the root file system without the mounts on it, its HOME_PATH
# the image's own, and they are copied in as above.
seed_mounted_home() {
  local rc=0
  if ! mountpoint -q "$HOME_PATH"; then
    log "error: $HOME_PATH is not mounted"
    return 1
  fi
  install -d -m 0700 "$ROOT$HOME_IMAGE_ROOT"
  if ! mountpoint -q "$HOME_IMAGE_ROOT"; then
    mount --bind / "$HOME_IMAGE_ROOT" || return 1
  fi
  copy_home_entries "$ROOT$HOME_IMAGE_ROOT$HOME_PATH" "$ROOT$HOME_PATH" || rc=1
  umount "$HOME_IMAGE_ROOT" || rc=1
  return "$rc"
}

# copy_home_entries FROM TO: each directory of FROM (not its files or links) that TO lacks, copied
# with its owner and modes under a name of this node's, then renamed into place. Nothing in TO is
# replaced: an existing name is skipped, and the rename is `mv --no-clobber`, which asks the kernel
# for renameat2's RENAME_NOREPLACE and where the file system refuses it (an NFS client does) looks
# first; what a user creates in the instant between that look and the rename can only be an empty
# directory (rename(2) fails over a non-empty one, a file or a link), the one case left.
copy_home_entries() {
  local from=$1 to=$2 entry name part copied=0 rc=0
  remove_stale_copies "$to"
  while IFS= read -r -d '' entry; do
    name=${entry##*/}
    [[ "$name" != lost+found && ! -e "$to/$name" && ! -L "$to/$name" ]] || continue
    part="$to/.$name.fmcluster-$HOSTNAME-$$"
    if cp -a "$entry" "$part" && mv -T --no-clobber "$part" "$to/$name" 2>/dev/null && [[ ! -e "$part" ]]; then
      log "copied the image's $HOME_PATH/$name into the shared home"
      copied=$((copied + 1))
    elif [[ -e "$to/$name" || -L "$to/$name" ]]; then
      rm -rf -- "$part"  # another node (or a user) was first: what is there stands
    else
      log "error: could not copy $HOME_PATH/$name into the shared home"
      rm -rf -- "$part"
      rc=1
    fi
  done < <(find "$from/" -mindepth 1 -maxdepth 1 -type d -print0)
  ((rc == 0)) && log "the shared home has the image's home directories ($copied copied now)"
  return "$rc"
}

# remove_stale_copies TO: the partial copies (.NAME.fmcluster-HOST-PID) in TO that were last
# changed before this node booted (the boot time of /proc/stat), left by a node that died
# mid-copy; a copy under way on another node is newer. Without the boot time nothing is removed.
remove_stale_copies() {
  local to=$1 boot stale
  boot=$(awk '$1 == "btime" { print $2 }' "$ROOT/proc/stat" 2>/dev/null)
  [[ "$boot" =~ ^[0-9]+$ ]] || return 0
  while IFS= read -r -d '' stale; do
    rm -rf -- "$stale" && log "removed ${stale##*/}, a partial copy older than this boot"
  done < <(find "$to/" -mindepth 1 -maxdepth 1 -name '.*.fmcluster-*' ! -newerct "@$boot" -print0)
}
