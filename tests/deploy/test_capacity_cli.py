"""`fmcluster capacity` on the command line: its actions' arguments, --format before or after the
action, the question asked only on a terminal, and what the command line refuses before any call.
The clients are the tests' (moto and the Stubber), put where the credentials' session would be."""

from __future__ import annotations

import io
import json
import shutil
from datetime import timedelta

import pytest

from fmcluster.cli import main
from fmcluster.deploy.capacity import command
from tests.support.capacity import (
    BOUGHT,
    START,
    Clients,
    block_offering,
    fake_credentials,  # noqa: F401  (the fixture of pytestmark)
)
from tests.support.moto_aws import mocked_aws
from tests.support.paths import ROOT

pytestmark = pytest.mark.usefixtures("fake_credentials")
OFFER = "cb-0aaaaaaaaaaaaaaa2"
RESERVATION = {"CapacityReservationId": BOUGHT, "State": "payment-pending", "ReservationType": "capacity-block"}


@pytest.fixture
def clients(monkeypatch):
    """The tests' clients in place of the credentials' session."""
    with mocked_aws():
        made = Clients()
        monkeypatch.setattr(command, "session_clients", lambda region: made)
        yield made


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "cluster.yaml"
    shutil.copyfile(ROOT / "examples/p5-pcs.yaml", path)
    return path


class Terminal(io.StringIO):
    """Standard input that is a terminal, where `typed` is typed."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("where", ["before", "after"])
def test_find_in_json_with_format_before_or_after_the_action(where, clients, capsys):
    clients.ec2.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": [
        block_offering(OFFER, start=START + timedelta(days=30))]})
    args = ["find", "examples/p5-pcs.yaml", "gpu", "--duration", "7d"]
    argv = ["capacity", "--format", "json", *args] if where == "before" else ["capacity", *args, "--format", "json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["window"]["hours"] == 168 and report["groups"][0]["offerings"][0]["id"] == OFFER


def test_buy_asks_on_the_terminal_and_buys_on_yes(clients, spec_file, monkeypatch, capsys):
    clients.ec2.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": [block_offering(OFFER)]})
    clients.ec2.add_response("purchase_capacity_block", {"CapacityReservation": RESERVATION})
    monkeypatch.setattr("sys.stdin", Terminal("yes\n"))
    assert main(["capacity", "buy", str(spec_file), "gpu", OFFER, "--start", "2026-12-03T11:30Z",
                 "--duration", "7d"]) == 0
    clients.done()
    out, err = capsys.readouterr()
    assert err.endswith("? Type yes to buy: ")  # asked on the terminal (stderr), its answer read
    assert "USD 258,048.00 up front" in err and f"bought Capacity Block {OFFER}: {BOUGHT}" in out
    assert BOUGHT in spec_file.read_text()


def test_any_other_answer_buys_nothing(clients, spec_file, monkeypatch, capsys):
    clients.ec2.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": [block_offering(OFFER)]})
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    before = spec_file.read_text()
    assert main(["capacity", "buy", str(spec_file), "gpu", OFFER, "--start", "2026-12-03T11:30Z",
                 "--duration", "7d"]) == 1
    clients.done()
    assert spec_file.read_text() == before
    assert capsys.readouterr().err.endswith("Type yes to buy: error: not confirmed: nothing bought\n")


def test_without_a_terminal_nothing_is_asked_or_bought(clients, spec_file, capsys):
    assert main(["capacity", "buy", str(spec_file), "gpu", OFFER, "--duration", "7d"]) == 1
    clients.done()
    assert "\nerror: nothing bought: there is no terminal to ask on\n" in capsys.readouterr().err  # after the warnings


@pytest.mark.parametrize("args, said", [
    (["buy", "{spec}", "gpu", OFFER, "--duration", "7d", "--yes"], "error: --yes buys without asking, so it needs "
                                                                   "--max-price"),
    (["buy", "{spec}", "gpu", OFFER], "the following arguments are required: --duration"),
    (["find", "{spec}", "--duration", "seven days"], "expected a duration such as 7d, 2w or 168h"),
    (["find", "{spec}", "--duration", "7d", "--start", "soon"], "expected an ISO 8601 date or time"),
    (["buy", "{spec}", "gpu", OFFER, "--duration", "7d", "--yes", "--max-price", "-5"], "expected a positive "
                                                                                         "amount"),
    (["extend", "{spec}", "gpu"], "the following arguments are required: --duration"),
    (["find", "{spec}", "cpu", "--duration", "7d"], "error: the spec has no node group 'cpu'"),
])
def test_what_the_command_line_refuses(args, said, clients, spec_file, capsys):
    argv = ["capacity", *(str(spec_file) if a == "{spec}" else a for a in args)]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    assert code == 2
    clients.done()
    assert said in capsys.readouterr().err
