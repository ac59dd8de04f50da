"""The node replacer (fmcluster_cdk/constructs/compute/node_replacer.py and its handler
handlers/node_replacer): its decisions against moto (EC2 instances with their tags, SQS, SSM,
CloudWatch) and botocore's Stubber where moto lacks the calls (EC2 Capacity Reservations, SageMaker
HyperPod's ListClusterNodes, BatchReplaceClusterNodes and DescribeTrainingPlan), and what the AWS PCS
and SageMaker HyperPod Slurm stacks synthesize: the queue, the schedule and least privilege."""

from __future__ import annotations

import functools
import json
from datetime import datetime, timedelta, timezone

import boto3
import pytest
from botocore.stub import ANY, Stubber

from fmcluster_cdk.constructs.compute import node_replacer
from tests.support import lambda_handlers
from tests.support import training_plans as plans
from tests.support.clock import frozen_at
from tests.support.moto_aws import mocked_aws

handler = lambda_handlers.load(node_replacer.HANDLER / "index.py", "node_replacer_handler")

REGION = "us-east-2"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
CLUSTER = "p5-pcs"
LEDGER = node_replacer.ledger_parameter(CLUSTER)
RID = "cr-0123456789abcdef0"


def client(name: str):
    return boto3.client(name, region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")


def environment(queue_url: str, plane: str = "pcs", cluster: str = CLUSTER, **changes: str) -> dict[str, str]:
    return {"CLUSTER": cluster, "PLANE": plane, "QUEUE_URL": queue_url, "LEDGER_PARAMETER": LEDGER,
            "MAX_REPLACING": "2", "WINDOW_MINUTES": "30", "BLOCK_GUARD_MINUTES": "60", "BATCH": "50",
            "TRAINING_PLANS": "{}", **changes}


def ask(sqs, queue_url: str, instance_id: str, *, node: str = "ip-10-1-0-42", fault: str = "xid",
        cluster: str = CLUSTER, text: str = "XID 79 on GPU 3") -> None:
    sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps({
        "cluster": cluster, "node": node, "instance_id": instance_id, "fault": fault, "text": text,
        "at": "2026-12-01T11:58:00Z"}))


def waiting(sqs, queue_url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


@pytest.fixture
def aws():
    """moto's EC2, SQS, SSM and CloudWatch, the queue and the ledger made as the construct makes them."""
    with mocked_aws():
        made = {name: client(name) for name in ("sqs", "ec2", "ssm", "cloudwatch", "sagemaker")}
        queue_url = made["sqs"].create_queue(QueueName=node_replacer.queue_name(CLUSTER))["QueueUrl"]
        made["ssm"].put_parameter(Name=LEDGER, Value='{"replacing":[]}', Type="String")
        yield made, queue_url


def launch(ec2, cluster: str = CLUSTER, count: int = 1) -> list[str]:
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    found = ec2.run_instances(ImageId=image, MinCount=count, MaxCount=count, InstanceType="p5.48xlarge",
                              TagSpecifications=[{"ResourceType": "instance", "Tags": [
                                  {"Key": "fmcluster:cluster", "Value": cluster},
                                  {"Key": "fmcluster:node-group", "Value": "gpu"}]}])
    return [i["InstanceId"] for i in found["Instances"]]


def state(ec2, instance_id: str) -> str:
    return ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]["State"]["Name"]


def ledger(ssm) -> list[dict]:
    return json.loads(ssm.get_parameter(Name=LEDGER)["Parameter"]["Value"])["replacing"]


def test_a_static_pcs_node_is_kept_drained_and_never_terminated(aws):
    """AWS PCS documents no replacement of a static node's instance (a dynamic one never asks: the
    node powers it down through Slurm): the request is decided, logged and kept; nothing ends."""
    made, queue_url = aws
    [instance] = launch(made["ec2"])
    ask(made["sqs"], queue_url, instance)
    [decision] = handler.run(made, environment(queue_url), NOW)
    assert (decision["action"], decision["instance"], decision["why"]) == ("kept", instance, handler.PCS_STATIC)
    assert state(made["ec2"], instance) == "running"
    assert waiting(made["sqs"], queue_url) == 0  # decided: deleted
    assert ledger(made["ssm"]) == []
    assert made["cloudwatch"].list_metrics(Namespace="fmcluster", MetricName="NodesReplaced")["Metrics"] == []


