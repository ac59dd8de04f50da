"""Values that hold a place and must never reach AWS: what `fmcluster init` writes where its
comment says `put yours`, and values reserved for documentation, which belong to no one.

    AWS's example accounts      111122223333, 444455556666, 777788889999 (the IAM User Guide and
                                the other guides), 123456789012 (older pages and CLI examples)
    documentation networks      192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24 (RFC 5737,
                                TEST-NET-1 to 3) and every address and block in them
    example reservation ids     a cr- id whose hex digits count up or down through eight or more,
                                in a row or at every other digit (cr-0123456789abcdef0,
                                cr-1234567890abcdef0 of AWS's pages, cr-0a1b2c3d4e5f60718):
                                EC2 draws the 17 digits at random, so a real id does this about
                                once in ten million
    documentation mail domains  example.com, .net, .org and the names under .example, .test,
                                .invalid, .localhost (RFC 2606, RFC 6761): no mail reaches them

`init` writes its placeholders from this module (RESERVATION_ID, ACCOUNT, ACCESS_CIDR), each one
of the documentation values above, so the one list is what init writes and what is found. Its
AZ ID is a real one (use1-az4): it cannot be told from the user's, and is not found here.

What finds them (`found`) walks every value a spec (or pipeline file) gives, whatever the field:
`validate` warns of each (the rule placeholder-values), `preflight` fails on each, and the CDK app
refuses them where its templates may be deployed (`refused`).
"""

from __future__ import annotations

import ipaddress
import itertools
import re
from dataclasses import dataclass, replace
from typing import Iterable, Iterator

from pydantic import BaseModel

from fmcluster.spec.diagnostics import Diagnostic, Path

RULE = "placeholder-values"  # the id of the check (fmcluster.spec.rules.placeholders)

# What `fmcluster init` writes where it says `put yours` (fmcluster/deploy/init.py)
RESERVATION_ID = "cr-0123456789abcdef0"
ACCOUNT = "111122223333"
ACCESS_CIDR = "203.0.113.0/24"  # TEST-NET-3: reaches nothing until it is replaced
REPOSITORY = "OWNER/REPOSITORY"  # the pipeline file's source repository (owner/name)
CONNECTION_ID = "00000000-0000-0000-0000-000000000000"  # the pipeline file's connection's id

DOCUMENTATION_ACCOUNTS = ("111122223333", "444455556666", "777788889999", "123456789012")
DOCUMENTATION_NETWORKS = {"192.0.2.0/24": "TEST-NET-1", "198.51.100.0/24": "TEST-NET-2", "203.0.113.0/24": "TEST-NET-3"}
DOCUMENTATION_DOMAINS = ("example.com", "example.net", "example.org")
DOCUMENTATION_TLDS = ("example", "test", "invalid", "localhost")
EXAMPLE_RUN = 8  # hex digits counting up or down that make a reservation id an example

# What to put instead, by the field's name (the last key of its path)
HINTS = {
    "account": "put your account's id (aws sts get-caller-identity --query Account), or leave `account` out",
    "reservation_id": "put the cr-... id of your Capacity Block or reservation "
                      "(aws ec2 describe-capacity-reservations)",
    "admin_role_arn": "put the ARN of the IAM role your team assumes (aws sts get-caller-identity shows yours)",
    "public_access_cidrs": "put your office's or VPN's public address blocks, or set orchestrator.endpoint_access: "
                           "private",
    "training_plan_arn": "put your SageMaker training plan's ARN (aws sagemaker list-training-plans)",
    "members": "put the IAM roles or users of the team",
    "alert_email": "put an address that your on-call reads",
    "connection_arn": "put your CodeConnections connection's ARN (aws codeconnections list-connections)",
    "repository": "put the repository the connection reaches, as owner/name",
}
HINT = "put yours"
DEPLOY_HINT = ("put yours: the CDK app refuses placeholders wherever its templates may be deployed, "
               "that is wherever it runs with AWS credentials (accepting the warning quiets `validate` "
               "only); to read the templates, `fmcluster synth` runs it without them")

