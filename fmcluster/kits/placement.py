"""The Slurm kits' placement.sh: the sbatch option that asks for the tightest network placement of
a job's nodes, and the submit lines that use it. Pure.

On AWS PCS each GPU node of a multi-node EFA group publishes its place in EC2's network as node
features nn1-ID (the top layer) .. nn3-ID (nn4-ID on 4-layer types) (fmcluster.node.topology,
programs/network-features.sh). placement.sh NODES PARTITION prints `--constraint=[A|B|...]`, Slurm's
matching OR (sbatch(1), "Matching OR": every allocated node has the same one of the listed
features), over the network nodes of the lowest layer under which at least NODES usable nodes of
the partition sit, the fullest first, at most 64 of them (slurmctld's MAX_FEATURES,
src/slurmctld/node_scheduler.c: the most options of one matching OR); else the layer above; else
nothing (the job goes wherever Slurm finds nodes). On SageMaker HyperPod it prints nothing.
"""

from __future__ import annotations

from fmcluster.model.cluster import ClusterModel, NodeGroup
from fmcluster.node import topology

FILE = "placement.sh"
MAX_OPTIONS = 64  # slurmctld's MAX_FEATURES: the options of one matching OR

PLACEMENT_SH = r"""#!/bin/bash
# placement.sh NODES PARTITION: the sbatch option that keeps a job of NODES nodes of PARTITION
# under one network node (written by `fmcluster jobs`): --constraint=[nnL-A|nnL-B|...], Slurm's
# matching OR over the node features fmcluster's nodes publish (nn1-ID the top layer of EC2's
# instance topology .. nn3-ID or nn4-ID the one a node is connected to), at the lowest layer where
# one network node holds NODES usable nodes, else a layer up; nothing when none does (or on a
# cluster whose scheduler places jobs by topology itself). Use it quoted:
#   c=$(./placement.sh 4 gpu); sbatch ${c:+"$c"} gpu/nccl.sbatch
set -euo pipefail
PLACEMENT={placement}
MAX_OPTIONS={max_options}
(( $# == 2 )) || { echo "usage: $0 NODES PARTITION" >&2; exit 2; }
[[ "$PLACEMENT" == features ]] || exit 0
# one line per node: NAME STATE FEATURES; nodes down, drained or failing cannot take the job, nor
# do powered-down ones count (state suffix ~ powered off, # powering up, % powering down, ! pending
# power down: sinfo(1) NODE STATE CODES): Slurm keeps their features, their next instance may sit
# elsewhere in the network
sinfo -h -N -p "$2" -o '%N %t %f' | awk -v want="$1" -v max="$MAX_OPTIONS" '
  $2 ~ /^(down|drain|drng|fail|maint|inval|unk)/ || $2 ~ /[~#%!]/ { next }
  !seen[$1]++ {
    n = split($3, f, ",")
    for (i = 1; i <= n; i++) if (match(f[i], /^nn[0-9]+-/)) {
      layer = substr(f[i], 3, RLENGTH - 3) + 0
      count[layer, f[i]]++; names[layer] = names[layer] " " f[i]
      if (layer > deepest) deepest = layer
    }
  }
  END {
    for (layer = deepest; layer >= 1; layer--) {
      split(names[layer], list, " "); k = 0; delete pick
      for (i in list)
        if (!(list[i] in taken) && count[layer, list[i]] >= want) { taken[list[i]] = 1; pick[++k] = list[i] }
      if (k == 0) continue
      # the fullest network nodes first (ties by name), at most max
      for (i = 2; i <= k; i++) for (j = i; j > 1; j--) {
        a = pick[j - 1]; b = pick[j]
        if (count[layer, a] > count[layer, b] || (count[layer, a] == count[layer, b] && a < b)) break
        pick[j - 1] = b; pick[j] = a
      }
      if (k > max) k = max
      out = pick[1]; for (i = 2; i <= k; i++) out = out "|" pick[i]
      print (k == 1 ? "--constraint=" out : "--constraint=[" out "]")
      exit
    }
  }'
"""


def placement_sh(model: ClusterModel) -> str:
    """placement.sh of the cluster's kit: it asks by features on AWS PCS, prints nothing elsewhere."""
    return (PLACEMENT_SH.replace("{placement}", topology.placement_plane(model))
            .replace("{max_options}", str(MAX_OPTIONS)))


def placed(model: ClusterModel, group: NodeGroup) -> bool:
    """The group's multi-node jobs are submitted through placement.sh: a multi-node EFA GPU group
    that is no UltraServer group (PCS's block topology places those) on a Slurm plane."""
    return topology.slurm_group_placement(model, group) not in (None, topology.PCS_BLOCK)


SUBMIT_FUNCTION = [
    "# submit NODES PARTITION SCRIPT: sbatch, asking for the tightest network placement (placement.sh)",
    "submit() {",
    "  local constraint",
    f'  constraint=$(./{FILE} "$1" "$2")',
    '  sbatch ${constraint:+"$constraint"} "$3"',
    "}",
]


def submit_command(model: ClusterModel, group: NodeGroup, nodes: int, script: str) -> str:
    """The command that submits `script` (the kit's path) for `nodes` nodes of `group`: through
    placement.sh where the group is `placed` and the job spans nodes, else plain sbatch. A one-line
    form for READMEs and comments (quoted, as placement.sh says)."""
    if nodes > 1 and placed(model, group):
        return f'c=$(./{FILE} {nodes} {group.name}); sbatch ${{c:+"$c"}} {script}'
    return f"sbatch {script}"
