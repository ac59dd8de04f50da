# shellcheck shell=bash
# LNet over EFA for an EFA-enabled FSx for Lustre file system (FSx for Lustre User Guide,
# "Configuring EFA clients"; Amazon EKS User Guide, "Optimize Amazon FSx for Lustre performance on
# nodes (EFA)"). A client that mounts over plain TCP reaches each file server at TCP rates; with
# LNet on EFA interfaces the bulk data moves over EFA (and GPUDirect Storage becomes possible).
#
# The configuration is a program of its own (bootstrap/programs/lnet-efa.sh, embedded as
# program_lnet_efa), run by the unit fmcluster-lnet-efa.service on every boot before any Lustre mount
# (Before=remote-fs-pre.target, and the fstab line requires it), with LNET_EFA_INTERFACES (from
# the instance catalog) as its argument. LNet's configuration does not survive a reboot.

setup_lnet_efa() {
  install -d -m 0755 "$ROOT$FMCLUSTER_LIB" "$ROOT/etc/systemd/system"
  program_lnet_efa >"$ROOT$FMCLUSTER_LIB/lnet-efa"
  chmod 0755 "$ROOT$FMCLUSTER_LIB/lnet-efa"
  cat >"$ROOT/etc/systemd/system/fmcluster-lnet-efa.service" <<UNIT
[Unit]
Description=fmcluster: LNet over EFA for FSx for Lustre
After=network-online.target
Wants=network-online.target
Before=remote-fs-pre.target
Wants=remote-fs-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=$FMCLUSTER_LIB/lnet-efa $LNET_EFA_INTERFACES

[Install]
WantedBy=remote-fs.target
UNIT
  systemctl daemon-reload
  systemctl enable fmcluster-lnet-efa.service
  systemctl start fmcluster-lnet-efa.service
}
