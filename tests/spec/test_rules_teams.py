"""fmcluster.spec.rules.teams and the resolved teams (fmcluster.model.teams): names, guarantees
that fit, dedicated node groups, members in the control plane's form."""

import pytest

from fmcluster.model.cluster import resolve
from fmcluster.spec.rules import teams as rules
from tests.support.specs import base_spec, findings, messages, on, paths, validated, with_

# 2 x p5.48xlarge: 16 GPUs in the group "gpu"
PRETRAIN = {"name": "pretrain", "members": ["alice", "bob"], "gpus": {"gpu": 8}, "priority": "high"}
RESEARCH = {"name": "research", "groups": ["ml-research"], "share": 0.25, "borrow": 4, "lend": False}


def teams(*items, spec=None):
    return with_(spec or base_spec(), "teams", list(items))


def test_two_teams_pass_and_resolve():
    spec = teams(PRETRAIN, RESEARCH)
    assert paths(spec) == set() and paths(spec, "warning") == set()
    pretrain, research = resolve(validated(spec)).teams
    assert (pretrain.guaranteed["gpu"], pretrain.burst("gpu"), pretrain.lendable("gpu")) == (8, 16, 8)
    assert (research.guaranteed["gpu"], research.burst("gpu"), research.lendable("gpu")) == (4, 8, 0)
    assert pretrain.priorities == ("high", "normal", "low") and research.priorities == ("normal", "low")
    assert (pretrain.fair_share, research.fair_share) == (8, 4)


def test_no_teams_section_resolves_to_no_teams():
    assert resolve(validated(base_spec())).teams == ()


def test_a_team_with_no_guarantee_runs_on_idle_gpus_only():
    (team,) = resolve(validated(teams({"name": "interns", "members": ["carol"]}))).teams
    assert (team.guaranteed_gpus, team.burst("gpu"), team.fair_share) == (0, 16, 1)


@pytest.mark.parametrize("name", ["root", "kube-system", "low", "default"])
def test_reserved_names_are_refused(name):
    spec = teams({**PRETRAIN, "name": name})
    assert "teams[0].name" in paths(spec)


def test_a_second_team_of_the_same_name_is_refused_at_the_second():
    assert paths(teams(PRETRAIN, {**RESEARCH, "name": "pretrain"})) == {"teams[1].name"}


@pytest.mark.parametrize("name", ["Pretrain", "pre_train", "pretrain-", "a" * 31])
def test_names_each_scheduler_accepts(name):
    assert "teams[0].name" in paths(teams({**PRETRAIN, "name": name}))


def test_gpus_and_share_together_are_refused():
    assert paths(teams({**PRETRAIN, "share": 0.5})) == {"teams[0].share"}


@pytest.mark.parametrize("group, words", [("gpux", "there is no node group 'gpux'"), ("cpu", "has no GPUs")])
def test_gpus_name_gpu_node_groups(group, words):
    spec = with_(base_spec(), "node_groups[1]", {"name": "cpu", "instance_type": "c7i.8xlarge", "count": 1})
    spec = teams({**PRETRAIN, "gpus": {group: 8}}, spec=spec)
    assert paths(spec) == {f"teams[0].gpus.{group}"}
    assert words in messages(spec, f"teams[0].gpus.{group}")[0]


def test_guarantees_that_do_not_fit_are_refused_at_the_first_team_over():
    spec = teams(PRETRAIN, {**RESEARCH, "share": 0.75}, {"name": "late", "members": ["x"], "gpus": {"gpu": 1}})
    assert paths(spec) == {"teams[1].share"}
    (message,) = messages(spec, "teams[1].share")
    assert "16 GPUs" in message and "guaranteed 20" in message


def test_guarantees_that_exactly_fill_the_group_pass():
    assert paths(teams(PRETRAIN, {**RESEARCH, "share": 0.5})) == set()


def test_guarantees_fit_an_elastic_group_at_its_largest_size():
    spec = with_(without_count(base_spec()), "node_groups[0].max_count", 4)
    assert paths(teams({**PRETRAIN, "gpus": {"gpu": 32}}, spec=spec)) == set()
    assert paths(teams({**PRETRAIN, "gpus": {"gpu": 33}}, spec=spec)) == {"teams[0].gpus.gpu"}


