"""CloudFormation custom resource: install the SageMaker HyperPod dependencies Helm chart.

SageMaker HyperPod publishes its dependencies chart (health-monitoring agent, deep-health-check
and job-auto-restart RBAC, training and MPI operators, device plugins) only as a folder of the
aws/sagemaker-hyperpod-cli repository (helm_chart/HyperPodHelmChart), to be installed with
`helm dependency update` and `helm install` before the HyperPod cluster is created (SageMaker
Developer Guide, "Installing packages on the Amazon EKS cluster using Helm"; AWS's own
CloudFormation set-up does the same from a pinned commit). No Helm repository serves it, so the
CDK kubectl provider's HelmChart cannot install it. This handler runs beside the kubectl provider
(same kubectl/helm layer, same cluster-admin role), at deploy time:

1. download the repository at the pinned commit (`Commit`) from `ArchiveUrl`;
2. `helm dependency build` the chart (its sub-charts are pinned in its Chart.lock/Chart.yaml);
3. `helm upgrade --install` it as `Release` in `Namespace` with `Values` (JSON), waiting;
4. on delete, `helm uninstall`.

Standard library only; kubectl, helm and aws come from the Lambda layers (/opt/...).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
import tempfile
import urllib.request

CHART_PATH = "helm_chart/HyperPodHelmChart"
BINARIES = "/opt/kubectl:/opt/helm:/opt/awscli"
TIMEOUT = "14m"  # inside the Lambda's 15 minutes


def run(*command: str, env: dict) -> str:
    result = subprocess.run(list(command), env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:3])} failed: {result.stderr.strip()[-800:]}")
    return result.stdout


def environment(workdir: str) -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{BINARIES}:{env.get('PATH', '')}"
    for name in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        env[name] = os.path.join(workdir, name.lower())
    env["KUBECONFIG"] = os.path.join(workdir, "kubeconfig")
    env["HOME"] = workdir
    return env


def fetch_chart(archive_url: str, commit: str, workdir: str) -> str:
    """The chart folder of the repository archive at `commit`, extracted under workdir."""
    if commit not in archive_url:
        raise ValueError(f"the archive URL does not name the pinned commit {commit}")
    with urllib.request.urlopen(archive_url, timeout=120) as response:  # noqa: S310 (https, pinned)
        data = response.read()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        members = [m for m in archive.getmembers()
                   if m.name.split("/", 1)[-1].startswith(CHART_PATH + "/") and ".." not in m.name.split("/")
                   and (m.isfile() or m.isdir())]
        if not members:
            raise ValueError(f"{CHART_PATH} not found in the archive of {commit}")
        archive.extractall(workdir, members=members)  # noqa: S202 (filtered above)
    root = members[0].name.split("/", 1)[0]
    return os.path.join(workdir, root, CHART_PATH)


def kubeconfig(props: dict, env: dict) -> None:
    command = ["aws", "eks", "update-kubeconfig", "--name", props["ClusterName"], "--kubeconfig", env["KUBECONFIG"]]
    if props.get("RoleArn"):
        command += ["--role-arn", props["RoleArn"]]
    run(*command, env=env)


def install(props: dict) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        env = environment(workdir)
        kubeconfig(props, env)
        chart = fetch_chart(props["ArchiveUrl"], props["Commit"], workdir)
        run("helm", "dependency", "build", chart, env=env)
        values = os.path.join(workdir, "values.json")
        with open(values, "w", encoding="utf-8") as f:
            f.write(props.get("Values") or "{}")
        run("helm", "upgrade", "--install", props["Release"], chart, "--namespace", props["Namespace"],
            "--values", values, "--wait", "--timeout", TIMEOUT, env=env)


def uninstall(props: dict) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        env = environment(workdir)
        kubeconfig(props, env)
        try:
            run("helm", "uninstall", props["Release"], "--namespace", props["Namespace"], "--wait", env=env)
        except RuntimeError as error:
            if "not found" not in str(error):
                raise


def respond(event: dict, status: str, reason: str = "") -> None:
    body = json.dumps({
        "Status": status, "Reason": reason[:3000] or status,
        "PhysicalResourceId": event.get("PhysicalResourceId") or event["ResourceProperties"]["Release"],
        "StackId": event["StackId"], "RequestId": event["RequestId"], "LogicalResourceId": event["LogicalResourceId"],
    }).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    with urllib.request.urlopen(request, timeout=60):  # noqa: S310 (CloudFormation's pre-signed URL)
        pass


def handler(event, context):
    props = event["ResourceProperties"]
    try:
        if event["RequestType"] in ("Create", "Update"):
            install(props)
        elif event["RequestType"] == "Delete":
            uninstall(props)
        respond(event, "SUCCESS")
    except Exception as error:  # every failure goes back to CloudFormation, never a hang
        # A failed uninstall must not block deleting the stack (the cluster may be gone already).
        respond(event, "SUCCESS" if event["RequestType"] == "Delete" else "FAILED", str(error))
