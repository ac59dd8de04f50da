"""Every node script of a synthesized cluster, as CloudFormation and HyperPod would hand it to a
node, for running in tests/support/sandbox.py. Not a test module.

`node_scripts(outdir, spec)` reads the cloud assembly: the shell parts of every launch
template's user data (AWS PCS and Amazon EKS node groups, nested stacks included; values from
other stacks become placeholder words) and every SageMaker HyperPod instance group's lifecycle
folder (its file asset: on_init.sh and hooks.d/). `scenario(script)` is the healthy node the
script expects: the catalog's GPUs, disks and EFA devices, on the control plane's AMI.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from fmcluster.deploy import assembly
from fmcluster.facts import catalog
from fmcluster.facts import kubernetes as k8s
from fmcluster.node import bootstrap
from tests.support.sandbox import Scenario, template_text, user_data_parts


@dataclass(frozen=True)
class NodeScript:
    group: str
    instance_type: str
    plane: str  # the orchestrator type
    script: str
    files: dict[str, str] = field(default_factory=dict)  # beside the script (a lifecycle folder's hooks)
    name: str = "node.sh"


def _instance_types(spec) -> dict[str, str]:
    types = {g.name: g.instance_type for g in spec.node_groups}
    login = spec.orchestrator.login.instance_type
    types.update({"login": login, k8s.SYSTEM_NODE_GROUP: login})
    return types


def node_scripts(outdir: Path, spec) -> list[NodeScript]:
    plane = spec.orchestrator.type
    types = _instance_types(spec)
    found = []
    for template in assembly.load(outdir).values():
        for resource in template.body.get("Resources", {}).values():
            props = resource.get("Properties", {})
            if resource["Type"] == "AWS::EC2::LaunchTemplate" and "UserData" in props["LaunchTemplateData"]:
                data = props["LaunchTemplateData"]
                tags = {t["Key"]: t["Value"] for s in data.get("TagSpecifications", []) for t in s["Tags"]}
                group = tags["fmcluster:node-group"]
                for content_type, body in user_data_parts(template_text(data["UserData"])).values():
                    if content_type == "text/x-shellscript":
                        found.append(NodeScript(group, types[group], plane, body))
            elif resource["Type"] == "AWS::SageMaker::Cluster":
                for instance_group in props["InstanceGroups"]:
                    uri = template_text(instance_group["LifeCycleConfig"]["SourceS3Uri"])
                    folder = outdir / f"asset.fmcluster-lifecycle.{uri.rstrip('/').rsplit('/', 1)[1]}"
                    files = {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*.sh")}
                    entry = instance_group["LifeCycleConfig"]["OnInitComplete"]
                    found.append(NodeScript(instance_group["InstanceGroupName"],
                                            instance_group["InstanceType"].removeprefix("ml."), plane,
                                            files.pop(entry), files, name=entry))
    return found


def scenario(node: NodeScript) -> Scenario:
    instance = catalog.get(node.instance_type)
    # an UltraServer node's AMI has NVIDIA's IMEX packages (nvidia-imex.service)
    common = dict(gpus=instance.gpu_count, nvme_disks=instance.nvme_disks, efa_devices=instance.max_efa_interfaces,
                  imex=instance.ultraserver)
    if node.plane == "pcs":
        return Scenario(**common)  # Ubuntu 24.04 (the PCS DLAMI), slurmd started by PCS
    if node.plane == "hyperpod-slurm":
        # slurmd's configless copy of the controller's plugstack.conf, once the controller registered Pyxis
        plugstack = f"include {bootstrap.Containers.hyperpod().pyxis_conf}\n"
        return Scenario(**common, os_release="jammy", slurmd=False, dlami_nvme=0, slurmd_plugstack=plugstack)
    return Scenario(**common, os_release="amzn2023", slurmd=False)  # eks, hyperpod-eks: AL2023


def describe(node: NodeScript) -> str:
    return json.dumps({"group": node.group, "instance_type": node.instance_type, "plane": node.plane})


# What no boot path may run: fetching or building software (it belongs in the node image,
# fmcluster/node/scripts/image/). curl only to the instance metadata service or the node itself.
_FETCH_OR_BUILD = re.compile(
    r"(?:^|[\s;&|(`{])(?:git\s+(?:clone|fetch|pull|submodule)|make(?:\s|$)|gcc\s|cc\s|c\+\+\s|"
    r"pip3?\s+install|python3?\s+-m\s+pip\s+install|apt(?:-get|_get)?\s(?:.*\s)?install\b|dnf\s+install|"
    r"yum\s+install|snap\s+install|wget\s|curl\s)")
_LOCAL = re.compile(r"169\.254\.169\.254|127\.0\.0\.1|localhost|\[fd00:ec2::254\]")


def fetches_or_builds(text: str) -> list[str]:
    """The lines of a node script (its comment lines left out) that fetch or build software."""
    found = []
    for line in text.splitlines():
        code = line.strip()
        if not code or code.startswith("#"):
            continue
        match = _FETCH_OR_BUILD.search(code)
        if match and not (match.group(0).strip().startswith("curl") and _LOCAL.search(code)):
            found.append(code)
    return found


def boot_texts(node: NodeScript) -> dict[str, str]:
    """Every text a node script runs at boot: the script (a compact one's packed body too) and the
    files beside it."""
    texts = {node.name: node.script, **node.files}
    if "FMCLUSTER_BOOTSTRAP=" in node.script:
        texts[f"{node.name} (packed body)"] = bootstrap.unpack(node.script)
    return texts
