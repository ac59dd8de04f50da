"""fmcluster diff on changes that reach the running nodes (fmcluster.deploy.node_roll): the node
groups whose nodes are drained and replaced, with their node counts, apart from in-place changes
and from changes only new nodes take. Synthesized spec pairs (the p5-pcs example and a change of
it), and small hand-made templates for the rules of each control plane."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from fmcluster.deploy import diff, node_roll
from fmcluster.node import pcs as pcs_node
from fmcluster.spec import loader
from tests.support.examples import in_process
from tests.support.paths import ROOT
from tests.support.specs import validated

BASE = ROOT / "examples/p5-pcs.yaml"
pytestmark = pytest.mark.synth


SYNTHESIZED: dict[str, dict] = {}  # a spec's resolved JSON -> its templates, for the module


def synthesize(spec) -> dict:
    """diff.run's synthesizer, each spec synthesized once."""
    key = json.dumps(spec.resolved(), sort_keys=True)
    return SYNTHESIZED[key] if key in SYNTHESIZED else SYNTHESIZED.setdefault(key, in_process(spec))


def _changed(path: str, value) -> object:
    data = copy.deepcopy(yaml.safe_load(BASE.read_text()))
    where = data
    *parents, last = path.split(".")
    for part in parents:
        where = where.setdefault(part, {})
    where[last] = value
    return validated(data)


def _outputs(report: diff.DiffReport) -> tuple[str, dict]:
    return diff.render(report)[0], json.loads(diff.render(report, "json")[0])


def test_a_health_setting_replaces_the_gpu_nodes_and_not_the_login_node():
    """health.check_minutes is in every lifecycle script of the GPU group (each carries the whole
    node program): AWS PCS drains and replaces its 16 nodes. The login node has no health check:
    its scripts and node stay."""
    old = loader.load(BASE).spec
    report = diff.run(old, _changed("health.check_minutes", 10), synthesize=synthesize)
    text, data = _outputs(report)
    assert "~ update AWS::PCS::ComputeNodeGroup NodeGroupgpuNodeGroup28EE5C77 [its nodes are replaced]" in text
    lines = text.splitlines()
    at = lines.index("nodes drained and replaced: 16 nodes in 1 node group")
    assert lines[at + 1].startswith("  gpu: 16 nodes (AWS PCS, llm-pretrain-cluster/NodeGroup-gpu "
                                    "NodeGroupgpuNodeGroup28EE5C77): its lifecycle scripts change (fmcluster configure")
    assert lines[at + 2].startswith("  (AWS PCS drains and replaces every node of the group")
    assert "login:" not in text and "new nodes only" not in text
    assert text.rstrip().endswith("ok: no stateful resource is replaced or removed") and diff.exit_code(report) == 0
    (roll,) = data["node_rolls"]
    assert {k: roll[k] for k in ("group", "plane", "effect", "min_nodes", "max_nodes", "nodes")} == {
        "group": "gpu", "plane": "pcs", "effect": "replaced", "min_nodes": 16, "max_nodes": 16, "nodes": "16 nodes"}
    changes = {c["logical_id"]: c for s in data["stacks"] for c in s["changes"]}
    assert changes["NodeGroupgpuNodeGroup28EE5C77"]["nodes"] == "replaced"
    assert changes["NodeGroupgpuNodeScriptsRead0A1C159C"]["nodes"] == ""  # the scripts' read policy: in place
    assert {"rolls", "data_loss", "fails", "verdict", "stacks"} <= set(data)  # the old keys stay


def test_more_login_nodes_change_in_place():
    """A login count is the group's scaling: an in-place update, no node replaced."""
    old = loader.load(BASE).spec
    report = diff.run(old, _changed("orchestrator.login.count", 2), synthesize=synthesize)
    text, data = _outputs(report)
    assert "  ~ update AWS::PCS::ComputeNodeGroup LoginNodeGroup889CCB54\n" in text
    assert "nodes drained and replaced" not in text and data["node_rolls"] == []
    (login,) = [c for s in data["stacks"] for c in s["changes"] if c["logical_id"] == "LoginNodeGroup889CCB54"]
    assert (login["action"], login["nodes"], login["paths"]) == ("update", "", [
        "ScalingConfiguration.MaxInstanceCount", "ScalingConfiguration.MinInstanceCount"])


