"""The update policy (fmcluster.spec.update_policy): an entry for every field of the spec's
models, in their order, each a list of well-formed cases that answers every change on every
control plane. What the cases claim is held against the templates in
tests/deploy/test_update_claims.py."""

from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel

from fmcluster.spec import models
from fmcluster.spec import update_policy as policy
from fmcluster.spec.update_policy import table as update_table
from tests.support.specs import base_spec, on, validated, with_


def test_every_field_of_every_model_has_an_entry_in_the_models_order():
    assert list(policy.POLICIES) == list(policy.field_paths())


def test_the_walk_reaches_every_model_of_the_spec():
    """Every section model is below ClusterSpec, and each of its fields is at some path of the walk."""
    paths = list(policy.field_paths())
    sections = [m for m in vars(models).values()
                if isinstance(m, type) and issubclass(m, models.Model) and m is not models.Model]
    assert len(sections) >= 15
    for model in sections:
        for name, info in model.model_fields.items():
            key = info.alias or name
            assert any(p == key or p.endswith(f".{key}") for p in paths), f"{model.__name__}.{key}"


def _annotation(path: str) -> typing.Any:
    model: type[BaseModel] = models.ClusterSpec
    *parents, last = path.replace("[]", "").split(".")
    for name in parents:
        model = next(inner for inner, _ in update_table._models(model.model_fields[name].annotation))
    return next(info for key, info in model.model_fields.items() if (info.alias or key) == last)


def test_only_a_section_that_is_always_there_leaves_it_to_its_fields():
    """An entry without cases is a section whose model is always there (a default, no None, no
    list): adding or removing it is no change of its own."""
    for path, entry in policy.POLICIES.items():
        if entry.cases:
            continue
        info = _annotation(path)
        assert isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel), path
        assert info.default is not None or info.is_required(), path


@pytest.mark.parametrize("path", sorted(p for p, entry in policy.POLICIES.items() if entry.cases))
def test_every_case_is_well_formed(path):
    for case in policy.POLICIES[path].cases:
        assert case.effect in policy.EFFECTS
        assert set(case.planes) <= set(policy.PLANES)
        assert set(case.nodes) <= set(case.planes or policy.PLANES), "nodes reached where the case does not hold"
        assert bool(case.when) == (case.check is not None), "a condition in words needs its check, and the reverse"
        if case.effect == policy.ROLL:
            assert case.nodes, "a roll reaches some group's nodes"
        if case.effect in (policy.REPLACE, policy.DATA_LOSS):
            assert case.resources, "say what it replaces or loses"
        assert not case.unseen or case.check is not None


@pytest.mark.parametrize("path", sorted(p for p, entry in policy.POLICIES.items() if entry.cases))
def test_every_change_has_an_answer_on_every_plane(path):
    """On each control plane some case holds whatever the specs: one without a check."""
    cases = policy.POLICIES[path].cases
    for plane in policy.PLANES:
        assert any(c.check is None and (not c.planes or plane in c.planes) for c in cases), plane


def test_an_index_stands_for_every_item():
    assert policy.policy("node_groups[3].capacity.type") is policy.POLICIES["node_groups[].capacity.type"]
    assert policy.policy("health.deep_check") is policy.POLICIES["health.deep_check"]


def test_the_text_says_each_case_in_order():
    assert policy.policy("storage.lustre.storage_capacity_gib").text() == (
        "refused when it shrinks: FSx for Lustre storage only grows: FSx refuses the update; update in place")
    assert policy.policy("network").text() == "as its fields"
    assert policy.policy("teams[].lend").text() == (
        "nothing to deploy on pcs, hyperpod-slurm: Slurm has no lending limit; update in place: the lending limit "
        "of its ClusterQueue")


def test_the_first_case_that_holds_decides():
    old = validated(base_spec())
    grown, shrunk = (validated(with_(base_spec(), "storage.lustre.storage_capacity_gib", n)) for n in (9600, 2400))
    capacity = policy.policy("storage.lustre.storage_capacity_gib")
    assert (capacity.effect(old, grown), capacity.effect(old, shrunk)) == (policy.IN_PLACE, policy.REFUSED)
    named = validated(base_spec(account="111122223333"))
    other = validated(base_spec(account="444455556666"))
    account = policy.policy("account")
    assert account.effect(named, other) == policy.NEW_CLUSTER
    assert account.effect(old, named) == policy.ROLL and account.reaches_nodes(old, named)
    eks = validated(on("eks"))
    assert account.effect(eks, validated(with_(on("eks"), "account", "111122223333"))) == policy.REPLACE
    # a field only some control planes read: nothing to deploy on the others
    assert policy.policy("orchestrator.namespace").effect(old, old) == policy.NOTHING
    assert policy.policy("orchestrator.namespace").effect(eks, eks) == policy.IN_PLACE


def test_the_fields_of_a_new_cluster_and_what_a_storage_change_loses_with_the_data():
    assert policy.fields(policy.NEW_CLUSTER) == ("name", "region", "account")
    lost = policy.lost_with_data("storage")
    assert {"AWS::FSx::FileSystem", "AWS::S3::Bucket", "AWS::KMS::Key"} <= set(lost)
    assert lost.index("AWS::FSx::DataRepositoryAssociation") < lost.index("AWS::EC2::SecurityGroup")
    assert policy.lost_with_data("observability") == ("AWS::APS::Workspace", "AWS::Grafana::Workspace")
    assert policy.lost_with_data("serving") == ()


def test_every_effect_has_its_meaning():
    assert list(policy.MEANINGS) == list(policy.EFFECTS)
