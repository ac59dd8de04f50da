"""Writing what `fmcluster capacity buy` bought into the user's spec: the one value changes (or the
keys it needs are added), every other byte of the file stays, comments and layout included, and
the file still validates. Where that cannot be done safely (an anchor shared by several places, a
flow mapping to add keys to) nothing is written and the error says what to write by hand."""

from __future__ import annotations

import re

import pytest

from fmcluster.deploy.capacity.purchase import changes
from fmcluster.deploy.capacity.spec_edit import Change, EditError, apply, value_at
from fmcluster.spec import loader
from tests.support.capacity import spec_of
from tests.support.paths import ROOT

BOUGHT = "cr-0b3f6a1c9e2d47580"
ARN = "arn:aws:sagemaker:us-east-1:210987654321:training-plan/llm-b200-20261203"
# Every example whose first node group is on a Capacity Block (or training plan), and the field
# that holds it
HELD = {"examples/p5-pcs.yaml": "reservation_id", "examples/p5en-eks.yaml": "reservation_id",
        "examples/p6e-gb200-eks.yaml": "reservation_id",
        "examples/p6e-gb200-pcs.yaml": "reservation_id", "examples/p6-b200-hyperpod-slurm.yaml": "training_plan_arn",
        "examples/p5-hyperpod-eks.yaml": "training_plan_arn"}
COMMENTED = """\
# a cluster of our own
name: team-a                 # our name
region: us-east-1
availability_zone_id: use1-az4

storage:
    buckets:
        -   name: datasets   # four spaces here, and the dash indented
orchestrator: {type: pcs}

node_groups:
- name: gpu                  # no indent before this dash
  instance_type: p5.48xlarge
  count: 4                   # four nodes

  # a comment line inside the group
  root_volume_gib: 512
- name: cpu
  instance_type: c7i.8xlarge
  count: 2
  capacity:                  # a sibling's mapping: two spaces in
    type: spot
"""


@pytest.mark.parametrize("example, field", sorted(HELD.items()))
def test_the_one_value_changes_and_every_other_byte_stays(example, field):
    text = (ROOT / example).read_text()
    spec = spec_of(example)
    old = getattr(spec.node_groups[0].capacity, field)
    new = ARN if field == "training_plan_arn" else BOUGHT
    edited = apply(text, changes(spec, spec.node_groups[0].name, new))
    before, after = text.splitlines(keepends=True), edited.splitlines(keepends=True)
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert len(changed) == 1, changed
    # the line's comment stays in its column where the new value leaves room, one space after it if not
    prefix, rest = before[changed[0]].split(old)
    spaces, comment = re.fullmatch(r"( +)(#.*\n)", rest).groups()
    assert after[changed[0]] == prefix + new + " " * max(1, len(spaces) - (len(new) - len(old))) + comment
    result = loader.load_text(edited, example)
    assert result.ok and getattr(result.spec.node_groups[0].capacity, field) == new


def test_a_group_without_capacity_gets_it_in_the_files_own_indentation():
    spec = loader.load_text(COMMENTED, "team.yaml").spec
    edited = apply(COMMENTED, changes(spec, "gpu", BOUGHT))
    added = ("  capacity:\n"
             "    type: capacity-block\n"
             f"    reservation_id: {BOUGHT}\n")
    at = COMMENTED.index("- name: cpu")
    # after the group's last one-line value, indented as its sibling's mapping (storage's are four in)
    assert edited == COMMENTED[:at] + added + COMMENTED[at:]
    result = loader.load_text(edited, "team.yaml")
    assert result.ok, result.diagnostics
    assert result.spec.node_groups[0].capacity.reservation_id == BOUGHT
    assert result.spec.node_groups[0].capacity.type == "capacity-block"


def test_a_type_is_replaced_and_the_id_added_under_it():
    count = "  count: 4                   # four nodes\n"
    text = COMMENTED.replace(count, count + "  capacity:\n      type: 'on-demand'  # for now\n")
    spec = loader.load_text(text, "team.yaml").spec
    edited = apply(text, changes(spec, "gpu", BOUGHT))
    assert edited == text.replace("      type: 'on-demand'  # for now\n",
                                  f"      type: 'capacity-block' # for now\n      reservation_id: {BOUGHT}\n")
    assert loader.load_text(edited, "team.yaml").ok


