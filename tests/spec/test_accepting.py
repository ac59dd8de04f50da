"""accepted_warnings: a spec accepts a named warning on purpose, with a reason; never an error."""

from fmcluster.spec import loader
from fmcluster.spec.diagnostics import dotted
from tests.support.specs import base_spec, problems, to_yaml, with_

CB = {"type": "capacity-block", "reservation_id": "cr-08f3a9c2b1d4e6f70"}  # an id of ones own: no placeholder


def cb_with_placement_group():
    """A Capacity Block group with a named placement group: the capacity-block-not-placed warning."""
    spec = with_(base_spec(), "node_groups[0].capacity", CB)
    return with_(spec, "node_groups[0].placement_group", "my-pg")


def by_rule(spec, rule):
    return [d for d in problems(spec) if d.rule == rule]


def test_the_warning_shows_its_rule_id():
    (d,) = by_rule(cb_with_placement_group(), "capacity-block-not-placed")
    assert d.severity == "warning"
    assert d.format().splitlines()[0].endswith("[capacity-block-not-placed]")


def test_an_accepted_warning_is_reported_as_accepted_with_the_reason():
    spec = with_(cb_with_placement_group(), "accepted_warnings",
                 [{"rule": "capacity-block-not-placed",
                   "reason": "the block's placement group, per the AWS account team"}])
    (d,) = by_rule(spec, "capacity-block-not-placed")
    assert d.severity == "accepted" and d.hint == "the block's placement group, per the AWS account team"
    assert "\n  reason: the block's placement group" in d.format()
    result = loader.load_text(to_yaml(spec), "spec.yaml")
    assert result.ok and not [x for x in result.diagnostics if x.severity == "warning"]


def test_a_path_limits_the_acceptance_to_one_finding():
    spec = with_(cb_with_placement_group(), "node_groups[1]",
                 {"name": "gpu2", "instance_type": "p5.48xlarge", "count": 1, "capacity": CB, "placement_group": "pg2"})
    spec = with_(spec, "accepted_warnings", [{"rule": "capacity-block-not-placed", "reason": "known",
                                              "path": "node_groups[1].placement_group"}])
    found = {dotted(d.path): d.severity for d in by_rule(spec, "capacity-block-not-placed")}
    assert found == {"node_groups[0].placement_group": "warning", "node_groups[1].placement_group": "accepted"}


def test_an_error_cannot_be_accepted():
    spec = with_(base_spec(), "node_groups[0].efa", True)
    spec = with_(spec, "node_groups[0].instance_type", "c7i.8xlarge")
    spec = with_(spec, "accepted_warnings", [{"rule": "efa-supported", "reason": "we know"}])
    assert [d.severity for d in by_rule(spec, "efa-supported")] == ["error"]  # still an error
    (d,) = by_rule(spec, "accepted-warnings")
    assert d.path == ("accepted_warnings", 0, "rule") and "an error cannot be accepted" in d.message


def test_a_schema_check_cannot_be_accepted():
    spec = with_(base_spec(), "accepted_warnings", [{"rule": "unknown-field", "reason": "we know"}])
    (d,) = by_rule(spec, "accepted-warnings")
    assert "an error cannot be accepted" in d.message


def test_an_unknown_rule_id_gets_a_suggestion():
    spec = with_(base_spec(), "accepted_warnings", [{"rule": "capacity-block-not-place", "reason": "typo"}])
    (d,) = by_rule(spec, "accepted-warnings")
    assert d.is_error and d.hint == "did you mean capacity-block-not-placed?"


def test_an_acceptance_that_accepts_nothing_is_a_warning():
    spec = with_(base_spec(), "accepted_warnings", [{"rule": "eks-admin-role", "reason": "no longer needed"}])
    (d,) = by_rule(spec, "accepted-warning-unused")
    assert d.severity == "warning" and d.path == ("accepted_warnings", 0)


def test_a_blank_reason_is_refused():
    spec = with_(cb_with_placement_group(), "accepted_warnings", [{"rule": "capacity-block-not-placed", "reason": " "}])
    assert any(dotted(d.path) == "accepted_warnings[0].reason" and d.is_error for d in problems(spec))


def test_acceptance_applies_to_a_spec_with_type_errors_too():
    spec = with_(cb_with_placement_group(), "accepted_warnings",
                 [{"rule": "capacity-block-not-placed", "reason": "known"}])
    spec = with_(spec, "orchestrator.login.count", "two")  # a type error elsewhere
    assert [d.severity for d in by_rule(spec, "capacity-block-not-placed")] == ["accepted"]
