"""fmcluster.spec.rules.placeholders (placeholder-values) and fmcluster.spec.placeholders: every value
`fmcluster init` marks `put yours` and every documentation value is found wherever it stands, a
value that may be the user's is not, and a deploy turns the warnings into errors."""

from __future__ import annotations

import hashlib
import re

import pytest

from fmcluster.deploy import init
from fmcluster.facts import controlplanes
from fmcluster.spec import loader, placeholders
from fmcluster.spec.diagnostics import dotted
from fmcluster.spec.rules import placeholders as rule
from tests.support.specs import base_spec, findings, on, problems, validated, with_

WARNING = "warning"


def placeholder_paths(spec: dict) -> dict[str, str]:
    """Dotted path -> message of the spec's placeholder-values findings (all warnings)."""
    found = [d for d in problems(spec) if d.rule == placeholders.RULE]
    assert {d.severity for d in found} <= {WARNING}
    return {dotted(d.path): d.message for d in found}


# ---- what is a placeholder --------------------------------------------------------------------

@pytest.mark.parametrize("value, words", [
    ("111122223333", "an example account of AWS's documentation"),
    ("444455556666", "an example account of AWS's documentation"),
    ("777788889999", "an example account of AWS's documentation"),
    ("123456789012", "an example account of AWS's documentation"),
    ("arn:aws:iam::111122223333:role/MlPlatformAdmin", "names 111122223333, an example account"),
    ("arn:aws:sagemaker:us-east-1:444455556666:training-plan/x", "names 444455556666, an example account"),
    ("123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm:v1", "names 123456789012"),
    ("cr-0123456789abcdef0", "an example reservation id (its digits count up)"),
    ("cr-1234567890abcdef0", "an example reservation id (its digits count up)"),
    ("cr-0fedcba9876543210", "an example reservation id (its digits count down)"),
    ("cr-0a1b2c3d4e5f60718", "an example reservation id (its digits count up)"),  # every other digit
    ("cr-0f1e2d3c4b5a69788", "an example reservation id (its digits count up)"),
    ("203.0.113.0/24", "lies in TEST-NET-3 (203.0.113.0/24, RFC 5737)"),
    ("203.0.113.7/32", "lies in TEST-NET-3"),
    ("203.0.113.7", "lies in TEST-NET-3"),
    ("198.51.100.128/25", "lies in TEST-NET-2 (198.51.100.0/24, RFC 5737)"),
    ("192.0.2.0/24", "lies in TEST-NET-1 (192.0.2.0/24, RFC 5737)"),
    ("ml-oncall@example.com", "is at example.com, a domain for documentation only (RFC 2606)"),
    ("ops@alerts.example.org", "is at alerts.example.org"),
    ("ops@team.test", "is at team.test"),
])
def test_documentation_values_are_placeholders(value, words):
    assert words in (placeholders.placeholder(value) or ""), placeholders.placeholder(value)


@pytest.mark.parametrize("value", [
    "210987654321", "111122223334", "1111222233330", "arn:aws:iam::210987654321:role/Admin",
    "cr-08f3a9c2b1d4e6f70", "cr-0e5d2c8a7f1b39460", "cr-0123ab9f56e7d8c40",  # 0123: four, not eight
    "0.0.0.0/0", "10.0.0.0/16", "203.0.112.0/24", "203.0.114.0/24", "198.51.101.0/24", "192.0.3.1",
    "203.0.0.0/16",  # holds TEST-NET-3, but far more: a range of someone's
    "ml-oncall@example.co", "ops@examples.com", "ops@mycompany.com", "use1-az4", "p5.48xlarge",
])
def test_values_that_may_be_the_users_are_not(value):
    assert placeholders.placeholder(value) is None


def test_random_reservation_ids_are_not_examples():
    """EC2's ids are random hex: of 20,000 drawn (deterministically), none counts through 8 digits."""
    ids = [f"cr-{hashlib.sha256(str(i).encode()).hexdigest()[:17]}" for i in range(20000)]
    assert [i for i in ids if placeholders.placeholder(i)] == []


# ---- the rule, on a spec ----------------------------------------------------------------------

def test_a_spec_of_ones_own_values_has_none():
    spec = with_(base_spec(account="210987654321"), "node_groups[0].capacity",
                 {"type": "reservation", "reservation_id": "cr-08f3a9c2b1d4e6f70"})
    assert placeholder_paths(spec) == {}
    assert findings(rule.placeholder_values, spec) == []


