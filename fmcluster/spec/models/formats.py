"""The spec's field formats: names, AZ IDs, regions, CIDRs, ARNs, paths and the other
values a field checks on its own, as `Annotated` types with their validators. Each failure is
a format error whose kind is its rule id (README, "What validate checks"): the checks reported
together with type errors, before the rules that relate several fields.

No `from __future__ import annotations` here (fmcluster.spec.models): pydantic must not
evaluate string annotations when it builds the models.
"""

import ipaddress
import re
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, Field, PlainValidator
from pydantic_core import PydanticCustomError

from fmcluster.facts import catalog, regions, teams
from fmcluster.spec.diagnostics import control_characters


def _fail(kind: str, message: str, hint: str | None = None) -> PydanticCustomError:
    """A format error; its rule id (README, "What validate checks") is the kind, with '-'."""
    context = {"rule": kind.replace("_", "-")}
    if hint:
        context["hint"] = hint
    return PydanticCustomError(kind, message, context)


def _one_line(value: str) -> str:
    """Every string of the spec is one line of text: no control character, no line break (a YAML
    block scalar, `|`, keeps its last one), whatever else its format allows."""
    found = control_characters(value)
    if found:
        raise _fail("control_character", f"'{value}' holds control characters ({found}): a value of the spec "
                    "is one line of text", "remove them; a YAML block scalar (| or >) ends in a line break, "
                    "so quote the value instead")
    return value


def _pattern(kind: str, regex: str, what: str, hint: str | None = None) -> AfterValidator:
    # re compiles (and caches) the pattern on first use: most specs use few of these formats,
    # and compiling them all on import would cost every `fmcluster validate` run
    def check(value: str) -> str:
        if not re.fullmatch(regex, value):
            raise _fail(kind, f"'{value}' is not a valid {what}", hint)
        return value

    return AfterValidator(check)


def _az_id(value: str) -> str:
    if re.fullmatch(regions.AZ_ID, value) or re.fullmatch(regions.LOCAL_ZONE_ID, value):
        return value
    name = re.fullmatch(regions.AZ_NAME, value)
    if name:
        example = regions.example_az_id(name.group(1))
        raise _fail("az_id", f"'{value}' looks like an Availability Zone name, not an AZ ID",
                    f"use the AZ ID, such as {example}: AZ names differ between accounts, "
                    "AZ IDs do not (aws ec2 describe-availability-zones shows both)")
    raise _fail("az_id", f"'{value}' is not an Availability Zone ID",
                "AZ IDs look like use1-az4; Local Zone IDs like use1-dfw2-az1")


def _region(value: str) -> str:
    if regions.is_supported(value):
        return value
    if value in regions.region_names():
        raise _fail("region", f"fmcluster cannot name the Availability Zone IDs of region '{value}' "
                              f"(partition {regions.partition(value)})",
                    "its name does not follow AWS's rule for AZ ID prefixes (us-east-1: use1); add the "
                    "prefix that `aws ec2 describe-availability-zones` shows as ZoneId to "
                    "fmcluster.facts.regions.AZ_ID_PREFIX_EXCEPTIONS")
    if re.fullmatch(regions.AZ_NAME, value):
        raise _fail("region", f"'{value}' is an Availability Zone name, not a region",
                    f"a region has no zone letter: {value[:-1]}")
    supported = [r for r in regions.region_names() if regions.is_supported(r)]
    close = _close_regions(value, supported)
    if close:
        raise _fail("region", f"'{value}' is not an AWS region fmcluster knows",
                    "did you mean " + ", ".join(f"'{r}'" for r in close[:-1]) + (" or " if len(close) > 1 else "")
                    + f"'{close[-1]}'?")
    raise _fail("region", f"'{value}' is not an AWS region fmcluster knows",
                "known regions (botocore's list: a newer botocore knows newer regions): " + ", ".join(supported))


def region_problem(value: str) -> tuple[str, str | None] | None:
    """(message, hint) of a region a spec could not name (a typo gets its did-you-mean), as
    validate words it; None for a supported region. For `fmcluster init --region`."""
    try:
        _region(_one_line(value))
    except PydanticCustomError as exc:
        hint = exc.context.get("hint") if exc.context else None
        return exc.message(), str(hint) if hint else None
    return None


