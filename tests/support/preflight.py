"""Running `fmcluster preflight` without the network: moto clients for what moto implements, and
botocore's Stubber (on shapes botocore validates) for what it lacks: capacity reservations and
Capacity Blocks, SageMaker training plans, EC2 service quotas, AWS PCS, the base images' public SSM
parameters and EC2 Image Builder. Not a test module. Shared by tests/deploy/test_preflight.py,
tests/deploy/test_preflight_ultraserver.py and tests/deploy/test_preflight_capacity_end.py."""

from __future__ import annotations

import hashlib
import os
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
from botocore.stub import Stubber

from fmcluster.deploy import preflight
from fmcluster.model import cluster as model

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
# The Slurm versions a PCS-ready DLAMI's description lists (awslabs/awsome-distributed-ai,
# architectures/aws-pcs/docs/PCS-READY-DLAMI.md: every image up to 2026-08-05)
PCS_SLURM = ("24.11.7-2", "25.05.8-2", "25.11.6-2")


class Split:
    """A client whose `operations` go to a Stubber-backed client and everything else to moto
    (which lacks DescribeCapacityReservations)."""

    def __init__(self, base, stubbed, operations=("describe_capacity_reservations",)) -> None:
        self.base, self.stubbed, self.operations = base, stubbed, operations

    def __getattr__(self, name):
        return getattr(self.stubbed if name in self.operations else self.base, name)


class PublicImages:
    """An EC2 client that knows the control planes' public base images (`images`: AMI id -> its
    DescribeImages entry), which moto does not hold, and asks `base` for every other call and image."""

    def __init__(self, base, images: dict) -> None:
        self.base, self.images = base, images

    def describe_images(self, **kwargs):
        ids = kwargs.get("ImageIds", [])
        if ids and all(i in self.images for i in ids):
            return {"Images": [self.images[i] for i in ids]}
        return self.base.describe_images(**kwargs)

    def __getattr__(self, name):
        return getattr(self.base, name)


def shown(spec, fmt: str = "text", **run) -> int:
    """`fmcluster preflight SPEC` with the clients of `run`, printed as the command line prints it:
    its exit code."""
    report = preflight.run(spec, **run)
    out, err = preflight.render(report, fmt)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return preflight.exit_code(report)


# Clients kept for the test process: (service, region, stubbed) -> the clients made so far, and
# for each its Stubber (None: a client of moto's). boto3 builds a client's class anew for every
# client (EC2's has some 830 methods: tens of milliseconds), and a preflight test makes about ten.
_KEPT: dict[tuple[str, str, bool], list[tuple[Any, Stubber | None]]] = {}
_HANDED: dict[tuple[str, str, bool], int] = {}  # how many of each the current test has
_TEST: list[str] = [""]


