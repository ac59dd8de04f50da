"""NAME-cluster for SageMaker HyperPod, synthesized once per module.

One CDK app holds: a hyperpod-slurm spec with every capacity HyperPod takes, GPU, CPU and
EFA-less groups, a login group, a KMS key and a custom AMI ("main"); a small one without Lustre,
buckets or login nodes ("bare"); examples/p6-b200-hyperpod-slurm.yaml ("example");
examples/p5-hyperpod-eks.yaml ("eks": training plan and Spot groups on an EKS cluster); and the
network stack of "main" (no placement groups on HyperPod). Network and storage outputs are stand-ins, as in
tests/cdk/test_pcs_stack.py (tests/support/stacks.py); tests/cdk/test_examples_synth.py synthesizes the
examples with the real stacks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fmcluster.model.cluster import resolve
from fmcluster.node import hyperpod as hyperpod_node
from fmcluster.node import nccl as node_nccl
from fmcluster.node.refs import NodeRefs
from fmcluster.spec import loader
from tests.support.hyperpod import cluster, groups, statements, the_role
from tests.support.paths import EXAMPLES_DIR
from tests.support.specs import base_spec, to_yaml
from tests.support.stacks import (
    EFA_SG,
    FS_DNS,
    FS_MOUNT,
    KMS_KEY,
    NODE_SG,
    SUBNET,
    joined,
    load_spec,
    new_app,
    resources,
)
from tests.support.stacks import cluster as cluster_stack
from tests.support.stacks import image_id as stand_in_image_id

pytestmark = pytest.mark.synth

EXAMPLE = EXAMPLES_DIR / "p6-b200-hyperpod-slurm.yaml"
EKS_EXAMPLE = EXAMPLES_DIR / "p5-hyperpod-eks.yaml"
PLAN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5-plan"
AMI = "ami-0123456789abcdef0"
ASSET_BUCKET = "cdk-hnb659fds-assets-${AWS::AccountId}-us-east-1"


def main_spec() -> dict:
    spec = base_spec(
        name="hp-main",
        orchestrator={"type": "hyperpod-slurm", "login": {"instance_type": "m7i.2xlarge", "count": 2}},
        node_groups=[
            {"name": "p5cb", "instance_type": "p5.48xlarge", "count": 16,
             "capacity": {"type": "capacity-block", "training_plan_arn": PLAN}},
            {"name": "b200", "instance_type": "p6-b200.48xlarge", "count": 4, "root_volume_gib": 1024,
             "capacity": {"type": "reservation", "training_plan_arn": PLAN}},
            {"name": "noefa", "instance_type": "p5.4xlarge", "count": 2, "efa": False, "ami_id": AMI},
            {"name": "cpu", "instance_type": "m7i.8xlarge", "count": 4, "root_volume_gib": 200},
        ],
        tags={"team": "ml-platform"})
    spec["storage"]["kms"] = True
    return spec


def bare_spec() -> dict:
    spec = base_spec(name="hp-bare", orchestrator={"type": "hyperpod-slurm", "login": {"count": 0}},
                     node_groups=[{"name": "cpu", "instance_type": "r7i.4xlarge", "count": 2}])
    spec["storage"] = {}
    return spec


_SPECS: dict = {}


def specs() -> dict:
    if not _SPECS:
        _SPECS["main"] = load_spec(loader.load_text(to_yaml(main_spec()), "main.yaml"))
        _SPECS["bare"] = load_spec(loader.load_text(to_yaml(bare_spec()), "bare.yaml"))
        _SPECS["example"] = load_spec(loader.load(EXAMPLE))
        _SPECS["eks"] = load_spec(loader.load(EKS_EXAMPLE))
        private = base_spec(name="hp-private", orchestrator={"type": "hyperpod-eks", "endpoint_access": "private"},
                            network={"extra_availability_zone_ids": ["use1-az6"]})
        del private["storage"]["lustre"]
        _SPECS["eks-private"] = load_spec(loader.load_text(to_yaml(private), "private.yaml"))
    return _SPECS


def build(app, spec):
    return cluster_stack(app, spec)


@pytest.fixture(scope="module")
def assembly(tmp_path_factory):
    """(outdir, {key: stack}): every stack of one app, synthesized once."""
    import aws_cdk as cdk

    from fmcluster_cdk.stacks.network import NetworkStack

    outdir = tmp_path_factory.mktemp("hyperpod") / "cdk.out"
    app = new_app(outdir)
    stacks = {key: build(app, spec) for key, spec in specs().items()}
    stacks["network"] = NetworkStack(app, "hp-main-network", model=resolve(specs()["main"]),
                                     env=cdk.Environment(region="us-east-1"))
    app.synth()
    return outdir, stacks


@pytest.fixture(scope="module")
def templates(assembly):
    outdir, stacks = assembly
    return {key: json.loads((outdir / f"{stack.stack_name}.template.json").read_text())
            for key, stack in stacks.items()}


@pytest.fixture(scope="module")
def main(templates):
    return templates["main"]


# --- instance groups, Slurm and resiliency -------------------------------------------------

def test_one_cluster_with_controller_login_and_a_group_per_node_group(main):
    assert list(groups(main)) == ["controller", "login", "p5cb", "b200", "noefa", "cpu"]
    types = {name: g["InstanceType"] for name, g in groups(main).items()}
    assert types == {"controller": "ml.m7i.2xlarge", "login": "ml.m7i.2xlarge", "p5cb": "ml.p5.48xlarge",
                     "b200": "ml.p6-b200.48xlarge", "noefa": "ml.p5.4xlarge", "cpu": "ml.m7i.8xlarge"}
    counts = {name: g["InstanceCount"] for name, g in groups(main).items()}
    assert counts == {"controller": 1, "login": 2, "p5cb": 16, "b200": 4, "noefa": 2, "cpu": 4}
    assert cluster(main)["ClusterName"] == "hp-main"


def test_api_driven_slurm_configuration(main, templates):
    import aws_cdk as cdk

    from fmcluster_cdk.stacks.hyperpod import slurm_orchestrator
    from tests.support.stacks import ACCOUNTING_DATABASE

    # without teams or a storage key: HyperPod manages slurm.conf's partitions, with drift detection
    stack = cdk.Stack()
    assert stack.resolve(slurm_orchestrator(None)) == {"slurm": {"slurmConfigStrategy": "Managed"}}
    # the example's teams: their accounting database, which needs continuous provisioning
    assert cluster(templates["example"])["Orchestrator"] == {"Slurm": {"AccountingDatabase": {
        "Endpoint": ACCOUNTING_DATABASE.endpoint, "Port": 3306, "Name": "slurm_acct_db",
        "SecretArn": ACCOUNTING_DATABASE.secret.secret_arn}}}
    assert cluster(templates["example"])["NodeProvisioningMode"] == "Continuous"
    # storage.kms: continuous provisioning (for the volume key), which takes no SlurmConfigStrategy
    assert cluster(main)["Orchestrator"] == {"Slurm": {}}
    slurm = {name: g["SlurmConfig"] for name, g in groups(main).items()}
    assert slurm["controller"] == {"NodeType": "Controller"}
    assert slurm["login"] == {"NodeType": "Login"}
    for name in ("p5cb", "b200", "noefa", "cpu"):
        assert slurm[name] == {"NodeType": "Compute", "PartitionNames": [name]}


def test_controller_sized_by_node_count(templates):
    # hp-main manages 28 nodes + 2 login nodes; the example 18 + 1: both fit the smallest size
    assert groups(templates["example"])["controller"]["InstanceType"] == "ml.m7i.2xlarge"


def test_deep_health_checks_on_gpu_groups_only(main):
    checks = {name: g.get("OnStartDeepHealthChecks") for name, g in groups(main).items()}
    assert checks == {"controller": None, "login": None, "cpu": None,
                      "p5cb": ["InstanceStress", "InstanceConnectivity"],
                      "b200": ["InstanceStress", "InstanceConnectivity"],
                      "noefa": ["InstanceStress", "InstanceConnectivity"]}


def test_automatic_node_recovery(templates):
    for key in ("main", "bare", "example", "eks"):
        assert cluster(templates[key])["NodeRecovery"] == "Automatic"


def test_threads_per_core_one_on_gpu_nodes(main):
    assert {n: g["ThreadsPerCore"] for n, g in groups(main).items()} == {
        "controller": 2, "login": 2, "p5cb": 1, "b200": 1, "noefa": 1, "cpu": 2}


def test_efa_only_interfaces_on_efa_groups(main):
    interfaces = {n: g.get("NetworkInterface") for n, g in groups(main).items()}
    assert interfaces == {"controller": None, "login": None, "noefa": None, "cpu": None,
                          "p5cb": {"InterfaceType": "efa-only"}, "b200": {"InterfaceType": "efa-only"}}


def test_training_plans_on_reserved_groups_only(main):
    plans = {n: g.get("TrainingPlanArn") for n, g in groups(main).items()}
    assert plans == {"controller": None, "login": None, "p5cb": PLAN, "b200": PLAN, "noefa": None, "cpu": None}


def test_custom_ami_becomes_the_image_id(main):
    """A group's own ami_id is its image; every other group launches from the baked node image of
    NAME-images (a stand-in AMI id here; tests/cdk/test_images_stack.py reads the real reference)."""
    baked = stand_in_image_id("hyperpod-slurm-x86_64")
    assert {n: g.get("ImageId") for n, g in groups(main).items()} == {
        "controller": baked, "login": baked, "p5cb": baked, "b200": baked, "noefa": AMI, "cpu": baked}


def test_volume_and_lustre_on_every_group(templates):
    for name, group in groups(templates["example"]).items():
        ebs, fsx = group["InstanceStorageConfigs"]
        size = {"controller": 256, "login": 256}.get(name, 512)
        assert ebs == {"EbsVolumeConfig": {"VolumeSizeInGB": size}}, name  # /opt/sagemaker: HyperPod sizes the root
        assert fsx["FsxLustreConfig"]["MountPath"] == "/fsx", name


def test_storage_key_encrypts_every_volume(main):
    """storage.kms: the storage key on the root volume (RootVolume, no size: HyperPod sizes it) and on
    the /opt/sagemaker volume of every group, in continuous provisioning (SageMaker Developer Guide,
    "Customer managed AWS KMS key encryption for SageMaker HyperPod")."""
    assert cluster(main)["NodeProvisioningMode"] == "Continuous"
    for name, group in groups(main).items():
        root, ebs, fsx = group["InstanceStorageConfigs"]
        size = {"controller": 256, "login": 256, "b200": 1024, "cpu": 200}.get(name, 512)
        assert root == {"EbsVolumeConfig": {"RootVolume": True, "VolumeKmsKeyId": KMS_KEY}}, name
        assert ebs == {"EbsVolumeConfig": {"VolumeSizeInGB": size, "VolumeKmsKeyId": KMS_KEY}}, name
        assert fsx == {"FsxLustreConfig": {"DnsName": FS_DNS, "MountName": FS_MOUNT, "MountPath": "/fsx"}}, name


def test_execution_role_may_grant_the_volume_key_to_ebs_through_sagemaker(main, templates):
    """What the guide asks of the execution role: kms:CreateGrant and kms:DescribeKey on the key;
    scoped as its key policy example is (through SageMaker; grants for AWS resources only)."""
    st = statements(main)
    via = {"kms:ViaService": {"Fn::Join": ["", ["sagemaker.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]}}
    assert st["VolumeKeyGrants"] == {"Sid": "VolumeKeyGrants", "Effect": "Allow", "Action": "kms:CreateGrant",
                                     "Resource": KMS_KEY, "Condition": {
                                         "StringEquals": via, "Bool": {"kms:GrantIsForAWSResource": "true"}}}
    assert st["VolumeKeyDescribe"] == {"Sid": "VolumeKeyDescribe", "Effect": "Allow", "Action": "kms:DescribeKey",
                                       "Resource": KMS_KEY, "Condition": {"StringEquals": via}}
    for key in ("example", "bare"):  # no storage key: AWS owned keys, no KMS permission, no provisioning mode
        assert not {"VolumeKeyGrants", "VolumeKeyDescribe", "StorageKey"} & set(statements(templates[key]))
        assert "VolumeKmsKeyId" not in json.dumps(cluster(templates[key]))


def test_no_lustre_config_without_a_file_system(templates):
    group = groups(templates["bare"])["cpu"]
    assert group["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 512}}]
    assert list(groups(templates["bare"])) == ["controller", "cpu"]  # login count 0: no login group


def test_vpc_config(templates):
    assert cluster(templates["main"])["VpcConfig"] == {"Subnets": [SUBNET], "SecurityGroupIds": [NODE_SG, EFA_SG]}
    assert cluster(templates["bare"])["VpcConfig"] == {"Subnets": [SUBNET], "SecurityGroupIds": [NODE_SG]}


# --- lifecycle scripts -----------------------------------------------------------------------

def test_every_group_runs_its_own_lifecycle_folder(main):
    uris = {}
    for name, group in groups(main).items():
        config = group["LifeCycleConfig"]
        assert config["OnInitComplete"] == "on_init.sh" and "OnCreate" not in config
        uris[name] = joined(config["SourceS3Uri"])
        assert uris[name].startswith(f"s3://{ASSET_BUCKET}/fmcluster-lifecycle/") and uris[name].endswith("/")
    assert len(set(uris.values())) == len(uris)


def test_lifecycle_files_are_published_as_file_assets(assembly, main):
    outdir, stacks = assembly
    manifest = json.loads((outdir / f"{stacks['main'].stack_name}.assets.json").read_text())
    spec = specs()["main"]
    model = resolve(spec)
    # what the stack hands the lifecycle scripts: the node replacer's queue (no observability here)
    refs = NodeRefs(replacement_queue=f"{spec.name}-node-replacements" if spec.health.replace else "")
    for name, group in groups(main).items():
        assert group["InstanceType"].removeprefix("ml.") == model.group(name).instance_type
        bundle = hyperpod_node.bundle(model, model.group(name), refs)  # each group's setup (fmcluster.model.node)
        uri = joined(group["LifeCycleConfig"]["SourceS3Uri"])
        assert uri.endswith(f"/fmcluster-lifecycle/{spec.name}/{bundle.digest}/")
        asset = manifest["files"][f"fmcluster-lifecycle/{spec.name}/{bundle.digest}/on_init"]
        assert asset["source"]["packaging"] == "file"
        (destination,) = asset["destinations"].values()
        assert destination["objectKey"] == f"fmcluster-lifecycle/{spec.name}/{bundle.digest}/on_init.sh"
        assert destination["bucketName"] == ASSET_BUCKET
        assert (outdir / asset["source"]["path"]).read_text() == bundle.files["on_init.sh"]


def test_gpu_lifecycle_script_sets_up_scratch_and_nccl(assembly, main, tmp_path):
    """The b200 group's on_init.sh as published, run on a sandboxed HyperPod node: scratch on the
    instance store, the EFA environment, HyperPod's /fsx checked, Enroot and Pyxis built."""
    from tests.support import standins
    from tests.support.sandbox import Sandbox, Scenario

    outdir, _ = assembly
    folder = lifecycle_folder(outdir, groups(main)["b200"])
    node = Sandbox(tmp_path, Scenario(os_release="jammy", slurmd=False, dlami_nvme=0,
                                      slurmd_plugstack="include /opt/slurm/etc/plugstack.conf.d/pyxis.conf\n"))
    (node.root / "fsx").mkdir()
    node.run("mount -t lustre -o relatime,flock fs-1@tcp:/x /fsx", name="hyperpod-mount.sh")
    # as published, but pinned to the stand-ins of Enroot and Pyxis the sandbox's git clones
    script = standins.with_pins((folder / "on_init.sh").read_text(), node.upstream)
    result = node.run(script, name="lifecycle/on_init.sh")
    assert result.returncode == 0, result.stderr
    assert node.mounts()["/scratch"].backing == "instance-store" and not node.calls("scontrol")
    assert "FI_EFA_USE_DEVICE_RDMA=1" in node.file(node_nccl.NCCL_ENV_FILE)
    assert "enroot version" in node.lines("enroot") and not node.calls("git")  # the image's, checked
    assert node.exists("/opt/slurm/lib/slurm/spank_pyxis.so")


