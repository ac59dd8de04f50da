"""NAME-images (fmcluster_cdk/stacks/images.py, fmcluster_cdk/constructs/images/builder.py): one EC2
Image Builder image per node image of the model, its resources linked to each other and to the
cluster's network, names that follow the image's content, a build role limited to the image's own
components and log group, encryption with the storage key where the model asks for it (never on
SageMaker HyperPod), and the cluster stack launching its groups from the images. The reference GPU
images are NAME-reference's (every plane): tests/cdk/test_reference_images.py."""

from __future__ import annotations

import json

import pytest
import yaml

from fmcluster.facts import images as image_facts
from fmcluster.model.cluster import resolve
from fmcluster.node.image import documents
from fmcluster.spec import loader
from tests.support.images import synthesize
from tests.support.paths import ROOT
from tests.support.stacks import load_spec, resources

PCS = "examples/p5-pcs.yaml"
HYPERPOD = "examples/p6-b200-hyperpod-slurm.yaml"
KUBERNETES = ("examples/p5en-eks.yaml", "examples/p5-hyperpod-eks.yaml")


def variant(path: str, **edits):
    """The spec of an example, with storage.kms on (`kms`), images.revision set (`revision`) or
    one more node group (`group`)."""
    data = yaml.safe_load((ROOT / path).read_text())
    if edits.get("kms"):
        data["storage"]["kms"] = True
    if "revision" in edits:
        data["images"] = {"revision": edits["revision"]}
    if edits.get("group"):
        data["node_groups"].append({"name": "cpu2", "instance_type": "c7i.8xlarge", "min_count": 0, "max_count": 2})
    return load_spec(loader.load_text(yaml.safe_dump(data, sort_keys=False), path))


CASES = {"pcs": (PCS, {}), "pcs-kms": (PCS, {"kms": True}), "pcs-revision": (PCS, {"revision": 1}),
         "pcs-group": (PCS, {"group": True}),
         "hyperpod": (HYPERPOD, {}), "hyperpod-kms": (HYPERPOD, {"kms": True})}


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    """case -> (spec, {suffix: template}), each case synthesized once."""
    made = {}
    for case, (path, edits) in CASES.items():
        spec = variant(path, **edits)
        made[case] = spec, synthesize(spec, tmp_path_factory.mktemp(case))
    return made


def one(template, type_):
    found = resources(template, type_)
    assert len(found) == 1, (type_, list(found))
    return next(iter(found.items()))


def getatt(lid: str, attribute: str = "Arn") -> dict:
    return {"Fn::GetAtt": [lid, attribute]}


@pytest.mark.parametrize("case", ["pcs", "hyperpod"])
def test_one_image_per_node_image_of_the_model(synth, case):
    spec, templates = synth[case]
    model = resolve(spec)
    assert [i.key for i in model.images] == [f"{model.control_plane.type}-x86_64"]
    image = model.images[0]
    template = templates["images"]
    docs = documents(image)
    components = resources(template, "AWS::ImageBuilder::Component")
    assert sorted(c["Data"] for c in components.values()) == sorted([docs.build, docs.test])
    assert all(c["Platform"] == "Linux" and c["Version"] == "1.0.0" for c in components.values())
    recipe_id, recipe = one(template, "AWS::ImageBuilder::ImageRecipe")
    assert recipe["ParentImage"] == image.base.parent
    assert recipe["Components"] == [{"ComponentArn": getatt(lid)} for lid in components]
    if case == "pcs":
        [root] = recipe["BlockDeviceMappings"]
        assert root["DeviceName"] == "/dev/sda1" == image_facts.BUILD_ROOT_DEVICE
        assert root["Ebs"]["VolumeSize"] == image_facts.BUILD_ROOT_VOLUME_GIB and root["Ebs"]["VolumeType"] == "gp3"
    else:  # SageMaker HyperPod: the base's root volume as it is (test_hyperpod_images_keep_the_base_root_volume)
        assert "BlockDeviceMappings" not in recipe
    infrastructure_id, _ = one(template, "AWS::ImageBuilder::InfrastructureConfiguration")
    distribution_id, _ = one(template, "AWS::ImageBuilder::DistributionConfiguration")
    image_id, built = one(template, "AWS::ImageBuilder::Image")
    assert built["ImageRecipeArn"] == getatt(recipe_id)
    assert built["InfrastructureConfigurationArn"] == getatt(infrastructure_id)
    assert built["DistributionConfigurationArn"] == getatt(distribution_id)
    assert built["ImageTestsConfiguration"] == {"ImageTestsEnabled": True,
                                                "TimeoutMinutes": image_facts.BUILD_TIMEOUT_MINUTES}
    # off: its SSM inventory association would need the agent's inventory calls, and fails where the
    # account collects inventory from every instance already
    assert built["EnhancedImageMetadataEnabled"] is False
    outputs = [o for o in template["Outputs"].values() if o["Value"] == getatt(image_id, "ImageId")]
    assert outputs  # the AMI id, for the reader and for NAME-cluster


