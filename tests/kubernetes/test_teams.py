"""Teams sharing a Kubernetes cluster (fmcluster.kubernetes.kueue, team objects): the Cohort, a
ClusterQueue per team, the WorkloadPriorityClasses, the teams' namespaces, LocalQueues and
RoleBindings, and the Lustre claim in each team's namespace.

There is no Kueue here to admit workloads, and no simulator of its scheduler: the quotas are held
structurally instead, to what Kueue's API promises of them (kubernetes-sigs/kueue v0.18.3
apis/kueue/v1beta2 clusterqueue_types.go, cohort_types.go): a (flavor, resource)'s quota in a
cohort is the sum of its members' nominal quotas and the Cohort's own, a queue may use its nominal
quota plus at most its borrowingLimit, and lends at most its lendingLimit. So the checks: every
flavor's quota across the cohort is the flavor's capacity (as the one ClusterQueue without teams
has it), each team's GPUs are its guarantee, what it may reach is Team.burst, a dedicated group is
its team's alone; plus what Kueue's webhook (pkg/webhooks/clusterqueue_webhook.go, cohort_webhook.go)
refuses, which the CRD schemas do not say. Each check is shown to catch a broken object. The
objects' schemas: tests/kubernetes/test_crd_schemas.py (every example) and here; the built-in kinds
with kubernetes-validate at the cluster's Kubernetes version.
"""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest
import yaml

from fmcluster.facts import controlplanes
from fmcluster.facts import teams as team_facts
from fmcluster.kubernetes import charts, kueue
from fmcluster.kubernetes import manifests as kubernetes
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from tests.support.crds import KUBERNETES_EXAMPLES, validate
from tests.support.paths import ROOT
from tests.support.specs import base_spec, validated, with_

ROLE = "arn:aws:iam::111122223333:role/pretrain"
USER = "arn:aws:iam::111122223333:user/alice"


def teams_spec(teams, node_groups=None, control_plane="eks"):
    spec = with_(base_spec(), "orchestrator.type", control_plane)
    spec = with_(spec, "network.extra_availability_zone_ids", ["use1-az1"])
    spec = with_(spec, "node_groups", node_groups or [
        {"name": "cpu", "instance_type": "m7i.4xlarge", "count": 2},
        {"name": "p5en", "instance_type": "p5en.48xlarge", "min_count": 0, "max_count": 4},  # 32 GPUs
        {"name": "p5", "instance_type": "p5.48xlarge", "count": 2, "team": "vision"},  # 16 GPUs, dedicated
    ])
    return validated(with_(spec, "teams", teams))


TEAMS = [
    {"name": "pretrain", "members": [ROLE, USER], "gpus": {"p5en": 16}, "borrow": False, "lend": 8,
     "priority": "high"},
    {"name": "vision", "groups": ["vision-team"], "members": [USER], "share": 0.25, "borrow": 8},
    {"name": "research", "groups": ["ml-research"], "priority": "low"},  # no guarantee: borrows only
]


@pytest.fixture(scope="module")
def model():
    return resolve(teams_spec(TEAMS))


def kinds(documents, kind):
    return {d["metadata"]["name"]: d for d in documents if d["kind"] == kind}


def quota(flavor):
    return {r["name"]: r for r in flavor["resources"]}


def amount(value) -> int:
    return int(value.removesuffix("Gi")) if isinstance(value, str) else value


# --- the checks ------------------------------------------------------------------------------------