def lifecycle_folder(outdir, group) -> Path:
    digest = joined(group["LifeCycleConfig"]["SourceS3Uri"]).rstrip("/").rsplit("/", 1)[1]
    return outdir / f"asset.fmcluster-lifecycle.{digest}"


# --- execution role ----------------------------------------------------------------------------

def test_role_trusts_sagemaker_and_every_group_uses_it(main):
    role_id, role = the_role(main)
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}}]
    assert "ManagedPolicyArns" not in role  # the managed policy's sagemaker-* bucket read is not wanted
    for group in groups(main).values():
        assert group["ExecutionRole"] == {"Fn::GetAtt": [role_id, "Arn"]}


def test_role_reads_only_the_clusters_lifecycle_folders(main):
    """One grant for every folder of the cluster (its prefix), so the policy does not grow with
    the instance groups; nothing of another cluster's."""
    st = statements(main)
    folders = sorted({joined(g["LifeCycleConfig"]["SourceS3Uri"]).split("/", 3)[3] for g in groups(main).values()})
    assert len(folders) > 1 and all(f.startswith("fmcluster-lifecycle/hp-main/") for f in folders)
    assert joined(st["LifecycleScriptsRead"]["Resource"]) == \
        f"arn:${{AWS::Partition}}:s3:::{ASSET_BUCKET}/fmcluster-lifecycle/hp-main/*"
    assert st["LifecycleScriptsRead"]["Action"] == "s3:GetObject"
    assert joined(st["LifecycleScriptsList"]["Resource"]) == f"arn:${{AWS::Partition}}:s3:::{ASSET_BUCKET}"
    assert st["LifecycleScriptsList"]["Condition"]["StringLike"]["s3:prefix"] == [
        "fmcluster-lifecycle/hp-main", "fmcluster-lifecycle/hp-main/*"]


