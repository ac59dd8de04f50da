"""The NAME-cluster stack for the spec's control plane."""

from __future__ import annotations


class ControlPlaneNotBuilt(Exception):
    """The spec is valid, but this version of fmcluster cannot synthesize its control plane yet."""


def cluster_stack(scope, stack_id: str, *, spec, network, storage, observability=None, **props):
    """`observability`: the NAME-observability stack, or None; the EKS control planes read its
    `workspace_arn` for their managed scraper, the Slurm planes `workspace_arn` and
    `remote_write_url` for the nodes' Prometheus agent. `props`: stack properties (env, stack_name)."""
    kind = spec.orchestrator.type
    if kind == "pcs":
        from stacks.pcs import PcsClusterStack

        return PcsClusterStack(scope, stack_id, spec=spec, network=network, storage=storage,
                               observability=observability, **props,
                               description=f"fmcluster {spec.name}: Slurm on AWS PCS and GPU node groups")
    if kind == "eks":
        from stacks.eks import EksClusterStack

        return EksClusterStack(scope, stack_id, spec=spec, network=network, storage=storage,
                               observability=observability, **props,
                               description=f"fmcluster {spec.name}: Amazon EKS and GPU node groups")
    if kind == "hyperpod-slurm":
        from stacks.hyperpod import HyperPodSlurmStack

        return HyperPodSlurmStack(scope, stack_id, spec=spec, network=network, storage=storage,
                                  observability=observability, **props,
                                  description=f"fmcluster {spec.name}: Slurm on Amazon SageMaker HyperPod")
    if kind == "hyperpod-eks":
        from stacks.hyperpod_eks import HyperPodEksStack

        return HyperPodEksStack(scope, stack_id, spec=spec, network=network, storage=storage,
                                observability=observability, **props,
                                description=f"fmcluster {spec.name}: SageMaker HyperPod on Amazon EKS")
    raise ControlPlaneNotBuilt(f"orchestrator.type {kind} cannot be synthesized yet")
