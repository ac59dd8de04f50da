"""The AWS calls of `fmcluster capacity`, each through a client of the factory it is given
(boto3's session in use; moto-backed and Stubber-backed clients in the tests, as preflight's), and
what stops one, as a Failure with a hint: access denied, no capacity, throttling, no credentials,
an endpoint out of reach. The requests and answers are botocore's shapes (offerings' docstring).

EC2: DescribeAvailabilityZones (AZ names to AZ IDs: an offering names its AZ), DescribeCapacity-
BlockOfferings, PurchaseCapacityBlock, DescribeCapacityReservations, DescribeCapacityBlock-
ExtensionOfferings, PurchaseCapacityBlockExtension. SageMaker: SearchTrainingPlanOfferings,
CreateTrainingPlan, DescribeTrainingPlan, ExtendTrainingPlan. STS: GetCallerIdentity."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
)
from botocore.parsers import ResponseParserError

from fmcluster.deploy.preflight.context import ClientFactory, CredentialsProblem
from fmcluster.deploy.preflight.guard import ACCESS_DENIED, BAD_CREDENTIALS, THROTTLED, UNEXPECTED_ANSWER

PLATFORM = "Linux/UNIX"  # ec2 CapacityReservationInstancePlatform: the nodes' images are Linux
MAX_PAGES = 20  # of one Describe call's answer
# What EC2 and SageMaker answer when the capacity asked for is not there (EC2 API, "Error codes")
NO_CAPACITY = {"InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientReservedInstanceCapacity",
               "InsufficientCapacityError", "CapacityError"}
CREDENTIALS_HINT = ("set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (aws sso login, aws configure) "
                    "for the spec's account, then run it again")


# What a call (or the reading of its answer) raises that `failure` words: AWS's answers, botocore's
# own errors (credentials, the network), an answer that is not AWS's or lacks what is read
ERRORS: tuple[type[Exception], ...] = (ClientError, BotoCoreError, ResponseParserError, CredentialsProblem,
                                       *UNEXPECTED_ANSWER)


@dataclass(frozen=True)
class Failure:
    """What stopped a call: `kind` (access-denied, no-capacity, credentials, throttled, network,
    answer, aws), what happened and what to do."""

    kind: str
    message: str
    hint: Optional[str] = None


def failure(exc: Exception, operation: str = "") -> Failure:
    """The Failure of an exception a call raised (`operation`: the call, where the exception does
    not name it)."""
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError, CredentialsProblem)):
        return Failure("credentials", f"no usable AWS credentials: {exc}", CREDENTIALS_HINT)
    if isinstance(exc, ClientError):
        return _client_error(exc)
    if isinstance(exc, ConnectionError):
        endpoint = getattr(exc, "kwargs", {}).get("endpoint_url") or "the endpoint"
        return Failure("network", f"cannot reach {endpoint}: {exc}",
                       "check the network (a proxy, a VPC endpoint, DNS), then run it again")
    if isinstance(exc, ResponseParserError):
        return Failure("answer", f"{operation or 'a call'}: the answer is not an AWS API response",
                       "check AWS_ENDPOINT_URL and proxies: something other than AWS answered")
    if isinstance(exc, UNEXPECTED_ANSWER):
        return Failure("answer", f"{operation or 'a call'}: the answer lacks what fmcluster reads "
                                 f"({type(exc).__name__}: {exc})",
                       "check AWS_ENDPOINT_URL and proxies: something other than AWS may have answered")
    if isinstance(exc, BotoCoreError):
        return Failure("aws", str(exc))
    raise exc


def _client_error(exc: ClientError) -> Failure:
    error = exc.response.get("Error", {})
    code, message = str(error.get("Code", "")), str(error.get("Message", "")) or str(exc)
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    operation = exc.operation_name
    service = _service(exc)
    if code in BAD_CREDENTIALS:
        return Failure("credentials", f"no usable AWS credentials: {code}: {message}", CREDENTIALS_HINT)
    if code in ACCESS_DENIED:
        return Failure("access-denied", f"access denied to {operation}",
                       f"allow {service}:{operation} to the credentials' role or user (IAM)")
    if code in NO_CAPACITY:
        return Failure("no-capacity", f"{operation}: not enough capacity ({code}: {message})",
                       "offerings are first come, first served: run `fmcluster capacity find` again and choose "
                       "another")
    if code == "ResourceInUse" and operation == "CreateTrainingPlan":
        return Failure("aws", f"{operation}: {message}", "a training plan of that name exists: give --plan-name")
    if code == "ResourceLimitExceeded":
        return Failure("aws", f"{operation}: a SageMaker quota is reached: {message}",
                       "ask for more in Service Quotas (service SageMaker), or end what holds it")
    if code in THROTTLED:
        return Failure("throttled", f"{operation} was throttled ({code}) after retries", "run it again in a minute")
    if status >= 500:
        return Failure("aws", f"{operation} failed on the AWS side: HTTP {status} {code}".rstrip(),
                       "run it again; if it persists, see the AWS Health Dashboard")
    return Failure("aws", f"{operation} failed: {code}: {message}")


def _service(exc: ClientError) -> str:
    """The IAM prefix of the call's service: sts, sagemaker (its training plans) or ec2."""
    operation = exc.operation_name
    return "sts" if operation == "GetCallerIdentity" else "sagemaker" if "TrainingPlan" in operation else "ec2"


