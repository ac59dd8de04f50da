"""fmcluster.facts.nodejs: the Node.js lines the CDK app takes are the project's pin (package.json,
.nvmrc) and lines jsii's own runtime supports, read from the runtime the venv installs; and which
Node.js jsii would run, and why one cannot."""

from __future__ import annotations

import json
import re
from datetime import date
from importlib import resources

import pytest

from fmcluster.facts import nodejs
from tests.support.nodeless import stand_in_node
from tests.support.paths import ROOT


def jsii_releases() -> dict[int, tuple[date, bool]]:
    """Major -> (end of life, untested) of every Node.js release jsii's runtime lists
    (NodeRelease.ALL_RELEASES in its embedded bin__jsii-runtime.js)."""
    runtime = resources.files("jsii._embedded.jsii").joinpath("bin__jsii-runtime.js").read_text()
    found = {}
    for major, body in re.findall(r"new NodeRelease\((\d+),\{(.*?)\}\)", runtime):
        end = re.search(r'endOfLife:new Date\("(\d{4}-\d\d-\d\d)"\)', body)
        assert end, body
        found[int(major)] = (date.fromisoformat(end.group(1)), "untested:!0" in body)
    return found


def test_the_lines_are_the_project_s_pin():
    package = json.loads((ROOT / "package.json").read_text())
    engines = {int(m) for m in re.findall(r"\^(\d+)", package["engines"]["node"])}
    assert set(nodejs.SUPPORTED_MAJORS) == engines
    assert int((ROOT / ".nvmrc").read_text().strip()) == max(nodejs.SUPPORTED_MAJORS)
    assert int(package["devDependencies"]["node"].split(".")[0]) in nodejs.SUPPORTED_MAJORS
    # the CDK CLI a project of one's own gets (its GitOps pipeline) is the one this repository runs
    assert nodejs.CDK_CLI_VERSION == package["devDependencies"]["aws-cdk"]


def test_the_lines_are_ones_jsii_supports_and_outlive_the_line_it_warns_of():
    """Each line taken is one jsii's runtime lists as tested, ending later than Node 20 (whose end
    of life, 2026-04-30, jsii's banner is about); the lines not taken are older or untested."""
    releases = jsii_releases()
    assert releases[20] == (date(2026, 4, 30), False)
    for major in nodejs.SUPPORTED_MAJORS:
        end, untested = releases[major]
        assert not untested and end > releases[20][0], (major, end)
    newer = {m for m, (end, untested) in releases.items() if not untested and end > releases[20][0]}
    assert newer == set(nodejs.SUPPORTED_MAJORS)


def test_which_node_jsii_runs(tmp_path):
    assert nodejs.jsii_node({"JSII_NODE": "/opt/node/bin/node"}, str(tmp_path / "python")) == (
        "/opt/node/bin/node", "JSII_NODE=/opt/node/bin/node")
    assert nodejs.jsii_node({}, str(tmp_path / "python")) == ("node", "node on PATH")
    (tmp_path / "node").write_text("")
    assert nodejs.jsii_node({}, str(tmp_path / "python")) == (str(tmp_path / "node"), str(tmp_path / "node"))


@pytest.mark.parametrize("version, refused", [("v24.21.0", False), ("v22.3.0", False), ("v20.20.2", True),
                                              ("v18.20.4", True), ("v25.1.0", True), ("v23.11.1", True)])
def test_a_line_is_taken_or_refused_by_its_major(tmp_path, version, refused):
    node = stand_in_node(tmp_path / "bin", version) / "node"
    problem = nodejs.problem({"JSII_NODE": str(node)}, str(tmp_path / "python"))
    assert (problem is not None) == refused
    if refused:
        assert problem.startswith(f"Node.js {version} (JSII_NODE={node}) cannot run the CDK app: it runs on "
                                  "Node.js 22 or 24 (LTS)")


def test_a_program_that_is_not_node_is_not_found(tmp_path):
    (tmp_path / "empty").mkdir()
    assert nodejs.problem({"PATH": str(tmp_path / "empty")}, str(tmp_path / "python")).startswith(
        "Node.js not found (no `node` on PATH): the CDK app runs on Node.js 22 or 24 (LTS)")
    assert nodejs.problem({"JSII_NODE": "/bin/true"}, str(tmp_path / "python")).startswith(
        "Node.js not found (JSII_NODE=/bin/true does not run)")
