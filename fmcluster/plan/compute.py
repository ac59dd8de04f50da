"""The plan's node groups, built from the cluster model: each group's resources per node and at
its maximum, NVLink domain, placement, interfaces, capacity window, serving fits and network
topology, and the cluster's total (the records of fmcluster.plan.shape.nodes)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from fmcluster.facts import inference
from fmcluster.kubernetes import kueue
from fmcluster.model import cluster as model
from fmcluster.node import topology
from fmcluster.plan.shape.nodes import InterfacePlan, NodeGroupPlan, NvlinkDomain, Resources, ServingFit, ServingPlan
from fmcluster.spec.models import NodeGroupSpec


def resources(group: model.NodeGroup, count: int) -> Resources:
    it = group.instance
    gpu, gpus = it.gpu, it.gpu_count
    return Resources(
        instances=count, vcpus=it.vcpus * count, gpus=gpus * count,
        bf16_pflops=round(gpus * count * gpu.bf16_pflops, 4) if gpu else 0.0,
        fp8_pflops=(round(gpus * count * gpu.fp8_pflops, 4) if gpu.fp8_pflops is not None else None) if gpu else 0.0,
        fp4_pflops=round(gpus * count * gpu.fp4_pflops, 4) if gpu and gpu.fp4_pflops else None,
        hbm_gib=gpus * count * gpu.memory_gib if gpu else 0.0,
        hbm_tbps=round(gpus * count * gpu.hbm_tbps, 4) if gpu else 0.0,
        efa_interfaces=group.efa_interfaces * count,
        efa_gbps=(it.efa_gbps if group.efa else 0.0) * count,
        nvme_tb=round(it.nvme_total_gb * count / 1000, 3),
        nvlink_tbps=round(gpus * count * it.nvlink_gbps / 1000, 4) if it.nvlink_gbps else 0.0,
    )


def total(parts: list[Resources]) -> Resources:
    """What `parts` add up to."""
    def total(values: Iterable[float]) -> float:
        return round(sum(values), 4)

    fp4 = [p.fp4_pflops for p in parts if p.fp4_pflops is not None]
    fp8 = [p.fp8_pflops for p in parts if p.fp8_pflops is not None]
    return Resources(
        instances=sum(p.instances for p in parts), vcpus=sum(p.vcpus for p in parts),
        gpus=sum(p.gpus for p in parts), bf16_pflops=total(p.bf16_pflops for p in parts),
        fp8_pflops=round(sum(fp8), 4) if fp8 else None, fp4_pflops=round(sum(fp4), 4) if fp4 else None,
        hbm_gib=total(p.hbm_gib for p in parts), hbm_tbps=total(p.hbm_tbps for p in parts),
        efa_interfaces=sum(p.efa_interfaces for p in parts), efa_gbps=total(p.efa_gbps for p in parts),
        nvme_tb=total(p.nvme_tb for p in parts), nvlink_tbps=total(p.nvlink_tbps for p in parts),
    )


def _nvlink_domain(group: model.NodeGroup) -> Optional[NvlinkDomain]:
    """The group's NVLink domain: its UltraServer (capacity.ultraserver_type), else one instance;
    None without NVLink, or without an NVLink peer (one GPU: p5.4xlarge)."""
    it, nvlink = group.instance, group.instance.nvlink_gbps
    if nvlink is None:
        return None
    server = group.nvlink_domain
    per = server.instances if server else 1
    gpus = per * it.gpu_count
    whole, partial = divmod(group.max_count, per)
    return NvlinkDomain(
        ultraserver_type=server.name if server else None, instances=per, gpus=gpus,
        nvlink_gbps_per_gpu=nvlink, domain_nvlink_tbps=round(gpus * nvlink / 1000, 4),
        ultraservers=group.capacity.ultraserver_count if server else None,
        domains=whole + (1 if partial else 0), whole_domains=whole, partial_domain_instances=partial,
    )


_NOT_PLACED = {"capacity-block": "a Capacity Block is placed already",
               "reservation": "a reservation is placed where it was made"}


def _placement(group: model.NodeGroup, spec_group: NodeGroupSpec, hyperpod: bool) -> str:
    if hyperpod:
        return "by SageMaker HyperPod"
    placement = group.placement
    if placement.create:
        return "new cluster placement group"
    if placement.name:
        return f"existing placement group {placement.name}"
    if spec_group.placement_group != "auto":
        return "none (placement_group: none)"
    return f"none ({_NOT_PLACED.get(group.capacity.type, 'no EFA')})"


def _volume(gib: int, hyperpod: bool) -> str:
    """HyperPod sizes its own root volume; `root_volume_gib` is the EBS volume it mounts at
    /opt/sagemaker (ClusterEbsVolumeConfig)."""
    if hyperpod:
        return f"{gib} GiB at /opt/sagemaker, encrypted"
    return f"{gib} GiB gp3 root volume, encrypted"


def _scaling(group: model.NodeGroup) -> Optional[str]:
    """How a node group's count follows its Capacity Block (the node group's CapacityBlockScaler:
    README, "Capacity Blocks"), or None where its counts are all there is."""
    if not group.follows_block:
        return None
    return f"{group.max_count} while the block is active, else 0 ({group.drain_minutes} min before end)"


def _window(group: model.NodeGroup, read: Mapping[str, Any]) -> Optional[str]:
    found = read.get(group.capacity.reservation_id or group.capacity.training_plan_arn or "")
    if not found:
        return None
    span = f"{found.get('start') or '?'} to {found['end']}" if found.get("end") else \
        f"from {found.get('start') or '?'}, no end date"
    return f"{span} ({found.get('state') or 'unknown state'}, {found.get('instances', '?')} instances)"


def _fit(label: str, placed: inference.ServingPlacement) -> ServingFit:
    return ServingFit(
        model=label, parameters_billions=placed.parameters_billions, dtype=placed.dtype,
        weights_gib=round(placed.weights_gib, 1), fits=placed.fits, tensor_parallel=placed.tensor_parallel,
        pipeline_parallel=placed.pipeline_parallel, gpus_per_replica=placed.gpus_per_replica,
        kv_cache_gib=round(placed.kv_cache_gib, 1), replicas_fit=placed.replicas_fit)


def _serving_fits(m: model.ClusterModel, group: model.NodeGroup) -> Optional[list[ServingFit]]:
    """The standard sizes (inference.STANDARD_MODELS) on a GPU group, then the served model on its own."""
    if not group.instance.is_gpu:
        return None
    fits = [_fit(f"{params:g}B {dtype}", inference.place(group.instance, group.max_count, params, dtype))
            for params, dtype in inference.STANDARD_MODELS]
    served = m.serving
    if served is not None and served.group == group.name:
        fits.append(_fit(served.name, served.placement).model_copy(
            update={"served": True, "replicas_served": served.replicas}))
    return fits


def served(m: model.ClusterModel) -> Optional[ServingPlan]:
    s = m.serving
    if s is None:
        return None
    return ServingPlan(name=s.name, path=s.path, node_group=s.group, engine=s.engine, image=s.image,
                       gpu_memory_utilization=s.gpu_memory_utilization, max_model_len=s.max_model_len,
                       tensor_parallel=s.tensor_parallel, pipeline_parallel=s.pipeline_parallel, replicas=s.replicas,
                       units=s.units, port=inference.PORT)


def node_group(m: model.ClusterModel, group: model.NodeGroup, spec_group: NodeGroupSpec,
                read: Mapping[str, Any]) -> NodeGroupPlan:
    cp = m.control_plane
    it = group.instance
    capacity = group.capacity
    return NodeGroupPlan(
        name=group.name, instance_type=group.instance_type, gpu=it.gpu.name if it.gpu else None,
        min_count=group.min_count, max_count=group.max_count, capacity_type=capacity.type,
        reservation_id=capacity.reservation_id,
        reservation_resource_group_arn=capacity.reservation_resource_group_arn,
        training_plan_arn=capacity.training_plan_arn, placement=_placement(group, spec_group, cp.hyperpod),
        efa=group.efa, interface_type=cp.interface_mode.value if group.efa else None,
        interfaces=[InterfacePlan(network_card_index=i.network_card_index, device_index=i.device_index,
                                  interface_type=i.interface_type) for i in group.interfaces],
        interface_addresses=group.interface_addresses, nvme_disks=it.nvme_disks,
        root_volume_gib=group.root_volume_gib, volume=_volume(group.root_volume_gib, cp.hyperpod),
        per_node=resources(group, 1), at_max=resources(group, group.max_count),
        gpu_memory=it.gpu.memory_type if it.gpu else None, nvlink_domain=_nvlink_domain(group),
        scaling=_scaling(group), window=_window(group, read), serving=_serving_fits(m, group),
        topology=_topology(m, group),
    )


def _topology(m: model.ClusterModel, group: model.NodeGroup) -> str:
    """How the group's jobs are placed in the network: by the control plane's means where the group
    is placed (fmcluster.kubernetes.kueue, fmcluster.node.topology), else why nothing places them."""
    placed = (kueue.group_placement(m, group) if m.control_plane.scheduler == "kubernetes"
              else topology.slurm_group_placement(m, group))
    if placed:
        return placed
    if not group.instance.is_gpu:
        return "none: a CPU group"
    if group.max_count <= 1:
        return "none: one node"
    if not group.efa:
        return "none: no EFA, so jobs stay inside one node"
    return f"none: EC2's instance topology does not cover {group.instance_type}; jobs go where nodes are free"