def test_a_changed_boot_fragment_replaces_every_node_login_included(monkeypatch):
    """What a new fmcluster release does when a fragment that every script carries changes (here
    the scripts' header): every group's scripts change, the login node's too, and AWS PCS
    replaces all 17 nodes."""

    old = loader.load(BASE).spec
    before = synthesize(old)
    header = pcs_node.header
    monkeypatch.setattr(pcs_node, "header", lambda: header() + ": a line of the next release\n")
    after = in_process(old)
    both = iter([before, after])
    report = diff.run(old, old, synthesize=lambda spec: next(both))
    text, data = _outputs(report)
    assert "nodes drained and replaced: 17 nodes in 2 node groups" in text
    assert ("  login: 1 node (AWS PCS, llm-pretrain-cluster LoginNodeGroup889CCB54): its lifecycle scripts "
            "change") in text
    assert [(r["group"], r["effect"], r["max_nodes"]) for r in data["node_rolls"]] == [
        ("login", "replaced", 1), ("gpu", "replaced", 16)]
    # the accounting script of the login nodes is a program of its own, not the node program
    assert "fmcluster accounting" not in data["node_rolls"][0]["causes"][0]


# ---- the rules, on hand-made templates -------------------------------------------------------

def _template(data: dict, group_type: str = node_roll.PCS_GROUP, **group: object) -> dict[str, dict]:
    """A stack with a launch template of `data` and a node group that names its latest version."""
    version = {"Fn::GetAtt": ["Template", "LatestVersionNumber"]}
    if group_type == node_roll.PCS_GROUP:
        props = {"Name": "gpu", "ClusterId": "pcs_1", "InstanceConfigs": [{"InstanceType": "p5.48xlarge"}],
                 "CustomLaunchTemplate": {"TemplateId": {"Ref": "Template"}, "Version": version},
                 "ScalingConfiguration": {"MinInstanceCount": 0, "MaxInstanceCount": 8}}
    else:
        props = {"ClusterName": "c", "NodeRole": "arn:aws:iam::1:role/n", "Subnets": ["subnet-1"],
                 "Tags": {"fmcluster:node-group": "gpu"}, "LaunchTemplate": {"Id": {"Ref": "Template"},
                                                                            "Version": version},
                 "ScalingConfig": {"MinSize": 2, "MaxSize": 4, "DesiredSize": 2}}
    return {"c-cluster": {"Resources": {
        "Template": {"Type": "AWS::EC2::LaunchTemplate", "Properties": {"LaunchTemplateData": data}},
        "Group": {"Type": group_type, "Properties": {**props, **group}}}}}


def _rolls(old: dict, new: dict) -> tuple[diff.Comparison, list[node_roll.NodeRoll]]:
    r = diff.compare(old, new, "us-east-1")
    return r, r.node_rolls


def test_a_new_launch_template_version_reaches_new_pcs_nodes_only():
    """The group's own text does not change (it names LatestVersionNumber): it is shown updated,
    marked as reaching new nodes only, apart from the replaced ones."""
    r, (roll,) = _rolls(_template({"UserData": "a"}), _template({"UserData": "b"}))
    assert (roll.group, roll.effect, roll.nodes) == ("gpu", node_roll.NEW_ONLY, "0 to 8 nodes")
    assert roll.causes == ["its launch template Template gets a new version (UserData)"]
    text = diff.render_text(r, "old", "new", False)
    assert "  ~ update AWS::PCS::ComputeNodeGroup Group [new nodes only]" in text
    assert ("nodes launched from now on take the change (running nodes keep what they have): 0 to 8 nodes in 1 "
            "node group") in text
    assert "nodes drained and replaced" not in text