# ---- the calls ---------------------------------------------------------------------------------

def account(client: ClientFactory) -> str:
    """The account of the credentials."""
    return str(client("sts").get_caller_identity()["Account"])


def zones(client: ClientFactory) -> dict[str, str]:
    """AZ name -> AZ ID of every zone of the region, opted in or not (Local Zones too)."""
    found = client("ec2").describe_availability_zones(AllAvailabilityZones=True)["AvailabilityZones"]
    return {z["ZoneName"]: z["ZoneId"] for z in found if z.get("ZoneName") and z.get("ZoneId")}


def plan_types(client: ClientFactory) -> tuple[str, ...]:
    """The instance types SageMaker sells training plans of, as its model lists them."""
    shape = client("sagemaker").meta.service_model.shape_for("ReservedCapacityInstanceType")
    return tuple(shape.enum)


def block_offerings(client: ClientFactory, kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every CapacityBlockOffering of a DescribeCapacityBlockOfferings request, page after page."""
    return _pages(client("ec2").describe_capacity_block_offerings, dict(kwargs), "CapacityBlockOfferings")


def plan_offerings(client: ClientFactory, kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = client("sagemaker").search_training_plan_offerings(**kwargs)["TrainingPlanOfferings"]
    return found


def purchase_block(client: ClientFactory, offering_id: str) -> dict[str, Any]:
    """PurchaseCapacityBlock: the CapacityReservation of the block bought."""
    answer = client("ec2").purchase_capacity_block(CapacityBlockOfferingId=offering_id, InstancePlatform=PLATFORM)
    reservation: dict[str, Any] = answer["CapacityReservation"]
    return reservation


def create_plan(client: ClientFactory, name: str, offering_id: str, tags: Mapping[str, str]) -> str:
    """CreateTrainingPlan: the ARN of the plan bought."""
    answer = client("sagemaker").create_training_plan(
        TrainingPlanName=name, TrainingPlanOfferingId=offering_id,
        Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
    return str(answer["TrainingPlanArn"])


def reservation(client: ClientFactory, reservation_id: str) -> Optional[dict[str, Any]]:
    """The capacity reservation `reservation_id` (a Capacity Block's), None where EC2 has none."""
    try:
        found = client("ec2").describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("InvalidCapacityReservationId.NotFound",
                                                         "InvalidCapacityReservationId.Malformed"):
            return None
        raise
    reservations: list[dict[str, Any]] = found["CapacityReservations"]
    return reservations[0] if reservations else None


def block_extensions(client: ClientFactory, reservation_id: str, hours: int) -> list[dict[str, Any]]:
    return _pages(client("ec2").describe_capacity_block_extension_offerings,
                  {"CapacityReservationId": reservation_id, "CapacityBlockExtensionDurationHours": hours},
                  "CapacityBlockExtensionOfferings")


def purchase_extension(client: ClientFactory, offering_id: str, reservation_id: str) -> dict[str, Any]:
    """PurchaseCapacityBlockExtension: the CapacityBlockExtension bought."""
    answer = client("ec2").purchase_capacity_block_extension(CapacityBlockExtensionOfferingId=offering_id,
                                                             CapacityReservationId=reservation_id)
    extensions: list[dict[str, Any]] = answer["CapacityBlockExtensions"]
    return extensions[0]


def training_plan(client: ClientFactory, arn: str) -> dict[str, Any]:
    plan: dict[str, Any] = client("sagemaker").describe_training_plan(TrainingPlanName=arn)
    return plan


def plan_extensions(client: ClientFactory, arn: str, hours: int) -> list[dict[str, Any]]:
    answer = client("sagemaker").search_training_plan_offerings(TrainingPlanArn=arn, DurationHours=hours)
    found: list[dict[str, Any]] = answer.get("TrainingPlanExtensionOfferings", [])
    return found


def extend_plan(client: ClientFactory, offering_id: str) -> dict[str, Any]:
    """ExtendTrainingPlan: the TrainingPlanExtension bought."""
    answer = client("sagemaker").extend_training_plan(TrainingPlanExtensionOfferingId=offering_id)
    extensions: list[dict[str, Any]] = answer["TrainingPlanExtensions"]
    return extensions[0]


def _pages(call: Any, kwargs: dict[str, Any], key: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for _ in range(MAX_PAGES):
        answer = call(**kwargs)
        found += answer.get(key, [])
        if not answer.get("NextToken"):
            break
        kwargs = {**kwargs, "NextToken": answer["NextToken"]}
    return found