def without_count(spec):
    group = dict(spec["node_groups"][0])
    group.pop("count")
    return with_(spec, "node_groups[0]", {**group, "min_count": 0})


def test_a_dedicated_group_is_its_teams_alone():
    spec = with_(base_spec(), "node_groups[0].team", "pretrain")
    # borrow: true, as no group is shared to borrow in (test_borrow_and_lend_without_a_shared_group_...)
    spec = teams({**PRETRAIN, "gpus": {}}, {**RESEARCH, "share": None, "gpus": {"gpu": 4}, "borrow": True}, spec=spec)
    assert paths(spec) == {"teams[1].gpus.gpu"}
    assert "team 'pretrain''s alone" in messages(spec, "teams[1].gpus.gpu")[0]
    spec = with_(with_(spec, "teams[1].gpus", {}), "teams[1].share", 0.5)
    assert paths(spec) == set()
    pretrain, research = resolve(validated(spec)).teams
    assert (pretrain.guaranteed["gpu"], pretrain.burst("gpu"), pretrain.lendable("gpu")) == (16, 16, 0)
    assert (research.guaranteed["gpu"], research.burst("gpu")) == (0, 0)  # never borrows it
    assert pretrain.dedicated == ("gpu",) and research.others == ("gpu",)


def test_a_group_dedicated_to_another_team_is_never_borrowed():
    spec = with_(base_spec(), "node_groups[1]", {"name": "eval", "instance_type": "p5.48xlarge", "count": 1,
                                                 "team": "research"})
    pretrain, research = resolve(validated(teams(PRETRAIN, RESEARCH, spec=spec))).teams
    assert (pretrain.guaranteed["eval"], pretrain.burst("eval")) == (0, 0)
    assert (research.guaranteed["eval"], research.burst("eval"), research.lendable("eval")) == (8, 8, 0)


@pytest.mark.parametrize("team, words", [("nobody", "there is no team 'nobody'")])
def test_a_dedicated_group_names_a_team(team, words):
    spec = teams(PRETRAIN, spec=with_(base_spec(), "node_groups[0].team", team))
    assert paths(spec) == {"node_groups[0].team"}
    assert words in messages(spec, "node_groups[0].team")[0]


def test_members_are_linux_names_on_slurm_and_iam_arns_on_kubernetes():
    role = "arn:aws:iam::111122223333:role/pretrain-engineers"
    assert paths(teams({**PRETRAIN, "members": [role]})) == {"teams[0].members[0]"}
    eks = on("eks")
    assert paths(teams({**PRETRAIN, "members": ["alice"]}, spec=eks)) == {"teams[0].members[0]"}
    assert paths(teams({**PRETRAIN, "members": [role], "groups": ["ml"]}, spec=eks)) == set()
    assert paths(teams({**PRETRAIN, "members": [role], "groups": ["system:masters"]}, spec=eks)) == \
        {"teams[0].groups[0]"}


def test_a_team_named_as_the_shared_namespace_is_refused_on_kubernetes():
    spec = with_(on("eks"), "orchestrator.namespace", "ml")
    spec = teams({**PRETRAIN, "name": "ml", "members": ["arn:aws:iam::111122223333:role/ml"]}, spec=spec)
    assert paths(spec) == {"teams[0].name"}


def test_a_team_without_people_is_a_warning():
    spec = teams({"name": "ghost", "gpus": {"gpu": 1}})
    assert paths(spec) == set() and paths(spec, "warning") == {"teams[0].name"}
    assert findings(rules.team_without_people, spec)


