# shellcheck shell=bash
# AWS PCS node lifecycle scripts (fmcluster.node.actions): the settings whose values CloudFormation
# fills in at deploy time (another stack's outputs: the file system's DNS and mount name, the
# remote-write URL) are not in the published script but come as its arguments, NAME=VALUE, one for
# each name of ARGUMENT_SETTINGS. An argument of another name or form, a name given twice and a
# name missing are errors: the script stops before its first step.

read_arguments() {
  local argument name
  local -A given=()
  for argument in "$@"; do
    name=${argument%%=*}
    if [[ "$argument" != *=* || ! "$name" =~ ^[A-Z][A-Z0-9_]*$ || " $ARGUMENT_SETTINGS " != *" $name "* ]]; then
      log "error: unexpected argument '${argument:0:64}' (expected NAME=VALUE of: ${ARGUMENT_SETTINGS:-none})"
      return 1
    fi
    if [[ -n "${given[$name]:-}" ]]; then
      log "error: argument $name given twice"
      return 1
    fi
    given[$name]=1
    printf -v "$name" '%s' "${argument#*=}"
  done
  for name in $ARGUMENT_SETTINGS; do
    if [[ -z "${given[$name]:-}" ]]; then
      log "error: argument $name=VALUE missing"
      return 1
    fi
  done
}
