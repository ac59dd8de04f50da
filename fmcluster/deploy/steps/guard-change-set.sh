#!/usr/bin/env bash
# GitOps pipeline, between creating a stack's change set and executing it: refuse it when it
# replaces or removes a stateful resource (file system, link, bucket, key), unless this deploy is
# allowed to lose data (allowance.sh: the merge commit's Allow-Data-Loss trailer).
#
#   guard-change-set.sh CLUSTER STACK CHANGE_SET [--allow-data-loss] [fmcluster change-set options]
#
# The change set is the one CloudFormation is about to execute: a change that comes from
# fmcluster's code, and not from the spec, is judged too. Exit status is fmcluster change-set's.
set -euo pipefail

cluster=${1:?usage: guard-change-set.sh CLUSTER STACK CHANGE_SET [--allow-data-loss] [options]}
stack=${2:?usage: guard-change-set.sh CLUSTER STACK CHANGE_SET [--allow-data-loss] [options]}
name=${3:?usage: guard-change-set.sh CLUSTER STACK CHANGE_SET [--allow-data-loss] [options]}
shift 3
standing=()
if [ "${1:-}" = --allow-data-loss ]; then
  standing=(--allow-data-loss)
  shift
fi
fmcluster=${FMCLUSTER:-.venv/bin/fmcluster}
here=$(dirname "${BASH_SOURCE[0]}")

allow=$(bash "$here/allowance.sh" "$cluster" "${standing[@]}")
# shellcheck disable=SC2086  # $allow is one flag or nothing
exec "$fmcluster" change-set "$stack" "$name" $allow "$@"
