# shellcheck shell=bash
# SageMaker HyperPod Slurm: Pyxis registered where slurmd really reads it. HyperPod's slurmd runs
# configless: slurm.conf, plugstack.conf, gres.conf and cgroup.conf come from the controller
# (slurmctld sends them; slurmd keeps them in /var/spool/slurmd/conf-cache), so a compute node's
# own PLUGSTACK_CONF is never read, and only the controller's plugstack.conf can load a plugin.
#
# The controller's PLUGSTACK_CONF includes PLUGSTACK_DIR/pyxis.conf by name: slurmctld parses
# the include lines of the files it sends (to send relative includes with them) and cannot stat
# a wildcard (AWS's HyperPod lifecycle scripts, utils/slurm_fix_plugstackconf.sh: slurmctld hangs
# or reports the include missing). An absolute include is read on each node, so every node keeps
# pyxis.conf and the plugin itself (containers.sh on every group); a node without them skips the
# include. Every node writes the same line (as AWS's install_enroot_pyxis.sh does), harmless
# where its own file is not read, and drops the wildcard include an earlier fmcluster wrote.
#
# SLURM_CONTROLLER=1 (the controller group): `scontrol reconfigure` then makes slurmctld read it
# again and send the new plugstack.conf to every registered slurmd, whose conf-cache is updated
# (a compute node that restarted slurmd before the controller registered Pyxis gets it then; a
# slurmctld restart, what AWS's script does, would not reach the running slurmd). A reconfigure
# that fails falls back to a restart of slurmctld.

register_pyxis() {
  local include="include $PLUGSTACK_DIR/pyxis.conf" conf="$ROOT$PLUGSTACK_CONF"
  if [[ ! -e "$ROOT$PLUGSTACK_DIR/pyxis.conf" ]]; then
    log "error: $PLUGSTACK_DIR/pyxis.conf is missing: Pyxis is not registered in $PLUGSTACK_CONF"
    return 1
  fi
  touch "$conf"
  sed -i "\\#^include $PLUGSTACK_DIR/\\*#d" "$conf"
  grep -qxF "$include" "$conf" || echo "$include" >>"$conf"
  if ((SLURM_CONTROLLER)) && systemctl is-active --quiet slurmctld.service; then
    if ! PATH=$PATH:$SLURM_PREFIX/bin scontrol reconfigure; then
      log "warning: scontrol reconfigure failed; restarting slurmctld"
      systemctl restart slurmctld.service
    fi
  fi
  log "Pyxis registered in $PLUGSTACK_CONF ($include)"
}
