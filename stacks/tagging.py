"""The tags of every resource of a cluster: `fmcluster:cluster` and the spec's `tags`.

stacks/app.py applies them to each stack with `cdk.Tags.of`, which reaches the typed resources;
the network and storage stacks, made of plain `cdk.CfnResource`s (constructs_lib/cfn.py) that
`cdk.Tags.of` does not reach, give them to their constructs.
"""

from __future__ import annotations

from fmcluster.spec import ClusterSpec

CLUSTER_TAG = "fmcluster:cluster"


def cluster_tags(spec: ClusterSpec) -> dict[str, str]:
    return {CLUSTER_TAG: spec.name, **spec.tags}
