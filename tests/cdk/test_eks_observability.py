"""Metrics collection of the EKS control planes, synthesized once per module.

One CDK app holds three cluster stacks built through fmcluster_cdk/stacks/cluster.py: examples/p5en-eks.yaml
and examples/p5-hyperpod-eks.yaml with a stand-in observability stack (a workspace ARN), and
the `eks` example again without one (observability off: nothing of this is built). Network and
storage outputs are the stand-ins of tests/support/stacks.py; tests/cdk/test_examples_synth.py and
tests/deploy/test_moto_deploy.py synthesize and deploy the examples with the real stacks.
"""

from __future__ import annotations

import base64
import json
import re
import types

import pytest
import yaml

from fmcluster import observability
from fmcluster.facts import kubernetes as k8s
from fmcluster.facts import node as node_facts
from fmcluster.kubernetes import charts as chart_pins
from fmcluster.node import eks as eks_node
from fmcluster.node import shell as node_shell
from fmcluster.spec import loader
from tests.support import nodes
from tests.support.paths import EXAMPLES_DIR
from tests.support.sandbox import Sandbox, Scenario, template_text, user_data_parts
from tests.support.stacks import cluster, network, new_app, resources

pytestmark = pytest.mark.synth

EXAMPLES = {"eks": "p5en-eks.yaml", "hyperpod-eks": "p5-hyperpod-eks.yaml"}
WORKSPACE_ARN = "arn:aws:aps:us-east-1:111122223333:workspace/ws-0123456789abcdef"
URL = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123456789abcdef/api/v1/remote_write"
CLUSTER_SG = "ClusterSecurityGroupId"
JOBS = {"node": ("node-exporter", chart_pins.NODE_EXPORTER_PORT),
        "dcgm": ("dcgm-exporter", chart_pins.DCGM_EXPORTER_PORT),
        "efa": ("efa-node-exporter", chart_pins.EFA_EXPORTER_PORT)}
METRICS_RELEASES = {c.release for c in chart_pins.METRICS_CHARTS}


def _spec(file: str):
    result = loader.load(EXAMPLES_DIR / file)
    assert result.ok, [d.format() for d in result.diagnostics]
    return result.spec


@pytest.fixture(scope="module")
def assembly(tmp_path_factory):
    """(cloud assembly directory, {'eks' | 'hyperpod-eks' | 'off': cluster stack}), synthesized once."""
    outdir = tmp_path_factory.mktemp("eks-observability") / "cdk.out"
    app = new_app(outdir)
    workspace = types.SimpleNamespace(workspace_arn=WORKSPACE_ARN, remote_write_url=URL)  # NAME-observability's
    stacks = {}
    for key, file, obs, stack_id in (("eks", EXAMPLES["eks"], workspace, None),
                                     ("hyperpod-eks", EXAMPLES["hyperpod-eks"], workspace, None),
                                     ("off", EXAMPLES["eks"], None, "off-cluster")):
        spec = _spec(file)
        if obs is None:  # no NAME-observability: the model says so too
            spec = spec.model_copy(update={"observability": spec.observability.model_copy(
                update={"prometheus": False, "grafana": False})})
        stacks[key] = cluster(app, spec, stack_id=stack_id, observability=obs)
    app.synth()
    return outdir, stacks


@pytest.fixture(scope="module")
def templates(assembly):
    """{'eks' | 'hyperpod-eks' | 'off': cluster template}."""
    outdir, stacks = assembly
    return {key: json.loads((outdir / f"{s.stack_name}.template.json").read_text()) for key, s in stacks.items()}


def scraper(template) -> dict:
    (props,) = resources(template, "AWS::APS::Scraper").values()
    return props


def scrape_config(template) -> dict:
    return yaml.safe_load(base64.b64decode(scraper(template)["ScrapeConfiguration"]["ConfigurationBlob"]))


