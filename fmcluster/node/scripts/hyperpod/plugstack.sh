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
  explicit_includes "$conf"
  grep -qxF "$include" "$conf" || echo "$include" >>"$conf"
  if ((SLURM_CONTROLLER)) && systemctl is-active --quiet slurmctld.service; then
    if ! PATH=$PATH:$SLURM_PREFIX/bin scontrol reconfigure; then
      log "warning: scontrol reconfigure failed; restarting slurmctld"
      systemctl restart slurmctld.service
    fi
    resume_plugstack_drained
  fi
  log "Pyxis registered in $PLUGSTACK_CONF ($include)"
}

# explicit_includes CONF: each wildcard include of CONF replaced by an include of every file it
# matches now, the wildcard kept as a comment (as AWS's slurm_fix_plugstackconf.sh does): slurmd
# expands a wildcard itself, so dropping it would drop the other plugins it loads.
explicit_includes() {
  local line file
  while IFS= read -r line; do
    for file in $ROOT${line#include }; do
      [[ -e "$file" ]] || continue
      file="include ${file#"$ROOT"}"
      grep -qxF "$file" "$1" || echo "$file" >>"$1"
    done
    sed -i "\\#^${line//\*/\\*}\$#s/^/# fmcluster: explicit includes below: /" "$1"
  done < <(grep -E '^include [^ ]*[*?[]' "$1")
}

# resume_plugstack_drained: the compute nodes that checked slurmd's plugstack.conf before this
# controller registered Pyxis were drained for that alone (node-ready's containers-plugstack
# reason); the reconfigure has now sent them the new file, so they are resumed. A node drained for
# anything else as well stays drained.
resume_plugstack_drained() {
  local node reason
  PATH=$PATH:$SLURM_PREFIX/bin scontrol -o show nodes 2>/dev/null |
    sed -n 's/^NodeName=\([^ ]*\) .*Reason=\(.*\) \[.*$/\1\t\2/p' |
    while IFS=$'\t' read -r node reason; do
      if [[ "$reason" == "fmcluster node-ready: slurmd's plugstack.conf does not load Pyxis"* && "$reason" != *";"* ]]; then
        PATH=$PATH:$SLURM_PREFIX/bin scontrol update nodename="$node" state=resume &&
          log "resumed $node: slurmd now has the plugstack.conf that loads Pyxis"
      fi
    done
}
