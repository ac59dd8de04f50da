"""The tags of every resource of a cluster: `fmcluster:cluster` and the spec's `tags`.

stacks/app.py applies them to each stack with `cdk.Tags.of`, which reaches the typed resources;
the stacks give them to the constructs made of plain `cdk.CfnResource`s (constructs_lib/cfn.py:
network, placement groups, buckets, file system, alert topic), which `cdk.Tags.of` does not reach.
"""

from __future__ import annotations

from fmcluster.spec import ClusterSpec

CLUSTER_TAG = "fmcluster:cluster"


def cluster_tags(spec: ClusterSpec) -> dict[str, str]:
    return {CLUSTER_TAG: spec.name, **spec.tags}
