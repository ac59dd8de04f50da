#!/bin/bash
# fmcluster: publish this node's place in EC2's network as Slurm node features, so that a job can
# ask for nodes under one network node (`sbatch --constraint="[nn3-A|nn3-B]"`: Slurm's matching
# OR, every allocated node shares one of the listed features; the kit's placement.sh writes it).
# Written by the node bootstrap to /usr/local/lib/fmcluster/network-features and run by
# fmcluster-network-features.service at every boot, after slurmd (scripts/boot/network-features.sh).
# AWS PCS owns slurm.conf and takes no TopologyPlugin setting (it configures topology/block itself
# only for UltraServer groups), so features are the topology a PCS cluster can be given.
#
# Its settings are /etc/fmcluster/network-features.env:
#   SLURM_BIN       Slurm's commands, first on PATH (AWS PCS keeps them under
#                   /opt/aws/pcs/scheduler/slurm-VERSION/bin, on no PATH a unit gets)
#   ATTEMPTS        how many times to try (the topology is not answered at once after a launch;
#   RETRY_SECONDS   scontrol fails until slurmd has registered), and how long to wait in between
#
# 1. The instance id and region from the instance metadata service (IMDSv2).
# 2. `aws ec2 describe-instance-topology --instance-ids ID` (EC2 API Reference,
#    DescribeInstanceTopology; IAM action ec2:DescribeInstanceTopology): NetworkNodes lists the
#    network nodes above the instance, top-down (the last is the one the instance is connected
#    to): 3 on most supported types, 4 on p6-b200 and p6-b300. An instance not in the answer yet,
#    or without network nodes yet, is asked again.
# 3. Features nn1-ID .. nnN-ID, layer 1 the top (ID: the network node's id without its "nn-";
#    Slurm's constraint parser takes every character but , & | * [ ] ( ) in a feature name:
#    src/slurmctld/job_scheduler.c, _feature_string2list), set with `scontrol update` as the
#    node's available and active features, every feature the node has that is not of this form
#    kept.
# Exit status 0 once set; 1 when it could not (the unit fails: `systemctl status` shows why).
set -uo pipefail
ROOT=${FMCLUSTER_ROOT:-}
# shellcheck source=/dev/null
source "$ROOT${NETWORK_FEATURES_ENV:-/etc/fmcluster/network-features.env}"
IMDS=http://169.254.169.254/latest
# Slurm's commands first (under test, FMCLUSTER_ROOT set, the stand-ins on PATH stay first)
export PATH="${FMCLUSTER_ROOT:+$PATH:}$SLURM_BIN:$PATH"

log() {
  printf 'fmcluster-network-features: %s\n' "$*" >&2
}

metadata() {  # metadata PATH: one value of the instance metadata service (IMDSv2)
  local token
  token=$(curl -sf -X PUT "$IMDS/api/token" -H 'X-aws-ec2-metadata-token-ttl-seconds: 60') || return 1
  curl -sf -H "X-aws-ec2-metadata-token: $token" "$IMDS/meta-data/$1"
}

# features INSTANCE_ID: the recorded answer (JSON) on stdin; the features, comma-separated, on
# stdout; status 1 when the instance has no network nodes in it (yet).
features() {
  python3 -c '
import json, re, sys
answer = json.load(sys.stdin)
nodes = [i.get("NetworkNodes") or [] for i in answer.get("Instances", []) if i.get("InstanceId") == sys.argv[1]]
if not nodes or not nodes[0]:
    sys.exit(1)
out = []
for layer, node in enumerate(nodes[0], 1):
    ident = node[3:] if node.startswith("nn-") else node
    if not re.fullmatch(r"[A-Za-z0-9._-]+", ident):
        sys.exit("network node id %r has characters a Slurm feature cannot" % node)
    out.append("nn%d-%s" % (layer, ident))
print(",".join(out))
' "$1"
}

# node_name: this node's Slurm name: the one whose NodeHostName is this host's short name, else
# the one whose NodeAddr is this instance's private address.
node_name() {
  local short address
  short=$(hostname -s)
  if scontrol -o show node "$short" >/dev/null 2>&1; then
    printf '%s\n' "$short"
    return 0
  fi
  address=$(metadata local-ipv4) || return 1
  scontrol -o show node 2>/dev/null | awk -v a="$address" '
    { name = ""; addr = ""
      for (i = 1; i <= NF; i++) { if ($i ~ /^NodeName=/) name = substr($i, 10); if ($i ~ /^NodeAddr=/) addr = substr($i, 10) } }
    addr == a { print name; found = 1; exit }
    END { exit !found }'
}

# field LINE KEY: the value of KEY= in an `scontrol -o show node` line ("" for "(null)")
field() {
  local value
  value=$(printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1)
  [[ "$value" == "(null)" ]] && value=""
  printf '%s\n' "$value"
}

# merged OLD NEW: OLD's features that are not network-node features, then NEW, comma-separated
merged() {
  local kept
  kept=$(printf '%s\n' "${1//,/$'\n'}" | grep -Ev '^(nn[0-9]+-.*)?$' | paste -sd, -)
  printf '%s\n' "${kept:+$kept,}$2"
}

set_features() {  # set_features NODE FEATURES
  local line available active
  line=$(scontrol -o show node "$1") || return 1
  available=$(merged "$(field "$line" AvailableFeatures)" "$2")
  active=$(merged "$(field "$line" ActiveFeatures)" "$2")
  scontrol update nodename="$1" AvailableFeatures="$available" ActiveFeatures="$active"
}

main() {
  local attempt instance region answer wanted="" node=""
  for ((attempt = 1; attempt <= ATTEMPTS; attempt++)); do
    ((attempt > 1)) && sleep "$RETRY_SECONDS"
    if [[ -z "$wanted" ]]; then
      if ! instance=$(metadata instance-id) || ! region=$(metadata placement/region); then
        log "attempt $attempt: the instance metadata service did not answer"
        continue
      fi
      answer=$(aws ec2 describe-instance-topology --instance-ids "$instance" --region "$region" --output json) || {
        log "attempt $attempt: DescribeInstanceTopology failed for $instance"
        continue
      }
      wanted=$(features "$instance" <<<"$answer") || {
        wanted=""
        log "attempt $attempt: EC2 has no network nodes for $instance yet"
        continue
      }
    fi
    if [[ -z "$node" ]]; then
      node=$(node_name) || {
        node=""
        log "attempt $attempt: this node is not in Slurm yet (slurmd has not registered)"
        continue
      }
    fi
    if set_features "$node" "$wanted"; then
      log "$node: network features $wanted"
      return 0
    fi
    log "attempt $attempt: scontrol update of $node failed"
  done
  log "gave up after $ATTEMPTS attempts: jobs will not be placed by network topology on this node"
  return 1
}

main "$@"
