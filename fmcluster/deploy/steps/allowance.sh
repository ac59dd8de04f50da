#!/usr/bin/env bash
# GitOps pipeline: is data loss allowed for this cluster in this deploy? Prints --allow-data-loss
# when it is, nothing when it is not.
#
#   allowance.sh CLUSTER [--allow-data-loss]
#
# Allowed per merge: the commit being deployed (HEAD) carries the git trailer
#   Allow-Data-Loss: CLUSTER[, CLUSTER...]
# in its message (the merge or squash commit), so the allowance ends with that commit: the next
# merge is guarded again. --allow-data-loss passes on the pipeline file's `allow_data_loss: true`
# (the older, standing switch, kept working; remove it after the deploy).
set -euo pipefail

cluster=${1:?usage: allowance.sh CLUSTER [--allow-data-loss]}
if [ "${2:-}" = --allow-data-loss ]; then
  echo "$cluster: data loss allowed by the pipeline file (allow_data_loss: true)" >&2
  echo --allow-data-loss
  exit 0
fi
trailers=$(git log -1 --format='%(trailers:key=Allow-Data-Loss,valueonly,separator=%x2C)' HEAD)
IFS=', ' read -r -a named <<<"$trailers"
for name in "${named[@]}"; do
  if [ "$name" = "$cluster" ]; then
    echo "$cluster: data loss allowed for this deploy by the trailer 'Allow-Data-Loss: $trailers' of $(git rev-parse --short HEAD)" >&2
    echo --allow-data-loss
    exit 0
  fi
done
