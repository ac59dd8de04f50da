"""What buying capacity in another AZ means for a cluster: reserved capacity lives in one AZ, and a
node group runs in the spec's GPU AZ ID (`availability_zone_id`), so an offering elsewhere is
usable only by moving that AZ ID, and with it what the model places there.

The model places by AZ (fmcluster.model.cluster): the private (and public) subnet of each AZ ID;
the node groups of the spec in the GPU AZ's subnet; the control plane's own groups (login or
system nodes, HyperPod's controller) and the NAT gateway in the region's first AZ ID, which is
the GPU AZ unless that is a Local Zone; the FSx file systems in the GPU AZ's subnet. A subnet's AZ
cannot change in place, so each of them is replaced, the file systems with their data: what
`fmcluster diff OLD NEW` shows, stack by stack, and refuses without --allow-data-loss.

Pure: the spec with its AZ ID moved goes through the spec's rules and the model, nothing else."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from pydantic import ValidationError

from fmcluster.deploy.capacity.spec_edit import Change
from fmcluster.facts import regions
from fmcluster.facts.controlplanes import CAPACITY_BLOCK, RESERVATION
from fmcluster.model import cluster as model
from fmcluster.spec import rules
from fmcluster.spec.diagnostics import dotted
from fmcluster.spec.models import ClusterSpec, NodeGroupSpec

ROLES = {model.LOGIN: "login nodes", model.SYSTEM: "system nodes", model.CONTROLLER: "the Slurm controller"}


@dataclass(frozen=True)
class Moved:
    """A resource the move replaces: its stack, what it is, and whether it holds data."""

    stack: str
    what: str
    data: bool = False


@dataclass(frozen=True)
class AzMove:
    """The spec's GPU AZ ID moved from `old` to `new`: what it replaces, and why it cannot be
    done (`problems`; none: it can)."""

    old: str
    new: str
    moved: tuple[Moved, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        return not self.problems

    @property
    def data_loss(self) -> bool:
        return any(m.data for m in self.moved)


def with_changes(spec: ClusterSpec, changes: Sequence[Change]) -> ClusterSpec:
    """The spec as its file would give it with `changes` made (ValidationError where the models
    refuse it)."""
    data = spec.model_dump(mode="json", by_alias=True, exclude_unset=True)
    for change in changes:
        *parents, last = change.path
        node: Any = data
        for part in parents:
            if isinstance(part, str):
                node = node.setdefault(part, {})
            else:
                node = node[part]
        node[last] = change.value
    return ClusterSpec.model_validate(data)


def new_errors(spec: ClusterSpec, changes: Sequence[Change]) -> list[str]:
    """The spec rules' errors that `changes` bring (or the models' own)."""
    try:
        after = with_changes(spec, changes)
    except ValidationError as exc:
        return [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
    before = set(errors(spec))
    return [e for e in errors(after) if e not in before]


def errors(spec: ClusterSpec) -> list[str]:
    """The spec rules' errors, each as `path: message`."""
    return [f"{dotted(p.path)}: {p.message}" for p in rules.check(spec) if p.severity == "error"]


def az_move(spec: ClusterSpec, new: str, group: Optional[str] = None) -> AzMove:
    """What moving the GPU AZ ID to `new` replaces, for capacity bought for `group`; its problems:
    `new` not an AZ ID of the region, an error of the spec's rules that the move brings, another
    group's reservation held in the old AZ."""
    old = spec.availability_zone_id
    if not (re.match(regions.AZ_ID, new) or re.match(regions.LOCAL_ZONE_ID, new)) \
            or regions.region_of_az_id(new) != spec.region:
        return AzMove(old, new, problems=(f"{new} is no AZ ID of {spec.region}",))
    change = Change(("availability_zone_id",), new)
    held = [f"node group {g.name} draws on {taken} in {old}: a reservation stays in its AZ"
            for g in spec.node_groups if g.name != group and g.capacity.type in (RESERVATION, CAPACITY_BLOCK)
            and (taken := _held(g))]
    problems = new_errors(spec, [change])
    if problems:  # the model is of valid specs only
        return AzMove(old, new, problems=tuple(problems + held))
    return AzMove(old, new, tuple(_moved(spec, with_changes(spec, [change]))), tuple(held))


def _held(group: NodeGroupSpec) -> Optional[str]:
    cap = group.capacity
    return cap.reservation_id or cap.reservation_resource_group_arn or cap.training_plan_arn


def _moved(spec: ClusterSpec, after: ClusterSpec) -> list[Moved]:
    was, now = model.resolve(spec), model.resolve(after)
    stack = {s.key: s.name for s in was.stacks}
    network, storage, cluster = stack[model.NETWORK], stack[model.STORAGE], stack[model.CLUSTER]
    gone = {(s.az_id, s.cidr, s.public) for s in was.subnets} - {(s.az_id, s.cidr, s.public) for s in now.subnets}
    found = [Moved(network, f"the {'public' if public else 'private'} subnet {cidr} of {az}")
             for az, cidr, public in sorted(gone, key=lambda s: (s[2], s[0], s[1]))]
    first_moves = spec.region_zone_ids[:1] != after.region_zone_ids[:1]
    if first_moves:
        found.append(Moved(network, "the NAT gateway"))
    lustre, home = spec.storage.lustre, spec.storage.home
    if lustre is not None:
        found.append(Moved(storage, f"the FSx for Lustre file system ({lustre.storage_capacity_gib} GiB) and "
                                    "what it holds that is not exported to S3", True))
    if home is not None:
        found.append(Moved(storage, "the FSx for OpenZFS home and what it holds", True))
    for own in (was.controller, was.login):
        if own is not None and first_moves:
            found.append(Moved(cluster, ROLES.get(own.role, own.name)))
    found += [Moved(cluster, f"node group {g.name}: its {g.max_count} instances") for g in was.node_groups]
    return found
