"""The NAME-cluster stack for the spec's control plane."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Optional

import aws_cdk as cdk
from constructs import Construct

from fmcluster.model.cluster import ClusterModel
from fmcluster_cdk.stacks.refs import ImagesRefs, NetworkRefs, ObservabilityRefs, StorageRefs

# orchestrator.type -> (module, stack class). Modules are imported only for the control plane a
# spec names (each pulls in its own aws-cdk-lib modules).
STACKS = {
    "pcs": ("fmcluster_cdk.stacks.pcs", "PcsClusterStack"),
    "eks": ("fmcluster_cdk.stacks.eks", "EksClusterStack"),
    "hyperpod-slurm": ("fmcluster_cdk.stacks.hyperpod", "HyperPodSlurmStack"),
    "hyperpod-eks": ("fmcluster_cdk.stacks.hyperpod_eks", "HyperPodEksStack"),
}


def cluster_stack(scope: Construct, stack_id: str, *, model: ClusterModel, network: NetworkRefs, storage: StorageRefs,
                  observability: Optional[ObservabilityRefs] = None, images: Optional[ImagesRefs] = None,
                  **props: Any) -> cdk.Stack:
    """`model`: the cluster (fmcluster.model.cluster.ClusterModel). `observability`: the
    NAME-observability stack, or None; the EKS control planes read its `workspace_arn` for their
    managed scraper, the Slurm planes `workspace_arn` and `remote_write_url` for the nodes'
    Prometheus agent. `images`: the NAME-images stack, or None (Kubernetes planes, or no group
    launches from a baked image); the Slurm planes launch their groups (`NodeGroup.image`) from its
    `image_ids`. `props`: stack properties (env, stack_name, description)."""
    module, class_name = STACKS[model.control_plane.type]
    stack_class: Callable[..., cdk.Stack] = getattr(importlib.import_module(module), class_name)
    if images is not None:
        props["images"] = images
    return stack_class(scope, stack_id, model=model, network=network, storage=storage, observability=observability,
                       **props)
