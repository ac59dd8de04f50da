"""`fmcluster preflight`: read-only checks of the target account and region, in seconds, before a
deploy that would otherwise fail after 40 minutes.

Sources and details: docs/research-notes.md, "fmcluster/deploy/preflight.py"."""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Mapping, Optional, Required, TypedDict

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
)
from botocore.parsers import ResponseParserError

if TYPE_CHECKING:
    from botocore.session import Session

from fmcluster.facts import catalog, regions
from fmcluster.facts import images as image_facts
from fmcluster.facts.controlplanes import (
    CAPACITY_BLOCK,
    ON_DEMAND,
    RESERVATION,
    SPOT,
    ULTRASERVER_BLOCK_TERMINATION_MINUTES,
)
from fmcluster.facts.images import BUILD_INSTANCE_VCPUS
from fmcluster.facts.placement import AUTO, NONE
from fmcluster.model import cluster as model
from fmcluster.spec import placeholders
from fmcluster.spec.diagnostics import dotted
from fmcluster.spec.models import ClusterSpec, NodeGroupSpec

PASS, WARN, FAIL = "pass", "warn", "fail"
# The services preflight calls (boto3's service names).
ServiceName = Literal["sts", "ec2", "resource-groups", "service-quotas", "fsx", "pcs", "eks", "sagemaker", "ssm",
                      "imagebuilder", "iam"]
# A client of each service, by name: boto3's, or moto-backed and Stubber-backed ones in the tests.
ClientFactory = Callable[[ServiceName], Any]
# What preflight calls, as IAM actions (the hint of an access denied)
PERMISSIONS = ("ec2:Describe*", "servicequotas:Get*", "servicequotas:List*", "fsx:Describe*",
               "resource-groups:ListGroupResources", "the control plane's List*", "sts:GetCallerIdentity",
               "ssm:GetParameter, imagebuilder:ListImageRecipes, iam:GetRole, ec2:GetEbsEncryptionByDefault and "
               "ec2:GetEbsDefaultKmsKeyId (node images)")
# The calls of an UltraServer group's Capacity Block, in ec2:Describe* (named in their access-denied hint)
ULTRASERVER_CALLS = ("DescribeCapacityBlocks", "DescribeCapacityBlockStatus")
ACCESS_DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedException",
                 "AuthorizationError"}
BAD_CREDENTIALS = {"InvalidClientTokenId", "UnrecognizedClientException", "ExpiredToken", "ExpiredTokenException",
                   "SignatureDoesNotMatch", "InvalidAccessKeyId"}
NOT_FOUND = {"InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed",
             "InvalidCapacityReservationId", "NotFoundException"}
THROTTLED = {"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException",
             "RequestThrottled", "SlowDown"}
PLACEMENT_GROUP_NOT_FOUND = {"InvalidPlacementGroup.Unknown", "InvalidGroup.NotFound"}
AMI_NOT_FOUND = {"InvalidAMIID.NotFound", "InvalidAMIID.Malformed", "InvalidAMIID.Unavailable"}
PARAMETER_NOT_FOUND = {"ParameterNotFound", "ParameterVersionNotFound"}
# vCPUs of the instances NAME-images builds on (fmcluster.facts.images.BUILD_INSTANCE_TYPES), which
# the catalog of node instance types does not hold: Amazon EC2 Instance Types, "Compute optimized"
# What a parseable answer without the fields asked for raises in the checks' own code.
UNEXPECTED_ANSWER = (KeyError, IndexError, TypeError, ValueError, AttributeError)
# EC2 vCPU quotas by instance class and market (Service Quotas, service code ec2)
EC2_QUOTAS = {  # (class, market) -> (quota code, quota name)
    ("P", ON_DEMAND): ("L-417A185B", "Running On-Demand P instances"),
    ("P", SPOT): ("L-7212CCBC", "All P Spot Instance Requests"),
    ("Standard", ON_DEMAND): ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
    ("Standard", SPOT): ("L-34B43A08", "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"),
}
MARKETS = {ON_DEMAND: "On-Demand", SPOT: "Spot"}
STANDARD_FAMILIES = "acdhimrtz"
RESERVATION_OK_STATES = {"active"}
RESERVATION_WAIT_STATES = {"scheduled", "pending", "payment-pending", "assessing", "delayed"}
# CapacityBlock.State (botocore's CapacityBlockResourceState): the rest (expired, unavailable,
# cancelled, failed, payment-failed) take no instances
BLOCK_OK_STATES = {"active"}
BLOCK_WAIT_STATES = {"scheduled", "payment-pending"}
ENDING_SOON = timedelta(hours=24)
CONTROL_PLANE_SERVICES: dict[str, list[tuple[ServiceName, str, dict[str, Any], str, str]]] = {
    # orchestrator.type -> (service, list call, kwargs, the list its answer holds, what)
    "pcs": [("pcs", "list_clusters", {"maxResults": 1}, "clusters", "AWS PCS")],
    "eks": [("eks", "list_clusters", {"maxResults": 1}, "clusters", "Amazon EKS")],
    "hyperpod-slurm": [("sagemaker", "list_clusters", {"MaxResults": 1}, "ClusterSummaries", "SageMaker HyperPod")],
    "hyperpod-eks": [("sagemaker", "list_clusters", {"MaxResults": 1}, "ClusterSummaries", "SageMaker HyperPod"),
                     ("eks", "list_clusters", {"maxResults": 1}, "clusters", "Amazon EKS")],
}


# Image Builder answering in the region: the account's own recipes, one at most
IMAGE_BUILDER: tuple[ServiceName, str, dict[str, Any], str, str] = (
    "imagebuilder", "list_image_recipes", {"owner": "Self", "maxResults": 1}, "imageRecipeSummaryList",
    "EC2 Image Builder")


class CapacityReservation(TypedDict, total=False):
    """What preflight reads of an entry of DescribeCapacityReservations."""

    CapacityReservationId: Required[str]
    ReservationType: str  # "default" or "capacity-block"
    StartDate: datetime
    EndDate: datetime
    State: str
    InstanceType: str
    AvailabilityZone: str
    AvailabilityZoneId: str
    TotalInstanceCount: int
    AvailableInstanceCount: int
    CapacityBlockId: str  # the Capacity Block a capacity-block reservation belongs to


class CapacityBlock(TypedDict, total=False):
    """What preflight reads of an entry of DescribeCapacityBlocks (botocore's CapacityBlock)."""

    CapacityBlockId: Required[str]
    UltraserverType: str  # absent for a block of instances
    AvailabilityZone: str
    AvailabilityZoneId: str
    CapacityReservationIds: list[str]
    StartDate: datetime
    EndDate: datetime
    State: str


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # pass | warn | fail
    reason: str
    hint: str | None = None


class CredentialsProblem(Exception):
    """No usable credentials: nothing can be checked."""


def session_clients(region: str) -> ClientFactory:
    """Clients of the default credential chain, one per service, in the spec's region."""
    import boto3  # start-up cost: loaded only where a command calls AWS
    from botocore.config import Config

    try:
        session = boto3.Session(region_name=region)
    except ProfileNotFound as exc:
        raise CredentialsProblem(str(exc)) from None
    config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=30)
    cache: dict[str, Any] = {}

    def client(service: ServiceName) -> Any:
        if service not in cache:
            cache[service] = session.client(service, config=config)
        return cache[service]

    return client


