"""Compose the stacks of one cluster into a CDK app: the model's stacks (fmcluster.model.cluster), in
dependency order."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from fmcluster.model import cluster as cluster_model
from fmcluster.spec.models import ClusterSpec
from fmcluster_cdk import nag
from fmcluster_cdk.stacks.cluster import cluster_stack
from fmcluster_cdk.stacks.images import ImagesStack
from fmcluster_cdk.stacks.network import NetworkStack
from fmcluster_cdk.stacks.observability import ObservabilityStack
from fmcluster_cdk.stacks.reference import ReferenceStack
from fmcluster_cdk.stacks.storage import StorageStack


def environment(spec: ClusterSpec) -> cdk.Environment:
    """Region always; account only when the spec names one (else environment-agnostic)."""
    return cdk.Environment(account=spec.account, region=spec.region)


def build(app: Construct, spec: ClusterSpec) -> dict[str, cdk.Stack]:
    """Add the stacks of `spec` to `app` (an App, or a Stage of the GitOps pipeline): those of its
    model (NAME-network, NAME-storage, NAME-observability when it is observed, NAME-images when its
    Slurm groups launch from baked node images, NAME-cluster, NAME-reference when it builds reference
    GPU images), with the model's names, descriptions, termination protection and tags. Stack names
    are given explicitly, so that inside a Stage they are the same as in an App (a Stage would
    otherwise prefix them with its own name)."""
    m = cluster_model.resolve(spec)
    env = environment(spec)

    def name(key: str) -> str:
        stack = m.stack(key)
        assert stack is not None  # every model has the stacks named here (observability when observed)
        return stack.name

    def props(key: str) -> dict[str, Any]:
        stack = m.stack(key)
        assert stack is not None
        return dict(env=env, stack_name=stack.name, description=stack.description,
                    termination_protection=stack.termination_protection)

    network = NetworkStack(app, name("network"), model=m, **props("network"))
    storage = StorageStack(app, name("storage"), model=m, network=network, **props("storage"))
    observability = None
    if m.observed:
        observability = ObservabilityStack(app, name("observability"), model=m, network=network,
                                           storage=storage, **props("observability"))
    images = None
    if m.stack(cluster_model.IMAGES) is not None:
        images = ImagesStack(app, name(cluster_model.IMAGES), model=m, network=network, storage=storage,
                             **props(cluster_model.IMAGES))
        # In the model's order (after storage, whose key may encrypt the images, and observability):
        # one deploy order for `cdk deploy`, the pipeline's stages and the plan.
        images.add_stack_dependency(storage)
        if observability is not None:
            images.add_stack_dependency(observability)
    # The cluster stack reads the workspace ARN (an export of NAME-observability) and the images' AMI
    # ids (outputs of NAME-images): both are made first, and never read from the cluster stack.
    cluster = cluster_stack(app, name("cluster"), model=m, network=network, storage=storage,
                            observability=observability, images=images, **props("cluster"))
    # After storage, always: its nodes and pods read and write the buckets, whose names the cluster
    # stack derives rather than references (no reference makes the order where only buckets are
    # stored), so `cdk deploy --concurrency N` or a lone `cdk deploy NAME-cluster` could otherwise
    # start nodes before their buckets exist.
    cluster.add_stack_dependency(storage)
    reference = None
    if m.stack(cluster_model.REFERENCE) is not None:
        # The reference GPU images read NAME-network only (the build's subnet and security group),
        # and nothing reads them: the nodes pull them by name, by jobs, after the deploy (their
        # repositories' ARNs are derived: fmcluster_cdk/stacks/reference.py). It waits for the
        # cluster, in the model's order, because without that `cdk deploy --all` (one stack at a
        # time: it takes the stacks in the order they become ready) would build it right after the
        # network, and a CDK Pipelines stage (each tranche of the dependency graph after the one
        # before) would hold the cluster back for it: the cluster comes first, a failed build
        # leaves it as it is, and with --concurrency the build runs after the cluster as well.
        reference = ReferenceStack(app, name(cluster_model.REFERENCE), model=m, network=network,
                                   **props(cluster_model.REFERENCE))
        reference.add_stack_dependency(cluster)
    made: list[cdk.Stack] = [network, storage, *([observability] if observability else []),
                             *([images] if images else []), cluster, *([reference] if reference else [])]
    stacks = {s.stack_name: s for s in made}
    for stack in stacks.values():
        for key, value in m.tags.items():
            cdk.Tags.of(stack).add(key, value)
    if nag.requested(app):  # cdk synth -c nag=true: cdk-nag AwsSolutions, suppressions in fmcluster_cdk/nag.py
        nag.apply(stacks.values())
    return stacks