# patterns for re, which compiles each on first use (validate's start-up is a budget: bench/validate.py)
_ACCOUNT_TOKEN = r"(?<![0-9])[0-9]{12}(?![0-9])"
_RESERVATION = r"cr-([0-9a-f]{17})"
_HEX = "0123456789abcdef"


@dataclass(frozen=True)
class Finding:
    path: Path  # of the value in the file: keys and list indices
    value: str
    message: str
    hint: str


def found(model: BaseModel, skip: Iterable[str] = ("accepted_warnings",)) -> list[Finding]:
    """Every placeholder among the values the file gives (fields left at their defaults are not
    looked at), in the order of the fields; `skip`: top-level fields not looked into."""
    return list(_walk(model, (), set(skip)))


def refused(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """`diagnostics` with every placeholder finding (warned or accepted) an error: what the CDK
    app reports where it may deploy."""
    return [replace(d, severity="error", hint=DEPLOY_HINT if d.severity == "accepted" else f"{d.hint}; {DEPLOY_HINT}")
            if d.rule == RULE else d for d in diagnostics]


def _walk(value: object, path: Path, skip: set[str]) -> Iterator[Finding]:
    if isinstance(value, BaseModel):
        fields = type(value).model_fields
        for name in fields:
            if name in value.model_fields_set and not (not path and name in skip):
                yield from _walk(getattr(value, name), path + (fields[name].alias or name,), skip)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _walk(item, path + (i,), skip)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, path + (str(key),), skip)
    elif isinstance(value, str):
        message = placeholder(value)
        if message is not None:
            field = next((p for p in reversed(path) if isinstance(p, str)), "")
            yield Finding(path, value, message, HINTS.get(field, HINT))


def placeholder(value: str) -> str | None:
    """Why `value` is a placeholder, in words; None for a value that may be the user's."""
    for account in re.findall(_ACCOUNT_TOKEN, value):
        if account in DOCUMENTATION_ACCOUNTS:
            named = f"{value} is" if value == account else f"{value} names {account},"
            return f"{named} an example account of AWS's documentation"
    if (match := re.fullmatch(_RESERVATION, value)) is not None:
        direction = _counting(match.group(1))
        if direction is not None:
            return f"{value} is an example reservation id (its digits count {direction})"
    if value == REPOSITORY:
        return f"{value} stands for a repository"
    if CONNECTION_ID in value:
        return f"{value} names the all-zero connection id"
    network = _network(value)
    if network is not None:
        for block, name in DOCUMENTATION_NETWORKS.items():
            if network.subnet_of(ipaddress.IPv4Network(block)):
                return f"{value} lies in {name} ({block}, RFC 5737), addresses for documentation only"
    if "@" in value:
        domain = value.rsplit("@", 1)[1].lower().rstrip(".")
        if (any(domain == d or domain.endswith(f".{d}") for d in DOCUMENTATION_DOMAINS)
                or domain.rsplit(".", 1)[-1] in DOCUMENTATION_TLDS):
            return f"{value} is at {domain}, a domain for documentation only (RFC 2606) that no mail reaches"
    return None


def _counting(digits: str) -> str | None:
    """'up' or 'down' when the hex digits count through EXAMPLE_RUN or more in a row, or at every
    other digit; None otherwise."""
    for stride in (1, 2):
        for start in range(stride):
            run = [_HEX.index(d) for d in digits[start::stride]]
            for step, direction in ((1, "up"), (-1, "down")):
                length = 1
                for before, after in itertools.pairwise(run):
                    length = length + 1 if after - before == step else 1
                    if length >= EXAMPLE_RUN:
                        return direction
    return None


def _network(value: str) -> ipaddress.IPv4Network | None:
    """An IPv4 address or block (the address as a /32), else None."""
    if not value[:1].isdigit():
        return None
    try:
        return ipaddress.IPv4Network(value, strict=False)
    except ValueError:
        return None
