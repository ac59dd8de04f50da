"""NAME-reference's reference GPU images (fmcluster_cdk/constructs/images/container.py,
fmcluster_cdk/stacks/reference.py): on every control plane one EC2 Image Builder container build per
architecture of the GPU groups, into an ECR repository of its own (immutable tags, scanned,
encrypted, emptied and deleted with the stack), tagged as the acceptance kit names the image
(fmcluster.model.reference_image), a build role that may push to that repository only, and the
GPU nodes' roles allowed to pull exactly these repositories; a stack of its own that nothing waits for,
deployed after the cluster; images.reference: false builds none."""

from __future__ import annotations

import json

import pytest
import yaml

from fmcluster.facts import images as image_facts
from fmcluster.model import reference_image
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from tests.support.images import synthesize
from tests.support.paths import ROOT
from tests.support.stacks import load_spec, resources

EXAMPLES = {"pcs": "examples/p5-pcs.yaml", "hyperpod-slurm": "examples/p6-b200-hyperpod-slurm.yaml",
            "eks": "examples/p5en-eks.yaml", "hyperpod-eks": "examples/p5-hyperpod-eks.yaml",
            "pcs-arm64": "examples/p6e-gb200-pcs.yaml"}
PULL = ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]
PUSH = ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:CompleteLayerUpload",
        "ecr:GetDownloadUrlForLayer", "ecr:InitiateLayerUpload", "ecr:PutImage", "ecr:UploadLayerPart"]


def spec_of(path: str, **images):
    data = yaml.safe_load((ROOT / path).read_text())
    if images:
        data["images"] = {**data.get("images", {}), **images}
    return load_spec(loader.load_text(yaml.safe_dump(data, sort_keys=False), path))


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    """plane -> (spec, {suffix: template}), each example synthesized once."""
    made = {}
    for plane, path in EXAMPLES.items():
        spec = spec_of(path)
        made[plane] = spec, synthesize(spec, tmp_path_factory.mktemp(plane))
    return made


def of_reference(template: dict, type_: str, image: reference_image.ReferenceImage) -> tuple[str, dict]:
    """The one resource of `type_` of the reference image (its constructs are under its key)."""
    found = {lid: r for lid, r in template["Resources"].items() if r["Type"] == type_
             and f"/{image.key}/" in r.get("Metadata", {}).get("aws:cdk:path", "")}
    assert len(found) == 1, (type_, image.key, list(found))
    lid, resource = next(iter(found.items()))
    return lid, resource


def getatt(lid: str, attribute: str = "Arn") -> dict:
    return {"Fn::GetAtt": [lid, attribute]}


@pytest.mark.parametrize("plane", sorted(EXAMPLES))
def test_one_container_build_per_reference_image(synth, plane):
    spec, templates = synth[plane]
    model = resolve(spec)
    (image,) = model.reference_images
    template = templates["reference"]
    repo_id, repo = of_reference(template, "AWS::ECR::Repository", image)
    props = repo["Properties"]
    assert props["RepositoryName"] == image.repository
    assert props["ImageTagMutability"] == "IMMUTABLE"
    assert props["ImageScanningConfiguration"] == {"ScanOnPush": True}
    assert props["EncryptionConfiguration"] == {"EncryptionType": "KMS"}  # ECR's AWS managed key
    assert props["EmptyOnDelete"] is True
    assert repo["DeletionPolicy"] == "Delete" and repo["UpdateReplacePolicy"] == "Delete"  # rebuilt, no data

    recipe_id, recipe = of_reference(template, "AWS::ImageBuilder::ContainerRecipe", image)
    r = recipe["Properties"]
    assert (r["Name"], r["Version"], r["ContainerType"]) == (image.name, "1.0.0", "DOCKER")
    assert r["ParentImage"] == reference_image.PARENT
    assert r["DockerfileTemplateData"] == reference_image.template()
    assert r["TargetRepository"] == {"Service": "ECR", "RepositoryName": {"Ref": repo_id}}
    assert "Components" not in r  # optional (cfn-lint's schema, botocore's CreateContainerRecipe)
    assert r["PlatformOverride"] == "Linux"  # a registry's image: its platform said
    assert r["InstanceConfiguration"] == {
        "Image": image.build_ami,
        "BlockDeviceMappings": [{"DeviceName": image_facts.REFERENCE_BUILD_ROOT_DEVICE, "Ebs": {
            "DeleteOnTermination": True, "Encrypted": True, "VolumeSize": image_facts.REFERENCE_BUILD_VOLUME_GIB,
            "VolumeType": "gp3"}}]}

    infra_id, infra = of_reference(template, "AWS::ImageBuilder::InfrastructureConfiguration", image)
    i = infra["Properties"]
    assert i["InstanceTypes"] == [image.build_instance_type] and i["Name"] == image.name
    assert i["InstanceMetadataOptions"]["HttpTokens"] == "required" and i["TerminateInstanceOnFailure"] is True
    assert "PrivateSubnet" in i["SubnetId"]["Fn::ImportValue"]
    assert ["NodeSecurityGroup" in g["Fn::ImportValue"] for g in i["SecurityGroupIds"]] == [True]
    profile_id, _ = of_reference(template, "AWS::IAM::InstanceProfile", image)
    assert i["InstanceProfileName"] == {"Ref": profile_id}

    dist_id, dist = of_reference(template, "AWS::ImageBuilder::DistributionConfiguration", image)
    (distribution,) = dist["Properties"]["Distributions"]
    assert distribution["Region"] == spec.region
    container = distribution["ContainerDistributionConfiguration"]
    assert container["ContainerTags"] == [image.tag]  # the tag the acceptance kit names
    assert container["TargetRepository"] == {"Service": "ECR", "RepositoryName": {"Ref": repo_id}}

    built_id, built = of_reference(template, "AWS::ImageBuilder::Image", image)
    b = built["Properties"]
    assert b["ContainerRecipeArn"] == getatt(recipe_id) and "ImageRecipeArn" not in b
    assert b["InfrastructureConfigurationArn"] == getatt(infra_id)
    assert b["DistributionConfigurationArn"] == getatt(dist_id)
    assert b["ImageTestsConfiguration"] == {"ImageTestsEnabled": False}
    assert b["ImageScanningConfiguration"] == {"ImageScanningEnabled": False}  # the repository scans on push
    log_id, log = of_reference(template, "AWS::Logs::LogGroup", image)
    assert b["LoggingConfiguration"] == {"LogGroupName": f"/aws/imagebuilder/{spec.name}-reference-"
                                         f"{image.architecture.replace('_', '-')}"} == {
        "LogGroupName": log["Properties"]["LogGroupName"]}
    assert log["DeletionPolicy"] == "Retain" and log_id in built["DependsOn"]
    # the image's URI, as the kit names it, is an output
    (uri,) = [o for o in template["Outputs"].values() if "RepositoryUri" in json.dumps(o["Value"])]
    assert uri["Value"] == {"Fn::Join": ["", [getatt(repo_id, "RepositoryUri"), f":{image.tag}"]]}