def charts(template) -> dict:
    return {p["Release"]: p for p in resources(template, "Custom::AWSCDK-EKS-HelmChart").values()}


def values(chart: dict) -> dict:
    return json.loads(chart["Values"]) if isinstance(chart["Values"], str) else chart["Values"]


KINDS = ("eks", "hyperpod-eks")


@pytest.mark.parametrize("kind", KINDS)
def test_scraper_source_is_the_cluster_on_its_private_subnets(templates, kind):
    source = scraper(templates[kind])["Source"]["EksConfiguration"]
    cluster_id = source["ClusterArn"]["Fn::GetAtt"][0]
    assert source["ClusterArn"] == {"Fn::GetAtt": [cluster_id, "Arn"]}
    assert resources(templates[kind], "AWS::EKS::Cluster")[cluster_id]
    assert source["SubnetIds"] == network().private_subnet_ids  # two AZs, as AMP requires
    # the cluster security group: every node (managed group or HyperPod instance group) carries it
    assert source["SecurityGroupIds"] == [{"Fn::GetAtt": [cluster_id, CLUSTER_SG]}]


@pytest.mark.parametrize("kind", KINDS)
def test_scraper_writes_to_the_workspace(templates, kind):
    props = scraper(templates[kind])
    assert props["Destination"] == {"AmpConfiguration": {"WorkspaceArn": WORKSPACE_ARN}}
    assert props["Alias"] == _spec(EXAMPLES[kind]).name
    assert {"Key": "fmcluster:cluster", "Value": props["Alias"]} in props["Tags"]


@pytest.mark.parametrize("kind", KINDS)
def test_scraper_access_by_access_entry_amp_creates(templates, kind):
    """AMP creates the scraper's access entry itself on clusters with API authentication; an
    access entry of ours for the same role would collide, and no aws-auth mapping exists."""
    (cluster,) = resources(templates[kind], "AWS::EKS::Cluster").values()
    assert cluster["AccessConfig"]["AuthenticationMode"] in ("API", "API_AND_CONFIG_MAP")
    text = json.dumps(templates[kind])
    assert "AmazonPrometheusScraper" not in text and "aps-collector" not in text


