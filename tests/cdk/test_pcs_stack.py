"""The NAME-cluster stack for AWS PCS, synthesized once per module.

One CDK app (with cdk.json's context, as `cdk synth` runs it) holds three cluster stacks: a spec
that exercises every capacity type and four EFA layouts (MEDIUM), examples/p5-pcs.yaml (SMALL)
and a 1,000-node CPU cluster without Lustre (LARGE), with stand-ins for the network and storage
stacks' outputs (tests/support/stacks.py). tests/cdk/test_examples_synth.py synthesizes every
example with the real stacks.

Each spec node group is a nested stack of its own (fmcluster_cdk/stacks/node_groups.py); the assertions read
the cluster stack with its nested stacks inlined (tests/support/nested.py).
"""

from __future__ import annotations

import email
import hashlib
import json
from pathlib import Path

import pytest

from fmcluster.model.cluster import resolve
from fmcluster.node import pcs as pcs_node
from fmcluster.spec import loader
from tests.support.nested import flatten, nested_templates
from tests.support.node_scripts import lifecycle_actions
from tests.support.paths import EXAMPLES_DIR
from tests.support.specs import base_spec, to_yaml
from tests.support.stacks import (
    EFA_SG,
    FS_DNS,
    FS_MOUNT,
    KMS_KEY,
    NODE_SG,
    SUBNET,
    cluster,
    image_id,
    joined,
    launch_templates,
    load_spec,
    loaded_specs,
    network,
    new_app,
    resources,
    storage,
)
from tests.support.stacks import (
    images as images_refs,
)

pytestmark = pytest.mark.synth

SMALL_EXAMPLE = EXAMPLES_DIR / "p5-pcs.yaml"  # 16 nodes on a Capacity Block + 1 login node
PLACEMENT_GROUP = "pcs-main-p5en"
RG_ARN = "arn:aws:resource-groups:us-east-1:111122223333:group/b200-odcrs"
DEFAULT_AMI = "{{resolve:ssm:/aws/service/pcs/ami/dlami-base-ubuntu2404/x86_64/latest/ami-id}}"


