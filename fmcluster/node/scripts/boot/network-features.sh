# shellcheck shell=bash
# The node's place in EC2's network as Slurm node features (bootstrap/programs/network-features.sh,
# embedded as program_network_features), for the GPU nodes of a multi-node EFA group on AWS PCS:
# PCS takes no TopologyPlugin setting, so jobs ask for one network node with a constraint instead
# (the kit's placement.sh). Run by fmcluster-network-features.service at every boot, after slurmd,
# and every NETWORK_FEATURES_CHECK_MINUTES by its timer (slurmctld forgets features set with
# scontrol when it restarts or is reconfigured), with Slurm's commands' directory, the attempts
# and the seconds between them as arguments. Not waited for here (slurmd may only register after
# this script): the program tries again, bounded.

setup_network_features() {
  install -d -m 0755 "$ROOT$FMCLUSTER_LIB" "$ROOT/etc/systemd/system"
  program_network_features >"$ROOT$FMCLUSTER_LIB/network-features"
  chmod 0755 "$ROOT$FMCLUSTER_LIB/network-features"
  cat >"$ROOT/etc/systemd/system/fmcluster-network-features.service" <<UNIT
[Unit]
Description=fmcluster: EC2 network nodes as Slurm node features
After=network-online.target slurmd.service
Wants=network-online.target

[Service]
Type=oneshot
ExecStart=$FMCLUSTER_LIB/network-features $NETWORK_FEATURES_SLURM_BIN $NETWORK_FEATURES_ATTEMPTS $NETWORK_FEATURES_RETRY_SECONDS
TimeoutStartSec=$((NETWORK_FEATURES_ATTEMPTS * (NETWORK_FEATURES_RETRY_SECONDS + 30)))

[Install]
WantedBy=multi-user.target
UNIT
  cat >"$ROOT/etc/systemd/system/fmcluster-network-features.timer" <<UNIT
[Unit]
Description=fmcluster: EC2 network nodes as Slurm node features, set again when Slurm lost them

[Timer]
OnUnitInactiveSec=${NETWORK_FEATURES_CHECK_MINUTES}min

[Install]
WantedBy=timers.target
UNIT
  systemctl daemon-reload
  systemctl enable fmcluster-network-features.service fmcluster-network-features.timer
  systemctl start --no-block fmcluster-network-features.service fmcluster-network-features.timer
}
