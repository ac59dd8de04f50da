"""The node's replacement request (fmcluster/node/scripts/boot/programs/request-replacement.sh) in the
boot-path harness: installed by NodeProgram.replacement, it sends one message to the cluster's queue
with the AWS CLI (the harness's recording `aws`), naming the node, its instance (IMDSv2, or on
SageMaker HyperPod its entry in resource_config.json) and the fault; a queue that does not take it
is tried a few times, then the program fails so that its caller asks again."""

from __future__ import annotations

import json

from fmcluster.facts.node import FMCLUSTER_LIB
from fmcluster.node import program as prog
from fmcluster.node import shell as node_shell
from tests.support import nodes
from tests.support.sandbox import Sandbox, Scenario

QUEUE = "https://sqs.us-east-2.amazonaws.com/123456789012/p5-pcs-node-replacements"


def installed(tmp_path, scenario: Scenario | None = None, plane: str = "pcs") -> Sandbox:
    node = Sandbox(tmp_path, scenario or Scenario())
    program = prog.NodeProgram(nodes.group("pcs", "p5.48xlarge")[1].instance)
    program.replacement(QUEUE, "us-east-2", "p5-pcs", plane)
    result = node.run(program.render(node_shell.header()))
    assert result.returncode == 0, result.stderr
    return node


def request(node: Sandbox, *args: str, env=None):
    return node.run(f'exec "$FMCLUSTER_ROOT{FMCLUSTER_LIB}/request-replacement" "$@"\n', *args, name="ask.sh",
                    env=env)


def sent(node: Sandbox) -> list[dict]:
    bodies = []
    for call in node.calls("aws"):
        assert call.args[:2] == ("sqs", "send-message")
        args = dict(zip(call.args[2::2], call.args[3::2], strict=True))
        assert (args["--region"], args["--queue-url"]) == ("us-east-2", QUEUE)
        bodies.append(json.loads(args["--message-body"]))
    return bodies


def test_the_request_names_the_node_its_instance_and_the_fault(tmp_path):
    node = installed(tmp_path)
    assert "PLANE=pcs" in node.file("/etc/fmcluster/request-replacement.env")
    result = request(node, "xid", "XID 79 on GPU 3: fallen off the bus")
    assert result.returncode == 0, result.stderr
    [body] = sent(node)
    assert {k: body[k] for k in ("cluster", "node", "instance_id", "fault", "text")} == {
        "cluster": "p5-pcs", "node": "ip-10-1-0-42", "instance_id": Scenario().instance_id, "fault": "xid",
        "text": "XID 79 on GPU 3: fallen off the bus"}
    assert body["at"].endswith("Z")
    token = [c.line for c in node.calls("curl")]
    assert any("-X PUT" in line and "api/token" in line for line in token)  # IMDSv2: a token first


def test_on_hyperpod_without_imds_the_instance_comes_from_resource_config(tmp_path):
    node = installed(tmp_path, Scenario(imds=False), plane="hyperpod-slurm")
    config = {"InstanceGroups": [{"Name": "gpu", "Instances": [
        {"InstanceName": "gpu-1", "CustomerIpAddress": "10.1.0.41", "InstanceId": "i-0aaaaaaaaaaaaaaa1"},
        {"InstanceName": "gpu-2", "CustomerIpAddress": "10.1.0.42", "InstanceId": "i-0bbbbbbbbbbbbbbb2"}]}]}
    (node.root / "opt/ml/config").mkdir(parents=True)
    (node.root / "opt/ml/config/resource_config.json").write_text(json.dumps(config))
    assert request(node, "efa", "30 of 32 EFA devices").returncode == 0
    assert sent(node)[0]["instance_id"] == "i-0bbbbbbbbbbbbbbb2"


def test_without_an_instance_id_the_node_name_is_enough(tmp_path):
    node = installed(tmp_path, Scenario(imds=False), plane="hyperpod-slurm")
    assert request(node, "ecc", "uncorrectable ECC errors").returncode == 0
    assert sent(node)[0]["instance_id"] == "" and sent(node)[0]["node"] == "ip-10-1-0-42"


def test_a_queue_that_does_not_answer_is_retried_then_the_program_fails(tmp_path):
    node = installed(tmp_path)
    down = node.dir / "down"
    down.mkdir()
    (down / "aws").write_text('#!/bin/bash\necho "Could not connect to the endpoint URL" >&2\nexit 255\n')
    (down / "aws").chmod(0o755)
    result = request(node, "gpu-count", "7 of 8 GPUs", env={"PATH": f"{down}:{node.bin}:/usr/bin:/bin"})
    assert result.returncode == 1 and "after 3 attempts" in result.stderr
    assert len(node.calls("sleep")) == 2


def test_a_request_without_a_fault_is_a_usage_error(tmp_path):
    node = installed(tmp_path)
    assert request(node).returncode == 2 and not node.calls("aws")


def test_a_queue_name_is_turned_into_its_url_first(tmp_path):
    """On a plane whose scripts cannot know the account (SageMaker HyperPod's lifecycle assets), the
    settings name the queue; the CLI asks SQS for its URL (the fake answers with the scenario's value)."""
    node = Sandbox(tmp_path, Scenario(ssm_value=QUEUE))
    program = prog.NodeProgram(nodes.group("pcs", "p5.48xlarge")[1].instance)
    program.replacement("p5-pcs-node-replacements", "us-east-2", "p5-pcs", "hyperpod-slurm")
    assert node.run(program.render(node_shell.header())).returncode == 0
    assert request(node, "nvlink", "NVLink 4 of GPU 2 down").returncode == 0
    first, second = node.calls("aws")
    assert first.args[:2] == ("sqs", "get-queue-url") and "p5-pcs-node-replacements" in first.args
    assert second.args[:2] == ("sqs", "send-message") and QUEUE in second.args
