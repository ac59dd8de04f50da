#!/usr/bin/env bash
# GitHub Actions review job: the pull-request comment, in markdown: the change against the base
# branch first (`fmcluster diff`: what is replaced, created, deleted; the cost per hour before and
# after), then the full plan. The diff's exit status goes to STATUS_FILE, so the comment is
# written (and posted) even when the guard fails, and the job fails after posting it.
#
#   review-comment.sh BASE_REF SPEC STATUS_FILE > comment.md
set -uo pipefail

base=${1:?usage: review-comment.sh BASE_REF SPEC STATUS_FILE}
spec=${2:?usage: review-comment.sh BASE_REF SPEC STATUS_FILE}
status_file=${3:?usage: review-comment.sh BASE_REF SPEC STATUS_FILE}
fmcluster=${FMCLUSTER:-.venv/bin/fmcluster}
python=${PYTHON:-.venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

hourly() {  # the plan's cost per hour (at the node groups' maximum), or "unknown"
  "$fmcluster" plan "$1" --format json 2>/dev/null |
    "$python" -c 'import json, sys; print(json.load(sys.stdin)["cost"]["hourly_usd_max"])' 2>/dev/null || echo unknown
}

echo "<!-- fmcluster-review -->"
echo "## fmcluster: \`$spec\` against \`$base\`"
echo
status=0
if git cat-file -e "$base:$spec" 2>/dev/null; then
  git show "$base:$spec" >"$work/base.yaml"
  "$fmcluster" diff "$work/base.yaml" "$spec" >"$work/diff.txt" 2>&1 || status=$?
  echo "Cost per hour at the node groups' maximum: \$$(hourly "$work/base.yaml") before, \$$(hourly "$spec") after."
  echo
  if [ "$status" -ne 0 ]; then
    echo "**The guard fails (exit $status): this change does not deploy as it is.**"
    echo
  fi
  echo '```'
  cat "$work/diff.txt"
  echo '```'
else
  echo "\`$spec\` is new on this branch: nothing to compare."
fi
echo "$status" >"$status_file"
echo
"$fmcluster" plan "$spec" --format markdown
