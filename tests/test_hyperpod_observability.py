"""Metrics collection on SageMaker HyperPod nodes, synthesized once per module.

hyperpod-slurm: the lifecycle hook hooks.d/50-metrics.sh (fmcluster.lifecycle.metrics_hook, the
PCS nodes' bootstrap/metrics.sh verbatim), the SSM parameter with the remote-write URL, and the
execution role's permissions on the workspace and that parameter only; nothing of it without
observability. hyperpod-eks: the hook that writes fmcluster_expected_gpus. The hook scripts are
shellcheck-clean and run against stubs (as tests/test_slurm_metrics.py does for PCS).
"""

from __future__ import annotations

import json
import subprocess
import types
from pathlib import Path

import pytest

from fmcluster import bootstrap, catalog, kubernetes, lifecycle
from stacks.hyperpod import CONTROLLER_GROUP, metrics_parameter_name
from tests.test_bootstrap import assert_shellcheck_clean
from tests.test_hyperpod_stack import groups, joined, specs, statements
from tests.test_pcs_stack import cluster, new_app, resources
from tests.test_slurm_metrics import run_setup_metrics

URL = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123/api/v1/remote_write"
WORKSPACE_ARN = "arn:aws:aps:us-east-1:111122223333:workspace/ws-0123"
OBSERVABILITY = types.SimpleNamespace(workspace_arn=WORKSPACE_ARN, remote_write_url=URL)
PARAMETER = metrics_parameter_name("demo")


def hook(instance_type="p5.48xlarge", *, efa=True, slurm=False, lustre_path="/fsx") -> str:
    return lifecycle.metrics_hook(instance_type, bootstrap.Metrics("demo", "", "us-east-1", slurm=slurm), efa=efa,
                                  parameter=PARAMETER, lustre_path=lustre_path)


# --- the hook, rendered and run ------------------------------------------------------------------

def test_hook_settings_of_a_gpu_node():
    script = hook()
    assert f"\nMETRICS_PARAMETER={PARAMETER}\n" in script and "\nMETRICS_REGION='us-east-1'\n" in script
    assert "\nEXPECTED_GPUS=8\n" in script and "\nEXPECTED_LUSTRE_MOUNT=/fsx\n" in script
    assert "\nGPU_COLLECTOR=''\n" not in script and "\nEFA_COLLECTOR=''\n" not in script
    assert "\nSLURM_COLLECTOR=''\n" in script
    assert "REMOTE_WRITE_URL=" not in script.split("# Settings of this node group", 1)[1].split("\n\n", 1)[0]
    assert "  read_remote_write_url\n  setup_metrics\n" in script


def test_hook_of_the_controller_counts_slurm():
    script = hook("m7i.2xlarge", efa=False, slurm=True, lustre_path="")
    assert "\nSLURM_COLLECTOR=''\n" not in script and "\nGPU_COLLECTOR=''\n" in script
    assert "\nEXPECTED_GPUS=0\n" in script


def test_hook_reuses_metrics_sh_verbatim():
    assert bootstrap.fragment(bootstrap.SCRIPTS / "metrics.sh") in hook()


def test_hooks_shellcheck_clean(tmp_path):
    assert_shellcheck_clean(tmp_path, {"gpu": hook(), "controller": hook("m7i.2xlarge", efa=False, slurm=True),
                                       "expected-gpus": kubernetes.expected_gpus_script(8)})


def test_hook_reads_the_url_from_the_parameter_and_sets_up_metrics(tmp_path):
    aws = (f'[[ "$*" == "ssm get-parameter --region us-east-1 --name {PARAMETER} --query Parameter.Value '
           f'--output text" ]] || exit 3\necho {URL}')
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin/aws").write_text(f"#!/bin/bash\n{aws}\n")
    (tmp_path / "bin/aws").chmod(0o755)
    result = run_setup_metrics(tmp_path, hook(slurm=True), "jammy")
    assert result.returncode == 0, result.stderr
    config = (tmp_path / "etc/fmcluster/prometheus-agent.yml").read_text()
    assert f'url: "{URL}"' in config and 'cluster: "demo"' in config and 'node: "node-1"' in config
    for job in ("node", "dcgm", "efa", "slurm"):
        assert f"job_name: {job}\n" in config
    prom = (tmp_path / "var/lib/fmcluster/textfile-node/fmcluster.prom").read_text()
    assert "fmcluster_expected_gpus 8\n" in prom


