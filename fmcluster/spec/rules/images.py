"""Node image rules: what a node group needs of its own volumes to launch from the node image
fmcluster bakes for it (NAME-images, fmcluster.facts.images)."""

from __future__ import annotations

from typing import Iterator

from fmcluster.facts import images
from fmcluster.spec.diagnostics import Problem, error
from fmcluster.spec.models import ClusterSpec
from fmcluster.spec.rules.registry import rule


@rule
def node_root_volume_holds_the_image(spec: ClusterSpec) -> Iterator[Problem]:
    """A node group that launches from a baked image gets a root volume at least as large as the
    image's root snapshot: EC2 refuses to create a volume smaller than its snapshot, so every launch
    would fail. On AWS PCS the snapshot is the build volume (BUILD_ROOT_VOLUME_GIB); on SageMaker
    HyperPod `root_volume_gib` sizes the volume at /opt/sagemaker and SageMaker sizes the root
    itself; a group with an `ami_id` of its own is held to its image by `preflight`."""
    plane = spec.orchestrator.type
    if plane not in (images.PCS, images.HYPERPOD_SLURM):
        return
    snapshot = images.build_root_volume_gib(plane)
    if snapshot is None:
        return
    for i, group in enumerate(spec.node_groups):
        if group.ami_id is None and group.root_volume_gib < snapshot:
            yield error(("node_groups", i, "root_volume_gib"),
                        f"{group.root_volume_gib} GiB is smaller than the root snapshot of the node image the group "
                        f"launches from ({snapshot} GiB, {spec.name}-images): EC2 would refuse every launch",
                        f"root_volume_gib: {snapshot} or more, or an ami_id of your own with a smaller root snapshot")