def test_role_reaches_only_the_cluster_buckets_and_key(main):
    st = statements(main)
    buckets = sorted(f"arn:aws:s3:::hp-main-{b}-111122223333-use1" for b in ("checkpoints", "datasets"))
    assert sorted(st["ClusterBuckets"]["Resource"]) == buckets
    assert sorted(st["ClusterBucketObjects"]["Resource"]) == [f"{b}/*" for b in buckets]
    assert st["StorageKey"]["Resource"] == KMS_KEY
    for statement in st.values():
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        if any(a.startswith(("s3:", "fsx:", "kms:")) for a in actions):
            assert statement["Resource"] != "*", statement["Sid"]
        assert not any(a.endswith(":*") or a == "*" for a in actions), statement["Sid"]


def test_role_network_permissions_are_scoped_to_the_cluster_vpc(main):
    st = statements(main)
    mutating = [s for s in st.values() if s["Resource"] == "*"]
    # (and the registry login of the reference GPU image's pulls, which has no resource type)
    assert {s["Sid"] for s in mutating} == {"ClusterMetrics", "SessionManager", "DescribeNetwork", "EcrAuthorization"}
    assert st["EcrAuthorization"]["Action"] == "ecr:GetAuthorizationToken"
    assert all(a.startswith("ec2:Describe") for a in st["DescribeNetwork"]["Action"])
    create = sorted(joined(r) for r in st["CreateNetworkInterfaces"]["Resource"])
    assert create == sorted(["arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:network-interface/*",
                      f"arn:${{AWS::Partition}}:ec2:${{AWS::Region}}:${{AWS::AccountId}}:subnet/{SUBNET}",
                      f"arn:${{AWS::Partition}}:ec2:${{AWS::Region}}:${{AWS::AccountId}}:security-group/{NODE_SG}",
                      f"arn:${{AWS::Partition}}:ec2:${{AWS::Region}}:${{AWS::AccountId}}:security-group/{EFA_SG}"])
    manage = st["ManageClusterNetworkInterfaces"]
    assert sorted(manage["Action"]) == ["ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
                                        "ec2:DeleteNetworkInterfacePermission", "ec2:DetachNetworkInterface"]
    assert joined(manage["Condition"]["ArnEquals"]["ec2:Vpc"]).endswith(":vpc/vpc-0aaaaaaaaaaaaaaaa")
    # DetachNetworkInterface requires the instance too (SAR); HyperPod's instances are SageMaker's
    assert st["InterfacesOnClusterInstances"]["Action"] == "ec2:DetachNetworkInterface"
    instances = "arn:${AWS::Partition}:ec2:${AWS::Region}:*:instance/*"
    assert joined(st["InterfacesOnClusterInstances"]["Resource"]) == instances
    assert "Condition" not in st["InterfacesOnClusterInstances"]  # instances have no ec2:Vpc key
    assert st["TagNetworkInterfaces"]["Action"] == "ec2:CreateTags"
    assert joined(st["TagNetworkInterfaces"]["Resource"]).endswith(":${AWS::AccountId}:network-interface/*")
    assert "VpcCniNetworkInterfaces" not in st and "EcrPull" not in st  # EKS only


