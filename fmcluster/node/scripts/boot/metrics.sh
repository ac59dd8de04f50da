# shellcheck shell=bash
# Metrics collection (NAME-observability): node exporter, textfile collectors and a Prometheus
# agent that remote-writes to the cluster's Amazon Managed Service for Prometheus workspace with
# SigV4 (the node role's aps:RemoteWrite on that workspace only).
#
# The node exporter and Prometheus are baked into the node's image at a version series pinned per
# Ubuntu release (fmcluster/node/scripts/image/exporters.sh, bake.sh); the boot installs nothing:
# it checks that both packages are installed at the pinned series (dpkg-query), and a node whose
# image lacks them fails this step (its metrics are missing, and the error says why).

# Scrape jobs (the alert rules' `job` label), each a node exporter on localhost: `node` is the
# packaged one (9100, every collector); `dcgm` (9400), `efa` (9109) and `slurm` (9341) serve only
# a textfile directory that a collector script refreshes every COLLECT_INTERVAL_SECONDS.
declare -A METRICS_PORTS=([node]=9100 [dcgm]=9400 [efa]=9109 [slurm]=9341)

# write_collector NAME: the collector script of job NAME (the function program_collect_NAME, its
# text embedded by fmcluster.node.bootstrap from scripts/boot/collectors/), its textfile exporter and
# its timer.
write_collector() {
  local name=$1 dir="$METRICS_STATE/textfile-$1"
  install -d -m 0755 "$ROOT$METRICS_LIB" "$ROOT$dir"
  "program_collect_$name" >"$ROOT$METRICS_LIB/collect-$name"
  chmod 0755 "$ROOT$METRICS_LIB/collect-$name"
  cat >"$ROOT$SYSTEMD_DIR/fmcluster-collect-$name.service" <<UNIT
[Unit]
Description=fmcluster $name metrics (textfile collector)

[Service]
Type=oneshot
Environment=STATE_DIR=$METRICS_STATE/state-$name COLLECT_INTERVAL_SECONDS=$COLLECT_INTERVAL_SECONDS
ExecStart=/bin/sh -c '$METRICS_LIB/collect-$name >$dir/$name.prom.tmp && mv $dir/$name.prom.tmp $dir/$name.prom'
UNIT
  cat >"$ROOT$SYSTEMD_DIR/fmcluster-collect-$name.timer" <<UNIT
[Unit]
Description=fmcluster $name metrics every ${COLLECT_INTERVAL_SECONDS}s

[Timer]
OnActiveSec=0
OnUnitActiveSec=${COLLECT_INTERVAL_SECONDS}s
AccuracySec=1s

[Install]
WantedBy=timers.target
UNIT
  cat >"$ROOT$SYSTEMD_DIR/fmcluster-exporter-$name.service" <<UNIT
[Unit]
Description=fmcluster $name metrics exporter (node exporter, textfile collector only)
After=network-online.target

[Service]
User=prometheus
ExecStart=/usr/bin/prometheus-node-exporter --web.listen-address=127.0.0.1:${METRICS_PORTS[$name]} --collector.disable-defaults --collector.textfile --collector.textfile.directory=$dir
Restart=always

[Install]
WantedBy=multi-user.target
UNIT
  METRICS_UNITS+=("fmcluster-collect-$name.timer" "fmcluster-exporter-$name.service")
  METRICS_JOBS+=("$name")
}

# The agent's configuration: one static target per job, every series labelled cluster and node.
prometheus_agent_config() {
  local node=$1 job
  cat <<YAML
global:
  scrape_interval: ${COLLECT_INTERVAL_SECONDS}s
  external_labels:
    cluster: "$CLUSTER_NAME"
    node: "$node"
scrape_configs:
YAML
  for job in "${METRICS_JOBS[@]}"; do
    cat <<YAML
  - job_name: $job
    static_configs:
      - targets: ["127.0.0.1:${METRICS_PORTS[$job]}"]
        labels:
          cluster: "$CLUSTER_NAME"
          node: "$node"
YAML
  done
  cat <<YAML
remote_write:
  - url: "$REMOTE_WRITE_URL"
    sigv4:
      region: "$METRICS_REGION"
YAML
}

