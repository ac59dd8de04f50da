# shellcheck shell=bash
# AWS PCS: slurmd starts only on a node that is ready. A drop-in for slurmd's unit (slurmd_dropin:
# for each name it may have, PCS's installer's slurmd-VERSION.service and slurmd.service) runs the check
# before slurmd (ExecStartPre): while it fails slurmd stays down, so the node never registers and
# never takes a job, and systemd tries again every SLURMD_RETRY_SECONDS (a late mount or GPU makes
# it ready without a human). Written first, before any step that can fail. TimeoutStartSec covers
# the readiness wait and, on a node with the deep check, its bound (DEEP_CHECK_SECONDS).

gate_slurmd() {
  slurmd_dropin 50-fmcluster-node-ready.conf <<UNIT
[Unit]
After=remote-fs.target fmcluster-lnet-efa.service
StartLimitIntervalSec=0

[Service]
ExecStartPre=$FMCLUSTER_LIB/node-ready
TimeoutStartSec=$((READY_WAIT_SECONDS + ${DEEP_CHECK_SECONDS:-0} + 60))
Restart=on-failure
RestartSec=$SLURMD_RETRY_SECONDS
UNIT
  systemctl daemon-reload
  log "slurmd (${SLURMD_UNITS:-slurmd.service}) starts only when $FMCLUSTER_LIB/node-ready passes"
}

# check_node_ready: the verdict at the end of the boot, in the log; a node that is not ready fails
# the script (cloud-init shows it) and slurmd's gate keeps it from taking jobs.
check_node_ready() {
  if ! node_ready; then
    log "slurmd will not start until this is fixed (journalctl -u 'slurmd*'; the metric fmcluster_node_ready)"
    return 1
  fi
}