def test_slurm_teams_need_what_their_accounting_runs_on():
    """PCS: Slurm 24.11 or later and a login node; HyperPod Slurm: a second AZ (the database's)."""
    assert paths(teams(PRETRAIN, spec=with_(base_spec(), "orchestrator.version", "24.11"))) == set()
    assert paths(teams(PRETRAIN, spec=with_(base_spec(), "orchestrator.version", "24.05"))) == {"orchestrator.version"}
    no_login = with_(base_spec(), "orchestrator.login", {"instance_type": "m7i.2xlarge", "count": 0})
    assert paths(teams(PRETRAIN, spec=no_login)) == {"orchestrator.login.count"}
    hyperpod = on("hyperpod-slurm")
    assert paths(teams(PRETRAIN, spec=hyperpod)) == {"teams"}
    assert "two Availability Zones" in " ".join(messages(teams(PRETRAIN, spec=hyperpod), "teams"))
    assert paths(teams(PRETRAIN, spec=with_(hyperpod, "network.extra_availability_zone_ids", ["use1-az6"]))) == set()
    assert paths(no_login) == set() and paths(hyperpod) == set()  # without teams, nothing asked
    assert paths(teams(PRETRAIN, spec=on("eks"))) <= {"teams[0].members[0]", "teams[0].members[1]"}


def test_instances_carry_their_team_as_a_cost_allocation_tag():
    """A dedicated group's instances carry its team; the shared groups `shared`; no teams, no tag."""
    spec = with_(base_spec(), "node_groups[1]", {"name": "eval", "instance_type": "p5.48xlarge", "count": 1,
                                                 "team": "research"})
    m = resolve(validated(teams(PRETRAIN, RESEARCH, spec=spec)))
    assert m.instance_tags(m.group("eval"))["fmcluster:team"] == "research"
    assert m.instance_tags(m.group("gpu"))["fmcluster:team"] == "shared"
    plain = resolve(validated(base_spec()))
    assert "fmcluster:team" not in plain.instance_tags(plain.group("gpu"))


# ---- bounds: what the cluster's node groups and Slurm's accounting hold ----------------------------------------


def test_a_guarantee_above_its_own_dedicated_group_is_refused_not_capped():
    """16 nodes of 8 GPUs dedicated to the team: 1,000,000 GPUs there is an error, not a quiet 128."""
    spec = with_(with_(base_spec(), "node_groups[0].count", 16), "node_groups[0].team", "pretrain")
    over = teams({**PRETRAIN, "gpus": {"gpu": 1_000_000}}, spec=spec)
    assert paths(over) == {"teams[0].gpus.gpu"}
    (message,) = messages(over, "teams[0].gpus.gpu")
    assert "has 128 GPUs" in message and "not 1000000" in message and "leave 'gpu' out of `gpus`" in message
    exact = teams({**PRETRAIN, "gpus": {"gpu": 128}}, spec=spec)
    assert paths(exact) == set()
    assert resolve(validated(exact)).teams[0].guaranteed["gpu"] == 128


@pytest.mark.parametrize("field", ["borrow", "lend"])
def test_borrow_and_lend_of_2_to_the_64_are_refused_with_what_the_group_holds(field):
    spec = teams({**PRETRAIN, field: 2**64})
    assert paths(spec) == {f"teams[0].{field}"}
    (message,) = messages(spec, f"teams[0].{field}")
    # 16 GPUs in the group, 8 of them guaranteed to it: 8 more to borrow, 8 to lend
    assert "at most 8 GPUs" in message and str(2**64) in message and "node group 'gpu': 16 GPUs" in message
    assert f"{field}: true" in message and "up to 8" in message


def test_borrow_and_lend_up_to_what_a_shared_group_holds_pass():
    assert paths(teams({**PRETRAIN, "borrow": 8, "lend": 8})) == set()
    assert paths(teams({**PRETRAIN, "borrow": 9})) == {"teams[0].borrow"}
    assert paths(teams({**PRETRAIN, "lend": 9})) == {"teams[0].lend"}
    # a share of 0.25: 4 of 16 guaranteed, 12 to borrow; booleans are never bounded
    assert paths(teams({**RESEARCH, "borrow": 12, "lend": 4})) == set()
    assert paths(teams({**RESEARCH, "borrow": 13, "lend": 5})) == {"teams[0].borrow", "teams[0].lend"}
    assert paths(teams({**RESEARCH, "borrow": True, "lend": True})) == set()


