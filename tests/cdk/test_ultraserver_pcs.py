"""examples/p6e-gb200-pcs.yaml, synthesized once with the real stacks: a P6e-GB200 UltraServer
block on AWS PCS with its GPU nodes in the Dallas Local Zone. What the templates say (the
cluster's IMEX prolog settings, the exclusive partition, AWS's EFA layout of p6e-gb200, the arm64
AMI, the Capacity Block, the subnets of each part), and the prolog's install on the node, run in
the boot-path sandbox (tests/support/sandbox.py)."""

from __future__ import annotations

import json

import pytest

from fmcluster.facts import node as node_facts
from fmcluster.model.cluster import resolve
from fmcluster.node import pcs as pcs_node
from fmcluster.node import runtime as node_runtime
from fmcluster.spec import loader
from tests.support import nodes, standins
from tests.support.examples import fmcluster_synth, templates
from tests.support.nodes import NO_METRICS, first_boot
from tests.support.paths import ROOT
from tests.support.sandbox import IMAGE_PCS_SLURM, Sandbox, Scenario

pytestmark = pytest.mark.synth
EXAMPLE = "examples/p6e-gb200-pcs.yaml"
LOCAL_ZONE, REGION_AZ = "use1-dfw2-az1", "use1-az4"


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    outdir = tmp_path_factory.mktemp("cdk.out")
    result = fmcluster_synth(EXAMPLE, outdir)
    assert result.returncode == 0, result.stderr
    return {name: json.loads(text) for name, text in templates(outdir).items()}


def resources(synthesized, kind):
    return {key: r["Properties"] | {"_metadata": r.get("Metadata", {})}
            for t in synthesized.values() for key, r in t["Resources"].items() if r["Type"] == kind}


def one(synthesized, kind, where=lambda key, props: True):
    (found,) = [p for k, p in resources(synthesized, kind).items() if where(k, p)]
    return found


def subnet_key(synthesized, az):
    return next(k for k, p in resources(synthesized, "AWS::EC2::Subnet").items()
                if p["AvailabilityZoneId"] == az and "Private" in k)


def test_the_cluster_runs_the_imex_prolog_on_every_allocation(synthesized):
    cluster = one(synthesized, "AWS::PCS::Cluster")
    assert cluster["SlurmConfiguration"]["SlurmCustomSettings"] == [
        {"ParameterName": "Prolog", "ParameterValue": node_facts.IMEX_PROLOG},
        {"ParameterName": "PrologFlags", "ParameterValue": "Alloc,NoHold"}]
    assert cluster["Scheduler"] == {"Type": "SLURM", "Version": "25.05"}


def test_the_ultraserver_partition_is_exclusive(synthesized):
    queue = one(synthesized, "AWS::PCS::Queue")
    assert queue["Name"] == "gb200"
    assert queue["SlurmConfiguration"]["SlurmCustomSettings"] == [
        {"ParameterName": "OverSubscribe", "ParameterValue": "EXCLUSIVE"}]


def test_gb200_nodes_get_awss_efa_layout_on_the_ultraserver_block(synthesized):
    template = one(synthesized, "AWS::EC2::LaunchTemplate", lambda k, p: "gb200" in k)
    data = template["LaunchTemplateData"]
    # cards 1, 5, 9, 13 are EFA-only with one interface slot: the EC2 guide's efa-only at device 0
    # (PCS documents no GB200 layout: validate warns, pcs-efa-only-interfaces)
    assert [(i["NetworkCardIndex"], i["DeviceIndex"], i.get("InterfaceType", "interface"))
            for i in data["NetworkInterfaces"]] == [(0, 0, "interface"), (1, 0, "efa-only"), (5, 0, "efa-only"),
                                                    (9, 0, "efa-only"), (13, 0, "efa-only")]
    assert data["InstanceType"] == "p6e-gb200.36xlarge"
    assert data["InstanceMarketOptions"]["MarketType"] == "capacity-block"
    assert data["CapacityReservationSpecification"]["CapacityReservationTarget"] == {
        "CapacityReservationId": "cr-0a1b2c3d4e5f60718"}
    assert "Placement" not in data  # an UltraServer is placed already
    # cfn-lint's regional instance-type data is the region's AZs': off for Local Zone nodes only
    assert template["_metadata"]["cfn-lint"] == {"config": {"ignore_checks": ["E3628"]}}
    login = one(synthesized, "AWS::EC2::LaunchTemplate", lambda k, p: k.startswith("Login"))
    assert "cfn-lint" not in login["_metadata"]


