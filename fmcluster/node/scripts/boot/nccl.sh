# shellcheck shell=bash
# EFA / NCCL environment for the jobs on this node. The content (NCCL_ENV) is rendered from
# the instance catalog by fmcluster.node.bootstrap.nccl_environment.

write_nccl_env() {
  install -d -m 0755 "$ROOT${NCCL_ENV_FILE%/*}"
  printf '%s\n' "$NCCL_ENV" >"$ROOT$NCCL_ENV_FILE"
  chmod 0644 "$ROOT$NCCL_ENV_FILE"
  log "wrote $NCCL_ENV_FILE"
}
