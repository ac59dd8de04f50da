"""fmcluster diff: replacements from the create-only properties of cfn-lint's resource schemas,
followed through references, and the data-loss guard. Real spec pairs, each spec synthesized
once for the module (synthesis takes seconds), plus small hand-made templates for the rules."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from fmcluster.cli import main
from fmcluster.deploy import cfn_schemas, diff
from fmcluster.plan import report as plan
from fmcluster.spec import loader
from tests.support.docs import readme_output
from tests.support.paths import EXAMPLES, ROOT
from tests.support.specs import validated
from tests.support.templates import fsx

BASE = ROOT / "examples/p5-pcs.yaml"
pytestmark = pytest.mark.synth


def _edit(path: Path, edit) -> dict:
    data = yaml.safe_load(BASE.read_text())
    edit(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return data


def _grow(d):
    d["node_groups"][0]["count"] = 24


def _efa(d):
    d["storage"]["lustre"].update(efa=True, storage_capacity_gib=19200)  # EFA at 250 MB/s/TiB: 19,200 GiB steps


def _persistent_1(d):
    lustre = d["storage"]["lustre"]
    lustre.update(deployment_type="PERSISTENT_1")
    for key in ("throughput_per_tib", "links"):  # PERSISTENT_1 has its own tiers and no links
        del lustre[key]


def _rename(d):
    d["name"] = "llm-pretrain2"


def _region(d):
    d.update(region="us-west-2", availability_zone_id="usw2-az1")


def _rename_and_region(d):
    _rename(d)
    _region(d)


def _move(d):
    d["availability_zone_id"] = "use1-az6"


EDITS = {"grow": _grow, "efa": _efa, "persistent-1": _persistent_1, "rename": _rename, "region": _region,
         "rename-and-region": _rename_and_region, "move": _move}


@pytest.fixture(scope="module")
def specs(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("specs")
    paths = {"base": BASE}
    for name, edit in EDITS.items():
        paths[name] = folder / f"{name}.yaml"
        _edit(paths[name], edit)
        assert loader.load(paths[name]).ok, loader.load(paths[name]).diagnostics
    return paths


@pytest.fixture(scope="module")
def cached(corpus):
    """A synthesizer for diff.run that synthesizes each spec once for the whole module; the base
    example's templates are the run's corpus's."""
    from fmcluster.deploy import assembly

    cache: dict[str, dict] = {json.dumps(loader.load(BASE).spec.resolved(), sort_keys=True):
                              assembly.templates(corpus.assembly(BASE.relative_to(ROOT).as_posix()))}

    def synthesize(spec):
        key = json.dumps(spec.resolved(), sort_keys=True)
        if key not in cache:
            cache[key] = corpus.in_process(spec)
        return cache[key]

    return synthesize


def run_diff(synthesize, old, new, *flags: str) -> int:
    """`fmcluster diff OLD NEW FLAGS` with `synthesize` handed in (the command line hands in
    fmcluster.deploy.synth.apart, which runs the CDK app: test_the_command_line_runs_the_app)."""
    a, b = (loader.load(path).spec for path in (old, new))
    fmt = flags[flags.index("--format") + 1] if "--format" in flags else "text"
    return shown(diff.run(a, b, "--allow-data-loss" in flags, names=(str(old), str(new)), synthesize=synthesize), fmt)


def shown(report: diff.DiffReport, fmt: str = "text") -> int:
    """Print the report as the command line does; its exit code."""
    out, err = diff.render(report, fmt)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return diff.exit_code(report)


@pytest.fixture
def cli(cached, monkeypatch, capsys):
    """`fmcluster diff ARGS` through the command line (fmcluster.cli.program.main), the app synthesized in
    this process, once per spec for the module (test_the_command_line_runs_the_app runs it as the
    command line does): (exit code, stdout)."""
    from fmcluster.deploy import synth

    monkeypatch.setattr(synth, "apart", lambda paths, steps=None: [cached(loader.load(path).spec) for path in paths])

    def run(*args) -> tuple[int, str]:
        code = main(["diff", *map(str, args)])
        return code, capsys.readouterr().out

    return run


def last_line(out: str) -> str:
    return out.rstrip("\n").splitlines()[-1]


def report(specs, templates, old: str, new: str) -> diff.Comparison:
    a, b = (loader.load(specs[name]).spec for name in (old, new))
    return diff.compare(templates(a), templates(b), region=b.region)


def changes(r: diff.Comparison) -> dict[str, diff.Change]:
    return {c.logical_id: c for s in r.stacks for c in s.changes}


def test_growing_a_node_group_is_safe(specs, cached, capsys):
    """The group's resources are in its nested stack (seen as llm-pretrain-cluster/NodeGroup-gpu);
    the cluster stack updates only that nested stack's template."""
    r = report(specs, cached, "base", "grow")
    statuses = {s.name: s.status for s in r.stacks}
    assert statuses.pop("llm-pretrain-cluster/NodeGroup-gpu") == "changed"
    assert statuses.pop("llm-pretrain-cluster") == "changed"
    assert set(statuses.values()) == {"unchanged"}  # network, storage, observability
    (change,) = next(s for s in r.stacks if s.name == "llm-pretrain-cluster/NodeGroup-gpu").changes
    assert (change.type, change.action) == ("AWS::PCS::ComputeNodeGroup", diff.UPDATE)
    assert change.paths == ["ScalingConfiguration.MaxInstanceCount", "ScalingConfiguration.MinInstanceCount"]
    nested, teams = next(s for s in r.stacks if s.name == "llm-pretrain-cluster").changes
    assert (nested.type, nested.action, nested.stateful) == ("AWS::CloudFormation::Stack", diff.UPDATE, False)
    # the teams' Slurm accounting follows the group's GPUs (their burst limits)
    assert (teams.type, teams.action, teams.paths) == ("AWS::SSM::Parameter", diff.UPDATE, ["Value"])
    assert [p.split(".")[0] for p in nested.paths] == ["TemplateURL"]  # the nested template's new asset
    assert not r.data_loss
    assert run_diff(cached, specs["base"], specs["grow"]) == 0
    out = capsys.readouterr().out
    assert "~ update AWS::PCS::ComputeNodeGroup NodeGroupgpuNodeGroup" in out
    assert last_line(out) == "ok: no stateful resource is replaced or removed"


def test_efa_on_the_file_system_replaces_it(specs, cached, capsys):
    r = report(specs, cached, "base", "efa")
    found = changes(r)
    fs = next(c for c in found.values() if c.type == "AWS::FSx::FileSystem")
    assert fs.action == diff.REPLACE and fs.stateful and fs.retained
    assert "SecurityGroupIds is create-only" in fs.reasons  # the EFA security group joins at creation
    links = [c for c in found.values() if c.type == "AWS::FSx::DataRepositoryAssociation"]
    assert len(links) == 2 and all(c.action == diff.REPLACE for c in links)
    assert all(f"FileSystemId refers to {fs.logical_id}, which is replaced" in c.reasons for c in links)
    assert not any(c.data_loss for c in links)  # a link holds no data: the files are in the file system and bucket
    assert r.data_loss == [fs]
    assert run_diff(cached, specs["base"], specs["efa"]) == 1
    out = capsys.readouterr().out
    assert "! REPLACE AWS::FSx::FileSystem LustreFileSystem" in out
    assert last_line(out) == ("DATA LOSS: 1 stateful resource replaced or removed; refusing (exit 1): copy or back "
                              "up the data first, then pass --allow-data-loss")
    assert out.count("DATA LOSS") == 1 and "ok:" not in out
    assert run_diff(cached, specs["base"], specs["efa"], "--allow-data-loss") == 0
    assert last_line(capsys.readouterr().out).endswith("replaced or removed; allowed by --allow-data-loss")


