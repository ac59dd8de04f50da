"""The shared home on the control planes' stacks: AWS PCS node groups (login nodes too) mount it
through their lifecycle scripts, SageMaker HyperPod Slurm mounts it on every instance group
(FsxOpenZfsConfig) and drains compute nodes without it. The storage stack's side is
tests/cdk/test_storage_stack.py's; the boot path's, tests/node/test_home.py's."""

from __future__ import annotations

import pytest

from fmcluster.spec import loader
from tests.support.nested import flatten
from tests.support.node_scripts import lifecycle_actions
from tests.support.specs import base_spec, to_yaml, with_
from tests.support.stacks import HOME_DNS, cluster, load_spec, new_app, resources

pytestmark = pytest.mark.synth


def homed(control_plane: str, name: str):
    spec = with_(base_spec(name=name), "storage.home", {})
    spec = with_(spec, "orchestrator.type", control_plane)
    if control_plane == "eks":
        spec = with_(spec, "network.extra_availability_zone_ids", ["use1-az1"])
        spec = with_(spec, "orchestrator.admin_role_arn", "arn:aws:iam::111122223333:role/Admin")
    return load_spec(loader.load_text(to_yaml(spec), f"{name}.yaml"))


def test_pcs_every_node_group_and_the_login_nodes_mount_home(tmp_path):
    app = new_app(tmp_path)
    stack = cluster(app, homed("pcs", "pcs-home"))
    app.synth()
    template = flatten(tmp_path, stack.stack_name)
    groups = {p["Name"]: p for p in resources(template, "AWS::PCS::ComputeNodeGroup").values()}
    assert len(groups) == 2  # the GPU group and the login nodes
    for name, group in groups.items():
        ((script, text),) = [(s, t) for _, s, t in lifecycle_actions(tmp_path, group)
                             if s["Name"] == "fmcluster storage"]
        assert f"HOME_SOURCE={HOME_DNS}:/fsx" in script.get("Arguments", []) + text.splitlines(), name
        assert "  step mount_home" in text


def test_hyperpod_mounts_home_on_every_group_and_checks_it_on_compute(tmp_path):
    app = new_app(tmp_path)
    stack = cluster(app, homed("hyperpod-slurm", "hp-home"))
    artifact = app.synth().get_stack_by_name(stack.stack_name)
    template = artifact.template
    from tests.support.cfn_lint import findings

    errors = [m for m in findings(tmp_path / artifact.template_file) if m.rule.id.startswith("E")]
    assert not errors, "; ".join(str(m) for m in errors)  # FsxOpenZfsConfig as the resource schema has it
    (props,) = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    for group in props["InstanceGroups"]:
        configs = [c["FsxOpenZfsConfig"] for c in group.get("InstanceStorageConfigs", []) if "FsxOpenZfsConfig" in c]
        assert configs == [{"DnsName": HOME_DNS, "MountPath": "/home"}], group["InstanceGroupName"]
    entries = [path.read_text() for path in tmp_path.rglob("on_init.sh")]
    assert len(entries) == 3 and all("  step seed_mounted_home" in text for text in entries)  # controller, login, gpu
    required = [line for path in tmp_path.rglob("on_init.sh") for line in path.read_text().splitlines()
                if line.startswith("REQUIRED_MOUNTS=")]  # the compute group's: the others have no checks
    assert required and all("/home" in line.split("=", 1)[1] for line in required)


def test_eks_applies_the_home_volume_and_claim(tmp_path):
    import json

    app = new_app(tmp_path)
    spec = homed("eks", "eks-home")
    stack = cluster(app, spec)
    template = app.synth().get_stack_by_name(stack.stack_name).template
    (props,) = [p["Properties"] for lid, p in template["Resources"].items()
                if p["Type"] == "Custom::AWSCDK-EKS-KubernetesResource" and lid.startswith("ClustermanifestHomeVolume")]
    documents = {(d["kind"], d["metadata"]["name"]): d for d in json.loads(props["Manifest"])}
    pv = documents[("PersistentVolume", "eks-home-home")]["spec"]
    assert pv["nfs"] == {"server": HOME_DNS, "path": "/fsx"} and pv["persistentVolumeReclaimPolicy"] == "Retain"
    claim = documents[("PersistentVolumeClaim", "home")]
    assert claim["metadata"]["namespace"] == spec.orchestrator.namespace


def test_hyperpod_seeds_a_lustre_home_it_mounted(tmp_path):
    app = new_app(tmp_path)
    spec = with_(with_(base_spec(name="hp-lustre-home"), "orchestrator.type", "hyperpod-slurm"),
                 "storage.lustre.mount_path", "/home")
    stack = cluster(app, load_spec(loader.load_text(to_yaml(spec), "hp-lustre-home.yaml")))
    template = app.synth().get_stack_by_name(stack.stack_name).template
    (props,) = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    for group in props["InstanceGroups"]:
        lustre = [c["FsxLustreConfig"] for c in group.get("InstanceStorageConfigs", []) if "FsxLustreConfig" in c]
        assert [c["MountPath"] for c in lustre] == ["/home"]
        assert not [c for c in group.get("InstanceStorageConfigs", []) if "FsxOpenZfsConfig" in c]
    entries = [path.read_text() for path in tmp_path.rglob("on_init.sh")]
    assert entries and all("  step seed_mounted_home" in text for text in entries)