def webhook_problems(documents) -> list[str]:
    """What Kueue 0.18.3's webhooks refuse of the ClusterQueues and Cohort that the CRD schemas
    do not say: resource names as covered, in order; no flavor twice; limits only within a cohort
    (a Cohort: only with a parent); a lendingLimit at most the nominal quota; reclaimWithinCohort
    Never with a borrowWithinCohort policy."""
    problems = []
    for document in documents:
        if document["kind"] not in ("ClusterQueue", "Cohort"):
            continue
        name, spec = document["metadata"]["name"], document["spec"]
        in_cohort = bool(spec.get("cohortName") if document["kind"] == "ClusterQueue" else spec.get("parentName"))
        flavors = [f["name"] for g in spec.get("resourceGroups", []) for f in g["flavors"]]
        if len(flavors) != len(set(flavors)):
            problems.append(f"{name}: a flavor twice")
        for group in spec.get("resourceGroups", []):
            for flavor in group["flavors"]:
                if [r["name"] for r in flavor["resources"]] != group["coveredResources"]:
                    problems.append(f"{name}/{flavor['name']}: resources not as covered")
                for resource in flavor["resources"]:
                    limits = {"borrowingLimit", "lendingLimit"} & set(resource)
                    if limits and not in_cohort:
                        problems.append(f"{name}/{flavor['name']}: {sorted(limits)} outside a cohort")
                    if amount(resource.get("lendingLimit", 0)) > amount(resource["nominalQuota"]):
                        problems.append(f"{name}/{flavor['name']}: lendingLimit above nominalQuota")
        preemption = spec.get("preemption", {})
        if preemption.get("reclaimWithinCohort", "Never") == "Never" and \
                preemption.get("borrowWithinCohort", {}).get("policy", "Never") != "Never":
            problems.append(f"{name}: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")
    return problems


def quota_problems(model, documents) -> list[str]:
    """Where the teams' quotas break what they promise: each shared flavor's quota across the
    cohort (the teams' and the Cohort's) is the flavor's capacity, resource by resource; a team's
    GPUs are its guarantee, with its borrow and lend limits; a dedicated flavor is in its team's
    queue only, whole, lent to none, and not in the Cohort."""
    problems = []
    capacity = {q.name: q.quantities() for q in kueue.flavor_quotas(model)}
    owners = kueue.dedicated_owners(model)
    cohorts = kinds(documents, "Cohort")
    (cohort,) = cohorts.values()
    queues = kinds(documents, "ClusterQueue")
    totals: dict[tuple[str, str], int] = {}
    for group in cohort["spec"].get("resourceGroups", []):
        for flavor in group["flavors"]:
            if flavor["name"] in owners:
                problems.append(f"the cohort pools the dedicated flavor {flavor['name']}")
            for name, resource in quota(flavor).items():
                totals[flavor["name"], name] = totals.get((flavor["name"], name), 0) + amount(resource["nominalQuota"])
    for team in model.teams:
        queue = queues[team.name]
        if queue["spec"]["cohortName"] != cohort["metadata"]["name"]:
            problems.append(f"{team.name} is not in the cohort")
        (group,) = queue["spec"]["resourceGroups"]
        for flavor in group["flavors"]:
            name, resources = flavor["name"], quota(flavor)
            if name in owners and owners[name] != team.name:
                problems.append(f"{team.name} has {name}, dedicated to {owners[name]}")
            for resource, entry in resources.items():
                totals[name, resource] = totals.get((name, resource), 0) + amount(entry["nominalQuota"])
                if name in owners and amount(entry.get("lendingLimit", -1)) != 0:
                    problems.append(f"{team.name} lends its dedicated {name} {resource}")
            gpus = resources[kueue.GPU_RESOURCE]
            if capacity[name][kueue.GPU_RESOURCE] and gpus["nominalQuota"] != team.guaranteed[name]:
                problems.append(f"{team.name}'s {name} GPUs are not its guarantee")
            if name in owners:
                continue
            reach = team.burst(name) - team.guaranteed.get(name, 0) if capacity[name][kueue.GPU_RESOURCE] else None
            if reach is not None and team.borrow_limit is not None and gpus.get("borrowingLimit") != reach:
                problems.append(f"{team.name} may borrow {gpus.get('borrowingLimit')} {name} GPUs, not {reach}")
            if team.borrow_limit is None and "borrowingLimit" in gpus:
                problems.append(f"{team.name}'s borrowing in {name} is limited")
            if capacity[name][kueue.GPU_RESOURCE] and gpus.get("lendingLimit", gpus["nominalQuota"]) != \
                    team.lendable(name):
                problems.append(f"{team.name} lends other than {team.lendable(name)} {name} GPUs")
            problems += limit_problems(team.name, name, capacity[name], resources)
    for (flavor, resource), total in sorted(totals.items()):
        if total != capacity[flavor][resource]:
            problems.append(f"{flavor} {resource}: {total} across the cohort, "
                            f"the flavor has {capacity[flavor][resource]}")
    for flavor in capacity:
        if (flavor, kueue.GPU_RESOURCE) not in totals:
            problems.append(f"{flavor} is in no queue")
    return problems