def _close_regions(value: str, supported: list[str]) -> list[str]:
    """The regions a mistyped one most likely meant (us-east1, US-EAST-1, eu-centrl-1): the same
    letters in lower case, else the closest names by difflib's ratio."""
    import difflib  # only for a spec with a wrong region

    typed = value.strip().lower().replace("_", "-")
    if typed in supported:
        return [typed]
    scored = sorted(((difflib.SequenceMatcher(None, typed, r).ratio(), r) for r in supported), reverse=True)
    best = scored[0][0] if scored else 0.0
    # the closest, and those as close (us-east-3: us-east-1 and us-east-2), not the next best
    return sorted(r for ratio, r in scored if ratio >= 0.8 and ratio >= best - 0.02)[:3]


def _cidr(value: str) -> str:
    try:
        net = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise _fail("cidr", f"'{value}' is not an IPv4 CIDR block ({exc})",
                    "write the network address and prefix, such as 10.0.0.0/16") from None
    if not 16 <= net.prefixlen <= 24:
        raise _fail("cidr", f"a VPC prefix of /{net.prefixlen} is out of range",
                    "use a prefix from /16 (largest VPC AWS allows) to /24")
    return value


def _access_cidr(value: str) -> str:
    """An IPv4 CIDR block of any size (a source of traffic, not a VPC's range)."""
    try:
        ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise _fail("cidr", f"'{value}' is not an IPv4 CIDR block ({exc})",
                    "write the network address and prefix, such as 203.0.113.0/24 (one address: /32)") from None
    return value


def _instance_type(value: str) -> str:
    if catalog.get(value):
        return value
    close = catalog.closest(value)
    hint = f"did you mean {close}? " if close else ""
    raise _fail("instance_type", f"unknown instance type '{value}'",
                hint + catalog.describe_known())


def _ultraserver_type(value: str) -> str:
    if value in catalog.ULTRASERVERS:
        return value
    raise _fail("ultraserver_type", f"unknown UltraServer type '{value}'",
                "UltraServer types: " + ", ".join(catalog.ULTRASERVERS))


def _mount_path(value: str) -> str:
    parts = value.strip("/").split("/")
    if not re.fullmatch(r"/[A-Za-z0-9._/-]*", value) or "//" in value or value == "/" or \
            any(p in (".", "..") for p in parts):
        raise _fail("path", f"'{value}' is not an absolute directory path", "such as /fsx")
    return value.rstrip("/") or value


def _link_path(value: str) -> str:
    # a data repository association may link the file system's root, `/`, as its only link
    return value if value == "/" else _mount_path(value)


def _s3_prefix(value: str) -> str:
    if len(value.encode("utf-8")) > 1024:
        raise _fail("prefix", f"an S3 prefix is at most 1024 bytes (the longest S3 key), not {len(value.encode())}")
    return value


# A string of the spec: every string field is one, and every format is built on it.
Text = Annotated[str, AfterValidator(_one_line)]
Name = Annotated[Text, _pattern("name", r"[a-z][a-z0-9-]{0,31}", "name",
                               "lower-case letters, digits and '-', starting with a letter, at most 32")]
GroupName = Annotated[Text, _pattern("name", r"[a-z][a-z0-9-]{0,24}", "node group name",
                                    "lower-case letters, digits and '-', starting with a letter, "
                                    "at most 25 (it names a Slurm partition or Kubernetes label)")]
BucketName = Annotated[Text, _pattern("name", r"[a-z0-9][a-z0-9-]{0,19}", "bucket name",
                                     "lower-case letters, digits and '-', at most 20; the S3 name "
                                     "is derived from the cluster name and this")]
AzId = Annotated[Text, AfterValidator(_az_id)]
Region = Annotated[Text, AfterValidator(_region)]
Cidr = Annotated[Text, AfterValidator(_cidr)]
AccessCidr = Annotated[Text, AfterValidator(_access_cidr)]
InstanceTypeName = Annotated[Text, AfterValidator(_instance_type)]
UltraServerType = Annotated[Text, AfterValidator(_ultraserver_type)]
AbsPath = Annotated[Text, AfterValidator(_mount_path)]
LinkPath = Annotated[Text, AfterValidator(_link_path)]
S3Prefix = Annotated[Text, AfterValidator(_s3_prefix)]
Account = Annotated[Text, _pattern("account", r"[0-9]{12}", "AWS account id",
                                  "twelve digits, quoted: account: \"111122223333\"")]
ReservationId = Annotated[Text, _pattern("reservation_id", r"cr-[0-9a-f]{17}", "capacity reservation id",
                                        "such as cr-0123456789abcdef0")]