def test_lustre_deployment_type_replaces_it(specs, cached, capsys):
    """AWS::FSx::FileSystem has a legacy schema (no handlers) that lists no nested create-only
    property; FSx's UpdateFileSystem does not take DeploymentType, so the file system is replaced."""
    r = report(specs, cached, "base", "persistent-1")
    found = changes(r)
    fs = next(c for c in found.values() if c.type == "AWS::FSx::FileSystem")
    assert fs.action == diff.REPLACE and fs.data_loss
    assert any("LustreConfiguration.DeploymentType is set at creation" in reason for reason in fs.reasons)
    removed = [c for c in found.values() if c.action == diff.REMOVE]
    assert {c.type for c in removed} == {"AWS::FSx::DataRepositoryAssociation"}
    assert run_diff(cached, specs["base"], specs["persistent-1"], "--format", "json") == 1
    data = json.loads(capsys.readouterr().out)
    assert {c["type"] for c in data["data_loss"]} == {"AWS::FSx::FileSystem"}  # the links removed hold no data
    assert data["allow_data_loss"] is False
    assert (data["verdict"]["kind"], data["verdict"]["refused"]) == ("data-loss", True)


IDENTITY = {"rename": "name llm-pretrain -> llm-pretrain2", "region": "region us-east-1 -> us-west-2",
            "rename-and-region": "name llm-pretrain -> llm-pretrain2, region us-east-1 -> us-west-2"}


@pytest.mark.parametrize("new", sorted(IDENTITY))
def test_a_new_name_or_region_is_a_new_cluster_beside_the_old_one(new, specs, cli):
    """Name, region or both: the same verdict, a new cluster whose stacks are all new, the old
    stacks untouched and their file system and buckets left in them (nothing compared with them,
    nothing they hold counted as replaced or removed); refused unless allowed."""
    code, out = cli(specs["base"], specs[new])
    assert code == 1
    changes = IDENTITY[new]
    assert last_line(out) == (f"NEW CLUSTER: {changes}: new stacks beside the old ones, which keep 4 stateful "
                              "resources with the data; the new cluster starts with empty storage; refusing "
                              "(exit 1): move the data (above), then pass --allow-data-loss")
    name = "llm-pretrain2" if "name" in changes else "llm-pretrain"
    stacks = [line for line in out.splitlines() if line.startswith("stack ")]
    assert stacks and all(line.startswith(f"stack {name}-") and ("(new stack)" in line or "(new nested stack)" in line)
                          for line in stacks)
    assert ("  the old stacks stay as deployed (us-east-1, account of the credentials), and keep costing, until "
            "destroyed: llm-pretrain-cluster, llm-pretrain-images, llm-pretrain-network, llm-pretrain-observability, "
            "llm-pretrain-reference, llm-pretrain-storage\n") in out
    left = out.split("  the old cluster's data stays in them:\n", 1)[1].split("\n  to move the data: ", 1)[0]
    assert [line.split()[-1] for line in left.splitlines()] == [
        "(AWS::APS::Workspace)", "(AWS::S3::Bucket)", "(AWS::S3::Bucket)", "(AWS::FSx::FileSystem)"]
    assert "aws s3 sync" in out and "npx cdk destroy -c spec=OLD --all" in out
    assert "DATA LOSS" not in out and "ok:" not in out and "note: " not in out
    code, out = cli(specs["base"], specs[new], "--allow-data-loss")
    assert code == 0 and last_line(out).startswith(f"NEW CLUSTER: {changes}: ")
    assert last_line(out).endswith("; allowed by --allow-data-loss")


def test_a_new_cluster_has_the_same_verdict_in_json(specs, cli):
    code, out = cli(specs["base"], specs["rename"], "--format", "json")
    data = json.loads(out)
    assert code == 1 and data["verdict"]["kind"] == "new-cluster" and data["verdict"]["refused"]
    assert data["verdict"]["line"].startswith("NEW CLUSTER: name llm-pretrain -> llm-pretrain2: ")
    assert data["data_loss"] == [] and {s["status"] for s in data["stacks"]} == {"added"}
    assert {c["type"] for c in data["new_cluster"]["left"]} == {"AWS::S3::Bucket", "AWS::FSx::FileSystem",
                                                               "AWS::APS::Workspace"}
    _, text = cli(specs["base"], specs["rename"])
    # the same verdict; the JSON, which has no "above", points at its own field for how to move the data
    assert "above" not in data["verdict"]["line"] and "(new_cluster.hint)" in data["verdict"]["line"]
    assert last_line(text) == data["verdict"]["line"].replace("(new_cluster.hint)", "(above)")


def test_renaming_an_eks_node_group_loses_no_data(cli, cached, tmp_path):
    """The group's nested stack goes, with its Capacity Block scaler's log group (a Lambda
    handler's): a log group holds no data, so the rename is no data loss."""
    eks = ROOT / "examples/p5en-eks.yaml"
    renamed = tmp_path / "p5en-eks-renamed.yaml"
    data = yaml.safe_load(eks.read_text())
    data["node_groups"][0]["name"] = "train"
    data["teams"][0]["gpus"] = {"train": 48}  # the team's guarantee follows the group's name
    renamed.write_text(yaml.safe_dump(data, sort_keys=False))
    gone = cached(loader.load(eks).spec)["p5en-eks-cluster/NodeGroup-gpu"]["Resources"].values()
    assert "AWS::Logs::LogGroup" in {r["Type"] for r in gone}
    code, out = cli(eks, renamed)
    assert "stack p5en-eks-cluster/NodeGroup-gpu (nested stack: deleted with its resources)" in out
    assert "stack p5en-eks-cluster/NodeGroup-train (new nested stack)" in out
    assert (code, last_line(out)) == (0, "ok: no stateful resource is replaced or removed")
    assert "[stateful]" not in out and "DATA LOSS" not in out


