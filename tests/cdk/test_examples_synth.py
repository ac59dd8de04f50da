"""Every example synthesizes to a clean cloud assembly: the expected stacks, cfn-lint clean,
deterministic, the same through `fmcluster synth` and through the CDK CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import astuple
from pathlib import Path

import pytest

from tests.support.examples import CLEAN_ENV, fmcluster_synth, templates
from tests.support.paths import EXAMPLES, ROOT


def stack_templates(outdir: Path) -> dict[str, str]:
    """The templates of the stacks themselves, without nested ones."""
    return {n: t for n, t in templates(outdir).items() if not n.endswith(".nested.template.json")}


@pytest.fixture(scope="module", params=EXAMPLES)
def assembly(request, corpus):
    """The example's assembly, as the run's corpus holds it (synthesized once, the user's way:
    test_the_corpus_is_what_fmcluster_synth_writes)."""
    return request.param, corpus.assembly(request.param)


def stack_suffixes(spec) -> tuple[str, ...]:
    """network, storage, cluster, observability when Prometheus or Grafana is on, images when the
    Slurm planes' groups launch from baked node images, and reference when the cluster builds
    reference GPU images (GPU groups, any plane)."""
    from fmcluster.model.cluster import resolve

    observability = spec.observability.prometheus or spec.observability.grafana
    model = resolve(spec)
    return ("cluster", "network", "storage") + (("observability",) if observability else ()) + (
        ("images",) if model.images else ()) + (("reference",) if model.reference_images else ())


def test_stacks_named_after_the_cluster(assembly):
    from fmcluster.spec import loader

    spec_path, outdir = assembly
    spec = loader.load(ROOT / spec_path).spec
    assert sorted(stack_templates(outdir)) == sorted(f"{spec.name}-{s}.template.json" for s in stack_suffixes(spec))


def test_one_nested_stack_per_node_group_on_pcs_and_eks(assembly):
    """PCS and EKS keep each node group in a nested stack of NAME-cluster (HyperPod's groups are
    properties of its one cluster resource); cfn-lint and the other checks read them too."""
    from fmcluster.deploy import assembly as cloud_assembly
    from fmcluster.spec import loader

    spec_path, outdir = assembly
    spec = loader.load(ROOT / spec_path).spec
    nested = sorted(n for n, t in cloud_assembly.load(outdir).items() if t.nested)
    expected = [] if spec.orchestrator.control_plane.hyperpod else [f"{spec.name}-cluster/NodeGroup-{g.name}"
                                                                   for g in spec.node_groups]
    assert nested == sorted(expected)
    assert len(templates(outdir)) == len(stack_templates(outdir)) + len(nested)


def test_every_example_has_an_observability_stack(assembly):
    _, outdir = assembly
    (observability,) = [t for n, t in templates(outdir).items() if n.endswith("-observability.template.json")]
    types = {r["Type"] for r in json.loads(observability)["Resources"].values()}
    assert {"AWS::APS::Workspace", "AWS::APS::RuleGroupsNamespace", "AWS::SNS::Topic"} <= types


def test_every_role_policy_fits_iams_quotas(assembly):
    """Inline policies of each role together, and its trust policy, within IAM's size quotas
    once deployed (tokens at their longest); tests/facts/test_limits.py checks the same at each control
    plane's most node groups and buckets."""
    from tests.support import security

    _, outdir = assembly
    for path in sorted(outdir.glob("*.template.json")):
        for (role, kind), size in security.policy_sizes(json.loads(path.read_text())).items():
            limit = security.INLINE_POLICIES_MAX if kind == "inline" else security.TRUST_POLICY_MAX
            assert size <= limit, (path.name, role, kind, size)


