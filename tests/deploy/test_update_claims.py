"""The update policy (fmcluster.spec.update_policy) against the templates. Each sample changes one
field of a small valid spec on one control plane; both specs are synthesized (each once for the
module) and compared as `fmcluster diff` compares them, and what the templates show must be what
the field's case says: the effect (a replaced or removed resource that holds data, an update the
service refuses, a replaced resource, a node group whose running nodes are reached, any change),
whether the nodes are reached, and what it replaces or loses. A case the templates do not show
(`unseen`) is said in a note of `fmcluster diff` instead. Every field has a sample, and every case
that replaces a resource, loses data, makes a new cluster or is refused has one on each of its
control planes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import pytest
import yaml

from fmcluster.deploy import diff
from fmcluster.spec import loader
from fmcluster.spec import update_policy as policy
from fmcluster.spec.models import ClusterSpec
from tests.support.paths import ROOT
from tests.support.specs import base_spec, on, to_yaml, with_, without

pytestmark = pytest.mark.synth

Edit = Callable[[dict], dict]
SEVERE = (policy.REPLACE, policy.DATA_LOSS, policy.NEW_CLUSTER, policy.REFUSED)


def base(plane: str) -> dict:
    """A small valid spec on `plane`: two buckets and a Lustre file system linked to them, a shared
    home, a GPU and a CPU group, two teams, Prometheus."""
    spec = with_(base_spec(), "storage.home", {"storage_capacity_gib": 512})
    spec["node_groups"].append({"name": "cpu", "instance_type": "m7i.4xlarge", "count": 1})
    spec["teams"] = [{"name": "alpha", "members": [member(plane, "alice")], "gpus": {"gpu": 8}},
                     {"name": "beta", "members": [member(plane, "bob")]}]
    spec["observability"] = {"prometheus": True}
    if plane == policy.HYPERPOD_SLURM:  # its Slurm accounting database needs a second AZ
        spec = with_(spec, "network.extra_availability_zone_ids", ["use1-az1"])
    return spec if plane == policy.PCS else on(plane, spec)


def member(plane: str, name: str) -> str:
    """A team member as the control plane knows users: a Linux user (Slurm), an IAM role (Kubernetes)."""
    return f"arn:aws:iam::111122223333:role/{name}" if plane in policy.KUBERNETES else name


def gb200(plane: str) -> dict:
    """An example whose GPU group is on an UltraServer Capacity Block."""
    return yaml.safe_load((ROOT / f"examples/p6e-gb200-{plane}.yaml").read_text())


@dataclass(frozen=True)
class Sample:
    path: str  # the field whose case is checked
    plane: str
    edit: Edit  # OLD -> NEW
    before: Edit = lambda spec: spec  # the base -> OLD
    start: Callable[[str], dict] = base

    def specs(self) -> tuple[ClusterSpec, ClusterSpec]:
        old = self.before(self.start(self.plane))
        return valid(old), valid(self.edit(old))

    def __str__(self) -> str:
        return f"{self.path}@{self.plane}"


def valid(data: dict) -> ClusterSpec:
    result = loader.load_text(to_yaml(data), "spec.yaml")
    assert result.ok, [d.message for d in result.diagnostics if d.severity == "error"]
    return result.spec


def put(path: str, value: Any) -> Edit:
    return lambda spec: with_(spec, path, value)


def drop(path: str) -> Edit:
    return lambda spec: without(spec, path)


def both(*edits: Edit) -> Edit:
    def edit(spec: dict) -> dict:
        for one in edits:
            spec = one(spec)
        return spec

    return edit


def each(path: str, planes: tuple[str, ...], edit: Edit, **kw: Any) -> list[Sample]:
    return [Sample(path, plane, edit, **kw) for plane in planes]


ALL, PCS, EKS, HPS, HPE = policy.PLANES, policy.PCS, policy.EKS, policy.HYPERPOD_SLURM, policy.HYPERPOD_EKS
SERVING = {"model": {"name": "m", "path": "/fsx/models/m", "parameters_billions": 8}, "node_group": "gpu"}
WARNING = [{"rule": "placeholder-values", "reason": "examples", "path": "account"}]
RENAME_BUCKET = both(put("storage.buckets[0].name", "data2"), put("storage.lustre.links[0].bucket", "data2"))
DROP_BUCKET = both(drop("storage.lustre.links[0]"), drop("storage.buckets[0]"))
PERSISTENT_1 = both(drop("storage.lustre.links"), put("storage.lustre.deployment_type", "PERSISTENT_1"))
EFA_LUSTRE = both(put("storage.lustre.efa", True), put("storage.lustre.storage_capacity_gib", 19200))
NO_LUSTRE = drop("storage.lustre")
RESERVED = put("node_groups[0].capacity", {"type": "reservation", "reservation_id": "cr-0123456789abcdef1"})
GROUP_RESERVED = put("node_groups[0].capacity", {
    "type": "reservation", "reservation_resource_group_arn": "arn:aws:resource-groups:us-east-1:111122223333:group/g"})
NO_TEAMS = drop("teams")
SERVED = both(put("serving", SERVING), put("node_groups[2]", {"name": "gpu2", "instance_type": "p5.48xlarge",
                                                               "count": 1}))
# Fields that have one value only: no change to sample
ONE_VALUE = {"serving.engine": "vllm is the only engine"}


def to(plane: str) -> Edit:
    """Another control plane, with what it needs: a second AZ, its kind of team members."""
    def edit(spec: dict) -> dict:
        spec = with_(on(plane, spec), "network.extra_availability_zone_ids", ["use1-az1"])
        for team in spec.get("teams", []):
            team["members"] = [member(plane, m.rsplit("/", 1)[-1]) for m in team["members"]]
        return spec

    return edit


SAMPLES: list[Sample] = [
    *each("name", ALL, put("name", "other")),
    *each("region", ALL, both(put("region", "us-west-2"), put("availability_zone_id", "usw2-az1"),
                              put("network.extra_availability_zone_ids", ["usw2-az2"]))),
    *each("account", ALL, put("account", "444455556666"), before=put("account", "111122223333")),
    *each("account", ALL, put("account", "111122223333")),
    *each("availability_zone_id", ALL, put("availability_zone_id", "use1-az6")),
    *each("network.vpc_cidr", ALL, put("network.vpc_cidr", "10.1.0.0/16")),
    *each("network.extra_availability_zone_ids", (EKS, HPS, HPE), put("network.extra_availability_zone_ids",
                                                                        ["use1-az2"])),
    Sample("network.extra_availability_zone_ids", PCS, put("network.extra_availability_zone_ids", ["use1-az2"])),
    *each("storage.buckets", ALL, DROP_BUCKET),
    Sample("storage.buckets", PCS, put("storage.buckets[2]", {"name": "extra"})),
    *each("storage.buckets[].name", ALL, RENAME_BUCKET),
    Sample("storage.buckets[].versioned", PCS, put("storage.buckets[0].versioned", True)),
    *each("storage.lustre", ALL, NO_LUSTRE),
    *each("storage.lustre", ALL, put("storage.lustre", {"storage_capacity_gib": 4800}), before=NO_LUSTRE),
    Sample("storage.lustre.storage_capacity_gib", PCS, put("storage.lustre.storage_capacity_gib", 9600)),
    *each("storage.lustre.storage_capacity_gib", ALL, put("storage.lustre.storage_capacity_gib", 2400)),
    *each("storage.lustre.deployment_type", ALL, PERSISTENT_1),
    Sample("storage.lustre.throughput_per_tib", PCS, put("storage.lustre.throughput_per_tib", 500)),
    Sample("storage.lustre.compression", PCS, put("storage.lustre.compression", "NONE")),
    Sample("storage.lustre.metadata_iops", PCS, put("storage.lustre.metadata_iops", 3000)),
    *each("storage.lustre.efa", ALL, EFA_LUSTRE),
    *each("storage.lustre.mount_path", (PCS, HPS, EKS), put("storage.lustre.mount_path", "/lustre")),
    Sample("storage.lustre.links", PCS, drop("storage.lustre.links[1]")),
    Sample("storage.lustre.links", PCS, put("storage.lustre.links[2]", {"bucket": "datasets", "path": "/more",
                                                                        "prefix": "more/"})),
    *each("storage.lustre.links[].bucket", ALL, both(put("storage.lustre.links[1].bucket", "datasets"),
                                                     put("storage.lustre.links[1].prefix", "ck/"))),
    Sample("storage.lustre.links[].path", PCS, put("storage.lustre.links[0].path", "/data")),
    *each("storage.lustre.links[].prefix", ALL, put("storage.lustre.links[0].prefix", "p/")),
    Sample("storage.lustre.links[].import", PCS, put("storage.lustre.links[0].import", ["NEW"])),
    Sample("storage.lustre.links[].export", PCS, put("storage.lustre.links[1].export", ["NEW"])),
    *each("storage.home", ALL, drop("storage.home")),
    *each("storage.home", ALL, put("storage.home", {"storage_capacity_gib": 512}), before=drop("storage.home")),
    Sample("storage.home", HPS, put("storage.home.storage_capacity_gib", 1024)),
    Sample("storage.home.storage_capacity_gib", PCS, put("storage.home.storage_capacity_gib", 1024)),
    *each("storage.home.storage_capacity_gib", ALL, put("storage.home.storage_capacity_gib", 256)),
    *each("storage.home.deployment_type", ALL, put("storage.home.deployment_type", "SINGLE_AZ_HA_2")),
    Sample("storage.home.throughput_mbps", PCS, put("storage.home.throughput_mbps", 320)),
    *each("storage.home.compression", ALL, put("storage.home.compression", "ZSTD")),
    *each("storage.kms", ALL, put("storage.kms", True)),
    *each("images.revision", ALL, put("images.revision", 1)),
    Sample("images.reference", PCS, put("images.reference", False)),
    Sample("images.reference", PCS, put("images.reference", True), before=put("images.reference", False)),
    *[Sample("orchestrator.type", PCS, to(plane)) for plane in (EKS, HPS, HPE)],
    *[Sample("orchestrator.type", HPS, to(plane)) for plane in (PCS, EKS, HPE)],
    Sample("orchestrator.type", HPS, to(PCS), before=NO_TEAMS),
    Sample("orchestrator.type", EKS, to(HPS), before=put("network.extra_availability_zone_ids", ["use1-az1"])),
    Sample("orchestrator.type", HPE, to(EKS)),
    Sample("orchestrator.version", PCS, put("orchestrator.version", "24.11")),
    *each("orchestrator.version", (EKS, HPE), put("orchestrator.version", "1.34")),  # down from the newest
    *each("orchestrator.version", (EKS, HPE), put("orchestrator.version", "1.35"),
          before=put("orchestrator.version", "1.33")),
    Sample("orchestrator.version", EKS, put("orchestrator.version", "1.35"),
           before=put("orchestrator.version", "1.34")),
    *each("orchestrator.login.instance_type", ALL, put("orchestrator.login.instance_type", "m7i.4xlarge")),
    Sample("orchestrator.login.count", PCS, put("orchestrator.login.count", 2)),
    *each("orchestrator.admin_role_arn", (PCS, EKS), put("orchestrator.admin_role_arn",
                                                        "arn:aws:iam::111122223333:role/admin")),
    Sample("orchestrator.endpoint_access", EKS, put("orchestrator.endpoint_access", "private")),
    Sample("orchestrator.public_access_cidrs", EKS, put("orchestrator.public_access_cidrs", ["10.0.0.0/8"])),
    Sample("orchestrator.namespace", EKS, put("orchestrator.namespace", "ml")),
    Sample("node_groups", PCS, put("node_groups[2]", {"name": "more", "instance_type": "c7i.8xlarge", "count": 1})),
    Sample("node_groups", PCS, drop("node_groups[1]")),
    *each("node_groups[].name", ALL, both(put("node_groups[0].name", "train"), put("teams[0].gpus", {"train": 8}))),
    *each("node_groups[].instance_type", ALL, put("node_groups[0].instance_type", "p5en.48xlarge")),
    Sample("node_groups[].count", PCS, put("node_groups[0].count", 4)),
    Sample("node_groups[].min_count", PCS, both(drop("node_groups[1].count"), put("node_groups[1].min_count", 0),
                                                put("node_groups[1].max_count", 2))),
    Sample("node_groups[].max_count", PCS, put("node_groups[1].max_count", 4),
           before=both(drop("node_groups[1].count"), put("node_groups[1].max_count", 2))),
    *each("node_groups[].capacity.type", (PCS, EKS, HPE), put("node_groups[0].capacity.type", "spot")),
    *each("node_groups[].capacity.type", (PCS, EKS), RESERVED),
    *each("node_groups[].capacity.reservation_id", (PCS, EKS), put("node_groups[0].capacity.reservation_id",
                                                                  "cr-0123456789abcdef2"), before=RESERVED),
    Sample("node_groups[].capacity.reservation_resource_group_arn", PCS, put(
        "node_groups[0].capacity.reservation_resource_group_arn",
        "arn:aws:resource-groups:us-east-1:111122223333:group/h"), before=GROUP_RESERVED),
    Sample("node_groups[].capacity.training_plan_arn", HPS, put("node_groups[0].capacity", {
        "type": "capacity-block", "training_plan_arn": "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p"})),
    Sample("node_groups[].capacity.ultraserver_type", PCS, both(
        put("node_groups[0].capacity.ultraserver_type", "u-p6e-gb200x36"),
        put("node_groups[0].capacity.ultraserver_count", 2)), start=gb200),
    Sample("node_groups[].capacity.end_signal_minutes", PCS, put("node_groups[0].capacity.end_signal_minutes", 20),
           start=gb200),
    Sample("node_groups[].capacity.end_signal", PCS, put("node_groups[0].capacity.end_signal", "B:USR1"), start=gb200),
    Sample("node_groups[].capacity.end_signal", PCS, put("node_groups[0].capacity.end_signal", "B:USR1"),
           before=put("node_groups[0].capacity.type", "spot")),
    Sample("node_groups[].capacity.end_signal_minutes", HPS, put("node_groups[0].capacity.end_signal_minutes", 20),
           before=put("node_groups[0].capacity", {"type": "capacity-block", "training_plan_arn":
                                                   "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p"})),
    # Kubernetes: the group's capacity-end function (fmcluster.kubernetes.capacity_end) reads it
    Sample("node_groups[].capacity.end_signal_minutes", EKS, put("node_groups[0].capacity.end_signal_minutes", 20),
           start=gb200),
    Sample("node_groups[].capacity.end_signal_minutes", HPE, put("node_groups[0].capacity.end_signal_minutes", 20),
           before=put("node_groups[0].capacity", {"type": "capacity-block", "training_plan_arn":
                                                   "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p"})),
    *[Sample("node_groups[].capacity.ultraserver_count", plane, put("node_groups[0].capacity.ultraserver_count", 2),
             start=gb200) for plane in (PCS, EKS)],
    *each("node_groups[].placement_group", ALL, put("node_groups[0].placement_group", "none")),
    *each("node_groups[].efa", ALL, put("node_groups[0].efa", False)),
    *each("node_groups[].root_volume_gib", ALL, put("node_groups[0].root_volume_gib", 1024)),
    *each("node_groups[].ami_id", ALL, put("node_groups[0].ami_id", "ami-0123456789abcdef1")),
    Sample("node_groups[].ami_id", PCS, put("node_groups[0].ami_id", "ami-0123456789abcdef2"),
           before=put("node_groups[0].ami_id", "ami-0123456789abcdef1")),
    *each("node_groups[].labels", (PCS, EKS, HPE), put("node_groups[0].labels", {"tier": "a"})),
    *each("node_groups[].team", ALL, put("node_groups[0].team", "alpha")),
    *each("observability.prometheus", ALL, put("observability.prometheus", False)),
    Sample("observability.prometheus", PCS, put("observability.prometheus", True),
           before=put("observability.prometheus", False)),
    Sample("observability.prometheus", PCS, put("observability.prometheus", False),
           before=put("observability.grafana", True)),
    Sample("observability.grafana", PCS, put("observability.grafana", True)),
    *each("observability.grafana", ALL, put("observability.grafana", False),
          before=put("observability.grafana", True)),
    Sample("observability.alert_email", PCS, put("observability.alert_email", "oncall@corp.io")),
    *each("observability.alert_email", ALL, put("observability.alert_email", "pager@corp.io"),
          before=put("observability.alert_email", "oncall@corp.io")),
    *each("tags", ALL, put("tags", {"cost-center": "ml"})),
    Sample("protect", PCS, put("protect", True)),
    Sample("serving", PCS, put("serving", SERVING)),
    *[Sample(f"serving.{path}", PCS, put(f"serving.{path}", value), before=SERVED) for path, value in (
        ("model.name", "m2"), ("model.path", "/fsx/models/m2"), ("model.parameters_billions", 7),
        ("model.dtype", "fp8"), ("node_group", "gpu2"), ("replicas", 1),
        ("image", "vllm/vllm-openai:v0.1.0"), ("gpu_memory_utilization", 0.8), ("max_model_len", 4096))],
    *each("health.check_minutes", ALL, put("health.check_minutes", 10)),
    Sample("health.check_minutes", EKS, put("health.check_minutes", 10), before=put("observability.prometheus", False)),
    *each("health.replace", ALL, put("health.replace", False)),
    *each("health.max_replacing", ALL, put("health.max_replacing", 5)),
    *each("health.deep_check", ALL, put("health.deep_check", False)),
    *each("teams", (PCS, HPS), NO_TEAMS),
    *each("teams", ALL, drop("teams[1]")),
    Sample("teams", PCS, put("teams[2]", {"name": "gamma", "members": ["carol"]})),
    *each("teams[].name", ALL, put("teams[1].name", "delta")),
    *[Sample("teams[].members", plane, put("teams[0].members", [member(plane, "alice"), member(plane, "carol")]))
      for plane in (PCS, EKS)],
    Sample("teams[].groups", PCS, put("teams[0].groups", ["ml"])),
    *each("teams[].gpus", (PCS, EKS), put("teams[0].gpus", {"gpu": 4})),
    Sample("teams[].share", PCS, put("teams[1].share", 0.25)),
    *each("teams[].borrow", (PCS, EKS), put("teams[1].borrow", False)),
    *each("teams[].lend", (PCS, EKS), put("teams[0].lend", False)),
    *each("teams[].priority", (PCS, EKS), put("teams[0].priority", "high")),
    Sample("accepted_warnings", PCS, put("accepted_warnings", WARNING)),
    *[Sample(f"accepted_warnings[].{key}", PCS, put(f"accepted_warnings[0].{key}", value),
             before=put("accepted_warnings", WARNING))
      for key, value in (("rule", "eks-admin-role"), ("reason", "known"), ("path", "name"))],
]


@pytest.fixture(scope="module")
def synthesize(corpus):
    """diff.run's synthesizer, each spec synthesized once a run (the corpus's, shared by the workers:
    the base specs recur in every worker's share of the samples)."""
    return corpus.in_process


