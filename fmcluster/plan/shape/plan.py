"""The plan: the record `fmcluster plan` builds (fmcluster.plan.report) and renders, and the JSON
Schema of it that `fmcluster plan --json-schema` publishes (docs/plan.schema.json)."""

from __future__ import annotations

from typing import Any, Optional

from fmcluster.facts import inference
from fmcluster.plan.shape.base import Model
from fmcluster.plan.shape.capacity import CapacityPlan
from fmcluster.plan.shape.cluster import (
    ControlPlanePlan,
    HealthPlan,
    NetworkPlan,
    ObservabilityPlan,
    StackPlan,
    StoragePlan,
    TeamPlan,
)
from fmcluster.plan.shape.estimates import Cost, FirstDeployPlan, ImagesPlan, OwnImagePlan, ReferenceImagesPlan
from fmcluster.plan.shape.nodes import NodeGroupPlan, Resources, ServingPlan

SCHEMA_VERSION = "fmcluster.plan/v1"


class Plan(Model):
    schema_version: str
    name: str
    region: str
    account: Optional[str]
    availability_zone_id: str
    node_groups: list[NodeGroupPlan]
    total: Resources
    nvlink_domains: int  # the NVLink domains of all node groups at their maximum (each group's `domains`)
    largest_nvlink_domain_gpus: int  # the GPUs of the largest of them; 0: no NVLink
    storage: StoragePlan
    network: NetworkPlan
    control_plane: ControlPlanePlan
    observability: ObservabilityPlan
    stacks: list[StackPlan]
    cost: Cost
    resolved_spec: dict[str, Any]
    defaulted: list[str]  # dotted paths of the resolved spec that the file leaves to defaults
    # the serving rule's figures: vLLM's share of GPU memory the standard sizes are placed at, and
    # fmcluster's KV-cache floor (fmcluster.facts.inference)
    serving_gpu_memory_utilization: float = inference.GPU_MEMORY_UTILIZATION
    serving_kv_cache_floor: float = inference.KV_CACHE_RESERVE
    serving: Optional[ServingPlan] = None  # the spec's serving section; None without one
    images: Optional[ImagesPlan] = None  # NAME-images; None where the nodes launch from no baked image
    own_images: list[OwnImagePlan] = []  # the Slurm groups with an ami_id of their own
    reference_images: Optional[ReferenceImagesPlan] = None  # NAME-reference; None where it builds none
    teams: list[TeamPlan] = []  # the teams that share the cluster (fmcluster.model.teams)
    health: Optional[HealthPlan] = None  # how the GPU nodes are kept healthy; None without GPU nodes
    first_deploy: FirstDeployPlan  # how long a first deploy takes, stack by stack, and the first node
    # the node groups' reserved capacity: window and cost (as preflight read them), its end, its countdown
    capacity: list[CapacityPlan] = []


def json_schema() -> dict[str, Any]:
    schema = Plan.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://fmcluster.dev/schema/plan-v1.json"
    return schema
