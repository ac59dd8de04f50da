"""Compose the stacks of one cluster spec into a CDK app."""

from __future__ import annotations

import aws_cdk as cdk

from fmcluster.spec import ClusterSpec


def environment(spec: ClusterSpec) -> cdk.Environment:
    """Region always; account only when the spec names one (else environment-agnostic)."""
    return cdk.Environment(account=spec.account, region=spec.region)


def build(app: cdk.App, spec: ClusterSpec) -> dict[str, cdk.Stack]:
    """Add the stacks of `spec` to `app`: NAME-network, NAME-storage, NAME-observability (when
    observability.prometheus or grafana is on), NAME-cluster."""
    from stacks.cluster import cluster_stack
    from stacks.network import NetworkStack
    from stacks.storage import StorageStack

    env = environment(spec)
    tags = {"fmcluster:cluster": spec.name, **spec.tags}
    network = NetworkStack(app, f"{spec.name}-network", spec=spec, env=env,
                           description=f"fmcluster {spec.name}: VPC, subnets by AZ ID, EFA security group")
    storage = StorageStack(app, f"{spec.name}-storage", spec=spec, network=network, env=env,
                           termination_protection=True,
                           description=f"fmcluster {spec.name}: S3 buckets and FSx for Lustre (retained)")
    observability = None
    if spec.observability.prometheus or spec.observability.grafana:
        from stacks.observability import ObservabilityStack

        observability = ObservabilityStack(
            app, f"{spec.name}-observability", spec=spec, network=network, storage=storage, env=env,
            description=f"fmcluster {spec.name}: Prometheus, alert rules, alarms"
                        + (", Grafana" if spec.observability.grafana else ""))
    # The cluster stack reads the workspace ARN (an export of NAME-observability): observability
    # is made first, and never reads from the cluster stack.
    cluster = cluster_stack(app, f"{spec.name}-cluster", spec=spec, network=network, storage=storage, env=env,
                            observability=observability)
    stacks = {s.stack_name: s for s in (network, storage, observability, cluster) if s is not None}
    for stack in stacks.values():
        for key, value in tags.items():
            cdk.Tags.of(stack).add(key, value)
        if spec.protect:
            stack.termination_protection = True
    return stacks
