"""The estimated running cost of a plan, one line per thing that costs money.

Rules: an On-Demand node group is priced from the table at its minimum and its maximum size;
Capacity Blocks and capacity reservations are priced when they are bought ("priced at purchase");
spot varies (unknown, at most the On-Demand price); SageMaker HyperPod bills ml.* instances,
whose prices the table does not hold (unknown). A price missing from the table is unknown, never
zero, and totals add only priced lines while naming what they leave out. The records:
fmcluster.plan.shape.estimates.
"""

from __future__ import annotations

from fmcluster.facts import images as image_facts
from fmcluster.facts.controlplanes import CAPACITY_BLOCK, RESERVATION, SPOT
from fmcluster.facts.prices import PriceTable
from fmcluster.model import cluster as model
from fmcluster.plan.shape.estimates import Cost, CostLine, PriceStatus

HOURS_PER_DAY = 24


def _line(item: str, status: PriceStatus, unit: float | None = None, low: int = 1, high: int = 1,
          note: str | None = None) -> CostLine:
    hourly = (round(unit * low, 4), round(unit * high, 4)) if status == "priced" and unit is not None else (None, None)
    return CostLine(item=item, status=status if unit is not None or status != "priced" else "unknown",
                    unit_hourly_usd=unit, hourly_usd_min=hourly[0], hourly_usd_max=hourly[1], note=note)


def _count(low: int, high: int) -> str:
    return str(high) if low == high else f"{low}-{high}"


def _instances(item: str, instance_type: str, low: int, high: int, capacity: str, hyperpod: bool,
               table: PriceTable) -> CostLine:
    what = f"{item}: {_count(low, high)} x {instance_type}"
    unit = table.instance_hourly(instance_type)
    if capacity in (CAPACITY_BLOCK, RESERVATION):
        kind = "Capacity Block" if capacity == CAPACITY_BLOCK else "capacity reservation"
        note = f"{kind}: priced at purchase"
        if capacity == RESERVATION and unit is not None and not hyperpod:
            note += f" (an On-Demand Capacity Reservation bills ${unit:,.2f}/h per instance, used or not)"
        return _line(what, "priced-at-purchase", None, note=note)
    if hyperpod:
        return _line(what, "unknown", None, note=f"SageMaker HyperPod bills ml.{instance_type}: not in the price table")
    if capacity == SPOT:
        ceiling = f"; at most the On-Demand ${unit:,.2f}/h per instance" if unit is not None else ""
        return _line(what + " (spot)", "unknown", None, note="spot prices vary" + ceiling)
    if unit is None:
        return _line(what, "unknown", None, note=f"no On-Demand price for {instance_type} in the table")
    return _line(what, "priced", unit, low, high)


# How the plan names the control plane's own groups (fmcluster.model.cluster roles).
OWN_GROUPS = {model.LOGIN: "login nodes", model.SYSTEM: "system nodes", model.CONTROLLER: "Slurm controller"}


