#!/bin/sh
# Slurm prolog of the nodes that are not UltraServer instances, in a cluster that has some: the
# cluster's Prolog= (the IMEX prolog, imex-prolog.sh) is one path for every node, and a node
# without a program there would fail every job's prolog and be drained. Nothing to do here
# (`--check` too); installed by fmcluster/node/scripts/boot/prolog.sh at the same path.
exit 0
