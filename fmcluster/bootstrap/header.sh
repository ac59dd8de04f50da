#!/bin/bash
# fmcluster node bootstrap, rendered by fmcluster.bootstrap for one node group.
# AWS PCS runs text/x-shellscript user data after the node registers with the cluster and
# before slurmd starts; a failure here shows in /var/log/cloud-init-output.log.
set -euo pipefail

log() {
  printf 'fmcluster-bootstrap: %s\n' "$*" >&2
}

# add_fstab SOURCE MOUNTPOINT TYPE OPTIONS: add the line once, so that a reboot mounts it again.
add_fstab() {
  local line="$1 $2 $3 $4 0 0"
  grep -qsxF -- "$line" /etc/fstab || printf '%s\n' "$line" >>/etc/fstab
}
