"""The plan's sections of what the cluster holds besides its node groups, built from the cluster
model: storage (with the checkpoint estimate), network, control plane, stacks, teams and
observability (the records of fmcluster.plan.shape.cluster; node health: fmcluster.plan.health)."""

from __future__ import annotations

from typing import Optional

from fmcluster.facts import fsx, naming, prices, regions
from fmcluster.facts import network as network_plan
from fmcluster.model import cluster as model
from fmcluster.plan.shape.cluster import (
    AddressNeed,
    BucketPlan,
    Checkpoint,
    ControlPlanePlan,
    HomePlan,
    Link,
    LustrePlan,
    NetworkPlan,
    ObservabilityPlan,
    StackPlan,
    StoragePlan,
    SubnetPlan,
    TeamGroupPlan,
    TeamPlan,
)
from fmcluster.spec import addresses
from fmcluster.spec.models import ClusterSpec

# bytes per parameter of a checkpoint with mixed-precision Adam state: bf16 weights (2) + fp32
# master weights (4) + fp32 Adam first and second moments (4 + 4)
CHECKPOINT_BYTES_PER_PARAM = 2 + 4 + 4 + 4
CHECKPOINT_FORMULA = ("14 bytes per parameter: bf16 weights 2 + fp32 master weights 4 + fp32 Adam moments 4 + 4; "
                      "written at the file system's aggregate baseline throughput")


def checkpoint(params: float, throughput_mbps: float) -> Checkpoint:
    size = params * CHECKPOINT_BYTES_PER_PARAM
    return Checkpoint(parameters=params, bytes_per_parameter=CHECKPOINT_BYTES_PER_PARAM,
                      gigabytes=round(size / 1e9, 3), seconds=round(size / (throughput_mbps * 1e6), 1),
                      formula=CHECKPOINT_FORMULA)


def _lustre(spec: ClusterSpec, params: float) -> LustrePlan | None:
    fs = spec.storage.lustre
    if fs is None:
        return None
    if fs.deployment_type != "PERSISTENT_2":
        metadata = "not configurable"
    else:
        metadata = "automatic" if fs.metadata_iops == "auto" else str(fs.metadata_iops)
    links = [Link(path=link.path, bucket=link.bucket, prefix=link.prefix, import_events=list(link.import_),
                  export_events=list(link.export)) for link in fs.links]
    return LustrePlan(
        deployment_type=fs.deployment_type, storage_capacity_gib=fs.storage_capacity_gib,
        throughput_per_tib=fs.throughput_per_tib, throughput_gbps=round(fs.throughput_mbps / 1000, 6),
        metadata_iops=metadata, efa=fs.efa, compression=fs.compression, mount_path=fs.mount_path,
        file_servers=fsx.file_servers(fs.storage_capacity_gib, fs.efa, fs.throughput_per_tib), links=links,
        checkpoint=checkpoint(params, fs.throughput_mbps),
    )


def storage(m: model.ClusterModel, params: float) -> StoragePlan:
    spec = m.spec
    account = spec.account or "ACCOUNT"
    buckets = [BucketPlan(name=b.name, s3_name=naming.bucket_name(spec.name, b.name, spec.region, account),
                          versioned=b.versioned) for b in spec.storage.buckets]
    return StoragePlan(buckets=buckets, kms=spec.storage.kms, lustre=_lustre(spec, params), home=_home(m))


def _home(m: model.ClusterModel) -> HomePlan | None:
    home = m.home
    if home is None:
        return None
    fs = m.spec.storage.home
    if fs is None:  # the Lustre file system at /home
        return HomePlan(file_system="FSx for Lustre", mount_path=home.mount_path)
    return HomePlan(file_system="FSx for OpenZFS", mount_path=home.mount_path, deployment_type=fs.deployment_type,
                    storage_capacity_gib=fs.storage_capacity_gib, throughput_mbps=fs.throughput_mbps,
                    compression=fs.compression)


