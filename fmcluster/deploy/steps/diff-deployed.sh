#!/usr/bin/env bash
# GitOps pipeline, before a cluster's stage deploys: compare its spec with the spec as last
# deployed, and stop the pipeline when the change would lose data.
#
#   diff-deployed.sh PARAMETER SPEC [--allow-data-loss]
#
# PARAMETER is the SSM parameter in which record-deployed.sh wrote COMMIT:PATH after the last
# successful deploy; the old spec is `git show COMMIT:PATH` (the step runs in a full clone).
# Nothing recorded yet (the first deploy): nothing to compare, the step passes.
# Exit status is that of `fmcluster diff OLD NEW`: 1 on data loss or a new cluster (the name,
# region or account changes), 2 when a spec is invalid.
set -euo pipefail

parameter=${1:?usage: diff-deployed.sh PARAMETER SPEC [--allow-data-loss]}
spec=${2:?usage: diff-deployed.sh PARAMETER SPEC [--allow-data-loss]}
shift 2
fmcluster=${FMCLUSTER:-.venv/bin/fmcluster}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! deployed=$(aws ssm get-parameter --name "$parameter" --query Parameter.Value --output text 2>"$work/error"); then
  if grep -q ParameterNotFound "$work/error"; then
    echo "$spec: $parameter is not set: the first deploy of this cluster, nothing to compare"
    exit 0
  fi
  cat "$work/error" >&2
  echo "$spec: cannot read $parameter, so the spec cannot be compared with the deployed one" >&2
  exit 1
fi

commit=${deployed%%:*}
old="$work/${commit:0:12}/${deployed#*:}"
mkdir -p "$(dirname "$old")"
if ! git show "$deployed" >"$old"; then
  echo "$spec: $deployed (from $parameter) is not in this clone of the repository" >&2
  echo "  the source must be a full clone (code_build_clone_output), and the commit still on a branch" >&2
  exit 1
fi
echo "$spec: comparing with $deployed, as last deployed"
exec "$fmcluster" diff "$old" "$spec" "$@"