def test_role_logs_and_metrics_under_the_cluster_namespace(main):
    st = statements(main)
    assert joined(st["ClusterLogGroups"]["Resource"]).endswith(":log-group:/aws/sagemaker/Clusters/*")
    assert joined(st["ClusterLogStreams"]["Resource"]).endswith(":log-group:/aws/sagemaker/Clusters/*:log-stream:*")
    assert st["ClusterMetrics"]["Condition"] == {"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Clusters"}}


def test_role_describes_file_systems_for_an_efa_file_system(templates):
    """HyperPod's FSx mount sets up EFA for an EFA-enabled file system only when the execution role
    may call fsx:DescribeFileSystems (AWS's reference role grants it); the action has no resource
    types (Service Authorization Reference), so "*"."""
    assert specs()["example"].storage.lustre.efa and not specs()["main"].storage.lustre.efa
    describe = statements(templates["example"])["FsxEfaSetup"]
    assert (describe["Action"], describe["Resource"]) == ("fsx:DescribeFileSystems", "*")
    for key in ("main", "bare"):
        assert "FsxEfaSetup" not in statements(templates[key])
        assert not any("fsx:" in json.dumps(s["Action"]) for s in statements(templates[key]).values())


def test_role_without_buckets_or_key(templates):
    st = statements(templates["bare"])
    assert not {"ClusterBuckets", "ClusterBucketObjects", "StorageKey"} & set(st)