def main_spec() -> dict:
    """Every capacity type and the EFA layouts of four GPU types; 100 nodes with login (MEDIUM)."""
    spec = base_spec(
        name="pcs-main",
        orchestrator={"type": "pcs", "version": "25.05", "login": {"instance_type": "m7i.2xlarge", "count": 2}},
        node_groups=[
            {"name": "p5cb", "instance_type": "p5.48xlarge", "count": 16,
             "capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}},
            {"name": "p5en", "instance_type": "p5en.48xlarge", "count": 8, "placement_group": PLACEMENT_GROUP,
             "capacity": {"type": "reservation", "reservation_id": "cr-0fedcba9876543210"}},
            {"name": "b200", "instance_type": "p6-b200.48xlarge", "min_count": 0, "max_count": 8,
             "placement_group": "none", "capacity": {"type": "reservation", "reservation_resource_group_arn": RG_ARN}},
            {"name": "b300", "instance_type": "p6-b300.48xlarge", "min_count": 0, "max_count": 6,
             "placement_group": "auto", "capacity": {"type": "spot"}},  # spot + EFA: a new placement group
            {"name": "cpu", "instance_type": "c7i.8xlarge", "min_count": 2, "max_count": 60, "root_volume_gib": 200,
             "ami_id": "ami-0123456789abcdef0"},
        ],
        tags={"team": "ml-platform"})
    spec["storage"]["kms"] = True
    return spec


def large_spec() -> dict:
    """999 CPU nodes and a login node (LARGE), no Lustre."""
    spec = base_spec(name="pcs-large", node_groups=[{"name": "cpu", "instance_type": "c7i.8xlarge", "count": 999}])
    del spec["storage"]["lustre"]
    return spec


def build(app, spec):
    return cluster(app, spec)


def synth_main(outdir: Path):
    app = new_app(outdir)
    stack = build(app, specs()["main"])
    app.synth()
    return stack


# The specs of the app, loaded and checked once: main, large and the small example
specs = loaded_specs({"main": main_spec, "large": large_spec, "p5-pcs": SMALL_EXAMPLE})


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    """{spec key: (stack name, template)}: every stack of one app, synthesized once."""
    outdir = tmp_path_factory.mktemp("pcs") / "cdk.out"
    app = new_app(outdir)
    stacks = {key: build(app, spec) for key, spec in specs().items()}
    app.synth()
    return {key: (outdir / f"{stack.stack_name}.template.json") for key, stack in stacks.items()}


def stack_name(path: Path) -> str:
    return path.name.removesuffix(".template.json")


@pytest.fixture(scope="module")
def templates(synthesized):
    """{spec key: the cluster template with its node groups' nested stacks inlined}."""
    return {key: flatten(path.parent, stack_name(path)) for key, path in synthesized.items()}


def every_template(synthesized):
    """(spec key, path) of every template: the cluster stacks and their nested stacks."""
    for key, path in synthesized.items():
        yield key, path
        for nested in nested_templates(path.parent, stack_name(path)).values():
            yield key, nested.path


@pytest.fixture(scope="module")
def main(templates):
    return templates["main"]


def by_name(template, type_):
    return {props["Name"]: (lid, props) for lid, props in resources(template, type_).items()}


def by_logical_id(template, type_):
    return {lid: r for lid, r in template["Resources"].items() if r["Type"] == type_}


def node_groups(template):
    return {name: props for name, (_, props) in by_name(template, "AWS::PCS::ComputeNodeGroup").items()}


def user_data_script(data) -> str:
    message = email.message_from_string(data["UserData"]["Fn::Base64"])
    assert message.is_multipart()
    (part,) = message.get_payload()
    assert part.get_content_type() == "text/x-shellscript"
    return part.get_payload()


# --- launch templates ---------------------------------------------------------------------

def test_one_launch_template_per_node_group_and_login(main):
    assert set(launch_templates(main)) == {"login", "p5cb", "p5en", "b200", "b300", "cpu"}
    assert len(resources(main, "AWS::EC2::LaunchTemplate")) == 6


def test_pcs_nodes_get_efa_interfaces_only():
    """PCS documents only `efa` interfaces (EFA with ENA), not `efa-only`."""
    from fmcluster.facts import controlplanes
    from fmcluster.facts.efa import InterfaceMode

    assert controlplanes.get("pcs").interface_mode is InterfaceMode.EFA


@pytest.mark.parametrize("group, count, card0_type, further", [
    ("p5cb", 32, "efa", 1),   # p5.48xlarge: 32 cards, card 0 carries EFA
    ("p5en", 16, "efa", 1),   # p5en.48xlarge: 16 cards
    ("b200", 8, "efa", 1),    # p6-b200.48xlarge: 8 cards
    ("b300", 17, None, 0),    # p6-b300.48xlarge: card 0 is ENA only, cards 1-16 EFA
])
def test_efa_interface_layout(main, group, count, card0_type, further):
    interfaces = launch_templates(main)[group]["NetworkInterfaces"]
    assert len(interfaces) == count
    # the primary on card 0 device 0; an efa interface (it carries ENA) on a further card at device 1
    # where card 0 carries EFA (aws-hpc-recipes pcs-lt-efa-p5.yaml), at device 0 where it does not
    # (AWS's PCS template validated on p6-b300: awsome-distributed-ai add-cng-p6-b300.yaml)
    assert [(i["NetworkCardIndex"], i["DeviceIndex"]) for i in interfaces] == \
        [(0, 0)] + [(card, further) for card in range(1, count)]
    assert interfaces[0].get("InterfaceType") == card0_type  # ENA entries leave InterfaceType out
    assert {i.get("InterfaceType") for i in interfaces[1:]} == {"efa"}  # PCS documents efa interfaces only


def test_interfaces_carry_the_security_groups_and_no_security_group_ids(main):
    for group, data in launch_templates(main).items():
        assert "SecurityGroupIds" not in data
        expected = [NODE_SG] if group in ("login", "cpu") else [EFA_SG, NODE_SG]
        for interface in data["NetworkInterfaces"]:
            assert interface["Groups"] == expected, group
            assert interface["SubnetId"] == SUBNET
            assert interface["DeleteOnTermination"] is True


def test_login_and_cpu_groups_have_one_ena_interface(main):
    lts = launch_templates(main)
    for group in ("login", "cpu"):
        assert lts[group]["NetworkInterfaces"] == [
            {"DeviceIndex": 0, "NetworkCardIndex": 0, "SubnetId": SUBNET, "Groups": [NODE_SG],
             "DeleteOnTermination": True}]


def test_imdsv2_only_and_reachable_from_containers(main):
    """Hop limit 2: a job in a container with bridge networking is one hop further from the
    metadata service than the host, and still gets the node role's credentials."""
    for data in launch_templates(main).values():
        assert data["MetadataOptions"] == {"HttpTokens": "required", "HttpPutResponseHopLimit": 2,
                                           "HttpEndpoint": "enabled"}


def test_encrypted_gp3_root_volume_of_the_spec_size(main):
    sizes = {g.name: g.root_volume_gib for g in specs()["main"].node_groups} | {"login": 256}
    assert sizes["cpu"] == 200 and sizes["p5cb"] == 512
    for group, data in launch_templates(main).items():
        assert data["BlockDeviceMappings"] == [{"DeviceName": "/dev/sda1", "Ebs": {
            "VolumeType": "gp3", "VolumeSize": sizes[group], "Encrypted": True, "DeleteOnTermination": True}}]


def test_tags_for_instances_and_volumes(main):
    data = launch_templates(main)["p5cb"]
    assert [spec["ResourceType"] for spec in data["TagSpecifications"]] == ["instance", "volume"]
    tags = {t["Key"]: t["Value"] for t in data["TagSpecifications"][1]["Tags"]}
    assert tags == {"team": "ml-platform", "fmcluster:cluster": "pcs-main", "fmcluster:node-group": "p5cb"}


# --- capacity -----------------------------------------------------------------------------

def test_capacity_block(main):
    data = launch_templates(main)["p5cb"]
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}}
    assert data["InstanceType"] == "p5.48xlarge"
    assert node_groups(main)["p5cb"]["PurchaseOption"] == "CAPACITY_BLOCK"


