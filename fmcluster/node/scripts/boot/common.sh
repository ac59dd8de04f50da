# shellcheck shell=bash
# What every fmcluster node script uses: log, slurmd_unit, add_fstab, step and finish.

log() {
  printf 'fmcluster-bootstrap: %s\n' "$*" >&2
}

# add_fstab SOURCE MOUNTPOINT TYPE OPTIONS: the fstab line of MOUNTPOINT, so that a reboot mounts
# it again. One line per mount point: a rerun with other options replaces the earlier line.
# slurmd_unit: the node's slurmd unit, the first of SLURMD_UNITS whose unit file the node has
# (the PCS Slurm installer names it slurmd-VERSION.service, a node of one's own may have
# slurmd.service); the first of them where none is there yet.
slurmd_unit() {
  local unit dir
  # shellcheck disable=SC2086  # a list of unit names
  for unit in ${SLURMD_UNITS:-slurmd.service}; do
    for dir in /etc/systemd/system /usr/lib/systemd/system /lib/systemd/system; do
      [[ -e "$ROOT$dir/$unit" ]] && { echo "$unit"; return 0; }
    done
  done
  # shellcheck disable=SC2086  # a list of unit names
  set -- ${SLURMD_UNITS:-slurmd.service}
  echo "$1"
}

add_fstab() {
  local line="$1 $2 $3 $4 0 0" fstab="$ROOT/etc/fstab"
  if grep -qsxF -- "$line" "$fstab"; then
    return 0
  fi
  if [[ -e "$fstab" ]]; then
    awk -v mnt="$2" '$2 != mnt' "$fstab" >"$fstab.fmcluster" && cat "$fstab.fmcluster" >"$fstab"
    rm -f "$fstab.fmcluster"
  fi
  printf '%s\n' "$line" >>"$fstab"
}

# step NAME: run the function NAME with errexit in force (in a subshell: bash ignores `set -e`
# inside a function called from a condition, so a step can pass no variable to the next). A
# failure is logged and recorded in FAILED, and the script goes on with the next step: one failed
# step must not leave the rest of the node unconfigured (metrics above all, so that the node can
# be seen).
FAILED=()
step() {
  local rc=0
  set +e
  (set -e; "$@")
  rc=$?
  set -e
  if ((rc != 0)); then
    log "error: $1 failed (exit $rc)"
    FAILED+=("$1")
  fi
}

# finish: the script's exit status, after every step ran.
finish() {
  if ((${#FAILED[@]} > 0)); then
    log "error: ${FAILED[*]} failed on this $INSTANCE_TYPE node"
    exit 1
  fi
  log "done: $INSTANCE_TYPE node set up"
}