def _lines(m: model.ClusterModel, table: PriceTable) -> list[CostLine]:
    spec, cp = m.spec, m.control_plane
    lines = [_instances(f"node group {g.name}", g.instance_type, g.min_count, g.max_count, g.capacity.type,
                        cp.hyperpod, table) for g in m.node_groups]
    for own in (m.login, m.controller):
        if own is not None:
            lines.append(_instances(OWN_GROUPS[own.role], own.instance_type, own.min_count, own.max_count,
                                    own.capacity.type, cp.hyperpod, table))
    fs = spec.storage.lustre
    if fs:
        what = f"FSx for Lustre: {fs.storage_capacity_gib} GiB {fs.deployment_type}" + (
            f" at {fs.throughput_per_tib} MB/s/TiB" if fs.throughput_per_tib else "")
        hourly = table.lustre_hourly(fs.deployment_type, fs.throughput_per_tib, fs.storage_capacity_gib)
        lines.append(_line(what, "priced", hourly, note=None if hourly is not None else "tier not in the price table"))
        if fs.deployment_type == "PERSISTENT_2" and fs.metadata_iops != "auto":
            lines.append(_line(f"FSx for Lustre: {fs.metadata_iops} provisioned metadata IOPS", "unknown",
                               note="user-provisioned metadata IOPS are not in the price table"))
    home = spec.storage.home
    if home:
        lines.append(_line(f"FSx for OpenZFS home: {home.storage_capacity_gib} GiB {home.deployment_type}, "
                           f"{home.throughput_mbps} MB/s", "unknown",
                           note="FSx for OpenZFS prices are not in the price table"))
    lines.append(_line("NAT gateway: 1", "priced", table.nat_gateway_hourly))
    lines.append(_line("public IPv4 address of the NAT gateway: 1", "priced", table.public_ipv4_hourly))
    if cp.scheduler == "kubernetes":
        lines.append(_line("Amazon EKS cluster: 1", "priced", table.eks_cluster_hourly))
    if m.pcs_size is not None:
        accounting = ", Slurm accounting (on with teams, billed by the hour)" if m.teams else ""
        lines.append(_line(f"AWS PCS cluster ({m.pcs_size.name}) and node management{accounting}", "unknown",
                           note="AWS PCS prices are not in the price table"))
    lines += _image_builds(m, table)
    lines.append(_line("S3 storage and requests, NAT data processing, data transfer, logs", "usage-based",
                       note="billed by use: not estimated"))
    return lines


def _image_builds(m: model.ClusterModel, table: PriceTable) -> list[CostLine]:
    """NAME-images' and NAME-reference's builds: billed per build (the first deploy, then each change
    of an image), not per hour of the cluster; the build instance's price where the table has it.
    The node images (their EBS snapshots too), then the reference images (their storage in ECR too)."""
    lines = []
    for kind, types, minutes, storage in (
            ("node images", [i.build_instance_type for i in m.images], image_facts.BUILD_MINUTES_ESTIMATE,
             "the images' EBS snapshots"),
            ("reference images", [r.build_instance_type for r in m.reference_images],
             image_facts.REFERENCE_BUILD_MINUTES_ESTIMATE, "the images' storage in ECR")):
        builds: dict[str, int] = {}
        for instance_type in types:
            builds[instance_type] = builds.get(instance_type, 0) + 1
        for instance_type, count in sorted(builds.items()):
            unit = table.instance_hourly(instance_type)
            price = (f"${unit:,.2f} an instance hour, about ${unit * minutes / 60:,.2f} a build" if unit is not None
                     else f"no On-Demand price for {instance_type} in the table")
            lines.append(_line(f"EC2 Image Builder: {count} x {instance_type} for about {minutes} min a build "
                               f"({kind})", "usage-based",
                               note=f"billed per build (the first deploy, then each change of an image): {price}; "
                                    f"plus {storage}"))
    return lines


def cost(m: model.ClusterModel, table: PriceTable) -> Cost:
    spec = m.spec
    lines = _lines(m, table)
    priced = [line for line in lines if line.status == "priced"]  # each with its hourly figures (_line)
    low = round(sum(line.hourly_usd_min or 0.0 for line in priced), 4)
    high = round(sum(line.hourly_usd_max or 0.0 for line in priced), 4)
    region_note = None
    if spec.region != table.region:
        region_note = (f"prices are {table.region} list prices: the table has none for {spec.region}, "
                       "where they may differ")
    return Cost(
        prices_region=table.region, spec_region=spec.region, prices_as_of=table.as_of, currency=table.currency,
        region_note=region_note, lines=lines, hourly_usd_min=low, hourly_usd_max=high,
        daily_usd_min=round(low * HOURS_PER_DAY, 2), daily_usd_max=round(high * HOURS_PER_DAY, 2),
        complete=len(priced) == len(lines),
        not_included=[f"{line.item} ({line.status})" for line in lines if line.status != "priced"],
        sources=dict(table.sources),
    )
