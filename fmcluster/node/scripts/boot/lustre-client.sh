# shellcheck shell=bash
# The FSx for Lustre client on Amazon EKS's Amazon Linux images, which do not ship it, before LNet
# over EFA is configured (lnet.sh): installed from the distribution's own repository (the Amazon
# EKS User Guide, "Optimize Amazon FSx for Lustre performance on nodes (EFA)"), once; the package
# stays on the node. The Slurm planes' nodes never run this: their images have the client.

install_lustre_client() {
  local attempt
  if modinfo kefalnd >/dev/null 2>&1; then
    return 0
  fi
  if ! command -v dnf >/dev/null 2>&1; then
    log "error: no Lustre client with the EFA LNet driver (kefalnd), and no dnf to install it"
    return 1
  fi
  for ((attempt = 1; attempt <= LUSTRE_CLIENT_ATTEMPTS; attempt++)); do
    if dnf install -y -q lustre-client; then
      return 0
    fi
    log "dnf install lustre-client failed (attempt $attempt of $LUSTRE_CLIENT_ATTEMPTS)"
    sleep 10
  done
  log "error: dnf install lustre-client failed $LUSTRE_CLIENT_ATTEMPTS times"
  return 1
}
