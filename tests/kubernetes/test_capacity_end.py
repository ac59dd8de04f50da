"""The end of a Capacity Block or training plan on the Kubernetes planes (fmcluster.kubernetes.capacity_end):
which groups have it handled and when their pods get the signal, the ClusterRole of the function that
does it (validated with kubernetes-validate at the cluster's Kubernetes version), the open flavors of
those groups and the taint the function writes (against Kueue's ResourceFlavor CRD and Kubernetes'
Node schema), and the function's settings, read back the way its handler reads them."""

from __future__ import annotations

import json

import jsonschema
import kubernetes_validate
import pytest

from fmcluster.facts import controlplanes
from fmcluster.facts.kubernetes import CAPACITY_END_TAINT, NODE_GROUP_LABEL
from fmcluster.kubernetes import capacity_end, kueue
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from tests.support import lambda_handlers
from tests.support.crds import crds, validate
from tests.support.paths import EXAMPLES_DIR, ROOT

HANDLER = ROOT / "fmcluster_cdk/constructs/compute/handlers/capacity_end/index.py"


def model(name: str):
    return resolve(loader.load(EXAMPLES_DIR / name).spec)


def handler_module():
    return lambda_handlers.load(HANDLER, "capacity_end_handler_settings")


@pytest.mark.parametrize("example, expected", [
    # EKS: the scaler takes the group to 0 45 minutes before the end (75: an UltraServer block), and
    # the pods get their signal end_signal_minutes (15) before that
    ("p5en-eks.yaml", [("gpu", "cr-0123456789abcdef0", "", 45, 60)]),
    ("p6e-gb200-eks.yaml", [("gb200", "cr-0f1e2d3c4b5a69788", "", 75, 90)]),
    # HyperPod EKS: SageMaker terminates a training plan's instances 30 minutes before its end; the
    # spot group has no end to handle
    ("p5-hyperpod-eks.yaml", [("train", "", "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5-pretrain",
                               controlplanes.TRAINING_PLAN_TERMINATION_MINUTES, 45)]),
    ("p5-pcs.yaml", []), ("p6-b200-hyperpod-slurm.yaml", []),  # Slurm: the nodes handle it (capacity-end.sh)
])
def test_which_groups_and_when(example, expected):
    ends = [(e.group, e.reservation_id, e.training_plan_arn, e.leave_minutes, e.signal_minutes)
            for e in capacity_end.kubernetes_ends(model(example))]
    assert ends == expected
    assert capacity_end.with_kubernetes_ends(model(example)) == bool(expected)


def test_the_signal_follows_end_signal_minutes():
    spec = loader.load(EXAMPLES_DIR / "p5en-eks.yaml").spec
    groups = [g.model_copy(update={"capacity": g.capacity.model_copy(update={"end_signal_minutes": 30})})
              if g.capacity.type == "capacity-block" else g for g in spec.node_groups]
    (end,) = capacity_end.kubernetes_ends(resolve(spec.model_copy(update={"node_groups": groups})))
    assert (end.leave_minutes, end.end_signal_minutes, end.signal_minutes) == (45, 30, 75)


@pytest.mark.parametrize("example", ["p5en-eks.yaml", "p6e-gb200-eks.yaml", "p5-hyperpod-eks.yaml"])
def test_the_cluster_role_is_least_privilege_and_valid(example):
    m = model(example)
    documents = capacity_end.rbac_manifests(m)
    for document in documents:
        kubernetes_validate.validate(document, f"{m.spec.orchestrator.version}.0", strict=True)
    role, binding = documents
    assert role["metadata"] == {"name": "fmcluster-capacity-end"}
    assert {(r["apiGroups"][0], resource, verb) for r in role["rules"] for resource in r["resources"]
            for verb in r["verbs"]} == {
        ("", "nodes", "list"), ("", "nodes", "patch"), ("", "pods", "list"), ("", "pods/eviction", "create"),
        ("kueue.x-k8s.io", "workloads", "list"), ("kueue.x-k8s.io", "workloads", "patch"),
        ("kueue.x-k8s.io", "resourceflavors", "get"), ("kueue.x-k8s.io", "resourceflavors", "patch")}
    (flavors,) = [r for r in role["rules"] if r["resources"] == ["resourceflavors"]]
    assert flavors["resourceNames"] == [e.flavor for e in capacity_end.kubernetes_ends(m)]
    assert "*" not in json.dumps(role)
    assert binding["roleRef"]["name"] == "fmcluster-capacity-end"
    assert binding["subjects"] == [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io",
                                    "name": capacity_end.KUBERNETES_GROUP}]
    assert not capacity_end.KUBERNETES_GROUP.startswith("system:")


def test_no_cluster_role_without_an_end_to_handle():
    spec = loader.load(EXAMPLES_DIR / "p5en-eks.yaml").spec
    groups = [g.model_copy(update={"capacity": g.capacity.model_copy(update={"type": "on-demand",
                                                                             "reservation_id": None})})
              for g in spec.node_groups]
    m = resolve(spec.model_copy(update={"node_groups": groups}))
    assert capacity_end.rbac_manifests(m) == [] and not capacity_end.with_kubernetes_ends(m)
    assert all("nodeTaints" not in f["spec"] for f in kueue.flavor_manifests(kueue.flavor_quotas(m)))


