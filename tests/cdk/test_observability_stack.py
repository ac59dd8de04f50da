"""The NAME-observability stack, synthesized once per module: one app with an observability
stack per control plane (every example, plus hyperpod-eks from the base spec) and a variant
with Grafana and without Lustre, on stand-ins for the network and storage stacks' outputs.
tests/cdk/test_examples_synth.py synthesizes (and cfn-lints) every example with the real stacks."""

from __future__ import annotations

import json
import types

import pytest
import yaml

from fmcluster import observability
from fmcluster.model.cluster import resolve
from fmcluster.observability import capacity as capacity_end
from fmcluster.spec import loader
from tests.support.paths import EXAMPLES_DIR
from tests.support.specs import base_spec, to_yaml

pytestmark = pytest.mark.synth

NAT = "nat-0123456789abcdef0"
FS_ID = "fs-0123456789abcdef0"
EXAMPLES = {"pcs": "p5-pcs.yaml", "hyperpod-slurm": "p6-b200-hyperpod-slurm.yaml", "eks": "p5en-eks.yaml"}


def _load(text: str, name: str):
    result = loader.load_text(text, name)
    assert result.ok, [d.format() for d in result.diagnostics]
    return result.spec


def specs() -> dict:
    out = {kind: _load((EXAMPLES_DIR / f).read_text(), f) for kind, f in EXAMPLES.items()}
    hp = base_spec(name="hp-eks", orchestrator={"type": "hyperpod-eks", "version": "1.32"},
                   network={"extra_availability_zone_ids": ["use1-az6"]},
                   observability={"prometheus": True, "alert_email": "oncall@example.com"})
    out["hyperpod-eks"] = _load(to_yaml(hp), "hp.yaml")
    grafana = base_spec(name="with-grafana", observability={"prometheus": False, "grafana": True})
    del grafana["storage"]["lustre"]
    out["grafana"] = _load(to_yaml(grafana), "grafana.yaml")
    return out


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    import aws_cdk as cdk

    from fmcluster_cdk.stacks.observability import ObservabilityStack
    from tests.support.stacks import new_app

    outdir = tmp_path_factory.mktemp("observability") / "cdk.out"
    app = new_app(outdir)
    stacks = {}
    for key, spec in specs().items():
        storage = types.SimpleNamespace(file_system_id=FS_ID if spec.storage.lustre else None)
        stacks[key] = (spec, ObservabilityStack(app, f"{spec.name}-observability", model=resolve(spec),
                                                network=types.SimpleNamespace(nat_gateway_id=NAT), storage=storage,
                                                env=cdk.Environment(region=spec.region)))
    app.synth()
    return {key: (spec, json.loads((outdir / f"{stack.stack_name}.template.json").read_text()))
            for key, (spec, stack) in stacks.items()}


CONTROL_PLANES = ["pcs", "hyperpod-slurm", "eks", "hyperpod-eks"]


def resources(template, type_):
    return {lid: r["Properties"] for lid, r in template["Resources"].items() if r["Type"] == type_}


def one(template, type_):
    (props,) = resources(template, type_).values()
    return props


def flat(value) -> str:
    return json.dumps(value)


def joined(value) -> str:
    """A string property as CloudFormation makes it: Fn::Join's parts, each Ref as `<Ref ID>`."""
    if isinstance(value, str):
        return value
    (function, (separator, parts)), = value.items()
    assert function == "Fn::Join"
    return separator.join(p if isinstance(p, str) else f"<Ref {p['Ref']}>" for p in parts)


@pytest.mark.parametrize("kind", CONTROL_PLANES)
def test_workspace_and_one_rule_namespace_per_file(synthesized, kind):
    spec, template = synthesized[kind]
    assert one(template, "AWS::APS::Workspace")["Alias"] == spec.name
    namespaces = {p["Name"]: p for p in resources(template, "AWS::APS::RuleGroupsNamespace").values()}
    files = observability.rule_files()
    assert set(namespaces) == {f"{spec.name}-{p.stem}" for p in files}
    for path in files:
        assert namespaces[f"{spec.name}-{path.stem}"]["Data"] == path.read_text()
        (workspace_id,) = resources(template, "AWS::APS::Workspace")
        assert namespaces[f"{spec.name}-{path.stem}"]["Workspace"] == {"Fn::GetAtt": [workspace_id, "Arn"]}


