# shellcheck shell=bash
# Amazon EKS (AL2023): the user data runs before nodeadm starts kubelet (nodeadm-run.service is
# ordered after cloud-final.service) and nodeadm merges the NodeConfig files of /etc/eks/nodeadm.d
# after the user data's. A node that is not ready registers with the taint
# fmcluster.dev/not-ready=REASONS:NoSchedule besides the node group's own taints
# (REGISTER_TAINTS: kubelet's --register-with-taints keeps only its last value), so no pod that
# does not tolerate it (no job) is scheduled there; the exporters tolerate it, so the node's
# metrics still show why.

gate_kubelet() {
  if node_ready; then
    return 0
  fi
  local slugs reason
  slugs=$(printf '%s\n' "${NOT_READY[@]%% *}" | paste -sd. -)
  reason=${slugs:0:63}
  reason=${reason%[.-]}
  install -d -m 0755 "$ROOT/etc/eks/nodeadm.d"
  cat >"$ROOT/etc/eks/nodeadm.d/90-fmcluster-not-ready.yaml" <<YAML
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    flags:
      - --register-with-taints=${REGISTER_TAINTS:+$REGISTER_TAINTS,}$NOT_READY_TAINT=$reason:NoSchedule
YAML
  log "kubelet registers this node with the taint $NOT_READY_TAINT=$reason:NoSchedule"
}