def test_borrow_is_bounded_by_the_largest_room_of_any_shared_group():
    """Per node group: the group where most is left beyond its guarantee bounds it (an elastic one at its largest)."""
    spec = with_(without_count(base_spec()), "node_groups[0].max_count", 4)  # 32 GPUs
    spec = with_(spec, "node_groups[1]", {"name": "small", "instance_type": "p5.48xlarge", "count": 1})
    assert paths(teams({**PRETRAIN, "borrow": 24}, spec=spec)) == set()  # 32 - 8 in gpu
    assert paths(teams({**PRETRAIN, "borrow": 25}, spec=spec)) == {"teams[0].borrow"}
    assert "node group 'gpu': 32 GPUs" in messages(teams({**PRETRAIN, "borrow": 25}, spec=spec), "teams[0].borrow")[0]


def test_borrow_and_lend_without_a_shared_group_or_room_are_refused():
    dedicated = with_(base_spec(), "node_groups[0].team", "pretrain")
    spec = teams({**PRETRAIN, "gpus": {}}, {**RESEARCH, "share": None, "borrow": 4, "lend": 2}, spec=dedicated)
    assert paths(spec) == {"teams[1].borrow", "teams[1].lend"}
    assert "none is shared" in messages(spec, "teams[1].borrow")[0]
    assert "never lent" in messages(spec, "teams[1].lend")[0]
    whole = teams({**PRETRAIN, "gpus": {"gpu": 16}, "borrow": 1})  # guaranteed every GPU: nothing left
    assert paths(whole) == {"teams[0].borrow"}
    assert "borrow: false" in messages(whole, "teams[0].borrow")[0]
    none = teams({**RESEARCH, "share": None, "lend": 1})  # guaranteed nothing: nothing to lend
    assert paths(none) == {"teams[0].lend"}
    assert "lend: false" in messages(none, "teams[0].lend")[0]


def test_slurm_s_fairshare_bounds_a_team_s_guaranteed_gpus():
    """Fairshare is a uint32 whose 0x7fffffff means "the parent's" (slurm/slurmdb.h): a guarantee
    above it would be cast into another number without a word."""
    from fmcluster.facts import teams as team_facts

    most = team_facts.SLURM_MAX_FAIRSHARE
    huge = with_(base_spec(), "node_groups[0].count", 2**28)  # 2^31 GPUs (other rules refuse so many nodes)

    def team_paths(spec):
        return {p for p in paths(spec) if p.startswith("teams")}

    assert team_paths(teams({**PRETRAIN, "gpus": {"gpu": most}}, spec=huge)) == set()
    over = teams({**PRETRAIN, "gpus": {"gpu": most + 1}}, spec=huge)
    assert team_paths(over) == {"teams[0].gpus"}
    assert f"holds at most {most}" in messages(over, "teams[0].gpus")[0]
    assert team_paths(teams({**PRETRAIN, "gpus": {"gpu": most + 1}}, spec=on("eks", huge))) <= {
        "teams[0].members[0]", "teams[0].members[1]"}  # Kueue's quotas are no Fairshare


def test_slurm_s_tres_counts_bound_what_a_team_may_hold():
    """GrpTRES=gres/gpu is a uint64 TRES count below Slurm's sentinels (INFINITE64: no limit, which
    any larger number also reads as), summed over the node groups the team may use."""
    from fmcluster.facts import teams as team_facts

    most = team_facts.SLURM_MAX_TRES_COUNT
    assert most == 2**64 - 16  # MAX_VAL64, below INFINITE64, NO_VAL64 and NO_CONSUME_VAL64
    huge = with_(base_spec(), "node_groups[1]", {"name": "more", "instance_type": "p5.48xlarge", "count": 2**60})
    huge = with_(huge, "node_groups[0].count", 2**60)  # 2^63 GPUs each
    fits = teams({**RESEARCH, "share": None, "borrow": 2**63 - 8}, spec=huge)
    assert "teams[0].borrow" not in paths(fits)
    over = teams({**RESEARCH, "share": None, "borrow": 2**63}, spec=huge)
    assert "teams[0].borrow" in paths(over)
    assert "Slurm would read it as no limit" in messages(over, "teams[0].borrow")[0]
    assert "teams[0].borrow" not in paths(teams({**RESEARCH, "share": None, "borrow": True}, spec=huge))