def test_arm64_ami_and_capacity_block_purchase(synthesized):
    group = one(synthesized, "AWS::PCS::ComputeNodeGroup", lambda k, p: p["Name"] == "gb200")
    assert group["PurchaseOption"] == "CAPACITY_BLOCK"
    assert group["ScalingConfiguration"] == {"MinInstanceCount": 18, "MaxInstanceCount": 18}
    login = one(synthesized, "AWS::PCS::ComputeNodeGroup", lambda k, p: p["Name"] == "login")
    # each from NAME-images' node image of its architecture (pcs-arm64, pcs-x86_64), not the
    # PCS-ready DLAMI's parameter
    model = resolve(loader.load(ROOT / EXAMPLE).spec)
    assert {i.key for i in model.images} == {"pcs-arm64", "pcs-x86_64"}
    assert group["AmiId"] != login["AmiId"]
    assert "resolve:ssm" not in json.dumps([group["AmiId"], login["AmiId"]])


def test_gpu_nodes_in_the_local_zone_and_the_control_plane_in_the_region(synthesized):
    local, regional = subnet_key(synthesized, LOCAL_ZONE), subnet_key(synthesized, REGION_AZ)

    def names(props_value):
        return json.dumps(props_value)

    cluster = one(synthesized, "AWS::PCS::Cluster")
    assert regional in names(cluster["Networking"]["SubnetIds"]) and local not in names(cluster["Networking"])
    gpu = one(synthesized, "AWS::PCS::ComputeNodeGroup", lambda k, p: p["Name"] == "gb200")
    login = one(synthesized, "AWS::PCS::ComputeNodeGroup", lambda k, p: p["Name"] == "login")
    assert local in names(gpu["SubnetIds"])
    assert regional in names(login["SubnetIds"])
    # no public subnet in the Local Zone; the NAT gateway in the region's AZ; the Local Zone's
    # private subnet routes to it
    publics = [p["AvailabilityZoneId"] for k, p in resources(synthesized, "AWS::EC2::Subnet").items()
               if "Public" in k]
    assert publics == [REGION_AZ]
    nat_key, nat = next(iter(resources(synthesized, "AWS::EC2::NatGateway").items()))
    assert "use1az4" in nat["SubnetId"]["Ref"]
    routes = [p for p in resources(synthesized, "AWS::EC2::Route").values() if "NatGatewayId" in p]
    assert len(routes) == 2 and all(r["NatGatewayId"] == {"Ref": nat_key} for r in routes)
    storage = one(synthesized, "AWS::FSx::FileSystem")
    assert local in names(storage["SubnetIds"])  # the file system with its clients, in the Local Zone


def test_the_model_says_it_once():
    model = resolve(loader.load(ROOT / EXAMPLE).spec)
    assert model.imex_prolog and dict(model.slurm_settings) == node_facts.IMEX_PROLOG_SETTINGS
    (group,) = model.node_groups
    assert group.ultraserver and dict(group.partition_settings) == {"OverSubscribe": "EXCLUSIVE"}
    assert not resolve(loader.load(ROOT / "examples/p5-pcs.yaml").spec).slurm_settings


# --- the prolog on the node ----------------------------------------------------------------

@pytest.fixture
def standin_pins(monkeypatch):
    """The node scripts pin the stand-ins' commits (as tests/node/test_boot_path.py): the node's
    image is baked from them, and its container runtime is checked against the pins."""
    for name, value in standins.pristine().pins().items():
        monkeypatch.setattr(node_runtime, name, value)