def test_moving_the_gpu_zone_fails_at_the_network_whatever_is_allowed(specs, cached, capsys):
    """The subnets' ids are exports the file system, the PCS cluster, the node groups and the image
    builds import: CloudFormation refuses the network's update, so no new subnet slides under the file system."""
    assert run_diff(cached, specs["base"], specs["move"], "--allow-data-loss") == 1
    out = capsys.readouterr().out
    fails = out.split("the service refuses 1 change:\n", 1)[1]
    assert fails.startswith("  llm-pretrain-network Outputs.ExportsOutputRef")
    assert last_line(out) == ("UPDATE FAILS: 1 change that the service refuses (and 1 stateful resource it would "
                              "replace or remove); refusing (exit 1): no switch allows it, undo the change")
    assert "ok:" not in out and "allowed by" not in out
    assert ("goes away, and llm-pretrain-cluster, llm-pretrain-cluster/NodeGroup-gpu, llm-pretrain-images, "
            "llm-pretrain-reference, llm-pretrain-storage import it") in fails
    assert "changes: SubnetIds[0]\n" in out  # the file system's, shown as a reader knows it


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_against_itself(example, cached, capsys):
    """No change for an unchanged spec, and the stacks are those the plan announces."""
    spec = loader.load(ROOT / example).spec
    built = cached(spec)
    assert sorted(n for n in built if "/" not in n) == sorted(s.name for s in plan.build(spec).stacks)
    assert run_diff(cached, str(ROOT / example), str(ROOT / example)) == 0
    out = capsys.readouterr().out
    assert out.count(": no changes") == len(built)


def test_invalid_spec_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    assert main(["diff", str(BASE), str(bad)]) == 2
    assert "bad.yaml" in capsys.readouterr().err


def test_the_command_line_runs_the_app(specs, capfd):
    """`fmcluster diff` synthesizes both specs in one run of the CDK app (fmcluster.deploy.synth.apart):
    the same program `cdk synth` runs."""
    assert main(["diff", str(specs["base"]), str(specs["grow"])]) == 0
    out = capfd.readouterr().out
    assert "~ update AWS::PCS::ComputeNodeGroup NodeGroupgpuNodeGroup" in out


# ---- the rules on small templates (no synthesis) -------------------------------------------

def network(cidr: str) -> dict:
    return {"Resources": {
        "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
        "Subnet": {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "Vpc"}, "CidrBlock": cidr}}},
        "Outputs": {"SubnetOut": {"Value": {"Ref": "Subnet"}}}}


CROSS = {"Fn::GetStackOutput": {"StackName": "c-network", "OutputName": "SubnetOut"}}


def test_a_replaced_subnet_replaces_the_file_system_in_another_stack():
    old = {"c-network": network("10.0.0.0/17"), "c-storage": {"Resources": {"Fs": fsx(CROSS)}}}
    new = {"c-network": network("10.0.0.0/18"), "c-storage": {"Resources": {"Fs": fsx(CROSS)}}}
    r = diff.compare(old, new, "us-east-1")
    found = changes(r)
    assert found["Subnet"].action == diff.REPLACE and found["Subnet"].reasons == ["CidrBlock is create-only"]
    assert found["Fs"].action == diff.REPLACE
    assert found["Fs"].reasons == ["SubnetIds refers to Subnet in c-network, which is replaced"]
    assert [c.logical_id for c in r.data_loss] == ["Fs"]


def exporting_network(cidr: str, export: bool = True) -> dict:
    template = network(cidr)
    if export:
        template["Outputs"]["SubnetExport"] = {"Value": {"Ref": "Subnet"}, "Export": {"Name": "c-network:Subnet"}}
    return template


IMPORT = {"Fn::ImportValue": "c-network:Subnet"}


def test_a_weak_reference_and_an_import_of_the_same_value_are_the_same_value():
    """The upgrade of a deployed cluster from Fn::GetStackOutput to Fn::ImportValue replaces nothing."""
    old = {"c-network": network("10.0.0.0/17"), "c-storage": {"Resources": {"Fs": fsx(CROSS)}}}
    new = {"c-network": exporting_network("10.0.0.0/17"), "c-storage": {"Resources": {"Fs": fsx(IMPORT)}}}
    r = diff.compare(old, new, "us-east-1")
    assert changes(r) == {} and not diff.refused(r, allowed=False)
    # an import of another value is a change of the create-only SubnetIds
    other = {"c-network": exporting_network("10.0.0.0/17"), "c-storage": {"Resources": {"Fs": fsx(
        {"Fn::ImportValue": "c-network:Other"})}}}
    other["c-network"]["Outputs"]["Other"] = {"Value": {"Ref": "Vpc"}, "Export": {"Name": "c-network:Other"}}
    assert changes(diff.compare(new, other, "us-east-1"))["Fs"].action == diff.REPLACE


def test_a_replaced_subnet_that_is_imported_fails_the_update_instead():
    """An export in use cannot change: the network's update fails and rolls back, whatever is
    allowed; the file system is never reached."""
    old = {"c-network": exporting_network("10.0.0.0/17"), "c-storage": {"Resources": {"Fs": fsx(IMPORT)}}}
    new = {"c-network": exporting_network("10.0.0.0/18"), "c-storage": {"Resources": {"Fs": fsx(IMPORT)}}}
    r = diff.compare(old, new, "us-east-1")
    subnet = changes(r)["Subnet"]
    assert subnet.action == diff.FAILS
    assert subnet.reasons[-1] == ("the export c-network:Subnet names Subnet, which is replaced (a new id), and "
                                  "c-storage imports it: CloudFormation refuses to change an export in use, "
                                  "and the update rolls back (to make the change on purpose, back up the data "
                                  "and destroy the importing stacks first)")
    assert diff.refused(r, allowed=True)
    assert "x UPDATE FAILS AWS::EC2::Subnet Subnet" in diff.render_text(r, "old", "new", True)


@pytest.mark.parametrize("change", ["value", "removed"])
def test_an_export_in_use_that_changes_or_goes_fails(change):
    old = {"c-network": exporting_network("10.0.0.0/17"), "c-storage": {"Resources": {"Fs": fsx(IMPORT)}}}
    new = {"c-network": exporting_network("10.0.0.0/17", export=change != "removed"),
           "c-storage": {"Resources": {"Fs": fsx("subnet-1")}}}
    if change == "value":
        new["c-network"]["Outputs"]["SubnetExport"]["Value"] = {"Ref": "Vpc"}
    r = diff.compare(old, new, "us-east-1")
    found = changes(r)
    output = found["Outputs.SubnetExport"]
    assert output.action == diff.FAILS and output.stack == "c-network"
    assert output.reasons[0].startswith({"value": "the value of the export c-network:Subnet changes",
                                         "removed": "the export c-network:Subnet goes away"}[change])
    assert diff.refused(r, allowed=True)
    # not imported by anyone (as deployed): nothing refuses it
    unused = {"c-network": exporting_network("10.0.0.0/17"), "c-storage": {"Resources": {"Fs": fsx("subnet-1")}}}
    assert not diff.compare(unused, new, "us-east-1").failing


