"""`fmcluster plan`: what a spec will build, what it can do and what it costs, before anyone deploys.

`build` makes the plan (the records of fmcluster.plan.shape) from the spec's resolved model, a
section at a time (fmcluster.plan.compute, cluster, health, cost, images, first_deploy, capacity), and marks
what the file leaves to defaults. Sources and details: docs/research-notes.md,
"fmcluster/plan/report.py"."""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from fmcluster.facts import prices
from fmcluster.model import cluster as model
from fmcluster.plan import capacity, cluster, compute, health, images
from fmcluster.plan import first_deploy as first_deploy_plan
from fmcluster.plan.cost import cost
from fmcluster.plan.shape.plan import SCHEMA_VERSION, Plan, json_schema
from fmcluster.spec.models import ONLY_FOR, ClusterSpec

# what `fmcluster plan` and its tests use of the plan: its record, its builder, its JSON Schema
__all__ = ["DEFAULT_CHECKPOINT_PARAMS", "Plan", "build", "json_schema"]


DEFAULT_CHECKPOINT_PARAMS = 70e9


def _for_plane(resolved: dict[str, Any], defaulted: list[str], plane: str) -> tuple[dict[str, Any], list[str]]:
    """The resolved spec without the fields `plane` does not read (spec.models.ONLY_FOR) that the
    file leaves to defaults, and the defaulted paths left."""
    gone: list[str] = []

    def prune(value: Any, path: str) -> Any:
        if isinstance(value, list):
            return [prune(item, f"{path}[{i}]") for i, item in enumerate(value)]
        if not isinstance(value, dict):
            return value
        kept = {}
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            general = re.sub(r"\[\d+\]", "[]", child)
            if plane not in ONLY_FOR.get(general, (plane,)) and _all_defaulted(item, child, set(defaulted)):
                gone.append(child)
                continue
            kept[key] = prune(item, child)
        return kept

    pruned = prune(resolved, "")
    return pruned, [d for d in defaulted if not any(d == g or d.startswith((g + ".", g + "[")) for g in gone)]


def _all_defaulted(value: Any, path: str, defaulted: set[str]) -> bool:
    """Whether the file leaves `value` (at `path`), and everything in it, to defaults."""
    if path in defaulted:
        return True
    if isinstance(value, dict) and value:
        return all(_all_defaulted(v, f"{path}.{k}", defaulted) for k, v in value.items())
    return False


def _defaulted(resolved: Any, raw: Any, path: str = "") -> list[str]:
    """Dotted paths of the leaves of `resolved` that `raw` (the file as written) does not give."""
    if isinstance(resolved, dict):
        out: list[str] = []
        for key, value in resolved.items():
            child = f"{path}.{key}" if path else key
            if not isinstance(raw, dict) or key not in raw:
                out += _defaulted(value, None, child) if isinstance(value, dict) and value else [child]
            else:
                out += _defaulted(value, raw[key], child)
        return out
    if isinstance(resolved, list) and isinstance(raw, list):
        return [p for i, item in enumerate(resolved)
                for p in _defaulted(item, raw[i] if i < len(raw) else None, f"{path}[{i}]")]
    return []


def build(spec: ClusterSpec, raw: dict[str, Any] | None = None, checkpoint_params: float | None = None,
          reservations: Iterable[Mapping[str, Any]] = ()) -> Plan:
    """The plan of a valid spec, from its resolved model (fmcluster.model.cluster). `raw` is the spec
    file as written (to tell defaults apart); `reservations` what `fmcluster preflight` read of
    its reservations, Capacity Blocks and training plans (its JSON's "reservations"), for their
    windows and prices."""
    m = model.resolve(spec)
    params = checkpoint_params or DEFAULT_CHECKPOINT_PARAMS
    read = {str(r.get("id")): r for r in reservations}
    groups = [compute.node_group(m, g, s, read) for g, s in zip(m.node_groups, spec.node_groups, strict=True)]
    resolved = spec.resolved()
    defaulted = _defaulted(resolved, raw if raw is not None else resolved)
    resolved, defaulted = _for_plane(resolved, defaulted, spec.orchestrator.type)
    domains = [g.nvlink_domain for g in groups if g.nvlink_domain]
    table = prices.table()
    return Plan(
        schema_version=SCHEMA_VERSION, name=spec.name, region=spec.region, account=spec.account,
        availability_zone_id=spec.availability_zone_id, node_groups=groups,
        total=compute.total([g.at_max for g in groups]), nvlink_domains=sum(d.domains for d in domains),
        largest_nvlink_domain_gpus=max((d.gpus for d in domains if d.domains), default=0),
        storage=cluster.storage(m, params), network=cluster.network(m),
        control_plane=cluster.control_plane(m), observability=cluster.observability(m), stacks=cluster.stacks(m),
        cost=cost(m, table), resolved_spec=resolved,
        defaulted=defaulted, serving=compute.served(m),
        images=images.images(m, table), own_images=images.own_images(m),
        reference_images=images.reference_images(m, table), teams=cluster.teams(m, table),
        health=health.health(m),
        first_deploy=first_deploy_plan.build(m), capacity=capacity.capacities(m, read, table),
    )
