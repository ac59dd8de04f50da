# shellcheck shell=bash
# SageMaker HyperPod Slurm: HyperPod starts slurmd itself. A compute node that is not ready is
# drained with the reasons (`sinfo -R` shows them), so it takes no job; the lifecycle script goes
# on (a failing script fails the whole cluster's creation). Resume it with
# `scontrol update nodename=NODE state=resume` once fixed, or replace it with reason
# "Action:Replace".

gate_drain() {
  if node_ready; then
    return 0
  fi
  local node reason
  node=$(hostname -s)
  reason="fmcluster node-ready: $(printf '%s; ' "${NOT_READY[@]#* }")"
  # HyperPod installs Slurm under /opt/slurm.
  if PATH=$PATH:/opt/slurm/bin scontrol update nodename="$node" state=drain reason="${reason%; }"; then
    log "drained $node: ${reason%; }"
  else
    log "error: could not drain $node (${reason%; }): drain it by hand"
  fi
}
