# shellcheck shell=bash
# The cluster's Slurm prolog (fmcluster/slurm/imex-prolog.sh, embedded as program_imex_prolog) at
# IMEX_PROLOG: slurmd runs it on every node of each allocation (Prolog=, PrologFlags=Alloc), so
# every compute node of the cluster gets it, before slurmd may start. A node without it would fail
# every job's prolog and be drained: a second drop-in keeps slurmd down until the prolog is there
# and runs (`imex-prolog --check`, with the readiness gate's restart policy, gate-slurmd.sh).
# Written before any step that can fail.

install_slurm_prolog() {
  install -d -m 0755 "$ROOT${IMEX_PROLOG%/*}" "$ROOT/etc/systemd/system/slurmd.service.d"
  cat >"$ROOT/etc/systemd/system/slurmd.service.d/40-fmcluster-prolog.conf" <<UNIT
[Service]
ExecStartPre=$IMEX_PROLOG --check
UNIT
  program_imex_prolog >"$ROOT$IMEX_PROLOG.tmp" &&
    chmod 0755 "$ROOT$IMEX_PROLOG.tmp" &&
    mv "$ROOT$IMEX_PROLOG.tmp" "$ROOT$IMEX_PROLOG" &&
    log "Slurm prolog installed at $IMEX_PROLOG"
}
