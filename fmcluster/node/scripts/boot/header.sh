#!/bin/bash
# fmcluster node bootstrap, rendered by fmcluster.node.bootstrap for one node group.
# AWS PCS runs text/x-shellscript user data after the node registers with the cluster and
# before slurmd starts; the output is in /var/log/cloud-init-output.log.
set -euo pipefail

# The node's file system root: empty on a node. The boot-path tests (tests/support/sandbox.py) run the
# rendered script in a sandbox and set FMCLUSTER_ROOT to its directory. Every file the script
# reads or writes is "$ROOT/PATH"; paths handed to commands (mount points, unit names) are the
# node's own.
ROOT=${FMCLUSTER_ROOT:-}
