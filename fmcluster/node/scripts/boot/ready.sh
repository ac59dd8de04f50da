# shellcheck shell=bash
# The readiness check (bootstrap/programs/node-ready.sh, embedded as program_node_ready) and
# its settings: every GPU of the instance type visible (EXPECTED_GPUS), REQUIRED_MOUNTS mounted,
# LNet over EFA where the file system uses it (LNET_EFA), the container runtime where the node has
# one (READY_ENROOT_VERSION and the Pyxis plugin, containers.sh; empty: none), nvidia-imex.service
# enabled on UltraServer Slurm nodes (READY_IMEX, prolog.sh), the AWS CLI where capacity-end reads
# the end with it (READY_AWS_CLI, capacity-end.sh); with DEEP_CHECK=1, the deep check
# (programs/deep-check.sh, embedded as program_deep_check) once per instance. The control plane's gate (gate-*.sh)
# decides what a node that is not ready does: it never takes a job.

install_node_ready() {
  install -d -m 0755 "$ROOT$FMCLUSTER_LIB" "$ROOT$FMCLUSTER_ETC"
  program_node_ready >"$ROOT$FMCLUSTER_LIB/node-ready"
  chmod 0755 "$ROOT$FMCLUSTER_LIB/node-ready"
  {
    printf '# fmcluster node-ready settings (fmcluster.node.bootstrap), for %s nodes\n' "$INSTANCE_TYPE"
    printf 'EXPECTED_GPUS=%s\n' "$EXPECTED_GPUS"
    printf 'REQUIRED_MOUNTS=%q\n' "$REQUIRED_MOUNTS"
    printf 'LNET_EFA=%s\n' "$LNET_EFA"
    printf 'READY_WAIT_SECONDS=%s\n' "$READY_WAIT_SECONDS"
    printf 'TEXTFILE_DIR=%q\n' "$TEXTFILE_DIR"
    printf 'ENROOT_VERSION=%q\n' "$READY_ENROOT_VERSION"
    printf 'PYXIS_PLUGIN=%q\n' "$READY_PYXIS_PLUGIN"
    printf 'PYXIS_CONF=%q\n' "$READY_PYXIS_CONF"
    printf 'SLURMD_PLUGSTACK=%q\n' "$READY_PLUGSTACK"
    printf 'ENROOT_DIRS=%q\n' "$READY_ENROOT_DIRS"
    printf 'IMEX=%s\n' "$READY_IMEX"
    printf 'AWS_CLI=%s\n' "${READY_AWS_CLI:-0}"
    if ((${DEEP_CHECK:-0})); then
      printf 'DEEP_CHECK=1\n'
      printf 'DEEP_CHECK_PROGRAM=%q\n' "$FMCLUSTER_LIB/deep-check"
      printf 'FMCLUSTER_LIB=%q\n' "$FMCLUSTER_LIB"
      printf 'DEEP_CHECK_SECONDS=%s\n' "$DEEP_CHECK_SECONDS"
      printf 'DEEP_DCGM_LEVEL=%s\n' "$DEEP_DCGM_LEVEL"
      printf 'DCGM_SECONDS=%s\n' "$DEEP_DCGM_SECONDS"
      printf 'NCCL_SECONDS=%s\n' "$DEEP_NCCL_SECONDS"
      printf 'NCCL_TESTS=%q\n' "$DEEP_NCCL_TESTS"
      printf 'MPIRUN=%q\n' "$DEEP_MPIRUN"
      printf 'NCCL_BUSBW_FLOOR=%s\n' "$DEEP_NCCL_BUSBW_FLOOR"
      printf 'DEEP_CHECK_MARKER=%q\n' "$DEEP_CHECK_MARKER"
      printf 'DEEP_CHECK_LOG=%q\n' "$DEEP_CHECK_LOG"
    fi
  } >"$ROOT$FMCLUSTER_ETC/node-ready.env"
  if ((${DEEP_CHECK:-0})); then
    program_deep_check >"$ROOT$FMCLUSTER_LIB/deep-check"
    chmod 0755 "$ROOT$FMCLUSTER_LIB/deep-check"
  fi
}

# node_ready: run the check now; its reasons (one "SLUG TEXT" a line) in NOT_READY.
NOT_READY=()
node_ready() {
  local out rc=0
  out=$("$ROOT$FMCLUSTER_LIB/node-ready") || rc=$?
  mapfile -t NOT_READY < <(printf '%s' "$out")
  if ((rc == 0)); then
    log "node ready: $INSTANCE_TYPE, every check passed"
  else
    log "node NOT ready: ${NOT_READY[*]#* }"
  fi
  return "$rc"
}