ResourceGroupArn = Annotated[Text, _pattern(
    "arn", r"arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:[0-9]{12}:group/[A-Za-z0-9._-]+",
    "resource group ARN", "arn:aws:resource-groups:REGION:ACCOUNT:group/NAME")]
TrainingPlanArn = Annotated[Text, _pattern(
    "arn", r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:training-plan/[A-Za-z0-9-]+",
    "training plan ARN", "arn:aws:sagemaker:REGION:ACCOUNT:training-plan/NAME")]
RoleArn = Annotated[Text, _pattern("arn", r"arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]+",
                                  "IAM role ARN", "arn:aws:iam::ACCOUNT:role/NAME")]
Email = Annotated[Text, _pattern("email", r"[^@\s]+@[^@\s]+\.[^@\s]+", "e-mail address")]
# A signal as `sbatch --signal` names it (Slurm's sig_name2num takes the name with or without SIG);
# B: sends it to the batch shell only. The signals a job can trap to checkpoint: none that stops it.
SlurmSignal = Annotated[Text, _pattern("signal", r"(B:)?(SIG)?(USR1|USR2|TERM|INT|HUP|QUIT|ALRM|CONT|URG|XCPU)",
                                       "signal for the jobs", "USR1, USR2, TERM, INT, HUP, QUIT, ALRM, CONT, URG "
                                       "or XCPU, with B: to signal the batch shell only")]
AmiId = Annotated[Text, _pattern("ami", r"ami-[0-9a-f]{8,17}", "AMI id", "such as ami-0123456789abcdef0")]
Version = Annotated[Text, _pattern("version", r"[0-9]+\.[0-9]+", "version",
                                  "quote it, so YAML keeps it a string: version: \"25.05\"")]
S3Event = Literal["NEW", "CHANGED", "DELETED"]


def _metadata_iops(value: Any) -> int | str:
    if isinstance(value, str):
        _one_line(value)
    if (isinstance(value, str) and value == "auto") or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _fail("metadata_iops", f"expected 'auto' or a number of IOPS, got {value!r}",
                "auto, or 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000")


MetadataIops = Annotated[Union[int, str], PlainValidator(_metadata_iops,
                                                         json_schema_input_type=Union[
    Literal["auto"], Annotated[int, Field(ge=1500, le=192000)]])]


ServedModelName = Annotated[Text, _pattern("name", r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}", "served model name",
                                          "letters, digits and '.', '_', ':', '/', '-', at most 128, such as "
                                          "Llama-3.1-70B-Instruct: the name clients ask the API for")]
ImageRef = Annotated[Text, _pattern("name", r"[A-Za-z0-9][A-Za-z0-9._/:@#+-]{0,254}", "container image",
                                   "a registry reference, such as vllm/vllm-openai:v0.33.0 (no spaces or quotes)")]


TeamName = Annotated[Text, _pattern(
    "name", r"[a-z][a-z0-9-]{0,%d}[a-z0-9]|[a-z]" % (teams.TEAM_NAME_MAX - 2), "team name",
    "lower-case letters, digits and '-', starting with a letter, not ending with '-', at most "
    f"{teams.TEAM_NAME_MAX}: it names a Slurm account, a Kubernetes namespace and ClusterQueue")]
Member = Annotated[Text, _pattern(
    "member", r"[^\s,:=]{1,64}|arn:aws[a-z-]*:iam::[0-9]{12}:[A-Za-z0-9+=,.@_/-]{1,512}", "team member",
    "a Linux user name (Slurm), or an IAM role or user ARN (Kubernetes)")]
MemberGroup = Annotated[Text, _pattern("member", r"[^\s,:=]{1,64}", "group",
                                      "a Linux group (Slurm) or a Kubernetes group (Kubernetes)")]
GpuCount = Annotated[int, Field(ge=0)]
Priority = Literal[teams.PRIORITY_NAMES]  # type: ignore[valid-type]


def _reason(value: str) -> str:
    if not value.strip():
        raise _fail("reason", "the reason is blank", "say why the team accepts the risk, for reviewers")
    return value


RuleId = Annotated[Text, _pattern("rule_id", r"[a-z][a-z0-9-]{0,63}", "rule id",
                                 "as printed in brackets after the warning, such as eks-admin-role")]
Reason = Annotated[Text, Field(max_length=500), AfterValidator(_reason)]
