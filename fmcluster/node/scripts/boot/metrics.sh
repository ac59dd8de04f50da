# shellcheck shell=bash
# Metrics collection (NAME-observability): node exporter, textfile collectors and a Prometheus
# agent that remote-writes to the cluster's Amazon Managed Service for Prometheus workspace with
# SigV4 (the node role's aps:RemoteWrite on that workspace only).
#
# Everything comes from the Ubuntu archive (universe) of the node's release (VERSION_CODENAME of
# OS_RELEASE), pinned to a version series; no download from anywhere else:
#   noble (24.04, the AWS PCS AMI):
#     prometheus-node-exporter 1.7.0-1ubuntu0.3 in noble-updates/noble-security (upstream 1.7.0)
#     prometheus               2.45.3+ds-2ubuntu0.3 (upstream 2.45.3 LTS), run as an agent
#                              (--enable-feature=agent: scrape and remote-write, no local TSDB)
#   jammy (22.04, the SageMaker HyperPod AMI):
#     prometheus-node-exporter 1.3.1-1ubuntu0.22.04 (upstream 1.3.1)
#     prometheus               2.31.2+ds1-1ubuntu1.22.04 (upstream 2.31.2): agent mode came with
#                              2.32, so it runs as a server keeping two hours of samples
# Another release fails the set-up (no unpinned install). Raise these with the archive
# (apt-cache policy PACKAGE on a node shows what it offers).
declare -A NODE_EXPORTER_VERSIONS=([noble]='1.7.0-1*' [jammy]='1.3.1-1*')
declare -A PROMETHEUS_VERSIONS=([noble]='2.45.3+ds-2*' [jammy]='2.31.2+ds1-1*')
declare -A PROMETHEUS_AGENT_MODE=([noble]=yes [jammy]=no)

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

setup_metrics() {
  local node release storage
  node=$(hostname -s)
  release=$(sed -n 's/^VERSION_CODENAME=//p' "$ROOT$OS_RELEASE" | tr -d '"')
  if [[ -z "${PROMETHEUS_VERSIONS[${release:-none}]:-}" ]]; then
    log "metrics: no pinned packages for the Ubuntu release '$release' (pinned: ${!PROMETHEUS_VERSIONS[*]})"
    return 1
  fi
  storage="--enable-feature=agent --storage.agent.path=$METRICS_STATE/prometheus-agent"
  if [[ "${PROMETHEUS_AGENT_MODE[$release]}" != yes ]]; then
    storage="--storage.tsdb.path=$METRICS_STATE/prometheus-agent --storage.tsdb.retention.time=2h"
  fi
  METRICS_UNITS=(prometheus-node-exporter.service fmcluster-prometheus-agent.service)
  METRICS_JOBS=(node)
  log "installing prometheus-node-exporter ${NODE_EXPORTER_VERSIONS[$release]} and prometheus ${PROMETHEUS_VERSIONS[$release]} ($release)"
  apt_get update -q
  apt_get install -y -q --no-install-recommends "prometheus-node-exporter=${NODE_EXPORTER_VERSIONS[$release]}" \
    "prometheus=${PROMETHEUS_VERSIONS[$release]}"
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
