# shellcheck shell=bash
# Running jobs are never killed by package upgrades (Ubuntu nodes). unattended-upgrades runs
# needrestart after each upgrade, and needrestart restarts the services whose libraries changed:
# slurmd among them, which ends every job step on the node (slurmstepd runs in slurmd's unit).
# So on this node:
# - needrestart only lists what would need a restart ($nrconf{restart} = 'l'), and never restarts
#   slurmd, the NVIDIA daemons (persistenced, fabric manager, IMEX, DCGM) or EFA services even
#   when run by hand (override_rc);
# - unattended-upgrades leaves alone the packages a running job depends on: the NVIDIA driver,
#   CUDA, NCCL and DCGM, the EFA stack (efa, libfabric, rdma-core), the Lustre client and the
#   kernel (whose Lustre, EFA and NVIDIA modules must match it). Security updates of everything
#   else still install. These change with a new AMI (ami_id, or the AMI parameter the node group
#   resolves) and a node replacement, not in place under a running job.
# Nothing to do where apt is not the package manager (Amazon Linux nodes have no unattended
# upgrades).

protect_running_jobs() {
  if [[ ! -d "$ROOT/etc/apt/apt.conf.d" ]]; then
    log "no apt on this node: no unattended upgrades to restrain"
    return 0
  fi
  install -d -m 0755 "$ROOT/etc/needrestart/conf.d"
  cat >"$ROOT/etc/needrestart/conf.d/50-fmcluster.conf" <<'CONF'
$nrconf{restart} = 'l';
$nrconf{override_rc}{qr(^slurm)} = 0;
$nrconf{override_rc}{qr(^nvidia)} = 0;
$nrconf{override_rc}{qr(^nv-)} = 0;
$nrconf{override_rc}{qr(^dcgm)} = 0;
$nrconf{override_rc}{qr(^efa)} = 0;
CONF
  cat >"$ROOT/etc/apt/apt.conf.d/51fmcluster-unattended-upgrades" <<'CONF'
Unattended-Upgrade::Package-Blacklist {
    "nvidia-";
    "libnvidia-";
    "cuda-";
    "libcudnn";
    "libnccl";
    "datacenter-gpu-manager";
    "efa";
    "libfabric";
    "rdma-core";
    "ibverbs-providers";
    "libibverbs";
    "lustre-";
    "linux-";
};
Unattended-Upgrade::Automatic-Reboot "false";
CONF
  log "unattended upgrades: no service restarts, no NVIDIA, EFA, Lustre or kernel packages"
}
