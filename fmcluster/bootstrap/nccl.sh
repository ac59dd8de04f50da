# shellcheck shell=bash
# EFA / NCCL environment for the jobs on this node. The content (NCCL_ENV) is rendered from
# the instance catalog by fmcluster.bootstrap.nccl_environment.

write_nccl_env() {
  printf '%s\n' "$NCCL_ENV" >"$NCCL_ENV_FILE"
  chmod 0644 "$NCCL_ENV_FILE"
  log "wrote $NCCL_ENV_FILE"
}
