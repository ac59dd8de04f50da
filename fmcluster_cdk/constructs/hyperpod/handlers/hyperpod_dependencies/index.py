"""CloudFormation custom resource: install the SageMaker HyperPod dependencies Helm chart, or one
of its sub-charts.

SageMaker HyperPod publishes its dependencies chart (health-monitoring agent, deep-health-check
and job-auto-restart RBAC, training and MPI operators, device plugins) only as a folder of the
aws/sagemaker-hyperpod-cli repository (helm_chart/HyperPodHelmChart), to be installed with
`helm dependency update` and `helm install` before the HyperPod cluster is created (SageMaker
Developer Guide, "Installing packages on the Amazon EKS cluster using Helm"; AWS's own
CloudFormation set-up does the same from a pinned commit). No Helm repository serves it, so the
CDK kubectl provider's HelmChart cannot install it. This handler runs beside the kubectl provider
(same kubectl/helm layer, same cluster-admin role), at deploy time:

1. download the repository at the pinned commit (`Commit`) from `ArchiveUrl` and extract the chart
   folder `ChartPath` only (default helm_chart/HyperPodHelmChart; a relative path inside the
   archive, without `..`: on `eks` fmcluster installs two of its sub-charts, charts/mpi-operator and
   charts/training-operators, as releases of their own);
2. `helm dependency build` the chart (its sub-charts are pinned in its Chart.lock/Chart.yaml);
3. `helm upgrade --install` it as `Release` in `Namespace` with `Values` (JSON), waiting;
4. with `NodeSelector` (JSON, for a chart with no value that places its pods), set it on the pod
   template of every Deployment of the release (Helm's meta.helm.sh/release-name and
   release-namespace annotations) and wait for their rollout; Helm's three-way merge keeps it
   through later upgrades, and every update sets it again;
5. on delete, `helm uninstall`.

Standard library only; kubectl, helm and aws come from the Lambda layers (/opt/...).
"""

from __future__ import annotations

import io
import json
import os
import posixpath
import subprocess
import tarfile
import tempfile
import urllib.request

CHART_PATH = "helm_chart/HyperPodHelmChart"
BINARIES = "/opt/kubectl:/opt/helm:/opt/awscli"
TIMEOUT = "14m"  # inside the Lambda's 15 minutes
PLACED_TIMEOUT = "10m"  # helm's wait with a NodeSelector: then the rollout's below, 13 minutes in all
ROLLOUT_TIMEOUT = "3m"
RELEASE_ANNOTATIONS = ("meta.helm.sh/release-name", "meta.helm.sh/release-namespace")


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


def checked_chart_path(path: str) -> str:
    """A chart folder inside the archive: relative, normalized, no `..`, no backslash."""
    parts = path.split("/")
    if (not path or path.startswith("/") or "\\" in path or ".." in parts or posixpath.normpath(path) != path
            or path == "."):
        raise ValueError(f"ChartPath {path!r} is not a folder inside the archive")
    return path


def fetch_chart(archive_url: str, commit: str, workdir: str, chart_path: str = CHART_PATH) -> str:
    """The chart folder `chart_path` of the repository archive at `commit`, extracted under workdir."""
    chart_path = checked_chart_path(chart_path)
    if commit not in archive_url:
        raise ValueError(f"the archive URL does not name the pinned commit {commit}")
    with urllib.request.urlopen(archive_url, timeout=120) as response:  # noqa: S310 (https, pinned)
        data = response.read()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        members = [m for m in archive.getmembers()
                   if m.name.split("/", 1)[-1].startswith(chart_path + "/") and ".." not in m.name.split("/")
                   and (m.isfile() or m.isdir())]
        if not members:
            raise ValueError(f"{chart_path} not found in the archive of {commit}")
        archive.extractall(workdir, members=members)  # noqa: S202 (filtered above)
    root = members[0].name.split("/", 1)[0]
    return os.path.join(workdir, root, chart_path)


def kubeconfig(props: dict, env: dict) -> None:
    command = ["aws", "eks", "update-kubeconfig", "--name", props["ClusterName"], "--kubeconfig", env["KUBECONFIG"]]
    if props.get("RoleArn"):
        command += ["--role-arn", props["RoleArn"]]
    run(*command, env=env)


def release_deployments(props: dict, env: dict) -> list[tuple[str, str]]:
    """(namespace, name) of every Deployment Helm made for the release, in any namespace (a chart
    may put its objects outside the release namespace, as training-operators does)."""
    listing = json.loads(run("kubectl", "get", "deployments", "--all-namespaces", "--output", "json", env=env))
    wanted = (props["Release"], props["Namespace"])
    return sorted((d["metadata"]["namespace"], d["metadata"]["name"]) for d in listing.get("items", [])
                  if tuple((d["metadata"].get("annotations") or {}).get(a) for a in RELEASE_ANNOTATIONS) == wanted)


def place(props: dict, selector: dict, env: dict) -> None:
    """The release's Deployments on the nodes of `selector`, rolled out."""
    deployments = release_deployments(props, env)
    if not deployments:
        raise RuntimeError(f"release {props['Release']} has no Deployment to place on {selector}")
    patch = json.dumps({"spec": {"template": {"spec": {"nodeSelector": selector}}}})
    for namespace, name in deployments:
        run("kubectl", "patch", "deployment", name, "--namespace", namespace, "--type", "merge", "--patch", patch,
            env=env)
    for namespace, name in deployments:
        run("kubectl", "rollout", "status", f"deployment/{name}", "--namespace", namespace,
            "--timeout", ROLLOUT_TIMEOUT, env=env)


def install(props: dict) -> None:
    selector = json.loads(props.get("NodeSelector") or "null")
    with tempfile.TemporaryDirectory() as workdir:
        env = environment(workdir)
        kubeconfig(props, env)
        chart = fetch_chart(props["ArchiveUrl"], props["Commit"], workdir, props.get("ChartPath") or CHART_PATH)
        run("helm", "dependency", "build", chart, env=env)
        values = os.path.join(workdir, "values.json")
        with open(values, "w", encoding="utf-8") as f:
            f.write(props.get("Values") or "{}")
        run("helm", "upgrade", "--install", props["Release"], chart, "--namespace", props["Namespace"],
            "--values", values, "--wait", "--timeout", PLACED_TIMEOUT if selector else TIMEOUT, env=env)
        if selector:
            place(props, selector, env)


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
