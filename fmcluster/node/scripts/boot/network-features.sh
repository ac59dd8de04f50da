# shellcheck shell=bash
# The node's place in EC2's network as Slurm node features (bootstrap/programs/network-features.sh,
# embedded as program_network_features), for the GPU nodes of a multi-node EFA group on AWS PCS:
# PCS takes no TopologyPlugin setting, so jobs ask for one network node with a constraint instead
# (the kit's placement.sh). Run by fmcluster-network-features.service at every boot, after slurmd:
# Slurm forgets features set with scontrol when the node is powered down and up again. Not waited
# for here (slurmd may only register after this script): the program tries again, bounded.

setup_network_features() {
  install -d -m 0755 "$ROOT$FMCLUSTER_LIB" "$ROOT$FMCLUSTER_ETC" "$ROOT/etc/systemd/system"
  program_network_features >"$ROOT$FMCLUSTER_LIB/network-features"
  chmod 0755 "$ROOT$FMCLUSTER_LIB/network-features"
  {
    printf '# fmcluster network-features settings (fmcluster.node.bootstrap)\n'
    printf 'SLURM_BIN=%q\n' "$NETWORK_FEATURES_SLURM_BIN"
    printf 'ATTEMPTS=%s\n' "$NETWORK_FEATURES_ATTEMPTS"
    printf 'RETRY_SECONDS=%s\n' "$NETWORK_FEATURES_RETRY_SECONDS"
  } >"$ROOT$FMCLUSTER_ETC/network-features.env"
  cat >"$ROOT/etc/systemd/system/fmcluster-network-features.service" <<UNIT
[Unit]
Description=fmcluster: this node's place in EC2's network as Slurm node features
After=network-online.target slurmd.service
Wants=network-online.target

[Service]
Type=oneshot
ExecStart=$FMCLUSTER_LIB/network-features
TimeoutStartSec=$((NETWORK_FEATURES_ATTEMPTS * (NETWORK_FEATURES_RETRY_SECONDS + 30)))

[Install]
WantedBy=multi-user.target
UNIT
  systemctl daemon-reload
  systemctl enable fmcluster-network-features.service
  systemctl start --no-block fmcluster-network-features.service
  log "Slurm node features from EC2's instance topology: fmcluster-network-features.service"
}
