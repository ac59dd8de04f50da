"""The custom-resource handler that installs the SageMaker HyperPod dependencies chart
(constructs_lib/handlers/hyperpod_dependencies): helm, aws and the download are stubbed; no
network, no cluster."""

from __future__ import annotations

import importlib.util
import io
import json
import tarfile

import pytest

from constructs_lib import hyperpod_dependencies as deps

spec = importlib.util.spec_from_file_location("hyperpod_dependencies_handler", deps.HANDLER / "index.py")
handler = importlib.util.module_from_spec(spec)
spec.loader.exec_module(handler)

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
REPO = archive({f"{ROOT}/{handler.CHART_PATH}/Chart.yaml": "name: hyperpod-helm-chart\n",
                f"{ROOT}/{handler.CHART_PATH}/values.yaml": "{}\n",
                f"{ROOT}/README.md": "not extracted\n"})


class Recorder:
    def __init__(self, fail_on: str | None = None):
        self.commands: list[list[str]] = []
        self.responses: list[dict] = []
        self.fail_on = fail_on
        self.values = None

    def run(self, command, env, capture_output, text):
        self.commands.append(command)
        if command[:2] == ["helm", "upgrade"]:
            self.values = json.loads(open(command[command.index("--values") + 1]).read())
            assert handler.os.path.isfile(handler.os.path.join(command[4], "Chart.yaml"))
            assert env["PATH"].startswith("/opt/kubectl:/opt/helm:/opt/awscli:")
        failed = self.fail_on is not None and self.fail_on in " ".join(command)
        return type("Result", (), {"returncode": 1 if failed else 0, "stdout": "",
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


def event(kind: str) -> dict:
    return {"RequestType": kind, "ResourceProperties": PROPS, "ResponseURL": "https://cloudformation-response",
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