def limit_problems(team: str, flavor: str, capacity: dict, resources: dict) -> list[str]:
    """Where a team's borrowingLimit or lendingLimit of a resource other than GPUs in a GPU flavor
    is not the GPUs' fraction of the flavor (within rounding), or is missing while the GPUs' is set."""
    problems = []
    gpus = capacity[kueue.GPU_RESOURCE]
    if not gpus:
        return problems
    for field in ("borrowingLimit", "lendingLimit"):
        gpu_limit = resources[kueue.GPU_RESOURCE].get(field)
        for resource, entry in resources.items():
            if resource == kueue.GPU_RESOURCE:
                continue
            if (gpu_limit is None) != (field not in entry):
                problems.append(f"{team}'s {field} of {flavor} {resource}: {entry.get(field)}, "
                                f"of its GPUs: {gpu_limit}")
            elif gpu_limit is not None and abs(amount(entry[field]) * gpus - gpu_limit * capacity[resource]) >= gpus:
                problems.append(f"{team}'s {field} of {flavor} {resource}: {entry[field]}, not "
                                f"{gpu_limit}/{gpus} of {capacity[resource]}")
    return problems


# --- the objects -------------------------------------------------------------------------------------

def test_the_teams_objects_match_kueues_crds_and_webhooks(model):
    documents = kueue.kueue_manifests(model)
    assert [d["kind"] for d in documents] == [  # the GPU groups' network Topology first
        "Topology", "ResourceFlavor", "ResourceFlavor", "ResourceFlavor", *["WorkloadPriorityClass"] * 3, "Cohort",
        *["ClusterQueue", "LocalQueue"] * 3]
    for document in documents:
        validate(document)
    assert webhook_problems(documents) == []
    assert quota_problems(model, documents) == []


@pytest.mark.parametrize("example", [e for e in KUBERNETES_EXAMPLES
                                     if resolve(loader.load(ROOT / e).spec).teams])
def test_the_examples_teams_keep_their_promises(example):
    model = resolve(loader.load(ROOT / example).spec)
    documents = kueue.kueue_manifests(model)
    assert webhook_problems(documents) == []
    assert quota_problems(model, documents) == []