@dataclass(frozen=True)
class Seen:
    """What the templates show of a change, in the update policy's words."""

    effect: str
    nodes: bool  # a node group's running nodes are reached (node rolls, or image rolls)
    lost: frozenset[str]  # the types of the resources that hold data and are replaced or removed
    replaced: frozenset[str]  # the types of the other resources replaced


def seen(comparison: diff.Comparison) -> Seen:
    changes = [c for s in comparison.stacks for c in s.changes]
    # a custom resource has no schema (MAY REPLACE): CDK's Kubernetes manifests, applied again in place
    replaced = {c.type for c in changes if c.action in (diff.REPLACE, diff.MAY_REPLACE)
                and not c.type.startswith("Custom::") and not c.data_loss}
    if comparison.new_cluster is not None:
        effect = policy.NEW_CLUSTER
    elif comparison.failing:
        effect = policy.REFUSED
    elif comparison.data_loss:
        effect = policy.DATA_LOSS
    elif replaced:
        effect = policy.REPLACE
    elif comparison.node_rolls or comparison.rolls:
        effect = policy.ROLL
    else:
        effect = policy.IN_PLACE if changes else policy.NOTHING
    return Seen(effect, bool(comparison.node_rolls or comparison.rolls),
                frozenset(c.type for c in comparison.data_loss), frozenset(replaced))