def test_a_new_launch_template_version_rolls_an_eks_node_group():
    r, (roll,) = _rolls(_template({"UserData": "a"}, node_roll.EKS_GROUP),
                        _template({"UserData": "b"}, node_roll.EKS_GROUP))
    assert (roll.group, roll.plane, roll.effect, roll.nodes) == ("gpu", "eks", node_roll.REPLACED, "2 to 4 nodes")
    assert "EKS rolls the managed node group" in diff.render_text(r, "old", "new", False)
    # labels and scaling change in place
    labels = _template({"UserData": "a"}, node_roll.EKS_GROUP, Labels={"team": "x"})
    assert _rolls(_template({"UserData": "a"}, node_roll.EKS_GROUP), labels)[1] == []


def test_pcs_lifecycle_scripts_replace_the_nodes_and_scaling_does_not():
    def actions(checksum: str, argument: object = "A=1") -> dict:
        return {"ScriptCachingPolicy": "CACHE_ONCE", "Stages": {"NodeBootstrapped": [
            {"Name": "fmcluster configure", "ScriptSource": {"Checksum": checksum, "ScriptLocation": "s3://b/k"},
             "Arguments": [argument]}]}}

    old = _template({}, NodeLifecycleActions=actions("a" * 64))
    r, (roll,) = _rolls(old, _template({}, NodeLifecycleActions=actions("b" * 64)))
    assert roll.effect == node_roll.REPLACED and roll.causes == ["its lifecycle scripts change (fmcluster configure)"]
    assert _rolls(old, _template({}, NodeLifecycleActions=actions("a" * 64),
                                 ScalingConfiguration={"MinInstanceCount": 0, "MaxInstanceCount": 9}))[1] == []
    # an argument that names a replaced resource (SubnetIds is create-only) is a new value at deploy
    def with_file_system(subnet: str) -> dict:
        stacks = _template({}, NodeLifecycleActions=actions("a" * 64, {"Fn::GetAtt": ["Fs", "DNSName"]}))
        stacks["c-cluster"]["Resources"]["Fs"] = {"Type": "AWS::FSx::FileSystem", "Properties": {
            "FileSystemType": "LUSTRE", "SubnetIds": [subnet]}}
        return stacks

    before, after = with_file_system("subnet-1"), with_file_system("subnet-2")
    _, (roll,) = _rolls(before, after)
    assert roll.effect == node_roll.REPLACED and "name Fs, which is replaced" in roll.causes[0]


def test_a_replaced_group_replaces_its_nodes_and_a_failing_update_nothing():
    _, (roll,) = _rolls(_template({}), _template({}, Name="gpu-2"))  # Name is create-only
    assert roll.effect == node_roll.REPLACED and roll.causes[0].startswith("the node group itself is replaced")
    r = diff.compare(_template({}), _template({}), "us-east-1")
    assert r.node_rolls == [] and all(not s.changes for s in r.stacks)


def test_hyperpod_lifecycle_scripts_reach_new_nodes_only():
    def cluster(uri: str) -> dict:
        groups = [{"InstanceGroupName": name, "InstanceCount": count, "InstanceType": "ml.p5.48xlarge",
                   "ExecutionRole": "arn:aws:iam::1:role/r",
                   "LifeCycleConfig": {"OnInitComplete": "on_init.sh", "SourceS3Uri": f"s3://b/{name}/{uri}/"}}
                  for name, count in (("login", 1), ("train", 8))]
        return {"c-cluster": {"Resources": {"Cluster": {"Type": node_roll.HYPERPOD_CLUSTER, "Properties": {
            "ClusterName": "c", "InstanceGroups": groups}}}}}

    r, rolls = _rolls(cluster("d1"), cluster("d2"))
    assert [(x.group, x.effect, x.nodes) for x in rolls] == [("login", node_roll.NEW_ONLY, "1 node"),
                                                             ("train", node_roll.NEW_ONLY, "8 nodes")]
    text = diff.render_text(r, "old", "new", False)
    assert "9 nodes in 2 node groups" in text and "until UpdateClusterSoftware re-runs them" in text
    assert "[new nodes only]" in text