@pytest.mark.parametrize("kind", CONTROL_PLANES)
def test_alert_manager_routes_to_the_encrypted_topic(synthesized, kind):
    spec, template = synthesized[kind]
    (topic_id, topic), = resources(template, "AWS::SNS::Topic").items()
    (key_id,) = resources(template, "AWS::KMS::Key")
    assert topic["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    envelope = yaml.safe_load(joined(one(template, "AWS::APS::Workspace")["AlertManagerDefinition"]))
    config = yaml.safe_load(envelope["alertmanager_config"])
    assert config["route"]["receiver"] == "sns"
    assert config["route"]["group_by"] == ["cluster", "alertname", "node"]
    (receiver,) = config["receivers"]
    (sns,) = receiver["sns_configs"]
    assert receiver["name"] == "sns"
    assert sns["topic_arn"] == f"<Ref {topic_id}>" and sns["sigv4"] == {"region": spec.region}
    assert sns["attributes"] == {"severity": "{{ .CommonLabels.severity }}"}
    subscriptions = resources(template, "AWS::SNS::Subscription").values()
    email = spec.observability.alert_email
    assert [(s["Protocol"], s["Endpoint"]) for s in subscriptions] == ([("email", email)] if email else [])


@pytest.mark.parametrize("kind", CONTROL_PLANES)
def test_only_this_workspace_may_publish_alerts(synthesized, kind):
    _, template = synthesized[kind]
    (workspace_id,) = resources(template, "AWS::APS::Workspace")
    statements = one(template, "AWS::SNS::TopicPolicy")["PolicyDocument"]["Statement"]
    (aps,) = [s for s in statements if s.get("Sid") == "AlertManagerPublish"]
    assert aps["Principal"] == {"Service": "aps.amazonaws.com"}
    assert aps["Condition"]["ArnEquals"]["aws:SourceArn"] == {"Fn::GetAtt": [workspace_id, "Arn"]}


@pytest.mark.parametrize("kind", CONTROL_PLANES)
def test_cloudwatch_alarms_for_fsx_and_nat(synthesized, kind):
    spec, template = synthesized[kind]
    alarms = {p["AlarmName"]: p for p in resources(template, "AWS::CloudWatch::Alarm").values()}
    lustre = spec.storage.lustre
    free = alarms[f"fmcluster-{spec.name}-fsx-free-capacity"]
    metric = free["Metrics"][0]["MetricStat"]["Metric"]
    assert metric["MetricName"] == "FreeDataStorageCapacity"
    assert metric["Dimensions"] == [{"Name": "FileSystemId", "Value": FS_ID}]
    assert free["Threshold"] == lustre.storage_capacity_gib * 1024 ** 3 * 0.1
    throughput = alarms[f"fmcluster-{spec.name}-fsx-throughput"]
    assert throughput["Threshold"] == round(lustre.throughput_mbps * 0.9, 1)
    assert {m["MetricStat"]["Metric"]["MetricName"] for m in throughput["Metrics"] if "MetricStat" in m} == {
        "DataReadBytes", "DataWriteBytes"}
    nat = alarms[f"fmcluster-{spec.name}-nat-port-allocation"]
    assert nat["MetricName"] == "ErrorPortAllocation" and nat["Dimensions"] == [{"Name": "NatGatewayId", "Value": NAT}]
    (topic_id,) = resources(template, "AWS::SNS::Topic")
    for alarm in alarms.values():
        assert alarm["AlarmActions"] == [{"Ref": topic_id}] and alarm["OKActions"] == [{"Ref": topic_id}]
    assert one(template, "AWS::CloudWatch::Dashboard")["DashboardName"] == f"fmcluster-{spec.name}"


@pytest.mark.parametrize("kind", CONTROL_PLANES)
def test_no_grafana_unless_asked(synthesized, kind):
    spec, template = synthesized[kind]
    assert not resources(template, "AWS::Grafana::Workspace")
    # the one function: the countdown to the capacity's end, where there is reserved capacity to count
    functions = resources(template, "AWS::Lambda::Function")
    counted = capacity_end.counted(resolve(spec))
    assert [lid.startswith("CapacityCountdownHandler") for lid in functions] == ([True] if counted else [])


def test_grafana_signs_in_with_identity_center_and_queries_only_this_workspace(synthesized):
    spec, template = synthesized["grafana"]
    grafana = one(template, "AWS::Grafana::Workspace")
    assert grafana["AuthenticationProviders"] == ["AWS_SSO"] and grafana["PermissionType"] == "CUSTOMER_MANAGED"
    assert grafana["AccountAccessType"] == "CURRENT_ACCOUNT"
    (workspace_id,) = resources(template, "AWS::APS::Workspace")  # Grafana brings the workspace along
    (role,) = [r for r in resources(template, "AWS::IAM::Role").values()
               if "grafana.amazonaws.com" in flat(r["AssumeRolePolicyDocument"])]
    for policy in role["Policies"]:
        for statement in policy["PolicyDocument"]["Statement"]:
            assert all(a.startswith("aps:") and "*" not in a for a in statement["Action"]
                       if isinstance(statement["Action"], list)) or statement["Action"].startswith("aps:")
            assert statement["Resource"] == {"Fn::GetAtt": [workspace_id, "Arn"]}
    assert not role.get("ManagedPolicyArns")


def test_dashboards_provisioned_from_repository_files(synthesized):
    _, template = synthesized["grafana"]
    (provisioner,) = [r["Properties"] for r in template["Resources"].values()
                      if r["Type"] == "Custom::GrafanaProvisioner"]
    files = {p.stem: json.loads(p.read_text()) for p in observability.dashboard_files()
             if p.stem != "slurm-teams"}  # only on a Slurm cluster with teams
    assert set(files) == {"gpu-health", "efa", "node", "scheduler"}
    assert {k: json.loads(v) for k, v in provisioner["Dashboards"].items()} == files
    assert provisioner["DataSourceUid"] == "fmcluster-amp"
    assert all(d["panels"] and all(p["datasource"]["uid"] == "fmcluster-amp" for p in d["panels"])
               for d in files.values())
    (policy,) = [p for p in resources(template, "AWS::IAM::Policy").values()]
    for statement in policy["PolicyDocument"]["Statement"]:
        assert statement["Resource"] != "*"
        assert "/workspaces/" in flat(statement["Resource"])


def test_no_lustre_no_fsx_alarms(synthesized):
    spec, template = synthesized["grafana"]
    names = {p["AlarmName"] for p in resources(template, "AWS::CloudWatch::Alarm").values()}
    assert names == {f"fmcluster-{spec.name}-nat-port-allocation"}
    assert not resources(template, "AWS::SNS::Subscription")  # no alert_email


def test_gpu_dashboard_prefers_sm_active():
    text = (observability.DASHBOARDS_DIR / "gpu-health.json").read_text()
    assert "DCGM_FI_PROF_SM_ACTIVE" in text and "DCGM_FI_DEV_GPU_UTIL" not in text


# ---- Capacity Block events (issue 16) -----------------------------------------------------------

@pytest.mark.parametrize("kind", ["pcs", "eks"])
def test_capacity_block_start_and_expiration_warnings_go_to_the_alert_topic(synthesized, kind):
    spec, template = synthesized[kind]
    blocks = sorted({g.capacity.reservation_id for g in spec.node_groups if g.capacity.type == "capacity-block"})
    (rule_id, rule), = [(lid, r["Properties"]) for lid, r in template["Resources"].items()
                        if r["Type"] == "AWS::Events::Rule" and "EventPattern" in r["Properties"]]
    assert rule["EventPattern"]["source"] == ["aws.ec2"]
    assert "Capacity Block Expiration Warning" in rule["EventPattern"]["detail-type"]
    assert rule["EventPattern"]["detail"]["capacity-reservation-id"] == blocks
    (target,) = rule["Targets"]
    (topic_id,) = resources(template, "AWS::SNS::Topic")
    assert target["Arn"] == {"Ref": topic_id}
    assert "terminated from 30 minutes before its end" in target["InputTransformer"]["InputTemplate"]
    # only this rule may publish, and use the topic's key
    assert rule["Name"] == f"fmcluster-{spec.name}-capacity-blocks"
    source = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":events:", {"Ref": "AWS::Region"}, ":",
                                {"Ref": "AWS::AccountId"}, f":rule/fmcluster-{spec.name}-capacity-blocks"]]}
    topic_statements = one(template, "AWS::SNS::TopicPolicy")["PolicyDocument"]["Statement"]
    (publish,) = [s for s in topic_statements if s.get("Sid") == "EventsPublish"]
    assert publish["Principal"] == {"Service": "events.amazonaws.com"}
    assert publish["Condition"]["ArnEquals"]["aws:SourceArn"] == source
    key_statements = one(template, "AWS::KMS::Key")["KeyPolicy"]["Statement"]
    (key,) = [s for s in key_statements if s.get("Sid") == "EventsPublish"]
    assert key["Condition"]["ArnEquals"]["aws:SourceArn"] == source