def nested_cluster(cluster_name: str, launch_template_name: str) -> dict[str, dict]:
    """A cluster stack with a PCS cluster, and a node group's nested stack that receives the
    cluster's id as a parameter."""
    stack = {"Type": "AWS::CloudFormation::Stack", "Metadata": {
        "aws:cdk:path": "c-cluster/NodeGroup-gpu.NestedStack/NodeGroup-gpu.NestedStackResource"},
        "Properties": {"TemplateURL": "https://s3.amazonaws.com/b/x.json",
                       "Parameters": {"ClusterIdParam": {"Fn::GetAtt": ["Cluster", "Id"]}}}}
    parent = {"Resources": {"Cluster": {"Type": "AWS::PCS::Cluster", "Properties": {"Name": cluster_name}},
                            "NodeGroupStack": stack}}
    nested = {"Parameters": {"ClusterIdParam": {"Type": "String"}}, "Resources": {
        "LaunchTemplate": {"Type": "AWS::EC2::LaunchTemplate",
                           "Properties": {"LaunchTemplateName": launch_template_name, "LaunchTemplateData": {}}},
        "Group": {"Type": "AWS::PCS::ComputeNodeGroup", "Properties": {"ClusterId": {"Ref": "ClusterIdParam"}}}}}
    return {"c-cluster": parent, "c-cluster/NodeGroup-gpu": nested}


def test_a_replaced_launch_template_in_a_nested_stack_shows():
    r = diff.compare(nested_cluster("c", "gpu"), nested_cluster("c", "gpu-2"), "us-east-1")
    (stack,) = [s for s in r.stacks if s.status == "changed"]
    assert stack.name == "c-cluster/NodeGroup-gpu"
    (change,) = stack.changes
    assert (change.logical_id, change.action) == ("LaunchTemplate", diff.REPLACE)
    text = diff.render_text(r, "old", "new", False)
    assert "stack c-cluster/NodeGroup-gpu: 1 replace" in text and "! REPLACE AWS::EC2::LaunchTemplate" in text


def test_a_replacement_is_followed_into_nested_stacks_through_their_parameters():
    r = diff.compare(nested_cluster("c", "gpu"), nested_cluster("c2", "gpu"), "us-east-1")
    found = {(c.stack, c.logical_id): c for s in r.stacks for c in s.changes}
    assert found[("c-cluster", "Cluster")].action == diff.REPLACE
    group = found[("c-cluster/NodeGroup-gpu", "Group")]
    assert group.action == diff.REPLACE
    assert group.reasons == ["ClusterId refers to Cluster in c-cluster, which is replaced"]


def test_in_place_and_nested_changes_of_a_legacy_type():
    base = {"c": {"Resources": {"Fs": fsx("subnet-1", PerUnitStorageThroughput=250)}}}
    bigger = {"c": {"Resources": {"Fs": {**fsx("subnet-1", PerUnitStorageThroughput=250)}}}}
    bigger["c"]["Resources"]["Fs"]["Properties"]["StorageCapacity"] = 2400
    assert changes(diff.compare(base, bigger, "us-east-1"))["Fs"].action == diff.UPDATE  # top level, not create-only
    faster = {"c": {"Resources": {"Fs": fsx("subnet-1", PerUnitStorageThroughput=500)}}}
    change = changes(diff.compare(base, faster, "us-east-1"))["Fs"]  # UpdateFileSystem takes it
    assert change.action == diff.UPDATE and change.paths == ["LustreConfiguration.PerUnitStorageThroughput"]


# What each LustreConfiguration property of the resource schema does when it changes: in place
# where FSx's UpdateFileSystem takes it (botocore's UpdateFileSystemLustreConfiguration), else the
# file system is replaced (set at creation: CreateFileSystemLustreConfiguration only).
LUSTRE_VERDICTS = {
    "AutoImportPolicy": diff.UPDATE, "AutomaticBackupRetentionDays": diff.UPDATE,
    "DailyAutomaticBackupStartTime": diff.UPDATE, "DataCompressionType": diff.UPDATE,
    "DataReadCacheConfiguration": diff.UPDATE, "LogConfiguration": diff.UPDATE,
    "MetadataConfiguration": diff.UPDATE, "PerUnitStorageThroughput": diff.UPDATE,
    "ThroughputCapacity": diff.UPDATE, "WeeklyMaintenanceStartTime": diff.UPDATE,
    "CopyTagsToBackups": diff.REPLACE, "DeploymentType": diff.REPLACE, "DriveCacheType": diff.REPLACE,
    "EfaEnabled": diff.REPLACE, "ExportPath": diff.REPLACE, "ImportPath": diff.REPLACE,
    "ImportedFileChunkSize": diff.REPLACE,
}


def test_the_verdict_table_covers_every_lustre_property_of_the_schema():
    from fmcluster.deploy import cfn_schemas

    schema = cfn_schemas.document("AWS::FSx::FileSystem")
    assert schema is not None
    assert set(LUSTRE_VERDICTS) == set(schema["definitions"]["LustreConfiguration"]["properties"])


@pytest.mark.parametrize("prop", sorted(LUSTRE_VERDICTS))
def test_each_lustre_property_change_has_its_verdict(prop):
    old = {"c": {"Resources": {"Fs": fsx("subnet-1", **{prop: "old"})}}}
    new = {"c": {"Resources": {"Fs": fsx("subnet-1", **{prop: "new"})}}}
    change = changes(diff.compare(old, new, "us-east-1"))["Fs"]
    assert change.action == LUSTRE_VERDICTS[prop], change.reasons
    assert change.data_loss == (LUSTRE_VERDICTS[prop] == diff.REPLACE)


def test_a_smaller_file_system_is_an_update_that_fails_and_is_refused_whatever_is_allowed():
    old = {"c": {"Resources": {"Fs": fsx("subnet-1")}}}
    new = {"c": {"Resources": {"Fs": fsx("subnet-1")}}}
    old["c"]["Resources"]["Fs"]["Properties"]["StorageCapacity"] = 4800
    new["c"]["Resources"]["Fs"]["Properties"]["StorageCapacity"] = 2400
    r = diff.compare(old, new, "us-east-1")
    change = changes(r)["Fs"]
    assert change.action == diff.FAILS and not change.data_loss
    assert "only grows" in change.reasons[0]
    assert diff.refused(r, allowed=True) and diff.refused(r, allowed=False)
    text = diff.render_text(r, "old", "new", True)
    assert "x UPDATE FAILS AWS::FSx::FileSystem Fs" in text and "no switch allows it" in text
    assert json.loads(diff.render_json(r, "old", "new", True))["fails"][0]["logical_id"] == "Fs"


def test_type_change_unknown_type_and_removed_retained_resource():
    old = {"c": {"Resources": {"A": {"Type": "AWS::SQS::Queue"}, "B": {"Type": "Custom::Thing", "Properties": {"X": 1}},
                               "K": {"Type": "AWS::IAM::Role", "DeletionPolicy": "Retain", "Properties": {}}}}}
    new = {"c": {"Resources": {"A": {"Type": "AWS::SNS::Topic"},
                               "B": {"Type": "Custom::Thing", "Properties": {"X": 2}}}}}
    found = changes(diff.compare(old, new, "us-east-1"))
    assert found["A"].action == diff.REPLACE and found["A"].reasons == ["type changes from AWS::SQS::Queue"]
    assert found["B"].action == diff.MAY_REPLACE
    assert found["K"].action == diff.REMOVE and found["K"].retained
    assert not found["K"].data_loss  # retained, yet no data: only the types that hold data count


