"""What stops a check, as one FAIL row of it: an error AWS answers (access denied, throttling, the
region not enabled, a 5xx), an endpoint that cannot be reached or answers what is not AWS's, an
answer without the fields asked for. Credentials that do not work stop the whole run instead
(CredentialsProblem). Also the read of a Describe call where "not found" is an answer."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
)
from botocore.parsers import ResponseParserError

from fmcluster.deploy.preflight.context import FAIL, Check, Context, CredentialsProblem

# What preflight calls, as IAM actions (the hint of an access denied)
PERMISSIONS = ("ec2:Describe*", "servicequotas:Get*", "servicequotas:List*", "fsx:Describe*",
               "resource-groups:ListGroupResources", "the control plane's List*",
               "sagemaker:DescribeTrainingPlan (training plans)", "sts:GetCallerIdentity",
               "ssm:GetParameter, imagebuilder:ListImageRecipes, iam:GetRole, ec2:GetEbsEncryptionByDefault and "
               "ec2:GetEbsDefaultKmsKeyId (node images)")
# The calls of a Capacity Block, in ec2:Describe* (named in their access-denied hint): an UltraServer
# group's block is read with both, any block EC2 names by a CapacityBlockId with its status
BLOCK_CALLS = ("DescribeCapacityBlocks", "DescribeCapacityBlockStatus")
ACCESS_DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedException",
                 "AuthorizationError"}
BAD_CREDENTIALS = {"InvalidClientTokenId", "UnrecognizedClientException", "ExpiredToken", "ExpiredTokenException",
                   "SignatureDoesNotMatch", "InvalidAccessKeyId"}
THROTTLED = {"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException",
             "RequestThrottled", "SlowDown"}
# What a parseable answer without the fields asked for raises in the checks' own code.
UNEXPECTED_ANSWER = (KeyError, IndexError, TypeError, ValueError, AttributeError)


def guard(ctx: Context, name: str, fn: Callable[[], Iterable[Check]]) -> list[Check]:
    """The checks `fn` yields, or one FAIL row named `name` for whatever stopped it (the
    credentials aside, which stop the run)."""
    try:
        return list(fn())
    except (NoCredentialsError, PartialCredentialsError) as exc:
        raise CredentialsProblem(str(exc)) from None
    except ClientError as exc:
        return [client_error(ctx, name, exc)]
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


def client_error(ctx: Context, name: str, exc: ClientError) -> Check:
    error = exc.response.get("Error", {})
    code, message = str(error.get("Code", "")), str(error.get("Message", exc))
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    operation = exc.operation_name
    if code in BAD_CREDENTIALS:
        raise CredentialsProblem(f"{code}: {message}") from None
    if code in ACCESS_DENIED:
        if operation in BLOCK_CALLS:
            return Check(name, FAIL, f"access denied to {operation}",
                         f"allow ec2:{operation} (read-only, in ec2:Describe*): preflight reads a Capacity Block "
                         "with ec2:DescribeCapacityBlocks (an UltraServer group's) and "
                         "ec2:DescribeCapacityBlockStatus")
        return Check(name, FAIL, f"access denied to {operation}",
                     "preflight needs read-only permissions: " + ", ".join(PERMISSIONS))
    if code in ("OptInRequired", "AuthFailure"):
        return Check(name, FAIL, f"{operation}: {message}",
                     f"enable the region {ctx.spec.region} for the account, or check the credentials")
    if code in THROTTLED:
        return Check(name, FAIL, f"{operation} was throttled ({code}) after retries",
                     "run preflight again in a minute; other tools may be calling the same API")
    if status >= 500:
        return Check(name, FAIL, f"{operation} failed on the AWS side: HTTP {status} {code}".rstrip(),
                     "run preflight again; if it persists, see the AWS Health Dashboard")
    return Check(name, FAIL, f"{operation} failed: {code}: {message}")


def ec2_found(ctx: Context, call: str, key: str, not_found: set[str], **kwargs: Any) -> list[Any]:
    """The list an EC2 Describe call answers, or [] where it says that what was asked for
    does not exist (an error code of `not_found`)."""
    try:
        found: list[Any] = getattr(ctx.client("ec2"), call)(**kwargs)[key]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in not_found:
            raise
        return []
    return found