def test_reservation_by_id(main):
    data = launch_templates(main)["p5en"]
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0fedcba9876543210"}}
    assert "InstanceMarketOptions" not in data and "InstanceType" not in data
    assert node_groups(main)["p5en"]["PurchaseOption"] == "ONDEMAND"


def test_reservation_by_resource_group(main):
    data = launch_templates(main)["b200"]
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": RG_ARN}}
    assert node_groups(main)["b200"]["PurchaseOption"] == "ONDEMAND"


def test_spot_is_the_node_groups_purchase_option(main):
    data = launch_templates(main)["b300"]
    assert "InstanceMarketOptions" not in data and "CapacityReservationSpecification" not in data
    assert node_groups(main)["b300"]["PurchaseOption"] == "SPOT"


def test_on_demand_groups_target_nothing(main):
    for group in ("cpu", "login"):
        data = launch_templates(main)[group]
        assert not {"InstanceMarketOptions", "CapacityReservationSpecification", "InstanceType"} & set(data)
        assert node_groups(main)[group]["PurchaseOption"] == "ONDEMAND"


def test_placement_groups_from_the_spec(main):
    """auto: a new cluster placement group for spot and on-demand EFA groups, in the group's own
    nested stack; a name: that existing group; none, Capacity Blocks, reservations, no EFA: none."""
    (pg_id, pg), = resources(main, "AWS::EC2::PlacementGroup").items()
    assert pg == {"Strategy": "cluster", "Tags": [{"Key": "Name", "Value": "pcs-main-b300"}]}
    placed = {g: d["Placement"] for g, d in launch_templates(main).items() if "Placement" in d}
    assert placed == {"p5en": {"GroupName": PLACEMENT_GROUP}, "b300": {"GroupName": {"Ref": pg_id}}}


def test_one_nested_stack_per_spec_node_group(synthesized):
    """The login group stays in the cluster stack; each spec group's resources are in its own."""
    path = synthesized["main"]
    nested = nested_templates(path.parent, stack_name(path))
    assert set(nested) == {f"pcs-main-cluster/NodeGroup-{g}" for g in ("p5cb", "p5en", "b200", "b300", "cpu")}
    for name, template in nested.items():
        group = name.rsplit("-", 1)[1]
        types_ = sorted(r["Type"] for lid, r in template.body["Resources"].items() if lid != "CDKMetadata")
        expected = ["AWS::EC2::LaunchTemplate", "AWS::IAM::Policy", "AWS::PCS::ComputeNodeGroup",
                    "AWS::PCS::Queue"]  # the policy: the node role reads the group's scripts
        assert types_ == sorted(expected + (["AWS::EC2::PlacementGroup"] if group == "b300" else [])), name
        assert all(lid.startswith(f"NodeGroup{group}") for lid in template.body["Resources"] if lid != "CDKMetadata")
    parent = json.loads(path.read_text())["Resources"]
    assert {r["Type"] for r in parent.values()} >= {"AWS::PCS::Cluster", "AWS::EC2::LaunchTemplate"}  # login
    assert sum(r["Type"] == "AWS::CloudFormation::Stack" for r in parent.values()) == 5


