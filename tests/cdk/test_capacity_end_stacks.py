"""What the Kubernetes examples synthesize for the end of their Capacity Blocks and training plans
(fmcluster_cdk/constructs/compute/capacity_end.py, read from the run's corpus of cloud assemblies,
nested stacks inlined): a function per group, where it runs, what its role may do in AWS, the EKS
access entry that puts it in its Kubernetes group, the ClusterRole it gets there, and when it runs.
cdk-nag, the IAM walk and the resource-type linter see the same templates (tests/cdk/test_security.py)."""

from __future__ import annotations

import json

import pytest

from fmcluster.kubernetes import capacity_end
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from tests.support.nested import flatten
from tests.support.paths import ROOT

CASES = {"examples/p5en-eks.yaml": "NodeGroupgpuCapacityEnd",  # the group's nested stack
         "examples/p6e-gb200-eks.yaml": "NodeGroupgb200CapacityEnd",
         "examples/p5-hyperpod-eks.yaml": "CapacityEndtrain"}  # the cluster stack: no nested stacks there


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, corpus):
    spec = loader.load(ROOT / request.param).spec
    template = flatten(corpus.assembly(request.param), f"{spec.name}-cluster")
    return request.param, resolve(spec), template


def of_type(template: dict, kind: str, prefix: str = "") -> dict[str, dict]:
    return {lid: r["Properties"] for lid, r in template["Resources"].items()
            if r["Type"] == kind and lid.startswith(prefix)}


def test_one_function_per_group_whose_end_is_handled(case):
    example, model, template = case
    (end,) = capacity_end.kubernetes_ends(model)
    (lid, function), = of_type(template, "AWS::Lambda::Function", CASES[example]).items()
    assert all("CapacityEnd" not in other for other in of_type(template, "AWS::Lambda::Function") if other != lid)
    source = ({"RESERVATION": end.reservation_id} if end.reservation_id else
              {"TRAINING_PLAN": end.training_plan_arn, "PLAN_INSTANCE_TYPE": "ml.p5.48xlarge"})
    assert function["Environment"]["Variables"] == {
        "CLUSTER": {"Ref": "ClusterEB0386A7"}, "GROUP": end.group, "FLAVOR": end.group,
        "NODE_LABEL": "fmcluster.dev/node-group", "TAINT_KEY": "fmcluster.dev/capacity-end",
        "SIGNAL_MINUTES": str(end.signal_minutes), **source}
    assert (function["Runtime"], function["Timeout"], function["MemorySize"]) == ("python3.14", 120, 256)
    # in the cluster's VPC, on its subnets, in its cluster security group (the private endpoint admits it)
    (cluster,) = of_type(template, "AWS::EKS::Cluster").values()
    assert function["VpcConfig"] == {
        "SecurityGroupIds": [{"Fn::GetAtt": ["ClusterEB0386A7", "ClusterSecurityGroupId"]}],
        "SubnetIds": cluster["ResourcesVpcConfig"]["SubnetIds"]}


def test_the_role_reads_the_capacity_and_finds_the_cluster_only(case):
    example, model, template = case
    (end,) = capacity_end.kubernetes_ends(model)
    (role_id,) = of_type(template, "AWS::IAM::Role", CASES[example])
    role = template["Resources"][role_id]["Properties"]
    assert sorted(json.dumps(m) for m in role["ManagedPolicyArns"]) == sorted(json.dumps({"Fn::Join": ["", [
        "arn:", {"Ref": "AWS::Partition"}, f":iam::aws:policy/service-role/{name}"]]})
        for name in ("AWSLambdaBasicExecutionRole", "AWSLambdaVPCAccessExecutionRole"))
    (policy,) = [p for p in of_type(template, "AWS::IAM::Policy").values() if {"Ref": role_id} in p["Roles"]]
    statements = {s["Sid"]: (s["Action"], s["Resource"]) for s in policy["PolicyDocument"]["Statement"]}
    read = (("ReadCapacityBlocks", ("ec2:DescribeCapacityReservations", "*")) if end.reservation_id else
            ("ReadTheTrainingPlan", ("sagemaker:DescribeTrainingPlan", end.training_plan_arn)))
    action, cluster_arn = statements.pop("FindTheApiServer")
    assert statements == {read[0]: read[1]}
    # the cluster, in the stack's region and account (arn:aws:eks:REGION:ACCOUNT:cluster/NAME)
    parts = cluster_arn["Fn::Join"][1]
    assert action == "eks:DescribeCluster" and parts[0].startswith("arn:aws:eks:") and parts[-2:] == [
        ":cluster/", {"Ref": "ClusterEB0386A7"}]


def test_its_access_entry_puts_it_in_the_group_of_the_cluster_role(case):
    example, model, template = case
    (role_id,) = of_type(template, "AWS::IAM::Role", CASES[example])
    (entry,) = [e for e in of_type(template, "AWS::EKS::AccessEntry").values()
                if e["PrincipalArn"] == {"Fn::GetAtt": [role_id, "Arn"]}]
    entry.pop("Tags")  # the cluster's tags, as on every resource
    assert entry == {"ClusterName": {"Ref": "ClusterEB0386A7"}, "PrincipalArn": {"Fn::GetAtt": [role_id, "Arn"]},
                     "KubernetesGroups": [capacity_end.KUBERNETES_GROUP], "Type": "STANDARD"}  # no access policy
    (manifest,) = [m for lid, m in of_type(template, "Custom::AWSCDK-EKS-KubernetesResource").items()
                   if lid.startswith("ClustermanifestCapacityEndAccess")]
    applied = json.loads(manifest["Manifest"])
    for document in applied:  # aws_eks_v2's prune label, by which kubectl apply --prune finds its objects
        (label,) = document["metadata"].pop("labels")
        assert label.startswith("aws.cdk.eks/prune-")
    assert applied == capacity_end.rbac_manifests(model)


def test_it_runs_every_two_minutes_and_on_the_blocks_events(case):
    example, model, template = case
    (end,) = capacity_end.kubernetes_ends(model)
    (function_id,) = of_type(template, "AWS::Lambda::Function", CASES[example])
    rules = [r for r in of_type(template, "AWS::Events::Rule", CASES[example]).values()]
    assert all(r["Targets"][0]["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]} for r in rules)
    assert sorted(r.get("ScheduleExpression", "events") for r in rules) == (
        ["events", "rate(2 minutes)"] if end.reservation_id else ["rate(2 minutes)"])
    for rule in rules:
        if "EventPattern" in rule:
            assert rule["EventPattern"]["detail"] == {"capacity-reservation-id": [end.reservation_id]}


def test_the_scaler_still_drains_the_group_when_the_pods_have_had_their_time(case):
    """EKS: the CapacityBlockScaler goes on scaling the group to 0 drain_minutes before the end, which
    is end_signal_minutes after the signal; HyperPod EKS has no scaler."""
    example, model, template = case
    (end,) = capacity_end.kubernetes_ends(model)
    scalers = [f for lid, f in of_type(template, "AWS::Lambda::Function").items() if "CapacityBlockScaler" in lid]
    if end.training_plan_arn:
        assert scalers == []
        return
    (scaler,) = scalers
    drain = int(scaler["Environment"]["Variables"]["DRAIN_MINUTES"])
    assert drain == end.leave_minutes and end.signal_minutes - drain == end.end_signal_minutes == 15
