# shellcheck shell=bash
# Hooks: every *.sh file in HOOKS_DIR (a folder next to this script, shipped in the same S3
# prefix), in lexical order, run with bash. The observability exporters (node, DCGM, EFA) install
# themselves through a hook such as hooks.d/50-metrics.sh. A failing hook fails the lifecycle
# script, and HyperPod reports the node as failed (during cluster creation: the whole cluster),
# unless it is one of OPTIONAL_HOOKS (space-separated names): those only log a warning, since
# the node works without them (metrics: its absence shows on the dashboards).

run_hooks() {
  local dir hook name failed=0
  dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$HOOKS_DIR"
  if [[ ! -d "$dir" ]]; then
    log "no hooks: $dir does not exist"
    return 0
  fi
  export NODE_GROUP INSTANCE_TYPE NCCL_ENV_FILE
  for hook in "$dir"/*.sh; do
    if [[ ! -e "$hook" ]]; then
      continue
    fi
    name=${hook##*/}
    log "running hook $name"
    if bash "$hook"; then
      continue
    fi
    if [[ " $OPTIONAL_HOOKS " == *" $name "* ]]; then
      log "warning: optional hook $name failed; the node goes on without it"
    else
      log "error: hook $name failed"
      failed=1
    fi
  done
  return "$failed"
}