def test_a_team_queue_takes_its_guarantee_and_limits(model):
    queues = kinds(kueue.kueue_manifests(model), "ClusterQueue")
    flavors = {name: {f["name"]: quota(f) for f in q["spec"]["resourceGroups"][0]["flavors"]}
               for name, q in queues.items()}
    assert {name: list(f) for name, f in flavors.items()} == {
        "pretrain": ["cpu", "p5en"], "vision": ["cpu", "p5en", "p5"], "research": ["cpu", "p5en"]}
    pretrain = flavors["pretrain"]["p5en"]
    # half of the group's GPUs: half its CPUs, memory and EFA interfaces
    assert {r: e["nominalQuota"] for r, e in pretrain.items()} == {
        "cpu": 384, "memory": "4096Gi", "nvidia.com/gpu": 16, "vpc.amazonaws.com/efa": 32}
    assert pretrain["nvidia.com/gpu"] == {"name": "nvidia.com/gpu", "nominalQuota": 16, "borrowingLimit": 0,
                                          "lendingLimit": 8}
    assert flavors["vision"]["p5en"]["nvidia.com/gpu"] == {"name": "nvidia.com/gpu", "nominalQuota": 8,
                                                           "borrowingLimit": 8}
    assert flavors["research"]["p5en"]["nvidia.com/gpu"] == {"name": "nvidia.com/gpu", "nominalQuota": 0}
    assert all(e["lendingLimit"] in (0, "0Gi") and e["nominalQuota"] for e in flavors["vision"]["p5"].values())
    assert all(e["nominalQuota"] in (0, "0Gi") for q in flavors.values() for e in q["cpu"].values())
    # the rest is the cohort's: the CPU group whole, the GPUs nobody is guaranteed
    cohort = kinds(kueue.kueue_manifests(model), "Cohort")["test-cluster"]
    pool = {f["name"]: {r: e["nominalQuota"] for r, e in quota(f).items()}
            for f in cohort["spec"]["resourceGroups"][0]["flavors"]}
    assert pool == {"cpu": {"cpu": 32, "memory": "128Gi", "nvidia.com/gpu": 0, "vpc.amazonaws.com/efa": 0},
                    "p5en": {"cpu": 192, "memory": "2048Gi", "nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 16}}
    assert "parentName" not in cohort["spec"]  # a root: limits there would be refused


def test_preemption_within_and_across_teams_with_fair_sharing(model):
    for queue in kinds(kueue.kueue_manifests(model), "ClusterQueue").values():
        # borrowWithinCohort is Kueue's classical preemption only: with fair sharing it is never read
        assert queue["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    assert kueue.kueue_configuration(model)["fairSharing"] == {
        "preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}


def test_each_team_queue_admits_only_its_namespace(model):
    documents = kueue.kueue_manifests(model)
    queues, locals_ = kinds(documents, "ClusterQueue"), [d for d in documents if d["kind"] == "LocalQueue"]
    for team, local in zip(model.teams, locals_, strict=True):
        namespace, name, cluster_queue = kueue.team_queue(team)
        assert local["metadata"] == {"name": "default", "namespace": team.name} and name == "default"
        assert local["spec"] == {"clusterQueue": cluster_queue} and cluster_queue == namespace == team.name
        assert queues[team.name]["spec"]["namespaceSelector"] == {
            "matchLabels": {"kubernetes.io/metadata.name": team.name}}


def test_the_priority_classes_are_the_teams_facts(model):
    classes = kinds(kueue.kueue_manifests(model), "WorkloadPriorityClass")
    assert {name: c["value"] for name, c in classes.items()} == {"high": 1000, "normal": 100, "low": 10}
    assert [c.name for c in team_facts.PRIORITY_CLASSES] == list(classes)
    assert all(c["metadata"] == {"name": c["metadata"]["name"]} for c in classes.values())  # cluster-scoped


def test_the_cohort_and_priority_class_schemas_refuse_broken_objects(model):
    documents = kueue.kueue_manifests(model)
    import jsonschema
    for kind, break_it in (("WorkloadPriorityClass", lambda d: d.__setitem__("value", "high")),
                           ("WorkloadPriorityClass", lambda d: d.pop("value")),
                           ("Cohort", lambda d: d["spec"].__setitem__("parentName", "Not_A_Name")),
                           ("ClusterQueue", lambda d: d["spec"]["preemption"].__setitem__("reclaimWithinCohort",
                                                                                         "Always"))):
        broken = copy.deepcopy(next(d for d in documents if d["kind"] == kind))
        break_it(broken)
        with pytest.raises(jsonschema.ValidationError):
            validate(broken)


@pytest.mark.parametrize("break_it, problem", [
    (lambda d: kinds(d, "ClusterQueue")["vision"]["spec"]["resourceGroups"][0]["flavors"][1]["resources"][2]
     .__setitem__("nominalQuota", 16), "p5en nvidia.com/gpu: 40 across the cohort"),
    (lambda d: kinds(d, "Cohort")["test-cluster"]["spec"]["resourceGroups"][0]["flavors"].pop(),
     "p5en cpu: 576 across the cohort"),
    (lambda d: kinds(d, "ClusterQueue")["research"]["spec"]["resourceGroups"][0]["flavors"].append(
        copy.deepcopy(kinds(d, "ClusterQueue")["vision"]["spec"]["resourceGroups"][0]["flavors"][2])),
     "research has p5, dedicated to vision"),
    (lambda d: kinds(d, "ClusterQueue")["vision"]["spec"]["resourceGroups"][0]["flavors"][2]["resources"][2]
     .pop("lendingLimit"), "vision lends its dedicated p5 nvidia.com/gpu"),
    (lambda d: kinds(d, "ClusterQueue")["pretrain"]["spec"]["resourceGroups"][0]["flavors"][1]["resources"][2]
     .pop("borrowingLimit"), "pretrain may borrow None p5en GPUs, not 0"),
    (lambda d: kinds(d, "ClusterQueue")["pretrain"]["spec"]["resourceGroups"][0]["flavors"][1]["resources"][2]
     .pop("lendingLimit"), "pretrain lends other than 8 p5en GPUs"),
    (lambda d: kinds(d, "ClusterQueue")["pretrain"]["spec"]["resourceGroups"][0]["flavors"][1]["resources"][0]
     .pop("lendingLimit"), "pretrain's lendingLimit of p5en cpu: None, of its GPUs: 8"),
    (lambda d: kinds(d, "ClusterQueue")["vision"]["spec"]["resourceGroups"][0]["flavors"][1]["resources"][1]
     .__setitem__("borrowingLimit", "4096Gi"), "vision's borrowingLimit of p5en memory: 4096Gi, not 8/32"),
])
def test_the_quota_check_catches_broken_quotas(model, break_it, problem):
    documents = kueue.kueue_manifests(model)
    break_it(documents)
    assert any(p.startswith(problem) for p in quota_problems(model, documents)), quota_problems(model, documents)


@pytest.mark.parametrize("break_it, problem", [
    (lambda d: kinds(d, "ClusterQueue")["pretrain"]["spec"].pop("cohortName"), "outside a cohort"),
    (lambda d: kinds(d, "ClusterQueue")["pretrain"]["spec"]["resourceGroups"][0]["flavors"][1]["resources"][2]
     .__setitem__("lendingLimit", 17), "lendingLimit above nominalQuota"),
    (lambda d: kinds(d, "ClusterQueue")["pretrain"]["spec"]["resourceGroups"][0]["flavors"][1]["resources"]
     .reverse(), "resources not as covered"),
    (lambda d: kinds(d, "ClusterQueue")["pretrain"]["spec"].__setitem__(
        "preemption", {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}),
     "reclaimWithinCohort=Never"),
])
def test_the_webhook_check_catches_what_kueue_refuses(model, break_it, problem):
    documents = kueue.kueue_manifests(model)
    break_it(documents)
    assert any(problem in p for p in webhook_problems(documents))


def test_the_limits_cover_every_resource_of_a_gpu_flavor(tmp_path):
    """The GB200 example with a team that lends 4 and borrows 8 GPUs of its 36: of the flavor's
    CPU, memory, EFA interfaces and IMEX channels, the same fraction (rounded as the nominal quota
    is), the lendingLimit never above the nominal quota."""
    data = yaml.safe_load((ROOT / "examples/p6e-gb200-eks.yaml").read_text())
    data["teams"] = [{"name": "pretrain", "members": [ROLE], "gpus": {"gb200": 36}, "lend": 4, "borrow": 8},
                     {"name": "research", "groups": ["ml-research"], "gpus": {"gb200": 9}, "lend": False}]
    path = tmp_path / "gb200.yaml"
    path.write_text(yaml.safe_dump(data))
    model = resolve(loader.load(path).spec)
    documents = kueue.kueue_manifests(model)
    for document in documents:
        validate(document)
    assert webhook_problems(documents) == [] and quota_problems(model, documents) == []
    (flavor,) = [f for f in kinds(documents, "ClusterQueue")["pretrain"]["spec"]["resourceGroups"][0]["flavors"]]
    resources = quota(flavor)
    assert set(resources) == {"cpu", "memory", "nvidia.com/gpu", "vpc.amazonaws.com/efa", kueue.IMEX_CHANNEL_RESOURCE}
    assert resources["nvidia.com/gpu"] == {"name": "nvidia.com/gpu", "nominalQuota": 36, "borrowingLimit": 8,
                                           "lendingLimit": 4}
    # 18 nodes, one IMEX channel each: half of them guaranteed, 1 (4 GPUs' worth) lent, 2 borrowed
    assert resources[kueue.IMEX_CHANNEL_RESOURCE] == {"name": kueue.IMEX_CHANNEL_RESOURCE, "nominalQuota": 9,
                                                      "borrowingLimit": 2, "lendingLimit": 1}
    for entry in resources.values():
        assert 0 < amount(entry["lendingLimit"]) <= amount(entry["nominalQuota"])
        assert amount(entry["borrowingLimit"]) > 0
    research = quota(kinds(documents, "ClusterQueue")["research"]["spec"]["resourceGroups"][0]["flavors"][0])
    assert all(amount(entry["lendingLimit"]) == 0 and "borrowingLimit" not in entry for entry in research.values())


def test_a_cluster_of_dedicated_groups_only_has_an_empty_pool():
    model = resolve(teams_spec([{"name": "vision", "groups": ["v"]}], node_groups=[
        {"name": "p5", "instance_type": "p5.48xlarge", "count": 2, "team": "vision"}]))
    documents = kueue.kueue_manifests(model)
    assert kinds(documents, "Cohort")["test-cluster"]["spec"] == {}
    for document in documents:
        validate(document)
    assert webhook_problems(documents) == [] and quota_problems(model, documents) == []


# --- namespaces, access, the Lustre claim ------------------------------------------------------------

def test_each_team_has_a_namespace_bound_to_edit_for_its_groups(model):
    documents = charts.team_namespaces(model)
    version = f"{model.spec.orchestrator.version}.0"
    for document in documents:
        kubernetes_validate.validate(document, version, strict=True)
    namespaces = kinds(documents, "Namespace")
    assert list(namespaces) == ["pretrain", "vision", "research"]
    assert namespaces["vision"]["metadata"]["labels"] == {"fmcluster.dev/team": "vision"}
    bindings = {d["metadata"]["namespace"]: d for d in documents if d["kind"] == "RoleBinding"}
    assert {ns: [s["name"] for s in b["subjects"]] for ns, b in bindings.items()} == {
        "pretrain": ["fmcluster:team:pretrain"], "vision": ["vision-team", "fmcluster:team:vision"],
        "research": ["ml-research"]}
    assert all(b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"}
               for b in bindings.values())
    (role,) = kinds(documents, "ClusterRole").values()
    assert role["metadata"]["labels"] == {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}
    granted = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               if "create" in rule["verbs"]}
    assert {("kubeflow.org", "mpijobs"), ("kubeflow.org", "pytorchjobs"),
            ("leaderworkerset.x-k8s.io", "leaderworkersets"), ("resource.nvidia.com", "computedomains")} == granted


GPU = {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
PODS = [  # (what, the Pod, admitted)
    ("a bare Pod asking for GPUs", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}, GPU]}}, False),
    ("an init container requesting one", {"metadata": {"name": "p", "labels": {"app": "x"}}, "spec": {
        "containers": [{"name": "a"}], "initContainers": [{"name": "i", "resources": {
            "requests": {"nvidia.com/gpu": "1"}}}]}}, False),
    ("a Pod in the team's queue", {"metadata": {"name": "p", "labels": {kueue.QUEUE_NAME_LABEL: "default"}},
                                   "spec": {"containers": [GPU]}}, True),
    ("a Job's Pod", {"metadata": {"name": "p", "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                                                    "name": "j", "uid": "u"}]},
                     "spec": {"containers": [GPU]}}, True),
    ("a Pod without GPUs", {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "a", "resources": {"limits": {"cpu": "1"}}}]}}, True),
]


