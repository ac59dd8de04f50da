"""network-features (fmcluster/node/scripts/boot/programs/network-features.sh) in the boot-path
harness (tests/support/sandbox.py): the node's place in EC2's network, from recorded
DescribeInstanceTopology answers (tests/data/topology/) served by the sandbox's fake `aws`, set as
Slurm node features through the fake `scontrol`, which records what the node has.

The recorded answers are in the shape `aws ec2 describe-instance-topology --output json` prints
(botocore's DescribeInstanceTopology output: each file is checked against botocore's model here),
with made-up ids, not captured from an account:
- p5.48xlarge.json: five p5.48xlarge, 3 layers: one layer-1 node; at layer 2 b27...501 over
  instances 1-4 and b27...502 over 5; at layer 3 c3e...f1 over 1-2, c3e...f2 over 3-4, c3e...f3 over 5;
- p6-b200.48xlarge.json: two p6-b200.48xlarge, 4 layers, apart only at layer 4.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from fmcluster.model.node import SlurmPaths
from fmcluster.node import pcs as pcs_node
from fmcluster.node import program as prog
from fmcluster.node import shell as node_shell
from tests.support import nodes
from tests.support.nodes import REFS
from tests.support.paths import ROOT
from tests.support.sandbox import Sandbox, Scenario

TOPOLOGY = ROOT / "tests" / "data" / "topology"
ANSWERS = sorted(TOPOLOGY.glob("*.json"))
SLURM_VERSION = "25.05"
SLURM_BIN = SlurmPaths.pcs(SLURM_VERSION).bin  # Slurm's commands on the node
UNIT = "fmcluster-network-features.service"
FEATURES_PROGRAM = "/usr/local/lib/fmcluster/network-features"


def boot(tmp_path: Path, answer: str | None, **scenario) -> tuple[Sandbox, object]:
    """A node whose boot script installs network-features alone (started by its unit: the fake
    systemctl runs ExecStart), EC2 answering from tests/data/topology/`answer`."""
    node = Sandbox(tmp_path, Scenario(image="bare", **scenario))
    if answer is not None:
        (node.state / "topology.json").write_text((TOPOLOGY / answer).read_text())
    made, group = placed(node.scenario.instance_type)
    slurm = made.node(group).slurm
    program = prog.NodeProgram(group.instance)
    program.network_features(slurm.bin, slurm.slurmd_units)
    return node, node.run(program.render(node_shell.header()))


def placed(instance_type: str = "p5.48xlarge", count: int = 2):
    """A PCS cluster of SLURM_VERSION, and its group of `count` nodes of `instance_type`."""
    return nodes.group("pcs", instance_type, {"orchestrator.version": SLURM_VERSION, "node_groups[0].count": count})


def features(node: Sandbox) -> tuple[str, str]:
    available, active = (node.state / "slurm-features").read_text().splitlines()
    return available, active


def instance(answer: str, index: int) -> dict:
    return json.loads((TOPOLOGY / answer).read_text())["Instances"][index]


def expected(nodes: list[str]) -> str:
    return ",".join(f"nn{layer}-{node.removeprefix('nn-')}" for layer, node in enumerate(nodes, 1))


@pytest.mark.parametrize("answer", [p.name for p in ANSWERS])
def test_recorded_answers_have_the_apis_shape(answer):
    """Each recorded answer is a valid DescribeInstanceTopology result (botocore's Stubber checks a
    response against the operation's output shape), its network nodes top-down, 3 or 4 of them."""
    import botocore.session
    from botocore.stub import Stubber

    data = json.loads((TOPOLOGY / answer).read_text())
    client = botocore.session.get_session().create_client("ec2", region_name="us-east-1",
                                                          aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        ids = [i["InstanceId"] for i in data["Instances"]]
        stub.add_response("describe_instance_topology", data, {"InstanceIds": ids})
        assert client.describe_instance_topology(InstanceIds=ids)["Instances"] == data["Instances"]
    layers = {len(i["NetworkNodes"]) for i in data["Instances"]}
    assert layers == ({4} if answer.startswith("p6-b200") else {3})


def test_p5_node_gets_its_three_network_nodes_and_keeps_its_other_features(tmp_path):
    node, result = boot(tmp_path, "p5.48xlarge.json", instance_id="i-0a1b2c3d4e5f60003",
                        slurm_features="gpu,p5.48xlarge")
    assert result.returncode == 0, result.stderr
    assert node.unit_state(UNIT) == "active"
    want = expected(instance("p5.48xlarge.json", 2)["NetworkNodes"])
    assert want == "nn1-a1f0e5d4c3b2a1901,nn2-b27c0d1e2f3a4b501,nn3-c3e50490a237cb0f2"
    assert features(node) == (f"gpu,p5.48xlarge,{want}",) * 2
    asked = [c.args for c in node.calls("aws")]
    assert asked == [("ec2", "describe-instance-topology", "--instance-ids", "i-0a1b2c3d4e5f60003",
                      "--region", "us-east-2", "--query", "Instances[].NetworkNodes[]", "--output", "text")]
    assert node.lines("scontrol")[-1] == (f"scontrol update nodename=ip-10-1-0-42 AvailableFeatures=gpu,p5.48xlarge,"
                                          f"{want} ActiveFeatures=gpu,p5.48xlarge,{want}")


def test_p6_b200_node_gets_four_layers(tmp_path):
    node, result = boot(tmp_path, "p6-b200.48xlarge.json", instance_type="p6-b200.48xlarge",
                        instance_id="i-0f6e5d4c3b2a10002", region="us-west-2")
    assert result.returncode == 0, result.stderr
    available, active = features(node)
    assert available == active == expected(instance("p6-b200.48xlarge.json", 1)["NetworkNodes"])
    assert available.split(",")[-1] == "nn4-d4a0b1c2d3e4f5065"


def test_a_node_moved_elsewhere_replaces_its_old_network_features(tmp_path):
    """Features of an earlier place (a stop and start moves an instance) go; the others stay."""
    node, result = boot(tmp_path, "p5.48xlarge.json", instance_id="i-0a1b2c3d4e5f60005",
                        slurm_features="nn1-old,gpu,nn3-old,nn2-old")
    assert result.returncode == 0, result.stderr
    assert features(node)[0] == "gpu," + expected(instance("p5.48xlarge.json", 4)["NetworkNodes"])


def test_waits_for_the_topology_and_for_slurmd_to_register(tmp_path):
    """EC2 has no topology for a new instance at first, and scontrol knows the node only once
    slurmd has registered: the program asks again every RETRY_SECONDS until both answer."""
    node, result = boot(tmp_path, "p5.48xlarge.json", topology_pending=2, slurm_unregistered=3)
    assert result.returncode == 0, result.stderr
    assert node.unit_state(UNIT) == "active"
    assert features(node)[0] == expected(instance("p5.48xlarge.json", 0)["NetworkNodes"])
    assert len(node.calls("aws")) == 3
    sleeps = [c.args for c in node.calls("sleep")]
    assert sleeps and set(sleeps) == {(str(prog.NETWORK_FEATURES_RETRY_SECONDS),)}


@pytest.mark.parametrize("scenario", [{"instance_id": "i-0ffffffffffffffff"}, {"topology_denied": True}],
                         ids=["never-answered", "denied"])
def test_gives_up_bounded_and_the_boot_goes_on(tmp_path, scenario):
    """An instance EC2 never answers for (or a role without the permission): the unit fails after
    NETWORK_FEATURES_ATTEMPTS tries, nothing is set, and the boot script is not held up by it."""
    node, result = boot(tmp_path, "p5.48xlarge.json", slurm_features="gpu", **scenario)
    assert result.returncode == 0, result.stderr
    assert node.unit_state(UNIT) == "failed"
    assert len(node.calls("aws")) == prog.NETWORK_FEATURES_ATTEMPTS
    assert not any(c.args[0] == "update" for c in node.calls("scontrol"))
    assert "gave up after" in result.stderr


def test_the_restore_sets_again_what_slurm_forgot_without_asking_ec2(tmp_path):
    """slurmctld forgets features set with scontrol when it restarts (without -R) or is
    reconfigured: the restore service's runs set them again from the cache in /run, with no EC2
    call, and change nothing while Slurm still has them. It runs when configless slurmd rewrites
    /run/slurm/conf/slurm.conf (a reconfigure: the path unit) and, a slow backstop spread at
    random, every few minutes; its journal keeps notices only."""
    node, result = boot(tmp_path, "p5.48xlarge.json", slurm_features="gpu",
                        slurmd_unit=f"slurmd-{SLURM_VERSION}.service")
    assert result.returncode == 0, result.stderr
    want = features(node)
    assert node.file("/run/fmcluster-network-features") == want[0].removeprefix("gpu,") + "\n"
    restore = f'"$FMCLUSTER_ROOT{FEATURES_PROGRAM}" --restore {SLURM_BIN}\n'
    updates = lambda: sum(c.args[0] == "update" for c in node.calls("scontrol"))  # noqa: E731
    before = updates()
    again = node.run(restore)
    assert again.returncode == 0 and again.stderr == ""  # quiet while Slurm has them
    assert len(node.calls("aws")) == 1 and updates() == before
    (node.state / "slurm-features").write_text("gpu\ngpu\n")  # slurmctld restarted
    restored = node.run(restore)
    assert restored.returncode == 0 and "set again" in restored.stderr
    assert features(node) == want
    assert len(node.calls("aws")) == 1 and updates() == before + 1
    timer = node.file("/etc/systemd/system/fmcluster-network-features-restore.timer")
    assert f"OnUnitInactiveSec={prog.NETWORK_FEATURES_RESTORE_SECONDS}s" in timer
    assert f"RandomizedDelaySec={prog.NETWORK_FEATURES_RESTORE_SPREAD_SECONDS}s" in timer
    assert 120 <= prog.NETWORK_FEATURES_RESTORE_SECONDS <= 300
    path = node.file("/etc/systemd/system/fmcluster-network-features-restore.path")
    assert "PathChanged=/run/slurm/conf/slurm.conf\n" in path
    assert "Unit=fmcluster-network-features-restore.service\n" in path
    assert "LogLevelMax=notice\n" in node.file("/etc/systemd/system/fmcluster-network-features-restore.service")
    assert {"fmcluster-network-features-restore.timer", "fmcluster-network-features-restore.path"} <= set(
        node.enabled())
    verified = node.verify_units()
    assert verified.returncode == 0 and verified.stdout.strip() == "", verified.stdout
    assert verify_path_unit(node).stdout.strip() == ""


def verify_path_unit(node: Sandbox) -> subprocess.CompletedProcess:
    """`systemd-analyze verify` of the restore's .path unit (Sandbox.verify_units takes services,
    timers and mounts), with the unit directory the node has: a .path unit runs no program."""
    units = node.root / "etc/systemd/system"
    return subprocess.run(["systemd-analyze", "verify", "--man=no",
                           str(units / "fmcluster-network-features-restore.path")],
                          capture_output=True, text=True, timeout=60)


def test_the_restore_resolves_the_node_name_once_per_boot(tmp_path):
    """Where the Slurm node's name is not the host's, resolving it dumps slurmctld's whole node
    table: the name is resolved once a boot and kept in /run, and each restore asks for the node
    alone."""
    node, result = boot(tmp_path, "p5.48xlarge.json", slurm_name="gpu-st-p5-1")
    assert result.returncode == 0, result.stderr
    assert node.file("/run/fmcluster-slurm-node") == "gpu-st-p5-1\n"
    before = len(node.calls("scontrol"))
    restore = f'"$FMCLUSTER_ROOT{FEATURES_PROGRAM}" --restore {SLURM_BIN}\n'
    for _ in range(3):
        assert node.run(restore).returncode == 0
    asked = [c.args for c in node.calls("scontrol")[before:]]
    assert asked == [("-o", "show", "node", "gpu-st-p5-1")] * 3


def clear_command(node: Sandbox, unit: str) -> tuple[str, list[str]]:
    """The ExecStartPost= line the boot wrote into slurmd's unit `unit`, and the program's part of
    it (after `timeout N env FMCLUSTER_LIB=...`)."""
    dropin = node.file(f"/etc/systemd/system/{unit}.d/60-fmcluster-network-features.conf")
    (line,) = [v for v in dropin.splitlines() if v.startswith("ExecStartPost=")]
    words = line.removeprefix("ExecStartPost=").split()
    return line, words[words.index(FEATURES_PROGRAM):]


@pytest.mark.parametrize("slurmd", [f"slurmd-{SLURM_VERSION}.service", "slurmd.service"],
                         ids=["pcs-installer", "package"])
def test_an_earlier_instances_features_are_cleared_once_slurmd_has_registered(tmp_path, slurmd):
    """A new instance under the node name of an earlier one (AWS PCS replaces instances so) finds
    that instance's features on the node. Before slurmd no scontrol works on AWS PCS (auth/slurm
    asks slurmd's SACK socket; configless), so slurmd's unit, whichever name it has, clears them
    after each start (ExecStartPost=, `-`: never failing slurmd; bounded by timeout), tried until
    slurmd has registered; features of other kinds stay; and a restart of slurmd keeps this
    boot's network features."""
    node, result = boot(tmp_path, "p5.48xlarge.json", instance_id="i-0a1b2c3d4e5f60002",
                        slurm_features="nn1-old,gpu,nn2-old,nn3-old", topology_pending=100, slurm_name="gpu-st-p5-1",
                        slurmd_unit=slurmd)
    assert result.returncode == 0, result.stderr
    assert not any(c.args[0] == "update" for c in node.calls("scontrol"))  # EC2 never answered: none set
    line, program = clear_command(node, slurmd)
    assert line == (f"ExecStartPost=-/usr/bin/timeout {prog.NETWORK_FEATURES_CLEAR_SECONDS} /usr/bin/env "
                    f"FMCLUSTER_LIB=/usr/local/lib/fmcluster {' '.join(program)}")
    assert program[1:3] == ["--clear", SLURM_BIN]
    dropin = node.file(f"/etc/systemd/system/{slurmd}.d/60-fmcluster-network-features.conf")
    assert f"\nTimeoutStartSec={60 + prog.NETWORK_FEATURES_CLEAR_SECONDS}\n" in dropin  # no gate here
    clear_command(node, f"slurmd-{SLURM_VERSION}.service" if slurmd == "slurmd.service" else "slurmd.service")
    if slurmd != "slurmd.service":  # systemd-analyze verifies a drop-in only with its unit (this machine's)
        verified = node.verify_units()
        assert verified.returncode == 0 and not verified.stdout.strip(), verified.stdout
    # slurmd starts: Slurm answers for the node only once it has registered, two asks later
    (node.state / "scenario.sh").write_text(dataclasses.replace(node.scenario, slurm_unregistered=2).shell())
    (node.state / "slurm-show-calls").write_text("0")
    slept = len(node.calls("sleep"))
    ran = node.run(f'"$FMCLUSTER_ROOT{FEATURES_PROGRAM}" {" ".join(program[1:])}\n')
    assert ran.returncode == 0, ran.stderr
    assert features(node) == ("gpu", "gpu") and "removed" in ran.stderr
    sleeps = [c.args for c in node.calls("sleep")[slept:]]  # tried again until slurmd had registered
    assert sleeps and set(sleeps) == {(str(prog.NETWORK_FEATURES_CLEAR_RETRY_SECONDS),)}


def test_a_restart_of_slurmd_keeps_this_boots_network_features(tmp_path):
    """slurmd restarted (by an administrator, or its gate's Restart=): the clear after its start
    finds this boot's network features (the cache in /run) and leaves them."""
    node, result = boot(tmp_path, "p5.48xlarge.json", slurm_features="gpu")
    assert result.returncode == 0, result.stderr
    want = features(node)
    _, program = clear_command(node, f"slurmd-{SLURM_VERSION}.service")
    before = sum(c.args[0] == "update" for c in node.calls("scontrol"))
    ran = node.run(f'"$FMCLUSTER_ROOT{FEATURES_PROGRAM}" {" ".join(program[1:])}\n')
    assert ran.returncode == 0 and ran.stderr == "", ran.stderr
    assert features(node) == want and sum(c.args[0] == "update" for c in node.calls("scontrol")) == before


def test_the_instances_features_leave_the_node_when_it_goes(tmp_path):
    """slurmd says it is ready before it registers, so the clear at its start races the scheduler,
    and a powered-down dynamic node keeps its features with no instance: the unit stays active and
    its stop (at shutdown, before slurmd's: it is ordered after slurmd) removes this instance's
    network features, bounded, never failing the shutdown; the other features stay."""
    node, result = boot(tmp_path, "p5.48xlarge.json", slurm_features="gpu",
                        slurmd_unit=f"slurmd-{SLURM_VERSION}.service")
    assert result.returncode == 0, result.stderr
    assert features(node)[0] != "gpu"  # set at boot
    unit = node.file(f"/etc/systemd/system/{UNIT}")
    assert "RemainAfterExit=yes\n" in unit
    (stop,) = [line for line in unit.splitlines() if line.startswith("ExecStop=")]
    words = stop.removeprefix("ExecStop=").split()
    assert words[:2] == ["-/usr/bin/timeout", str(prog.NETWORK_FEATURES_LEAVE_SECONDS)]
    assert words[2:5] == [FEATURES_PROGRAM, "--leave", SLURM_BIN]
    assert f"TimeoutStopSec={prog.NETWORK_FEATURES_LEAVE_SECONDS + 15}\n" in unit
    verified = node.verify_units()
    assert verified.returncode == 0 and not verified.stdout.strip(), verified.stdout
    ran = node.run(f'"$FMCLUSTER_ROOT{FEATURES_PROGRAM}" {" ".join(words[3:])}\n')
    assert ran.returncode == 0, ran.stderr
    assert features(node) == ("gpu", "gpu") and "the instance goes" in ran.stderr


def test_the_node_is_found_by_its_host_name_when_slurm_names_it_otherwise(tmp_path):
    """AWS PCS names nodes otherwise than their hosts: the node is the one whose NodeHostName is
    this host (slurm-node.sh, as node-health finds it)."""
    node, result = boot(tmp_path, "p5.48xlarge.json", slurm_name="gpu-st-p5-1")
    assert result.returncode == 0, result.stderr
    assert features(node)[0] == expected(instance("p5.48xlarge.json", 0)["NetworkNodes"])
    assert node.lines("scontrol")[-1].startswith("scontrol update nodename=gpu-st-p5-1 ")


@pytest.mark.parametrize("slurmd", [f"slurmd-{SLURM_VERSION}.service", "slurmd.service"],
                         ids=["pcs-installer", "package"])
def test_unit_runs_after_slurmd_at_every_boot(tmp_path, slurmd):
    """After slurmd's unit, whichever name it has: AWS PCS's installer's, or a package's."""
    node, result = boot(tmp_path, "p5.48xlarge.json", slurmd_unit=slurmd)
    assert result.returncode == 0, result.stderr
    unit = node.file(f"/etc/systemd/system/{UNIT}")
    assert f"After=network-online.target slurmd-{SLURM_VERSION}.service slurmd.service\n" in unit
    assert "WantedBy=multi-user.target" in unit
    assert UNIT in node.enabled()
    assert (f"ExecStart=/usr/local/lib/fmcluster/network-features {SLURM_BIN} "
            f"{prog.NETWORK_FEATURES_ATTEMPTS} {prog.NETWORK_FEATURES_RETRY_SECONDS}\n") in unit
    if slurmd != "slurmd.service":  # the drop-ins of both names: verified where the node has both units
        verified = node.verify_units()
        assert verified.returncode == 0 and not verified.stdout.strip(), verified.stdout
    boot_again = node.reboot()
    assert UNIT in boot_again.started
    assert boot_again.order.index(UNIT) > boot_again.order.index(slurmd)


def test_node_program_wires_it_only_where_the_model_places_the_group():
    plain = pcs_node.node_program(*placed(count=1), REFS)  # one node: nothing to place
    assert "setup_network_features" not in plain.steps
    wired = pcs_node.node_program(*placed(), REFS)
    assert "setup_network_features" in wired.steps
    assert wired.settings["NETWORK_FEATURES_SLURM_BIN"] == f"/opt/aws/pcs/scheduler/slurm-{SLURM_VERSION}/bin"
    ultraservers = pcs_node.node_program(*placed("p6e-gb200.36xlarge"), REFS)  # PCS's block topology places them
    assert "setup_network_features" not in ultraservers.steps


def test_on_pcs_it_is_a_node_ready_lifecycle_script(tmp_path):
    """AWS PCS runs the program as node lifecycle scripts (fmcluster.node.pcs): the unit is
    set up by a NodeReady script (slurmd has registered), first boot only (the unit runs at every
    later boot), CONTINUE (a node without the features still takes jobs)."""

    made = pcs_node.node_actions(*placed(), REFS)
    (script,) = [s for s in made if s.name == "fmcluster network features"]
    assert (script.stage, script.execution_policy, script.on_error) == (
        pcs_node.NODE_READY, pcs_node.FIRST_BOOT_ONLY, pcs_node.CONTINUE)
    assert not any(s.name == "fmcluster network features" for s in pcs_node.node_actions(*placed(count=1), REFS))
    node = Sandbox(tmp_path, Scenario(image="bare", instance_id="i-0a1b2c3d4e5f60004"))
    (node.state / "topology.json").write_text((TOPOLOGY / "p5.48xlarge.json").read_text())
    result = node.run(script.text, *script.arguments)
    assert result.returncode == 0, result.stderr
    assert features(node)[0] == expected(instance("p5.48xlarge.json", 3)["NetworkNodes"])


def test_node_role_may_describe_the_instance_topology_when_asked():
    """ec2:DescribeInstanceTopology has no resource type in the Service Authorization Reference:
    the statement's Resource is "*", and the IAM linters (the walk's wildcards, the SAR's types)
    accept it; a role not asked for it has no such statement."""
    import aws_cdk as cdk

    from fmcluster_cdk.constructs.compute.node_role import NodeRole
    from tests.support import iam_lint

    def template(**kwargs) -> dict:
        stack = cdk.Stack(cdk.App(), "Nodes")
        NodeRole(stack, "NodeRole", cluster_arn="arn:aws:pcs:us-east-2:111122223333:cluster/pcs_abc", **kwargs)
        return cdk.assertions.Template.from_stack(stack).to_json()

    def statements(found: dict) -> list[dict]:
        (role,) = [r for r in found["Resources"].values() if r["Type"] == "AWS::IAM::Role"]
        return [s for p in role["Properties"]["Policies"] for s in p["PolicyDocument"]["Statement"]]

    with_topology = template(instance_topology=True)
    assert {"Action": "ec2:DescribeInstanceTopology", "Effect": "Allow", "Resource": "*",
            "Sid": "InstanceTopology"} in statements(with_topology)
    assert iam_lint.findings(with_topology) == []
    assert not any(s.get("Sid") == "InstanceTopology" for s in statements(template()))
