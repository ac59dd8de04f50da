"""Where fmcluster puts things on a node: paths and the Slurm settings of the IMEX prolog. Facts
the spec's rules (mount points a file system may not take), the model (the cluster's Slurm
settings) and the node scripts share."""

from __future__ import annotations

SCRATCH_PATH = "/scratch"  # the instance-store NVMe volume
DLAMI_NVME_PATH = "/opt/dlami/nvme"  # the Deep Learning AMIs' own instance-store mount
FMCLUSTER_LIB = "/usr/local/lib/fmcluster"
HOME_PATH = "/home"  # the shared home's mount point (storage.home, or Lustre mounted there)
# The IMEX Slurm prolog on every compute node of a cluster with UltraServer node groups, and the
# cluster's Slurm settings that run it on each node of an allocation before the job starts (the
# AWS PCS User Guide, "Configure UltraServer instances": Prolog, PrologFlags=Alloc,NoHold)
IMEX_PROLOG = f"{FMCLUSTER_LIB}/imex-prolog"
IMEX_PROLOG_SETTINGS = {"Prolog": IMEX_PROLOG, "PrologFlags": "Alloc,NoHold"}
# The node's textfile metrics (with observability on): written by the node's user data (managed
# node groups) or lifecycle hook (HyperPod) and the Slurm nodes' collectors, read by the node
# exporter's textfile collector.
TEXTFILE_DIR = "/var/lib/fmcluster/textfile-node"
