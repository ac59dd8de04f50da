"""The whole spec, `ClusterSpec`: its `network`, the sections of the other modules of this
package, the `accepted_warnings`, and the JSON Schema it publishes (`fmcluster schema`).

No `from __future__ import annotations` here (fmcluster.spec.models): pydantic must not
evaluate string annotations when it builds the models.
"""

from typing import Any, Optional

from pydantic import ConfigDict, Field

from fmcluster.facts import regions
from fmcluster.spec.models.base import Model
from fmcluster.spec.models.compute import NodeGroupSpec, OrchestratorSpec
from fmcluster.spec.models.formats import Account, AzId, Cidr, Name, Reason, Region, RuleId, Text
from fmcluster.spec.models.operations import HealthSpec, ImagesSpec, ObservabilitySpec
from fmcluster.spec.models.storage import StorageSpec
from fmcluster.spec.models.workloads import ServingSpec, TeamSpec


class NetworkSpec(Model):
    """The VPC: a private subnet per AZ ID, a public subnet and NAT gateway for egress."""

    vpc_cidr: Cidr = Field(default="10.0.0.0/16", description=(
        "IPv4 CIDR block of the VPC, /16 to /24; the GPU AZ's private subnet is its first half"))
    extra_availability_zone_ids: list[AzId] = Field(default=[], description=(
        "more AZ IDs, each with its own subnet, for control planes that need two (eks, hyperpod-eks); "
        "Availability Zones of the region, not Local Zones"))


class AcceptedWarning(Model):
    """A warning the team accepts on purpose: `validate` reports it as `accepted`, with the
    reason, instead of as a warning. Only warnings can be accepted, never errors."""

    rule: RuleId = Field(description=(
        "the id of a check that reports warnings, as printed in brackets after the warning (README, "
        "What validate checks)"))
    reason: Reason = Field(description="why the risk is accepted, in a line (shown with the finding, for reviewers)")
    path: Optional[Text] = Field(default=None, description=(
        "only the finding at this dotted path, such as node_groups[1].placement_group; default: every finding "
        "of the check"))


class ClusterSpec(Model):
    """One GPU cluster for foundation-model training and inference: its network, storage,
    control plane, node groups and observability."""

    model_config = ConfigDict(title="fmcluster cluster spec (v1)")

    name: Name = Field(description=(
        "[a-z][a-z0-9-]*, at most 32; prefixes every stack (NAME-network, NAME-storage, NAME-cluster, "
        "NAME-observability) and bucket"))
    region: Region = Field(description=(
        "AWS region, such as us-east-1: one of botocore's regions whose AZ IDs fmcluster can name"))
    account: Optional[Account] = Field(default=None, description=(
        "12-digit AWS account id, quoted; without it the stacks are environment-agnostic"))
    availability_zone_id: AzId = Field(description=(
        "AZ ID of the GPU capacity, such as use1-az4, not an AZ name: names differ between accounts, "
        "reservations are bound to the ID; or a Local Zone ID (use1-dfw2-az1), with the control plane in "
        "the extra AZ IDs"))
    network: NetworkSpec = Field(default=NetworkSpec(), description="the VPC")
    storage: StorageSpec = Field(default=StorageSpec(), description="S3 buckets and an FSx for Lustre file system")
    images: ImagesSpec = Field(default=ImagesSpec(), description=(
        "the baked node images of the Slurm control planes (Kubernetes node groups use EKS's own images)"))
    orchestrator: OrchestratorSpec = Field(description="the control plane")
    node_groups: list[NodeGroupSpec] = Field(min_length=1, description="the node groups, at least one")
    observability: ObservabilitySpec = Field(default=ObservabilitySpec(), description="metrics, dashboards and alerts")
    tags: dict[Text, Text] = Field(default={}, description="tags on every resource")
    protect: bool = Field(default=False, description=(
        "termination protection on every stack, not only NAME-storage (which always has it)"))
    serving: Optional[ServingSpec] = Field(default=None, description=(
        "a model served on a GPU node group (none by default)"))
    health: HealthSpec = Field(default=HealthSpec(), description=(
        "continuous node health checks, automatic replacement of faulty nodes and deep checks of new ones"))
    teams: list[TeamSpec] = Field(default=[], description=(
        "the teams that share the cluster, each with its guaranteed GPUs and priority (none: every user "
        "shares one queue, first come, first served)"))
    accepted_warnings: list[AcceptedWarning] = Field(default=[], description=(
        "warnings the team accepts on purpose, each with its check's id and a reason"))

    @property
    def availability_zone_ids(self) -> list[str]:
        return [self.availability_zone_id, *self.network.extra_availability_zone_ids]

    @property
    def local_zone(self) -> bool:
        """The GPU nodes are in a Local Zone: the control plane, NAT gateway and public subnets are
        in the extra (regular) AZ IDs."""
        return regions.is_local_zone(self.availability_zone_id)

    @property
    def region_zone_ids(self) -> list[str]:
        """The cluster's AZ IDs that are Availability Zones of the region (not Local Zones)."""
        return [az for az in self.availability_zone_ids if not regions.is_local_zone(az)]

    @property
    def managed_nodes(self) -> int:
        """Every node the control plane manages: the node groups at their maximum and the login
        nodes (what sizes an AWS PCS cluster and a HyperPod Slurm controller)."""
        return sum(g.max_nodes for g in self.node_groups) + self.orchestrator.login.count

    def resolved(self) -> dict[str, Any]:
        """The spec with every default filled in, as a plain mapping (what `plan` shows)."""
        return self.model_dump(mode="json", by_alias=True)


KUBERNETES_PLANES = ("eks", "hyperpod-eks")
# Fields only some control planes read (dotted paths, `[]` for every item of a list), as their
# descriptions say: a plan of another plane leaves them out of the resolved spec where the file
# does not set them.
ONLY_FOR: dict[str, tuple[str, ...]] = {
    "images": ("pcs", "hyperpod-slurm"),
    "orchestrator.admin_role_arn": KUBERNETES_PLANES,
    "orchestrator.endpoint_access": KUBERNETES_PLANES,
    "orchestrator.public_access_cidrs": KUBERNETES_PLANES,
    "orchestrator.namespace": KUBERNETES_PLANES,
    "node_groups[].labels": KUBERNETES_PLANES,
    "node_groups[].capacity.training_plan_arn": ("hyperpod-slurm", "hyperpod-eks"),
}


def json_schema() -> dict[str, Any]:
    schema = ClusterSpec.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://fmcluster.dev/schema/cluster-spec-v1.json"
    return schema
