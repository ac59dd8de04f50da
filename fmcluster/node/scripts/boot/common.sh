# shellcheck shell=bash
# What every fmcluster node script uses: log, slurmd_dropin, add_fstab, step and finish.

log() {
  printf 'fmcluster-bootstrap: %s\n' "$*" >&2
}

# slurmd_dropin NAME: standard input as the drop-in NAME of each name slurmd's unit may have
# (SLURMD_UNITS: the PCS Slurm installer's slurmd-VERSION.service, and slurmd.service, which
# the PCS agent is seen starting on the PCS-ready DLAMI: which one it starts is not documented).
# A drop-in of a unit the node does not have is never read, so every name gets it.
slurmd_dropin() {
  local unit text
  text=$(cat)
  # shellcheck disable=SC2086  # a list of unit names
  for unit in ${SLURMD_UNITS:-slurmd.service}; do
    install -d -m 0755 "$ROOT/etc/systemd/system/$unit.d"
    printf '%s\n' "$text" >"$ROOT/etc/systemd/system/$unit.d/$1"
  done
}

# add_fstab SOURCE MOUNTPOINT TYPE OPTIONS: the fstab line of MOUNTPOINT, so that a reboot mounts
# it again. One line per mount point: a rerun with other options replaces the earlier line.
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
