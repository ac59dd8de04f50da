"""Reading a synthesized cloud assembly: every stack's template, nested stacks included.

NAME-cluster keeps each node group in a nested stack (fmcluster_cdk/stacks/node_groups.py). A nested stack is
an `AWS::CloudFormation::Stack` resource of its parent whose `TemplateURL` names a file asset of
the parent's asset manifest (`<hash>.json` -> `*.nested.template.json`); `cdk deploy` publishes
it. Here a nested template is named `PARENT/ID`: ID is the nested stack's construct id
(`NodeGroup-gpu`), read from the resource's `aws:cdk:path` metadata, or its logical id where
path metadata is off. No aws_cdk import: plain JSON files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

NESTED_STACK = "AWS::CloudFormation::Stack"
NESTED_SUFFIX = ".NestedStack"


@dataclass(frozen=True)
class Template:
    name: str  # the stack name, or PARENT/ID for a nested stack
    path: Path
    body: dict[str, Any]  # the template, as parsed JSON
    parent: Optional[str] = None  # the parent's name, for a nested stack
    logical_id: Optional[str] = None  # of the AWS::CloudFormation::Stack resource in the parent

    @property
    def nested(self) -> bool:
        return self.parent is not None


def _object_key(template_url: Any) -> Optional[str]:
    """The last path segment of a TemplateURL (a string or CDK's Fn::Join of parts)."""
    if isinstance(template_url, dict) and "Fn::Join" in template_url:
        parts = template_url["Fn::Join"][1]
        last = parts[-1] if parts else None
        return last.rsplit("/", 1)[-1] if isinstance(last, str) else None
    if isinstance(template_url, str):
        return template_url.rsplit("/", 1)[-1]
    return None


def nested_id(logical_id: str, resource: dict[str, Any]) -> str:
    """The construct id of a nested stack resource (`NodeGroup-gpu`), else its logical id."""
    path: str = resource.get("Metadata", {}).get("aws:cdk:path", "")
    parts = path.split("/")
    if len(parts) >= 2 and parts[-2].endswith(NESTED_SUFFIX):
        return parts[-2].removesuffix(NESTED_SUFFIX)
    return logical_id


def _asset_files(outdir: Path, manifest: dict[str, Any], artifact_id: str) -> dict[str, Path]:
    """Object key -> local file of the file assets of one stack's asset manifest."""
    deps = manifest["artifacts"][artifact_id].get("dependencies", [])
    files: dict[str, Path] = {}
    for dep in deps:
        artifact = manifest["artifacts"].get(dep, {})
        if artifact.get("type") != "cdk:asset-manifest":
            continue
        assets = json.loads((outdir / artifact["properties"]["file"]).read_text())
        for asset in assets.get("files", {}).values():
            for destination in asset.get("destinations", {}).values():
                files[destination["objectKey"]] = outdir / asset["source"]["path"]
    return files


def _nested(outdir: Path, parent: Template, files: dict[str, Path]) -> list[Template]:
    found = []
    for lid, resource in sorted(parent.body.get("Resources", {}).items()):
        if resource.get("Type") != NESTED_STACK:
            continue
        path = files.get(_object_key(resource.get("Properties", {}).get("TemplateURL")) or "")
        if path is None or not path.is_file():
            continue
        child = Template(f"{parent.name}/{nested_id(lid, resource)}", path, json.loads(path.read_text()),
                         parent=parent.name, logical_id=lid)
        found += [child, *_nested(outdir, child, files)]
    return found


def load(outdir: Path | str) -> dict[str, Template]:
    """Every template of the assembly in `outdir`, by name: stacks first, each followed by its
    nested stacks."""
    outdir = Path(outdir)
    manifest = json.loads((outdir / "manifest.json").read_text())
    out: dict[str, Template] = {}
    for artifact_id, artifact in manifest["artifacts"].items():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        props = artifact["properties"]
        path = outdir / props["templateFile"]
        stack = Template(props.get("stackName") or artifact.get("displayName") or artifact_id, path,
                         json.loads(path.read_text()))
        out[stack.name] = stack
        for child in _nested(outdir, stack, _asset_files(outdir, manifest, artifact_id)):
            out[child.name] = child
    return out


def templates(outdir: Path | str) -> dict[str, dict[str, Any]]:
    """Name -> template body, nested stacks (`PARENT/ID`) included."""
    return {name: t.body for name, t in load(outdir).items()}


def parameter_value(all_templates: Mapping[str, Mapping[str, Any]], name: str, parameter: str) -> Any:
    """The value the parent of nested stack `name` passes to its `parameter` (None if not nested
    or not passed)."""
    if "/" not in name:
        return None
    parent, child_id = name.rsplit("/", 1)
    for lid, resource in all_templates.get(parent, {}).get("Resources", {}).items():
        if resource.get("Type") == NESTED_STACK and nested_id(lid, resource) == child_id:
            return resource.get("Properties", {}).get("Parameters", {}).get(parameter)
    return None