@pytest.mark.parametrize("example", ["p5en-eks.yaml", "p6e-gb200-eks.yaml", "p5-hyperpod-eks.yaml"])
def test_the_flavors_that_close_say_they_are_open(example):
    """A closable flavor carries `nodeTaints: []`, so that applying the manifest clears the function's
    taint (kubectl apply's three-way merge); the others carry no nodeTaints."""
    m = model(example)
    closable = {e.flavor for e in capacity_end.kubernetes_ends(m)}
    flavors = {f["metadata"]["name"]: f for f in kueue.flavor_manifests(kueue.flavor_quotas(m))}
    assert closable and closable <= set(flavors)
    for name, flavor in flavors.items():
        validate(flavor)
        assert flavor["spec"].get("nodeTaints") == ([] if name in closable else None), name


def test_the_taint_the_function_writes_is_valid_where_it_goes():
    """On a Node (Kubernetes' schema) and in a ResourceFlavor's nodeTaints (the CRD, whose rule takes
    NoSchedule); Kueue's flavor assigner weighs NoSchedule and NoExecute taints only."""
    handler = handler_module()
    (end,) = capacity_end.kubernetes_ends(model("p5en-eks.yaml"))
    settings = handler.Settings(end.group, end.flavor, NODE_GROUP_LABEL, CAPACITY_END_TAINT, end.signal_minutes)
    taint = settings.taint
    assert taint == {"key": "fmcluster.dev/capacity-end", "value": "gpu", "effect": "NoSchedule"}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {NODE_GROUP_LABEL: "gpu"}},
            "spec": {"taints": [taint]}}
    kubernetes_validate.validate(node, "1.35.0", strict=True)
    flavor = {"apiVersion": kueue.KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": "gpu"},
              "spec": {"nodeLabels": {NODE_GROUP_LABEL: "gpu"}, "nodeTaints": [taint]}}
    validate(flavor)
    schema = crds()[(kueue.KUEUE_API, "ResourceFlavor")]["schema"]
    rule = schema["properties"]["spec"]["properties"]["nodeTaints"]["x-kubernetes-validations"][0]
    assert rule["rule"] == "self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])"
    with pytest.raises(jsonschema.ValidationError):  # the schema is really applied
        validate({**flavor, "spec": {**flavor["spec"], "nodeTaints": [{"value": "gpu", "effect": "NoSchedule"}]}})


def test_the_construct_settings_are_what_the_handler_reads():
    """The stacks give KubernetesCapacityEnd handler_settings(); the construct writes them to the
    environment, and the handler reads them back (settings_of)."""
    handler = handler_module()
    for example in ("p5en-eks.yaml", "p5-hyperpod-eks.yaml"):
        (end,) = capacity_end.kubernetes_ends(model(example))
        props = capacity_end.handler_settings(end)
        env = {"GROUP": props["group"], "FLAVOR": props["flavor"], "NODE_LABEL": props["node_label"],
               "TAINT_KEY": props["taint_key"], "SIGNAL_MINUTES": str(props["signal_minutes"])}
        assert handler.settings_of(env) == handler.Settings(end.group, end.group, NODE_GROUP_LABEL,
                                                            CAPACITY_END_TAINT, end.signal_minutes)
        assert (props["reservation_id"] is None) == (props["training_plan_arn"] is not None)
        assert props["plan_instance_type"] == (None if props["reservation_id"] else "ml.p5.48xlarge")


@pytest.mark.parametrize("example, says", [
    ("p5en-eks.yaml", ("to 0 from 45 minutes before the end, and 15 minutes before that (60 minutes before the end) "
                       "the group's nodes are tainted", "EC2 terminates the instances from 30 minutes before")),
    ("p6e-gb200-eks.yaml", ("to 0 from 75 minutes before the end, and 15 minutes before that (90 minutes",
                            "EC2 terminates the instances from 60 minutes before")),
    ("p5-hyperpod-eks.yaml", ("SageMaker terminates the training plan's instances from 30 minutes before the end "
                              "of its reserved capacity; 15 minutes before that (45 minutes before the end)",
                              "fmcluster does not scale the instance group")),
])
def test_what_the_plan_says_at_the_end(example, says):
    """The plan's "at its end" of the group is this text (fmcluster.plan.capacity asks it first)."""
    from fmcluster.facts import prices
    from fmcluster.plan import capacity as plan_capacity

    m = model(example)
    text = capacity_end.at_end(m, m.node_groups[0])
    assert all(part in text for part in says), text
    # before the signal, a job whose declared run time would reach past it is held back
    assert ("a job Kueue admits there whose declared run time (label kueue.x-k8s.io/max-exec-time-seconds) "
            "would reach past that time is held back until then or an extension") in text
    assert "Kueue admits nothing more onto its flavor" in text and text.endswith(
        "fmcluster does not scale the instance group" if "hyperpod" in example else "An extension undoes it")
    assert [c.at_end for c in plan_capacity.capacities(m, {}, prices.table())][0] == text
    assert [capacity_end.at_end(m, g) for g in m.node_groups[1:]] == [None] * (len(m.node_groups) - 1)
    assert all(capacity_end.at_end(model("p5-pcs.yaml"), g) is None for g in model("p5-pcs.yaml").node_groups)
