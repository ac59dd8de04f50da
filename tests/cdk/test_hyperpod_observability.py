"""Metrics collection on SageMaker HyperPod nodes, synthesized once per module.

hyperpod-slurm: the lifecycle hook hooks.d/50-metrics.sh (fmcluster.node.hyperpod.metrics_hook, the
PCS nodes' bootstrap/metrics.sh verbatim), the SSM parameter with the remote-write URL, and the
execution role's permissions on the workspace and that parameter only; nothing of it without
observability. hyperpod-eks: the hook that writes fmcluster_expected_gpus. The hook scripts are
shellcheck-clean and run against stubs (as tests/node/test_slurm_metrics.py does for PCS).
"""

from __future__ import annotations

import json
import subprocess
import types
from pathlib import Path

import pytest
import yaml

from fmcluster.facts import catalog
from fmcluster.facts import node as node_facts
from fmcluster.model.cluster import CONTROLLER as CONTROLLER_GROUP
from fmcluster.model.cluster import resolve
from fmcluster.node import eks as eks_node
from fmcluster.node import hyperpod as hyperpod_node
from fmcluster.node import shell as node_shell
from fmcluster.node.hyperpod import ACCOUNTING_HOOK, metrics_parameter_name
from tests.support import nodes
from tests.support.hyperpod import groups, statements
from tests.support.sandbox import Sandbox, Scenario
from tests.support.stacks import cluster, joined, loaded_specs, new_app, resources
from tests.support.tools import assert_shellcheck_clean

URL = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123/api/v1/remote_write"
WORKSPACE_ARN = "arn:aws:aps:us-east-1:111122223333:workspace/ws-0123"
OBSERVABILITY = types.SimpleNamespace(workspace_arn=WORKSPACE_ARN, remote_write_url=URL)
PARAMETER = metrics_parameter_name("demo")


# The examples of the stacks here, loaded and checked once
specs = loaded_specs({"example": "p6-b200-hyperpod-slurm.yaml", "eks": "p5-hyperpod-eks.yaml"})


def hook(name="gpu", *, lustre=True) -> str:
    """The metrics hook of a group of the test spec on HyperPod Slurm (tests/support/nodes.py), of the
    cluster "demo": its p5.48xlarge compute group, or the controller."""
    edits = {"name": "demo", **({} if lustre else {"storage.lustre": None})}
    return hyperpod_node.metrics_hook(*nodes.group("hyperpod-slurm", "p5.48xlarge", edits, name=name))


# --- the hook, rendered and run ------------------------------------------------------------------

def settings(script: str) -> str:
    return script.split("# Settings of this node group", 1)[1].split("\n\n", 1)[0]


def test_hook_settings_of_a_gpu_node():
    values = settings(hook())
    assert f"\nMETRICS_PARAMETER={PARAMETER}\n" in values and "\nMETRICS_REGION='us-east-1'\n" in values
    assert "\nEXPECTED_GPUS=8\n" in values and "\nEXPECTED_LUSTRE_MOUNT=/fsx\n" in values
    assert "\nMETRICS_COLLECTORS='dcgm efa'" in values
    assert "REMOTE_WRITE_URL=" not in values


def test_hook_of_the_controller_counts_slurm():
    values = settings(hook(CONTROLLER_GROUP, lustre=False))
    assert "\nMETRICS_COLLECTORS='slurm'" in values and "\nEXPECTED_GPUS=0\n" in values


def test_hook_reuses_metrics_sh_verbatim():
    assert node_shell.fragment(node_shell.SCRIPTS / "metrics.sh") in hook()


def test_hooks_shellcheck_clean(tmp_path):
    expected_gpus = eks_node.expected_gpus_script(nodes.group("hyperpod-eks", "p5.48xlarge")[1])
    assert_shellcheck_clean(tmp_path, {"gpu": hook(), "controller": hook(CONTROLLER_GROUP),
                                       "expected-gpus": expected_gpus})


def run_hook(tmp_path, script: str, **scenario) -> tuple[Sandbox, subprocess.CompletedProcess]:
    node = Sandbox(tmp_path, Scenario(os_release="jammy", slurmd=False, **scenario))
    return node, node.run(script, name=f"hooks.d/{hyperpod_node.METRICS_HOOK}")


def test_hook_reads_the_url_from_the_parameter_and_sets_up_metrics(tmp_path):
    node, result = run_hook(tmp_path, hook(), ssm_value=URL)
    assert result.returncode == 0, result.stderr
    assert node.lines("aws") == [f"aws ssm get-parameter --region us-east-1 --name {PARAMETER} "
                                 "--query Parameter.Value --output text"]
    config = yaml.safe_load(node.file("/etc/fmcluster/prometheus-agent.yml"))
    assert config["remote_write"][0]["url"] == URL
    assert config["global"]["external_labels"] == {"cluster": "demo", "node": "ip-10-1-0-42"}
    assert [job["job_name"] for job in config["scrape_configs"]] == ["node", "dcgm", "efa"]  # Slurm's: the controller
    prom = node.file(f"{node_facts.TEXTFILE_DIR}/fmcluster.prom")
    assert "fmcluster_expected_gpus 8\n" in prom


