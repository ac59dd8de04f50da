# shellcheck shell=bash
# The node's place in EC2's network as Slurm node features (bootstrap/programs/network-features.sh,
# embedded as program_network_features, with the slurm-node.sh it sources), for the GPU nodes of a
# multi-node EFA group on AWS PCS: PCS takes no TopologyPlugin setting, so jobs ask for one network
# node with a constraint instead (the kit's placement.sh).
# - clear_network_features, before slurmd starts, at every boot: an earlier instance's features
#   leave the Slurm node before the node can take a job (AWS PCS replaces an instance under the
#   same node name, and a stop and start moves an instance).
# - setup_network_features: fmcluster-network-features.service sets them at every boot, after
#   slurmd, with Slurm's commands' directory, the attempts and the seconds between them as
#   arguments. Not waited for here (slurmd may only register after this script): the program tries
#   again, bounded. fmcluster-network-features-restore.timer runs `--restore` every
#   NETWORK_FEATURES_WATCH_SECONDS: slurmctld forgets features set with scontrol when it restarts
#   or is reconfigured, and they are back within those seconds of slurmctld answering again.

install_network_features() {
  install -d -m 0755 "$ROOT$FMCLUSTER_LIB" "$ROOT/etc/systemd/system"
  program_network_features >"$ROOT$FMCLUSTER_LIB/network-features"
  program_slurm_node >"$ROOT$FMCLUSTER_LIB/slurm-node.sh"
  chmod 0755 "$ROOT$FMCLUSTER_LIB/network-features"
}

clear_network_features() {
  install_network_features
  "$ROOT$FMCLUSTER_LIB/network-features" --clear "$NETWORK_FEATURES_SLURM_BIN"
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
ExecStart=$FMCLUSTER_LIB/network-features $NETWORK_FEATURES_SLURM_BIN $NETWORK_FEATURES_ATTEMPTS $NETWORK_FEATURES_RETRY_SECONDS
TimeoutStartSec=$((NETWORK_FEATURES_ATTEMPTS * (NETWORK_FEATURES_RETRY_SECONDS + 30)))

[Install]
WantedBy=multi-user.target
UNIT
  cat >"$ROOT/etc/systemd/system/fmcluster-network-features-restore.service" <<UNIT
[Unit]
Description=fmcluster: EC2 network nodes as Slurm node features, set again when Slurm lost them
After=fmcluster-network-features.service

[Service]
Type=oneshot
ExecStart=$FMCLUSTER_LIB/network-features --restore $NETWORK_FEATURES_SLURM_BIN
TimeoutStartSec=60
UNIT
  cat >"$ROOT/etc/systemd/system/fmcluster-network-features-restore.timer" <<UNIT
[Unit]
Description=fmcluster: Slurm node features checked every ${NETWORK_FEATURES_WATCH_SECONDS}s

[Timer]
OnActiveSec=${NETWORK_FEATURES_WATCH_SECONDS}s
OnUnitInactiveSec=${NETWORK_FEATURES_WATCH_SECONDS}s
AccuracySec=1s

[Install]
WantedBy=timers.target
UNIT
  rm -f "$ROOT/etc/systemd/system/fmcluster-network-features.timer"  # the 5-minute timer of earlier releases
  systemctl daemon-reload
  systemctl enable fmcluster-network-features.service fmcluster-network-features-restore.timer
  systemctl start --no-block fmcluster-network-features.service fmcluster-network-features-restore.timer
}