@pytest.mark.parametrize("case", sorted(CASES))
def test_cfn_lint_clean(synth, case):
    """The examples' images templates are linted with the examples; these are the variants'
    (storage key, revision)."""
    from tests.support.cfn_lint import text_findings

    spec, templates = synth[case]
    errors = [m for m in text_findings(json.dumps(templates["images"]), [spec.region]) if m.rule.id.startswith("E")]
    assert not errors, "; ".join(str(m) for m in errors)


@pytest.mark.parametrize("case", ["pcs", "hyperpod"])
def test_builds_in_the_clusters_vpc_with_imdsv2(synth, case):
    spec, templates = synth[case]
    template, network = templates["images"], templates["network"]
    _, infrastructure = one(template, "AWS::ImageBuilder::InfrastructureConfiguration")
    # the first private subnet of the region and the nodes' security group, by their exports
    first_subnet = next(lid for lid, r in network["Resources"].items()
                        if r["Type"] == "AWS::EC2::Subnet" and "Private" in lid)
    assert first_subnet in infrastructure["SubnetId"]["Fn::ImportValue"]
    [group] = infrastructure["SecurityGroupIds"]
    assert "NodeSecurityGroup" in group["Fn::ImportValue"]
    assert infrastructure["InstanceMetadataOptions"]["HttpTokens"] == "required"
    assert infrastructure["TerminateInstanceOnFailure"] is True
    assert infrastructure["InstanceTypes"] == [resolve(spec).images[0].build_instance_type]
    profile_id, profile = one(template, "AWS::IAM::InstanceProfile")
    role_id, _ = one(template, "AWS::IAM::Role")
    assert infrastructure["InstanceProfileName"] == {"Ref": profile_id}
    assert profile["Roles"] == [{"Ref": role_id}]


def test_logs_are_kept(synth):
    _, templates = synth["pcs"]
    template = templates["images"]
    _, recipe = one(template, "AWS::ImageBuilder::ImageRecipe")
    lid, group = one(template, "AWS::Logs::LogGroup")
    # one group per image, whatever its build: its name is the recipe's without the identity
    assert recipe["Name"].startswith(group["LogGroupName"].removeprefix("/aws/imagebuilder/") + "-")
    assert group["LogGroupName"] == "/aws/imagebuilder/llm-pretrain-pcs-x86-64"
    assert group["RetentionInDays"] > 0
    raw = template["Resources"][lid]
    assert raw["DeletionPolicy"] == "Retain" and raw["UpdateReplacePolicy"] == "Retain"
    image_lid, image = one(template, "AWS::ImageBuilder::Image")
    assert image["LoggingConfiguration"] == {"LogGroupName": group["LogGroupName"]}
    assert lid in template["Resources"][image_lid]["DependsOn"]  # the group exists before the build writes


def names(template) -> dict[str, str]:
    found = {lid: r["Properties"]["Name"] for lid, r in template["Resources"].items()
             if r["Type"].startswith("AWS::ImageBuilder::") and "Name" in r.get("Properties", {})}
    return found