@pytest.mark.parametrize("plane", sorted(EXAMPLES))
def test_the_build_role_pushes_to_its_own_repository_only(synth, plane):
    spec, templates = synth[plane]
    (image,) = resolve(spec).reference_images
    template = templates["reference"]
    repo_id, _ = of_reference(template, "AWS::ECR::Repository", image)
    _, role = of_reference(template, "AWS::IAM::Role", image)
    assert "ManagedPolicyArns" not in role["Properties"]
    [policy] = role["Properties"]["Policies"]
    statements = {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}
    assert statements["ImageRepositoryPush"]["Action"] == PUSH
    assert statements["ImageRepositoryPush"]["Resource"] == getatt(repo_id)
    assert statements["EcrAuthorization"] == {"Action": "ecr:GetAuthorizationToken", "Effect": "Allow",
                                              "Resource": "*", "Sid": "EcrAuthorization"}
    assert "ImageComponents" not in statements  # no component to read
    recipe_id, _ = of_reference(template, "AWS::ImageBuilder::ContainerRecipe", image)
    # the build reads its own recipe (AWS's EC2InstanceProfileForImageBuilderECRContainerBuilds has it)
    assert statements["ImageRecipe"]["Action"] == "imagebuilder:GetContainerRecipe"
    assert statements["ImageRecipe"]["Resource"] == [
        getatt(recipe_id), {"Fn::Join": ["", [getatt(recipe_id), "/*"]]}]
    ecr = [a for s in statements.values() for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
           if a.startswith("ecr:")]
    assert sorted(set(ecr)) == sorted(set(PUSH) | {"ecr:GetAuthorizationToken"})


def _repository_arn(spec, image) -> dict:
    """The ARN the planes' stacks derive for a reference image's repository (the stack's account)."""
    from fmcluster.facts import regions

    return {"Fn::Join": ["", [f"arn:{regions.partition(spec.region)}:ecr:{spec.region}:", {"Ref": "AWS::AccountId"},
                              f":repository/{image.repository}"]]}


def _node_role_statements(plane: str, templates: dict) -> list[dict]:
    """The inline policy statements of the role the GPU nodes of `plane` run with."""
    cluster = templates["cluster"]
    roles = {lid: r for lid, r in cluster["Resources"].items() if r["Type"] == "AWS::IAM::Role"}
    path = {"pcs": "/NodeRole/Role/Resource", "eks": "/NodeRole/Role/Resource",
            "hyperpod-slurm": "/ExecutionRole/Role/Resource", "hyperpod-eks": "/ExecutionRole/Role/Resource",
            "pcs-arm64": "/NodeRole/Role/Resource"}[plane]
    (role,) = [r for r in roles.values() if r["Metadata"]["aws:cdk:path"].endswith(path)]
    return [s for p in role["Properties"].get("Policies", []) for s in p["PolicyDocument"]["Statement"]]


