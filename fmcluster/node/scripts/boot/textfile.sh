# shellcheck shell=bash
# The node's expected GPU count as the textfile metric fmcluster_expected_gpus (the instance
# catalog's; the alert GpuMissing compares it with the GPUs DCGM sees), in TEXTFILE_DIR, which the
# node exporter's textfile collector reads (on Kubernetes through a hostPath mount). The scraper
# adds the labels `cluster` and `node`, as on every series.

write_expected_gpus() {
  install -d -m 0755 "$ROOT$TEXTFILE_DIR"
  {
    printf '# HELP fmcluster_expected_gpus GPUs of this instance type (fmcluster instance catalog)\n'
    printf '# TYPE fmcluster_expected_gpus gauge\nfmcluster_expected_gpus %s\n' "$EXPECTED_GPUS"
  } >"$ROOT$TEXTFILE_DIR/fmcluster.prom.tmp"
  mv "$ROOT$TEXTFILE_DIR/fmcluster.prom.tmp" "$ROOT$TEXTFILE_DIR/fmcluster.prom"
}
