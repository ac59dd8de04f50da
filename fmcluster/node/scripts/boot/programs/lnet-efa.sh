#!/bin/bash
# fmcluster: LNet over EFA for an EFA-enabled FSx for Lustre file system, before it is mounted.
# Written by the node bootstrap to /usr/local/lib/fmcluster/lnet-efa and run by
# fmcluster-lnet-efa.service on every boot (LNet's configuration does not survive a reboot).
#
# Usage: lnet-efa INTERFACES
#
# What the FSx for Lustre User Guide ("Configuring EFA clients") and the Amazon EKS User Guide
# ("Optimize Amazon FSx for Lustre performance on nodes (EFA)") do, as a program that fails
# loudly instead of falling back to TCP:
# 1. a Lustre client with the EFA LNet driver (kefalnd): the node image's (the Ubuntu DLAMIs and
#    the Slurm planes' baked images ship one; on Amazon EKS's images the boot installs it first,
#    scripts/boot/lustre-client.sh);
# 2. the EFA kernel driver at MIN_EFA_DRIVER or later;
# 3. the modules lnet, kefalnd (on the primary interface) and ksocklnd, then LNet configured with
#    the tcp network on the primary interface and an efa network on INTERFACES EFA devices, spread
#    evenly over the node's EFA devices (on p5.48xlarge 8 of 32: one per PCIe switch, as the
#    guides do), with peer credits 32, discovery on, and a UDSP rule that prefers efa;
# 4. the lustre module. The mount itself (over @tcp: the servers' EFA addresses come from
#    discovery) is the fstab line's, which requires this program's unit.
# A node already configured (a rerun) is left as it is. Exit status 1 on any failure.
set -euo pipefail
ROOT=${FMCLUSTER_ROOT:-}
MIN_EFA_DRIVER=2.12.1
PEER_CREDITS=32

log() {
  printf 'fmcluster-lnet-efa: %s\n' "$*" >&2
}

fail() {
  log "error: $*"
  exit 1
}

efa_nids() {
  { lnetctl net show --net efa 2>/dev/null || true; } | grep -c '@efa' || true
}

ensure_lustre_client() {
  modinfo kefalnd >/dev/null 2>&1 ||
    fail "no Lustre client with the EFA LNet driver (kefalnd) on this node: its image needs the FSx for Lustre client for its kernel"
}

main() {
  local interfaces=${1:?usage: lnet-efa INTERFACES}
  if (($(efa_nids) > 0)); then
    log "LNet has $(efa_nids) EFA interface(s) already"
    return 0
  fi
  ensure_lustre_client
  local driver
  driver=$(modinfo -F version efa 2>/dev/null | tr -cd '0-9.') || true
  [[ -n "$driver" ]] || fail "no EFA kernel driver on this node"
  if [[ "$(printf '%s\n' "$MIN_EFA_DRIVER" "$driver" | sort -V | head -n1)" != "$MIN_EFA_DRIVER" ]]; then
    fail "EFA driver $driver is older than $MIN_EFA_DRIVER, which LNet over EFA needs"
  fi
  local primary
  primary=$(ip -o -4 route show default | awk '{ for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit } }')
  [[ -n "$primary" ]] || fail "no default route: cannot tell the primary interface"

  local -a devices=()
  local path
  for path in "$ROOT"/sys/class/infiniband/*; do
    if [[ -e "$path" ]]; then
      devices+=("${path##*/}")
    fi
  done
  local count=${#devices[@]}
  ((count > 0)) || fail "no EFA device in /sys/class/infiniband"
  ((interfaces <= count)) || interfaces=$count

  modprobe lnet
  modprobe kefalnd ipif_name="$primary"
  modprobe ksocklnd
  lnetctl lnet configure
  lnetctl net del --net tcp 2>/dev/null || true
  lnetctl net add --net tcp --if "$primary"
  local i
  for ((i = 0; i < interfaces; i++)); do
    lnetctl net add --net efa --if "${devices[i * count / interfaces]}" --peer-credits "$PEER_CREDITS"
  done
  lnetctl set discovery 1
  lnetctl udsp add --src efa --priority 0
  modprobe lustre
  local configured
  configured=$(efa_nids)
  ((configured == interfaces)) || fail "LNet shows $configured EFA interface(s), expected $interfaces"
  log "LNet over EFA on $interfaces of $count EFA devices (tcp on $primary)"
}

main "$@"