# --- outputs, network, lint -------------------------------------------------------------------

def test_outputs(main):
    outputs = main["Outputs"]
    (cluster_id,) = resources(main, "AWS::SageMaker::Cluster")
    assert outputs["ClusterArn"]["Value"] == {"Fn::GetAtt": [cluster_id, "ClusterArn"]}
    assert outputs["ClusterName"]["Value"] == "hp-main"
    assert outputs["Partitions"]["Value"] == "p5cb,b200,noefa,cpu"


def test_no_placement_groups_on_hyperpod(templates):
    assert not resources(templates["network"], "AWS::EC2::PlacementGroup")
    assert not resources(templates["main"], "AWS::EC2::PlacementGroup")


def test_no_launch_templates_or_instance_profiles(main):
    assert not resources(main, "AWS::EC2::LaunchTemplate") and not resources(main, "AWS::IAM::InstanceProfile")


def test_cfn_lint_clean(assembly):
    from tests.support.cfn_lint import findings

    outdir, stacks = assembly
    for key in ("main", "bare", "eks"):
        path = outdir / f"{stacks[key].stack_name}.template.json"
        errors = [m for m in findings(path) if m.rule.id.startswith("E")]
        assert not errors, "; ".join(str(m) for m in errors)


# --- hyperpod-eks ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def eks(templates):
    return templates["eks"]


