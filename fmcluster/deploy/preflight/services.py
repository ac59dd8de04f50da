"""The services the cluster is built on answer in the region: FSx (for the Lustre file system and
the OpenZFS home, whose availability in the AZ only the create call tells), and the control
plane (AWS PCS, Amazon EKS, SageMaker HyperPod)."""

from __future__ import annotations

from functools import partial
from typing import Iterable

from fmcluster.deploy.preflight import endpoints
from fmcluster.deploy.preflight.context import FAIL, WARN, Check, Context
from fmcluster.deploy.preflight.endpoints import ListCall, answers
from fmcluster.deploy.preflight.guard import guard

CONTROL_PLANE_SERVICES: dict[str, list[ListCall]] = {
    # orchestrator.type -> (service, list call, kwargs, the list its answer holds, what)
    "pcs": [("pcs", "list_clusters", {"maxResults": 1}, "clusters", "AWS PCS")],
    "eks": [("eks", "list_clusters", {"maxResults": 1}, "clusters", "Amazon EKS")],
    "hyperpod-slurm": [("sagemaker", "list_clusters", {"MaxResults": 1}, "ClusterSummaries", "SageMaker HyperPod")],
    "hyperpod-eks": [("sagemaker", "list_clusters", {"MaxResults": 1}, "ClusterSummaries", "SageMaker HyperPod"),
                     ("eks", "list_clusters", {"maxResults": 1}, "clusters", "Amazon EKS")],
}


def lustre(ctx: Context) -> Iterable[Check]:
    fs = ctx.spec.storage.lustre
    if fs is None:
        return
    if "FileSystems" not in ctx.client("fsx").describe_file_systems(MaxResults=1):
        raise KeyError("FileSystems")  # parsed, but not FSx's answer
    kind = fs.deployment_type + (" with EFA" if fs.efa else "")
    yield Check(f"FSx {kind}", WARN, f"FSx reachable in {ctx.spec.region}, but no read-only API tells whether "
                f"{kind} can be created in {ctx.spec.availability_zone_id}: only the create call does",
                "see 'Availability' in the FSx for Lustre User Guide; a refused create rolls back "
                f"{ctx.spec.name}-storage only")


def home(ctx: Context) -> Iterable[Check]:
    """The shared home (storage.home): FSx answers, and the deployment type's availability in
    the AZ, which only the create call tells (the FSx for OpenZFS User Guide, "Deployment type
    availability": SINGLE_AZ_2 and the HA types are not in every region)."""
    home = ctx.spec.storage.home
    if home is None:
        return
    if "FileSystems" not in ctx.client("fsx").describe_file_systems(MaxResults=1):
        raise KeyError("FileSystems")  # parsed, but not FSx's answer
    yield Check(f"FSx for OpenZFS {home.deployment_type}", WARN,
                f"FSx reachable in {ctx.spec.region}, but no read-only API tells whether an OpenZFS "
                f"{home.deployment_type} file system can be created in {ctx.spec.availability_zone_id}: only "
                "the create call does",
                "see 'Deployment type availability' in the FSx for OpenZFS User Guide; a refused create rolls "
                f"back {ctx.spec.name}-storage only")


def control_plane(ctx: Context) -> Iterable[Check]:
    for service, call, kwargs, key, what in CONTROL_PLANE_SERVICES[ctx.spec.orchestrator.type]:
        if endpoints.offered_in(service, ctx.spec.region) is False:
            yield Check(what, FAIL, f"{what} is not offered in {ctx.spec.region} (botocore's endpoint data)",
                        "choose a region where the service runs")
            continue
        yield from guard(ctx, what, partial(answers, ctx, service, call, kwargs, key, what))
