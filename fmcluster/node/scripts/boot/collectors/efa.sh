#!/bin/bash
# fmcluster textfile collector: EFA device counters in the Prometheus text format, on stdout.
# Reads the rdma hardware counters /sys/class/infiniband/DEVICE/ports/PORT/hw_counters/NAME of
# every EFA device and prints node_amazonefa_NAME{device,port} (the names of AWS's EFA node
# exporter, which the efa alert rules use: retrans_pkts, retrans_timeout_events,
# unresponsive_remote_events, impaired_remote_conn_events, tx_pkts, rx_pkts, rx_drops ...).
set -euo pipefail
SYSFS_INFINIBAND=${SYSFS_INFINIBAND:-/sys/class/infiniband}

declare -A seen=()
for counter in "$SYSFS_INFINIBAND"/*/ports/*/hw_counters/*; do
  [[ -f "$counter" ]] || continue
  name=${counter##*/}
  [[ "$name" =~ ^[a-z0-9_]+$ ]] || continue
  port_dir=${counter%/hw_counters/*}
  port=${port_dir##*/}
  device_dir=${port_dir%/ports/*}
  device=${device_dir##*/}
  value=$(<"$counter")
  [[ "$value" =~ ^[0-9]+$ ]] || continue
  if [[ -z "${seen[$name]:-}" ]]; then
    printf '# TYPE node_amazonefa_%s counter\n' "$name"
    seen[$name]=1
  fi
  printf 'node_amazonefa_%s{device="%s",port="%s"} %s\n' "$name" "$device" "$port" "$value"
done
