# shellcheck shell=bash
# EC2's spot interruption notice (programs/interruption.sh, embedded as program_interruption, with
# the slurm-node.sh and slurm-jobs.sh it sources), on the compute nodes of a spot group: its
# settings file FMCLUSTER_ETC/interruption.env, and fmcluster-interruption.service, which looks for
# the notice every INTERRUPTION_POLL_SECONDS for as long as the node runs, from its first boot on
# (systemd starts it again should it end). Its journal keeps what it did.

install_interruption() {
  install -d -m 0755 "$ROOT$FMCLUSTER_LIB" "$ROOT$FMCLUSTER_ETC" "$ROOT/etc/systemd/system"
  program_interruption >"$ROOT$FMCLUSTER_LIB/interruption"
  program_slurm_node >"$ROOT$FMCLUSTER_LIB/slurm-node.sh"
  program_slurm_jobs >"$ROOT$FMCLUSTER_LIB/slurm-jobs.sh"
  chmod 0755 "$ROOT$FMCLUSTER_LIB/interruption"
  {
    printf '# fmcluster interruption settings, for %s nodes\n' "$INSTANCE_TYPE"
    printf 'SLURM_BIN=%q\n' "$INTERRUPTION_SLURM_BIN"
    printf 'SIGNAL=%q\n' "$INTERRUPTION_SIGNAL"
    printf 'POLL_SECONDS=%s\n' "$INTERRUPTION_POLL_SECONDS"
    printf 'BACKOFF_SECONDS=%s\n' "$INTERRUPTION_BACKOFF_SECONDS"
    printf 'TOKEN_SECONDS=%s\n' "$INTERRUPTION_TOKEN_SECONDS"
    printf 'STATE_DIR=%q\n' "$INTERRUPTION_STATE_DIR"
    printf 'FMCLUSTER_LIB=%q\n' "$FMCLUSTER_LIB"
  } >"$ROOT$FMCLUSTER_ETC/interruption.env"
  cat >"$ROOT/etc/systemd/system/fmcluster-interruption.service" <<UNIT
[Unit]
Description=fmcluster: EC2's spot interruption notice (the node drained, its jobs signalled)
After=network-online.target ${SLURMD_UNITS:-slurmd.service}
Wants=network-online.target

[Service]
Type=simple
ExecStart=$FMCLUSTER_LIB/interruption $FMCLUSTER_ETC/interruption.env
Restart=always
RestartSec=5s

[Install]
WantedBy=multi-user.target
UNIT
  systemctl daemon-reload
  systemctl enable --now fmcluster-interruption.service
  log "spot interruption notice: looked for every ${INTERRUPTION_POLL_SECONDS}s (fmcluster-interruption.service)"
}
