# shellcheck shell=bash
# The exporters' packages: everything comes from the Ubuntu archive (universe) of the node's
# release (VERSION_CODENAME of /etc/os-release), pinned to a version series; no download from
# anywhere else. The image bake installs them (bake.sh), the boot only checks them (metrics.sh):
#   noble (24.04, the AWS PCS AMI):
#     prometheus-node-exporter 1.7.0-1ubuntu0.3 in noble-updates/noble-security (upstream 1.7.0)
#     prometheus               2.45.3+ds-2ubuntu0.3 (upstream 2.45.3 LTS), run as an agent
#                              (--enable-feature=agent: scrape and remote-write, no local TSDB)
#   jammy (22.04, the SageMaker HyperPod AMI):
#     prometheus-node-exporter 1.3.1-1ubuntu0.22.04 (upstream 1.3.1)
#     prometheus               2.31.2+ds1-1ubuntu1.22.04 (upstream 2.31.2): agent mode came with
#                              2.32, so it runs as a server keeping two hours of samples
# Another release fails the bake and the boot (no unpinned install). Raise these with the archive
# (apt-cache policy PACKAGE on a node shows what it offers); a change is a new image.
# shellcheck disable=SC2034  # the tables are read by bake.sh and metrics.sh
declare -A NODE_EXPORTER_VERSIONS=([noble]='1.7.0-1*' [jammy]='1.3.1-1*')
declare -A PROMETHEUS_VERSIONS=([noble]='2.45.3+ds-2*' [jammy]='2.31.2+ds1-1*')
# shellcheck disable=SC2034
declare -A PROMETHEUS_AGENT_MODE=([noble]=yes [jammy]=no)

# ubuntu_release: the VERSION_CODENAME of OS_RELEASE (noble, jammy).
ubuntu_release() {
  sed -n 's/^VERSION_CODENAME=//p' "$ROOT$OS_RELEASE" | tr -d '"'
}

# exporters_pinned RELEASE: whether the release has pinned exporter packages (logs which do).
exporters_pinned() {
  if [[ -z "${PROMETHEUS_VERSIONS[${1:-none}]:-}" ]]; then
    log "error: no pinned exporter packages for the Ubuntu release '$1' (pinned: ${!PROMETHEUS_VERSIONS[*]})"
    return 1
  fi
}
