# shellcheck shell=bash
# The continuous node health check (programs/node-health.sh, embedded as program_node_health),
# its settings file /etc/fmcluster/node-health.env, and what runs it while the node is in
# service: HEALTH_RUNNER "timer", the systemd timer fmcluster-node-health.timer running
# `node-health --slurm` every HEALTH_CHECK_SECONDS; "metrics" (Kubernetes nodes, where the node
# monitoring agents take a faulty node out of the pool), the same timer running `node-health`,
# which only writes the metrics and alerts see; "slurm", nothing here: slurm.conf's
# HealthCheckProgram names FMCLUSTER_LIB/node-health-slurm and HealthCheckInterval the period
# (slurmd runs it, as root, on every node). Either way a faulty node is drained with the fault
# as its reason (`sinfo -R`), and the metrics fmcluster_node_healthy and fmcluster_node_fault
# show it.

install_node_health() {
  install -d -m 0755 "$ROOT$FMCLUSTER_LIB" "$ROOT$FMCLUSTER_ETC"
  program_node_health >"$ROOT$FMCLUSTER_LIB/node-health"
  program_slurm_node >"$ROOT$FMCLUSTER_LIB/slurm-node.sh"  # what node-health sources
  chmod 0755 "$ROOT$FMCLUSTER_LIB/node-health"
  # What HealthCheckProgram names: slurm.conf gives a program no arguments.
  printf '#!/bin/sh\nexec %s/node-health --slurm\n' "$FMCLUSTER_LIB" >"$ROOT$FMCLUSTER_LIB/node-health-slurm"
  chmod 0755 "$ROOT$FMCLUSTER_LIB/node-health-slurm"
  {
    printf '# fmcluster node-health settings (fmcluster.node.bootstrap), for %s nodes\n' "$INSTANCE_TYPE"
    printf 'EXPECTED_GPUS=%s\n' "$EXPECTED_GPUS"
    printf 'EXPECTED_EFA=%s\n' "$HEALTH_EFA"
    printf 'NVLINK=%s\n' "$HEALTH_NVLINK"
    printf 'REQUIRED_MOUNTS=%q\n' "$HEALTH_MOUNTS"
    printf 'REPLACE_XIDS=%q\n' "$HEALTH_XIDS"
    printf 'RESET_XIDS=%q\n' "$HEALTH_RESET_XIDS"
    printf 'NODE_FAULTS=%q\n' "$HEALTH_NODE_FAULTS"
    printf 'REASON_PREFIX=%q\n' "$HEALTH_REASON_PREFIX"
    printf 'TEXTFILE_DIR=%q\n' "$TEXTFILE_DIR"
    printf 'COMMAND_TIMEOUT=%s\n' "$HEALTH_COMMAND_TIMEOUT"
    printf 'DCGM_LEVEL=%s\nDCGM_TIMEOUT=%s\n' "$HEALTH_DCGM_LEVEL" "$HEALTH_DCGM_TIMEOUT"
    printf 'SLURM_BIN=%q\n' "$HEALTH_SLURM_BIN"
    printf 'REPLACE=%s\n' "$HEALTH_REPLACE"
    printf 'FMCLUSTER_LIB=%q\n' "$FMCLUSTER_LIB"
  } >"$ROOT$FMCLUSTER_ETC/node-health.env"
  [[ "$HEALTH_RUNNER" != slurm ]] || { log "node health: slurmd runs it (HealthCheckProgram)"; return 0; }
  # KillMode=process: once node-health exits, systemd signals only it, never what it left behind: a
  # mount's probe stuck in the kernel (D state) on a file system that does not answer dies of no
  # signal, and signalling the unit's whole control group would hold it in "deactivating" for
  # TimeoutStopSec after SIGTERM and again after SIGKILL, then fail it, at every run. node-health
  # itself never starts a mount's probe again while the last one lives.
  local command="$FMCLUSTER_LIB/node-health --slurm" after=${SLURMD_UNITS:-slurmd.service}
  [[ "$HEALTH_RUNNER" != metrics ]] || { command="$FMCLUSTER_LIB/node-health"; after=kubelet.service; }
  cat >"$ROOT/etc/systemd/system/fmcluster-node-health.service" <<UNIT
[Unit]
Description=fmcluster node health check (drains a faulty node)
After=$after

[Service]
Type=oneshot
ExecStart=$command
KillMode=process
TimeoutStartSec=$((HEALTH_DCGM_TIMEOUT + 10 * HEALTH_COMMAND_TIMEOUT))
SuccessExitStatus=1 2
UNIT
  cat >"$ROOT/etc/systemd/system/fmcluster-node-health.timer" <<UNIT
[Unit]
Description=fmcluster node health check every ${HEALTH_CHECK_SECONDS}s

[Timer]
OnActiveSec=${HEALTH_CHECK_SECONDS}s
OnUnitActiveSec=${HEALTH_CHECK_SECONDS}s
AccuracySec=5s

[Install]
WantedBy=timers.target
UNIT
  systemctl daemon-reload
  systemctl enable --now fmcluster-node-health.timer
  log "node health: checked every ${HEALTH_CHECK_SECONDS}s (fmcluster-node-health.timer)"
}
