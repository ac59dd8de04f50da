"""Compose the stacks of one cluster spec into a CDK app."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from fmcluster.spec import ClusterSpec


def environment(spec: ClusterSpec) -> cdk.Environment:
    """Region always; account only when the spec names one (else environment-agnostic)."""
    return cdk.Environment(account=spec.account, region=spec.region)


def build(app: Construct, spec: ClusterSpec) -> dict[str, cdk.Stack]:
    """Add the stacks of `spec` to `app` (an App, or a Stage of the GitOps pipeline): NAME-network,
    NAME-storage, NAME-observability (when observability.prometheus or grafana is on), NAME-cluster.
    Stack names are given explicitly, so that inside a Stage they are the same as in an App (a
    Stage would otherwise prefix them with its own name)."""
    from stacks.cluster import cluster_stack
    from stacks.network import NetworkStack
    from stacks.storage import StorageStack

    env = environment(spec)
    tags = {"fmcluster:cluster": spec.name, **spec.tags}
    network = NetworkStack(app, f"{spec.name}-network", spec=spec, env=env, stack_name=f"{spec.name}-network",
                           description=f"fmcluster {spec.name}: VPC, subnets by AZ ID, EFA security group")
    storage = StorageStack(app, f"{spec.name}-storage", spec=spec, network=network, env=env,
                           stack_name=f"{spec.name}-storage",
                           termination_protection=True,
                           description=f"fmcluster {spec.name}: S3 buckets and FSx for Lustre (retained)")
    observability = None
    if spec.observability.prometheus or spec.observability.grafana:
        from stacks.observability import ObservabilityStack

        observability = ObservabilityStack(
            app, f"{spec.name}-observability", spec=spec, network=network, storage=storage, env=env,
            stack_name=f"{spec.name}-observability",
            description=f"fmcluster {spec.name}: Prometheus, alert rules, alarms"
                        + (", Grafana" if spec.observability.grafana else ""))
    # The cluster stack reads the workspace ARN (an export of NAME-observability): observability
    # is made first, and never reads from the cluster stack.
    cluster = cluster_stack(app, f"{spec.name}-cluster", spec=spec, network=network, storage=storage, env=env,
                            stack_name=f"{spec.name}-cluster", observability=observability)
    stacks = {s.stack_name: s for s in (network, storage, observability, cluster) if s is not None}
    for stack in stacks.values():
        for key, value in tags.items():
            cdk.Tags.of(stack).add(key, value)
        if spec.protect:
            stack.termination_protection = True
    from stacks import nag

    if nag.requested(app):  # cdk synth -c nag=true: cdk-nag AwsSolutions, suppressions in stacks/nag.py
        nag.apply(stacks.values())
    return stacks