def test_at_the_limit_a_request_waits_and_is_replaced_after_the_window():
    """The limit (the rule alone; HyperPod's replacements go through it: below)."""
    window, guard = timedelta(minutes=30), timedelta(minutes=60)
    request = handler.Request(cluster=CLUSTER, node="n", instance_id="i-3", fault="xid", text="", at="")
    started = [{"instance": i, "at": (NOW - timedelta(minutes=m)).isoformat()} for i, m in (("i-1", 20), ("i-2", 5))]
    member = (True, "the cluster's running node")
    decide = functools.partial(handler.decide, request, CLUSTER, member, None, max_replacing=2, window=window,
                               guard=guard)
    assert decide(started, NOW) == ("deferred", "2 replacements started within 30 minutes (at most 2)")
    later = NOW + timedelta(minutes=31)
    assert decide(handler.pruned(started, later, window), later) == ("replaced", member[1])


def test_the_deferral_hides_the_request_until_a_place_frees_up():
    entries = [{"instance": "i-1", "at": (NOW - timedelta(minutes=20)).isoformat()},
               {"instance": "i-2", "at": (NOW - timedelta(minutes=5)).isoformat()}]
    assert handler.defer_seconds(entries, NOW, timedelta(minutes=30)) == 10 * 60 + 1


def test_another_clusters_instance_or_request_is_refused(aws):
    made, queue_url = aws
    [theirs] = launch(made["ec2"], cluster="someone-else")
    [ours] = launch(made["ec2"])
    ask(made["sqs"], queue_url, theirs)
    ask(made["sqs"], queue_url, ours, cluster="someone-else")
    ask(made["sqs"], queue_url, "i-0fffffffffffffff0")
    made["sqs"].send_message(QueueUrl=queue_url, MessageBody="not json")
    decisions = handler.run(made, environment(queue_url), NOW)
    assert [d["action"] for d in decisions] == ["refused"] * 4
    whys = {d.get("instance", ""): d["why"] for d in decisions}
    assert whys[theirs] == "instance of cluster 'someone-else', not 'p5-pcs'"
    assert whys[ours] == "the request names cluster 'someone-else', not 'p5-pcs'"
    assert whys["i-0fffffffffffffff0"].startswith("no such instance")
    assert state(made["ec2"], theirs) == state(made["ec2"], ours) == "running"
    assert waiting(made["sqs"], queue_url) == 0 and ledger(made["ssm"]) == []


def test_several_requests_for_one_instance_make_one_decision(aws):
    made, queue_url = aws
    [instance] = launch(made["ec2"])
    for _ in range(3):
        ask(made["sqs"], queue_url, instance)
    [decision] = handler.run(made, environment(queue_url), NOW)
    assert (decision["action"], decision["requests"]) == ("kept", 3)
    assert waiting(made["sqs"], queue_url) == 0 and ledger(made["ssm"]) == []


def test_every_decision_is_one_json_line_in_the_log(aws, monkeypatch, capsys):
    made, queue_url = aws
    [instance] = launch(made["ec2"])
    ask(made["sqs"], queue_url, instance, fault="ecc", text="uncorrectable ECC errors on GPU 1")
    for key, value in environment(queue_url).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(handler, "datetime", frozen_at(NOW))  # the handler reads the clock
    result = handler.handler({"detail-type": "Scheduled Event"}, None, clients=made)
    assert result == {"decisions": 1, "kept": 1}
    [line] = capsys.readouterr().out.splitlines()
    record = json.loads(line)
    assert {k: record[k] for k in ("record", "cluster", "node", "instance", "fault", "text", "requested_at",
                                   "action")} == {
        "record": "node-replacement", "cluster": CLUSTER, "node": "ip-10-1-0-42", "instance": instance,
        "fault": "ecc", "text": "uncorrectable ECC errors on GPU 1", "requested_at": "2026-12-01T11:58:00Z",
        "action": "kept"}
    assert record["decided_at"] == "2026-12-01T12:00:00+00:00"  # the handler's clock, in UTC


