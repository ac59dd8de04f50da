# shellcheck shell=bash
# fmcluster: the Slurm name of this node, for the node programs that source it (node-health,
# network-features): installed beside them as FMCLUSTER_LIB/slurm-node.sh and sourced from there
# (FMCLUSTER_LIB: node-health.env's, the network-features units' environment), not from the
# directory of the running copy. They call Slurm's `scontrol` their own way (a function under
# `timeout`, or Slurm's bin directory on PATH); network-features keeps the name for the boot.
#
# slurm_node: SLURMD_NODENAME (slurmd sets it for its HealthCheckProgram), else the node named as
# the host (`hostname -s`), else the node whose NodeHostName is this host (short, or its FQDN: AWS
# PCS names its nodes otherwise than their hosts); nothing when Slurm knows no such node.
slurm_node() {
  local host
  if [[ -n "${SLURMD_NODENAME:-}" ]]; then
    printf '%s\n' "$SLURMD_NODENAME"
    return
  fi
  host=$(hostname -s)
  if scontrol -o show node "$host" >/dev/null 2>&1; then
    printf '%s\n' "$host"
    return
  fi
  scontrol -o show node | awk -v h="$host" '{ n = ""; for (i = 1; i <= NF; i++) { if ($i ~ /^NodeName=/) n = substr($i, 10);
    if ($i == "NodeHostName=" h || index($i, "NodeHostName=" h ".") == 1) { print n; exit } } }'
}