# --- PCS cluster, node groups, queues -------------------------------------------------------

@pytest.mark.parametrize("key, size", [("p5-pcs", "SMALL"), ("main", "MEDIUM"), ("large", "LARGE")])
def test_cluster_size_from_node_count(templates, key, size):
    (cluster,) = resources(templates[key], "AWS::PCS::Cluster").values()
    assert cluster["Size"] == size


def test_cluster_size_counts_maximum_nodes_and_login():
    loaded = {key: resolve(specs()[key]) for key in ("p5-pcs", "main", "large")}
    assert {key: m.total_nodes for key, m in loaded.items()} == {"p5-pcs": 17, "main": 100, "large": 1000}
    assert [m.pcs_size.name for m in loaded.values()] == ["SMALL", "MEDIUM", "LARGE"]


def test_cluster_scheduler_and_networking(main):
    (cluster,) = resources(main, "AWS::PCS::Cluster").values()
    assert cluster["Scheduler"] == {"Type": "SLURM", "Version": "25.05"}
    assert cluster["Networking"] == {"SubnetIds": [SUBNET], "SecurityGroupIds": [NODE_SG]}
    assert cluster["SlurmConfiguration"] == {"ScaleDownIdleTimeInSeconds": 600}
    assert cluster["Name"] == "pcs-main"


def test_queues_named_after_groups_and_bound_to_them(main):
    queues = by_name(main, "AWS::PCS::Queue")
    groups = by_name(main, "AWS::PCS::ComputeNodeGroup")
    assert set(queues) == {"p5cb", "p5en", "b200", "b300", "cpu"}  # no queue for the login nodes
    for name, (_, queue) in queues.items():
        group_id = groups[name][0]
        assert queue["ComputeNodeGroupConfigurations"] == [{"ComputeNodeGroupId": {"Fn::GetAtt": [group_id, "Id"]}}]


def test_node_group_uses_its_launch_template_and_subnet(main):
    lt_ids = {}
    for lid, props in resources(main, "AWS::EC2::LaunchTemplate").items():
        tags = {t["Key"]: t["Value"] for t in props["LaunchTemplateData"]["TagSpecifications"][0]["Tags"]}
        lt_ids[tags["fmcluster:node-group"]] = lid
    for name, group in node_groups(main).items():
        assert group["CustomLaunchTemplate"] == {"TemplateId": {"Ref": lt_ids[name]},
                                                 "Version": {"Fn::GetAtt": [lt_ids[name], "LatestVersionNumber"]}}
        assert group["SubnetIds"] == [SUBNET]
        assert group["InstanceConfigs"] == [{"InstanceType": {
            "login": "m7i.2xlarge", "p5cb": "p5.48xlarge", "p5en": "p5en.48xlarge", "b200": "p6-b200.48xlarge",
            "b300": "p6-b300.48xlarge", "cpu": "c7i.8xlarge"}[name]}]


def test_scaling_from_count_and_from_min_max(main):
    scaling = {name: (g["ScalingConfiguration"]["MinInstanceCount"], g["ScalingConfiguration"]["MaxInstanceCount"])
               for name, g in node_groups(main).items()}
    assert scaling == {"login": (2, 2), "p5cb": (16, 16), "p5en": (8, 8), "b200": (0, 8), "b300": (0, 6),
                       "cpu": (2, 60)}


def test_groups_launch_from_their_baked_image_and_ami_id_overrides(main):
    amis = {name: g["AmiId"] for name, g in node_groups(main).items()}
    assert amis.pop("cpu") == "ami-0123456789abcdef0"
    assert set(amis.values()) == {image_id("pcs-x86_64")}  # NAME-images' AMI (stand-in refs)
    assert DEFAULT_AMI not in json.dumps(main)
    assert "Parameters" not in main or not any("Ami" in p for p in main["Parameters"])