def test_only_what_holds_data_counts_never_a_log_group():
    """A log group (a handler's, retained or not), a queue, a link or a security group leaving is
    no data loss; a bucket, a file system, a workspace, or a key that encrypts a bucket is."""
    def removing(resources: dict) -> diff.Comparison:
        return diff.compare({"c": {"Resources": resources}}, {"c": {"Resources": {}}}, "us-east-1")

    innocent = {"Logs": {"Type": "AWS::Logs::LogGroup", "DeletionPolicy": "Retain", "Properties": {}},
                "HandlerLogs": {"Type": "AWS::Logs::LogGroup", "Properties": {"RetentionInDays": 7}},
                "Queue": {"Type": "AWS::SQS::Queue"}, "Link": {"Type": "AWS::FSx::DataRepositoryAssociation",
                                                             "DeletionPolicy": "Retain", "Properties": {}},
                "Group": {"Type": "AWS::EC2::SecurityGroup", "DeletionPolicy": "Retain", "Properties": {}},
                "TopicKey": {"Type": "AWS::KMS::Key", "Properties": {}},
                "Topic": {"Type": "AWS::SNS::Topic", "Properties": {"KmsMasterKeyId": {"Ref": "TopicKey"}}}}
    r = removing(innocent)
    assert r.data_loss == [] and diff.render_text(r, "old", "new", False).endswith(
        "\nok: no stateful resource is replaced or removed\n")
    data = {"Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketEncryption": {
        "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {
            "SSEAlgorithm": "aws:kms", "KMSMasterKeyID": {"Fn::GetAtt": ["BucketKey", "Arn"]}}}]}}},
        "BucketKey": {"Type": "AWS::KMS::Key", "Properties": {}}, "Fs": fsx("subnet-1"),
        "Metrics": {"Type": "AWS::APS::Workspace", "Properties": {}},
        "Dashboards": {"Type": "AWS::Grafana::Workspace", "Properties": {}}}
    assert sorted(c.logical_id for c in removing({**innocent, **data}).data_loss) == sorted(data)


def test_references_are_found_in_every_intrinsic():
    value = {"A": {"Ref": "X"}, "B": {"Fn::GetAtt": ["Y", "Arn"]}, "C": {"Fn::GetAtt": "Z.Id"},
             "D": {"Fn::Sub": "arn:${AWS::Partition}:s3:::${Bucket}/${Key.Arn}"}, "E": {"Ref": "AWS::Region"},
             "F": {"Fn::GetStackOutput": {"StackName": "s", "OutputName": "o"}}, "G": {"Fn::ImportValue": "exp"}}
    assert diff.references(value) == {("res", "X"), ("res", "Y"), ("res", "Z"), ("res", "Bucket"), ("res", "Key"),
                                      ("out", "s", "o"), ("export", "exp")}


def test_schemas_come_from_cfn_lint():
    assert cfn_schemas.available()
    fs = cfn_schemas.schema("AWS::FSx::FileSystem")
    assert ("SecurityGroupIds",) in fs.create_only and ("SubnetIds",) in fs.create_only and fs.legacy
    bucket = cfn_schemas.schema("AWS::S3::Bucket")
    assert ("BucketName",) in bucket.create_only and not bucket.legacy
    assert cfn_schemas.schema("AWS::Nothing::Here") is None
    assert all(cfn_schemas.holds_data(t) for t in ("AWS::FSx::FileSystem", "AWS::S3::Bucket", "AWS::KMS::Key",
                                                   "AWS::APS::Workspace", "AWS::Grafana::Workspace",
                                                   "AWS::RDS::DBInstance", "AWS::SecretsManager::Secret"))
    assert not any(cfn_schemas.holds_data(t) for t in ("AWS::EC2::LaunchTemplate", "AWS::Logs::LogGroup",
                                                       "AWS::FSx::DataRepositoryAssociation"))
    assert cfn_schemas.values_at({"Tags": [{"Key": "a"}, {"Key": "b"}]}, ("Tags", "*", "Key")) == ["a", "b"]


@pytest.mark.parametrize("new, shown", [("efa", "p5-pcs-efa.yaml     # lustre.efa: true, 19,200 GiB"),
                                        ("grow", "p5-pcs-grow.yaml    # the gpu group grows from 16 to 24")])
def test_readme_shows_real_diff_output(specs, cached, new, shown):
    a, b = (loader.load(specs[name]).spec for name in ("base", new))
    real, _ = diff.render(diff.run(a, b, names=("examples/p5-pcs.yaml", shown.split()[0]), synthesize=cached))
    assert readme_output(f"fmcluster diff examples/p5-pcs.yaml {shown}") == real


def test_another_account_is_a_new_cluster_and_an_unnamed_one_is_not_known(capsys):
    """The account is part of the identity where both specs name one; where only one does, the
    other is the credentials' account, which the specs do not say: compared as the same, and said."""
    from tests.support.specs import base_spec, validated, with_

    old = validated(with_(base_spec(), "account", "111122223333"))
    new = validated(with_(base_spec(), "account", "444455556666"))
    old_templates = {"c-storage": {"Resources": {"Fs": fsx("subnet-1")}}}
    new_templates = {"c-storage": {"Resources": {"Fs": fsx("subnet-1")}}}
    by_account = {"111122223333": old_templates, "444455556666": new_templates}
    assert shown(diff.run(old, new, synthesize=lambda spec: by_account[spec.account])) == 1
    out = capsys.readouterr().out
    assert last_line(out).startswith("NEW CLUSTER: account 111122223333 -> 444455556666: new stacks beside the old "
                                     "ones, which keep 1 stateful resource with the data;")
    assert "  the old stacks stay as deployed (us-east-1, account 111122223333)" in out
    unnamed = validated(base_spec())
    assert shown(diff.run(unnamed, new, synthesize=lambda spec: old_templates), "json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"]["kind"] == "ok" and report["new_cluster"] is None
    assert report["notes"][0].startswith("only NEW names an account (444455556666)")


def _block_group(version: str) -> dict:
    return {"Type": "AWS::EKS::Nodegroup", "Properties": {
        "ClusterName": "c", "NodeRole": "arn:aws:iam::111122223333:role/n", "Subnets": ["subnet-1"],
        "CapacityType": "CAPACITY_BLOCK", "ScalingConfig": {"MinSize": 0, "DesiredSize": 0, "MaxSize": 8},
        "LaunchTemplate": {"Id": "lt-1", "Version": version},
        "Tags": {"fmcluster:cluster": "c", "fmcluster:node-group": "gpu"}}}