# --- Capacity Blocks (EC2's answers in their model's shapes: moto has no Capacity Reservations) ----

INSTANCE = "i-0123456789abcdef0"


def in_block(stub: Stubber, end: datetime) -> None:
    stub.add_response("describe_instances", {"Reservations": [{"ReservationId": "r-1", "Instances": [{
        "InstanceId": INSTANCE, "InstanceType": "p5.48xlarge", "State": {"Code": 16, "Name": "running"},
        "CapacityReservationId": RID, "Tags": [{"Key": "fmcluster:cluster", "Value": CLUSTER}]}]}]},
        {"InstanceIds": [INSTANCE]})
    stub.add_response("describe_capacity_reservations", {"CapacityReservations": [{
        "CapacityReservationId": RID, "InstanceType": "p5.48xlarge", "State": "active",
        "ReservationType": "capacity-block", "StartDate": NOW - timedelta(days=1), "EndDate": end,
        "EndDateType": "limited", "TotalInstanceCount": 8, "AvailableInstanceCount": 0}]},
        {"CapacityReservationIds": [RID]})


@pytest.mark.parametrize("left, action", [(timedelta(minutes=50), "kept"), (timedelta(minutes=60), "kept"),
                                          (timedelta(minutes=61), "static"), (timedelta(days=2), "static")])
def test_never_in_a_capacity_blocks_last_hour(aws, left, action):
    made, queue_url = aws
    ec2 = client("ec2")
    stub = Stubber(ec2)
    in_block(stub, NOW + left)  # a Capacity Block group's nodes are static: never terminated
    ask(made["sqs"], queue_url, INSTANCE)
    with stub:
        [decision] = handler.run({**made, "ec2": ec2}, environment(queue_url), NOW)
    stub.assert_no_pending_responses()
    assert decision["action"] == "kept" and ledger(made["ssm"]) == []
    if action == "kept":
        assert decision["why"] == f"block ends at {NOW + left:%Y-%m-%d %H:%MZ}: not replaced in its last 60 minutes"
    else:
        assert decision["why"] == handler.PCS_STATIC
    assert waiting(made["sqs"], queue_url) == 0  # kept is a decision too: the node stays drained


# --- SageMaker HyperPod (its answers in the model's shapes: moto lacks these calls) -----------------

HP = "b200-train"
PLAN = "arn:aws:sagemaker:us-east-2:111122223333:training-plan/b200-plan"
B200 = "ml.p6-b200.48xlarge"  # its nodes' type, as ListClusterNodes names it


def nodes(stub: Stubber, *entries: tuple[str, str, str]) -> None:
    stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": [{
        "InstanceGroupName": group, "InstanceId": instance, "InstanceType": B200,
        "LaunchTime": NOW - timedelta(days=1), "InstanceStatus": {"Status": status},
        "PrivateDnsHostname": f"ip-10-1-0-{instance[-2:]}.us-east-2.compute.internal"}
        for group, instance, status in entries]}, {"ClusterName": HP})


def hyperpod(made, queue_url, stub_setup, **env):
    sagemaker = client("sagemaker")
    stub = Stubber(sagemaker)
    stub_setup(stub)
    with stub:
        decisions = handler.run({**made, "sagemaker": sagemaker},
                                environment(queue_url, plane="hyperpod-slurm", cluster=HP, **env), NOW)
    stub.assert_no_pending_responses()
    return decisions


def test_hyperpod_replaces_with_batch_replace_cluster_nodes(aws):
    made, queue_url = aws
    ask(made["sqs"], queue_url, "i-0aaaaaaaaaaaaaa42", cluster=HP)

    def setup(stub):
        nodes(stub, ("gpu", "i-0aaaaaaaaaaaaaa41", "Running"), ("gpu", "i-0aaaaaaaaaaaaaa42", "Running"))
        stub.add_response("batch_replace_cluster_nodes", {"Successful": ["i-0aaaaaaaaaaaaaa42"]},
                          {"ClusterName": HP, "NodeIds": ["i-0aaaaaaaaaaaaaa42"]})
    [decision] = hyperpod(made, queue_url, setup)
    assert decision["action"] == "replaced" and decision["why"] == "SageMaker BatchReplaceClusterNodes"