def test_names_follow_the_content(synth):
    """Every Image Builder name carries the image's identity; a new revision changes every one of
    them (immutable versions: new resources, a new build), the AMI names are unique per build, and
    the log group stays (the image's history, never replaced)."""
    from fmcluster_cdk.stacks.images import identity

    spec, templates = synth["pcs"]
    image = resolve(spec).images[0]
    digest = identity(image, documents(image).digest)
    before = names(templates["images"])
    assert before and all(digest[:12] in name for name in before.values())
    after = names(synth["pcs-revision"][1]["images"])
    assert set(after) == set(before)  # the same logical ids: the resources are replaced, by name
    assert all(after[lid] != before[lid] for lid in before)
    assert resources(templates["images"], "AWS::Logs::LogGroup") == \
        resources(synth["pcs-revision"][1]["images"], "AWS::Logs::LogGroup")
    _, distribution = one(templates["images"], "AWS::ImageBuilder::DistributionConfiguration")
    ami = distribution["Distributions"][0]["AmiDistributionConfiguration"]
    assert ami["Name"].endswith("{{ imagebuilder:buildDate }}")
    assert ami["AmiTags"]["fmcluster:cluster"] == spec.name and ami["AmiTags"]["fmcluster:image"] == image.key


def test_a_new_node_group_leaves_the_images_alone(synth):
    """Stable resources: a group more that launches from the image changes nothing of NAME-images
    (no create-only property, such as a description, names the groups)."""
    spec, templates = synth["pcs-group"]
    assert "cpu2" in resolve(spec).images[0].groups
    assert templates["images"]["Resources"] == synth["pcs"][1]["images"]["Resources"]


def test_identity_follows_each_input():
    from dataclasses import replace

    from fmcluster_cdk.stacks.images import identity

    image = resolve(variant(PCS)).images[0]
    digest = identity(image, "0" * 64)
    assert identity(image, "0" * 64) == digest
    assert identity(image, "1" * 64) != digest
    assert identity(replace(image, revision=1), "0" * 64) != digest
    assert identity(replace(image, encrypted=True), "0" * 64) != digest
    assert identity(replace(image, base=image_facts.base(image.plane, "arm64")), "0" * 64) != digest


def test_same_spec_gives_byte_identical_templates(tmp_path):
    spec = variant(PCS)
    first, second = tmp_path / "a", tmp_path / "b"
    synthesize(spec, first)
    synthesize(spec, second)
    name = f"{spec.name}-images.template.json"
    assert (first / name).read_bytes() == (second / name).read_bytes()


@pytest.mark.parametrize("case", ["pcs", "hyperpod", "pcs-kms"])
def test_build_role_is_the_images_own(synth, case):
    """The build role: no managed policy; GetComponent on the image's two components, logs on its
    own log group, Image Builder's own buckets read, the SSM agent's instance registration on this
    account's instances; on "*" only the agent's calls of AWS's core instance policy (messages,
    documents, associations), never a parameter."""
    from fmcluster_cdk.constructs.images.builder import AGENT_CORE_ACTIONS, AGENT_MESSAGE_ACTIONS

    _, templates = synth[case]
    template = templates["images"]
    _, role = one(template, "AWS::IAM::Role")
    assert "ManagedPolicyArns" not in role
    assert not resources(template, "AWS::IAM::Policy") and not resources(template, "AWS::IAM::ManagedPolicy")
    [policy] = role["Policies"]
    statements = {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}
    components = sorted(resources(template, "AWS::ImageBuilder::Component"))
    log_group, _ = one(template, "AWS::Logs::LogGroup")
    assert statements["ImageComponents"]["Resource"] == [getatt(lid) for lid in components]
    assert statements["ImageLogs"]["Resource"] == getatt(log_group)
    instances = statements["SsmAgentInstance"]["Resource"]["Fn::Join"][1]
    assert instances[-1] == ":instance/*" and {"Ref": "AWS::AccountId"} in instances
    wildcard = [s for s in statements.values() if s["Resource"] == "*"]
    assert [s["Action"] for s in wildcard] == [AGENT_MESSAGE_ACTIONS, AGENT_CORE_ACTIONS]
    assert not [a for s in wildcard for a in s["Action"] if a.startswith("ssm:GetParameter")]
    buckets = statements["ImageBuilderBuckets"]
    assert buckets["Action"] == "s3:GetObject" and "ec2imagebuilder*/*" in json.dumps(buckets["Resource"])
    assert all(s["Effect"] == "Allow" for s in statements.values())


