"""The NAME-cluster stack for the spec's control plane."""

from __future__ import annotations

import importlib


# orchestrator.type -> (module, stack class, what the stack holds). Modules are imported only for
# the control plane a spec names (each pulls in its own aws-cdk-lib modules).
STACKS = {
    "pcs": ("stacks.pcs", "PcsClusterStack", "Slurm on AWS PCS and GPU node groups"),
    "eks": ("stacks.eks", "EksClusterStack", "Amazon EKS and GPU node groups"),
    "hyperpod-slurm": ("stacks.hyperpod", "HyperPodSlurmStack", "Slurm on Amazon SageMaker HyperPod"),
    "hyperpod-eks": ("stacks.hyperpod_eks", "HyperPodEksStack", "SageMaker HyperPod on Amazon EKS"),
}


def cluster_stack(scope, stack_id: str, *, spec, network, storage, observability=None, **props):
    """`observability`: the NAME-observability stack, or None; the EKS control planes read its
    `workspace_arn` for their managed scraper, the Slurm planes `workspace_arn` and
    `remote_write_url` for the nodes' Prometheus agent. `props`: stack properties (env, stack_name)."""
    module, class_name, holds = STACKS[spec.orchestrator.type]
    stack_class = getattr(importlib.import_module(module), class_name)
    return stack_class(scope, stack_id, spec=spec, network=network, storage=storage, observability=observability,
                       **props, description=f"fmcluster {spec.name}: {holds}")