def client(service: str, region: str, *, stub: bool = False) -> tuple[Any, Stubber | None]:
    """A client of `service` in `region` (moto answers it, or with `stub` a new, active Stubber
    given back with it), none that the current test already has: the first, second... asked for in
    a test are the kept first, second..., their previous test's Stubbers deactivated."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]  # pytest's: "NODEID (PHASE)"
    if test != _TEST[0]:
        _TEST[0] = test
        _HANDED.clear()
    key = (service, region, stub)
    kept = _KEPT.setdefault(key, [])
    n = _HANDED.get(key, 0)
    _HANDED[key] = n + 1
    if n == len(kept):
        kept.append((boto3.client(service, region_name=region), None))
    made, previous = kept[n]
    if previous is not None:
        previous.deactivate()
    stubber = None
    if stub:
        stubber = Stubber(made)
        stubber.activate()
    kept[n] = (made, stubber)
    return made, stubber


def stubbed(service: str, region: str):
    """A client of `service` in `region` and its active Stubber, which answers every call."""
    return client(service, region, stub=True)


def reservation(spec_group, az_id="use1-az4", *, block=True, state="active", start=NOW - timedelta(days=1),
                end=NOW + timedelta(days=6), total=None, available=None, instance_type=None, rid=None,
                block_id=None) -> dict:
    total = spec_group.max_nodes if total is None else total
    found = {"CapacityReservationId": rid or spec_group.capacity.reservation_id or "cr-0123456789abcdef0",
            "InstanceType": instance_type or spec_group.instance_type, "AvailabilityZoneId": az_id,
            "AvailabilityZone": "us-east-1d", "TotalInstanceCount": total,
            "AvailableInstanceCount": total if available is None else available, "State": state,
            "StartDate": start, "EndDate": end, "ReservationType": "capacity-block" if block else "default",
            "InstancePlatform": "Linux/UNIX", "CapacityBlockId": block_id}
    return {key: value for key, value in found.items() if value is not None}


def training_plan(spec_group, *, status="Active", start=NOW - timedelta(days=1), end=NOW + timedelta(days=6),
                  total=None, instance_type=None, targets=("hyperpod-cluster",), fee="262080.00") -> dict:
    """DescribeTrainingPlan's answer for a node group's plan (botocore's DescribeTrainingPlanResponse)."""
    arn = spec_group.capacity.training_plan_arn
    total = spec_group.max_nodes if total is None else total
    return {"TrainingPlanArn": arn, "TrainingPlanName": arn.rsplit("/", 1)[1], "Status": status, "StartTime": start,
            "EndTime": end, "DurationHours": int((end - start).total_seconds() // 3600), "DurationMinutes": 0,
            "UpfrontFee": fee, "CurrencyCode": "USD", "TotalInstanceCount": total, "AvailableInstanceCount": total,
            "InUseInstanceCount": 0, "TargetResources": list(targets),
            "ReservedCapacitySummaries": [{
                "ReservedCapacityArn": arn.replace(":training-plan/", ":reserved-capacity/") + "-1",
                "InstanceType": f"ml.{instance_type or spec_group.instance_type}", "TotalInstanceCount": total,
                "Status": status, "AvailabilityZone": "us-east-1a", "DurationHours": 168, "DurationMinutes": 0,
                "StartTime": start, "EndTime": end}]}


class Clients:
    """moto clients, with Stubber-backed EC2 reservations, SageMaker training plans, the default EBS
    key (`ebs_key`), Service Quotas, PCS, SSM parameters and Image Builder. `plans`: the
    DescribeTrainingPlan answers, in order (None: one matching plan for each training plan the
    spec names). `parameters`: the base images' parameters the region publishes (None: each one
    the spec's images are built from, as an AMI id of an image whose description names PCS agent
    `agent` and Slurm versions `slurm`, with the root device and snapshot size `root`)."""

    def __init__(self, spec, reservations=(), quota=10_000.0, parameters=None, agent="1.5.2-1",
                 slurm=PCS_SLURM, root=("/dev/sda1", 100), ebs_key="alias/aws/ebs", plans=None) -> None:
        region = spec.region
        self.moto = {}
        self.region = region
        # moto lacks DescribeTrainingPlan
        self.plans_client, self.plans = stubbed("sagemaker", region)
        if plans is None:  # each plan once, holding what every group drawing on it needs
            drawing: dict[str, list] = {}
            for g in spec.node_groups:
                if g.capacity.training_plan_arn:
                    drawing.setdefault(g.capacity.training_plan_arn, []).append(g)
            plans = [training_plan(gs[0], total=sum(g.max_nodes for g in gs)) for gs in drawing.values()]
        for answer in plans:
            self.plans.add_response("describe_training_plan", answer)
        ec2_stub, self.reservations = stubbed("ec2", region)
        for response in reservations:
            self.reservations.add_response("describe_capacity_reservations", {"CapacityReservations": response})
        # moto lacks DescribePlacementGroups: an available cluster group for each one the spec names
        named = [g.placement_group for g in spec.node_groups if g.placement_group not in ("auto", "none")]
        for name in named if not spec.orchestrator.control_plane.hyperpod else ():
            self.reservations.add_response("describe_placement_groups", {"PlacementGroups": [
                {"GroupName": name, "State": "available", "Strategy": "cluster"}]}, {"GroupNames": [name]})
        self.ec2 = Split(client("ec2", region)[0], ec2_stub,
                         ("describe_capacity_reservations", "describe_placement_groups"))
        # moto lacks DescribeCapacityBlocks and DescribeCapacityBlockStatus: for each UltraServer
        # group on a reservation, its block (matching the spec) with a healthy interconnect
        blocks_stub, self.blocks = stubbed("ec2", region)
        for g in spec.node_groups:
            if g.capacity.ultraserver_type and g.capacity.reservation_id:
                self.blocks.add_response("describe_capacity_blocks", {"CapacityBlocks": [ultraserver_block(
                    g.capacity.ultraserver_type, spec.availability_zone_id)]})
                self.blocks.add_response("describe_capacity_block_status", {"CapacityBlockStatuses": [
                    {"CapacityBlockId": BLOCK_ID, "InterconnectStatus": "ok", "TotalCapacity": g.max_nodes,
                     "TotalAvailableCapacity": g.max_nodes, "TotalUnavailableCapacity": 0}]})
        self.ec2 = Split(self.ec2, blocks_stub, ("describe_capacity_blocks", "describe_capacity_block_status"))
        # moto lacks GetEbsDefaultKmsKeyId (it has GetEbsEncryptionByDefault, off until enabled)
        key_stub, self.ebs_key = stubbed("ec2", region)
        self.ebs_key.add_response("get_ebs_default_kms_key_id", {"KmsKeyId": ebs_key})
        self.ec2 = Split(self.ec2, key_stub, ("get_ebs_default_kms_key_id",))
        self.quotas, self.quota_stub = stubbed("service-quotas", region)
        if spec.orchestrator.control_plane.hyperpod:
            self.quota_stub.add_response("list_service_quotas", {"Quotas": [
                {"QuotaName": f"ml.{t} for cluster usage", "Value": quota, "QuotaCode": f"L-{i:08d}"}
                for i, t in enumerate(sorted({g.instance_type for g in spec.node_groups}
                                             | {spec.orchestrator.login.instance_type}))]})
            self.quota_stub.add_response("get_service_quota", {"Quota": {"Value": quota}})  # the image builds'
        else:
            for _ in range(6):  # at most one EC2 vCPU quota per quota (P, G and VT, Standard) and market
                self.quota_stub.add_response("get_service_quota", {"Quota": {"Value": quota}})
        self.pcs, pcs_stub = stubbed("pcs", region)
        pcs_stub.add_response("list_clusters", {"clusters": []})
        images = model.resolve(spec).images
        published = {i.base.parameter for i in images} if parameters is None else set(parameters)
        self.ssm, self.ssm_stub = stubbed("ssm", region)
        public: dict[str, dict] = {}
        for image in images:
            name = image.base.parameter
            if name in published:
                ami = f"ami-0{hashlib.sha256(image.key.encode()).hexdigest()[:16]}"
                # preflight reads a PCS base image's agent and Slurm versions from its description, and
                # every base image's root device and snapshot
                device, size = root
                public[ami] = {"ImageId": ami, "Name": f"base-{image.key}", "State": "available",
                               "Architecture": image.architecture,
                               "Description": f"PCS Agent: {agent}. Slurm: {', '.join(slurm)}",
                               "RootDeviceName": device, "BlockDeviceMappings": [
                                   {"DeviceName": device, "Ebs": {"VolumeSize": size, "VolumeType": "gp3",
                                                                  "SnapshotId": "snap-0123456789abcdef0"}}]}
                self.ssm_stub.add_response("get_parameter", {"Parameter": {
                    "Name": name, "Type": "String", "Value": ami, "Version": 1}}, {"Name": name})
            else:
                self.ssm_stub.add_client_error("get_parameter", "ParameterNotFound", http_status_code=400,
                                               expected_params={"Name": name})
        self.ec2 = PublicImages(self.ec2, public)
        self.imagebuilder, self.imagebuilder_stub = stubbed("imagebuilder", region)
        if images:
            self.imagebuilder_stub.add_response("list_image_recipes", {"imageRecipeSummaryList": []},
                                                {"owner": "Self", "maxResults": 1})

    def __call__(self, service: str):
        if service == "ec2":
            return self.ec2
        if service == "service-quotas":
            return self.quotas
        if service == "pcs":
            return self.pcs
        if service == "ssm":
            return self.ssm
        if service == "imagebuilder":
            return self.imagebuilder
        if service not in self.moto:
            self.moto[service] = client(service, self.region)[0]
            if service == "sagemaker":
                self.moto[service] = Split(self.moto[service], self.plans_client, ("describe_training_plan",))
        return self.moto[service]


def by_name(checks, name):
    found = [c for c in checks if c.name == name]
    assert found, f"no check {name!r} in {[c.name for c in checks]}"
    return found[0]


BLOCK_ID = "cb-0123456789abcdef0"


def ultraserver_block(kind, az_id, *, block_id=BLOCK_ID, state="active", start=NOW - timedelta(days=1),
                      end=NOW + timedelta(days=6), rids=("cr-0123456789abcdef0",)) -> dict:
    """An entry of DescribeCapacityBlocks (botocore's CapacityBlock); kind None: a block of instances."""
    found = {"CapacityBlockId": block_id, "UltraserverType": kind, "AvailabilityZoneId": az_id,
             "AvailabilityZone": "us-east-1-dfw-2a", "CapacityReservationIds": list(rids), "StartDate": start,
             "EndDate": end, "State": state}
    return {key: value for key, value in found.items() if value is not None}