def test_an_update_of_a_capacity_block_node_group_says_to_hold_and_scale_it_to_zero():
    old = {"c-cluster/NodeGroup-gpu": {"Resources": {"Group": _block_group("1")}}}
    new = {"c-cluster/NodeGroup-gpu": {"Resources": {"Group": _block_group("2")}}}
    r = diff.compare(old, new, "us-east-1")
    assert r.notes == ["node group gpu is on a Capacity Block and this change updates it (c-cluster/NodeGroup-gpu "
                       "Group): EKS wants it at desired size 0 for the update, so hold its scaler "
                       "(/fmcluster/c/node-groups/gpu/hold) and scale it to 0 before deploying, and delete the "
                       "hold after (README, Capacity Blocks)"]
    assert not diff.refused(r, allowed=False)  # advice, not a refusal
    assert diff.render_text(r, "old", "new", False).splitlines()[1].startswith("note: node group gpu")
    # an on-demand group, or no change of the group: no note
    on_demand = {k: {"Resources": {"Group": {**g["Resources"]["Group"], "Properties": {
        **g["Resources"]["Group"]["Properties"], "CapacityType": "ON_DEMAND"}}}} for k, g in new.items()}
    assert diff.compare({k: {"Resources": {"Group": {**on_demand[k]["Resources"]["Group"], "Properties": {
        **on_demand[k]["Resources"]["Group"]["Properties"], "LaunchTemplate": {"Id": "lt-1", "Version": "1"}}}}}
        for k in on_demand}, on_demand, "us-east-1").notes == []
    assert diff.compare(new, new, "us-east-1").notes == []


# ---- node images (NAME-images) --------------------------------------------------------------

def _token(key: str) -> str:
    return "".join(ch for ch in key if ch.isalnum())


def image_templates(spec, cluster_changes: bool = False) -> dict[str, dict]:
    """NAME-images and NAME-cluster as the images stack lays them out: per node image, under a
    construct named by its key, an Image Builder component, recipe and image whose names carry
    what the image is built from (here images.revision), and an output of the AMI id that
    NAME-cluster reads by a weak cross-stack reference (its text the same whatever the AMI)."""
    from fmcluster.model import cluster as model

    m = model.resolve(spec)
    images, cluster = f"{m.name}-images", f"{m.name}-cluster"
    resources, outputs, groups = {}, {}, {}
    for image in m.images:
        token, name = _token(image.key), f"{m.name}-{image.key}-r{image.revision}"
        resources[f"{token}Component1A2B3C4D"] = {"Type": "AWS::ImageBuilder::Component", "Properties": {
            "Name": name, "Platform": "Linux", "Version": "1.0.0", "Data": "schemaVersion: 1.0"}}
        resources[f"{token}Recipe5E6F7A8B"] = {"Type": "AWS::ImageBuilder::ImageRecipe", "Properties": {
            "Name": name, "Version": "1.0.0", "ParentImage": image.base.parent,
            "Components": [{"ComponentArn": {"Fn::GetAtt": [f"{token}Component1A2B3C4D", "Arn"]}}]}}
        resources[f"{token}Infrastructure9C0D1E2F"] = {"Type": "AWS::ImageBuilder::InfrastructureConfiguration",
                                                     "Properties": {"Name": f"{m.name}-{image.key}",
                                                                    "InstanceProfileName": "build"}}
        resources[f"{token}Image3A4B5C6D"] = {"Type": "AWS::ImageBuilder::Image", "Properties": {
            "ImageRecipeArn": {"Fn::GetAtt": [f"{token}Recipe5E6F7A8B", "Arn"]},
            "InfrastructureConfigurationArn": {"Fn::GetAtt": [f"{token}Infrastructure9C0D1E2F", "Arn"]}}}
        outputs[f"ImageId{token}"] = {"Value": {"Fn::GetAtt": [f"{token}Image3A4B5C6D", "ImageId"]}}
        for group in image.groups:
            groups[f"NodeGroup{group}"] = {"Type": "AWS::PCS::ComputeNodeGroup", "Properties": {
                "ClusterId": "pcs_1", "AmiId": {"Fn::GetStackOutput": {"StackName": images,
                                                                       "OutputName": f"ImageId{token}"}},
                "Tags": {"revision": str(image.revision)} if cluster_changes else {}}}
    return {images: {"Resources": resources, "Outputs": outputs}, cluster: {"Resources": groups}}


def _revision(spec, revision: int):
    from tests.support.specs import validated

    return validated({**json.loads(json.dumps(spec.model_dump(mode="json", by_alias=True, exclude_none=True))),
                      "images": {"revision": revision}})


@pytest.fixture(scope="module")
def pcs_pair():
    old = loader.load(BASE).spec
    return old, _revision(old, 1)


def test_a_new_images_revision_rolls_the_groups_of_the_image(pcs_pair, capsys):
    old, new = pcs_pair
    assert shown(diff.run(old, new, synthesize=image_templates)) == 0
    out = capsys.readouterr().out
    assert "stack llm-pretrain-cluster: no changes" in out  # the AMI comes by a reference whose text is the same
    assert "node image pcs-x86_64: node groups login, gpu roll to a new image" in out
    assert "  AWS::ImageBuilder::Image pcsx8664Image3A4B5C6D (replace)" in out
    assert "  AWS::ImageBuilder::ImageRecipe pcsx8664Recipe5E6F7A8B (replace)" in out
    assert "AWS PCS takes the new AMI as the compute node groups' AMI" in out
    assert "caution: llm-pretrain-cluster itself does not change" in out
    assert last_line(out) == "ok: no stateful resource is replaced or removed"


def test_rolls_are_in_the_json_and_name_what_changes(pcs_pair, capsys):
    old, new = pcs_pair
    shown(diff.run(old, new, synthesize=lambda s: image_templates(s, cluster_changes=True)), "json")
    (roll,) = json.loads(capsys.readouterr().out)["rolls"]
    assert (roll["image"], roll["plane"], roll["groups"], roll["first"]) == ("pcs-x86_64", "pcs", ["login", "gpu"],
                                                                             False)
    assert "caution" not in roll["note"]  # NAME-cluster is updated: it reads the new AMI
    assert {c.split()[0] for c in roll["changes"]} == {"AWS::ImageBuilder::Component",
                                                      "AWS::ImageBuilder::ImageRecipe", "AWS::ImageBuilder::Image"}


def test_the_same_spec_rolls_nothing_and_a_first_deploy_has_nothing_to_roll(pcs_pair):
    old, new = pcs_pair
    assert diff.run(old, old, synthesize=image_templates).comparison.rolls == []
    first = diff.compare({}, image_templates(new), "us-east-1")
    assert diff.image_rolls(model_of(new), first, {}, image_templates(new)) == []


def model_of(spec):
    from fmcluster.model import cluster as model

    return model.resolve(spec)


def test_a_deployed_cluster_without_images_moves_its_groups_to_the_baked_image(pcs_pair):
    _, new = pcs_pair
    templates = image_templates(new)
    deployed = {name: t for name, t in templates.items() if not name.endswith("-images")}
    r = diff.compare(deployed, templates, "us-east-1")
    (roll,) = diff.image_rolls(model_of(new), r, deployed, templates)
    assert roll.first and roll.note.startswith("the image is new to the deployed cluster")


