# shellcheck shell=bash
# Hooks: every *.sh file in HOOKS_DIR (a folder next to this script, shipped in the same S3
# prefix), in lexical order, run with bash once the node is set up. The observability exporters
# (node, DCGM, EFA) install themselves through a hook such as hooks.d/50-exporters.sh. A failing
# hook fails the lifecycle script, and HyperPod reports the node as failed.

run_hooks() {
  local dir hook
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
    log "running hook ${hook##*/}"
    bash "$hook"
  done
}