def _when(value: datetime | None) -> str:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%MZ") if value else "no end date"


def _quota_class(instance_type: str) -> str | None:
    letter = instance_type[0]
    return "P" if letter == "p" else "Standard" if letter in STANDARD_FAMILIES else None


class Preflight:
    def __init__(self, spec: ClusterSpec, client: ClientFactory, now: datetime | None = None,
                 window: tuple[datetime, datetime] | None = None) -> None:
        self.spec = spec
        self.client = client
        self.now = now or datetime.now(timezone.utc)
        self.window = window
        self.hyperpod = spec.orchestrator.control_plane.hyperpod
        self.images = model.resolve(spec).images  # NAME-images' node images; none on Kubernetes
        self.read: dict[str, ReadReservation] = {}  # what DescribeCapacityReservations said, by id

    # -- running -----------------------------------------------------------------------------

    def run(self) -> list[Check]:
        checks: list[Check] = []
        for name, fn in (("credentials", self.identity), ("availability zones", self.zones),
                         ("instance types", self.offerings), ("reservations", self.reservations),
                         ("placement groups", self.placement_groups), ("AMIs", self.amis),
                         ("node images", self.node_images),
                         ("quotas", self.quotas), ("FSx for Lustre", self.lustre),
                         ("FSx for OpenZFS", self.home),
                         ("control plane", self.control_plane)):
            checks += self._guard(name, fn)
        return checks

    def _guard(self, name: str, fn: Callable[[], Iterable[Check]]) -> list[Check]:
        """The checks `fn` yields, or one FAIL row named `name` for whatever stopped it (the
        credentials aside, which stop the run)."""
        try:
            return list(fn())
        except (NoCredentialsError, PartialCredentialsError) as exc:
            raise CredentialsProblem(str(exc)) from None
        except ClientError as exc:
            return [self._client_error(name, exc)]
        except ConnectionError as exc:  # the endpoint could not be reached: DNS, proxy, connect or read timeout
            endpoint = getattr(exc, "kwargs", {}).get("endpoint_url") or "the endpoint"
            return [Check(name, FAIL, f"cannot reach {endpoint}: {exc}",
                          "check the network (a proxy, a VPC endpoint, DNS) from where preflight runs, then run it "
                          "again")]
        except ResponseParserError:
            return [Check(name, FAIL, "the endpoint's answer could not be read (not an AWS API response)",
                          "check AWS_ENDPOINT_URL and proxies: something other than AWS answered")]
        except NoRegionError as exc:
            return [Check(name, FAIL, str(exc))]
        except BotoCoreError as exc:
            return [Check(name, FAIL, str(exc))]
        except UNEXPECTED_ANSWER as exc:
            return [Check(name, FAIL, f"the endpoint's answer lacks what the check reads ({type(exc).__name__}: "
                                      f"{exc})", "check AWS_ENDPOINT_URL and proxies: something other than AWS "
                                                 "may have answered")]

    def _client_error(self, name: str, exc: ClientError) -> Check:
        error = exc.response.get("Error", {})
        code, message = str(error.get("Code", "")), str(error.get("Message", exc))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        operation = exc.operation_name
        if code in BAD_CREDENTIALS:
            raise CredentialsProblem(f"{code}: {message}") from None
        if code in ACCESS_DENIED:
            if operation in ULTRASERVER_CALLS:
                return Check(name, FAIL, f"access denied to {operation}",
                             f"allow ec2:{operation} (read-only, in ec2:Describe*): preflight reads an UltraServer "
                             "group's Capacity Block with ec2:DescribeCapacityBlocks and "
                             "ec2:DescribeCapacityBlockStatus")
            return Check(name, FAIL, f"access denied to {operation}",
                         "preflight needs read-only permissions: " + ", ".join(PERMISSIONS))
        if code in ("OptInRequired", "AuthFailure"):
            return Check(name, FAIL, f"{operation}: {message}",
                         f"enable the region {self.spec.region} for the account, or check the credentials")
        if code in THROTTLED:
            return Check(name, FAIL, f"{operation} was throttled ({code}) after retries",
                         "run preflight again in a minute; other tools may be calling the same API")
        if status >= 500:
            return Check(name, FAIL, f"{operation} failed on the AWS side: HTTP {status} {code}".rstrip(),
                         "run preflight again; if it persists, see the AWS Health Dashboard")
        return Check(name, FAIL, f"{operation} failed: {code}: {message}")

    # -- checks ------------------------------------------------------------------------------

    def identity(self) -> Iterable[Check]:
        me = self.client("sts").get_caller_identity()
        account = me["Account"]
        if self.spec.account and self.spec.account != account:
            yield Check("credentials", FAIL, f"credentials are for account {account}, the spec names "
                        f"{self.spec.account}", "use credentials of the spec's account (AWS_PROFILE)")
            return
        yield Check("credentials", PASS, f"{me['Arn']} in account {account}")

    def zones(self) -> Iterable[Check]:
        found = self.client("ec2").describe_availability_zones(AllAvailabilityZones=True)["AvailabilityZones"]
        by_id = {z["ZoneId"]: z for z in found}
        yield Check("region", PASS, f"{self.spec.region}: {len(found)} zones")
        for az_id in self.spec.availability_zone_ids:
            zone = by_id.get(az_id)
            if zone is None:
                yield Check(f"AZ ID {az_id}", FAIL, f"no zone {az_id} in {self.spec.region}",
                            "zones here: " + ", ".join(sorted(by_id)))
            elif zone.get("State", "available") != "available" or zone.get("OptInStatus") == "not-opted-in":
                local = zone.get("ZoneType") == "local-zone"
                hint = (f"aws ec2 modify-availability-zone-group --group-name {zone['GroupName']} --opt-in-status "
                        f"opted-in --region {self.spec.region}"
                        if local and zone.get("OptInStatus") == "not-opted-in" and zone.get("GroupName")
                        else "opt in to the zone, or choose another")
                yield Check(f"AZ ID {az_id}", FAIL, f"{az_id} ({zone['ZoneName']}) is "
                            f"{'a Local Zone, ' if local else ''}{zone.get('State')}, {zone.get('OptInStatus')}", hint)
            elif zone.get("ZoneType") == "local-zone":
                parent = zone.get("ParentZoneId")
                of = f", its parent zone {parent} ({zone.get('ParentZoneName')})" if parent else ""
                yield Check(f"AZ ID {az_id}", PASS, f"{az_id} is {zone['ZoneName']} in this account: a Local Zone"
                            f"{of}, opted in")
            else:
                yield Check(f"AZ ID {az_id}", PASS, f"{az_id} is {zone['ZoneName']} in this account")

    def offerings(self) -> Iterable[Check]:
        az = self.spec.availability_zone_id
        if self.hyperpod:
            yield Check("instance types", WARN, "SageMaker HyperPod runs ml.* instances: EC2 offerings do not "
                        "apply", "the SageMaker quotas below show what the account may run")
            return
        wanted = {g.instance_type: g for g in self.spec.node_groups}
        login = self.spec.orchestrator.login
        # where each type runs: the node groups' in the GPU zone; the login (system) nodes' in the
        # region's first AZ ID, which is the GPU zone unless that is a Local Zone
        places = sorted({(t, az) for t in wanted} | ({(login.instance_type, self.spec.region_zone_ids[0])}
                                                      if login.count else set()))
        pages = self.client("ec2").get_paginator("describe_instance_type_offerings").paginate(
            LocationType="availability-zone-id",
            Filters=[{"Name": "location", "Values": sorted({zone for _, zone in places})},
                     {"Name": "instance-type", "Values": sorted({t for t, _ in places})}])
        offered = {(o["InstanceType"], o.get("Location")) for page in pages for o in page["InstanceTypeOfferings"]}
        for instance_type, zone in places:
            group = wanted.get(instance_type) if zone == az else None
            if (instance_type, zone) in offered:
                yield Check(f"offering {instance_type}", PASS, f"offered in {zone}")
            elif group is not None and group.capacity.type in (CAPACITY_BLOCK, RESERVATION):
                yield Check(f"offering {instance_type}", WARN, f"not listed as offered in {zone}; node group "
                            f"{group.name} runs on a {group.capacity.type}, checked below",
                            "types sold only as Capacity Blocks or reservations are often not listed")
            else:
                yield Check(f"offering {instance_type}", FAIL, f"not offered in {zone}",
                            f"aws ec2 describe-instance-type-offerings --location-type availability-zone-id "
                            f"--filters Name=instance-type,Values={instance_type} --region {self.spec.region}")

    def reservations(self) -> Iterable[Check]:
        """Each reservation or resource group the node groups draw on, once: its kind, state,
        instance type and AZ ID for each group, and its size against what every group drawing on
        it needs together."""
        targets: dict[str, list[NodeGroupSpec]] = {}
        for group in self.spec.node_groups:
            capacity = group.capacity
            if capacity.type not in (CAPACITY_BLOCK, RESERVATION):
                continue
            if capacity.training_plan_arn and not (capacity.reservation_id or capacity.reservation_resource_group_arn):
                yield Check(f"reservation {group.name}", WARN, "training plans are not checked by preflight",
                            "aws sagemaker describe-training-plan")
                continue
            target = capacity.reservation_id or capacity.reservation_resource_group_arn
            if target:  # else it names no reservation: the rule reservation_given reports it
                targets.setdefault(target, []).append(group)
        for target, groups in targets.items():
            name = "reservation " + ", ".join(g.name for g in groups)
            yield from self._guard(name, partial(self._target, target, groups, name))

    def _target(self, target: str, groups: list[NodeGroupSpec], name: str) -> Iterable[Check]:
        if target.startswith("arn:"):
            ids = self._group_reservations(target)
            if not ids:
                yield Check(name, FAIL, "the resource group holds no capacity reservation",
                            "add the reservations to the group, or name one with reservation_id")
                return
        else:
            ids = [target]
        found = self._ec2_found("describe_capacity_reservations", "CapacityReservations", NOT_FOUND,
                                CapacityReservationIds=ids)
        if not found:
            yield Check(name, FAIL, f"{', '.join(ids)} not found in {self.spec.region}",
                        "check the id and that the credentials are of the account that owns the reservation")
            return
        for r in found:
            self.read[r["CapacityReservationId"]] = read_reservation(r)
        for group in groups:
            for r in found:
                yield from reservation_checks(group, r, self.spec.availability_zone_id, self.now, self.window)
        yield size_check(name, groups, found)
        ultraserver_groups = [g for g in groups if g.capacity.ultraserver_type]
        if ultraserver_groups:
            yield from self._guard(f"{name}: UltraServer block",
                                   partial(self._ultraserver_blocks, ultraserver_groups, found, name))

    def _ultraserver_blocks(self, groups: list[NodeGroupSpec], found: list[CapacityReservation], name: str
                            ) -> Iterable[Check]:
        """The Capacity Blocks of an UltraServer group's reservations: each is an UltraServer block
        of the group's UltraServer type, in the cluster's zone, in a state that takes instances;
        then their accelerator interconnect. DescribeCapacityBlocks says nothing of how many
        UltraServers a block holds, so neither does preflight (the size check counts instances)."""
        loose = [r["CapacityReservationId"] for r in found if not r.get("CapacityBlockId")]
        if loose:
            wanted = groups[0].capacity.ultraserver_type
            yield Check(f"{name}: UltraServer block", FAIL, f"{', '.join(loose)} {'is' if len(loose) == 1 else 'are'} "
                        "not an UltraServer Capacity Block (no CapacityBlockId)",
                        f"buy a {wanted} block: aws ec2 describe-capacity-block-offerings --ultraserver-type {wanted} "
                        f"--ultraserver-count {groups[0].capacity.ultraserver_count} --capacity-duration-hours HOURS "
                        f"--region {self.spec.region}")
        ids = sorted({r["CapacityBlockId"] for r in found if r.get("CapacityBlockId")})
        if not ids:
            return
        # one call, as for the reservations: a spec names a few blocks
        answer = self.client("ec2").describe_capacity_blocks(CapacityBlockIds=ids)
        blocks: dict[str, CapacityBlock] = {b["CapacityBlockId"]: b for b in answer["CapacityBlocks"]}
        for block_id in ids:
            block = blocks.get(block_id)
            if block is None:
                yield Check(f"{name}: UltraServer block", FAIL, f"DescribeCapacityBlocks does not list {block_id}",
                            "check that the credentials are of the account that owns the block")
                continue
            for group in groups:
                yield from block_checks(group, block, self.spec.availability_zone_id, self.now, self.window)
        if blocks:
            yield from self._guard(f"{name}: interconnect", partial(self._interconnect, blocks, name))

    def _interconnect(self, blocks: Mapping[str, CapacityBlock], name: str) -> Iterable[Check]:
        answer = self.client("ec2").describe_capacity_block_status(CapacityBlockIds=sorted(blocks))
        statuses = {s["CapacityBlockId"]: s for s in answer["CapacityBlockStatuses"]}
        for block_id, block in sorted(blocks.items()):
            status = statuses.get(block_id, {}).get("InterconnectStatus")
            command = (f"aws ec2 describe-capacity-block-status --capacity-block-ids {block_id} "
                       f"--region {self.spec.region}")
            if status == "ok":
                yield Check(f"{name}: interconnect", PASS, f"{block_id}: accelerator interconnect ok")
            elif status == "impaired":
                yield Check(f"{name}: interconnect", WARN, f"{block_id}: accelerator interconnect impaired: NVLink "
                            "traffic between the UltraServer's instances may fail or slow down",
                            f"{command}; if it stays impaired, open an AWS Support case")
            elif block.get("State") not in BLOCK_OK_STATES:
                yield Check(f"{name}: interconnect", WARN, f"{block_id}: accelerator interconnect "
                            f"{status or 'not reported'} ({block.get('State') or 'unknown state'} block)",
                            f"EC2 reports it once the block is active: {command}")
            else:
                yield Check(f"{name}: interconnect", WARN, f"{block_id}: accelerator interconnect "
                            f"{status or 'not reported'}", f"run preflight again in a few minutes, or {command}")

    def _ec2_found(self, call: str, key: str, not_found: set[str], **kwargs: Any) -> list[Any]:
        """The list an EC2 Describe call answers, or [] where it says that what was asked for
        does not exist (an error code of `not_found`)."""
        try:
            found: list[Any] = getattr(self.client("ec2"), call)(**kwargs)[key]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in not_found:
                raise
            return []
        return found

    def _group_reservations(self, group_arn: str) -> list[str]:
        pages = self.client("resource-groups").get_paginator("list_group_resources").paginate(Group=group_arn)
        arns = [r["Identifier"]["ResourceArn"] for page in pages for r in page.get("Resources", [])]
        return [arn.rsplit("/", 1)[-1] for arn in arns if ":capacity-reservation/" in arn]

    def placement_groups(self) -> Iterable[Check]:
        """Each existing placement group a node group names: it exists, and is a cluster group."""
        if self.hyperpod:
            return  # HyperPod places its instances itself (the rule hyperpod_placement_group)
        for group in self.spec.node_groups:
            if group.placement_group not in (AUTO, NONE):
                name = f"placement group {group.placement_group}"
                yield from self._guard(name, partial(self._placement_group, group, name))

    def _placement_group(self, group: NodeGroupSpec, name: str) -> Iterable[Check]:
        found = self._ec2_found("describe_placement_groups", "PlacementGroups", PLACEMENT_GROUP_NOT_FOUND,
                                GroupNames=[group.placement_group])
        if not found:
            yield Check(name, FAIL, f"no placement group {group.placement_group} in {self.spec.region}; node group "
                        f"{group.name} names it", "create it (aws ec2 create-placement-group --strategy cluster), "
                        "or use placement_group: auto")
            return
        pg = found[0]
        if pg.get("State", "available") != "available":
            yield Check(name, FAIL, f"{group.placement_group} is {pg.get('State')}", "use an available group")
        elif pg.get("Strategy") != "cluster":
            yield Check(name, WARN, f"{group.placement_group} is a {pg.get('Strategy')} placement group: EFA "
                        "traffic is fastest in a cluster placement group", "use a cluster placement group")
        else:
            yield Check(name, PASS, f"cluster placement group, {pg.get('State', 'available')}")

    def amis(self) -> Iterable[Check]:
        """Each AMI a node group names: it exists and is available, is built for the instance
        type's architecture, and its root snapshot fits in the root volume."""
        for group in self.spec.node_groups:
            if group.ami_id:
                name = f"AMI {group.ami_id}"
                yield from self._guard(name, partial(self._image, group, group.ami_id, name))

    def _image(self, group: NodeGroupSpec, ami: str, name: str) -> Iterable[Check]:
        found = self._ec2_found("describe_images", "Images", AMI_NOT_FOUND, ImageIds=[ami])
        if not found:
            yield Check(name, FAIL, f"{ami} not found in {self.spec.region} (or not shared with the account)",
                        "AMIs are regional: copy it to the region (aws ec2 copy-image), or share it")
            return
        image = found[0]
        if image.get("State", "available") != "available":
            yield Check(name, FAIL, f"{ami} is {image.get('State')}", "wait until it is available, or use another")
            return
        wanted = group.instance.architecture
        if image.get("Architecture") != wanted:
            yield Check(name, FAIL, f"{ami} is built for {image.get('Architecture')}; {group.instance_type} "
                        f"(node group {group.name}) runs {wanted}", f"use an {wanted} image")
            return
        root: dict[str, Any] = next((m for m in image.get("BlockDeviceMappings", [])
                     if m.get("DeviceName") == image.get("RootDeviceName")), {})
        snapshot_gib = root.get("Ebs", {}).get("VolumeSize")
        if snapshot_gib is not None and snapshot_gib > group.root_volume_gib:
            yield Check(name, FAIL, f"{ami}'s root snapshot is {snapshot_gib} GiB; root_volume_gib of node group "
                        f"{group.name} is {group.root_volume_gib}", f"set root_volume_gib to {snapshot_gib} or more")
            return
        size = f", root snapshot {snapshot_gib} GiB" if snapshot_gib is not None else ""
        yield Check(name, PASS, f"{image.get('Name', ami)}: available, {wanted}{size}")

    def node_images(self) -> Iterable[Check]:
        """What NAME-images needs of the region: each image's base image (its parameter; on AWS PCS
        its agent and Slurm releases; its root volume), EBS encryption by default, the service-linked
        roles an encrypted image's key names, and EC2 Image Builder answering (the build instances'
        vCPUs are in the quota checks)."""
        if not self.images:
            return
        for image in self.images:
            name = f"base image {image.key}"
            yield from self._guard(name, partial(self._base_image, image, name))
        name = "EBS encryption by default"
        yield from self._guard(name, partial(self._ebs_encryption, name))
        if any(image.encrypted for image in self.images):
            for user in sorted(image_facts.KEY_USERS):
                name = f"service-linked role {image_facts.KEY_USERS[user][1]}"
                yield from self._guard(name, partial(self._key_user, user, name))
        service, call, kwargs, key, what = IMAGE_BUILDER
        if offered_in(service, self.spec.region) is False:
            yield Check(what, FAIL, f"{what} is not offered in {self.spec.region} (botocore's endpoint data)",
                        "choose a region where it runs, or give every node group an ami_id of your own")
            return
        yield from self._guard(what, partial(self._answers, service, call, kwargs, key, what))

    def _key_user(self, user: str, name: str) -> Iterable[Check]:
        """A service that launches from the images encrypted with the storage key has its
        service-linked role: NAME-storage's key policy names it, and KMS refuses a policy that names
        a role that does not exist."""
        service, role = image_facts.KEY_USERS[user]
        try:
            self.client("iam").get_role(RoleName=role)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "NoSuchEntity":
                raise
            yield Check(name, FAIL, f"{role} does not exist: {self.spec.name}-storage's key policy lets it use the "
                        "storage key for the encrypted node images, and KMS refuses a policy naming a missing role",
                        f"aws iam create-service-linked-role --aws-service-name {service}")
            return
        yield Check(name, PASS, f"{role} exists (the storage key's policy lets it launch from the encrypted images)")

    def _base_image(self, image: model.NodeImage, name: str) -> Iterable[Check]:
        """The base image's public SSM parameter exists in the region (Image Builder resolves it
        when the image is built), and the image it names (DescribeImages): on AWS PCS, an agent that
        runs node lifecycle actions and the cluster's Slurm release (its description names both);
        its root device and root snapshot, which the image's recipe sizes (AWS PCS) or keeps
        (SageMaker HyperPod: fmcluster.facts.images.build_root_volume_gib)."""
        parameter, groups = image.base.parameter, image.groups
        try:
            value = self.client("ssm").get_parameter(Name=parameter)["Parameter"]["Value"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in PARAMETER_NOT_FOUND:
                raise
            yield Check(name, FAIL, f"{parameter} not found in {self.spec.region}: no base image to build "
                        f"{self.spec.name}-images' image for {', '.join(groups)} from",
                        "choose a region where the control plane publishes its base image, or give the node groups "
                        "an ami_id of their own (docs/guides/images.md)")
            return
        found = self._ec2_found("describe_images", "Images", AMI_NOT_FOUND, ImageIds=[value])
        describe = f"aws ec2 describe-images --image-ids {value} --region {self.spec.region}"
        if not found:
            yield Check(name, WARN, f"{parameter}: {value}, which DescribeImages does not find: its agent, Slurm "
                        "and root volume go unchecked", describe)
            return
        base = found[0]
        if image.plane != image_facts.PCS:
            yield Check(name, PASS, f"{parameter}: {value}")
        else:
            description = base.get("Description", "")
            yield self._pcs_agent(name, parameter, value, description)
            yield self._pcs_slurm(image, f"{name} Slurm", parameter, value, description)
        yield self._base_root(image, f"{name} root volume", value, base)

    def _pcs_agent(self, name: str, parameter: str, value: str, description: str) -> Check:
        agent = image_facts.pcs_agent(description)
        needs = (f"node lifecycle actions, which run the node program, need PCS agent {image_facts.PCS_AGENT_MIN} "
                 "or later")
        if agent is None:
            return Check(name, WARN, f"{parameter}: {value}; its description names no PCS agent version: {needs}",
                         f"aws ec2 describe-images --image-ids {value} --region {self.spec.region}")
        if image_facts.version_key(agent) < image_facts.version_key(image_facts.PCS_AGENT_MIN):
            return Check(name, FAIL, f"{parameter}: {value} has PCS agent {agent}; {needs} (a node of "
                         "it would never start slurmd)",
                         "deploy once AWS publishes a PCS AMI with a newer agent (raise images.revision to bake "
                         "from it), or give the node groups an ami_id of your own with agent "
                         f"{image_facts.PCS_AGENT_MIN} or later")
        return Check(name, PASS, f"{parameter}: {value}, PCS agent {agent}")

    def _pcs_slurm(self, image: model.NodeImage, name: str, parameter: str, value: str, description: str
                   ) -> Check:
        """The cluster's Slurm release is among those the PCS base image carries (its description
        lists them: fmcluster.facts.images.PCS_SLURM_IN_DESCRIPTION)."""
        versions = image_facts.pcs_slurm_versions(description)
        wanted = image.slurm_version
        if not versions:
            return Check(name, WARN, f"{value}'s description lists no Slurm versions: the cluster's Slurm "
                         f"{wanted} may not be on it ({image_facts.slurm_prefix(image.plane, wanted)})",
                         f"aws ec2 describe-images --image-ids {value} --region {self.spec.region}")
        listed = ", ".join(versions)
        releases = sorted({image_facts.slurm_release(v) for v in versions}, key=image_facts.version_key)
        if wanted in releases:
            return Check(name, PASS, f"{value} carries Slurm {listed}: the cluster's {wanted} among them")
        return Check(name, FAIL, f"the cluster's Slurm {wanted} (orchestrator.version) is not on {value} "
                     f"({parameter}), which carries Slurm {listed}: the image build finds no Slurm {wanted} to "
                     f"build Pyxis against and {self.spec.name}-images fails",
                     f"set orchestrator.version to one the base image carries ({', '.join(releases)}; the newest is "
                     f"{releases[-1]}), or wait until AWS publishes a PCS AMI with Slurm {wanted} and raise "
                     "images.revision")

    def _base_root(self, image: model.NodeImage, name: str, value: str, base: Mapping[str, Any]) -> Check:
        """What the image's root volume will be: its recipe sizes the root device
        (fmcluster.facts.images.BUILD_ROOT_DEVICE, AWS PCS), which must be the base's, to at least
        the base's snapshot; or keeps the base's (SageMaker HyperPod), which may carry no volume
        besides its root (fmcluster.facts.images.build_root_volume_gib)."""
        device = base.get("RootDeviceName")
        volumes = [m for m in base.get("BlockDeviceMappings", []) if "Ebs" in m]
        root = next((m for m in volumes if m.get("DeviceName") == device), None)
        size = root["Ebs"].get("VolumeSize") if root else None
        others = [m.get("DeviceName", "?") for m in volumes if m is not root]
        sized = image_facts.build_root_volume_gib(image.plane)
        describe = f"aws ec2 describe-images --image-ids {value} --region {self.spec.region}"
        if device is None or size is None:
            return Check(name, WARN, f"{value}: DescribeImages names no root device with its EBS snapshot size",
                         describe)
        found = f"{value}: root device {device}, root snapshot {size} GiB"
        if sized is None:  # SageMaker HyperPod: the image keeps the base's root volume
            if others:
                return Check(name, FAIL, f"{found}, and EBS volumes at {', '.join(others)}: the image would carry "
                             "them too, and SageMaker HyperPod takes a custom AMI with its primary snapshot volume "
                             "only", "give the node groups an ami_id of your own with a root volume only")
            return Check(name, PASS, f"{found}: the image keeps it (SageMaker sizes a HyperPod node's root volume "
                         "itself)")
        if device != image_facts.BUILD_ROOT_DEVICE:
            return Check(name, FAIL, f"{found}: the image's recipe sizes {image_facts.BUILD_ROOT_DEVICE} to {sized} "
                         f"GiB, which on this base adds a second volume and leaves the root at {size} GiB",
                         "give the node groups an ami_id of your own until fmcluster follows the base's root "
                         f"device ({describe})")
        if size > sized:
            return Check(name, FAIL, f"{found}: larger than the {sized} GiB the image's recipe gives the root volume "
                         "(EC2 refuses a volume smaller than its snapshot)",
                         "give the node groups an ami_id of your own until fmcluster's build volume "
                         "(fmcluster.facts.images.BUILD_ROOT_VOLUME_GIB) holds it")
        return Check(name, PASS, f"{found}: the image's root is {sized} GiB")

    def _ebs_encryption(self, name: str) -> Iterable[Check]:
        """EBS encryption by default in the region (fmcluster.facts.images.AWS_MANAGED_EBS_KEY's
        comment): it encrypts a SageMaker HyperPod image, which is built unencrypted because SageMaker
        takes only unencrypted custom AMIs. fmcluster refuses rather than build the image with the
        storage key: botocore's SageMaker model says "The custom AMI must be unencrypted"
        (ClusterInstanceGroupSpecification.ImageId), and ClusterEbsVolumeConfig.RootVolume's key is the
        key HyperPod encrypts the nodes' root volumes with, which it does already under storage.kms.
        An AWS PCS image without the storage key is encrypted with the default key, whatever the
        setting: AWS PCS launches from it through its service-linked role, whose own permissions
        cover AWS managed keys only (AWS PCS User Guide, "Required KMS key policy for use with
        encrypted EBS volumes in AWS PCS")."""
        ec2 = self.client("ec2")
        on = bool(ec2.get_ebs_encryption_by_default()["EbsEncryptionByDefault"])
        hyperpod = [i.key for i in self.images if i.plane == image_facts.HYPERPOD_SLURM]
        default_keyed = [i.key for i in self.images if i.plane == image_facts.PCS and not i.encrypted]
        key = ec2.get_ebs_default_kms_key_id()["KmsKeyId"] if (on and hyperpod) or default_keyed else None
        if hyperpod and on:
            yield Check(name, FAIL, f"EBS encryption by default is on in {self.spec.region} (key {key}): image "
                        f"{', '.join(hyperpod)} would come out encrypted, and SageMaker HyperPod launches only "
                        "unencrypted custom AMIs",
                        f"turn it off while {self.spec.name}-images builds (aws ec2 disable-ebs-encryption-by-default "
                        f"--region {self.spec.region}; the AMI stays unencrypted when it is turned on again, and "
                        "HyperPod encrypts the nodes' volumes itself, with the storage key under storage.kms); "
                        "where an organization policy keeps it on, HyperPod nodes cannot launch from fmcluster's "
                        "images in this account")
            return
        if default_keyed and key is not None and key.rsplit(":", 1)[-1] != image_facts.AWS_MANAGED_EBS_KEY:
            yield Check(name, WARN, f"image {', '.join(default_keyed)} is encrypted with the account's default EBS "
                        f"key {key}, which may be customer managed: AWS PCS launches nodes from it through "
                        "AWSServiceRoleForPCS, whose own permissions cover AWS managed keys only",
                        "set storage.kms: true (the storage key's policy lets AWS PCS use it), or give that key the "
                        "policy of the AWS PCS User Guide's \"Required KMS key policy for use with encrypted EBS "
                        "volumes in AWS PCS\"")
            return
        state = "on" if on else "off"
        what = ("the HyperPod image is built unencrypted, as SageMaker takes it" if hyperpod
                else "the images are encrypted with the storage key" if not default_keyed
                else f"the images are encrypted with the account's default EBS key, {key}")
        yield Check(name, PASS, f"EBS encryption by default is {state} in {self.spec.region}: {what}")

    def quotas(self) -> Iterable[Check]:
        builds = self._builds()
        if self.hyperpod:
            yield from self._hyperpod_quotas()
            needs = dict(builds)  # HyperPod's nodes count against SageMaker's quotas, the builds against EC2's
        else:
            needs = dict(builds)
            for instance_type, count, market in self._running():
                cls = _quota_class(instance_type)
                if cls:
                    needs[(cls, market)] = needs.get((cls, market), 0) + count * _vcpus(instance_type)
        for (cls, market), vcpus in sorted(needs.items()):
            label = f"quota {MARKETS[market]} {cls} vCPUs"
            yield from self._guard(label, partial(self._ec2_quota, (cls, market), vcpus, label,
                                                  builds.get((cls, market), 0)))
        for image in self.images:
            if image.build_instance_type not in BUILD_INSTANCE_VCPUS:
                yield Check(f"quota image build {image.key}", WARN,
                            f"the vCPUs of {image.build_instance_type} are not known to preflight",
                            "check that the On-Demand quota of its class leaves room for one more instance")

    def _builds(self) -> dict[tuple[str, str], int]:
        """vCPUs of NAME-images' build instances, one per image at a time (each image builds, then
        tests, on one instance at a time), by quota class."""
        needs: dict[tuple[str, str], int] = {}
        for image in self.images:
            cls = _quota_class(image.build_instance_type)
            vcpus = BUILD_INSTANCE_VCPUS.get(image.build_instance_type)
            if cls and vcpus:
                needs[(cls, ON_DEMAND)] = needs.get((cls, ON_DEMAND), 0) + vcpus
        return needs

    def _ec2_quota(self, key: tuple[str, str], vcpus: int, label: str, builds: int = 0) -> Iterable[Check]:
        code, title = EC2_QUOTAS[key]
        value = self._quota("ec2", code)
        of_which = f" ({builds} of them for the image builds of {self.spec.name}-images)" if builds else ""
        if value is None:
            yield Check(label, WARN, f"{title} ({code}) not found; {vcpus} vCPUs needed{of_which}",
                        "check it in the Service Quotas console")
        elif value >= vcpus:
            yield Check(label, PASS, f"{vcpus} vCPUs needed{of_which} of {value:g}: {title} ({code})")
        else:
            yield Check(label, FAIL, f"{vcpus} vCPUs needed{of_which}, the quota is {value:g}: {title} ({code}); "
                        "instances already running count too",
                        f"aws service-quotas request-service-quota-increase --service-code ec2 --quota-code "
                        f"{code} --desired-value {vcpus} --region {self.spec.region}")

    def _running(self) -> Iterable[tuple[str, int, str]]:
        """(instance type, instances at most, market) of what runs outside reservations and blocks."""
        for g in self.spec.node_groups:
            if g.capacity.type in (ON_DEMAND, SPOT) and g.max_nodes:
                yield g.instance_type, g.max_nodes, g.capacity.type
        login = self.spec.orchestrator.login
        if login.count:
            yield login.instance_type, login.count, ON_DEMAND

    def _quota(self, service: str, code: str) -> float | None:
        quotas = self.client("service-quotas")
        for call in (quotas.get_service_quota, quotas.get_aws_default_service_quota):
            try:
                return float(call(ServiceCode=service, QuotaCode=code)["Quota"]["Value"])
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "NoSuchResourceException":
                    raise
        return None

    def _hyperpod_quotas(self) -> Iterable[Check]:
        pages = self.client("service-quotas").get_paginator("list_service_quotas").paginate(ServiceCode="sagemaker")
        values = {q["QuotaName"]: q["Value"] for page in pages for q in page["Quotas"]}
        for instance_type, count, _ in self._running_hyperpod():
            title = f"ml.{instance_type} for cluster usage"
            value = values.get(title)
            if value is None:
                yield Check(f"quota {title}", WARN, "quota not found", "check it in the Service Quotas console")
            else:
                status = PASS if value >= count else FAIL
                yield Check(f"quota {title}", status, f"{count} instances needed of {value:g}",
                            None if status == PASS else "request an increase of the SageMaker quota")

    def _running_hyperpod(self) -> Iterable[tuple[str, int, str]]:
        counts: dict[str, int] = {}
        for g in self.spec.node_groups:
            counts[g.instance_type] = counts.get(g.instance_type, 0) + g.max_nodes
        login = self.spec.orchestrator.login
        if login.count:
            counts[login.instance_type] = counts.get(login.instance_type, 0) + login.count
        return [(t, n, ON_DEMAND) for t, n in sorted(counts.items())]

    def lustre(self) -> Iterable[Check]:
        fs = self.spec.storage.lustre
        if fs is None:
            return
        if "FileSystems" not in self.client("fsx").describe_file_systems(MaxResults=1):
            raise KeyError("FileSystems")  # parsed, but not FSx's answer
        kind = fs.deployment_type + (" with EFA" if fs.efa else "")
        yield Check(f"FSx {kind}", WARN, f"FSx reachable in {self.spec.region}, but no read-only API tells whether "
                    f"{kind} can be created in {self.spec.availability_zone_id}: only the create call does",
                    "see 'Availability' in the FSx for Lustre User Guide; a refused create rolls back "
                    f"{self.spec.name}-storage only")

    def home(self) -> Iterable[Check]:
        """The shared home (storage.home): FSx answers, and the deployment type's availability in
        the AZ, which only the create call tells (the FSx for OpenZFS User Guide, "Deployment type
        availability": SINGLE_AZ_2 and the HA types are not in every region)."""
        home = self.spec.storage.home
        if home is None:
            return
        if "FileSystems" not in self.client("fsx").describe_file_systems(MaxResults=1):
            raise KeyError("FileSystems")  # parsed, but not FSx's answer
        yield Check(f"FSx for OpenZFS {home.deployment_type}", WARN,
                    f"FSx reachable in {self.spec.region}, but no read-only API tells whether an OpenZFS "
                    f"{home.deployment_type} file system can be created in {self.spec.availability_zone_id}: only "
                    "the create call does",
                    "see 'Deployment type availability' in the FSx for OpenZFS User Guide; a refused create rolls "
                    f"back {self.spec.name}-storage only")

    def control_plane(self) -> Iterable[Check]:
        for service, call, kwargs, key, what in CONTROL_PLANE_SERVICES[self.spec.orchestrator.type]:
            if offered_in(service, self.spec.region) is False:
                yield Check(what, FAIL, f"{what} is not offered in {self.spec.region} (botocore's endpoint data)",
                            "choose a region where the service runs")
                continue
            yield from self._guard(what, partial(self._answers, service, call, kwargs, key, what))

    def _answers(self, service: ServiceName, call: str, kwargs: dict[str, Any], key: str, what: str
                 ) -> Iterable[Check]:
        answer = getattr(self.client(service), call)(**kwargs)
        if key not in answer:  # parsed, but not the service's answer
            raise KeyError(key)
        yield Check(what, PASS, f"{what} answers in {self.spec.region}")


@lru_cache(maxsize=1)
def _endpoint_session() -> Session:
    """One botocore session a process, for its endpoint data: each new session reads botocore's
    endpoints file again (a tenth of a second), and a preflight asks for each service it checks."""
    import botocore.session  # start-up cost: loaded only where a check reads the endpoint data

    return botocore.session.get_session()


def offered_in(service: str, region: str) -> bool | None:
    """Whether botocore's endpoint data lists `service` in `region`. None where the data cannot
    say: it lists no region for the service (services that ship only endpoint rules, such as AWS
    PCS), or does not list the region for EC2 either (a region newer than its endpoint list)."""
    session, partition = _endpoint_session(), regions.partition(region)
    listed = session.get_available_regions(service, partition_name=partition)
    if not listed or region not in session.get_available_regions("ec2", partition_name=partition):
        return None
    return region in listed


def _vcpus(instance_type: str) -> int:
    return catalog.catalog()[instance_type].vcpus


class ReadReservation(TypedDict):
    """A reservation as preflight read it, in `--format json`'s "reservations" (`fmcluster plan
    --preflight FILE` shows the Capacity Blocks' windows from it)."""

    id: str
    kind: str  # "capacity-block" or "reservation"
    state: str
    instance_type: str
    instances: int
    start: Optional[str]  # ISO 8601, UTC
    end: Optional[str]  # None: no end date


def read_reservation(r: CapacityReservation) -> ReadReservation:
    def iso(value: Optional[datetime]) -> Optional[str]:
        return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if value else None

    return {"id": r["CapacityReservationId"],
            "kind": "capacity-block" if r.get("ReservationType") == "capacity-block" else "reservation",
            "state": r.get("State", ""), "instance_type": r.get("InstanceType", ""),
            "instances": r.get("TotalInstanceCount", 0), "start": iso(r.get("StartDate")), "end": iso(r.get("EndDate"))}


def reservation_checks(group: NodeGroupSpec, r: CapacityReservation, az_id: str, now: datetime,
                       window: tuple[datetime, datetime] | None) -> Iterable[Check]:
    """What one DescribeCapacityReservations entry says about a node group: state and window,
    kind, instance type and AZ ID (its size: size_check, over every group drawing on it)."""
    rid, name = r["CapacityReservationId"], f"reservation {group.name}"
    block = r.get("ReservationType") == "capacity-block"
    start, end, state = r.get("StartDate"), r.get("EndDate"), r.get("State", "")
    kind = "Capacity Block" if block else "On-Demand Capacity Reservation"
    span = f"{_when(start)} to {_when(end)}" if end else f"from {_when(start)}, no end date"
    if (group.capacity.type == CAPACITY_BLOCK) != block:
        wanted = "capacity-block" if block else "reservation"
        yield Check(f"{name}: kind", FAIL, f"{rid} is a {kind}, the node group says {group.capacity.type}",
                    f"set capacity.type: {wanted}")
    from_, until = window or (now, now)
    covers = (start is None or start <= from_) and (end is None or end >= until)
    planned = "the planned window" if window else "now"
    if state in RESERVATION_OK_STATES | RESERVATION_WAIT_STATES and window and not covers:
        yield Check(f"{name}: window", FAIL, f"{rid} runs {span}, which does not cover {planned} "
                    f"({_when(from_)} to {_when(until)})", "buy a Capacity Block for the window, or move the window")
    elif state in RESERVATION_OK_STATES and covers:
        soon = end is not None and end - now < ENDING_SOON
        yield Check(f"{name}: state", WARN if soon else PASS, f"{rid}: {state} {kind}, {span}"
                    + (" (ends within 24 h)" if soon else ""))
    elif state in RESERVATION_WAIT_STATES:
        hint = None if window else "pass --window START/END to check the planned window"
        status = PASS if window and covers else WARN
        yield Check(f"{name}: state", status, f"{rid}: {state} {kind}, {span}", hint)
    else:
        yield Check(f"{name}: state", FAIL, f"{rid}: {state or 'unknown state'} {kind}, {span}",
                    "nodes cannot launch into it: buy or create a new one")
    if r.get("InstanceType") != group.instance_type:
        yield Check(f"{name}: instance type", FAIL, f"{rid} is for {r.get('InstanceType')}, the node group runs "
                    f"{group.instance_type}", "make them the same")
    else:
        yield Check(f"{name}: instance type", PASS, group.instance_type)
    if r.get("AvailabilityZoneId") != az_id:
        yield Check(f"{name}: AZ ID", FAIL, f"{rid} is in {r.get('AvailabilityZoneId')} "
                    f"({r.get('AvailabilityZone')}), the cluster's GPU AZ ID is {az_id}",
                    f"set availability_zone_id: {r.get('AvailabilityZoneId')}")
    else:
        yield Check(f"{name}: AZ ID", PASS, az_id)


def block_checks(group: NodeGroupSpec, block: CapacityBlock, az_id: str, now: datetime,
                 window: tuple[datetime, datetime] | None) -> Iterable[Check]:
    """What one DescribeCapacityBlocks entry says about an UltraServer node group: its UltraServer
    type, AZ ID and state (EC2 terminates an UltraServer block's instances from
    ULTRASERVER_BLOCK_TERMINATION_MINUTES before its end)."""
    bid, name, wanted = block["CapacityBlockId"], f"reservation {group.name}", group.capacity.ultraserver_type
    kind = block.get("UltraserverType")
    if kind == wanted:
        yield Check(f"{name}: UltraServer type", PASS, f"{bid}: {kind}")
    else:
        server = catalog.ULTRASERVERS.get(kind or "")
        hint = (f"set capacity.ultraserver_type: {kind}" if server and server.instance_type == group.instance_type
                else f"target a {wanted} UltraServer Capacity Block")
        yield Check(f"{name}: UltraServer type", FAIL, f"{bid} is a block of "
                    f"{kind + ' UltraServers' if kind else 'instances, not of UltraServers'}; node group "
                    f"{group.name} says {wanted}", hint)
    if block.get("AvailabilityZoneId") != az_id:
        yield Check(f"{name}: block AZ ID", FAIL, f"{bid} is in {block.get('AvailabilityZoneId')} "
                    f"({block.get('AvailabilityZone')}), the cluster's GPU AZ ID is {az_id}",
                    f"set availability_zone_id: {block.get('AvailabilityZoneId')}")
    else:
        yield Check(f"{name}: block AZ ID", PASS, f"{bid}: {az_id}")
    start, end, state = block.get("StartDate"), block.get("EndDate"), block.get("State", "")
    span = f"{_when(start)} to {_when(end)}"
    minutes = ULTRASERVER_BLOCK_TERMINATION_MINUTES
    drain = (f"; EC2 terminates its instances from {_when(end - timedelta(minutes=minutes))} ({minutes} minutes "
             "before the end)" if end else "")
    from_, until = window or (now, now)
    covers = (start is None or start <= from_) and (end is None or end >= until)
    if state in BLOCK_OK_STATES:
        yield Check(f"{name}: block state", PASS, f"{bid}: {state} UltraServer Capacity Block, {span}{drain}")
    elif state in BLOCK_WAIT_STATES:
        yield Check(f"{name}: block state", PASS if window and covers else WARN,
                    f"{bid}: {state} UltraServer Capacity Block, {span}{drain}",
                    None if window else "pass --window START/END to check the planned window")
    else:
        yield Check(f"{name}: block state", FAIL, f"{bid}: {state or 'unknown state'} UltraServer Capacity Block, "
                    f"{span}", "nodes cannot launch into it: buy a new UltraServer Capacity Block")


def size_check(name: str, groups: list[NodeGroupSpec], found: list[CapacityReservation]) -> Check:
    """The reservations of one target (a reservation, or the reservations of a resource group)
    against what every node group drawing on it needs at most, together."""
    need = sum(g.max_nodes for g in groups)
    total = sum(r.get("TotalInstanceCount", 0) for r in found)
    available = sum(r.get("AvailableInstanceCount", 0) for r in found)
    held = found[0]["CapacityReservationId"] if len(found) == 1 else f"{len(found)} reservations"
    needs = (f"node group {groups[0].name} needs up to {need}" if len(groups) == 1 else
             "node groups " + ", ".join(f"{g.name} ({g.max_nodes})" for g in groups) + f" need up to {need} together")
    if total < need:
        return Check(f"{name}: size", FAIL, f"{held} hold{'s' if len(found) == 1 else ''} {total} instances; {needs}",
                     "size the node groups to what the reservation holds, or reserve more")
    if available < need:
        return Check(f"{name}: size", WARN, f"{held} hold{'s' if len(found) == 1 else ''} {total}, {available} "
                     f"available now (others in use); {needs}")
    return Check(f"{name}: size", PASS, f"{held} hold{'s' if len(found) == 1 else ''} {total} instances, {available} "
                 f"available; {needs}")


# ---- the command ---------------------------------------------------------------------------

FORMATS = ("text", "json")
NO_CREDENTIALS_HINT = ("preflight reads the target account: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
                       "(aws sso login, aws configure), then run it again")


@dataclass(frozen=True)
class PreflightReport:
    cluster: str
    region: str
    checks: tuple[Check, ...] = ()
    reservations: tuple[ReadReservation, ...] = ()  # what it read of them, by id
    error: str | None = None  # nothing could be checked (no usable credentials)
    hint: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not any(c.status == FAIL for c in self.checks)


def placeholder_checks(spec: ClusterSpec) -> list[Check]:
    """A failed check for each placeholder of the spec (fmcluster.spec.placeholders: what `init`
    marks `put yours`, documentation values), which validate only warns of: none may reach AWS.
    Accepting the warning in the spec quiets validate, not this. None where there is none."""
    return [Check("placeholder", FAIL, f"{dotted(f.path)}: {f.message}", f.hint) for f in placeholders.found(spec)]


def run(spec: ClusterSpec, window: tuple[datetime, datetime] | None = None, client: ClientFactory | None = None,
        now: datetime | None = None) -> PreflightReport:
    """Run every check; `client` gives a client per service (default: the credentials' session).
    The spec's placeholders first: they need no account."""
    try:
        preflight = Preflight(spec, client or session_clients(spec.region), now, window)
        checks = placeholder_checks(spec) + preflight.run()
    except CredentialsProblem as exc:
        return PreflightReport(spec.name, spec.region, error=f"no usable AWS credentials: {exc}",
                               hint=NO_CREDENTIALS_HINT)
    read = preflight.read
    return PreflightReport(spec.name, spec.region, tuple(checks), tuple(read[k] for k in sorted(read)))


WIDTH = 100  # the text table's lines fit a terminal or a review tool this wide
NARROWEST_RESULT = 40  # the RESULT column wraps no narrower than this


class _Wrapper(textwrap.TextWrapper):
    """textwrap that breaks a word too long for a line after a `/` or `:` (paths, ARNs) before
    it breaks it anywhere."""

    def _split(self, text: str) -> list[str]:
        chunks = super()._split(text)
        return [piece for chunk in chunks
                for piece in (re.split(r"(?<=[/:])", chunk) if len(chunk) > self.width else [chunk]) if piece]


def render_text(report: PreflightReport) -> str:
    """A line per check within WIDTH columns: its result and hint wrap in the RESULT column."""
    checks = report.checks
    rows = [("STATUS", "CHECK", "RESULT")] + [(c.status.upper(), c.name, c.reason) for c in checks]
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    column = 6 + widths[0] + widths[1]
    room = max(WIDTH - column, NARROWEST_RESULT)
    result = _Wrapper(room, break_on_hyphens=False)
    hinted = _Wrapper(room, break_on_hyphens=False, subsequent_indent="      ")
    lines = [f"fmcluster preflight: {report.cluster} in {report.region}"]
    for i, (status, name, reason) in enumerate(rows):
        first, *more = result.wrap(reason) or [""]
        lines.append(f"  {status.ljust(widths[0])}  {name.ljust(widths[1])}  {first}".rstrip())
        lines += [" " * column + line for line in more]
        hint = checks[i - 1].hint if i else None
        if hint:
            lines += [" " * column + line for line in hinted.wrap(f"hint: {hint}")]
    counts = {s: sum(c.status == s for c in checks) for s in (PASS, WARN, FAIL)}
    lines.append(f"{len(checks)} checks: {counts[PASS]} pass, {counts[WARN]} warn, {counts[FAIL]} fail")
    return "\n".join(lines) + "\n"


def render_json(report: PreflightReport) -> str:
    if report.error is not None:  # a pipeline reading stdout gets JSON whatever happened
        return json.dumps({"cluster": report.cluster, "region": report.region, "ok": False, "error": report.error,
                           "hint": report.hint, "checks": [], "reservations": []}, indent=2) + "\n"
    return json.dumps({"cluster": report.cluster, "region": report.region, "ok": report.ok,
                       "checks": [asdict(c) for c in report.checks], "reservations": list(report.reservations)},
                      indent=2) + "\n"


def render(report: PreflightReport, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr): the table (or JSON); a run that checked nothing says why on stderr."""
    err = f"error: {report.error}\n  hint: {report.hint}\n" if report.error is not None else ""
    if fmt == "json":
        return render_json(report), err
    return ("" if report.error is not None else render_text(report)), err


def exit_code(report: PreflightReport) -> int:
    """1 when a check fails or nothing can be checked."""
    return 0 if report.ok else 1