def test_only_the_image_whose_resources_change_rolls():
    gb200 = loader.load(ROOT / "examples/p6e-gb200-pcs.yaml").spec  # pcs-arm64 (gb200) and pcs-x86_64 (login)
    old, new = image_templates(gb200), image_templates(gb200)
    recipe = new["gb200-pcs-images"]["Resources"]["pcsarm64Recipe5E6F7A8B"]["Properties"]
    recipe["Name"] = "gb200-pcs-pcs-arm64-other-pins"
    r = diff.compare(old, new, "us-east-1")
    rolls = diff.image_rolls(model_of(gb200), r, old, new)
    assert [(roll.image, roll.groups) for roll in rolls] == [("pcs-arm64", ["gb200"])]
    assert "AWS::ImageBuilder::Image pcsarm64Image3A4B5C6D (replace)" in rolls[0].changes  # through the recipe


def test_a_construct_path_decides_where_the_template_keeps_one():
    from fmcluster.deploy.diff.rolls import _of_image

    assert _of_image("pcs-arm64", "X1", {"Metadata": {"aws:cdk:path": "c-images/pcs-arm64/Image"}})
    assert not _of_image("pcs-arm64", "pcsarm64Image", {"Metadata": {"aws:cdk:path": "c-images/pcs-x86_64/I"}})


def test_hyperpod_says_update_cluster_software_rolls_the_running_nodes(capsys):
    old = loader.load(ROOT / "examples/p6-b200-hyperpod-slurm.yaml").spec
    assert shown(diff.run(old, _revision(old, 3), synthesize=image_templates)) == 0
    out = capsys.readouterr().out
    assert "node image hyperpod-slurm-x86_64: node groups controller, login, train, eval roll to a new image" in out
    assert "aws sagemaker update-cluster-software --cluster-name b200-train --image-id AMI" in out


def test_the_synthesized_images_stack_rolls_the_groups_of_a_new_revision(cached):
    """The same, on the stacks the CDK app synthesizes: the rolled groups are named, the update is
    one CloudFormation accepts (no export in use changes), and NAME-cluster changes with the image
    (its groups carry the image's identity), so its deploy reads the new AMI: no caution."""
    old = loader.load(BASE).spec
    r = diff.run(old, _revision(old, 1), synthesize=cached).comparison
    assert [(roll.image, roll.groups) for roll in r.rolls] == [("pcs-x86_64", ["login", "gpu"])]
    assert not r.failing and not r.data_loss
    assert "does not change" not in r.rolls[0].note
    changed = {c.type for s in r.stacks if s.name.startswith(f"{old.name}-cluster") for c in s.changes}
    assert "AWS::PCS::ComputeNodeGroup" in changed


def test_team_quota_changes_are_shown_and_refuse_nothing(cli, tmp_path):
    """A quota is no data: the teams' changes are listed above the verdict, which stays ok."""
    data = yaml.safe_load(BASE.read_text())
    data["teams"][0]["gpus"] = {"gpu": 64}
    data["teams"][0]["members"].append("carol")
    data["teams"][1]["borrow"] = False
    data["teams"].append({"name": "interns", "members": ["dave"], "priority": "low"})
    changed = tmp_path / "teams.yaml"
    changed.write_text(yaml.safe_dump(data, sort_keys=False))
    code, out = cli(BASE, changed)
    lines = out.splitlines()
    at = lines.index("teams:")
    assert lines[at + 1:at + 4] == [
        "  pretrain (changed): gpu: 96 guaranteed, at most 128 -> 64 guaranteed, at most 128; gpu: lends 96 -> 64; "
        "members +carol",
        "  research (changed): gpu: 32 guaranteed, at most 64 -> 32 guaranteed, at most 32",
        "  interns (added): 0 GPUs guaranteed, at most 128, priority low"]
    assert lines[at + 4].startswith("  (changed: quotas apply to jobs admitted from then on")
    assert (code, last_line(out)) == (0, "ok: no stateful resource is replaced or removed")


def test_team_changes_name_removed_teams():
    from fmcluster.model.cluster import resolve

    old = resolve(loader.load(BASE).spec)
    data = yaml.safe_load(BASE.read_text())
    del data["teams"][1]
    (changes,) = [c for c in diff.team_changes(old.teams, resolve(validated(data)).teams) if c.change == "removed"]
    assert (changes.team, changes.details) == ("research", ["32 GPUs guaranteed"])


# The shared home (FSx for OpenZFS): each OpenZFSConfiguration property of the resource schema, in
# place where FSx's UpdateFileSystem takes it (botocore's UpdateFileSystemOpenZFSConfiguration) or
# CloudFormation changes it itself (Options), else the file system is replaced.
OPENZFS_VERDICTS = {
    "AutomaticBackupRetentionDays": diff.UPDATE, "CopyTagsToBackups": diff.UPDATE, "CopyTagsToVolumes": diff.UPDATE,
    "DailyAutomaticBackupStartTime": diff.UPDATE, "DiskIopsConfiguration": diff.UPDATE,
    "EndpointIpv6AddressRange": diff.UPDATE, "Options": diff.UPDATE, "ReadCacheConfiguration": diff.UPDATE,
    "ThroughputCapacity": diff.UPDATE, "WeeklyMaintenanceStartTime": diff.UPDATE,
    "RouteTableIds": diff.UPDATE, "DeploymentType": diff.REPLACE, "EndpointIpAddressRange": diff.REPLACE,
    "PreferredSubnetId": diff.REPLACE, "RootVolumeConfiguration": diff.REPLACE,
}


def openzfs_fs(**config) -> dict:
    return {"Type": "AWS::FSx::FileSystem", "DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain",
            "Properties": {"FileSystemType": "OPENZFS", "StorageCapacity": 512, "SubnetIds": ["subnet-1"],
                           "OpenZFSConfiguration": {"DeploymentType": "SINGLE_AZ_2", "ThroughputCapacity": 160,
                                                    **config}}}


def test_the_verdict_table_covers_every_openzfs_property_of_the_schema():
    from fmcluster.deploy import cfn_schemas

    schema = cfn_schemas.document("AWS::FSx::FileSystem")
    assert schema is not None
    assert set(OPENZFS_VERDICTS) == set(schema["definitions"]["OpenZFSConfiguration"]["properties"])


@pytest.mark.parametrize("prop", sorted(OPENZFS_VERDICTS))
def test_each_openzfs_property_change_has_its_verdict(prop):
    old = {"c": {"Resources": {"Home": openzfs_fs(**{prop: "old"})}}}
    new = {"c": {"Resources": {"Home": openzfs_fs(**{prop: "new"})}}}
    change = changes(diff.compare(old, new, "us-east-1"))["Home"]
    assert change.action == OPENZFS_VERDICTS[prop], change.reasons
    assert change.data_loss == (OPENZFS_VERDICTS[prop] == diff.REPLACE)


