#!/usr/bin/env bash
# GitOps pipeline, after a cluster's stage deployed: record what was deployed, as COMMIT:PATH
# (what `git show` reads), for diff-deployed.sh to compare the next change with.
#
#   record-deployed.sh PARAMETER SPEC
set -euo pipefail

parameter=${1:?usage: record-deployed.sh PARAMETER SPEC}
spec=${2:?usage: record-deployed.sh PARAMETER SPEC}

commit=$(git rev-parse HEAD)
aws ssm put-parameter --name "$parameter" --type String --overwrite --value "$commit:$spec" >/dev/null
echo "$spec: recorded $commit:$spec in $parameter"
