# shellcheck shell=bash
# The remote-write URL of the cluster's Prometheus workspace is a deploy-time value of
# NAME-observability, which a lifecycle script (a file asset) cannot carry: NAME-cluster keeps it
# in the SSM parameter METRICS_PARAMETER, which the execution role may read (and no other one).
# The AWS CLI of the HyperPod AMI reads it with the role's credentials.

read_remote_write_url() {
  REMOTE_WRITE_URL=$(aws ssm get-parameter --region "$METRICS_REGION" --name "$METRICS_PARAMETER" \
    --query Parameter.Value --output text)
  if [[ "$REMOTE_WRITE_URL" != https://* ]]; then
    log "metrics: $METRICS_PARAMETER holds no remote-write URL: '$REMOTE_WRITE_URL'"
    return 1
  fi
}

# setup_metrics_from_parameter: the URL, then metrics (one step: steps run in subshells).
setup_metrics_from_parameter() {
  read_remote_write_url
  setup_metrics
}