# the example's UltraServer group beside another, on the Slurm of the sandbox's image
GB200 = {"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "count": 2, "capacity": {"type": "on-demand"}}


def boot(tmp_path, scenario: Scenario, name: str = "gpu", ultraservers: bool = True):
    """A node of the test spec's AWS PCS cluster (tests/support/nodes.py), with the UltraServer group
    GB200 beside its group `name` or not, booted as PCS boots it."""
    made, group = nodes.pcs_group("p5.48xlarge", {"node_groups[1]": GB200} if ultraservers else {}, lustre=None,
                                 name=name)
    node = Sandbox(tmp_path, scenario)
    return node, first_boot(node, pcs_node.node_actions(made, group, NO_METRICS))


def gb200_node(tmp_path, **scenario):
    return boot(tmp_path, Scenario(gpus=4, nvme_disks=3, efa_devices=4, **{"imex": True, **scenario}), "gb200")


@pytest.mark.usefixtures("standin_pins")
def test_every_compute_node_installs_the_prolog_before_slurmd_may_start(tmp_path):
    node, result = gb200_node(tmp_path)
    assert result.returncode == 0, result.stderr
    assert node.exists(node_facts.IMEX_PROLOG)
    assert node.run(f'"$FMCLUSTER_ROOT{node_facts.IMEX_PROLOG}" --check', name="check.sh").returncode == 0
    dropin = node.file("/etc/systemd/system/slurmd.service.d/40-fmcluster-prolog.conf")
    assert f"ExecStartPre={node_facts.IMEX_PROLOG} --check" in dropin
    assert node.run("systemctl start slurmd.service", name="start.sh").returncode == 0


@pytest.mark.usefixtures("standin_pins")
def test_a_node_without_its_prolog_never_starts_slurmd(tmp_path):
    node, result = gb200_node(tmp_path)
    assert result.returncode == 0, result.stderr
    assert node.run(f"rm -f $FMCLUSTER_ROOT{node_facts.IMEX_PROLOG}", name="rm.sh").returncode == 0
    started = node.run("systemctl start slurmd.service", name="start.sh")
    assert started.returncode != 0 and "slurmd.service failed" in started.stderr


@pytest.mark.usefixtures("standin_pins")
def test_the_gb200_prolog_calls_slurm_by_the_clusters_path(tmp_path):
    node, result = gb200_node(tmp_path)
    assert result.returncode == 0, result.stderr
    prolog = node.file(node_facts.IMEX_PROLOG)
    bin_ = f"/opt/aws/pcs/scheduler/slurm-{IMAGE_PCS_SLURM}/bin"
    assert f"\nSLURM_BIN={bin_}\n" in prolog and "nvidia-imex-ctl -N" in prolog
    made, gb200 = nodes.pcs_group("p5.48xlarge", {"node_groups[1]": GB200}, name="gb200")
    assert made.node(gb200).slurm.bin == bin_  # the cluster's Slurm, as the model resolved it


@pytest.mark.usefixtures("standin_pins")
def test_the_boot_enables_nvidia_imex_and_node_ready_requires_it(tmp_path):
    """Enabled (the PCS prerequisite), not started: the prolog starts it with each job's nodes."""
    node, result = gb200_node(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "systemctl enable nvidia-imex.service" in node.lines("systemctl")
    assert not any(line.startswith(("systemctl start nvidia-imex", "systemctl enable --now nvidia-imex"))
                   for line in node.lines("systemctl"))
    assert "IMEX=1" in node.file("/etc/fmcluster/node-ready.env").splitlines()


@pytest.mark.usefixtures("standin_pins")
def test_a_gb200_node_without_nvidia_imex_is_not_ready(tmp_path):
    node, result = gb200_node(tmp_path, imex=False)  # the AMI lacks NVIDIA's IMEX packages
    assert result.returncode == 1
    assert "imex nvidia-imex.service is missing or not enabled" in node.run(
        f'"$FMCLUSTER_ROOT{node_facts.FMCLUSTER_LIB}/node-ready"', name="ready.sh").stdout
    started = node.run("systemctl start slurmd.service", name="start.sh")
    assert started.returncode != 0  # slurmd's gate: the node never takes a job


@pytest.mark.usefixtures("standin_pins")
def test_other_nodes_of_the_cluster_get_a_prolog_that_does_nothing(tmp_path):
    """Prolog= is cluster-wide: a p5 node of a cluster with UltraServers needs one too; it neither
    checks IMEX at boot nor carries the IMEX prolog (the user data's 16 KiB)."""
    node, result = boot(tmp_path, Scenario(gpus=8, nvme_disks=8, efa_devices=32))
    assert result.returncode == 0, result.stderr
    assert node.file(node_facts.IMEX_PROLOG) == "#!/bin/sh\nexit 0\n"
    prolog = f'"$FMCLUSTER_ROOT{node_facts.IMEX_PROLOG}"'
    assert node.run(prolog, name="p.sh", env={"SLURM_JOB_ID": "1"}).returncode == 0
    assert "IMEX=0" in node.file("/etc/fmcluster/node-ready.env").splitlines()
    assert not any("nvidia-imex" in line for line in node.lines("systemctl"))


@pytest.mark.usefixtures("standin_pins")
def test_clusters_without_ultraservers_install_no_prolog(tmp_path):
    node, result = boot(tmp_path, Scenario(gpus=8, nvme_disks=8, efa_devices=32), ultraservers=False)
    assert result.returncode == 0, result.stderr
    assert not node.exists(node_facts.IMEX_PROLOG)
    assert not node.exists("/etc/systemd/system/slurmd.service.d/40-fmcluster-prolog.conf")