def test_every_user_data_keeps_room_under_the_ec2_limit(assembly):
    """Each launch template's user data, deployed with every value CloudFormation fills in at the
    longest any region and id can have (tests/support/user_data_size.py; a value it does not know fails),
    at or below USER_DATA_BUDGET: AWS PCS and EKS merge their own part into it, under EC2's 16 KiB."""
    from tests.support.user_data_size import USER_DATA_BUDGET, deployed_size

    _, outdir = assembly
    for path in sorted(outdir.glob("*.template.json")):
        for lid, resource in json.loads(path.read_text())["Resources"].items():
            user_data = resource["Properties"].get("LaunchTemplateData", {}).get("UserData") \
                if resource["Type"] == "AWS::EC2::LaunchTemplate" else None
            if user_data is not None:
                assert deployed_size(user_data) <= USER_DATA_BUDGET, (path.name, lid, deployed_size(user_data))


def test_cfn_lint_clean(assembly, corpus):
    _, outdir = assembly
    for path in sorted(outdir.glob("*.template.json")):
        errors = corpus.lint_errors(path)
        assert not errors, f"{path.name}: " + "; ".join(errors)


def test_every_kubernetes_example_runs_the_kits_operators(assembly):
    """The kits' MPIJob, PyTorchJob and LeaderWorkerSet have their operators: LWS's pinned chart on
    both planes; on `eks` the MPI and training operator sub-charts of HyperPod's dependencies chart
    at its pin, on `hyperpod-eks` that whole chart only (it has them)."""
    from fmcluster.kubernetes import charts as helm_charts
    from fmcluster.spec import loader
    from fmcluster_cdk.constructs.hyperpod import dependencies as deps

    spec_path, outdir = assembly
    spec = loader.load(ROOT / spec_path).spec
    (cluster,) = [json.loads(t)["Resources"] for n, t in stack_templates(outdir).items()
                  if n == f"{spec.name}-cluster.template.json"]
    charts = {r["Properties"]["Release"]: r["Properties"] for r in cluster.values()
              if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"}
    if spec.orchestrator.control_plane.scheduler != "kubernetes":  # a Slurm plane: none of it
        assert not charts and not [r for r in cluster.values() if r["Type"] == deps.RESOURCE_TYPE]
        return
    lws = charts[helm_charts.LWS.release]
    assert (lws["Repository"], lws["Version"], lws["Namespace"]) == (
        helm_charts.LWS.repository, helm_charts.LWS.version, helm_charts.LWS.namespace)
    installs = {r["Properties"]["Release"]: r["Properties"].get("ChartPath") for r in cluster.values()
                if r["Type"] == deps.RESOURCE_TYPE}
    if spec.orchestrator.control_plane.hyperpod:
        assert installs == {deps.RELEASE: None}
    else:
        assert installs == {s: deps.subchart_path(s) for s in helm_charts.OPERATOR_SUBCHARTS}
    assert {r["Properties"]["Commit"] for r in cluster.values() if r["Type"] == deps.RESOURCE_TYPE} == {deps.COMMIT}


def test_every_node_script_runs_on_a_healthy_node(assembly, tmp_path):
    """Every node script of the example as the node gets it (launch template user data, HyperPod
    lifecycle folders: tests/support/node_scripts.py) runs on a sandboxed healthy node of its instance
    type (tests/support/sandbox.py): it succeeds, and the node is ready (slurmd may start, no not-ready
    taint, no drain)."""
    from fmcluster.facts import catalog
    from fmcluster.facts import node as node_facts
    from fmcluster.spec import loader
    from tests.support import standins
    from tests.support.node_scripts import describe, node_scripts, scenario
    from tests.support.sandbox import Sandbox, install_gpu_tools

    spec_path, outdir = assembly
    spec = loader.load(ROOT / spec_path).spec
    scripts = node_scripts(outdir, spec)
    assert {s.group for s in scripts} >= {g.name for g in spec.node_groups}
    for i, node_script in enumerate(scripts):
        node = Sandbox(tmp_path / str(i), scenario(node_script))
        instance = catalog.get(node_script.instance_type)
        if node_script.plane == "pcs" and instance.is_gpu:  # the PCS DLAMI's DCGM and nccl-tests, a healthy node's
            install_gpu_tools(node, busbw_gbps=instance.gpu.nvlink_gbps / 2 if instance.gpu.nvlink_gbps else 400.0)
        if node_script.plane == "hyperpod-slurm" and spec.storage.lustre:  # HyperPod mounts it first
            (node.root / spec.storage.lustre.mount_path.lstrip("/")).mkdir(parents=True)
            node.run(f"mount -t lustre fs@tcp:/x {spec.storage.lustre.mount_path}", name="hyperpod-mount.sh")
        # the scripts as published, with the stand-in repositories' commits as their pins (tests/support/standins.py)
        result = node.run(standins.with_pins(node_script.script, node.upstream), name=f"lifecycle/{node_script.name}",
                          files={f"lifecycle/{n}": standins.with_pins(text, node.upstream)
                                 for n, text in node_script.files.items()})
        assert result.returncode == 0, describe(node_script) + result.stderr
        drained = [c for c in node.calls("scontrol") if c.args[:1] == ("update",)]  # the NCCL stand-in asks scontrol
        assert not drained and not node.exists("/etc/eks/nodeadm.d/90-fmcluster-not-ready.yaml")
        if node.exists(f"{node_facts.TEXTFILE_DIR}/fmcluster-ready.prom"):
            assert node.file(f"{node_facts.TEXTFILE_DIR}/fmcluster-ready.prom").endswith(" 1\n"), describe(node_script)
        if node_script.plane == "pcs":  # the unit of the PCS-ready DLAMI, which PCS's Slurm installer names
            assert node.run(f"systemctl start {node.scenario.slurmd_unit}", name="start.sh").returncode == 0
        if units_verifiable():  # every unit and drop-in the script wrote, as systemd would load it
            verified = node.verify_units()
            assert verified.returncode == 0 and not verified.stdout, describe(node_script) + verified.stdout


def test_no_boot_path_fetches_or_builds_software(assembly):
    """Nothing is cloned, compiled, downloaded or installed when a node of the example boots: every
    node script as the node gets it (user data, lifecycle actions and folders) runs only what the
    node image already has (fmcluster.node.image bakes the rest)."""
    from fmcluster.spec import loader
    from tests.support.node_scripts import boot_texts, fetches_or_builds, node_scripts

    spec_path, outdir = assembly
    spec = loader.load(ROOT / spec_path).spec
    scripts = node_scripts(outdir, spec)
    assert scripts
    found = {(s.group, name): lines for s in scripts for name, text in boot_texts(s).items()
             if (lines := fetches_or_builds(text))}
    assert not found


def units_verifiable() -> bool:
    """Whether systemd-analyze verify can run here (systemd-analyze, and root for the node's units
    in a mount namespace of their own); in CI it must (make tools installs systemd)."""
    if shutil.which("systemd-analyze") and os.geteuid() == 0 and shutil.which("unshare"):
        return True
    if os.environ.get("CI"):
        pytest.fail("systemd-analyze verify needs systemd-analyze, unshare and root (make tools)")
    return False


def _by_type(outdir: Path, kind: str) -> list[dict]:
    from fmcluster.deploy import assembly as cloud_assembly

    return [r["Properties"] for t in cloud_assembly.load(outdir).values()
            for r in t.body.get("Resources", {}).values() if r["Type"] == kind]


def _launch_templates(outdir: Path) -> dict[str, dict]:
    found = {}
    for props in _by_type(outdir, "AWS::EC2::LaunchTemplate"):
        data = props["LaunchTemplateData"]
        tags = {t["Key"]: t["Value"] for s in data.get("TagSpecifications", []) for t in s["Tags"]}
        found[tags["fmcluster:node-group"]] = data
    return found


def test_plan_and_templates_are_the_model(assembly):
    """The plan's figures and the synthesized templates say what the resolved model says
    (fmcluster.model.cluster): the stacks and their protection, each group's size, EFA interfaces,
    placement, labels and taints, the PCS cluster size, the HyperPod controller."""
    from fmcluster.model.cluster import resolve
    from fmcluster.plan import report as plan
    from fmcluster.spec import loader
    from fmcluster_cdk.constructs.eks.cluster import TAINT_EFFECTS

    spec_path, outdir = assembly
    spec = loader.load(ROOT / spec_path).spec
    m, report = resolve(spec), plan.build(spec)
    manifest = json.loads((outdir / "manifest.json").read_text())["artifacts"]
    protection = {name: a.get("properties", {}).get("terminationProtection", False) for name, a in manifest.items()
                  if a["type"] == "aws:cloudformation:stack"}
    assert {s.name: s.termination_protection for s in m.stacks} == protection
    assert [(s.name, s.termination_protection) for s in report.stacks] == [(s.name, s.termination_protection)
                                                                          for s in m.stacks]
    for planned, group in zip(report.node_groups, m.node_groups, strict=True):
        assert (planned.name, planned.min_count, planned.max_count, planned.efa) == (
            group.name, group.min_count, group.max_count, group.efa)
        assert planned.per_node.efa_interfaces == group.efa_interfaces
        assert planned.at_max.gpus == group.gpus * group.max_count
    assert report.control_plane.pcs_size == (m.pcs_size.name if m.pcs_size else None)
    assert report.total.instances == sum(g.max_count for g in m.node_groups)

    if m.control_plane.hyperpod:
        (cluster,) = _by_type(outdir, "AWS::SageMaker::Cluster")
        instance_groups = {g["InstanceGroupName"]: g for g in cluster["InstanceGroups"]}
        for group in m.node_groups:
            made = instance_groups.pop(group.name)
            assert made["InstanceType"] == f"ml.{group.instance_type}" and made["InstanceCount"] == group.max_count
            assert ("NetworkInterface" in made) == group.efa
            if m.control_plane.scheduler == "kubernetes":
                assert made["KubernetesConfig"]["Labels"] == dict(group.labels)
        own = {g.name: g.instance_type for g in (m.controller, m.login) if g is not None and g.role != "system"}
        assert {name: g["InstanceType"].removeprefix("ml.") for name, g in instance_groups.items()} == own
    templates_of = _launch_templates(outdir)
    if m.control_plane.type == "pcs":
        (cluster,) = _by_type(outdir, "AWS::PCS::Cluster")
        assert cluster["Size"] == m.pcs_size.name
        scaling = {g["Name"]: g["ScalingConfiguration"] for g in _by_type(outdir, "AWS::PCS::ComputeNodeGroup")}
        assert scaling == {g.name: {"MinInstanceCount": g.min_count, "MaxInstanceCount": g.max_count}
                           for g in m.all_groups}
    if m.control_plane.type == "eks":
        groups = {g["Tags"]["fmcluster:node-group"]: g for g in _by_type(outdir, "AWS::EKS::Nodegroup")}
        for group in m.all_groups:
            made = groups[group.name]
            scaling = made["ScalingConfig"]
            assert (scaling["MinSize"], scaling["DesiredSize"], scaling["MaxSize"]) == (
                group.created_size, group.created_size, group.max_count)
            assert group.follows_block == (group.capacity.type == "capacity-block")
            assert made.get("Labels", {}) == dict(group.labels)
            assert made.get("Taints", []) == [
                {"Key": t["key"], "Value": t["value"], "Effect": TAINT_EFFECTS[t["effect"]]} for t in group.taints]
    if not m.control_plane.hyperpod:
        placement_groups = len(_by_type(outdir, "AWS::EC2::PlacementGroup"))
        assert placement_groups == sum(g.placement.create for g in m.node_groups)
        for group in m.all_groups:
            interfaces = templates_of[group.name]["NetworkInterfaces"]
            assert [(i["NetworkCardIndex"], i["DeviceIndex"], i.get("InterfaceType", "interface"))
                    for i in interfaces] == [astuple(i) for i in group.interfaces]


def test_stateful_resources_only_in_storage(assembly):
    """Buckets, file systems and keys live in NAME-storage. One exception: the key of the alert
    topic in NAME-observability encrypts notifications in flight only (nothing at rest outlives
    it), so it is deleted with its stack, not retained."""
    _, outdir = assembly
    stateful = {"AWS::S3::Bucket", "AWS::FSx::FileSystem", "AWS::KMS::Key", "AWS::RDS::DBInstance",
                "AWS::SecretsManager::Secret"}
    for name, text in templates(outdir).items():
        resources = json.loads(text)["Resources"]
        if name.endswith("-observability.template.json"):
            keys = {lid: r for lid, r in resources.items() if r["Type"] == "AWS::KMS::Key"}
            assert len(keys) == 1 and all(r.get("DeletionPolicy") == "Delete" for r in keys.values()), name
            resources = {lid: r for lid, r in resources.items() if lid not in keys}
        types = {r["Type"] for r in resources.values()}
        if not name.endswith("-storage.template.json"):
            assert not types & stateful, name


def test_create_only_properties_hold_only_references_cloudformation_protects(assembly):
    """A create-only property (from the resource schema) that names another stack's resource does
    it through an export (Fn::ImportValue): CloudFormation refuses to change or remove an export
    in use, so a replaced subnet or security group never slides under a running file system, PCS
    cluster or HyperPod cluster. A weak Fn::GetStackOutput would not stop it."""
    from fmcluster.deploy import assembly as cloud_assembly
    from fmcluster.deploy import cfn_schemas, diff

    _, outdir = assembly
    every = cloud_assembly.templates(outdir)
    weak, imported = [], 0
    for stack, template in every.items():
        for lid, resource in template.get("Resources", {}).items():
            schema = cfn_schemas.schema(resource["Type"])
            for pointer in schema.create_only if schema else ():
                for value in cfn_schemas.values_at(resource.get("Properties", {}), pointer):
                    kinds = {ref[0] for ref in diff.references(value)}
                    imported += "export" in kinds
                    if "out" in kinds:
                        weak.append(f"{stack} {lid} {cfn_schemas.dotted(pointer)}")
    assert not weak
    assert imported  # the check sees them: every cluster's file system and security groups import the network's
    exported = diff.exports(every)
    assert all(name in exported for name in diff.imports(every))


def _constructs(outdir: Path) -> dict[str, str]:
    """{construct path: the class it is (tree.json's constructInfo.fqn)} of the whole assembly."""
    found: dict[str, str] = {}

    def walk(node: dict) -> None:
        found[node["path"]] = node.get("constructInfo", {}).get("fqn", "")
        for child in node.get("children", {}).values():
            walk(child)

    walk(json.loads((outdir / "tree.json").read_text())["tree"])
    return found


def test_every_aws_resource_is_a_typed_cdk_class(assembly):
    """cdk-nag's rules (and aspects in general) see a resource only as its typed class: every
    AWS:: resource of every template, the nested stacks' included, is made by the L1 class of
    its type (`aws_ec2.CfnLaunchTemplate`, ...), never by a plain `CfnResource` of fmcluster's.
    (CDK's own L2 classes make a few plain ones, such as the EKS cluster's kubectl barrier
    parameter: those are under an aws-cdk-lib construct.)"""
    _, outdir = assembly
    constructs = _constructs(outdir)
    plain = []
    for name, text in templates(outdir).items():
        for logical_id, resource in json.loads(text)["Resources"].items():
            kind = resource["Type"]
            if not kind.startswith("AWS::") or kind == "AWS::CDK::Metadata":
                continue
            path = resource["Metadata"]["aws:cdk:path"]
            fqn = constructs[path]
            if fqn == "aws-cdk-lib.CfnResource" and constructs[path.rsplit("/", 1)[0]].startswith("aws-cdk-lib."):
                continue
            if not fqn.startswith("aws-cdk-lib.") or not fqn.endswith(".Cfn" + kind.split("::")[-1]):
                plain.append(f"{name} {logical_id}: {kind} made by {fqn or 'an unknown class'}")
    assert not plain, "\n".join(plain)


def test_storage_is_retained_and_protected(assembly):
    _, outdir = assembly
    (storage,) = [t for n, t in templates(outdir).items() if n.endswith("-storage.template.json")]
    for logical_id, resource in json.loads(storage)["Resources"].items():
        if resource["Type"] in {"AWS::S3::Bucket", "AWS::FSx::FileSystem", "AWS::KMS::Key", "AWS::RDS::DBInstance",
                                "AWS::SecretsManager::Secret", "AWS::RDS::DBSubnetGroup"}:
            assert resource.get("DeletionPolicy") == "Retain", logical_id
        if resource["Type"] == "AWS::RDS::DBInstance":
            assert resource.get("UpdateReplacePolicy") == "Retain" and resource["Properties"]["DeletionProtection"]
            assert resource["Properties"]["StorageEncrypted"] and not resource["Properties"]["PubliclyAccessible"]
    manifest = json.loads((outdir / "manifest.json").read_text())
    props = [a["properties"] for n, a in manifest["artifacts"].items() if n.endswith("-storage")]
    assert props[0].get("terminationProtection") is True


def test_the_corpus_is_what_fmcluster_synth_writes(corpus, tmp_path):
    """Synthesis is deterministic, and the run's corpus (tests/support/corpus.py: synthesized once a
    spec, with cdk-nag on) holds what a user's `fmcluster synth` writes: one command of every
    example (several specs in one app, as `fmcluster synth A B` runs them), every template the
    same bytes as the corpus's. (tests/project/test_wheel.py holds four examples' whole assemblies
    from the installed wheel to the corpus.)"""
    result = fmcluster_synth(EXAMPLES, tmp_path / "cdk.out")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    expected: dict[str, str] = {}
    for example in EXAMPLES:
        expected.update(templates(corpus.assembly(example)))
    assert templates(tmp_path / "cdk.out") == expected


def test_specs_apart_are_each_what_fmcluster_synth_writes_of_it(corpus, tmp_path):
    """`fmcluster diff` (and the corpus) synthesize several specs in one run of the app, each spec an
    App of its own (fmcluster.deploy.synth.apart): each assembly holds the same template bytes as
    the corpus's of that spec (which the test above holds to `fmcluster synth`'s), also a spec
    after another control plane's and the same spec twice (the same stack names, which one App
    could not hold); each step names its spec's number."""
    from fmcluster.deploy import synth

    pcs, eks = "examples/p5-pcs.yaml", "examples/p6e-gb200-eks.yaml"
    steps: list[str] = []
    code = synth.run_app({"spec": ",".join([pcs, eks, pcs])}, str(tmp_path / "out"), steps.append, warned=True,
                         apart=True)
    assert code == 0
    for n, example in enumerate([pcs, eks, pcs], 1):
        assert templates(tmp_path / "out" / str(n)) == templates(corpus.assembly(example)), example
    assert [s for s in steps if s.endswith(" building the stacks of llm-pretrain")] == [
        "1: building the stacks of llm-pretrain", "3: building the stacks of llm-pretrain"]
    assert sorted(os.listdir(tmp_path / "out")) == ["1", "2", "3"]


def test_invalid_spec_writes_nothing(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    outdir = tmp_path / "out"
    result = fmcluster_synth(str(bad), outdir)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert not outdir.exists()


def test_a_synthesis_that_fails_leaves_nothing_in_a_new_output_directory(tmp_path, monkeypatch):
    """Whatever stops it (here an exception in the app), a failed synthesis removes the output
    directory it made: `-o` never holds half an assembly."""
    from fmcluster_cdk import synthesis

    outdir = tmp_path / "out"

    def half_done() -> int:
        outdir.mkdir()
        (outdir / "partial.template.json").write_text("{}")
        raise RuntimeError("stopped half-way")

    monkeypatch.setenv("CDK_OUTDIR", str(outdir))
    monkeypatch.setattr(synthesis, "_main", half_done)
    with pytest.raises(RuntimeError):
        synthesis.main()
    assert not outdir.exists()


@pytest.mark.skipif(not (ROOT / "node_modules/.bin/cdk").exists(), reason="CDK CLI not installed (make install)")
def test_cdk_cli_synth_without_credentials_matches_fmcluster_synth(tmp_path, corpus):
    """`cdk synth -c spec=...` needs no credentials and no lookups, and gives the same templates."""
    env = dict(CLEAN_ENV, PATH=f"{Path(sys.executable).parent}{os.pathsep}{CLEAN_ENV['PATH']}",
               CDK_DISABLE_VERSION_CHECK="true", CDK_DISABLE_CLI_TELEMETRY="true")
    cli_out = tmp_path / "cli"
    result = subprocess.run([str(ROOT / "node_modules/.bin/cdk"), "synth", "-q", "-c", f"spec={EXAMPLES[0]}",
                             "-o", str(cli_out)], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert not (ROOT / "cdk.context.json").exists(), "synthesis must not look anything up"
    # `fmcluster synth`'s templates: test_the_corpus_is_what_fmcluster_synth_writes holds them to the corpus
    assert templates(cli_out) == templates(corpus.assembly(EXAMPLES[0]))


def test_both_entry_paths_refuse_two_clusters_of_one_name(tmp_path):
    """`cdk synth -c spec=A,B` and `fmcluster synth A B` run the same program (fmcluster_cdk/synthesis.py)
    with the same checks: two specs of one cluster name are a located error, exit 2, no traceback,
    nothing written."""
    copy = tmp_path / "copy.yaml"
    copy.write_text((ROOT / EXAMPLES[0]).read_text())
    own = fmcluster_synth([EXAMPLES[0], str(copy)], tmp_path / "own")
    assert own.returncode == 2 and "Traceback" not in own.stderr
    (line,) = [text for text in own.stderr.splitlines() if "would clash" in text]
    assert line.startswith(f"{copy}:") and ": error: name: cluster " in line
    assert not (tmp_path / "own").exists()
    if not (ROOT / "node_modules/.bin/cdk").exists():
        pytest.skip("CDK CLI not installed (make install)")
    env = dict(CLEAN_ENV, PATH=f"{Path(sys.executable).parent}{os.pathsep}{CLEAN_ENV['PATH']}",
               CDK_DISABLE_VERSION_CHECK="true", CDK_DISABLE_CLI_TELEMETRY="true")
    cli = subprocess.run([str(ROOT / "node_modules/.bin/cdk"), "synth", "-q", "-c", f"spec={EXAMPLES[0]},{copy}",
                          "-o", str(tmp_path / "cli")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert cli.returncode != 0 and "Traceback" not in cli.stderr and "jsii" not in cli.stderr.lower()
    assert line in cli.stderr


# The resource type that shows a control plane's compute in the summary.
COMPUTE_TYPE = {"pcs": "PCS::ComputeNodeGroup", "hyperpod-slurm": "SageMaker::Cluster",
                "hyperpod-eks": "SageMaker::Cluster", "eks": "EKS::Nodegroup"}


def test_summary_names_every_stack(assembly):
    from fmcluster.deploy.synth import summary
    from fmcluster.spec import loader

    spec_path, outdir = assembly
    text = summary(outdir)
    spec = loader.load(ROOT / spec_path).spec
    top = [line for line in text.splitlines() if not line.startswith(" ")]  # nested stacks are indented
    assert len(top) == len(stack_suffixes(spec))
    kind = spec.orchestrator.type
    assert "-cluster: " in text and COMPUTE_TYPE[kind] in text
