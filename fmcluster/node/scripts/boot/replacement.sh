# shellcheck shell=bash
# The node's replacement request (bootstrap/programs/request-replacement.sh, embedded as
# program_request_replacement) and its settings: the cluster's SQS queue of replacement requests
# (REPLACE_QUEUE_URL, REPLACE_REGION), the cluster's name and control plane. The node health
# program runs $FMCLUSTER_LIB/request-replacement once a node drained for a hardware fault has no
# jobs left; the cluster's node replacer (a Lambda function) decides and replaces it.

install_request_replacement() {
  install -d -m 0755 "$ROOT$FMCLUSTER_LIB" "$ROOT$FMCLUSTER_ETC"
  program_request_replacement >"$ROOT$FMCLUSTER_LIB/request-replacement"
  chmod 0755 "$ROOT$FMCLUSTER_LIB/request-replacement"
  {
    printf '# fmcluster request-replacement settings (fmcluster.node.bootstrap), for %s nodes\n' "$INSTANCE_TYPE"
    printf 'QUEUE_URL=%q\n' "$REPLACE_QUEUE_URL"
    printf 'REGION=%q\n' "$REPLACE_REGION"
    printf 'CLUSTER_NAME=%q\n' "$REPLACE_CLUSTER"
    printf 'PLANE=%q\n' "$REPLACE_PLANE"
  } >"$ROOT$FMCLUSTER_ETC/request-replacement.env"
}