def test_hyperpod_finds_a_node_without_an_instance_id_by_its_host_name(aws):
    made, queue_url = aws
    ask(made["sqs"], queue_url, "", node="ip-10-1-0-42", cluster=HP)

    def setup(stub):
        nodes(stub, ("gpu", "i-0aaaaaaaaaaaaaa42", "Running"))
        stub.add_response("batch_replace_cluster_nodes", {"Successful": ["i-0aaaaaaaaaaaaaa42"]},
                          {"ClusterName": HP, "NodeIds": ["i-0aaaaaaaaaaaaaa42"]})
    [decision] = hyperpod(made, queue_url, setup)
    assert (decision["action"], decision["instance"]) == ("replaced", "i-0aaaaaaaaaaaaaa42")


@pytest.mark.parametrize("windows, action", [
    # the node's type's reserved capacity ends in 30 minutes, though the plan runs 9 days: kept
    ([(B200, -timedelta(days=1), timedelta(minutes=30)), (B200, timedelta(days=1), timedelta(days=3))], "kept"),
    # another type's capacity ends soon; the node's runs on (an extension back to back): replaced
    ([(B200, -timedelta(days=1), timedelta(minutes=30)), (B200, timedelta(minutes=30), timedelta(days=3)),
      ("ml.p5.48xlarge", -timedelta(days=1), timedelta(minutes=20))], "replaced"),
    # in a gap between two windows of its type (the node not yet gone): a new instance would not run
    ([(B200, -timedelta(days=1), -timedelta(hours=1)), (B200, timedelta(hours=2), timedelta(days=3))], "kept"),
])
def test_hyperpod_keeps_a_node_in_the_last_hour_of_its_training_plans_window(aws, windows, action):
    """The window the node's instance type runs in (training_plans.plan_window, as the nodes read it),
    not the plan's own EndTime, is what ends."""
    made, queue_url = aws
    ask(made["sqs"], queue_url, "i-0aaaaaaaaaaaaaa42", cluster=HP)

    def setup(stub):
        nodes(stub, ("gpu", "i-0aaaaaaaaaaaaaa42", "Running"))
        answer = plans.plan("Active", *(plans.reserved(start, end, kind) for kind, start, end in windows), arn=PLAN)
        stub.add_response("describe_training_plan", answer, {"TrainingPlanName": "b200-plan"})
        if action == "replaced":
            stub.add_response("batch_replace_cluster_nodes", {"Successful": ["i-0aaaaaaaaaaaaaa42"]},
                              {"ClusterName": HP, "NodeIds": ["i-0aaaaaaaaaaaaaa42"]})
    [decision] = hyperpod(made, queue_url, setup, TRAINING_PLANS=json.dumps({"gpu": PLAN}))
    assert decision["action"] == action


def test_hyperpod_refuses_a_node_it_does_not_list_and_defers_one_in_use(aws):
    made, queue_url = aws
    ask(made["sqs"], queue_url, "i-0aaaaaaaaaaaaaa99", cluster=HP)
    ask(made["sqs"], queue_url, "i-0aaaaaaaaaaaaaa42", cluster=HP)

    def setup(stub):
        nodes(stub, ("gpu", "i-0aaaaaaaaaaaaaa42", "Running"))
        stub.add_response("batch_replace_cluster_nodes", {"Failed": [{
            "NodeId": "i-0aaaaaaaaaaaaaa42", "ErrorCode": "InstanceIdInUse", "Message": "in use"}]},
            {"ClusterName": HP, "NodeIds": ANY})
    decisions = hyperpod(made, queue_url, setup)
    assert [d["action"] for d in decisions] == ["refused", "deferred"]
    assert waiting(made["sqs"], queue_url) == 1 and ledger(made["ssm"]) == []


# --- the stacks -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def templates():
    from aws_cdk.assertions import Template

    from tests.support.stacks import cluster, example_spec, new_app

    app = new_app()
    stacks = {plane: cluster(app, example_spec(file))
              for plane, file in (("pcs", "p5-pcs.yaml"), ("hyperpod-slurm", "p6-b200-hyperpod-slurm.yaml"))}
    return {plane: Template.from_stack(stack) for plane, stack in stacks.items()}