def test_images_in_the_model_need_the_images_refs():
    from fmcluster_cdk.errors import ConstructError
    from fmcluster_cdk.stacks.pcs import PcsClusterStack

    spec = specs()["p5-pcs"]
    with pytest.raises(ConstructError, match="baked node images"):
        PcsClusterStack(new_app(), "no-images", model=resolve(spec), network=network(), storage=storage(spec))


def test_outputs(main):
    outputs = main["Outputs"]
    (cluster_id,) = resources(main, "AWS::PCS::Cluster")
    assert outputs["ClusterId"]["Value"] == {"Fn::GetAtt": [cluster_id, "Id"]}
    login_group = by_name(main, "AWS::PCS::ComputeNodeGroup")["login"][0]
    assert outputs["LoginNodeGroupId"]["Value"] == {"Fn::GetAtt": [login_group, "Id"]}
    assert outputs["QueueNames"]["Value"] == "p5cb,p5en,b200,b300,cpu"


def test_no_login_group_without_login_nodes():
    data = base_spec(name="nologin", orchestrator={"type": "pcs", "login": {"count": 0}})
    spec = load_spec(loader.load_text(to_yaml(data)))
    stack = build(new_app(), spec)
    assert set(stack.node_groups) == {"gpu"} and not stack.node.try_find_child("Login")


# --- IAM ----------------------------------------------------------------------------------

REPLACER = "NodeReplacer"  # the node replacer's resources (tests/cdk/test_node_replacer.py)


def _role(template):
    """The nodes' role (the node replacer's function has a role of its own)."""
    (role,) = [r for r in resources(template, "AWS::IAM::Role").values()
               if "ec2.amazonaws.com" in json.dumps(r["AssumeRolePolicyDocument"])]
    return role


def _statements(template):
    (policy,) = _role(template)["Policies"]
    return {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}


def test_role_path_and_generated_name(main):
    role = _role(main)
    assert role["Path"] == "/aws-pcs/" and "RoleName" not in role
    (profile,) = resources(main, "AWS::IAM::InstanceProfile").values()
    assert profile["Path"] == "/aws-pcs/" and "InstanceProfileName" not in profile
    arn = role["ManagedPolicyArns"][0]["Fn::Join"][1][-1]
    assert arn.endswith(":iam::aws:policy/AmazonSSMManagedInstanceCore")
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}


def test_instance_profile_given_to_every_node_group(main):
    (profile_id,) = resources(main, "AWS::IAM::InstanceProfile")
    for group in node_groups(main).values():
        assert group["IamInstanceProfileArn"] == {"Fn::GetAtt": [profile_id, "Arn"]}


def test_pcs_registration_scoped_to_the_cluster(main):
    (cluster_id,) = resources(main, "AWS::PCS::Cluster")
    statement = _statements(main)["RegisterWithPcsCluster"]
    assert statement["Action"] == "pcs:RegisterComputeNodeGroupInstance"
    assert statement["Resource"] == {"Fn::GetAtt": [cluster_id, "Arn"]}


def test_s3_only_on_the_clusters_buckets(main):
    arns = sorted(storage(specs()["main"]).bucket_arns.values())
    statements = _statements(main)
    assert statements["ClusterBuckets"]["Resource"] == arns
    assert statements["ClusterBucketObjects"]["Resource"] == [f"{arn}/*" for arn in arns]
    for statement in statements.values():
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources_ = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        # only actions without resource types (Service Authorization Reference) are on "*"
        assert "*" not in resources_ or actions in (["ec2:DescribeInstanceTopology"], ["ecr:GetAuthorizationToken"],
                                                    ["ec2:DescribeCapacityReservations", "ec2:DescribeInstances"]), \
            statement
        if any(a.startswith("s3:") for a in actions):
            assert all(r in arns or r.removesuffix("/*") in arns for r in resources_)
        assert not any(a.endswith("*") for a in actions)


def test_kms_only_with_a_storage_key(main, templates):
    assert _statements(main)["StorageKey"] == {"Sid": "StorageKey", "Effect": "Allow", "Resource": KMS_KEY,
                                                 "Action": ["kms:Decrypt", "kms:GenerateDataKey"]}
    assert "StorageKey" not in _statements(templates["p5-pcs"])


# --- user data and node lifecycle scripts ------------------------------------------------------