def test_encrypted_with_the_storage_key_when_storage_kms(synth):
    _, templates = synth["pcs-kms"]
    template = templates["images"]
    _, recipe = one(template, "AWS::ImageBuilder::ImageRecipe")
    ebs = recipe["BlockDeviceMappings"][0]["Ebs"]
    assert ebs["Encrypted"] is True
    key = ebs["KmsKeyId"]
    assert "Fn::GetStackOutput" in key and key["Fn::GetStackOutput"]["StackName"].endswith("-storage")
    _, distribution = one(template, "AWS::ImageBuilder::DistributionConfiguration")
    assert distribution["Distributions"][0]["AmiDistributionConfiguration"]["KmsKeyId"] == key
    # without storage.kms: encrypted with the account's default EBS key
    _, plain = one(synth["pcs"][1]["images"], "AWS::ImageBuilder::ImageRecipe")
    assert plain["BlockDeviceMappings"][0]["Ebs"]["Encrypted"] is True
    assert "KmsKeyId" not in plain["BlockDeviceMappings"][0]["Ebs"]


@pytest.mark.parametrize("case", ["hyperpod", "hyperpod-kms"])
def test_hyperpod_images_keep_the_base_root_volume_unencrypted(synth, case):
    """SageMaker HyperPod takes only unencrypted custom AMIs with one snapshot volume, storage key or
    not, and sizes the root volume itself: the recipe maps no device (no size, no second volume at a
    device the base does not use, no key), so the build instance and the image have the base's
    root volume, unencrypted where EBS encryption by default is off (preflight checks it). The
    instances' volumes are encrypted with the storage key by the cluster itself."""
    spec, templates = synth[case]
    template = templates["images"]
    _, recipe = one(template, "AWS::ImageBuilder::ImageRecipe")
    assert "BlockDeviceMappings" not in recipe
    _, distribution = one(template, "AWS::ImageBuilder::DistributionConfiguration")
    assert "KmsKeyId" not in distribution["Distributions"][0]["AmiDistributionConfiguration"]
    assert image_facts.build_root_volume_gib(resolve(spec).images[0].plane) is None
    _, cluster = one(templates["cluster"], "AWS::SageMaker::Cluster")
    for group in cluster["InstanceGroups"]:
        volumes = [c["EbsVolumeConfig"] for c in group.get("InstanceStorageConfigs", []) if "EbsVolumeConfig" in c]
        roots = [v for v in volumes if v.get("RootVolume")]
        # the root volume: the storage key at most, never a size (ClusterEbsVolumeConfig.RootVolume)
        assert all("VolumeSizeInGB" not in v for v in roots)
        assert len(roots) == (1 if case == "hyperpod-kms" else 0)


def test_hyperpod_groups_launch_from_the_image(synth):
    spec, templates = synth["hyperpod"]
    template = templates["images"]
    image_lid, _ = one(template, "AWS::ImageBuilder::Image")
    published = {name for name, o in template["Outputs"].items() if o["Value"] == getatt(image_lid, "ImageId")}
    _, cluster = one(templates["cluster"], "AWS::SageMaker::Cluster")
    groups = {g["InstanceGroupName"]: g for g in cluster["InstanceGroups"]}
    model = resolve(spec)
    assert set(groups) == {g.name for g in model.all_groups}
    for name, group in groups.items():
        ref = group["ImageId"]["Fn::GetStackOutput"]
        assert ref["StackName"] == f"{spec.name}-images" and ref["OutputName"] in published, name


@pytest.mark.parametrize("path", KUBERNETES)
def test_no_images_stack_on_kubernetes(path, tmp_path):
    """No NAME-images on a Kubernetes plane (its reference GPU image is NAME-reference's)."""
    spec = variant(path)
    model = resolve(spec)
    assert model.images == () and model.stack("images") is None and model.reference_images
    assert "images" not in synthesize(spec, tmp_path)


def test_the_construct_refuses_what_image_builder_would(tmp_path):
    import aws_cdk as cdk

    from fmcluster_cdk.constructs.images.builder import NodeImageBuilder
    from fmcluster_cdk.errors import ConstructError

    good = dict(name="c-pcs-x86-64-0123456789ab", parent_image="ssm:/p", build_document="b", test_document="t",
                instance_type="c6i.2xlarge", subnet_id="subnet-0", security_group_ids=["sg-0"], root_volume_gib=200,
                description="d")
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "s")
    NodeImageBuilder(stack, "Good", **good)
    kept = NodeImageBuilder(stack, "KeepsTheParentsRoot", **{**good, "root_volume_gib": None, "encrypted": False})
    assert kept.recipe.block_device_mappings is None
    for bad in ({"name": "Upper_case"}, {"name": "x" * 104}, {"kms_key_arn": "arn:k", "encrypted": False},
                {"security_group_ids": []}, {"log_group_name": "/elsewhere/x"}, {"root_volume_gib": None},
                {"root_volume_gib": None, "encrypted": False, "kms_key_arn": "arn:k"}):
        with pytest.raises(ConstructError):
            NodeImageBuilder(stack, f"Bad{len(stack.node.children)}", **{**good, **bad})