def test_no_capacity_block_no_rule(synthesized):
    _, template = synthesized["grafana"]  # on-demand
    assert resources(template, "AWS::Events::Rule") == {}


# ---- the countdown to each capacity's end (issue 41) -----------------------------------------

COUNTED = ["pcs", "eks", "hyperpod-slurm"]  # a Capacity Block, a Capacity Block, a training plan


def countdown(template):
    """The countdown's function, its role's policy statements, its schedule and its alarms."""
    (function_id, function), = resources(template, "AWS::Lambda::Function").items()
    role = function["Role"]["Fn::GetAtt"][0]
    (policy,) = [p for p in resources(template, "AWS::IAM::Policy").values() if p["Roles"] == [{"Ref": role}]]
    (schedule,) = [r for r in resources(template, "AWS::Events::Rule").values() if "ScheduleExpression" in r]
    return function_id, function, policy["PolicyDocument"]["Statement"], schedule, countdown_alarms(template)


def countdown_alarms(template) -> dict:
    """The alarms on the countdown's metric, by name."""
    return {p["AlarmName"]: p for p in resources(template, "AWS::CloudWatch::Alarm").values()
            if capacity_end.METRIC in flat(p.get("Metrics"))}


def dashboard_body(template) -> dict:
    """The dashboard's JSON, each reference (an alarm's ARN, the region) as a placeholder."""
    separator, parts = one(template, "AWS::CloudWatch::Dashboard")["DashboardBody"]["Fn::Join"]
    return json.loads(separator.join(p if isinstance(p, str) else "REF" for p in parts))


