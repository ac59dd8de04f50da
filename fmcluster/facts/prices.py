"""The price table kept in the repository (fmcluster/data/prices.json): list prices of one region,
with the date they were taken and where each figure comes from.

A price that is not in the table is unknown (None), never zero. Capacity Blocks and capacity
reservations are priced when they are bought, so the plan never estimates them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class PriceTable:
    region: str
    currency: str
    as_of: str
    hours_per_month: int
    sources: dict[str, str]
    ec2_on_demand_hourly: dict[str, float]
    fsx_lustre_gib_month: dict[str, dict[str, float]]
    nat_gateway_hourly: float
    public_ipv4_hourly: float
    eks_cluster_hourly: float
    kms_key_month: float  # a customer-managed KMS key (the storage key), a month

    def instance_hourly(self, instance_type: str) -> float | None:
        """On-Demand Linux price of one instance hour, or None when the table has none."""
        return self.ec2_on_demand_hourly.get(instance_type)

    def lustre_hourly(self, deployment_type: str, throughput_per_tib: int | None, gib: int) -> float | None:
        """Storage price of a file system per hour (capacity x per-GB-month price / hours in a month)."""
        tiers = self.fsx_lustre_gib_month.get(deployment_type, {})
        per_gib_month = tiers.get(str(throughput_per_tib)) if throughput_per_tib else next(iter(tiers.values()), None)
        return None if per_gib_month is None else gib * per_gib_month / self.hours_per_month


@cache
def table() -> PriceTable:
    data = json.loads(resources.files("fmcluster").joinpath("data/prices.json").read_text(encoding="utf-8"))
    return PriceTable(**data)
