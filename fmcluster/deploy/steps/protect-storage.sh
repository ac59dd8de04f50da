#!/usr/bin/env bash
# GitOps pipeline: set the stack policy of a cluster's NAME-storage stack (fmcluster.stack_policy):
# after a deploy, the policy that denies replacing or deleting its stateful resources; before the
# deploy of a merge that allows data loss (--lift), the policy that allows every update.
#
#   protect-storage.sh STACK [--lift]
set -euo pipefail

stack=${1:?usage: protect-storage.sh STACK [--lift]}
shift
fmcluster=${FMCLUSTER:-.venv/bin/fmcluster}

error=$(mktemp)
trap 'rm -f "$error"' EXIT
if ! aws cloudformation describe-stacks --stack-name "$stack" --query 'Stacks[0].StackName' --output text \
    >/dev/null 2>"$error"; then
  if grep -q "does not exist" "$error"; then
    echo "$stack: no such stack yet, so no stack policy to lift (the Record step sets it after the first deploy)"
    exit 0
  fi
  cat "$error" >&2
  echo "$stack: cannot read the stack, so its stack policy cannot be set" >&2
  exit 1
fi
policy=$("$fmcluster" stack-policy "$@")
aws cloudformation set-stack-policy --stack-name "$stack" --stack-policy-body "$policy"
if [ "${1:-}" = --lift ]; then
  echo "$stack: stack policy lifted for this deploy (it allows data loss); the Record step sets it again"
else
  echo "$stack: stack policy set: no update replaces or deletes its file system, links, buckets or key"
fi