@pytest.mark.parametrize("kind", COUNTED)
def test_the_countdown_reads_each_capacitys_end_and_may_do_nothing_else(synthesized, kind):
    spec, template = synthesized[kind]
    (counted,) = capacity_end.counted(resolve(spec))
    function_id, function, statements, schedule, _ = countdown(template)
    env = function["Environment"]["Variables"]
    assert (env["CLUSTER"], env["NAMESPACE"], env["METRIC"]) == (spec.name, "fmcluster", "HoursToCapacityEnd")
    group = next(g for g in spec.node_groups if g.name == counted.groups[0])
    if kind == "hyperpod-slurm":
        plan = group.capacity.training_plan_arn
        types = sorted({f"ml.{g.instance_type}" for g in spec.node_groups if g.capacity.training_plan_arn == plan})
        assert json.loads(env["CAPACITIES"]) == [{"capacity": plan.rsplit("/", 1)[1], "instance_types": types,
                                                  "training_plan": plan.rsplit("/", 1)[1]}]
        read = {"Sid": "ReadTrainingPlans", "Effect": "Allow", "Action": "sagemaker:DescribeTrainingPlan",
                "Resource": plan}
    else:
        rid = group.capacity.reservation_id
        assert json.loads(env["CAPACITIES"]) == [{"capacity": rid, "reservation_id": rid}]
        read = {"Sid": "ReadCapacityBlocks", "Effect": "Allow", "Action": "ec2:DescribeCapacityReservations",
                "Resource": "*"}
    put = {"Sid": "PutTheCountdown", "Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
           "Condition": {"StringEquals": {"cloudwatch:namespace": "fmcluster"}}}
    assert statements == [read, put]
    assert function["Runtime"] == "python3.14" and function["Timeout"] == 60 and function["MemorySize"] == 128
    assert schedule["ScheduleExpression"] == "rate(5 minutes)" and schedule["State"] == "ENABLED"
    (target,) = schedule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}