def test_the_home_compression_replaces_it_and_a_smaller_home_fails():
    old = {"c": {"Resources": {"Home": openzfs_fs(RootVolumeConfiguration={"DataCompressionType": "LZ4"})}}}
    new = {"c": {"Resources": {"Home": openzfs_fs(RootVolumeConfiguration={"DataCompressionType": "ZSTD"})}}}
    change = changes(diff.compare(old, new, "us-east-1"))["Home"]
    assert change.action == diff.REPLACE and "RootVolumeConfiguration" in change.reasons[0]
    smaller = {"c": {"Resources": {"Home": openzfs_fs()}}}
    smaller["c"]["Resources"]["Home"]["Properties"]["StorageCapacity"] = 256
    change = changes(diff.compare({"c": {"Resources": {"Home": openzfs_fs()}}}, smaller, "us-east-1"))["Home"]
    assert change.action == diff.FAILS and "FSx for OpenZFS storage only grows" in change.reasons[0]


def test_pcs_accounting_cannot_be_turned_off():
    """Removing every team from a PCS spec turns accounting off, which PCS refuses: UPDATE FAILS."""
    def cluster(mode):
        props = {"Name": "c", "Size": "SMALL", "SlurmConfiguration": {}}
        if mode:
            props["SlurmConfiguration"]["Accounting"] = {"Mode": mode, "DefaultPurgeTimeInDays": -1}
        return {"c": {"Resources": {"Cluster": {"Type": "AWS::PCS::Cluster", "Properties": props}}}}

    off = changes(diff.compare(cluster("STANDARD"), cluster(None), "us-east-1"))["Cluster"]
    assert off.action == diff.FAILS and "cannot turn accounting off" in off.reasons[0]
    on = changes(diff.compare(cluster(None), cluster("STANDARD"), "us-east-1"))["Cluster"]
    assert on.action == diff.UPDATE


@pytest.mark.parametrize("before, after, fails", [("1.34", "1.35", False), ("1.35", "1.34", True),
                                                  ("1.33", "1.35", True), ("1.35", "1.35", False)])
def test_a_kubernetes_version_down_or_past_the_next_minor_fails(before, after, fails):
    """EKS updates a cluster's control plane one minor version at a time, and never down: its
    resource schema takes Version in place, but the update fails."""
    def cluster(version):
        props = {"Name": "c", "Version": version, "RoleArn": "arn:aws:iam::1:role/r",
                 "ResourcesVpcConfig": {"SubnetIds": ["subnet-1"]}}
        return {"c": {"Resources": {"Cluster": {"Type": "AWS::EKS::Cluster", "Properties": props}}}}

    r = diff.compare(cluster(before), cluster(after), "us-east-1")
    found = changes(r).get("Cluster")
    assert (found is not None and found.action == diff.FAILS) == fails
    if fails:
        assert "EKS" in found.reasons[0] and diff.refused(r, allowed=True)
    elif before != after:
        assert found.action == diff.UPDATE


def test_a_home_added_or_changed_on_hyperpod_slurm_says_the_nodes_need_replacing():
    """HyperPod mounts FSx only on nodes it provisions, and the copy-in runs at first boot: the
    running nodes do not get the new home."""
    hyperpod = yaml.safe_load((ROOT / "examples/p6-b200-hyperpod-slurm.yaml").read_text())
    with_home = {**hyperpod, "storage": {**hyperpod["storage"], "home": {"storage_capacity_gib": 512}}}
    grown = {**hyperpod, "storage": {**hyperpod["storage"], "home": {"storage_capacity_gib": 1024}}}
    added = diff.home_notes(validated(hyperpod), validated(with_home))
    assert len(added) == 1 and "home (storage.home) is added" in added[0]
    assert "scale each instance group to 0" in added[0]
    assert "is changed" in diff.home_notes(validated(with_home), validated(grown))[0]
    assert diff.home_notes(validated(with_home), validated(with_home)) == []
    assert diff.home_notes(validated(with_home), validated(hyperpod)) == []  # removed: nothing mounts it
    pcs = yaml.safe_load((ROOT / "examples/p6-b300-pcs.yaml").read_text())
    no_home = {**pcs, "storage": {k: v for k, v in pcs["storage"].items() if k != "home"}}
    assert diff.home_notes(validated(no_home), validated(pcs)) == []  # PCS nodes mount it every boot
    report = diff.run(validated(hyperpod), validated(with_home), synthesize=lambda spec: {})
    out, _ = diff.render(report)
    assert "note: the shared home (storage.home) is added on SageMaker HyperPod" in out


def test_hyperpod_accounting_database_cannot_be_removed():
    """Removing every team from a HyperPod Slurm spec drops the accounting database and continuous
    provisioning, which HyperPod cannot revert: UPDATE FAILS."""
    def cluster(database, mode):
        slurm = {"AccountingDatabase": {"Endpoint": "db", "Port": 3306, "Name": "slurm_acct_db",
                                        "SecretArn": "arn:aws:secretsmanager:us-east-1:1:secret:s"}} if database else {}
        props = {"ClusterName": "c", "InstanceGroups": [], "Orchestrator": {"Slurm": slurm}}
        if mode:
            props["NodeProvisioningMode"] = mode
        return {"c": {"Resources": {"Cluster": {"Type": "AWS::SageMaker::Cluster", "Properties": props}}}}

    off = changes(diff.compare(cluster(True, "Continuous"), cluster(False, None), "us-east-1"))["Cluster"]
    assert off.action == diff.FAILS
    assert any("cannot detach an accounting database" in r for r in off.reasons)
    assert any("NodeProvisioningMode goes from Continuous" in r for r in off.reasons)
    mode = changes(diff.compare(cluster(False, "Continuous"), cluster(False, None), "us-east-1"))["Cluster"]
    assert mode.action == diff.FAILS
    on = changes(diff.compare(cluster(False, "Continuous"), cluster(True, "Continuous"), "us-east-1"))["Cluster"]
    assert on.action != diff.FAILS


def test_a_change_of_node_health_says_what_it_does_to_the_nodes():
    """On AWS PCS the GPU nodes' lifecycle scripts change, and PCS replaces those nodes: said."""
    from tests.support.specs import base_spec, on, validated, with_

    old = validated(base_spec())
    new = validated(with_(base_spec(), "health.check_minutes", 10))
    (note,) = diff.health_notes(old, new)
    assert note.startswith("health.check_minutes 5 -> 10: the GPU groups' lifecycle scripts change: ")
    assert "AWS PCS drains and replaces every node of the group" in note
    assert diff.health_notes(old, validated(with_(base_spec(), "health.max_replacing", 5))) == []  # in place
    eks = on("eks")
    assert diff.health_notes(validated(eks), validated(with_(eks, "health.deep_check", False))) == []
    (note,) = diff.health_notes(validated(eks), validated(with_(eks, "health.check_minutes", 15)))
    assert "EKS rolls the managed node group" in note
    hyperpod = on("hyperpod-slurm")
    (note,) = diff.health_notes(validated(hyperpod), validated(with_(hyperpod, "health.replace", False)))
    assert "only on nodes it creates from now on" in note
    # HyperPod's own deep health checks: no lifecycle script carries health.deep_check there
    assert diff.health_notes(validated(hyperpod), validated(with_(hyperpod, "health.deep_check", False))) == []
