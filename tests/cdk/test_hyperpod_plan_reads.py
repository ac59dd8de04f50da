"""The one permission the end of a training plan adds to a SageMaker HyperPod Slurm cluster: its
compute nodes read their plan's end (fmcluster/node/scripts/boot/programs/capacity-end.sh:
DescribeTrainingPlan), so the execution role may describe the groups' plans and nothing else, and
the cluster waits for that permission. A cluster without training plans gets none of it."""

from __future__ import annotations

import json

import pytest

from fmcluster.spec import loader
from tests.support.hyperpod import the_role
from tests.support.specs import base_spec, to_yaml
from tests.support.stacks import cluster, load_spec, new_app, resources

pytestmark = pytest.mark.synth

PLAN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/{}"


def spec(name: str, node_groups: list[dict]):
    raw = base_spec(name=name, orchestrator={"type": "hyperpod-slurm", "login": {"count": 0}}, node_groups=node_groups)
    raw["storage"] = {}
    return load_spec(loader.load_text(to_yaml(raw), f"{name}.yaml"))


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    outdir = tmp_path_factory.mktemp("plan-reads") / "cdk.out"
    app = new_app(outdir)
    plans = [{"name": f"g{i}", "instance_type": "p5.48xlarge", "count": 2,
              "capacity": {"type": kind, "training_plan_arn": PLAN.format(plan)}}
             for i, (kind, plan) in enumerate((("capacity-block", "b"), ("reservation", "a"), ("capacity-block", "b")))]
    stacks = {"plans": cluster(app, spec("hp-plans", [*plans, {"name": "od", "instance_type": "p5.48xlarge",
                                                                "count": 1}])),
              "none": cluster(app, spec("hp-none", [{"name": "od", "instance_type": "p5.48xlarge", "count": 1}]))}
    app.synth()
    return {key: json.loads((outdir / f"{stack.stack_name}.template.json").read_text())
            for key, stack in stacks.items()}


def plan_reads(template) -> dict:
    """The execution role's policies that name DescribeTrainingPlan (the node replacer's function,
    whose own role reads the plans too, aside)."""
    role_id, _ = the_role(template)
    return {lid: p for lid, p in resources(template, "AWS::IAM::Policy").items()
            if {"Ref": role_id} in p["Roles"] and "sagemaker:DescribeTrainingPlan" in json.dumps(p["PolicyDocument"])}


def test_the_role_may_describe_the_groups_plans_and_nothing_else(templates):
    template = templates["plans"]
    (policy,) = plan_reads(template).values()
    role_id, _ = the_role(template)
    assert policy["Roles"] == [{"Ref": role_id}]
    assert policy["PolicyDocument"]["Statement"] == [{
        "Sid": "ReadTrainingPlanEnds", "Effect": "Allow", "Action": "sagemaker:DescribeTrainingPlan",
        "Resource": [PLAN.format("a"), PLAN.format("b")]}]


def test_the_cluster_waits_for_it(templates):
    template = templates["plans"]
    (policy_id,) = plan_reads(template)
    (cluster_resource,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    assert policy_id in cluster_resource.get("DependsOn", [])


def test_a_cluster_without_training_plans_gets_none(templates):
    assert plan_reads(templates["none"]) == {}
    (cluster_resource,) = [r for r in templates["none"]["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    assert "DependsOn" not in cluster_resource