def test_user_data_is_only_the_slurmd_guard(synthesized):
    from tests.support.user_data_size import PCS_USER_DATA_BUDGET, deployed_size

    for key, path in synthesized.items():
        for group, data in launch_templates(flatten(path.parent, stack_name(path))).items():
            assert deployed_size(data["UserData"]) <= PCS_USER_DATA_BUDGET, (key, group)
            assert user_data_script(data) == pcs_node.GUARD.rstrip("\n")


def test_every_group_runs_the_lifecycle_scripts_of_its_program(main, synthesized):
    outdir = synthesized["main"].parent
    for name, group in node_groups(main).items():
        assert group["NodeLifecycleActions"]["ScriptCachingPolicy"] == "CACHE_ONCE"
        found = lifecycle_actions(outdir, group)
        assert [(stage, s["Name"]) for stage, s, _ in found][:2] == [
            ("NodeBootstrapped", "fmcluster configure"), ("NodeBootstrapped", "fmcluster storage")], name
        for stage, script, text in found:
            assert script["ScriptSource"]["Checksum"] == hashlib.sha256(text.encode()).hexdigest()
            assert "S3VersionId" not in script["ScriptSource"]
            policy = (script.get("ExecutionPolicy"), script.get("OnError"))
            phase = next(p for p in pcs_node.PHASES if p.name == script["Name"])
            assert (stage, *policy) == (phase.stage, phase.execution_policy, phase.on_error)


def main_spec_version() -> str:
    return main_spec()["orchestrator"]["version"]


def test_each_group_boots_ready_and_mounts_the_file_system(main, synthesized, tmp_path):
    """Each group's boot as PCS runs it (user data, then its lifecycle scripts with their
    arguments: tests/support/node_scripts.py) on a sandboxed node of its type (tests/support/sandbox.py)
    mounts the storage stack's file system at mount_path, and the GPU groups and the login nodes
    check and configure their image's Enroot and Pyxis (the CPU group does not)."""
    from fmcluster.facts import catalog
    from fmcluster.facts.images import slurm_prefix
    from tests.support import standins
    from tests.support.node_scripts import pcs_boot
    from tests.support.sandbox import Sandbox, Scenario, install_gpu_tools

    types = {g["name"]: g["instance_type"] for g in main_spec()["node_groups"]}
    lts = launch_templates(main)
    for group, props in node_groups(main).items():
        instance = catalog.get(types.get(group, "m7i.2xlarge"))
        node = Sandbox(tmp_path / group, Scenario(gpus=instance.gpu_count, nvme_disks=instance.nvme_disks,
                                                  efa_devices=instance.max_efa_interfaces,
                                                  image_slurm_prefix=slurm_prefix("pcs", main_spec_version()),
                                                  slurmd_unit=f"slurmd-{main_spec_version()}.service"))
        if instance.is_gpu:  # the base's DCGM and nccl-tests, for the deep check of a new node
            install_gpu_tools(node, busbw_gbps=instance.gpu.nvlink_gbps / 2 if instance.gpu.nvlink_gbps else 400.0)
        script, files = pcs_boot(synthesized["main"].parent, props, lts[group]["UserData"]["Fn::Base64"])
        result = node.run(script, name="boot/pcs-boot.sh",  # the stand-ins' commits as the pins
                          files={f"boot/{n}": standins.with_pins(t, node.upstream) for n, t in files.items()})
        assert result.returncode == 0, (group, result.stderr)
        fsx = node.mounts()["/fsx"]
        assert (fsx.fstype, fsx.source) == ("lustre", f"{FS_DNS}@tcp:/{FS_MOUNT}"), group
        runtime = group == "login" or instance.is_gpu
        assert ("containers: Enroot" in result.stderr) == runtime, group
        assert node.run("systemctl start slurmd.service", name="start.sh").returncode == 0, group


def test_the_published_scripts_are_the_groups_program(main, synthesized):
    outdir = synthesized["main"].parent
    texts = {name: "".join(t for _, _, t in lifecycle_actions(outdir, g)) for name, g in node_groups(main).items()}
    assert "NVME_DISK_COUNT=8\n" in texts["p5cb"] and "export FI_PROVIDER=efa" in texts["p5cb"]
    assert "FI_EFA_USE_DEVICE_RDMA=1" in texts["p5cb"]
    assert "setup_scratch" not in texts["cpu"] and "FI_PROVIDER" not in texts["cpu"]
    assert all("setup_containers" in texts[g] for g in ("login", "p5cb", "b300"))
    assert "setup_containers" not in texts["cpu"]