def test_a_bare_gpu_pod_in_a_team_namespace_is_refused(model):
    """The admission policy covers the Pods created in the namespaces labelled as a team's (and
    only those), denies what its rule refuses, and its Binding enforces it."""
    documents = charts.team_namespaces(model)
    (policy,) = kinds(documents, "ValidatingAdmissionPolicy").values()
    (binding,) = kinds(documents, "ValidatingAdmissionPolicyBinding").values()
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    match = policy["spec"]["matchConstraints"]
    assert match["resourceRules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                       "resources": ["pods"]}]
    (selector,) = match["namespaceSelector"]["matchExpressions"]
    for namespace in kinds(documents, "Namespace").values():
        assert selector["key"] in namespace["metadata"]["labels"] and selector["operator"] == "Exists"
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert [v["expression"] for v in policy["spec"]["validations"]] == [kueue.GPU_POD_RULE]
    # every Kubernetes version fmcluster offers has the v1 API (GA at 1.30)
    for version in controlplanes.get("eks").versions:
        assert tuple(map(int, version.split("."))) >= (1, 30)


@pytest.mark.parametrize("what, pod, admitted", PODS, ids=[p[0] for p in PODS])
def test_the_policy_rule_refuses_bare_gpu_pods(what, pod, admitted):
    """The rule, evaluated by a CEL implementation (cel-python, a test dependency)."""
    import celpy  # only these tests need it

    environment = celpy.Environment()
    program = environment.program(environment.compile(kueue.GPU_POD_RULE))
    assert bool(program.evaluate({"object": celpy.json_to_cel(pod)})) is admitted, what


def test_the_team_namespaces_come_before_every_other_manifest(model):
    rows = [row.construct_id for row in charts.installs(model)]
    manifests = [row.construct_id for row in charts.installs(model) if isinstance(row, charts.Manifests)]
    assert manifests[0] == charts.TEAM_NAMESPACES and rows.index(charts.TEAM_NAMESPACES) < rows.index("KueueQueues")
    plain = resolve(validated(with_(with_(base_spec(), "orchestrator.type", "eks"),
                                    "network.extra_availability_zone_ids", ["use1-az1"])))
    assert charts.TEAM_NAMESPACES not in [row.construct_id for row in charts.installs(plain)]


def test_every_team_namespace_has_its_lustre_claim(model):
    file_system = kubernetes.FileSystem("fs-0123456789abcdef0", "fs.example", "abcdefgh")
    documents = charts.lustre_volume(model, file_system)
    claims = {d["metadata"]["namespace"]: d for d in documents if d["kind"] == "PersistentVolumeClaim"}
    volumes = {d["metadata"]["name"]: d for d in documents if d["kind"] == "PersistentVolume"}
    assert list(claims) == [model.spec.orchestrator.namespace, "pretrain", "vision", "research"]
    assert sorted(c["spec"]["volumeName"] for c in claims.values()) == sorted(volumes)  # one volume a claim
    assert {v["spec"]["csi"]["volumeHandle"] for v in volumes.values()} == {"fs-0123456789abcdef0"}
    assert all(c["metadata"]["name"] == kubernetes.LUSTRE_CLAIM for c in claims.values())
    for document in documents:
        kubernetes_validate.validate(document, f"{model.spec.orchestrator.version}.0", strict=True)


def test_hyperpod_eks_gets_the_same_team_objects():
    model = resolve(teams_spec(TEAMS, control_plane="hyperpod-eks"))
    assert charts.TEAM_NAMESPACES in [row.construct_id for row in charts.installs(model)]
    documents = kueue.kueue_manifests(model)
    assert webhook_problems(documents) == [] and quota_problems(model, documents) == []


def test_without_teams_the_one_queue_stays():
    plain = resolve(validated(with_(with_(base_spec(), "orchestrator.type", "eks"),
                                    "network.extra_availability_zone_ids", ["use1-az1"])))
    documents = kueue.kueue_manifests(plain)
    assert [d["kind"] for d in documents] == ["Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue"]
    queue = kinds(documents, "ClusterQueue")["test-cluster"]
    assert "cohortName" not in queue["spec"] and "preemption" not in queue["spec"]
    assert queue["spec"]["namespaceSelector"] == {}
    assert kueue.kueue_configuration(plain) is None
    assert kueue.job_queue(plain) == (plain.spec.orchestrator.namespace, "test-cluster", None)


def test_a_team_named_like_the_orchestrator_namespace_shares_its_objects():
    """orchestrator.namespace is made by the cluster stack with its Lustre claim: a team of that name
    gets neither a second Namespace nor a second claim (two objects of one name in two manifests)."""
    spec = teams_spec([{"name": "training", "groups": ["ml"]}])
    spec = spec.model_copy(update={"orchestrator": spec.orchestrator.model_copy(update={"namespace": "training"})})
    model = resolve(spec)
    documents = charts.team_namespaces(model)
    assert not kinds(documents, "Namespace") and kinds(documents, "RoleBinding")
    volume = charts.lustre_volume(model, kubernetes.FileSystem("fs-0123456789abcdef0", "fs.example", "abcdefgh"))
    assert [d["metadata"]["namespace"] for d in volume if d["kind"] == "PersistentVolumeClaim"] == ["training"]