def _tags(props) -> dict:
    tags = props.get("Tags", {})
    return {t["Key"]: t["Value"] for t in tags} if isinstance(tags, list) else dict(tags)


def _ami_identity(templates) -> str:
    from fmcluster_cdk.stacks.images import IDENTITY_TAG

    _, distribution = one(templates["images"], "AWS::ImageBuilder::DistributionConfiguration")
    return distribution["Distributions"][0]["AmiDistributionConfiguration"]["AmiTags"][IDENTITY_TAG]


def test_a_rebuilt_image_changes_the_groups_that_launch_from_it(synth):
    """NAME-cluster reads the AMI by a weak reference (Fn::GetStackOutput), which CloudFormation
    resolves only when NAME-cluster itself is updated: each group launching from an image carries
    the image's identity (the AMI's own identity tag), so a new image changes NAME-cluster and its
    deploy reads the new AMI; a group with its own ami_id carries none."""
    from fmcluster_cdk.stacks.images import IDENTITY_TAG

    seen = {}
    for case in ("pcs", "pcs-revision"):
        spec, templates = synth[case]
        groups = {p["Name"]: p for t in templates.values() for p in resources(t, "AWS::PCS::ComputeNodeGroup").values()}
        assert set(groups) == {g.name for g in resolve(spec).all_groups}
        identities = {name: _tags(p)[IDENTITY_TAG] for name, p in groups.items()}
        assert set(identities.values()) == {_ami_identity(templates)}, case
        seen[case] = _ami_identity(templates)
    assert seen["pcs"] != seen["pcs-revision"]
    spec, templates = synth["hyperpod"]
    _, cluster = one(templates["cluster"], "AWS::SageMaker::Cluster")
    assert _tags(cluster)[f"{IDENTITY_TAG}:hyperpod-slurm-x86_64"] == _ami_identity(templates)


@pytest.mark.parametrize("case, users", [("pcs-kms", True), ("hyperpod-kms", False), ("pcs", None)])
def test_the_storage_key_lets_the_services_launch_from_encrypted_images(synth, case, users):
    """An image encrypted with the storage key (AWS PCS) is launched by PCS's service-linked role and
    built by Image Builder's, whose own permissions cover AWS managed keys only: the key's policy lets
    both use it and create grants for AWS resources (the AWS PCS User Guide's required key policy).
    HyperPod's images are unencrypted: its key names no service role. Without storage.kms, no key."""
    _, templates = synth[case]
    keys = resources(templates["storage"], "AWS::KMS::Key")
    if users is None:
        assert not keys
        return
    (key,) = keys.values()
    statements = {s.get("Sid"): s for s in key["KeyPolicy"]["Statement"]}
    if not users:
        assert not {"VolumesOfServiceLaunchedInstances", "GrantsForServiceLaunchedInstances"} & set(statements)
        return
    use, grants = statements["VolumesOfServiceLaunchedInstances"], statements["GrantsForServiceLaunchedInstances"]
    roles = sorted(json.dumps(p) for p in use["Principal"]["AWS"])
    assert len(roles) == 2 and "aws-service-role/pcs.amazonaws.com/AWSServiceRoleForPCS" in roles[1]
    assert "aws-service-role/imagebuilder.amazonaws.com/AWSServiceRoleForImageBuilder" in roles[0]
    assert set(use["Action"]) == {"kms:Encrypt", "kms:Decrypt", "kms:ReEncryptFrom", "kms:ReEncryptTo",
                                  "kms:GenerateDataKey", "kms:GenerateDataKeyWithoutPlaintext", "kms:DescribeKey"}
    assert grants["Action"] == "kms:CreateGrant" and grants["Principal"] == use["Principal"]
    assert grants["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": "true"}}