@pytest.mark.parametrize("sample", SAMPLES, ids=str)
def test_each_change_does_what_its_case_says(sample, synthesize):
    old, new = sample.specs()
    case = policy.policy(sample.path).case(old, new)
    assert case is not None, f"no case of {sample.path} holds"
    report = diff.run(old, new, synthesize=synthesize).comparison
    assert report is not None
    found = seen(report)
    if case.unseen:  # said in a note of `fmcluster diff`, and more than the templates show
        assert policy.EFFECTS.index(found.effect) <= policy.EFFECTS.index(case.effect)
        assert any(sample.path in note for note in report.notes), report.notes
        return
    assert found.effect == case.effect, (case.text(), found)
    # what reaches a group's running nodes, on a control plane that stays (another one's groups are new)
    if case.effect not in (policy.REFUSED, policy.NEW_CLUSTER) and old.orchestrator.type == new.orchestrator.type:
        assert found.nodes == (sample.plane in case.nodes), (case.text(), found)
    if case.effect == policy.DATA_LOSS:
        assert found.lost <= set(case.resources), (case.text(), found)
    if case.effect == policy.REPLACE:
        assert found.replaced & set(case.resources), (case.text(), found)


def test_every_field_has_a_sample():
    sampled = {s.path for s in SAMPLES}
    assert [p for p, entry in policy.POLICIES.items() if entry.cases and p not in sampled | set(ONE_VALUE)] == []
    assert sampled <= set(policy.POLICIES) and not sampled & set(ONE_VALUE)


def test_every_case_that_replaces_loses_or_refuses_has_a_sample_on_each_of_its_planes():
    """Decided without synthesis: which case each sample's specs select, on NEW's control plane."""
    chosen = {(s.path, new.orchestrator.type, policy.policy(s.path).case(old, new))
              for s in SAMPLES for old, new in [s.specs()]}
    missing = [(path, plane, case.text()) for path, entry in policy.POLICIES.items() for case in entry.cases
               if case.effect in SEVERE for plane in case.planes or policy.PLANES
               if (path, plane, case) not in chosen and _reachable(entry, case, plane)]
    assert missing == []


def _reachable(entry: policy.Policy, case: policy.Case, plane: str) -> bool:
    """Whether `case` can hold on `plane`: no case before it holds there whatever the specs."""
    for before in entry.cases[:entry.cases.index(case)]:
        if before.check is None and (not before.planes or plane in before.planes):
            return False
    return True