def logical_id(template, type_, path_part):
    (lid,) = [lid for lid, r in template["Resources"].items()
              if r["Type"] == type_ and path_part in r["Metadata"]["aws:cdk:path"]]
    return lid


def test_eks_orchestrator_is_the_stacks_eks_cluster(eks):
    eks_cluster = logical_id(eks, "AWS::EKS::Cluster", "/Cluster/")
    assert cluster(eks)["Orchestrator"] == {"Eks": {"ClusterArn": {"Fn::GetAtt": [eks_cluster, "Arn"]}}}
    assert cluster(eks)["ClusterName"] == "p5-hpeks"


def test_node_groups_are_instance_groups_not_managed_node_groups(eks):
    assert list(groups(eks)) == ["train", "explore"]  # no controller or login group on EKS
    nodegroups = [r["Metadata"]["aws:cdk:path"] for r in eks["Resources"].values()
                  if r["Type"] == "AWS::EKS::Nodegroup"]
    assert nodegroups == ["p5-hpeks-cluster/SystemNodes/NodeGroup/Resource"]
    assert {n: g["InstanceType"] for n, g in groups(eks).items()} == {"train": "ml.p5.48xlarge",
                                                                       "explore": "ml.p5.4xlarge"}
    for group in groups(eks).values():
        assert "SlurmConfig" not in group
        assert group["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
        assert group["NetworkInterface"] == {"InterfaceType": "efa-only"}
        assert group["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 512}}]  # Lustre: the PVC
        assert group["LifeCycleConfig"]["OnInitComplete"] == "on_init.sh"


def test_kubernetes_labels_and_taints_of_the_eks_plane(eks):

    for group in resolve(specs()["eks"]).node_groups:
        config = groups(eks)[group.name]["KubernetesConfig"]
        assert config["Labels"] == dict(group.labels)
        assert config["Taints"] == [{"Key": "nvidia.com/gpu", "Value": "true", "Effect": "NoSchedule"}]
    assert groups(eks)["train"]["KubernetesConfig"]["Labels"]["team"] == "pretraining"


def test_training_plan_and_spot_capacity(eks):
    train, explore = groups(eks)["train"], groups(eks)["explore"]
    assert train["TrainingPlanArn"].endswith(":training-plan/p5-pretrain") and "CapacityRequirements" not in train
    assert explore["CapacityRequirements"] == {"Spot": {}} and "TrainingPlanArn" not in explore
    assert cluster(eks)["NodeProvisioningMode"] == "Continuous"  # Spot runs with continuous provisioning


def test_no_continuous_provisioning_without_spot_a_storage_key_or_teams(templates):
    assert not specs()["bare"].storage.kms and not specs()["bare"].teams
    assert "NodeProvisioningMode" not in cluster(templates["bare"])
    assert specs()["example"].teams and not specs()["example"].storage.kms  # teams: continuous provisioning
    assert cluster(templates["example"])["NodeProvisioningMode"] == "Continuous"


def test_eks_vpc_config_adds_the_cluster_security_group(eks):
    eks_cluster = logical_id(eks, "AWS::EKS::Cluster", "/Cluster/")
    assert cluster(eks)["VpcConfig"] == {"Subnets": [SUBNET], "SecurityGroupIds": [
        NODE_SG, {"Fn::GetAtt": [eks_cluster, "ClusterSecurityGroupId"]}, EFA_SG]}


def test_hyperpod_dependencies_before_the_cluster(eks):
    from fmcluster_cdk.constructs.hyperpod import dependencies as deps

    (dep_id, dep), = [(lid, r) for lid, r in eks["Resources"].items() if r["Type"] == deps.RESOURCE_TYPE]
    props = dep["Properties"]
    assert props["Commit"] == deps.COMMIT and props["ArchiveUrl"].endswith(deps.COMMIT)
    assert (props["Release"], props["Namespace"]) == ("hyperpod-dependencies", "kube-system")
    values = json.loads(props["Values"])
    assert values["health-monitoring-agent"] == {"region": "us-east-1"}
    assert values["neuron-device-plugin"] == {"devicePlugin": {"enabled": False}}
    system = logical_id(eks, "AWS::EKS::Nodegroup", "/SystemNodes/")
    assert system in dep["DependsOn"]
    assert any("KubectlReadyBarrier" in d for d in dep["DependsOn"])
    (hp_id, hp), = [(lid, r) for lid, r in eks["Resources"].items() if r["Type"] == "AWS::SageMaker::Cluster"]
    assert dep_id in hp["DependsOn"] and system in hp["DependsOn"]
    handler = eks["Resources"][props["ServiceToken"]["Fn::GetAtt"][0]]["Properties"]
    kubectl_role = logical_id(eks, "AWS::IAM::Role", "KubectlProvider/Handler/ServiceRole")
    assert handler["Role"] == {"Fn::GetAtt": [kubectl_role, "Arn"]}  # the cluster-admin access entry's role
    assert handler["Timeout"] == 900


def test_hyperpod_chart_replaces_the_eks_device_plugins(eks):
    charts = {r["Properties"]["Release"] for r in eks["Resources"].values()
              if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"}
    assert {"kueue", "lws"} <= charts
    assert not {"nvidia-device-plugin", "aws-efa-k8s-device-plugin"} & charts


@pytest.mark.parametrize("key", ["eks", "eks-private"])
def test_hyperpod_chart_brings_the_operators_once(templates, key):
    """The MPI and training operators come with the dependencies chart (its whole folder: no
    ChartPath), so the `eks` plane's operator releases are left out."""
    from fmcluster_cdk.constructs.hyperpod import dependencies as deps

    (props,) = resources(templates[key], deps.RESOURCE_TYPE).values()
    assert (props["Release"], props["Namespace"]) == (deps.RELEASE, deps.NAMESPACE)
    assert "ChartPath" not in props and "NodeSelector" not in props
    assert not [r for r in templates[key]["Resources"].values() if "/Operators/" in r["Metadata"]["aws:cdk:path"]]


def test_leader_worker_set_on_hyperpod_eks(eks):
    """LWS is not in HyperPod's chart: the pinned OCI chart, on the system nodes, after them."""
    from fmcluster.kubernetes import charts as helm_charts

    (lid, lws), = [(lid, r) for lid, r in eks["Resources"].items()
                   if r["Type"] == "Custom::AWSCDK-EKS-HelmChart" and r["Properties"]["Release"] == "lws"]
    props = lws["Properties"]
    chart = helm_charts.LWS
    assert (props["Chart"], props["Repository"], props["Version"], props["Namespace"]) == (
        chart.chart, chart.repository, chart.version, chart.namespace)
    assert json.loads(props["Values"]) == {"nodeSelector": {"fmcluster.dev/node-group": "system"}}
    assert logical_id(eks, "AWS::EKS::Nodegroup", "/SystemNodes/") in lws["DependsOn"]


def test_eks_execution_role_adds_cni_pulls_and_pod_identity(eks):
    st = statements(eks)
    eks_cluster = logical_id(eks, "AWS::EKS::Cluster", "/Cluster/")
    assert st["PodIdentity"]["Resource"] == {"Fn::GetAtt": [eks_cluster, "Arn"]}
    assert "ArnEquals" in st["VpcCniNetworkInterfaces"]["Condition"]
    assert sorted(st["InterfacesOnClusterInstances"]["Action"]) == ["ec2:AttachNetworkInterface",
                                                                    "ec2:DetachNetworkInterface"]
    assert st["EcrAuthorization"]["Action"] == "ecr:GetAuthorizationToken"
    assert all(not isinstance(s["Resource"], str) or s["Sid"] in (
        "ClusterMetrics", "SessionManager", "DescribeNetwork", "EcrAuthorization") for s in st.values())
    assert "FsxLustreConfig" not in json.dumps(cluster(eks))


def test_eks_outputs(eks):
    (hp_id,) = resources(eks, "AWS::SageMaker::Cluster")
    assert eks["Outputs"]["HyperPodClusterArn"]["Value"] == {"Fn::GetAtt": [hp_id, "ClusterArn"]}
    assert "LocalQueue" in eks["Outputs"]  # the eks plane's Kueue queue is kept


def test_dependencies_handler_runs_in_the_vpc_of_a_private_endpoint(templates):
    def handler_of(template):
        (props,) = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"
                    and "HyperPodDependencies" in r["Metadata"]["aws:cdk:path"]]
        return props

    private = handler_of(templates["eks-private"])
    assert private["VpcConfig"]["SubnetIds"] == [SUBNET, "subnet-0bbbbbbbbbbbbbbbb"]
    eks_cluster = logical_id(templates["eks-private"], "AWS::EKS::Cluster", "/Cluster/")
    assert private["VpcConfig"]["SecurityGroupIds"] == [{"Fn::GetAtt": [eks_cluster, "ClusterSecurityGroupId"]}]
    assert "VpcConfig" not in handler_of(templates["eks"])


def test_the_controller_applies_the_teams_with_the_secret_and_parameter_only(templates):
    from fmcluster.node import accounting
    from fmcluster.node.hyperpod import ACCOUNTING_HOOK
    from tests.support.stacks import ACCOUNTING_DATABASE

    template = templates["example"]
    ((parameter_id, parameter),) = [(lid, r["Properties"]) for lid, r in template["Resources"].items()
                                    if r["Type"] == "AWS::SSM::Parameter"
                                    and r["Properties"]["Name"].endswith("/slurm-teams")]
    assert parameter["Value"] == accounting.data(resolve(specs()["example"]).teams)
    role = next(r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Role")
    statements = {s["Sid"]: s for p in role["Policies"] for s in p["PolicyDocument"]["Statement"]}
    assert statements["SlurmTeamsParameter"]["Action"] == "ssm:GetParameter"
    assert json.dumps(statements["SlurmTeamsParameter"]["Resource"]).count(parameter_id) == 1
    assert statements["SlurmAccountingDatabaseSecret"] == {
        "Sid": "SlurmAccountingDatabaseSecret", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue",
        "Resource": ACCOUNTING_DATABASE.secret.secret_arn}
    assert ACCOUNTING_HOOK == "60-accounting.sh"


def test_deep_checks_and_node_recovery_follow_the_specs_health():
    """health.deep_check off: no OnStartDeepHealthChecks on any group (GPU groups have them
    otherwise, test_deep_health_checks_on_gpu_groups_only); health.replace off: NodeRecovery None
    (a faulty node waits for a person). The synthesized HyperPod EKS stack with both off:
    tests/cdk/test_eks_stack.py."""
    from fmcluster_cdk.stacks.hyperpod import compute_group, node_recovery

    on = resolve(load_spec(loader.load_text(to_yaml(main_spec()), "on.yaml")))
    off = resolve(load_spec(loader.load_text(to_yaml({**main_spec(), "health": {"deep_check": False,
                                                                                 "replace": False}}), "off.yaml")))
    assert {g.name: bool(compute_group(on, g).deep_health_checks) for g in on.node_groups} == {
        "p5cb": True, "b200": True, "noefa": True, "cpu": False}
    assert not any(compute_group(off, g).deep_health_checks for g in off.node_groups)
    assert (node_recovery(on), node_recovery(off)) == ("Automatic", "None")
