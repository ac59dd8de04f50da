"""`fmcluster capacity buy`: only after the offering was read again at its price and the question
answered on a terminal (or --yes within --max-price), then the reservation written into a copy of
the user's spec, every other byte kept, and the spec validated. Each refusal buys nothing: the
Stubber holds no purchase answer for it, and `done()` proves every answer queued was asked for."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from fmcluster.deploy import capacity
from fmcluster.spec import loader
from tests.support.capacity import (
    BOUGHT,
    NOW,
    PLAN_ARN,
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
from tests.support.moto_aws import mocked_aws
from tests.support.paths import ROOT

OFFER = "cb-0aaaaaaaaaaaaaaa2"
ASKED = {"InstanceType": "p5.48xlarge", "InstanceCount": 16, "CapacityDurationHours": WEEK, "StartDateRange": START}
PURCHASE = {"CapacityBlockOfferingId": OFFER, "InstancePlatform": "Linux/UNIX"}
RESERVATION = {"CapacityReservationId": BOUGHT, "InstanceType": "p5.48xlarge", "AvailabilityZoneId": "use1-az4",
               "TotalInstanceCount": 16, "State": "payment-pending", "StartDate": START, "ReservationType":
               "capacity-block"}

pytestmark = pytest.mark.usefixtures("fake_credentials")


@pytest.fixture
def spec_file(tmp_path):
    """A copy of examples/p5-pcs.yaml to buy for."""
    path = tmp_path / "cluster.yaml"
    shutil.copyfile(ROOT / "examples/p5-pcs.yaml", path)
    return path


def offered(clients: Clients, *offers, asked=ASKED) -> None:
    clients.ec2.add_response("describe_capacity_block_offerings",
                             {"CapacityBlockOfferings": list(offers) or [block_offering(OFFER)]}, asked)


def buying(path, clients, *, answer=None, fmt="text", **fields) -> int:
    """`fmcluster capacity buy PATH gpu OFFER --start ... --duration 7d ...`, answering the question
    with `answer` (None: no terminal)."""
    asked: list[str] = []

    def confirm(question: str) -> bool:
        asked.append(question)
        return bool(answer)

    spec = loader.load(path).spec
    fields = {"group": "gpu", "offering": OFFER, "start": START, "hours": WEEK, **fields}
    code = shown(spec, request("buy", str(path), **fields), fmt, client=clients, now=NOW,
                 confirm=confirm if answer is not None else None)
    buying.asked = asked
    return code


def test_asked_on_a_terminal_it_buys_writes_and_validates(spec_file, capsys):
    before = spec_file.read_text()
    with mocked_aws():
        clients = Clients()
        offered(clients)
        clients.ec2.add_response("purchase_capacity_block", {"CapacityReservation": RESERVATION}, PURCHASE)
        assert buying(spec_file, clients, answer=True) == 0
        clients.done()
    (question,) = buying.asked
    assert question == (f"Buy Capacity Block {OFFER} for node group gpu: 16 x p5.48xlarge in use1-az4, 2026-12-03 "
                        "11:30Z to 2026-12-10 11:30Z, for USD 258,048.00 up front (USD 1,536.00 an hour)? Type yes to "
                        "buy: ")
    assert spec_file.read_text() == before.replace("cr-0123456789abcdef0", BOUGHT)  # the one value, nothing else
    assert loader.load(spec_file).ok
    out, err = capsys.readouterr()
    assert err == ""
    said = " ".join(out.split())
    assert (f"bought Capacity Block {OFFER}: {BOUGHT} (payment-pending), 16 x p5.48xlarge in use1-az4, 2026-12-03 "
            "11:30Z to 2026-12-10 11:30Z, USD 258,048.00 up front") in said
    assert f"{spec_file}: written and valid (node_groups[0].capacity.reservation_id: {BOUGHT})" in said
    assert f"fmcluster preflight {spec_file}" in said and f"npx cdk deploy -c spec={spec_file} llm-pretrain-cluster" \
        in said
    assert "AWS PCS takes node group gpu while the block is scheduled or active" in said


def test_answered_no_nothing_is_bought(spec_file, capsys):
    before = spec_file.read_text()
    with mocked_aws():
        clients = Clients()
        offered(clients)
        assert buying(spec_file, clients, answer=False) == 1
        clients.done()  # no purchase was queued, none was made
    assert spec_file.read_text() == before and len(buying.asked) == 1
    assert capsys.readouterr().err == "error: not confirmed: nothing bought\n"


def test_without_a_terminal_and_without_yes_it_refuses_before_any_call(spec_file, capsys):
    with mocked_aws():
        clients = Clients()
        assert buying(spec_file, clients) == 1
        clients.done()
    assert capsys.readouterr().err == ("error: nothing bought: there is no terminal to ask on\n"
                                       "  hint: run it on a terminal to be asked, or give --yes with --max-price "
                                       "PRICE\n")


def test_yes_needs_a_max_price(spec_file, capsys):
    with mocked_aws():
        assert buying(spec_file, Clients(), yes=True) == 2
    assert capsys.readouterr().err.startswith("error: --yes buys without asking, so it needs --max-price")


def test_yes_within_the_max_price_buys_without_asking(spec_file, capsys):
    with mocked_aws():
        clients = Clients()
        offered(clients)
        clients.ec2.add_response("purchase_capacity_block", {"CapacityReservation": RESERVATION}, PURCHASE)
        assert buying(spec_file, clients, yes=True, max_price="258048", fmt="json") == 0
        clients.done()
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["bought"] == {
        "offering": OFFER, "id": BOUGHT, "state": "payment-pending", "end": "2026-12-10T11:30:00Z",
        "upfront_fee": "258048.00", "currency": "USD", "written": [f"node_groups[0].capacity.reservation_id: {BOUGHT}"]}
    assert loader.load(spec_file).spec.node_groups[0].capacity.reservation_id == BOUGHT


def test_a_price_above_the_maximum_is_refused_as_read_again(spec_file, capsys):
    """find showed 250,000; read again just before buying it costs 258,048: not bought."""
    before = spec_file.read_text()
    with mocked_aws():
        clients = Clients()
        offered(clients)
        assert buying(spec_file, clients, yes=True, max_price="250000") == 1
        clients.done()
    assert spec_file.read_text() == before
    assert capsys.readouterr().err == (f"error: {OFFER} costs USD 258,048.00 up front, above --max-price 250,000.00: "
                                       "nothing bought\n  hint: raise --max-price, or choose another offering\n")


def test_an_offering_no_longer_offered_is_not_bought(spec_file, capsys):
    with mocked_aws():
        clients = Clients()
        offered(clients, block_offering("cb-0aaaaaaaaaaaaaaa9"))
        assert buying(spec_file, clients, answer=True) == 1
        clients.done()
    err = capsys.readouterr().err
    assert err.startswith(f"error: {OFFER} is not offered for node group gpu in this window (any more: offerings "
                          "are first come, first served); nothing bought\n")
    assert f"fmcluster capacity find {spec_file} gpu --duration 168h" in err and buying.asked == []


@pytest.mark.parametrize("code, error, hint", [
    ("InsufficientInstanceCapacity", "PurchaseCapacityBlock: not enough capacity (InsufficientInstanceCapacity: "
                                     "gone); nothing bought", "run `fmcluster capacity find` again"),
    ("UnauthorizedOperation", "access denied to PurchaseCapacityBlock; nothing bought",
     "allow ec2:PurchaseCapacityBlock to the credentials' role or user (IAM)"),
])
def test_a_refused_purchase_writes_nothing(spec_file, code, error, hint, capsys):
    before = spec_file.read_text()
    with mocked_aws():
        clients = Clients()
        offered(clients)
        clients.ec2.add_client_error("purchase_capacity_block", code, "gone", 400, expected_params=PURCHASE)
        assert buying(spec_file, clients, yes=True, max_price=300000) == 1
        clients.done()
    assert spec_file.read_text() == before
    err = capsys.readouterr().err
    assert err.startswith(f"error: {error}\n") and hint in err


def test_access_denied_to_the_offerings_stops_before_the_question(spec_file, capsys):
    with mocked_aws():
        clients = Clients()
        clients.ec2.add_client_error("describe_capacity_block_offerings", "UnauthorizedOperation", "no", 403)
        assert buying(spec_file, clients, answer=True) == 1
        clients.done()
    assert capsys.readouterr().err == ("error: access denied to DescribeCapacityBlockOfferings\n  hint: allow "
                                       "ec2:DescribeCapacityBlockOfferings to the credentials' role or user (IAM)\n")
    assert buying.asked == []


def test_an_offering_in_another_az_needs_move_az(spec_file, capsys):
    before = spec_file.read_text()
    elsewhere = block_offering(OFFER, "use1-az6")
    with mocked_aws():
        clients = Clients()
        offered(clients, elsewhere)
        assert buying(spec_file, clients, answer=True) == 1
        clients.done()
    assert spec_file.read_text() == before
    err = capsys.readouterr().err
    assert err.startswith(f"error: {OFFER} lies in use1-az6, not in the spec's AZ ID use1-az4; nothing bought\n")
    assert "--move-az buys it and sets availability_zone_id" in err


def test_with_move_az_the_gpu_az_moves_with_the_reservation(spec_file, capsys):
    before = spec_file.read_text()
    with mocked_aws():
        clients = Clients()
        offered(clients, block_offering(OFFER, "use1-az6"))
        clients.ec2.add_response("purchase_capacity_block", {"CapacityReservation": RESERVATION}, PURCHASE)
        assert buying(spec_file, clients, answer=True, move_az=True) == 0
        clients.done()
    assert spec_file.read_text() == before.replace("cr-0123456789abcdef0", BOUGHT).replace(
        "availability_zone_id: use1-az4 ", "availability_zone_id: use1-az6 ")
    out = " ".join(capsys.readouterr().out.split())
    assert f"fmcluster diff --deployed {spec_file}: what moving the GPU AZ replaces" in out


def test_credentials_of_another_account_buy_nothing(tmp_path, capsys):
    path = tmp_path / "cluster.yaml"
    path.write_text((ROOT / "examples/p5-pcs.yaml").read_text().replace(
        "region: us-east-1 ", 'account: "210987654321"\nregion: us-east-1 '))
    with mocked_aws():
        clients = Clients()
        assert buying(path, clients, answer=True) == 1
        clients.done()
    assert capsys.readouterr().err.startswith("error: the credentials are of account 123456789012, the spec names "
                                              "210987654321: nothing bought\n")


def test_a_spec_that_would_not_validate_with_the_block_buys_nothing(tmp_path, capsys):
    """An elastic on-demand group (min_count 0, max_count 16) cannot take a Capacity Block as it is."""
    path = tmp_path / "elastic.yaml"
    path.write_text((ROOT / "examples/p5-pcs.yaml").read_text()
                    .replace("    count: 16 ", "    min_count: 0\n    max_count: 16 ")
                    .replace("      type: capacity-block ", "      type: on-demand ")
                    .replace("      reservation_id: cr-0123456789abcdef0  # the block's cr-... id: put yours\n", ""))
    with mocked_aws():
        clients = Clients()
        offered(clients)
        assert buying(path, clients, answer=True) == 1
        clients.done()
    assert capsys.readouterr().err == (
        "error: the spec would not validate with the reservation; nothing bought: node_groups[0].min_count: a "
        "Capacity Block group has a fixed size: use count\n  hint: change the spec first, then buy\n")
    assert buying.asked == []


def test_a_spec_changed_while_buying_keeps_the_users_change_and_says_the_id(spec_file, capsys):
    with mocked_aws():
        clients = Clients()
        offered(clients)
        clients.ec2.add_response("purchase_capacity_block", {"CapacityReservation": RESERVATION}, PURCHASE)

        def edit_meanwhile(question: str) -> bool:
            spec_file.write_text(spec_file.read_text() + "# edited meanwhile\n")
            return True

        spec = loader.load(spec_file).spec
        report = capacity.run(spec, request("buy", str(spec_file), group="gpu", offering=OFFER, start=START,
                                            hours=WEEK), client=clients, now=NOW, confirm=edit_meanwhile)
        clients.done()
    assert capacity.exit_code(report) == 1 and report.bought.id == BOUGHT
    assert report.error == f"bought {BOUGHT}, but {spec_file} changed while buying: not written"
    assert f"write `node_groups[0].capacity.reservation_id: {BOUGHT}`" in report.hint
    assert spec_file.read_text().endswith("# edited meanwhile\n") and "cr-0123456789abcdef0" in spec_file.read_text()


def test_standard_input_cannot_take_the_reservation(capsys):
    spec = spec_of("examples/p5-pcs.yaml")
    report = capacity.run(spec, request("buy", "-", group="gpu", offering=OFFER, hours=WEEK), client=Clients(),
                          now=NOW, confirm=lambda q: True)
    assert capacity.exit_code(report) == 2
    assert report.error == "buy writes the reservation into the spec file: give its path, not -"


def test_hyperpod_buys_a_training_plan_and_writes_its_arn(tmp_path, capsys):
    path = tmp_path / "hp.yaml"
    shutil.copyfile(ROOT / "examples/p6-b200-hyperpod-slurm.yaml", path)
    before = path.read_text()
    with mocked_aws():
        clients = Clients()
        clients.sagemaker.add_response("search_training_plan_offerings", {"TrainingPlanOfferings": [
            plan_offering("tpo-0123456789abcdef")]}, {"InstanceType": "ml.p6-b200.48xlarge", "InstanceCount": 16,
                                                      "DurationHours": WEEK, "TargetResources": ["hyperpod-cluster"],
                                                      "StartTimeAfter": START})
        clients.sagemaker.add_response("create_training_plan", {"TrainingPlanArn": PLAN_ARN}, {
            "TrainingPlanName": "b200-train-train-20261203", "TrainingPlanOfferingId": "tpo-0123456789abcdef",
            "Tags": [{"Key": "fmcluster:cluster", "Value": "b200-train"},
                     {"Key": "fmcluster:node-group", "Value": "train"}]})
        assert buying(path, clients, group="train", offering="tpo-0123456789abcdef", yes=True,
                      max_price=480000) == 0
        clients.done()
    old = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/b200-pretrain"
    line = next(x for x in before.splitlines(keepends=True) if old in x)
    assert path.read_text() == before.replace(line, line.replace(old + "  ", PLAN_ARN + " "))
    result = loader.load(path)
    assert result.ok and result.spec.node_groups[0].capacity.training_plan_arn == PLAN_ARN
    out = " ".join(capsys.readouterr().out.split())
    assert "SageMaker HyperPod launches instance group train when the plan's capacity is there" in out


def test_a_training_plan_name_taken_says_plan_name(tmp_path, capsys):
    path = tmp_path / "hp.yaml"
    shutil.copyfile(ROOT / "examples/p6-b200-hyperpod-slurm.yaml", path)
    with mocked_aws():
        clients = Clients()
        clients.sagemaker.add_response("search_training_plan_offerings", {"TrainingPlanOfferings": [
            plan_offering("tpo-0123456789abcdef")]})
        clients.sagemaker.add_client_error("create_training_plan", "ResourceInUse", "exists", 400)
        assert buying(path, clients, group="train", offering="tpo-0123456789abcdef", yes=True,
                      max_price=480000, plan_name="pretrain-dec") == 1
        clients.done()
    assert capsys.readouterr().err == ("error: CreateTrainingPlan: exists; nothing bought\n"
                                       "  hint: a training plan of that name exists: give --plan-name\n")


def test_the_file_keeps_its_permissions(spec_file):
    os.chmod(spec_file, 0o640)
    with mocked_aws():
        clients = Clients()
        offered(clients)
        clients.ec2.add_response("purchase_capacity_block", {"CapacityReservation": RESERVATION}, PURCHASE)
        assert buying(spec_file, clients, answer=True) == 0
    assert spec_file.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in spec_file.parent.iterdir()] == ["cluster.yaml"]  # no temporary file left
