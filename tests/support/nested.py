"""Reading NAME-cluster with its nested stacks (one per node group) in tests. Not a test module.

`flatten` gives a stack's template with the resources of its nested stacks inlined, a nested
template's parameters replaced by what the parent passes, and the parent's reads of nested
outputs replaced by the outputs' values: the single template the stack would be without
nesting, so assertions on resources and references read as before. Logical IDs inside a node
group's nested stack derive from the group's name, so they cannot collide when inlined.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fmcluster.deploy import assembly


def _substitute(value: Any, parameters: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        if set(value) == {"Ref"} and value["Ref"] in parameters:
            return parameters[value["Ref"]]
        return {k: _substitute(v, parameters) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, parameters) for v in value]
    return value


def _outputs(value: Any, outputs: dict[tuple[str, str], Any]) -> Any:
    """Fn::GetAtt [NestedStack, Outputs.X] -> the nested output's value."""
    if isinstance(value, dict):
        if set(value) == {"Fn::GetAtt"} and isinstance(value["Fn::GetAtt"], list):
            lid, attribute = value["Fn::GetAtt"]
            if (lid, attribute) in outputs:
                return outputs[(lid, attribute)]
        return {k: _outputs(v, outputs) for k, v in value.items()}
    if isinstance(value, list):
        return [_outputs(v, outputs) for v in value]
    return value


def nested_templates(outdir: Path, stack_name: str) -> dict[str, assembly.Template]:
    """The nested templates of `stack_name`, by name (`PARENT/ID`)."""
    return {name: t for name, t in assembly.load(outdir).items() if t.parent == stack_name}


def flatten(outdir: Path, stack_name: str, keep_nested_stacks: bool = False) -> dict:
    """`stack_name`'s template with its nested stacks inlined (see the module's docstring); the
    AWS::CloudFormation::Stack resources are left out unless `keep_nested_stacks`."""
    loaded = assembly.load(outdir)
    parent = loaded[stack_name].body
    resources = {lid: r for lid, r in parent["Resources"].items()
                 if keep_nested_stacks or r["Type"] != assembly.NESTED_STACK}
    outputs: dict[tuple[str, str], Any] = {}
    for child in loaded.values():
        if child.parent != stack_name:
            continue
        passed = parent["Resources"][child.logical_id]["Properties"].get("Parameters", {})
        body = _substitute(child.body, passed)
        for lid, resource in body["Resources"].items():
            if lid == "CDKMetadata":
                continue
            assert lid not in resources, f"{lid} of {child.name} is also in {stack_name}"
            resources[lid] = resource
        for key, output in body.get("Outputs", {}).items():
            outputs[(child.logical_id, f"Outputs.{key}")] = output["Value"]
    flat = {k: v for k, v in parent.items() if k != "Resources"}
    flat["Resources"] = _outputs(resources, outputs)
    if "Outputs" in flat:
        flat["Outputs"] = _outputs(flat["Outputs"], outputs)
    return flat
