# shellcheck shell=bash
# The node's place in EC2's network as Slurm node features (bootstrap/programs/network-features.sh,
# embedded as program_network_features, with the slurm-node.sh it sources), for the GPU nodes of a
# multi-node EFA group on AWS PCS: PCS takes no TopologyPlugin setting, so jobs ask for one network
# node with a constraint instead (the kit's placement.sh).
# - clear_network_features, before slurmd first starts: a drop-in of slurmd's unit (slurmd_dropin:
#   each name it may have) whose ExecStartPost= runs `network-features --clear` at every start of
#   slurmd, bounded by NETWORK_FEATURES_CLEAR_SECONDS and never failing slurmd (`-`): an earlier
#   instance's features leave the Slurm node as soon as slurmd has registered (AWS PCS replaces an
#   instance under the same node name, and a stop and start moves an instance). Not before slurmd:
#   with auth/slurm a client gets its credential only from a local SACK socket, which slurmd serves
#   on a compute node, and PCS runs configless (no slurm.conf before slurmd fetched it), so every
#   scontrol fails until slurmd runs.
# - setup_network_features: fmcluster-network-features.service sets them at every boot, after
#   slurmd, with Slurm's commands' directory, the attempts and the seconds between them as
#   arguments, and stays active (RemainAfterExit=) so that its stop, before slurmd's when the
#   instance shuts down, removes them (`--leave`, bounded, never failing the shutdown): a job is
#   never placed by the features of an instance that is gone, where it went away cleanly. Not waited for here (slurmd may only register after this script): the program tries
#   again, bounded. slurmctld forgets features set with scontrol when it restarts or is
#   reconfigured: fmcluster-network-features-restore.service (`--restore`: one `scontrol show node`
#   under the node name cached for the boot) runs when configless slurmd rewrites
#   /run/slurm/conf/slurm.conf (a reconfigure: fmcluster-network-features-restore.path) and, as a
#   slow backstop (a slurmctld restart), every NETWORK_FEATURES_RESTORE_SECONDS plus up to
#   NETWORK_FEATURES_RESTORE_SPREAD_SECONDS at random, so that a thousand nodes do not ask slurmctld
#   at once. Their journal keeps notices only (LogLevelMax=notice): what was set again, not each run.

install_network_features() {
  install -d -m 0755 "$ROOT$FMCLUSTER_LIB" "$ROOT/etc/systemd/system"
  program_network_features >"$ROOT$FMCLUSTER_LIB/network-features"
  program_slurm_node >"$ROOT$FMCLUSTER_LIB/slurm-node.sh"
  chmod 0755 "$ROOT$FMCLUSTER_LIB/network-features"
}

clear_network_features() {
  install_network_features
  # its start's bound grows by the clear's: slurmd's start (the gate's ExecStartPre=, its own start,
  # then this) stays within one TimeoutStartSec (gate-slurmd.sh's, with the clear's added)
  slurmd_dropin 60-fmcluster-network-features.conf <<UNIT
[Service]
TimeoutStartSec=$((${READY_WAIT_SECONDS:-0} + ${DEEP_CHECK_SECONDS:-0} + 60 + NETWORK_FEATURES_CLEAR_SECONDS))
ExecStartPost=-/usr/bin/timeout $NETWORK_FEATURES_CLEAR_SECONDS /usr/bin/env FMCLUSTER_LIB=$FMCLUSTER_LIB $FMCLUSTER_LIB/network-features --clear $NETWORK_FEATURES_SLURM_BIN $((NETWORK_FEATURES_CLEAR_SECONDS / NETWORK_FEATURES_CLEAR_RETRY_SECONDS)) $NETWORK_FEATURES_CLEAR_RETRY_SECONDS
UNIT
  systemctl daemon-reload
}

setup_network_features() {
  install_network_features
  cat >"$ROOT/etc/systemd/system/fmcluster-network-features.service" <<UNIT
[Unit]
Description=fmcluster: EC2 network nodes as Slurm node features
After=network-online.target ${SLURMD_UNITS:-slurmd.service}
Wants=network-online.target

[Service]
Type=oneshot
Environment=FMCLUSTER_LIB=$FMCLUSTER_LIB
ExecStart=$FMCLUSTER_LIB/network-features $NETWORK_FEATURES_SLURM_BIN $NETWORK_FEATURES_ATTEMPTS $NETWORK_FEATURES_RETRY_SECONDS
TimeoutStartSec=$((NETWORK_FEATURES_ATTEMPTS * (NETWORK_FEATURES_RETRY_SECONDS + 30)))
RemainAfterExit=yes
ExecStop=-/usr/bin/timeout $NETWORK_FEATURES_LEAVE_SECONDS $FMCLUSTER_LIB/network-features --leave $NETWORK_FEATURES_SLURM_BIN 3 5
TimeoutStopSec=$((NETWORK_FEATURES_LEAVE_SECONDS + 15))

[Install]
WantedBy=multi-user.target
UNIT
  cat >"$ROOT/etc/systemd/system/fmcluster-network-features-restore.service" <<UNIT
[Unit]
Description=fmcluster: EC2 network nodes as Slurm node features, set again when Slurm lost them
After=fmcluster-network-features.service

[Service]
Type=oneshot
Environment=FMCLUSTER_LIB=$FMCLUSTER_LIB
ExecStart=$FMCLUSTER_LIB/network-features --restore $NETWORK_FEATURES_SLURM_BIN
TimeoutStartSec=60
LogLevelMax=notice
UNIT
  cat >"$ROOT/etc/systemd/system/fmcluster-network-features-restore.timer" <<UNIT
[Unit]
Description=fmcluster: Slurm node features checked every ${NETWORK_FEATURES_RESTORE_SECONDS}s or so

[Timer]
OnActiveSec=${NETWORK_FEATURES_RESTORE_SECONDS}s
OnUnitInactiveSec=${NETWORK_FEATURES_RESTORE_SECONDS}s
RandomizedDelaySec=${NETWORK_FEATURES_RESTORE_SPREAD_SECONDS}s

[Install]
WantedBy=timers.target
UNIT
  cat >"$ROOT/etc/systemd/system/fmcluster-network-features-restore.path" <<UNIT
[Unit]
Description=fmcluster: Slurm node features checked when slurmd gets a new configuration

[Path]
PathChanged=/run/slurm/conf/slurm.conf
Unit=fmcluster-network-features-restore.service

[Install]
WantedBy=paths.target
UNIT
  rm -f "$ROOT/etc/systemd/system/fmcluster-network-features.timer"  # the 5-minute timer of earlier releases
  systemctl daemon-reload
  systemctl enable fmcluster-network-features.service fmcluster-network-features-restore.timer \
    fmcluster-network-features-restore.path
  systemctl start --no-block fmcluster-network-features.service fmcluster-network-features-restore.timer \
    fmcluster-network-features-restore.path
}