@pytest.mark.parametrize("kind", KINDS)
def test_scrape_jobs_keep_the_label_contract(templates, kind):
    config = scrape_config(templates[kind])
    name = _spec(EXAMPLES[kind]).name
    assert int(config["global"]["scrape_interval"].removesuffix("s")) >= 30  # AMP's minimum
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == set(JOBS)
    for job_name, (release, port) in JOBS.items():
        job = jobs[job_name]
        assert job["kubernetes_sd_configs"] == [{"role": "pod",
                                                 "namespaces": {"names": [chart_pins.MONITORING_NAMESPACE]}}]
        keep, *labels = job["relabel_configs"]
        assert keep == {"source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_instance",
                                          "__meta_kubernetes_pod_container_port_number"],
                        "regex": f"{release};{port}", "action": "keep"}
        assert {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"} in labels
        assert {"target_label": "cluster", "replacement": name} in labels


def test_scrape_configuration_is_the_repository_file():
    text = observability.scrape_configuration("c1")
    assert observability.CLUSTER_PLACEHOLDER not in text
    assert text == observability.SCRAPER_FILE.read_text().replace(observability.CLUSTER_PLACEHOLDER, "c1")


def test_scrape_jobs_are_the_jobs_the_rules_expect():
    rules = "".join(path.read_text() for path in observability.rule_files())
    for job in JOBS:
        assert f'job="{job}"' in rules


@pytest.mark.parametrize("kind", KINDS)
def test_exporter_charts_pinned(templates, kind):
    found = charts(templates[kind])
    assert METRICS_RELEASES <= set(found)
    for chart in chart_pins.METRICS_CHARTS:
        props = found[chart.release]
        assert (props["Chart"], props["Repository"], props["Version"], props["Namespace"]) == (
            chart.chart, chart.repository, chart.version, chart_pins.MONITORING_NAMESPACE)
        assert all(part.isdigit() for part in chart.version.split("."))
    assert (chart_pins.NODE_EXPORTER.version, chart_pins.DCGM_EXPORTER.version,
            chart_pins.EFA_NODE_EXPORTER.version) == ("4.45.3", "4.8.3", "4.45.3")


@pytest.mark.parametrize("kind", KINDS)
def test_exporters_land_where_their_devices_are(templates, kind):
    found = charts(templates[kind])
    node, dcgm, efa = (values(found[c.release]) for c in chart_pins.METRICS_CHARTS)
    assert "nodeSelector" not in node  # every node, GPU nodes included
    assert {"operator": "Exists", "effect": "NoSchedule"} in node["tolerations"]
    assert node["service"]["port"] == 9100
    assert dcgm["nodeSelector"] == {k8s.GPU_LABEL: "true"}
    # a held-back node reports
    assert dcgm["tolerations"] == [k8s.GPU_TOLERATION, k8s.NOT_READY_TOLERATION]
    assert dcgm["service"]["port"] == 9400
    assert efa["nodeSelector"] == {k8s.EFA_LABEL: "true"}
    assert efa["tolerations"] == [k8s.GPU_TOLERATION]
    assert efa["service"] == {"port": 9109, "targetPort": 9109}
    assert efa["extraArgs"] == ["--collector.disable-defaults", "--collector.amazonefa"]
    for chart_values in (node, dcgm, efa):  # no Prometheus operator in the cluster
        assert chart_values.get("serviceMonitor", {}).get("enabled", False) is False
        assert chart_values.get("prometheus", {}).get("monitor", {}).get("enabled", False) is False


def test_dcgm_exports_what_the_rules_read(templates):
    counters = values(charts(templates["eks"])["dcgm-exporter"])["customMetrics"]
    exported = {line.split(",")[0] for line in counters.splitlines() if line}
    used = set()
    for path in [*observability.rule_files(), *observability.dashboard_files()]:
        used |= set(re.findall(r"DCGM_[A-Z0-9_]+", path.read_text()))
    assert used and used <= exported


def test_nodes_carry_the_labels_and_taint_the_exporters_select(assembly, templates):
    """The GPU/EFA labels and the GPU taint are on the managed node groups (eks) and the
    HyperPod instance groups (hyperpod-eks) alike."""
    groups = [g for t in with_nested(assembly, "eks") for g in resources(t, "AWS::EKS::Nodegroup").values()]
    gpu = [g for g in groups if g["Labels"].get(k8s.GPU_LABEL) == "true"]
    assert gpu and all(g["Labels"].get(k8s.EFA_LABEL) == "true" for g in gpu)
    assert all({"Key": k8s.GPU_TAINT_KEY, "Value": "true", "Effect": "NO_SCHEDULE"} in g["Taints"] for g in gpu)
    (cluster,) = resources(templates["hyperpod-eks"], "AWS::SageMaker::Cluster").values()
    config = [g["KubernetesConfig"] for g in cluster["InstanceGroups"] if "KubernetesConfig" in g]
    assert config and all(c["Labels"].get(k8s.GPU_LABEL) == "true" for c in config)


def test_nothing_without_observability(templates):
    off = templates["off"]
    assert not resources(off, "AWS::APS::Scraper")
    assert not METRICS_RELEASES & set(charts(off))
    assert "MetricsScraperArn" not in off.get("Outputs", {})


def test_node_exporter_reads_the_textfile_directory(templates):
    """fmcluster_expected_gpus: the textfile the nodes write (user data; HyperPod: lifecycle hook)
    is the directory the node exporter chart mounts and reads."""
    for kind in KINDS:
        node = values(charts(templates[kind])[chart_pins.NODE_EXPORTER.release])
        assert node["extraArgs"] == [f"--collector.textfile.directory={chart_pins.TEXTFILE_MOUNT}"]
        assert node["extraHostVolumeMounts"] == [{"name": "fmcluster-textfile", "hostPath": node_facts.TEXTFILE_DIR,
                                                  "mountPath": chart_pins.TEXTFILE_MOUNT, "readOnly": True,
                                                  "mountPropagation": "HostToContainer"}]


def with_nested(assembly, key) -> list[dict]:
    """The template of a cluster stack and those of its nested stacks (node groups may be there)."""
    outdir, stacks = assembly
    parent = json.loads((outdir / f"{stacks[key].stack_name}.template.json").read_text())
    return [parent, *(json.loads((outdir / r["Metadata"]["aws:asset:path"]).read_text())
                      for r in parent["Resources"].values()
                      if r["Type"] == "AWS::CloudFormation::Stack" and "aws:asset:path" in r.get("Metadata", {}))]


def _user_data(assembly, key) -> dict[str, str]:
    """{node group (tag): user data text} of the launch templates of a cluster stack."""
    found = {}
    launch_templates = [props for template in with_nested(assembly, key)
                        for props in resources(template, "AWS::EC2::LaunchTemplate").values()]
    for props in launch_templates:
        data = props["LaunchTemplateData"]
        tags = {t["Key"]: t["Value"] for spec in data.get("TagSpecifications", []) for t in spec["Tags"]}
        if "UserData" in data:
            found[tags.get("fmcluster:node-group", "?")] = template_text(data["UserData"])
    return found


def test_managed_node_groups_write_expected_gpus_from_the_catalog(assembly, tmp_path):
    """Each node group's user data, as the template has it, run on a sandboxed AL2023 node: the
    textfile holds the catalog's GPU count."""
    spec = _spec(EXAMPLES["eks"])
    user_data = _user_data(assembly, "eks")
    for group in spec.node_groups:
        content_type, script = user_data_parts(user_data[group.name])[eks_node.NODE_SCRIPT]
        assert content_type == "text/x-shellscript"
        instance = group.instance
        node = Sandbox(tmp_path / group.name, Scenario(os_release="amzn2023", slurmd=False, gpus=instance.gpu_count,
                                                       efa_devices=instance.max_efa_interfaces))
        result = node.run(script)
        assert result.returncode == 0, result.stderr
        prom = node.file(f"{node_facts.TEXTFILE_DIR}/fmcluster.prom")
        assert prom.splitlines()[-1] == f"fmcluster_expected_gpus {instance.gpu_count}"
    off = _user_data(assembly, "off")
    for text in off.values():
        scripts = [body for name, (_, body) in user_data_parts(text).items() if name == eks_node.NODE_SCRIPT]
        assert all("write_expected_gpus" not in node_shell.unpack(body) for body in scripts)


def test_node_user_data_parts():
    p5 = nodes.group("eks", "p5.48xlarge")  # the instance store striped for kubelet: a NodeConfig
    both = user_data_parts(eks_node.node_user_data(*p5, nodes.REFS))
    assert set(both) == {eks_node.NODECONFIG_FILE, eks_node.NODE_SCRIPT}
    assert "kind: NodeConfig" in both[eks_node.NODECONFIG_FILE][1]
    cpu = nodes.group("eks", "m7i.2xlarge")
    assert eks_node.node_user_data(*cpu, nodes.NO_METRICS) is None  # no GPU, no metrics, no LNet: nothing to do
    only_script = user_data_parts(eks_node.node_user_data(*cpu, nodes.REFS))
    assert set(only_script) == {eks_node.NODE_SCRIPT}
    gpu_only = user_data_parts(eks_node.node_user_data(*p5, nodes.NO_METRICS))  # the readiness check
    assert "gate_kubelet" in node_shell.unpack(gpu_only[eks_node.NODE_SCRIPT][1])