def test_hook_fails_without_a_url(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin/aws").write_text("#!/bin/bash\necho None\n")
    (tmp_path / "bin/aws").chmod(0o755)
    result = run_setup_metrics(tmp_path, hook())
    assert result.returncode != 0 and f"{PARAMETER} holds no remote-write URL" in result.stderr
    assert not (tmp_path / "calls").exists()  # nothing installed


def test_expected_gpus_hook_writes_the_textfile(tmp_path):
    script = kubernetes.expected_gpus_script(8).replace(kubernetes.TEXTFILE_DIR, str(tmp_path / "textfile"))
    subprocess.run(["bash", "-c", script], check=True)
    assert (tmp_path / "textfile/fmcluster.prom").read_text().splitlines()[-1] == "fmcluster_expected_gpus 8"


# --- the stacks ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    """({'slurm' | 'slurm-off' | 'eks': template}, assembly dir)."""
    outdir = tmp_path_factory.mktemp("hyperpod-observability") / "cdk.out"
    app = new_app(outdir)
    stacks = {}
    for key, spec, obs in (("slurm", specs()["example"], OBSERVABILITY), ("slurm-off", specs()["example"], None),
                           ("eks", specs()["eks"], OBSERVABILITY)):
        stacks[key] = cluster(app, spec, stack_id=f"{key}-cluster", observability=obs)
    app.synth()
    return {key: json.loads((outdir / f"{s.stack_name}.template.json").read_text()) for key, s in stacks.items()}, outdir



def lifecycle_files(outdir: Path, group: dict) -> dict[str, str]:
    digest = joined(group["LifeCycleConfig"]["SourceS3Uri"]).rstrip("/").rsplit("/", 1)[1]
    folder = outdir / f"asset.fmcluster-lifecycle.{digest}"
    return {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*.sh")}


@pytest.mark.synth
def test_parameter_holds_the_remote_write_url(templates):
    template = templates[0]["slurm"]
    (parameter,) = resources(template, "AWS::SSM::Parameter").values()
    spec = specs()["example"]
    assert parameter["Name"] == metrics_parameter_name(spec.name) and parameter["Value"] == URL
    assert parameter["Type"] == "String"


@pytest.mark.synth
def test_role_remote_writes_to_the_workspace_and_reads_the_parameter_only(templates):
    template = templates[0]["slurm"]
    found = statements(template)
    assert found["PrometheusRemoteWrite"] == {"Sid": "PrometheusRemoteWrite", "Action": "aps:RemoteWrite",
                                              "Effect": "Allow", "Resource": WORKSPACE_ARN}
    (parameter_id,) = resources(template, "AWS::SSM::Parameter")
    read = found["MetricsParameter"]
    assert read["Action"] == "ssm:GetParameter"
    assert joined(read["Resource"]) == "arn:aws:ssm:us-east-1:${AWS::AccountId}:parameter${" + parameter_id + "}"
    text = json.dumps(list(found.values()))
    assert "ssm:GetParameters" not in text and "ssm:*" not in text and '"aps:*"' not in text


@pytest.mark.synth
def test_every_group_runs_the_metrics_hook(templates):
    template, outdir = templates[0]["slurm"], templates[1]
    spec = specs()["example"]
    gpu_groups = {g.name for g in spec.node_groups if g.instance.is_gpu}
    assert gpu_groups
    for name, group in groups(template).items():
        files = lifecycle_files(outdir, group)
        script = files[f"{lifecycle.HOOKS_DIR}/{lifecycle.METRICS_HOOK}"]
        assert f"\nMETRICS_PARAMETER={metrics_parameter_name(spec.name)}\n" in script
        assert ("\nSLURM_COLLECTOR=''\n" not in script) == (name == CONTROLLER_GROUP)
        assert ("\nGPU_COLLECTOR=''\n" not in script) == (name in gpu_groups)
        expected = catalog.get(group["InstanceType"].removeprefix("ml.")).gpu_count or 0
        assert f"\nEXPECTED_GPUS={expected}\n" in script


@pytest.mark.synth
def test_nothing_without_observability(templates):
    template, outdir = templates[0]["slurm-off"], templates[1]
    assert not resources(template, "AWS::SSM::Parameter")
    assert not {"PrometheusRemoteWrite", "MetricsParameter"} & set(statements(template))
    for group in groups(template).values():
        assert list(lifecycle_files(outdir, group)) == [lifecycle.ENTRYPOINT]


@pytest.mark.synth
def test_hyperpod_eks_groups_write_expected_gpus(templates):
    template, outdir = templates[0]["eks"], templates[1]
    spec = specs()["eks"]
    by_name = {g.name: g for g in spec.node_groups}
    for name, group in groups(template).items():
        files = lifecycle_files(outdir, group)
        assert files[f"{lifecycle.HOOKS_DIR}/{lifecycle.EXPECTED_GPUS_HOOK}"] == \
            kubernetes.expected_gpus_script(by_name[name].instance.gpu_count or 0)
    # the managed scraper needs no URL on the nodes
    assert all("Name" not in p for p in resources(template, "AWS::SSM::Parameter").values())
