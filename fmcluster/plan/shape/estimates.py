"""The plan's records of its estimates: what the cluster costs (fmcluster.plan.cost), its node and
reference images with their build times (fmcluster.plan.images), and how long a first deploy
takes (fmcluster.plan.first_deploy)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from fmcluster.plan.shape.base import Model

PriceStatus = Literal["priced", "unknown", "priced-at-purchase", "usage-based"]


class CostLine(Model):
    item: str
    status: PriceStatus
    unit_hourly_usd: Optional[float]
    hourly_usd_min: Optional[float]
    hourly_usd_max: Optional[float]
    note: Optional[str]


class Cost(Model):
    prices_region: str
    spec_region: str
    prices_as_of: str
    currency: str
    region_note: Optional[str]
    lines: list[CostLine]
    hourly_usd_min: float  # of the priced lines only
    hourly_usd_max: float
    daily_usd_min: float
    daily_usd_max: float
    complete: bool  # every line priced: nothing unknown, bought separately or usage-based
    not_included: list[str]
    sources: dict[str, str]


class ImagePlan(Model):
    """One node image of NAME-images (fmcluster.model.cluster.NodeImage)."""

    key: str = Field(description="PLANE-ARCHITECTURE, such as pcs-x86_64")
    plane: str
    architecture: str
    base_parameter: str = Field(description=(
        "the public SSM parameter of the base image, resolved by Image Builder when the image is built"))
    slurm_version: Optional[str] = Field(description="the Slurm Pyxis is built against; null: the base image's own")
    slurm_prefix: str = Field(description="where that Slurm is on the base image")
    build_instance_type: str = Field(description="the instance Image Builder builds and tests the image on")
    build_instance_hourly_usd: Optional[float] = Field(description=(
        "its On-Demand price from the price table; null: not in the table"))
    revision: int = Field(description="the spec's images.revision")
    encrypted: bool = Field(description="the image's snapshots are encrypted with the storage key")
    groups: list[str] = Field(description="the node groups that launch from it")


class ReferenceImagePlan(Model):
    """One reference GPU image of NAME-reference (fmcluster.model.reference_image.ReferenceImage): the
    container image the acceptance kit's jobs run, built by Image Builder into an ECR repository of
    the cluster's account and region."""

    architecture: str
    repository: str = Field(description="its ECR repository (one image each: a changed recipe is a new one)")
    tag: str = Field(description="the image's tag in that repository (immutable)")
    build_instance_type: str = Field(description="the instance Image Builder builds the image on")
    build_instance_hourly_usd: Optional[float] = Field(description=(
        "its On-Demand price from the price table; null: not in the table"))
    groups: list[str] = Field(description="the GPU node groups whose acceptance jobs run it")


class OwnImagePlan(Model):
    """A node group of a Slurm plane that launches from its own image (`ami_id`), and what that image
    must have: the boot checks it, and a node without it never takes a job."""

    group: str
    ami_id: str
    needs: list[str]


class ImagesPlan(Model):
    """NAME-images: the baked node images of a Slurm control plane (none on Kubernetes)."""

    stack: str
    images: list[ImagePlan]
    first_deploy_minutes: int = Field(description=(
        "an estimate of what building the images adds to a first deploy: they build in parallel, before "
        "NAME-cluster"))
    note: str


class ReferenceImagesPlan(Model):
    """NAME-reference: the reference GPU images of the acceptance kit's jobs, one per architecture of
    the GPU groups (every plane, unless images.reference is false), built after NAME-cluster."""

    stack: str
    images: list[ReferenceImagePlan]
    build_minutes: int = Field(description=(
        "an estimate of how long NAME-reference's builds take: in parallel, after NAME-cluster, which "
        "does not wait for them"))
    note: str


class SpanPlan(Model):
    low_minutes: int
    high_minutes: int


class StepPlan(Model):
    """Something the deploy waits for: how long it takes, and what the figure rests on."""

    what: str
    low_minutes: int
    high_minutes: int
    basis: str = Field(description="'published': the vendor's figure; 'estimate': none is published (see source)")
    source: str = Field(description="the vendor's words and page, or why the figure is an estimate")


class StackTimePlan(Model):
    name: str
    key: str = Field(description="network, storage, observability, images, cluster or reference")
    waits_for: list[str] = Field(description="the stacks it depends on: it starts once they are deployed")
    low_minutes: int
    high_minutes: int
    chains: list[list[StepPlan]] = Field(description=(
        "what takes its time: the chains side by side (the longest counts), each chain's steps one after another"))


class FirstDeployPlan(Model):
    """How long a first deploy takes, stack by stack, and when the first node is ready for a job.
    Low and high figures add where one thing waits for another and take the larger where things
    run side by side."""

    stacks: list[StackTimePlan] = Field(description="every stack, in deploy order")
    one_at_a_time: SpanPlan = Field(description=(
        "every stack after the one before: cdk deploy --all (its --concurrency is 1 unless given), the pipeline"))
    together: SpanPlan = Field(description=(
        "the critical path: each stack as soon as those it waits for are deployed (cdk deploy --concurrency)"))
    concurrency: int = Field(description="the --concurrency that deploys every independent stack at once")
    critical_path: list[str] = Field(description="the stacks of the critical path, first to last")
    cluster_deployed: SpanPlan = Field(description=(
        "from the start of a deploy one stack at a time to the end of NAME-cluster's (NAME-reference, the "
        "reference GPU images, comes after it, and nothing waits for it)"))
    node_group: str = Field(description="the node group whose first node is timed: the first GPU group")
    node_in_stack: str = Field(description="what the cluster stack's creation already includes of that node")
    node_starts: str = Field(description="what starts the node, a clause; empty: the end of the deploy")
    node_steps: list[StepPlan] = Field(description="the node's steps to ready after the deploy, one after another")
    node_ready: SpanPlan
    node_bound_minutes: Optional[int] = Field(description=(
        "the most the control plane gives a new node before it counts it failed (AWS PCS: about 30 minutes "
        "to join Slurm); null: none published"))
    first_job: SpanPlan = Field(description=(
        "from the start of a deploy one stack at a time to the first job: NAME-cluster's end, then the node"))