def test_without_lustre_nothing_mounts_it(templates, synthesized):
    outdir = synthesized["large"].parent
    for group in node_groups(templates["large"]).values():
        for _, _, text in lifecycle_actions(outdir, group):
            assert "mount_lustre" not in text and "FSX_" not in text


def test_the_node_role_reads_exactly_the_scripts(main):
    """s3:GetObject on each published script object, nothing else of the asset bucket; the node
    group waits for the grant."""
    policies = resources(main, "AWS::IAM::Policy")
    (role_id,) = [lid for lid in resources(main, "AWS::IAM::Role") if not lid.startswith(REPLACER)]
    for group in by_logical_id(main, "AWS::PCS::ComputeNodeGroup").values():
        locations = [joined(s["ScriptSource"]["ScriptLocation"]) for stage in
                     group["Properties"]["NodeLifecycleActions"]["Stages"].values() for s in stage]
        reads = [pid for pid in group["DependsOn"] if pid in policies]
        (policy,) = [policies[pid] for pid in reads]
        assert policy["Roles"] == [{"Ref": role_id}]
        (statement,) = policy["PolicyDocument"]["Statement"]
        assert statement["Action"] == "s3:GetObject"
        objects = sorted(joined(r).removeprefix("arn:${AWS::Partition}:s3:::") for r in statement["Resource"])
        assert objects == sorted(loc.removeprefix("s3://") for loc in locations)
        assert all(o.endswith(".sh") and "*" not in o for o in objects)


def test_deploy_time_values_are_arguments_within_pcs_limits(tmp_path):
    """With the storage and observability stacks' real outputs (tokens), the file system's source
    and the remote-write URL reach each script as arguments: at most 20, each at most 256
    characters at the longest any region and id can make them (tests/support/user_data_size.py)."""
    import types

    import aws_cdk as cdk

    from tests.support.user_data_size import resolved

    spec = specs()["p5-pcs"]
    refs = storage(spec)
    refs.file_system_dns_name = cdk.Fn.import_value("storage:FileSystemDNSName")
    refs.file_system_mount_name = cdk.Fn.import_value("storage:FileSystemLustreMountName")
    obs = types.SimpleNamespace(workspace_arn="arn:aws:aps:us-east-1:111122223333:workspace/ws-1",
                                remote_write_url=cdk.Fn.import_value("observability:PrometheusEndpoint")
                                + "api/v1/remote_write")
    from fmcluster_cdk.stacks.pcs import PcsClusterStack
    model = resolve(spec)
    app = new_app(tmp_path)
    stack = PcsClusterStack(app, "tokens", model=model, network=network(), storage=refs, observability=obs,
                            images=images_refs(model), env=cdk.Environment(region=spec.region))
    app.synth()
    template = flatten(tmp_path, stack.stack_name)
    for name, group in node_groups(template).items():
        for _, script, text in lifecycle_actions(tmp_path, group):
            if script["Name"] == "fmcluster accounting":  # the teams come from an SSM parameter: no argument
                assert "Arguments" not in script and "Token[" not in text
                continue
            arguments = [resolved(a) for a in script["Arguments"]]
            assert [a.split("=", 1)[0] for a in arguments] == ["REMOTE_WRITE_URL", "FSX_SOURCE"], name
            assert len(arguments) <= 20 and max(map(len, arguments)) <= 256, (name, arguments)
            assert "Token[" not in text and "placeholder" not in text


# --- the template as a whole ----------------------------------------------------------------

def test_logical_ids_come_from_group_names_not_positions(main):
    """Reordering the groups and adding one keeps every existing logical ID."""
    import aws_cdk as cdk

    data = main_spec()
    data["node_groups"] = [{"name": "extra", "instance_type": "p5.4xlarge", "count": 1}] + data["node_groups"][::-1]
    stack = build(new_app(), load_spec(loader.load_text(to_yaml(data))))
    ids = {cdk.Stack.of(c).resolve(cdk.Stack.of(c).get_logical_id(c))
           for c in stack.node.find_all() if isinstance(c, cdk.CfnElement)}
    assert set(main["Resources"]) - {"CDKMetadata"} <= ids  # CDKMetadata is added at synthesis


