"""Deploying the synthesized stacks of an example into moto's CloudFormation, as `cdk deploy`
would, and the CloudFormation that fmcluster's commands meet where moto 5.2 falls short. Not a
test module: tests/deploy/test_moto_deploy.py and tests/deploy/test_destroy.py share it.

moto 5.2 skips some resource types (FSx, PCS, EKS, placement groups, egress rules among them),
and an output or export that reads an attribute of a skipped resource fails the whole stack.
Lambda functions and layers (the EKS kubectl provider) it could create, but their code is an
asset that is never published here, and the custom resources would invoke them. So before
deploying, `for_moto` leaves those resources out, drops exactly the outputs that read them and
replaces the imports of the exports it dropped with a placeholder: everything else is deployed
as synthesized. What is skipped is checked on the templates by the CDK-assertion tests instead.

NAME-cluster keeps each node group in a nested stack (an AWS::CloudFormation::Stack whose
TemplateURL names a file asset): as `cdk deploy` would, the nested templates are published to
the (moto) S3 bucket and key the TemplateURL names, and moto's CloudFormation creates the nested
stacks from there with the parameters the parent passes.

`as_the_service` adds what CloudFormation does and moto does not, where a test deletes stacks:
UpdateTerminationProtection, DeleteStack refused while termination protection is on, a stack whose
export another stack imports ending DELETE_FAILED, the network's route tables, NAT gateways,
endpoints, flow logs and internet gateway deleted with their stack (moto leaves them, and then
cannot delete the VPC), ListStackResources of a deleted stack (moto would make its resources again),
and AWS::FSx::FileSystem created in moto's FSx (so that a retained file
system stays in the account when its stack goes, as it does in AWS).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlparse

SKIPPED_BY_MOTO = frozenset({
    "AWS::FSx::FileSystem", "AWS::FSx::DataRepositoryAssociation", "AWS::FSx::Volume",
    "AWS::PCS::Cluster", "AWS::PCS::ComputeNodeGroup", "AWS::PCS::Queue", "AWS::EC2::PlacementGroup",
    "AWS::SageMaker::Cluster", "AWS::EKS::Cluster", "AWS::EKS::Nodegroup", "AWS::EKS::Addon",
    "AWS::EKS::AccessEntry", "AWS::APS::Workspace", "AWS::APS::RuleGroupsNamespace",
    "AWS::APS::Scraper", "AWS::Grafana::Workspace",
    # moto implements these, but cannot create them from an unpublished cloud assembly: Lambda
    # code and layers are assets (never uploaded here), and a custom resource would invoke them.
    "AWS::Lambda::Function", "AWS::Lambda::LayerVersion", "Custom::AWSCDK-EKS-HelmChart",
    # (and so the permission that lets EventBridge invoke such a function: moto looks the function up)
    "AWS::Lambda::Permission",
    "Custom::AWSCDK-EKS-KubernetesResource", "Custom::HyperPodDependencies", "Custom::GrafanaProvisioner",
    # moto's CloudFormation cannot create an SSM parameter without a Name (the EKS kubectl barrier).
    "AWS::SSM::Parameter",
    # moto 5.2 creates a KMS key from CloudFormation only without Tags (it reads TagKey/TagValue,
    # CloudFormation gives Key/Value), and every stack is tagged.
    "AWS::KMS::Key",
    # moto 5.2 does not create CloudWatch alarms from CloudFormation (the dashboard's alarm status
    # widget reads their Arn): the alarms are asserted on the template instead.
    "AWS::CloudWatch::Alarm",
    # moto 5.2 has no EC2 Image Builder: NAME-images and NAME-reference are deployed with their build
    # roles, instance profiles and log groups (and NAME-reference's ECR repositories); the images
    # themselves, and the cluster's reads of their AMI ids, are asserted on the templates
    # (tests/cdk/test_images_stack.py, tests/cdk/test_reference_images.py).
    "AWS::ImageBuilder::Component", "AWS::ImageBuilder::ImageRecipe", "AWS::ImageBuilder::ContainerRecipe",
    "AWS::ImageBuilder::InfrastructureConfiguration", "AWS::ImageBuilder::DistributionConfiguration",
    "AWS::ImageBuilder::Image"})
FILE_SYSTEM = "AWS::FSx::FileSystem"
# What moto's CloudFormation creates once `as_the_service` is on: the file systems too
SKIPPED_BY_THE_SERVICE = SKIPPED_BY_MOTO - {FILE_SYSTEM}
MOTO_SKIPS = "MotoSkipsIt"  # the condition, always false, of what `for_moto(conditioned=True)` keeps
ASSET_BUCKET_PREFIX = "cdk-hnb659fds-assets-"  # the CDK bootstrap bucket, where nested templates are published


def _refs(value: Any) -> set[str]:
    """Logical ids a template value reads through Ref or Fn::GetAtt."""
    found = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                found.add(inner)
            elif key == "Fn::GetAtt":
                found.add(inner[0] if isinstance(inner, list) else inner.split(".")[0])
            else:
                found |= _refs(inner)
    elif isinstance(value, list):
        for inner in value:
            found |= _refs(inner)
    return found


def _resolve_cross_stack(value: Any, outputs: dict[tuple[str, str], str], keep_imports: bool) -> Any:
    """Resolve CDK's cross-stack references (Fn::GetStackOutput, or Fn::ImportValue of an
    export) from the outputs of the stacks deployed before, as CloudFormation does; moto does
    not know Fn::GetStackOutput. A reference to an output dropped for moto gets a placeholder.
    With `keep_imports`, an import of an export that exists stays an import, which moto's
    CloudFormation resolves itself (and `as_the_service` holds against deleting its exporter)."""
    if isinstance(value, dict):
        if set(value) == {"Fn::GetStackOutput"}:
            ref = value["Fn::GetStackOutput"]
            return outputs.get((ref["StackName"], ref["OutputName"]), f"moto-skipped-{ref['OutputName']}")
        if set(value) == {"Fn::ImportValue"} and isinstance(value["Fn::ImportValue"], str):
            name = value["Fn::ImportValue"]
            if keep_imports and ("export", name) in outputs:
                return value
            return outputs.get(("export", name), f"moto-skipped-{name}")
        return {k: _resolve_cross_stack(v, outputs, keep_imports) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve_cross_stack(v, outputs, keep_imports) for v in value]
    return value


def _stub_skipped(value: Any, skipped: set[str], arn: bool = False) -> Any:
    """Replace a Ref or Fn::GetAtt of a resource moto skips by a placeholder string (shaped as an
    ARN in the Resource of an IAM policy statement and the Arn of an EventBridge target, which moto
    checks)."""
    if isinstance(value, dict):
        if value.keys() in ({"Ref"}, {"Fn::GetAtt"}) and _refs(value) & skipped:
            stub = "moto-skipped-" + "-".join(sorted(_refs(value)))
            return f"arn:aws:moto:::{stub}" if arn else stub
        return {k: _stub_skipped(v, skipped, arn or k in ("Resource", "Arn")) for k, v in value.items()}
    if isinstance(value, list):
        return [_stub_skipped(v, skipped, arn) for v in value]
    return value


def _without_dependencies(resource: dict, skipped: set[str]) -> dict:
    """The resource without DependsOn entries on skipped resources (which are left out)."""
    depends = resource.get("DependsOn")
    if depends is None:
        return resource
    kept = [d for d in ([depends] if isinstance(depends, str) else depends) if d not in skipped]
    return {k: v for k, v in resource.items() if k != "DependsOn"} | ({"DependsOn": kept} if kept else {})


def for_moto(template: dict, outputs: dict[tuple[str, str], str], skipped_types: frozenset[str] = SKIPPED_BY_MOTO,
             keep_imports: bool = False, conditioned: bool = False) -> dict:
    """The template with cross-stack references resolved, without the resources moto skips (or
    cannot create here), references to them stubbed inside the resources it builds, and without
    the outputs that read them. With `conditioned`, the skipped resources stay in the template
    under a condition that is false: moto makes none of them, but the template that GetTemplate
    gives back names them, as the deployed one does in AWS (what `fmcluster destroy` reads)."""
    skipped = {lid for lid, r in template["Resources"].items() if r["Type"] in skipped_types}
    template = _resolve_cross_stack(template, outputs, keep_imports)
    template["Resources"] = {lid: _without_dependencies(_stub_skipped(r, skipped), skipped)
                             for lid, r in template["Resources"].items() if lid not in skipped or conditioned}
    if conditioned and skipped:
        template["Conditions"] = {**template.get("Conditions", {}), MOTO_SKIPS: {"Fn::Equals": ["moto", "skips"]}}
        for lid in skipped:
            template["Resources"][lid] = {**template["Resources"][lid], "Condition": MOTO_SKIPS}
    template["Outputs"] = {key: output for key, output in template.get("Outputs", {}).items()
                           if not _refs(output["Value"]) & skipped}
    return template


def _template_url(value: Any, account: str, region: str) -> str:
    """A TemplateURL as CloudFormation resolves it (CDK's Fn::Join of the asset bucket and key)."""
    if isinstance(value, str):
        return value.replace("${AWS::AccountId}", account).replace("${AWS::Region}", region)
    if set(value) == {"Fn::Join"}:
        return value["Fn::Join"][0].join(_template_url(part, account, region) for part in value["Fn::Join"][1])
    if set(value) == {"Fn::Sub"}:
        return _template_url(value["Fn::Sub"], account, region)
    pseudo = {"AWS::URLSuffix": "amazonaws.com", "AWS::Region": region, "AWS::AccountId": account}
    return pseudo[value["Ref"]]


def publish_nested(s3: Any, parent: str, loaded: dict, outputs: dict[tuple[str, str], str], account: str,
                   region: str, **prepare: Any) -> None:
    """Upload the nested templates of `parent` (prepared for moto) where their TemplateURL points."""
    for child in loaded.values():
        if child.parent != parent:
            continue
        url = urlparse(_template_url(loaded[parent].body["Resources"][child.logical_id]["Properties"]["TemplateURL"],
                                     account, region))
        bucket, key = url.path.lstrip("/").split("/", 1)
        if bucket not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
            where = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
            s3.create_bucket(Bucket=bucket, **where)
        body = json.dumps(for_moto(json.loads(json.dumps(child.body)), outputs, **prepare))
        s3.put_object(Bucket=bucket, Key=key, Body=body.encode())
        publish_nested(s3, child.name, loaded, outputs, account, region, **prepare)


def record_outputs(stack: dict, outputs: dict[tuple[str, str], str]) -> None:
    for output in stack.get("Outputs", []):
        outputs[(stack["StackName"], output["OutputKey"])] = output["OutputValue"]
        if output.get("ExportName"):
            outputs[("export", output["ExportName"])] = output["OutputValue"]


def deploy(names: list[str], loaded: dict, region: str, *, protected: frozenset[str] = frozenset(),
           **prepare: Any) -> None:
    """Create the stacks `names` (in that order, each prepared for moto by `for_moto` with
    `prepare`) and their nested stacks from the templates `loaded` (fmcluster.deploy.assembly.load),
    in moto (inside mock_aws), with termination protection on the stacks `protected`. Each must
    end CREATE_COMPLETE."""
    import boto3

    boto3.client("ssm", region_name=region).put_parameter(
        Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String")
    cfn = boto3.client("cloudformation", region_name=region)
    s3 = boto3.client("s3", region_name=region)
    account = boto3.client("sts", region_name=region).get_caller_identity()["Account"]
    outputs: dict[tuple[str, str], str] = {}
    for name in names:
        publish_nested(s3, name, loaded, outputs, account, region, **prepare)
        body = json.dumps(for_moto(json.loads(json.dumps(loaded[name].body)), outputs, **prepare))
        cfn.create_stack(StackName=name, TemplateBody=body, Capabilities=["CAPABILITY_IAM"],
                         EnableTerminationProtection=name in protected)
        stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
        assert stack["StackStatus"] == "CREATE_COMPLETE", (name, stack.get("StackStatusReason"))
        record_outputs(stack, outputs)


# ---- what CloudFormation does that moto 5.2 does not ------------------------------------------

def as_the_service(monkeypatch: Any) -> None:
    """Make moto's CloudFormation behave as CloudFormation does where a stack is deleted (the
    module's docstring), for the rest of a test (`monkeypatch`: pytest's)."""
    from moto.cloudformation import models, parsing, responses
    from moto.cloudformation.exceptions import ValidationError
    from moto.core.responses import ActionResult

    def update_termination_protection(self: Any) -> ActionResult:
        stack = self.cloudformation_backend.get_stack(self._get_param("StackName"))
        stack.enable_termination_protection = str(self._get_param("EnableTerminationProtection")).lower() == "true"
        return ActionResult({"StackId": stack.stack_id})

    original_delete = models.CloudFormationBackend.delete_stack

    def delete_stack(self: Any, name_or_stack_id: str) -> None:
        stack = next((s for s in self.stacks.values() if name_or_stack_id in (s.name, s.stack_id)), None)
        if stack is None:
            return original_delete(self, name_or_stack_id)
        if stack.enable_termination_protection:  # CloudFormation's words
            raise ValidationError(message=f"Stack [{stack.name}] cannot be deleted while TerminationProtection is "
                                          "enabled")
        for export in stack.exports:
            users = sorted(s.name for s in self.stacks.values() if s is not stack and export.name in _imports(s))
            if users:  # CloudFormation deletes nothing, and the stack ends DELETE_FAILED
                reason = f"Export {export.name} cannot be deleted as it is in use by {', '.join(users)}"
                stack._add_stack_event("DELETE_IN_PROGRESS", resource_status_reason="User Initiated")
                stack._add_stack_event("DELETE_FAILED", resource_status_reason=reason)
                stack.status, stack.status_reason = "DELETE_FAILED", reason
                return None
        return original_delete(self, name_or_stack_id)

    original_stack_delete = models.Stack.delete

    def stack_delete(self: Any) -> None:
        from moto.ec2.exceptions import DependencyViolationError

        try:
            original_stack_delete(self)
        except DependencyViolationError:
            vpcs = [r.physical_resource_id for r in self.resource_map._parsed_resources.values()
                    if getattr(r, "cf_resource_type", None) == "AWS::EC2::VPC"]
            if not vpcs:
                raise
            for vpc in vpcs:
                _release_vpc(self.account_id, self.region_name, vpc)
            parsed = self.resource_map._parsed_resources
            for logical_id in [lid for lid, r in parsed.items() if getattr(r, "cf_resource_type", None) in RELEASED]:
                del parsed[logical_id]  # gone with the VPC's release
            original_stack_delete(self)  # what is left now goes: the VPC
        # moto works a deleted stack's outputs out again when it is described, and so makes again
        # the resources they read (a VPC, its subnets): it keeps none
        self.output_map = _NoOutputs()

    original_list = models.CloudFormationBackend.list_stack_resources

    def list_stack_resources(self: Any, name_or_stack_id: str) -> Any:
        stack = self.deleted_stacks.get(name_or_stack_id)
        if stack is None:
            return original_list(self, name_or_stack_id)
        # what a deleted stack left: its retained resources (moto would make the others again)
        return stack, [r for r in stack.resource_map._parsed_resources.values() if hasattr(r, "logical_resource_id")]

    monkeypatch.setattr(responses.CloudFormationResponse, "update_termination_protection",
                        update_termination_protection, raising=False)
    monkeypatch.setattr(models.CloudFormationBackend, "delete_stack", delete_stack)
    monkeypatch.setattr(models.Stack, "delete", stack_delete)
    monkeypatch.setattr(models.CloudFormationBackend, "list_stack_resources", list_stack_resources)
    model_map = parsing.get_model_map()
    monkeypatch.setattr(parsing, "get_model_map", lambda: {**model_map, FILE_SYSTEM: _FileSystemModel})


RELEASED = frozenset({"AWS::EC2::RouteTable", "AWS::EC2::Route", "AWS::EC2::SubnetRouteTableAssociation",
                      "AWS::EC2::NatGateway", "AWS::EC2::VPCEndpoint", "AWS::EC2::FlowLog", "AWS::EC2::InternetGateway",
                      "AWS::EC2::VPCGatewayAttachment"})


def _release_vpc(account: str, region: str, vpc_id: str) -> None:
    """What moto's CloudFormation does not delete with a stack, and what then keeps it from
    deleting the VPC: the route tables (besides the main one), NAT gateways, VPC endpoints, flow
    logs and internet gateway of the VPC. CloudFormation deletes them with their stack."""
    from moto.ec2.models import ec2_backends

    ec2 = ec2_backends[account][region]
    ec2.delete_vpc_endpoints([e.id for e in ec2.vpc_end_points.values() if e.vpc_id == vpc_id])  # (and their routes)
    ec2.delete_flow_logs([f.id for f in ec2.flow_logs.values() if f.resource_id == vpc_id])
    for nat in ec2.nat_gateways.values():
        if nat.vpc_id == vpc_id:
            ec2.delete_nat_gateway(nat.id)
    for gateway in [g for g in ec2.internet_gateways.values() if g.vpc is not None and g.vpc.id == vpc_id]:
        ec2.detach_internet_gateway(gateway.id, vpc_id)
        ec2.delete_internet_gateway(gateway.id)
    for table in [t for t in ec2.route_tables.values() if t.vpc_id == vpc_id and t.main_association_id is None]:
        table._associations.clear()
        ec2.delete_route_table(table.id)


class _NoOutputs(dict):  # type: ignore[type-arg]
    """The outputs of a deleted moto stack: none, and no exports."""

    exports: list[Any] = []


def _imports(stack: Any) -> set[str]:
    """The export names a moto stack's template imports."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if set(value) == {"Fn::ImportValue"} and isinstance(value["Fn::ImportValue"], str):
                found.add(value["Fn::ImportValue"])
            for inner in value.values():
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(stack.template_dict)
    return found


class _FileSystemModel:
    """AWS::FSx::FileSystem for moto's CloudFormation: the file system made in moto's FSx, with the
    attributes the stacks read (Ref: its id)."""

    @staticmethod
    def has_cfn_attr(attr: str) -> bool:
        return attr in ("DNSName", "LustreMountName", "ResourceARN", "RootVolumeId")

    @classmethod
    def create_from_cloudformation_json(cls, resource_name: str, cloudformation_json: dict[str, Any],
                                        account_id: str, region_name: str, **kwargs: Any) -> Any:
        from moto.fsx.models import FileSystem, fsx_backends

        class CfnFileSystem(FileSystem):
            @property
            def physical_resource_id(self) -> str:
                return self.file_system_id

            def is_created(self) -> bool:
                return True

            def get_cfn_attribute(self, attribute: str) -> str:
                return {"DNSName": self.dns_name, "LustreMountName": "mountname", "ResourceARN": self.resource_arn,
                        "RootVolumeId": f"fsvol-{self.file_system_id[3:]}"}[attribute]

        backend = fsx_backends[account_id][region_name]
        props = cloudformation_json["Properties"]
        made = CfnFileSystem(
            account_id=account_id, region_name=region_name, file_system_type=props["FileSystemType"],
            storage_capacity=int(props["StorageCapacity"]), storage_type=props.get("StorageType", "SSD"),
            subnet_ids=props["SubnetIds"], security_group_ids=props.get("SecurityGroupIds", []),
            tags=props.get("Tags"), kms_key_id=props.get("KmsKeyId"), windows_configuration=None,
            lustre_configuration=props.get("LustreConfiguration"), ontap_configuration=None,
            open_zfs_configuration=props.get("OpenZFSConfiguration"), backend=backend)
        backend.file_systems[made.file_system_id] = made
        return made