def test_every_field_is_looked_at_where_the_file_gives_it():
    spec = on("eks", base_spec(account="111122223333"))
    spec = with_(spec, "orchestrator.admin_role_arn", "arn:aws:iam::444455556666:role/Admin")
    spec = with_(spec, "orchestrator.public_access_cidrs", ["10.1.0.0/16", "198.51.100.0/24"])
    spec = with_(spec, "node_groups[0].capacity", {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"})
    spec = with_(spec, "observability", {"alert_email": "oncall@example.net"})
    spec = with_(spec, "tags", {"owner": "arn:aws:iam::777788889999:user/me"})
    found = placeholder_paths(spec)
    assert set(found) == {"account", "orchestrator.admin_role_arn", "orchestrator.public_access_cidrs[1]",
                          "node_groups[0].capacity.reservation_id", "observability.alert_email", "tags.owner"}
    assert found["account"] == "111122223333 is an example account of AWS's documentation: a placeholder"


def test_each_finding_says_what_to_put_there():
    spec = with_(base_spec(), "node_groups[0].capacity", {"type": "capacity-block",
                                                          "reservation_id": "cr-0123456789abcdef0"})
    (d,) = [d for d in problems(spec) if d.rule == placeholders.RULE]
    assert d.format().startswith("spec.yaml:")
    assert d.hint == placeholders.HINTS["reservation_id"] and "describe-capacity-reservations" in d.hint


def test_the_reason_of_an_accepted_warning_is_not_looked_at():
    spec = with_(base_spec(), "accepted_warnings",
                 [{"rule": "accepted-warning-unused", "reason": "see 203.0.113.0/24"}])
    assert placeholders.found(validated(spec)) == []


def test_a_placeholder_warning_can_be_accepted_for_validate():
    spec = with_(with_(base_spec(), "observability", {"alert_email": "a@example.com"}), "accepted_warnings",
                 [{"rule": placeholders.RULE, "reason": "an example for reading"}])
    (d,) = [d for d in problems(spec) if d.rule == placeholders.RULE]
    assert d.severity == "accepted"


def test_refused_makes_every_placeholder_finding_an_error_for_a_deploy():
    spec = with_(with_(base_spec(), "observability", {"alert_email": "a@example.com"}), "accepted_warnings",
                 [{"rule": placeholders.RULE, "path": "observability.alert_email", "reason": "for reading"}])
    spec = with_(spec, "node_groups[0].capacity", {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"})
    diagnostics = problems(spec)
    refused = placeholders.refused(diagnostics)
    assert [(d.severity, dotted(d.path)) for d in refused if d.rule == placeholders.RULE] == [
        ("error", "node_groups[0].capacity.reservation_id"), ("error", "observability.alert_email")]
    assert all(placeholders.DEPLOY_HINT in (d.hint or "") for d in refused if d.rule == placeholders.RULE)
    others = [d for d in diagnostics if d.rule != placeholders.RULE]
    assert [d for d in refused if d.rule != placeholders.RULE] == others  # the rest as they were


# ---- what init writes: one list ----------------------------------------------------------------

def init_combinations():
    for orchestrator in init.ORCHESTRATORS:
        for instance_type in init.instance_types():
            yield orchestrator, instance_type


# `put yours` lines whose value the rule cannot tell from the user's: a real AZ ID (use1-az4)
NOT_FOUND = {"availability_zone_id"}


def test_every_value_init_marks_put_yours_is_found_and_nothing_else():
    """For every control plane and GPU type init takes, the lines of the spec it writes that the
    rule finds are exactly the lines whose comment says `put yours` (its AZ ID aside: a real one)."""
    written = 0
    for orchestrator, instance_type in init_combinations():
        region = "us-east-1"
        try:
            text = init.spec_text(orchestrator, instance_type, "my-cluster", region,
                                  init.default_az_id(region, orchestrator, instance_type))
        except ValueError:
            continue
        result = loader.load_text(text, "cluster.yaml")
        if result.spec is None or not result.ok:
            continue  # a combination init refuses (the rules say why)
        written += 1
        lines = text.splitlines()
        keys = {n: re.match(r"\s*(- )?([a-z_]+):", line) for n, line in enumerate(lines, 1)}
        put_yours = {n for n, key in keys.items() if key and "put your" in lines[n - 1].split("#", 1)[-1]
                     and key.group(2) not in NOT_FOUND}
        found = {d.line for d in result.diagnostics if d.rule == placeholders.RULE}
        assert found == put_yours, (orchestrator, instance_type, [lines[n - 1] for n in found ^ put_yours])
    assert written >= 20


def test_init_writes_the_module_s_placeholders():
    assert (init.PLACEHOLDER_RESERVATION, init.PLACEHOLDER_ACCOUNT, init.PLACEHOLDER_CIDR) == (
        placeholders.RESERVATION_ID, placeholders.ACCOUNT, placeholders.ACCESS_CIDR)
    for value in (placeholders.RESERVATION_ID, placeholders.ACCOUNT, placeholders.ACCESS_CIDR):
        assert placeholders.placeholder(value) is not None, value


def test_the_rule_is_registered_with_its_id_as_a_warning():
    from fmcluster.spec.rules import WARNING_RULES, rule_id

    assert rule_id(rule.placeholder_values) == placeholders.RULE in WARNING_RULES
    assert controlplanes.ORCHESTRATOR_TYPES == tuple(init.ORCHESTRATORS)