# check_exporter_packages RELEASE: both packages installed at the release's pinned series.
check_exporter_packages() {
  local package pattern status missing=0
  for package in prometheus-node-exporter prometheus; do
    pattern=${NODE_EXPORTER_VERSIONS[$1]}
    [[ "$package" == prometheus ]] && pattern=${PROMETHEUS_VERSIONS[$1]}
    status=$(dpkg-query -W -f='${Status} ${Version}' "$package" 2>/dev/null || true)
    # shellcheck disable=SC2053  # the pinned series is a glob
    if [[ "$status" != "install ok installed "* || "${status##* }" != $pattern ]]; then
      log "error: metrics: $package $pattern is not installed (dpkg: '${status:-not known}'): launch the node" \
        "from its cluster's node image (NAME-images), or bake it into the group's ami_id"
      missing=1
    fi
  done
  return "$missing"
}

setup_metrics() {
  local node release storage
  node=$(hostname -s)
  release=$(ubuntu_release)
  exporters_pinned "$release"
  check_exporter_packages "$release"
  storage="--enable-feature=agent --storage.agent.path=$METRICS_STATE/prometheus-agent"
  if [[ "${PROMETHEUS_AGENT_MODE[$release]}" != yes ]]; then
    storage="--storage.tsdb.path=$METRICS_STATE/prometheus-agent --storage.tsdb.retention.time=2h"
  fi
  METRICS_UNITS=(prometheus-node-exporter.service fmcluster-prometheus-agent.service)
  METRICS_JOBS=(node)
  # The packaged server is not used: the agent below runs with its own unit and configuration.
  systemctl disable --now prometheus.service
  install -d -m 0755 "$ROOT$FMCLUSTER_ETC" "$ROOT$METRICS_STATE" "$ROOT$METRICS_STATE/textfile-node"
  install -d -m 0750 -o prometheus -g prometheus "$ROOT$METRICS_STATE/prometheus-agent"

  # Textfile metrics of the packaged node exporter (job node).
  {
    printf '# HELP fmcluster_expected_gpus GPUs of this instance type (fmcluster instance catalog)\n'
    printf '# TYPE fmcluster_expected_gpus gauge\nfmcluster_expected_gpus %s\n' "$EXPECTED_GPUS"
    if [[ -n "$EXPECTED_LUSTRE_MOUNT" ]]; then
      printf '# HELP fmcluster_expected_lustre_mount The node should mount FSx for Lustre here\n'
      printf '# TYPE fmcluster_expected_lustre_mount gauge\n'
      printf 'fmcluster_expected_lustre_mount{mountpoint="%s"} 1\n' "$EXPECTED_LUSTRE_MOUNT"
    fi
  } >"$ROOT$METRICS_STATE/textfile-node/fmcluster.prom"
  printf 'ARGS="--web.listen-address=127.0.0.1:%s --collector.textfile.directory=%s"\n' \
    "${METRICS_PORTS[node]}" "$METRICS_STATE/textfile-node" >"$ROOT$NODE_EXPORTER_DEFAULTS"

  local job
  for job in $METRICS_COLLECTORS; do
    write_collector "$job"
  done

  prometheus_agent_config "$node" >"$ROOT$FMCLUSTER_ETC/prometheus-agent.yml"
  cat >"$ROOT$SYSTEMD_DIR/fmcluster-prometheus-agent.service" <<UNIT
[Unit]
Description=fmcluster Prometheus agent: remote-write to Amazon Managed Service for Prometheus
After=network-online.target
Wants=network-online.target

[Service]
User=prometheus
ExecStart=/usr/bin/prometheus --config.file=$FMCLUSTER_ETC/prometheus-agent.yml $storage --web.listen-address=127.0.0.1:9090
Restart=always

[Install]
WantedBy=multi-user.target
UNIT
  systemctl daemon-reload
  systemctl enable "${METRICS_UNITS[@]}"
  systemctl restart "${METRICS_UNITS[@]}"
  log "metrics: jobs ${METRICS_JOBS[*]} of $node remote-written to $REMOTE_WRITE_URL"
}
