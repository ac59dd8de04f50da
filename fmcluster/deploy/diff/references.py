"""What a template value refers to, in its own stack and across stacks (CDK's weak references,
Fn::GetStackOutput, and imports of exports, Fn::ImportValue), the resources a reference ends at,
and a value with its cross-stack references made comparable."""

from __future__ import annotations

from typing import Any, Literal, Mapping

from fmcluster.deploy import assembly
from fmcluster.deploy.diff.changes import Templates

# ("res", logical id) in its own stack, ("out", stack, output) in another, ("export", name)
Reference = tuple[Literal["res"], str] | tuple[Literal["out"], Any, Any] | tuple[Literal["export"], str]


def references(value: Any) -> set[Reference]:
    """What a template value refers to: ("res", logical id) in its own stack, ("out", stack,
    output) in another one (CDK's Fn::GetStackOutput) and ("export", name) (Fn::ImportValue)."""
    found: set[Reference] = set()
    if isinstance(value, list):
        for item in value:
            found |= references(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key == "Ref" and isinstance(item, str) and not item.startswith("AWS::"):
                found.add(("res", item))
            elif key == "Fn::GetAtt":
                target = item[0] if isinstance(item, list) else str(item).split(".", 1)[0]
                found.add(("res", target))
            elif key == "Fn::Sub":
                text = item[0] if isinstance(item, list) else item
                found |= {("res", name.split(".", 1)[0]) for name in _sub_names(text) if not name.startswith("AWS::")}
                if isinstance(item, list) and len(item) > 1:
                    found |= references(item[1])
            elif key == "Fn::GetStackOutput" and isinstance(item, dict):
                found.add(("out", item.get("StackName"), item.get("OutputName")))
            elif key == "Fn::ImportValue" and isinstance(item, str):
                found.add(("export", item))
            else:
                found |= references(item)
    return found


def _sub_names(text: str) -> list[str]:
    names: list[str] = []
    rest = text
    while "${" in rest:
        start = rest.index("${") + 2
        end = rest.find("}", start)
        if end < 0:
            break
        if not rest[start:].startswith("!"):
            names.append(rest[start:end])
        rest = rest[end + 1:]
    return names


def exports(templates: Templates) -> dict[str, tuple[str, str]]:
    """Export name -> (producer stack, output name), for exports named by a plain string."""
    return {out["Export"]["Name"]: (stack, name) for stack, t in templates.items()
            for name, out in t.get("Outputs", {}).items()
            if isinstance(out.get("Export", {}).get("Name"), str)}


def imports(templates: Templates) -> dict[str, list[str]]:
    """Export name -> the stacks that import it (Fn::ImportValue of a plain string)."""
    found: dict[str, list[str]] = {}
    for stack, template in templates.items():
        for ref in references(template.get("Resources", {})) | references(template.get("Outputs", {})):
            if ref[0] == "export":
                found.setdefault(ref[1], []).append(stack)
    return {name: sorted(set(stacks)) for name, stacks in found.items()}


def canonical(value: Any, templates: Templates, produced: Mapping[str, tuple[str, str]] | None = None) -> Any:
    """`value` with each cross-stack reference (Fn::GetStackOutput, Fn::ImportValue) replaced by
    what it names: {"fmcluster:output": [producer stack, the output's Value there]}. Two ways of
    referring to the same producer value compare equal; one the templates cannot resolve stays."""
    produced = exports(templates) if produced is None else produced
    if isinstance(value, list):
        return [canonical(v, templates, produced) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (key, arg), = value.items()
        target: tuple[Any, Any] | None = None
        if key == "Fn::GetStackOutput" and isinstance(arg, dict):
            target = (arg.get("StackName"), arg.get("OutputName"))
        elif key == "Fn::ImportValue" and isinstance(arg, str):
            target = produced.get(arg)
        if target is not None:
            output = templates.get(str(target[0]), {}).get("Outputs", {}).get(target[1])
            if output is not None:
                return {"fmcluster:output": [target[0], output.get("Value")]}
    return {k: canonical(v, templates, produced) for k, v in value.items()}


class Resolver:
    """Which (stack, logical id) resources a reference ends at, through cross-stack outputs."""

    def __init__(self, templates: Templates, produced: Mapping[str, tuple[str, str]] | None = None) -> None:
        self.templates = templates
        self.exports = exports(templates) if produced is None else produced

    def targets(self, stack: str, value: Any, depth: int = 0) -> set[tuple[str, str]]:
        out: set[tuple[str, str]] = set()
        parameters = self.templates.get(stack, {}).get("Parameters", {})
        for ref in references(value):
            if ref[0] == "res" and ref[1] in parameters and "/" in stack:  # a nested stack's parameter
                passed = assembly.parameter_value(self.templates, stack, ref[1])
                if passed is not None and depth < 5:
                    out |= self.targets(stack.rsplit("/", 1)[0], passed, depth + 1)
                continue
            if ref[0] == "res":
                out.add((stack, ref[1]))
                continue
            other, name = (ref[1], ref[2]) if ref[0] == "out" else self.exports.get(ref[1], (None, None))
            output = self.templates.get(other or "", {}).get("Outputs", {}).get(name)
            if output is not None and other is not None and depth < 5:
                out |= self.targets(other, output.get("Value"), depth + 1)
        return out
