"""`fmcluster capacity find`: each GPU group's offerings against moto (STS, the AZs) and botocore's
Stubber with the service models' shapes (DescribeCapacityBlockOfferings and
SearchTrainingPlanOfferings, which moto 5.2 lacks), cheapest first, with what taking one in
another AZ moves; every error answer reported without a traceback. No test reads the clock."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from fmcluster.deploy import capacity
from fmcluster.deploy.capacity.placement import az_move
from fmcluster.spec import loader
from tests.support.capacity import (
    NOW,
    START,
    WEEK,
    Clients,
    block_offering,
    fake_credentials,  # noqa: F401  (the fixture of pytestmark)
    plan_offering,
    request,
    shown,
    spec_of,
)
from tests.support.docs import readme_output
from tests.support.moto_aws import mocked_aws
from tests.support.paths import ROOT

P5 = "examples/p5-pcs.yaml"
WINDOW = {"start": START - timedelta(days=1), "end": START + timedelta(days=17), "hours": WEEK}
ASKED = {"InstanceType": "p5.48xlarge", "InstanceCount": 16, "CapacityDurationHours": WEEK,
         "StartDateRange": START - timedelta(days=1), "EndDateRange": START + timedelta(days=17)}
THREE = [block_offering("cb-0aaaaaaaaaaaaaaa1", "use1-az6", fee="240000.00"),
         block_offering("cb-0aaaaaaaaaaaaaaa2", "use1-az4"),
         block_offering("cb-0aaaaaaaaaaaaaaa3", "use1-az4", start=START + timedelta(days=7), fee="270000.00")]

pytestmark = pytest.mark.usefixtures("fake_credentials")


def found(spec, clients, fmt="text", **fields):
    return shown(spec, request("find", P5, **{**WINDOW, **fields}), fmt, client=clients, now=NOW)


def test_offerings_cheapest_first_with_the_move_an_other_az_means(capsys):
    spec = spec_of(P5)
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": THREE}, ASKED)
        assert found(spec, clients) == 0
        clients.done()
    out, err = capsys.readouterr()
    assert err == ""
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("  cb-")]
    assert rows == ["cb-0aaaaaaaaaaaaaaa1", "cb-0aaaaaaaaaaaaaaa2", "cb-0aaaaaaaaaaaaaaa3"]
    assert "  cb-0aaaaaaaaaaaaaaa2  2026-12-03 11:30  2026-12-10 11:30  168    use1-az4   258,048.00   1,536.00" in out
    assert "use1-az6*" in out and "* use1-az6 is not the spec's AZ ID use1-az4" in " ".join(out.split())
    said = " ".join(out.split())
    for moved in ("llm-pretrain-network: the private subnet 10.0.0.0/17 of use1-az4", "the NAT gateway",
                  "llm-pretrain-storage: the FSx for Lustre file system (4800 GiB)",
                  "llm-pretrain-cluster: login nodes, node group gpu: its 16 instances",
                  "`fmcluster diff OLD NEW` shows each change", "refuses that without --allow-data-loss"):
        assert moved in said, moved
    # the cheapest in the spec's AZ, then the cheaper one elsewhere, with --move-az
    assert (f"  fmcluster capacity buy {P5} gpu cb-0aaaaaaaaaaaaaaa2 --start 2026-12-03T11:30Z --end "
            "2026-12-10T11:30Z --duration 7d --max-price 258048.00\n") in out
    assert out.endswith("--max-price 240000.00 --move-az\n")
    assert max(len(line) for line in out.splitlines() if not line.startswith("  fmcluster")) <= 100


def test_json_gives_each_offering_with_its_prices_and_move(capsys):
    spec = spec_of(P5)
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": THREE}, ASKED)
        assert found(spec, clients, "json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["window"] == {"hours": 168, "start": "2026-12-02T11:30:00Z",
                                                          "end": "2026-12-20T11:30:00Z"}
    (group,) = report["groups"]
    assert group["operation"] == "DescribeCapacityBlockOfferings" and group["needs"] == []
    first, second, _ = group["offerings"]
    assert first["move"]["availability_zone_id"] == "use1-az6" and first["move"]["data_loss"] is True
    assert [m["stack"] for m in first["move"]["replaced"] if m["data"]] == ["llm-pretrain-storage"]
    assert second == {"id": "cb-0aaaaaaaaaaaaaaa2", "kind": "capacity-block", "instance_type": "p5.48xlarge",
                      "instances": 16, "start": "2026-12-03T11:30:00Z", "end": "2026-12-10T11:30:00Z",
                      "hours": 168, "minutes": 0, "availability_zone": "us-east-1d",
                      "availability_zone_id": "use1-az4", "upfront_fee": "258048.00", "currency": "USD",
                      "hourly": "1536.00", "instance_hourly": "96.00", "usable": True, "unfit": None}


def test_markdown_tables_for_a_ticket(capsys):
    spec = spec_of(P5)
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": THREE[1:2]}, ASKED)
        assert found(spec, clients, "markdown") == 0
    out = capsys.readouterr().out
    assert out.startswith("## fmcluster capacity find: llm-pretrain in us-east-1")
    assert "| OFFERING | START | END | HOURS | AZ ID | UPFRONT USD | PER HOUR |\n|---|---|---|---|---|---|---|\n" in out
    assert "| cb-0aaaaaaaaaaaaaaa2 | 2026-12-03 11:30 | 2026-12-10 11:30 | 168 | use1-az4 | 258,048.00 |" in out


def test_no_offering_exits_1_and_says_so(capsys):
    spec = spec_of(P5)
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": []}, ASKED)
        assert found(spec, clients) == 1
    assert "no offering in this window: try other dates, or another duration" in capsys.readouterr().out


@pytest.mark.parametrize("code, said, hint", [
    ("UnauthorizedOperation", "access denied to DescribeCapacityBlockOfferings",
     "allow ec2:DescribeCapacityBlockOfferings"),
    ("RequestLimitExceeded", "was throttled (RequestLimitExceeded) after retries", "run it again in a minute"),
    ("InvalidParameterValue", "DescribeCapacityBlockOfferings failed: InvalidParameterValue: bad", None),
])
def test_an_error_answer_is_the_groups_row(code, said, hint, capsys):
    spec = spec_of(P5)
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_client_error("describe_capacity_block_offerings", code, "bad", 400, expected_params=ASKED)
        assert found(spec, clients) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert said in out and (hint is None or hint in out)


def test_credentials_that_do_not_work_stop_it_in_one_message(capsys):
    spec = spec_of(P5)
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_client_error("describe_capacity_block_offerings", "ExpiredToken", "expired", 400)
        assert found(spec, clients, "json") == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["error"].startswith("no usable AWS credentials: ExpiredToken")
    assert "AWS_PROFILE" in report["hint"]


def test_hyperpod_groups_search_training_plans(capsys):
    spec = spec_of("examples/p6-b200-hyperpod-slurm.yaml")
    assert [(g.name, g.instance_type, g.max_nodes) for g in spec.node_groups] == [
        ("train", "p6-b200.48xlarge", 16), ("eval", "p5.48xlarge", 2)]
    with mocked_aws():
        clients = Clients()
        clients.sagemaker.add_response("search_training_plan_offerings", {"TrainingPlanOfferings": [
            plan_offering()]}, {"InstanceType": "ml.p6-b200.48xlarge", "InstanceCount": 16, "DurationHours": WEEK,
                                "TargetResources": ["hyperpod-cluster"], "StartTimeAfter": START})
        clients.sagemaker.add_response("search_training_plan_offerings", {"TrainingPlanOfferings": []},
                                       {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2, "DurationHours": WEEK,
                                        "TargetResources": ["hyperpod-cluster"], "StartTimeAfter": START})
        assert shown(spec, request("find", "hp.yaml", start=START, hours=WEEK), client=clients, now=NOW) == 0
        clients.done()
    out = capsys.readouterr().out
    assert "train: 16 x p6-b200.48xlarge, training plans (SearchTrainingPlanOfferings)" in out
    assert "tpo-0123456789abcdef  2026-12-03 11:30  2026-12-10 11:30  168    use1-az4  480,000.00   2,857.14" in out
    assert "eval: 2 x p5.48xlarge, training plans" in out and "no offering in this window" in out


def test_an_ultraserver_group_is_searched_by_its_ultraservers(capsys):
    spec = spec_of("examples/p6e-gb200-pcs.yaml")
    ultra = block_offering("cb-0ccccccccccccccc1", "use1-az4", count=18, instance_type="p6e-gb200.36xlarge",
                           fee="1000000.00", UltraserverType="u-p6e-gb200x72", UltraserverCount=1)
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": [ultra]}, {
            "InstanceType": "p6e-gb200.36xlarge", "UltraserverType": "u-p6e-gb200x72", "UltraserverCount": 1,
            "CapacityDurationHours": WEEK})
        report = capacity.run(spec, request("find", "gb200.yaml", hours=WEEK), client=clients, now=NOW)
    (group,) = report.groups
    assert group.ultraserver == "u-p6e-gb200x72" and group.rows[0].offer.ultraservers == 1
    assert "use1-az4" != spec.availability_zone_id and group.rows[0].move is not None  # the block is not in dfw


def test_an_elastic_group_says_what_the_spec_needs_before_a_block(capsys):
    spec = spec_of("examples/p6-b300-pcs.yaml")
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": [
            block_offering(count=8, instance_type="p6-b300.48xlarge", az_id="use1-az4")]})
        report = capacity.run(spec, request("find", "b300.yaml", hours=WEEK, group="b300"), client=clients, now=NOW)
    (group,) = report.groups
    assert group.needs == ("node_groups[0].min_count: a Capacity Block group has a fixed size: use count",)
    out = " ".join(capacity.render(report, "text")[0].split())
    assert "before a reservation can be written into the spec: node_groups[0].min_count" in out


@pytest.mark.parametrize("fields, error", [
    ({"group": "nope"}, "the spec has no node group 'nope'; its groups: gpu"),
    ({"hours": 15 * 24}, "a Capacity Block lasts whole days up to 14 days, then whole weeks up to 182 days: 15 days is "
                         "not one; 14 days or 21 days is"),
    ({"hours": None, "end": None}, "give --duration (such as 7d) or --end"),
    ({"start": NOW - timedelta(days=1)}, "--start 2026-11-30 09:00Z is in the past"),
])
def test_what_cannot_be_searched_exits_2_with_no_call(fields, error, capsys):
    spec = spec_of(P5)
    with mocked_aws():
        clients = Clients()
        code = found(spec, clients, **fields)
        clients.done()
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.startswith(f"error: {error}")


def test_a_cpu_group_has_no_gpu_capacity_to_find(capsys):
    spec = spec_of("examples/p6-b300-pcs.yaml")
    report = capacity.run(spec, request("find", "b300.yaml", hours=WEEK, group="cpu"), client=Clients(), now=NOW)
    assert capacity.exit_code(report) == 2
    assert report.error == "node group cpu is of c7i.8xlarge, no GPU type: reserved GPU capacity is for GPU groups"


def test_a_move_to_another_az_replaces_what_the_model_places_there():
    spec = spec_of(P5)
    move = az_move(spec, "use1-az6", "gpu")
    assert move.allowed and move.data_loss
    assert [(m.stack, m.what) for m in move.moved] == [
        ("llm-pretrain-network", "the private subnet 10.0.0.0/17 of use1-az4"),
        ("llm-pretrain-network", "the public subnet 10.0.192.0/24 of use1-az4"),
        ("llm-pretrain-network", "the NAT gateway"),
        ("llm-pretrain-storage", "the FSx for Lustre file system (4800 GiB) and what it holds that is not exported "
                                 "to S3"),
        ("llm-pretrain-cluster", "login nodes"),
        ("llm-pretrain-cluster", "node group gpu: its 16 instances")]


def test_a_move_is_refused_where_the_spec_cannot_go_or_another_group_holds_a_reservation():
    spec = spec_of(P5)
    assert az_move(spec, "usw2-az1", "gpu").problems == ("usw2-az1 is no AZ ID of us-east-1",)
    held = az_move(spec, "use1-az6", "other")  # buying for another group: gpu's block stays in use1-az4
    assert held.problems == ("node group gpu draws on cr-0123456789abcdef0 in use1-az4: a reservation stays in "
                             "its AZ",)
    eks = spec_of("examples/p5en-eks.yaml")
    taken = eks.network.extra_availability_zone_ids[0]
    assert not az_move(eks, taken, eks.node_groups[0].name).allowed


def test_a_local_zone_gpu_az_keeps_the_control_plane_where_it_is():
    spec = spec_of("examples/p6e-gb200-pcs.yaml")
    assert spec.local_zone
    moved = {m.what for m in az_move(spec, "use1-az4", "gb200").moved}
    assert "the NAT gateway" not in moved and "login nodes" not in moved


def test_docs_show_real_find_output(capsys):
    """docs/commands.md's example: moto and a stubbed answer of three offerings."""
    text = (ROOT / P5).read_text()
    spec = loader.load_text(text, P5).spec
    start, end = datetime(2026, 12, 3, tzinfo=timezone.utc), datetime(2026, 12, 21, tzinfo=timezone.utc)
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": THREE},
                                 {**ASKED, "StartDateRange": start, "EndDateRange": end})
        report = capacity.run(spec, request("find", P5, start=start, end=end, hours=WEEK), client=clients, now=NOW)
    out, err = capacity.render(report, "text")
    assert err == "" and capacity.exit_code(report) == 0
    assert readme_output(f"fmcluster capacity find {P5} --start 2026-12-03 --end 2026-12-21 --duration 7d") == out