def test_hook_fails_without_a_url(tmp_path):
    node, result = run_hook(tmp_path, hook(), ssm_value="None")
    assert result.returncode != 0 and f"{PARAMETER} holds no remote-write URL" in result.stderr
    assert not node.calls("apt-get")  # nothing installed


def test_expected_gpus_hook_writes_the_textfile(tmp_path):
    node = Sandbox(tmp_path, Scenario(os_release="amzn2023", slurmd=False))
    result = node.run(eks_node.expected_gpus_script(nodes.group("hyperpod-eks", "p5.48xlarge")[1]))
    assert result.returncode == 0, result.stderr
    assert node.file(f"{node_facts.TEXTFILE_DIR}/fmcluster.prom").splitlines()[-1] == "fmcluster_expected_gpus 8"


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
    templates = {key: json.loads((outdir / f"{s.stack_name}.template.json").read_text()) for key, s in stacks.items()}
    return templates, outdir



def lifecycle_files(outdir: Path, group: dict) -> dict[str, str]:
    digest = joined(group["LifeCycleConfig"]["SourceS3Uri"]).rstrip("/").rsplit("/", 1)[1]
    folder = outdir / f"asset.fmcluster-lifecycle.{digest}"
    return {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*.sh")}


@pytest.mark.synth
def test_parameter_holds_the_remote_write_url(templates):
    template = templates[0]["slurm"]
    spec = specs()["example"]
    (parameter,) = [p for p in resources(template, "AWS::SSM::Parameter").values()
                    if p["Name"] == metrics_parameter_name(spec.name)]  # (the teams' is another)
    assert parameter["Value"] == URL
    assert parameter["Type"] == "String"


@pytest.mark.synth
def test_role_remote_writes_to_the_workspace_and_reads_the_parameter_only(templates):
    template = templates[0]["slurm"]
    found = statements(template)
    assert found["PrometheusRemoteWrite"] == {"Sid": "PrometheusRemoteWrite", "Action": "aps:RemoteWrite",
                                              "Effect": "Allow", "Resource": WORKSPACE_ARN}
    name = metrics_parameter_name(specs()["example"].name)
    (parameter_id,) = [lid for lid, p in resources(template, "AWS::SSM::Parameter").items() if p["Name"] == name]
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
        script = files[f"{hyperpod_node.HOOKS_DIR}/{hyperpod_node.METRICS_HOOK}"]
        values = settings(script)
        assert f"\nMETRICS_PARAMETER={metrics_parameter_name(spec.name)}\n" in values
        collectors = values.split("\nMETRICS_COLLECTORS=", 1)[1].split("\n", 1)[0].strip("'").split()
        assert ("slurm" in collectors) == (name == CONTROLLER_GROUP)
        assert ("dcgm" in collectors) == (name in gpu_groups)
        expected = catalog.get(group["InstanceType"].removeprefix("ml.")).gpu_count or 0
        assert f"\nEXPECTED_GPUS={expected}\n" in values


@pytest.mark.synth
def test_nothing_without_observability(templates):
    template, outdir = templates[0]["slurm-off"], templates[1]
    name = metrics_parameter_name(specs()["example"].name)
    assert all(p["Name"] != name for p in resources(template, "AWS::SSM::Parameter").values())
    assert not {"PrometheusRemoteWrite", "MetricsParameter"} & set(statements(template))
    for group in groups(template).values():  # the teams' accounting hook is no metrics
        files = [f for f in lifecycle_files(outdir, group) if not f.endswith("/" + ACCOUNTING_HOOK)]
        assert files == [hyperpod_node.ENTRYPOINT]


@pytest.mark.synth
def test_hyperpod_eks_groups_write_expected_gpus(templates):
    template, outdir = templates[0]["eks"], templates[1]
    spec = specs()["eks"]
    by_name = {g.name: g for g in resolve(spec).node_groups}
    for name, group in groups(template).items():
        files = lifecycle_files(outdir, group)
        assert files[f"{hyperpod_node.HOOKS_DIR}/{hyperpod_node.EXPECTED_GPUS_HOOK}"] == \
            eks_node.expected_gpus_script(by_name[name])
    # the managed scraper needs no URL on the nodes
    assert all("Name" not in p for p in resources(template, "AWS::SSM::Parameter").values())