@pytest.mark.parametrize("kind", COUNTED)
def test_two_alarms_count_down_to_each_end_and_page_the_topic(synthesized, kind):
    spec, template = synthesized[kind]
    (counted,) = capacity_end.counted(resolve(spec))
    *_, alarms = countdown(template)
    day, ending = (f"fmcluster-{spec.name}-{counted.capacity}-{suffix}" for suffix in ("last-day", "ending"))
    assert set(alarms) == {day, ending}
    assert (alarms[day]["Threshold"], alarms[ending]["Threshold"]) == (24, 1.5)  # 1 h before EC2's 30 minutes
    (topic_id,) = resources(template, "AWS::SNS::Topic")
    for alarm in alarms.values():
        (metric,) = alarm["Metrics"]
        stat = metric["MetricStat"]
        assert (stat["Stat"], stat["Period"], stat["Metric"]["Namespace"]) == ("Minimum", 900, "fmcluster")
        assert stat["Metric"]["Dimensions"] == [{"Name": "Capacity", "Value": counted.capacity},
                                                {"Name": "Cluster", "Value": spec.name}]
        assert alarm["ComparisonOperator"] == "LessThanThreshold" and alarm["EvaluationPeriods"] == 1
        assert alarm["TreatMissingData"] == "missing"
        assert alarm["AlarmActions"] == [{"Ref": topic_id}] and alarm["OKActions"] == [{"Ref": topic_id}]
    assert "fmcluster capacity extend" in alarms[day]["AlarmDescription"]
    assert "terminated from 30 minutes before its end" in alarms[ending]["AlarmDescription"]


@pytest.mark.parametrize("kind", COUNTED)
def test_the_dashboard_counts_down_to_each_end(synthesized, kind):
    spec, template = synthesized[kind]
    (counted,) = capacity_end.counted(resolve(spec))
    body = dashboard_body(template)
    widgets = [w for w in body["widgets"] if w["properties"].get("title") == "Hours to capacity end"]
    assert [w["properties"]["view"] for w in widgets] == ["singleValue", "timeSeries"]
    for widget in widgets:
        (metric,) = widget["properties"]["metrics"]
        assert metric[:6] == ["fmcluster", "HoursToCapacityEnd", "Capacity", counted.capacity, "Cluster", spec.name]
        assert metric[6]["label"] == counted.label and metric[6]["stat"] == "Minimum"
    assert widgets[1]["properties"]["annotations"]["horizontal"][0]["value"] == 24
    alarms = next(w for w in body["widgets"] if w["type"] == "alarm")["properties"]["alarms"]
    assert len(alarms) == len(resources(template, "AWS::CloudWatch::Alarm"))  # the countdown's alarms among them


@pytest.mark.parametrize("kind", ["hyperpod-eks", "grafana"])
def test_no_reserved_capacity_no_countdown(synthesized, kind):
    _, template = synthesized[kind]
    assert not [lid for lid in resources(template, "AWS::Lambda::Function") if lid.startswith("CapacityCountdown")]
    assert not [r for r in resources(template, "AWS::Events::Rule").values() if "ScheduleExpression" in r]
    assert "Hours to capacity end" not in flat(one(template, "AWS::CloudWatch::Dashboard"))
    assert not countdown_alarms(template)