def test_an_on_demand_reservation_becomes_a_capacity_block():
    text = (ROOT / "examples/p5en-reservation-pcs.yaml").read_text()
    spec = spec_of("examples/p5en-reservation-pcs.yaml")
    edited = apply(text, changes(spec, "train", BOUGHT))
    line = "      type: reservation                 # an On-Demand Capacity Reservation\n"
    assert edited == text.replace("cr-0fedcba9876543210", BOUGHT).replace(
        line, "      type: capacity-block              # an On-Demand Capacity Reservation\n")  # its comment kept
    assert loader.load_text(edited, "p5en.yaml").spec.node_groups[0].capacity.type == "capacity-block"


def test_the_gpu_az_moves_with_the_reservation():
    text = (ROOT / "examples/p5-pcs.yaml").read_text()
    spec = spec_of("examples/p5-pcs.yaml")
    edited = apply(text, changes(spec, "gpu", BOUGHT, "use1-az6"))
    assert edited == text.replace("cr-0123456789abcdef0", BOUGHT).replace(
        "availability_zone_id: use1-az4 ", "availability_zone_id: use1-az6 ")
    assert loader.load_text(edited, "p5-pcs.yaml").spec.availability_zone_id == "use1-az6"


def test_crlf_files_keep_their_line_ends():
    text = COMMENTED.replace("\n", "\r\n")
    spec = loader.load_text(text, "team.yaml").spec
    edited = apply(text, changes(spec, "gpu", BOUGHT))
    assert "\n" not in edited.replace("\r\n", "") and edited.count("\r\n") == text.count("\r\n") + 3
    assert loader.load_text(edited, "team.yaml").spec.node_groups[0].capacity.reservation_id == BOUGHT


def test_a_quoted_value_stays_quoted():
    text = "a:\n  b: \"cr-0123456789abcdef0\"   # quoted\n  c: 'x'\n"
    edited = apply(text, [Change(("a", "b"), BOUGHT), Change(("a", "c"), "y z")])
    assert edited == f"a:\n  b: \"{BOUGHT}\"   # quoted\n  c: 'y z'\n"
    assert value_at(edited, ("a", "c")) == "y z"


def test_an_anchor_shared_by_several_groups_is_not_written_through():
    text = COMMENTED.replace("- name: gpu                  # no indent before this dash\n",
                             "- name: gpu\n  capacity: &block\n    type: capacity-block\n"
                             "    reservation_id: cr-0fedcba9876543210\n")
    with pytest.raises(EditError) as exc:
        apply(text, [Change(("node_groups", 0, "capacity", "reservation_id"), BOUGHT)])
    assert "anchor &block" in exc.value.message
    assert exc.value.hint == f"write `node_groups[0].capacity.reservation_id: {BOUGHT}` by hand"


def test_a_key_is_not_added_to_a_flow_mapping_but_a_value_in_one_is_replaced():
    text = "node_groups:\n  - name: gpu\n    capacity: {type: on-demand}   # flow\n"
    assert apply(text, [Change(("node_groups", 0, "capacity", "type"), "capacity-block")]) == \
        "node_groups:\n  - name: gpu\n    capacity: {type: capacity-block}   # flow\n"
    with pytest.raises(EditError, match="flow mapping"):
        apply(text, [Change(("node_groups", 0, "capacity", "reservation_id"), BOUGHT)])


def test_a_merged_key_is_overridden_by_one_of_the_mappings_own():
    text = ("base: &base\n  type: on-demand\nnode_groups:\n  - name: gpu\n    capacity:\n      <<: *base\n"
            "      root: 1\n")
    edited = apply(text, [Change(("node_groups", 0, "capacity", "type"), "capacity-block")])
    assert edited == text + "      type: capacity-block\n"
    assert value_at(edited, ("base", "type")) == "on-demand"  # the anchor's own value untouched


def test_a_value_over_several_lines_is_left_to_the_user():
    text = "a:\n  b: >-\n    cr-0123\n"
    with pytest.raises(EditError, match="not written as one plain or quoted value"):
        apply(text, [Change(("a", "b"), BOUGHT)])