@pytest.mark.parametrize("plane", sorted(EXAMPLES))
def test_the_gpu_nodes_may_pull_exactly_the_reference_repositories(synth, plane):
    """Each plane's GPU node role: the pull actions on the reference repositories' ARNs (derived
    from their names, no reference to NAME-reference), and the registry login on "*" (it has no
    resource type). On HyperPod EKS the role's login statement is its own already."""
    spec, templates = synth[plane]
    (image,) = resolve(spec).reference_images
    statements = {s.get("Sid"): s for s in _node_role_statements(plane, templates)}
    pull = statements["ReferenceImagePull"]
    assert (pull["Effect"], pull["Action"], pull["Resource"]) == ("Allow", PULL, _repository_arn(spec, image))
    assert statements["EcrAuthorization"]["Action"] == "ecr:GetAuthorizationToken"
    assert statements["EcrAuthorization"]["Resource"] == "*"
    # no import of NAME-reference: the cluster need not wait for it
    assert "Fn::ImportValue" not in json.dumps(pull) and "Fn::GetStackOutput" not in json.dumps(pull)


def test_the_eks_system_role_of_hyperpod_eks_gets_no_pull(synth):
    """On HyperPod EKS the GPU nodes are HyperPod's (the execution role); the EKS node role is the
    system nodes'."""
    _, templates = synth["hyperpod-eks"]
    cluster = templates["cluster"]
    (role,) = [r for r in cluster["Resources"].values() if r["Type"] == "AWS::IAM::Role"
               and r["Metadata"]["aws:cdk:path"].endswith("/NodeRole/Role/Resource")]
    assert "ReferenceImagePull" not in json.dumps(role)


@pytest.mark.parametrize("plane", sorted(EXAMPLES))
def test_nothing_waits_for_the_reference_images(synth, plane):
    """NAME-reference reads the network only (its build's subnet and security group); nothing reads
    NAME-reference, and its node images stay NAME-images' (a failed reference build rolls back none
    of them)."""
    spec, templates = synth[plane]
    for suffix, template in templates.items():
        if suffix != "reference":
            assert f"{spec.name}-reference" not in json.dumps(template), suffix
    imports = {value.split(":")[0] for value in _imports(templates["reference"])}
    assert imports == {f"{spec.name}-network"}
    assert not resources(templates["reference"], "AWS::ImageBuilder::ImageRecipe")
    if "images" in templates:
        assert not resources(templates["images"], "AWS::ECR::Repository")


def _imports(value) -> list[str]:
    """The export names a template value imports (Fn::ImportValue of a literal)."""
    if isinstance(value, dict):
        return [n for k, v in value.items() for n in ([v] if k == "Fn::ImportValue" and isinstance(v, str)
                                                        else _imports(v))]
    if isinstance(value, list):
        return [n for v in value for n in _imports(v)]
    return []


def test_without_reference_images_nothing_is_built_or_granted(tmp_path):
    spec = spec_of(EXAMPLES["eks"], reference=False)
    model = resolve(spec)
    assert model.reference_images == () and model.stack("reference") is None and model.stack("images") is None
    templates = synthesize(spec, tmp_path)
    assert "reference" not in templates and "images" not in templates
    assert "ReferenceImagePull" not in json.dumps(templates["cluster"])
    pcs = synthesize(spec_of(EXAMPLES["pcs"], reference=False), tmp_path / "pcs")
    assert "reference" not in pcs and "images" in pcs  # the node images still
    assert "ReferenceImagePull" not in json.dumps(pcs["cluster"])


def test_the_construct_refuses_what_ecr_and_image_builder_would(tmp_path):
    import aws_cdk as cdk

    from fmcluster_cdk.constructs.images.container import ContainerImageBuilder
    from fmcluster_cdk.errors import ConstructError

    good = dict(name="c-reference-x86-64-0123456789ab", repository_name="fmcluster/c/reference-x86-64-0123456789ab",
                image_tag="0123456789ab", parent_image="docker.io/library/ubuntu:24.04",
                dockerfile_template="FROM {{{ imagebuilder:parentImage }}}\n", build_image="ssm:/p",
                instance_type="c6i.8xlarge", subnet_id="subnet-0", security_group_ids=["sg-0"],
                root_device_name="/dev/xvda", root_volume_gib=200, description="d")
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "s")
    ContainerImageBuilder(stack, "Good", **good)
    too_long = good["dockerfile_template"] + "#" * 16_000
    for bad in ({"name": "Upper_case"}, {"repository_name": "Fmcluster/x"}, {"repository_name": "a//b"},
                {"repository_name": "x" * 257}, {"image_tag": "-x"}, {"image_tag": "x" * 129},
                {"dockerfile_template": "FROM ubuntu\n"}, {"dockerfile_template": too_long},
                {"security_group_ids": []}, {"log_group_name": "/elsewhere/x"}):
        with pytest.raises(ConstructError):
            ContainerImageBuilder(stack, f"Bad{len(stack.node.children)}", **{**good, **bad})
