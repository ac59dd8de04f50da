"""CloudFormation custom resource: the Prometheus data source and the dashboards of an Amazon
Managed Grafana workspace, through the Grafana HTTP API.

CloudFormation has no resource for Grafana's own objects. On Create and Update:

1. find or create the workspace service account `fmcluster-provisioner` (ADMIN);
2. mint a token for it that lives 5 minutes (CreateWorkspaceServiceAccountToken);
3. upsert the Prometheus data source `DataSourceUid` (SigV4 with the workspace's IAM role);
4. upsert every dashboard of `Dashboards` (overwrite, in the folder "fmcluster");
5. delete the token, whatever happened.

Delete does nothing: the dashboards go with the workspace. Standard library and boto3 only.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import boto3

SERVICE_ACCOUNT = "fmcluster-provisioner"
TOKEN_SECONDS = 300
FOLDER_UID = "fmcluster"


def api(url: str, token: str, method: str, path: str, body=None):
    request = urllib.request.Request(
        url.rstrip("/") + path, method=method, data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")[:500]


def service_account(client, workspace_id: str) -> str:
    for page in client.get_paginator("list_workspace_service_accounts").paginate(workspaceId=workspace_id):
        for account in page["serviceAccounts"]:
            if account["name"] == SERVICE_ACCOUNT:
                return account["id"]
    return client.create_workspace_service_account(
        workspaceId=workspace_id, name=SERVICE_ACCOUNT, grafanaRole="ADMIN")["id"]


def provision(props: dict, url: str, token: str) -> None:
    uid = props["DataSourceUid"]
    source = {"uid": uid, "name": "Amazon Managed Service for Prometheus", "type": "prometheus", "access": "proxy",
              "url": props["PrometheusUrl"].rstrip("/"), "isDefault": True,
              "jsonData": {"httpMethod": "POST", "sigV4Auth": True, "sigV4AuthType": "ec2_iam_role",
                           "sigV4Region": props["Region"]}}
    status, _ = api(url, token, "GET", f"/api/datasources/uid/{uid}")
    status, body = (api(url, token, "PUT", f"/api/datasources/uid/{uid}", source) if status == 200
                    else api(url, token, "POST", "/api/datasources", source))
    if status >= 300:
        raise RuntimeError(f"data source {uid}: HTTP {status} {body}")
    status, body = api(url, token, "GET", f"/api/folders/{FOLDER_UID}")
    if status == 404:
        status, body = api(url, token, "POST", "/api/folders", {"uid": FOLDER_UID, "title": "fmcluster"})
    if status >= 300:
        raise RuntimeError(f"folder {FOLDER_UID}: HTTP {status} {body}")
    for name, text in sorted(props.get("Dashboards", {}).items()):
        dashboard = json.loads(text)
        dashboard.pop("id", None)
        status, body = api(url, token, "POST", "/api/dashboards/db",
                           {"dashboard": dashboard, "folderUid": FOLDER_UID, "overwrite": True,
                            "message": "provisioned by fmcluster"})
        if status >= 300:
            raise RuntimeError(f"dashboard {name}: HTTP {status} {body}")


def create_or_update(props: dict) -> None:
    client = boto3.client("grafana", region_name=props["Region"])
    workspace_id = props["WorkspaceId"]
    account_id = service_account(client, workspace_id)
    token = client.create_workspace_service_account_token(
        workspaceId=workspace_id, serviceAccountId=account_id, name=f"{SERVICE_ACCOUNT}-deploy",
        secondsToLive=TOKEN_SECONDS)["serviceAccountToken"]
    try:
        provision(props, props["GrafanaUrl"], token["key"])
    finally:
        client.delete_workspace_service_account_token(
            workspaceId=workspace_id, serviceAccountId=account_id, tokenId=token["id"])


def respond(event: dict, status: str, reason: str = "") -> None:
    body = json.dumps({
        "Status": status, "Reason": reason[:1000] or status,
        "PhysicalResourceId": (event.get("PhysicalResourceId")
                               or f"grafana-{event['ResourceProperties']['WorkspaceId']}"),
        "StackId": event["StackId"], "RequestId": event["RequestId"], "LogicalResourceId": event["LogicalResourceId"],
    }).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    urllib.request.urlopen(request, timeout=30).close()


def handler(event, context):
    try:
        if event["RequestType"] in ("Create", "Update"):
            create_or_update(event["ResourceProperties"])
        respond(event, "SUCCESS")
    except Exception as exc:  # report every failure to CloudFormation instead of timing out
        respond(event, "FAILED", f"{type(exc).__name__}: {exc}")
