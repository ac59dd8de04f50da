"""The checks of the update policy's cases: whether a case holds for OLD and NEW, each a function
of the two specs (fmcluster.spec.update_policy.cases.Check)."""

from __future__ import annotations

from fmcluster.facts.placement import placement_for
from fmcluster.spec.models import ClusterSpec
from fmcluster.spec.update_policy.cases import HYPERPOD_SLURM, KUBERNETES, SLURM


def kubernetes_update_refused(before: str, after: str) -> str | None:
    """Why Amazon EKS refuses to move a cluster from one Kubernetes version to another ("1.33" to
    "1.35"), or None: it updates the control plane one minor version at a time, and never down
    (Amazon EKS User Guide, "Update existing cluster to new Kubernetes version")."""
    try:
        old, new = (tuple(int(n) for n in v.split(".")) for v in (before, after))
    except ValueError:
        return None  # not a version the templates write literally
    if new < old:
        return f"the Kubernetes version goes down from {before} to {after}: EKS cannot downgrade a cluster"
    if new[:1] != old[:1] or new[1:2] > tuple(n + 1 for n in old[1:2]):
        return (f"the Kubernetes version goes from {before} to {after}: EKS updates a cluster one minor version at "
                "a time")
    return None


def kubernetes_version_refused(old: ClusterSpec, new: ClusterSpec) -> bool:
    before, after = old.orchestrator.version, new.orchestrator.version
    return before is not None and after is not None and kubernetes_update_refused(before, after) is not None


def both_name_an_account(old: ClusterSpec, new: ClusterSpec) -> bool:
    return bool(old.account and new.account)


def extra_zone_goes(old: ClusterSpec, new: ClusterSpec) -> bool:
    return any(z not in new.network.extra_availability_zone_ids for z in old.network.extra_availability_zone_ids)


def bucket_goes(old: ClusterSpec, new: ClusterSpec) -> bool:
    return bool({b.name for b in old.storage.buckets} - {b.name for b in new.storage.buckets})


def lustre_goes(old: ClusterSpec, new: ClusterSpec) -> bool:
    return old.storage.lustre is not None and new.storage.lustre is None


def lustre_shrinks(old: ClusterSpec, new: ClusterSpec) -> bool:
    before, after = old.storage.lustre, new.storage.lustre
    return before is not None and after is not None and after.storage_capacity_gib < before.storage_capacity_gib


def link_goes(old: ClusterSpec, new: ClusterSpec) -> bool:
    def paths(spec: ClusterSpec) -> set[str]:
        return {link.path for link in spec.storage.lustre.links} if spec.storage.lustre else set()

    return bool(paths(old) - paths(new))


def home_goes(old: ClusterSpec, new: ClusterSpec) -> bool:
    return old.storage.home is not None and new.storage.home is None


def home_added_or_changed(old: ClusterSpec, new: ClusterSpec) -> bool:
    return new.storage.home is not None and old.storage.home != new.storage.home


def home_shrinks(old: ClusterSpec, new: ClusterSpec) -> bool:
    before, after = old.storage.home, new.storage.home
    return before is not None and after is not None and after.storage_capacity_gib < before.storage_capacity_gib


def kubernetes_home_with_teams(old: ClusterSpec, new: ClusterSpec) -> bool:
    """A shared home whose teams have volumes of their own (Kubernetes: one per team)."""
    return old.storage.home is not None and bool(old.teams)


def team_volume_goes(old: ClusterSpec, new: ClusterSpec) -> bool:
    return kubernetes_home_with_teams(old, new) and bool({t.name for t in old.teams} - {t.name for t in new.teams})


def last_team_goes(old: ClusterSpec, new: ClusterSpec) -> bool:
    return bool(old.teams) and not new.teams


def plane_data_goes(old: ClusterSpec, new: ClusterSpec) -> bool:
    """The old control plane's own data goes with it: hyperpod-slurm's accounting database (its
    teams), or a Kubernetes plane's volumes of the home for its teams."""
    before, after = old.orchestrator.type, new.orchestrator.type
    return bool(old.teams) and ((before == HYPERPOD_SLURM and after != HYPERPOD_SLURM)
                                or (before in KUBERNETES and after not in KUBERNETES and old.storage.home is not None))


