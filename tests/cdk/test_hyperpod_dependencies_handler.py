"""The custom-resource handler that installs the SageMaker HyperPod dependencies chart
(fmcluster_cdk/constructs/hyperpod/handlers/hyperpod_dependencies): helm, aws and the download are stubbed; no
network, no cluster."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from fmcluster_cdk.constructs.hyperpod import dependencies as deps
from tests.support import lambda_handlers

handler = lambda_handlers.load(deps.HANDLER / "index.py", "hyperpod_dependencies_handler")

PROPS = {"ClusterName": "hp-eks", "ArchiveUrl": deps.ARCHIVE_URL, "Commit": deps.COMMIT, "Release": deps.RELEASE,
         "Namespace": deps.NAMESPACE, "Values": json.dumps({"health-monitoring-agent": {"region": "us-east-1"}})}


def archive(files: dict[str, str]) -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        for name, text in files.items():
            body = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return data.getvalue()


ROOT = f"sagemaker-hyperpod-cli-{deps.COMMIT}"
MPI = deps.subchart_path("mpi-operator")
TRAINING = deps.subchart_path("training-operators")
REPO = archive({f"{ROOT}/{handler.CHART_PATH}/Chart.yaml": "name: hyperpod-helm-chart\n",
                f"{ROOT}/{handler.CHART_PATH}/values.yaml": "{}\n",
                f"{ROOT}/{MPI}/Chart.yaml": "name: mpi-operator\n",
                f"{ROOT}/{TRAINING}/Chart.yaml": "name: training-operators\n",
                f"{ROOT}/{TRAINING}-old/Chart.yaml": "a sibling with the same prefix: not extracted\n",
                f"{ROOT}/README.md": "not extracted\n"})
# kubectl get deployments --all-namespaces: the training operator's (Helm's annotations of the
# release training-operators in kube-system, the object in kubeflow) and one of another release
DEPLOYMENTS = {"items": [
    {"metadata": {"namespace": "kubeflow", "name": "training-operators", "annotations": {
        "meta.helm.sh/release-name": "training-operators", "meta.helm.sh/release-namespace": "kube-system"}}},
    {"metadata": {"namespace": "kube-system", "name": "coredns"}},
    {"metadata": {"namespace": "kube-system", "name": "mpi-operator", "annotations": {
        "meta.helm.sh/release-name": "mpi-operator", "meta.helm.sh/release-namespace": "kube-system"}}}]}


class Recorder:
    def __init__(self, fail_on: str | None = None):
        self.commands: list[list[str]] = []
        self.responses: list[dict] = []
        self.fail_on = fail_on
        self.values = None
        self.deployments = DEPLOYMENTS

    def run(self, command, env, capture_output, text):
        self.commands.append(command)
        if command[:2] == ["helm", "upgrade"]:
            self.values = json.loads(open(command[command.index("--values") + 1]).read())
            assert handler.os.path.isfile(handler.os.path.join(command[4], "Chart.yaml"))
            assert env["PATH"].startswith("/opt/kubectl:/opt/helm:/opt/awscli:")
        failed = self.fail_on is not None and self.fail_on in " ".join(command)
        stdout = json.dumps(self.deployments) if command[:3] == ["kubectl", "get", "deployments"] else ""
        return type("Result", (), {"returncode": 1 if failed else 0, "stdout": stdout,
                                   "stderr": "Error: release: not found" if failed else ""})()

    def urlopen(self, request, timeout):
        recorder = self

        class Response(io.BytesIO):
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

        if isinstance(request, str):
            assert request == deps.ARCHIVE_URL
            return Response(REPO)
        recorder.responses.append(json.loads(request.data))
        return Response(b"")


@pytest.fixture
def recorder(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(handler.subprocess, "run", rec.run)
    monkeypatch.setattr(handler.urllib.request, "urlopen", rec.urlopen)
    return rec


def event(kind: str, **props: str) -> dict:
    return {"RequestType": kind, "ResourceProperties": {**PROPS, **props},
            "ResponseURL": "https://cloudformation-response",
            "StackId": "stack", "RequestId": "req", "LogicalResourceId": "Deps"}


def test_create_builds_and_installs_the_pinned_chart(recorder):
    handler.handler(event("Create"), None)
    commands = [c[:3] for c in recorder.commands]
    assert commands == [["aws", "eks", "update-kubeconfig"], ["helm", "dependency", "build"],
                        ["helm", "upgrade", "--install"]]
    install = recorder.commands[-1]
    assert install[3] == deps.RELEASE and install[install.index("--namespace") + 1] == "kube-system"
    assert "--wait" in install
    assert recorder.values == {"health-monitoring-agent": {"region": "us-east-1"}}
    (response,) = recorder.responses
    assert response["Status"] == "SUCCESS" and response["PhysicalResourceId"] == deps.RELEASE


def test_a_failed_install_fails_the_resource(recorder):
    recorder.fail_on = "dependency build"
    handler.handler(event("Create"), None)
    (response,) = recorder.responses
    assert response["Status"] == "FAILED" and "helm dependency build failed" in response["Reason"]


def test_delete_uninstalls_and_never_blocks(recorder):
    handler.handler(event("Delete"), None)
    assert recorder.commands[-1][:2] == ["helm", "uninstall"]
    recorder.fail_on = "update-kubeconfig"  # the cluster is gone already
    handler.handler(event("Delete"), None)
    assert [r["Status"] for r in recorder.responses] == ["SUCCESS", "SUCCESS"]


def test_only_the_chart_folder_is_extracted(recorder, tmp_path):
    chart = handler.fetch_chart(deps.ARCHIVE_URL, deps.COMMIT, str(tmp_path))
    assert chart == str(tmp_path / ROOT / handler.CHART_PATH)
    assert (tmp_path / ROOT / handler.CHART_PATH / "Chart.yaml").is_file()
    assert not (tmp_path / ROOT / "README.md").exists()


def test_the_archive_must_name_the_pinned_commit():
    with pytest.raises(ValueError, match="pinned commit"):
        handler.fetch_chart("https://codeload.github.com/aws/sagemaker-hyperpod-cli/tar.gz/main", deps.COMMIT, "/tmp")


def test_the_pin_is_a_full_commit_id():
    assert len(deps.COMMIT) == 40 and int(deps.COMMIT, 16) >= 0
    assert deps.ARCHIVE_URL.endswith(deps.COMMIT)


# --- ChartPath and NodeSelector: the operators' sub-charts on `eks` ------------------------------

def test_the_default_chart_is_the_constructs(recorder):
    assert handler.CHART_PATH == deps.CHART_PATH == "helm_chart/HyperPodHelmChart"
    assert deps.subchart_path("mpi-operator") == "helm_chart/HyperPodHelmChart/charts/mpi-operator"


def test_a_sub_chart_is_installed_from_its_own_folder(recorder, monkeypatch, tmp_path):
    extracted = []
    fetch = handler.fetch_chart
    monkeypatch.setattr(handler, "fetch_chart", lambda *args: extracted.append(args) or fetch(*args))
    handler.handler(event("Create", ChartPath=MPI, Release="mpi-operator", Values="{}"), None)
    ((url, commit, _, path),) = extracted
    assert (url, commit, path) == (deps.ARCHIVE_URL, deps.COMMIT, MPI)
    build, install = recorder.commands[1], recorder.commands[2]
    assert build[3].endswith(f"{ROOT}/{MPI}") and install[4] == build[3]
    assert install[3] == "mpi-operator" and install[install.index("--timeout") + 1] == handler.TIMEOUT
    assert not [c for c in recorder.commands if c[0] == "kubectl"]  # no NodeSelector: nothing placed
    (response,) = recorder.responses
    assert response["Status"] == "SUCCESS" and response["PhysicalResourceId"] == "mpi-operator"


def test_only_the_sub_chart_folder_is_extracted(tmp_path, recorder):
    chart = handler.fetch_chart(deps.ARCHIVE_URL, deps.COMMIT, str(tmp_path), TRAINING)
    assert chart == str(tmp_path / ROOT / TRAINING) and (tmp_path / ROOT / TRAINING / "Chart.yaml").is_file()
    assert sorted(p.relative_to(tmp_path / ROOT).as_posix() for p in (tmp_path / ROOT).rglob("*") if p.is_file()) == [
        f"{TRAINING}/Chart.yaml"]


def test_a_missing_chart_folder_fails(tmp_path, recorder):
    with pytest.raises(ValueError, match="not found in the archive"):
        handler.fetch_chart(deps.ARCHIVE_URL, deps.COMMIT, str(tmp_path), "helm_chart/HyperPodHelmChart/charts/none")


@pytest.mark.parametrize("path", [
    "../etc", "helm_chart/../../etc", "helm_chart/HyperPodHelmChart/charts/..", "/etc", "/", "", ".",
    "./helm_chart/HyperPodHelmChart", "helm_chart//HyperPodHelmChart", "helm_chart/HyperPodHelmChart/",
    "helm_chart\\..\\etc"])
def test_the_chart_path_stays_inside_the_archive(path):
    with pytest.raises(ValueError, match="not a folder inside the archive"):
        handler.checked_chart_path(path)


def test_a_chart_path_outside_the_archive_fails_before_any_download(recorder):
    handler.handler(event("Create", ChartPath="helm_chart/../../etc"), None)
    assert [c[:2] for c in recorder.commands] == [["aws", "eks"]]  # no helm
    (response,) = recorder.responses
    assert response["Status"] == "FAILED" and "not a folder inside the archive" in response["Reason"]


def test_an_empty_chart_path_is_the_dependencies_chart(recorder):
    handler.handler(event("Create", ChartPath=""), None)
    install = recorder.commands[-1]
    assert install[4].endswith(f"{ROOT}/{handler.CHART_PATH}")


def test_a_node_selector_places_the_releases_deployments(recorder):
    selector = {"fmcluster.dev/node-group": "system"}
    handler.handler(event("Create", ChartPath=TRAINING, Release="training-operators", Values="{}",
                          NodeSelector=json.dumps(selector)), None)
    install = next(c for c in recorder.commands if c[:2] == ["helm", "upgrade"])
    assert install[install.index("--timeout") + 1] == handler.PLACED_TIMEOUT  # then the rollout, in 15 minutes
    kubectl = [c for c in recorder.commands if c[0] == "kubectl"]
    assert kubectl[0][:5] == ["kubectl", "get", "deployments", "--all-namespaces", "--output"]
    patch, rollout = kubectl[1], kubectl[2]
    assert patch[:8] == ["kubectl", "patch", "deployment", "training-operators", "--namespace", "kubeflow",
                         "--type", "merge"]
    assert json.loads(patch[patch.index("--patch") + 1]) == {"spec": {"template": {"spec": {"nodeSelector": selector}}}}
    assert rollout[:5] == ["kubectl", "rollout", "status", "deployment/training-operators", "--namespace"]
    assert len(kubectl) == 3  # only the release's own Deployment (not coredns, not mpi-operator's)
    (response,) = recorder.responses
    assert response["Status"] == "SUCCESS"


def test_a_node_selector_without_a_deployment_fails(recorder):
    recorder.deployments = {"items": []}
    handler.handler(event("Create", ChartPath=TRAINING, Release="training-operators",
                          NodeSelector='{"fmcluster.dev/node-group": "system"}'), None)
    (response,) = recorder.responses
    assert response["Status"] == "FAILED" and "has no Deployment" in response["Reason"]