def network(m: model.ClusterModel) -> NetworkPlan:
    spec, subnets = m.spec, m.subnets
    needs = addresses.address_needs(spec)
    gpu = subnets[0]
    nat_az = spec.region_zone_ids[0]
    return NetworkPlan(
        vpc_cidr=spec.network.vpc_cidr,
        subnets=[SubnetPlan(az_id=s.az_id, cidr=s.cidr, public=s.public, usable_addresses=s.usable,
                            gpu_subnet=s is gpu, nat_gateway=s.public and s.az_id == nat_az,
                            local_zone=regions.is_local_zone(s.az_id))
                 for s in subnets],
        address_needs=[AddressNeed(what=n.what, addresses=n.addresses) for n in needs],
        addresses_needed=network_plan.total(needs), gpu_subnet_usable=gpu.usable, nat_gateways=1,
    )


def control_plane(m: model.ClusterModel) -> ControlPlanePlan:
    orch = m.spec.orchestrator
    cp = m.control_plane
    kubernetes = cp.scheduler == "kubernetes"
    if orch.version is None:  # OrchestratorSpec resolves it when the spec is validated
        raise ValueError("orchestrator.version is not resolved: the plan is of a validated spec")
    return ControlPlanePlan(
        type=orch.type, scheduler=cp.scheduler, version_label=cp.version_label, version=orch.version,
        login_instance_type=orch.login.instance_type, login_count=orch.login.count,
        pcs_size=m.pcs_size.name if m.pcs_size else None,
        endpoint_access=orch.endpoint_access if kubernetes else None,
        public_access_cidrs=list(orch.public_access_cidrs)
        if kubernetes and orch.endpoint_access != "private" else None,
        admin_role_arn=orch.admin_role_arn if kubernetes else None,
    )


def stacks(m: model.ClusterModel) -> list[StackPlan]:
    return [StackPlan(name=s.name, contents=s.contents, termination_protection=s.termination_protection)
            for s in m.stacks]


def teams(m: model.ClusterModel, table: prices.PriceTable) -> list[TeamPlan]:
    """Each team's GPUs per GPU node group and what they cost an hour at On-Demand list prices:
    the rate a team is charged back at, whatever the capacity was bought as (Capacity Blocks and
    reservations are bought at their own price)."""
    per_gpu = {}
    for group in m.node_groups:  # SageMaker HyperPod bills ml.* instances, not in the table (fmcluster.plan.cost)
        unit = None if m.control_plane.hyperpod else table.instance_hourly(group.instance_type)
        per_gpu[group.name] = None if unit is None or not group.gpus else round(unit / group.gpus, 4)
    plans = []
    for team in m.teams:
        rows = [TeamGroupPlan(node_group=group, guaranteed_gpus=team.guaranteed[group], burst_gpus=team.burst(group),
                              lendable_gpus=team.lendable(group), gpu_hourly_usd=per_gpu[group])
                for group in team.group_gpus]

        def hourly(gpus: dict[str, int]) -> Optional[float]:
            if any(n and per_gpu[group] is None for group, n in gpus.items()):
                return None
            return round(sum(n * (per_gpu[group] or 0.0) for group, n in gpus.items()), 2)

        plans.append(TeamPlan(
            name=team.name, priority=team.priority, priorities=list(team.priorities), members=len(team.members),
            groups=list(team.groups), dedicated=list(team.dedicated), fair_share=team.fair_share, node_groups=rows,
            guaranteed_gpus=team.guaranteed_gpus, burst_gpus=team.burst_gpus,
            guaranteed_hourly_usd=hourly(dict(team.guaranteed)),
            burst_hourly_usd=hourly({group: team.burst(group) for group in team.group_gpus})))
    return plans


def observability(m: model.ClusterModel) -> ObservabilityPlan:
    obs = m.spec.observability
    note = (f"in {m.name}-observability; node exporters and remote write are set up per control plane"
            if m.observed else "off: no Prometheus and no Grafana")
    return ObservabilityPlan(prometheus=obs.prometheus, grafana=obs.grafana, alert_email=obs.alert_email,
                             built=m.observed, note=note)
