"""Service Quotas: the EC2 vCPU quota (On-Demand or Spot) of each group of instance families the
cluster runs outside reservations, and NAME-images' build instances, by the quota the instance
catalog names for each type; on SageMaker HyperPod, SageMaker's quota of each ml.* instance
type for cluster usage."""

from __future__ import annotations

from functools import partial
from typing import Iterable

from botocore.exceptions import ClientError

from fmcluster.deploy.preflight.context import FAIL, PASS, WARN, Check, Context
from fmcluster.deploy.preflight.guard import guard
from fmcluster.facts import catalog
from fmcluster.facts import images as image_facts
from fmcluster.facts.catalog import VcpuQuota
from fmcluster.facts.controlplanes import ON_DEMAND, SPOT

MARKETS = {ON_DEMAND: "On-Demand", SPOT: "Spot"}
# (the vCPU quota, the market) -> vCPUs needed
Needs = dict[tuple[VcpuQuota, str], int]


def instance_quotas(ctx: Context) -> Iterable[Check]:
    builds = _builds(ctx)
    needs = dict(builds)
    if ctx.hyperpod:  # HyperPod's nodes count against SageMaker's quotas, the builds against EC2's
        yield from _hyperpod_quotas(ctx)
    else:
        for instance_type, count, market in _running(ctx):
            known = catalog.catalog()[instance_type]
            needs[(known.vcpu_quota, market)] = needs.get((known.vcpu_quota, market), 0) + count * known.vcpus
    for (quota, market), vcpus in sorted(needs.items(), key=lambda need: (need[0][0].label, need[0][1])):
        label = f"quota {MARKETS[market]} {quota.label} vCPUs"
        yield from guard(ctx, label, partial(_ec2_quota, ctx, quota, market, vcpus, label,
                                             builds.get((quota, market), 0)))
    for image in ctx.images:
        if image.build_instance_type not in image_facts.BUILD_INSTANCE_VCPUS:
            yield Check(f"quota image build {image.key}", WARN,
                        f"the vCPUs of {image.build_instance_type} are not known to preflight",
                        "check that the On-Demand quota of its class leaves room for one more instance")


def _builds(ctx: Context) -> Needs:
    """vCPUs of NAME-images' build instances, one per image at a time (each image builds, then
    tests, on one instance at a time), by quota."""
    needs: Needs = {}
    for image in ctx.images:
        quota = image_facts.BUILD_INSTANCE_QUOTAS.get(image.build_instance_type)
        vcpus = image_facts.BUILD_INSTANCE_VCPUS.get(image.build_instance_type)
        if quota and vcpus:
            needs[(quota, ON_DEMAND)] = needs.get((quota, ON_DEMAND), 0) + vcpus
    return needs


def _ec2_quota(ctx: Context, quota: VcpuQuota, market: str, vcpus: int, label: str, builds: int = 0
               ) -> Iterable[Check]:
    code, title = quota.spot if market == SPOT else quota.on_demand
    value = _quota(ctx, "ec2", code)
    of_which = f" ({builds} of them for the image builds of {ctx.spec.name}-images)" if builds else ""
    if value is None:
        yield Check(label, WARN, f"{title} ({code}) not found; {vcpus} vCPUs needed{of_which}",
                    "check it in the Service Quotas console")
    elif value >= vcpus:
        yield Check(label, PASS, f"{vcpus} vCPUs needed{of_which} of {value:g}: {title} ({code})")
    else:
        yield Check(label, FAIL, f"{vcpus} vCPUs needed{of_which}, the quota is {value:g}: {title} ({code}); "
                    "instances already running count too",
                    f"aws service-quotas request-service-quota-increase --service-code ec2 --quota-code "
                    f"{code} --desired-value {vcpus} --region {ctx.spec.region}")


def _running(ctx: Context) -> Iterable[tuple[str, int, str]]:
    """(instance type, instances at most, market) of what runs outside reservations and blocks."""
    for g in ctx.spec.node_groups:
        if g.capacity.type in (ON_DEMAND, SPOT) and g.max_nodes:
            yield g.instance_type, g.max_nodes, g.capacity.type
    login = ctx.spec.orchestrator.login
    if login.count:
        yield login.instance_type, login.count, ON_DEMAND


def _quota(ctx: Context, service: str, code: str) -> float | None:
    quotas = ctx.client("service-quotas")
    for call in (quotas.get_service_quota, quotas.get_aws_default_service_quota):
        try:
            return float(call(ServiceCode=service, QuotaCode=code)["Quota"]["Value"])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "NoSuchResourceException":
                raise
    return None


def _hyperpod_quotas(ctx: Context) -> Iterable[Check]:
    pages = ctx.client("service-quotas").get_paginator("list_service_quotas").paginate(ServiceCode="sagemaker")
    values = {q["QuotaName"]: q["Value"] for page in pages for q in page["Quotas"]}
    for instance_type, count, _ in _running_hyperpod(ctx):
        title = f"ml.{instance_type} for cluster usage"
        value = values.get(title)
        if value is None:
            yield Check(f"quota {title}", WARN, "quota not found", "check it in the Service Quotas console")
        else:
            status = PASS if value >= count else FAIL
            yield Check(f"quota {title}", status, f"{count} instances needed of {value:g}",
                        None if status == PASS else "request an increase of the SageMaker quota")


def _running_hyperpod(ctx: Context) -> Iterable[tuple[str, int, str]]:
    counts: dict[str, int] = {}
    for g in ctx.spec.node_groups:
        counts[g.instance_type] = counts.get(g.instance_type, 0) + g.max_nodes
    login = ctx.spec.orchestrator.login
    if login.count:
        counts[login.instance_type] = counts.get(login.instance_type, 0) + login.count
    return [(t, n, ON_DEMAND) for t, n in sorted(counts.items())]
