#!/bin/bash
# fmcluster: ask the cluster's node replacer to replace this node. Written by the node bootstrap to
# /usr/local/lib/fmcluster/request-replacement; its settings are
# /etc/fmcluster/request-replacement.env (fmcluster.node.bootstrap.NodeProgram.replacement):
#   QUEUE_URL      the cluster's SQS queue of replacement requests, or its name (NAME-node-replacements:
#                  the URL is asked of SQS, sqs:GetQueueUrl, where the script cannot know the account)
#   REGION         the queue's region
#   CLUSTER_NAME   the cluster's name (the replacer refuses a request that names another)
#   PLANE          pcs | hyperpod-slurm
#
# Usage: request-replacement SLUG TEXT... — run by the node health program (node-health --slurm)
# once the node is drained for a hardware fault and its jobs have ended. Sends one message
# {cluster, node, instance_id, fault, text, at} with the AWS CLI v2 (on the AWS PCS and SageMaker
# HyperPod images), a few attempts; exit status 0 once the queue took it, 1 when it did not (the
# caller asks again at its next run), 2 on a usage error.
#
# The instance id comes from the instance metadata service (IMDSv2). On SageMaker HyperPod, where it
# may not answer, from the node's entry in /opt/ml/config/resource_config.json (HyperPod's, read by
# AWS's lifecycle scripts: InstanceGroups[].Instances[] with CustomerIpAddress; its InstanceId field
# is not verified); without one the message names the node only, and the replacer finds it by its
# host name in ListClusterNodes.
set -uo pipefail
ROOT=${FMCLUSTER_ROOT:-}
# shellcheck source=/dev/null
source "$ROOT${REQUEST_REPLACEMENT_ENV:-/etc/fmcluster/request-replacement.env}"
ATTEMPTS=${REQUEST_ATTEMPTS:-3}
RETRY_SECONDS=${REQUEST_RETRY_SECONDS:-10}
RESOURCE_CONFIG=${RESOURCE_CONFIG:-/opt/ml/config/resource_config.json}

if (($# < 1)) || [[ -z "$1" ]]; then
  printf 'usage: request-replacement SLUG TEXT...\n' >&2
  exit 2
fi
fault=$1
shift
text="$*"

# The instance id from IMDSv2 (a token, then meta-data/instance-id); nothing when it does not answer.
imds_instance_id() {
  local token id
  token=$(curl -sf -m 2 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "http://169.254.169.254/latest/api/token") || return 0
  id=$(curl -sf -m 2 -H "X-aws-ec2-metadata-token: $token" "http://169.254.169.254/latest/meta-data/instance-id") || return 0
  [[ "$id" =~ ^i-[0-9a-f]{8,17}$ ]] && printf '%s' "$id"
}

# HyperPod: this node's InstanceId in resource_config.json, found by its address (the ip-A-B-C-D
# host name); nothing when the file, the entry or the field is missing.
hyperpod_instance_id() {
  local host=$1
  [[ -r "$ROOT$RESOURCE_CONFIG" ]] || return 0
  /usr/bin/python3 - "$ROOT$RESOURCE_CONFIG" "$host" <<'PY' 2>/dev/null || true
import json, re, sys
m = re.match(r"ip-(\d+)-(\d+)-(\d+)-(\d+)", sys.argv[2])
address = ".".join(m.groups()) if m else ""
for group in json.load(open(sys.argv[1])).get("InstanceGroups", []):
    for instance in group.get("Instances", []):
        if address and instance.get("CustomerIpAddress") == address and \
                re.fullmatch(r"i-[0-9a-f]{8,17}", instance.get("InstanceId", "")):
            print(instance["InstanceId"], end="")
PY
}

node=$(hostname)
instance_id=$(imds_instance_id)
if [[ -z "$instance_id" && "$PLANE" == hyperpod-slurm ]]; then
  instance_id=$(hyperpod_instance_id "$node")
fi
at=$(date -u +%Y-%m-%dT%H:%M:%SZ)
body=$(/usr/bin/python3 -c 'import json, sys; print(json.dumps(dict(zip(sys.argv[1::2], sys.argv[2::2]))))' \
  cluster "$CLUSTER_NAME" node "$node" instance_id "$instance_id" fault "$fault" text "$text" at "$at") || exit 1

queue=$QUEUE_URL
for ((attempt = 1; attempt <= ATTEMPTS; attempt++)); do
  if [[ "$queue" != https://* ]]; then
    queue=$(aws sqs get-queue-url --region "$REGION" --queue-name "$QUEUE_URL" --query QueueUrl --output text) ||
      queue=$QUEUE_URL
  fi
  if [[ "$queue" == https://* ]] && aws sqs send-message --region "$REGION" --queue-url "$queue" --message-body "$body" >/dev/null; then
    logger -t fmcluster-health "replacement requested: $fault: $text (${instance_id:-$node})" 2>/dev/null || true
    exit 0
  fi
  ((attempt < ATTEMPTS)) && sleep "$RETRY_SECONDS"
done
printf 'request-replacement: the queue %s did not take the request after %s attempts\n' "$QUEUE_URL" "$ATTEMPTS" >&2
exit 1
