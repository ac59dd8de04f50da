# shellcheck shell=bash
# The end of the node's reserved capacity (programs/capacity-end.sh, embedded as program_capacity_end,
# with the slurm-node.sh and slurm-jobs.sh it sources), on the compute nodes of an AWS PCS Capacity
# Block group or a SageMaker HyperPod training-plan group: its settings file
# FMCLUSTER_ETC/capacity-end.env, and fmcluster-capacity-end.service, run after slurmd at every boot
# and every CAPACITY_END_SECONDS by fmcluster-capacity-end.timer (the end can move: an extension;
# the program asks EC2 or SageMaker far less often: READ_MINUTES, NEAR_MINUTES). Its journal keeps
# what changed (the program is silent otherwise).

install_capacity_end() {
  install -d -m 0755 "$ROOT$FMCLUSTER_LIB" "$ROOT$FMCLUSTER_ETC" "$ROOT/etc/systemd/system"
  program_capacity_end >"$ROOT$FMCLUSTER_LIB/capacity-end"
  program_slurm_node >"$ROOT$FMCLUSTER_LIB/slurm-node.sh"
  program_slurm_jobs >"$ROOT$FMCLUSTER_LIB/slurm-jobs.sh"
  chmod 0755 "$ROOT$FMCLUSTER_LIB/capacity-end"
  {
    printf '# fmcluster capacity-end settings, for %s nodes\n' "$INSTANCE_TYPE"
    printf 'SLURM_BIN=%q\n' "$CAPACITY_END_SLURM_BIN"
    printf 'END_SOURCE=%q\n' "$CAPACITY_END_SOURCE"
    printf 'RESERVATION_ID=%q\n' "$CAPACITY_END_RESERVATION_ID"
    printf 'TRAINING_PLAN_ARN=%q\n' "$CAPACITY_END_TRAINING_PLAN_ARN"
    printf 'PLAN_INSTANCE_TYPE=%q\n' "ml.$INSTANCE_TYPE"
    printf 'PARTITION=%q\n' "$CAPACITY_END_PARTITION"
    printf 'TERMINATION_MINUTES=%s\n' "$CAPACITY_END_TERMINATION_MINUTES"
    printf 'SIGNAL_MINUTES=%s\n' "$CAPACITY_END_SIGNAL_MINUTES"
    printf 'SIGNAL=%q\n' "$CAPACITY_END_SIGNAL"
    printf 'READ_MINUTES=%s\n' "$CAPACITY_END_READ_MINUTES"
    printf 'NEAR_MINUTES=%s\n' "$CAPACITY_END_NEAR_MINUTES"
    printf 'GRACE_SECONDS=%s\n' "$CAPACITY_END_GRACE_SECONDS"
    printf 'STATE_DIR=%q\n' "$CAPACITY_END_STATE_DIR"
    printf 'FMCLUSTER_LIB=%q\n' "$FMCLUSTER_LIB"
  } >"$ROOT$FMCLUSTER_ETC/capacity-end.env"
  cat >"$ROOT/etc/systemd/system/fmcluster-capacity-end.service" <<UNIT
[Unit]
Description=fmcluster: the capacity's end (a Slurm reservation, the jobs signalled, the node drained)
After=network-online.target ${SLURMD_UNITS:-slurmd.service}
Wants=network-online.target

[Service]
Type=oneshot
ExecStart=$FMCLUSTER_LIB/capacity-end $FMCLUSTER_ETC/capacity-end.env
TimeoutStartSec=300
UNIT
  cat >"$ROOT/etc/systemd/system/fmcluster-capacity-end.timer" <<UNIT
[Unit]
Description=fmcluster: the capacity's end checked every ${CAPACITY_END_SECONDS}s

[Timer]
OnActiveSec=60s
OnUnitInactiveSec=${CAPACITY_END_SECONDS}s
AccuracySec=10s
# the group's nodes boot together: spread their EC2 reads over a minute (EC2 throttles per account)
RandomizedDelaySec=60s

[Install]
WantedBy=timers.target
UNIT
  systemctl daemon-reload
  systemctl enable --now fmcluster-capacity-end.timer
  log "capacity end: checked every ${CAPACITY_END_SECONDS}s (fmcluster-capacity-end.timer)"
}