def statements(template, sid: str) -> list[dict]:
    found = [s for policy in template.find_resources("AWS::IAM::Policy").values()
             for s in policy["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid") == sid]
    assert found, sid
    return found


@pytest.mark.synth
@pytest.mark.parametrize("plane", ["pcs", "hyperpod-slurm"])
def test_the_stack_has_the_queue_the_schedule_and_a_year_of_records(templates, plane):
    template = templates[plane]
    queues = template.find_resources("AWS::SQS::Queue")
    [queue] = [q["Properties"] for q in queues.values() if q["Properties"].get("QueueName", "").endswith(
        "-node-replacements")]
    assert queue["SqsManagedSseEnabled"] is True and queue["MessageRetentionPeriod"] == 4 * 24 * 3600
    assert "RedrivePolicy" in queue
    for policy in template.find_resources("AWS::SQS::QueuePolicy").values():  # TLS only, on both queues
        [deny] = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert len(template.find_resources("AWS::SQS::QueuePolicy")) == 2
    rules = [r["Properties"] for r in template.find_resources("AWS::Events::Rule").values()
             if "node" in r["Properties"].get("Description", "")]
    assert [r["ScheduleExpression"] for r in rules] == ["rate(5 minutes)"]
    groups = [g["Properties"] for g in template.find_resources("AWS::Logs::LogGroup").values()]
    assert {"RetentionInDays": 365} in [{"RetentionInDays": g.get("RetentionInDays")} for g in groups]
    [function] = [f["Properties"] for f in template.find_resources("AWS::Lambda::Function").values()
                  if f["Properties"].get("Environment", {}).get("Variables", {}).get("LEDGER_PARAMETER")]
    variables = function["Environment"]["Variables"]
    assert (variables["PLANE"], variables["MAX_REPLACING"], variables["WINDOW_MINUTES"],
            variables["BLOCK_GUARD_MINUTES"]) == (plane, "2", "30", "60")
    # no reserved concurrency: an account whose Lambda quota is 10 refuses any (its unreserved floor);
    # runs do not overlap anyway: one every few minutes, a minute at most, never retried
    assert "ReservedConcurrentExecutions" not in function and function["Runtime"] == "python3.14"
    assert function["Timeout"] == 60


@pytest.mark.synth
def test_pcs_never_terminates_an_instance(templates):
    template = templates["pcs"]
    assert "ec2:TerminateInstances" not in json.dumps(template.find_resources("AWS::IAM::Policy"))
    [metrics] = statements(template, "CountReplacements")
    assert metrics["Condition"] == {"StringEquals": {"cloudwatch:namespace": "fmcluster"}}
    [ledger_access] = statements(template, "KeepTheLedger")
    assert "NodeReplacerLedger" in json.dumps(ledger_access["Resource"])  # that one parameter
    node_policies = [p["Properties"] for p in template.find_resources("AWS::IAM::Policy").values()
                     if any("sqs:SendMessage" in json.dumps(s.get("Action"))
                            for s in p["Properties"]["PolicyDocument"]["Statement"])]
    assert node_policies and all("NodeRole" in json.dumps(p["Roles"]) for p in node_policies)


@pytest.mark.synth
def test_hyperpod_replaces_on_its_one_cluster_only(templates):
    template = templates["hyperpod-slurm"]
    [replace] = statements(template, "ReplaceTheClustersNodes")
    assert sorted(replace["Action"]) == ["sagemaker:BatchReplaceClusterNodes", "sagemaker:ListClusterNodes"]
    assert "Fn::GetAtt" in json.dumps(replace["Resource"])  # the cluster's ARN, no wildcard
    assert not any(s.get("Sid") == "TerminateTheClustersInstances"
                   for p in template.find_resources("AWS::IAM::Policy").values()
                   for s in p["Properties"]["PolicyDocument"]["Statement"])
    senders = [p["Properties"] for p in template.find_resources("AWS::IAM::Policy").values()
               if any("sqs:SendMessage" in json.dumps(s.get("Action"))
                      for s in p["Properties"]["PolicyDocument"]["Statement"])]
    assert senders and all("ExecutionRole" in json.dumps(p["Roles"]) for p in senders)
