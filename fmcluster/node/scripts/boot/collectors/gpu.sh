#!/bin/bash
# fmcluster textfile collector: GPU health from nvidia-smi, in the Prometheus text format, on
# stdout, under the DCGM exporter's field names that the gpu alert rules use:
#   DCGM_FI_DEV_GPU_TEMP            temperature.gpu (one series per GPU: GpuMissing counts them)
#   DCGM_FI_DEV_ECC_DBE_VOL_TOTAL   ecc.errors.uncorrected.volatile.total
#   DCGM_FI_DEV_ECC_SBE_VOL_TOTAL   ecc.errors.corrected.volatile.total
#   DCGM_FI_DEV_ROW_REMAP_FAILURE   remapped_rows.failure (nvidia-smi --query-remapped-rows)
#   DCGM_FI_DEV_POWER_USAGE         power.draw
#   DCGM_FI_DEV_THERMAL_VIOLATION   microseconds throttled by temperature, and
#   DCGM_FI_DEV_POWER_VIOLATION     by the power cap: nvidia-smi only tells whether a throttle
#                                   reason is active now, so each run adds its interval
#                                   (COLLECT_INTERVAL_SECONDS) while it is; kept in STATE_DIR.
#   DCGM_FI_DEV_XID_ERRORS          the last XID of the GPU since boot, 0 if none (DCGM's meaning):
#                                   the driver logs XIDs to the kernel log only, as
#                                   `NVRM: Xid (PCI:0000:53:00): 79, pid=..., ...`; the PCI
#                                   address is matched with nvidia-smi's pci.bus_id.
set -euo pipefail
STATE_DIR=${STATE_DIR:-/var/lib/fmcluster/gpu-collector}
COLLECT_INTERVAL_SECONDS=${COLLECT_INTERVAL_SECONDS:-30}

number() {  # N/A, [N/A] and empty fields become NaN
  if [[ "$1" =~ ^-?[0-9]+(\.[0-9]+)?$ ]]; then printf '%s' "$1"; else printf 'NaN'; fi
}

active() {  # nvidia-smi prints Active / Not Active
  [[ "$1" == "Active" ]]
}

# add_violation NAME GPU ACTIVE: the accumulated microseconds of one throttle reason.
add_violation() {
  local file="$STATE_DIR/$1-$2" total=0
  [[ -f "$file" ]] && total=$(<"$file")
  [[ "$total" =~ ^[0-9]+$ ]] || total=0
  if [[ "$3" == 1 ]]; then
    total=$((total + COLLECT_INTERVAL_SECONDS * 1000000))
  fi
  printf '%s\n' "$total" >"$file"
  printf '%s' "$total"
}

# bus_key ADDRESS: a PCI address as domain:bus:device, lower case, with a four-digit domain:
# nvidia-smi's 00000000:53:00.0 and the kernel log's 0000:53:00 give the same key.
bus_key() {
  local id=${1,,}
  id=${id%.*}
  printf '%04x:%s' "$((16#${id%%:*}))" "${id#*:}"
}

mkdir -p "$STATE_DIR"
declare -A last_xid=()
xid_line='NVRM: Xid \(PCI:([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+)\): ([0-9]+)'
while IFS= read -r line; do
  if [[ "$line" =~ $xid_line ]]; then
    last_xid[$(bus_key "${BASH_REMATCH[1]}")]=$((10#${BASH_REMATCH[2]}))
  fi
done < <(journalctl -k -b -o cat --no-pager | grep -F 'NVRM: Xid' || true)
declare -A remap_failure=()
while IFS=', ' read -r bus failure; do
  [[ -n "$bus" ]] || continue
  remap_failure[$bus]=$failure
done < <(nvidia-smi --query-remapped-rows=gpu_bus_id,remapped_rows.failure --format=csv,noheader,nounits || true)

declare -a lines=()
while IFS=',' read -r index bus uuid temp dbe sbe power hw_thermal sw_thermal power_cap; do
  index=${index// /} bus=${bus// /} uuid=${uuid// /}
  [[ -n "$index" ]] || continue
  labels="gpu=\"$index\",UUID=\"$uuid\",pci_bus_id=\"$bus\""
  thermal=0 powercap=0
  if active "${hw_thermal# }" || active "${sw_thermal# }"; then thermal=1; fi
  if active "${power_cap# }"; then powercap=1; fi
  lines+=("DCGM_FI_DEV_GPU_TEMP{$labels} $(number "${temp// /}")"
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{$labels} $(number "${dbe// /}")"
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{$labels} $(number "${sbe// /}")"
    "DCGM_FI_DEV_POWER_USAGE{$labels} $(number "${power// /}")"
    "DCGM_FI_DEV_XID_ERRORS{$labels} ${last_xid[$(bus_key "$bus")]:-0}"
    "DCGM_FI_DEV_ROW_REMAP_FAILURE{$labels} $(number "${remap_failure[$bus]:-}")"
    "DCGM_FI_DEV_THERMAL_VIOLATION{$labels} $(add_violation thermal "$index" "$thermal")"
    "DCGM_FI_DEV_POWER_VIOLATION{$labels} $(add_violation power "$index" "$powercap")")
done < <(nvidia-smi --query-gpu=index,pci.bus_id,uuid,temperature.gpu,ecc.errors.uncorrected.volatile.total,ecc.errors.corrected.volatile.total,power.draw,clocks_throttle_reasons.hw_thermal_slowdown,clocks_throttle_reasons.sw_thermal_slowdown,clocks_throttle_reasons.sw_power_cap --format=csv,noheader,nounits)

if ((${#lines[@]})); then
  printf '%s\n' "${lines[@]}" | sort
fi
