# shellcheck shell=bash
# The cluster's Slurm prolog (fmcluster/node/scripts/slurm/imex-prolog.sh on UltraServer nodes, no-imex-prolog.sh
# on the others; embedded as program_imex_prolog) at IMEX_PROLOG: slurmd runs it on every node of
# each allocation (Prolog=, PrologFlags=Alloc), so every compute node of the cluster gets it,
# before slurmd may start. A node without it would fail every job's prolog and be drained: a
# second drop-in keeps slurmd down until the prolog is there and runs (`imex-prolog --check`, with
# the readiness gate's restart policy, gate-slurmd.sh).
# Written before any step that can fail.

install_slurm_prolog() {
  install -d -m 0755 "$ROOT${IMEX_PROLOG%/*}"
  slurmd_dropin 40-fmcluster-prolog.conf <<UNIT
[Service]
ExecStartPre=$IMEX_PROLOG --check
UNIT
  program_imex_prolog >"$ROOT$IMEX_PROLOG.tmp" &&
    chmod 0755 "$ROOT$IMEX_PROLOG.tmp" &&
    mv "$ROOT$IMEX_PROLOG.tmp" "$ROOT$IMEX_PROLOG" &&
    log "Slurm prolog installed at $IMEX_PROLOG"
}

# UltraServer nodes: nvidia-imex.service enabled, as the AWS PCS User Guide requires of the AMI
# and AWS ParallelCluster does on GB200 compute nodes (aws-parallelcluster-cookbook, nvidia_imex
# :configure). Not started here: the prolog writes each job's nodes_config.cfg and starts the
# daemon with the job's nodes only. node-ready fails while it is not enabled (ready.sh, READY_IMEX).
enable_imex() {
  systemctl enable nvidia-imex.service && log "nvidia-imex.service enabled"
}