def leaves_slurm(old: ClusterSpec, new: ClusterSpec) -> bool:
    return old.orchestrator.type in SLURM and old.orchestrator.type != new.orchestrator.type


def _placed(spec: ClusterSpec) -> set[str]:
    return {g.name for g in spec.node_groups if placement_for(g).create}


def placement_changes(old: ClusterSpec, new: ClusterSpec) -> bool:
    """A node group that stays gets or loses the cluster placement group fmcluster creates for it."""
    names = {g.name for g in old.node_groups} & {g.name for g in new.node_groups}
    return bool((_placed(old) ^ _placed(new)) & names)


def eks_capacity_changes(old: ClusterSpec, new: ClusterSpec) -> bool:
    """A node group that stays has another EKS capacity type (on-demand, spot, Capacity Block)."""
    def kinds(spec: ClusterSpec) -> dict[str, str]:
        return {g.name: g.capacity.type if g.capacity.type in ("spot", "capacity-block") else "on-demand"
                for g in spec.node_groups}

    before, after = kinds(old), kinds(new)
    return any(before[name] != kind for name, kind in after.items() if name in before)


def image_changes(old: ClusterSpec, new: ClusterSpec) -> bool:
    """A node group that stays leaves the baked node image for an AMI of its own, or comes back to it."""
    before = {g.name: g.ami_id is None for g in old.node_groups}
    return any(before[g.name] != (g.ami_id is None) for g in new.node_groups if g.name in before)


def has_placement_groups(old: ClusterSpec, new: ClusterSpec) -> bool:
    return bool(_placed(new))


def on_capacity_block(old: ClusterSpec, new: ClusterSpec) -> bool:
    """A node group that stays is on a Capacity Block before and after (its nodes run capacity-end)."""
    before = {g.name for g in old.node_groups if g.capacity.type == "capacity-block"}
    return any(g.name in before and g.capacity.type == "capacity-block" for g in new.node_groups)


def on_training_plan(old: ClusterSpec, new: ClusterSpec) -> bool:
    """A node group that stays is on a training plan before and after (on HyperPod Slurm its nodes
    run capacity-end)."""
    before = {g.name for g in old.node_groups if g.capacity.training_plan_arn}
    return any(g.name in before and g.capacity.training_plan_arn for g in new.node_groups)


def _spot(spec: ClusterSpec) -> dict[str, bool]:
    return {g.name: g.capacity.type == "spot" for g in spec.node_groups}


def spot_changes(old: ClusterSpec, new: ClusterSpec) -> bool:
    """A node group that stays goes to or from spot (on AWS PCS its nodes run the interruption program)."""
    before, after = _spot(old), _spot(new)
    return any(name in before and before[name] != spot for name, spot in after.items())


def on_spot(old: ClusterSpec, new: ClusterSpec) -> bool:
    """A node group that stays is on spot before and after."""
    before, after = _spot(old), _spot(new)
    return any(spot and before.get(name, False) for name, spot in after.items())


def observed(old: ClusterSpec, new: ClusterSpec) -> bool:
    return new.observability.prometheus or new.observability.grafana


def metrics_go(old: ClusterSpec, new: ClusterSpec) -> bool:
    return observed(new, old) and not observed(old, new)


def grafana_stays(old: ClusterSpec, new: ClusterSpec) -> bool:
    return old.observability.grafana and new.observability.grafana


def grafana_goes(old: ClusterSpec, new: ClusterSpec) -> bool:
    return old.observability.grafana and not new.observability.grafana


def email_changes(old: ClusterSpec, new: ClusterSpec) -> bool:
    return old.observability.alert_email is not None and new.observability.alert_email is not None


def reference_goes(old: ClusterSpec, new: ClusterSpec) -> bool:
    return old.images.reference and not new.images.reference