def test_cfn_lint_finds_no_errors(synthesized):
    from tests.support.cfn_lint import findings

    for key, path in every_template(synthesized):
        errors = [f"{m.rule.id} {m.message} ({'/'.join(map(str, m.path))})"
                  for m in findings(path, regions=[specs()[key].region]) if m.rule.id.startswith("E")]
        assert errors == [], key


def test_launch_templates_stay_well_under_the_template_limit(synthesized):
    assert max(path.stat().st_size for _, path in every_template(synthesized)) < 500_000


def test_two_synths_are_byte_identical(synthesized, tmp_path):
    stack = synth_main(tmp_path / "again")
    first = synthesized["main"].read_bytes()
    assert (tmp_path / "again" / f"{stack.stack_name}.template.json").read_bytes() == first


# --- teams (Slurm accounting) ------------------------------------------------------------------

def test_teams_turn_pcs_accounting_on_and_a_cluster_without_teams_keeps_it_off(templates):
    from fmcluster.node import accounting

    ((_, with_teams),) = resources(templates["p5-pcs"], "AWS::PCS::Cluster").items()
    slurm = with_teams["SlurmConfiguration"]
    assert slurm["Accounting"] == {"Mode": "STANDARD", "DefaultPurgeTimeInDays": -1}
    settings = {s["ParameterName"]: s["ParameterValue"] for s in slurm["SlurmCustomSettings"]}
    assert settings == accounting.pcs_settings()  # only what PCS documents as settable
    for key in ("main", "large"):
        ((_, without),) = resources(templates[key], "AWS::PCS::Cluster").items()
        assert "Accounting" not in without["SlurmConfiguration"]
        assert not [lid for lid in resources(templates[key], "AWS::SSM::Parameter") if not lid.startswith(REPLACER)]


def test_the_teams_data_is_an_ssm_parameter_the_login_nodes_apply(templates, synthesized):
    from fmcluster.node import accounting

    template = templates["p5-pcs"]
    model = resolve(specs()["p5-pcs"])
    ((_, parameter),) = [(lid, p) for lid, p in resources(template, "AWS::SSM::Parameter").items()
                         if not lid.startswith(REPLACER)]
    assert parameter["Name"] == "/fmcluster/llm-pretrain/slurm-teams"
    assert parameter["Value"] == accounting.data(model.teams)
    path = synthesized["p5-pcs"]
    named = {name: [(s["Name"], text) for _, s, text in lifecycle_actions(path.parent, group)]
             for name, group in node_groups(template).items()}
    ((login_action, text),) = [(n, t) for n, t in named[model.login.name] if n == "fmcluster accounting"]
    assert text == accounting.install_script(parameter=parameter["Name"], region="us-east-1",
                                             slurm_bin="/opt/aws/pcs/scheduler/slurm-25.05/bin")
    assert all(n != "fmcluster accounting" for group, found in named.items() if group != model.login.name
               for n, _ in found)
    statements = [s for lid, p in resources(template, "AWS::IAM::Policy").items() if not lid.startswith(REPLACER)
                  for s in p["PolicyDocument"]["Statement"] if "ssm:GetParameter" in s["Action"]]
    (parameter_id,) = [lid for lid in resources(template, "AWS::SSM::Parameter") if not lid.startswith(REPLACER)]
    assert [s["Action"] for s in statements] == ["ssm:GetParameter"]
    assert all(f'"Ref": "{parameter_id}"' in json.dumps(s["Resource"]) for s in statements)


def test_a_dedicated_group_s_queue_lets_only_its_team_in():
    import aws_cdk as cdk

    data = base_spec(teams=[{"name": "evals", "members": ["eve"], "gpus": {"gpu": 8}}])
    data["orchestrator"] = {"type": "pcs", "version": "25.05", "login": {"instance_type": "m7i.2xlarge", "count": 1}}
    data["node_groups"].append({"name": "own", "instance_type": "p5.48xlarge", "count": 1, "team": "evals"})
    stack = build(new_app(), load_spec(loader.load_text(to_yaml(data))))
    queues = {q.resource.name: cdk.Stack.of(q).resolve(q.resource.slurm_configuration)
              for q in stack.queues.values()}
    assert queues["own"]["slurmCustomSettings"] == [{"parameterName": "AllowAccounts", "parameterValue": "evals"}]
    assert queues["gpu"] is None
