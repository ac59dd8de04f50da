"""Every node script of a synthesized cluster, as CloudFormation and HyperPod would hand it to a
node, for running in tests/support/sandbox.py. Not a test module.

`node_scripts(outdir, spec)` reads the cloud assembly: the shell parts of every Amazon EKS launch
template's user data (nested stacks included; values from other stacks become placeholder words),
every AWS PCS node group's boot (`pcs_boot`: its user data and its node lifecycle scripts, file
assets, as PCS runs them) and every SageMaker HyperPod instance group's lifecycle folder (its file
asset: on_init.sh and hooks.d/). `scenario(script)` is the healthy node the
script expects: the catalog's GPUs, disks and EFA devices, on the control plane's AMI.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from fmcluster.deploy import assembly
from fmcluster.facts import catalog, images
from fmcluster.facts import kubernetes as k8s
from fmcluster.model import node as node_setup
from fmcluster.node import shell as node_shell
from tests.support.sandbox import Scenario, template_text, user_data_parts


@dataclass(frozen=True)
class NodeScript:
    group: str
    instance_type: str
    plane: str  # the orchestrator type
    script: str
    files: dict[str, str] = field(default_factory=dict)  # beside the script (a lifecycle folder's hooks)
    name: str = "node.sh"
    slurm_version: str = ""  # the cluster's (AWS PCS: its image's Pyxis is built against it)


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
            if resource["Type"] == "AWS::PCS::ComputeNodeGroup":
                group = props["Name"]
                lt = template.body["Resources"][props["CustomLaunchTemplate"]["TemplateId"]["Ref"]]
                user_data = template_text(lt["Properties"]["LaunchTemplateData"]["UserData"])
                script, files = pcs_boot(outdir, props, user_data)
                found.append(NodeScript(group, types[group], plane, script, files, name="pcs-boot.sh",
                                        slurm_version=spec.orchestrator.version or ""))
            elif (resource["Type"] == "AWS::EC2::LaunchTemplate" and "UserData" in props["LaunchTemplateData"]
                  and plane != "pcs"):
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


STAGES = ("NodeBootstrapped", "NodeReady")


def lifecycle_actions(outdir: Path, group: dict) -> list[tuple[str, dict, str]]:
    """(stage, script properties, the published text) of a PCS node group's node lifecycle
    scripts, in the order PCS runs them: the text is the file asset the location names
    (`asset.fmcluster-node-script.<key>` in the cloud assembly)."""
    found = []
    stages = group.get("NodeLifecycleActions", {}).get("Stages", {})
    for stage in STAGES:
        for script in stages.get(stage, []):
            key = template_text(script["ScriptSource"]["ScriptLocation"]).rsplit("/", 1)[1]
            found.append((stage, script, (outdir / f"asset.fmcluster-node-script.{key}").read_text()))
    return found


def pcs_boot(outdir: Path, group: dict, user_data: str) -> tuple[str, dict[str, str]]:
    """A PCS node's first boot as one script and the files beside it: cloud-init's shell parts of
    the user data, then every lifecycle script, `bash SCRIPT ARG...` in stage order (the arguments
    as the template gives them, other stacks' values as placeholder words). A failure of any of
    them fails the boot: on a healthy node every script succeeds."""
    files: dict[str, str] = {}
    lines = ["#!/bin/bash", 'dir=$(dirname "$0")']
    for name, (content_type, body) in sorted(user_data_parts(user_data).items()):
        if content_type == "text/x-shellscript":
            files[f"user-data-{name}"] = body
            lines.append(f'bash "$dir/user-data-{name}" || exit 1')
    for i, (stage, script, text) in enumerate(lifecycle_actions(outdir, group)):
        name = f"{i}-{script['Name'].replace(' ', '-')}.sh"
        files[name] = text
        arguments = " ".join(shlex.quote(template_text(a)) for a in script.get("Arguments", []))
        lines.append(f'bash "$dir/{name}" {arguments} || {{ echo "{stage} {script["Name"]} failed" >&2; exit 1; }}')
    return "\n".join(lines) + "\n", files


def scenario(node: NodeScript) -> Scenario:
    instance = catalog.get(node.instance_type)
    # an UltraServer node's AMI has NVIDIA's IMEX packages (nvidia-imex.service)
    common = dict(gpus=instance.gpu_count, nvme_disks=instance.nvme_disks, efa_devices=instance.max_efa_interfaces,
                  imex=instance.ultraserver)
    if node.plane == "pcs":  # Ubuntu 24.04 (the PCS DLAMI), slurmd started by PCS, on the cluster's image
        return Scenario(**common, image_slurm_prefix=images.slurm_prefix(images.PCS, node.slurm_version),
                        slurmd_unit=node_setup.PCS_SLURMD_UNIT.format(version=node.slurm_version))
    if node.plane == "hyperpod-slurm":
        # slurmd's configless copy of the controller's plugstack.conf, once the controller registered Pyxis
        plugstack = f"include {node_setup.Containers.hyperpod().pyxis_conf}\n"
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
        if match and not (match.group(0).lstrip(" \t;&|(`{").startswith("curl") and _LOCAL.search(code)):
            found.append(code)
    return found


def boot_texts(node: NodeScript) -> dict[str, str]:
    """Every text a node script runs at boot: the script (a compact one's packed body too) and the
    files beside it."""
    texts = {node.name: node.script, **node.files}
    if "FMCLUSTER_BOOTSTRAP=" in node.script:
        texts[f"{node.name} (packed body)"] = node_shell.unpack(node.script)
    return texts
