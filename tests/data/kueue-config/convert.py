"""Make this folder's files from a Kueue release: the JSON Schema of Kueue's Configuration (the
controller manager's configuration, which is no CRD and has no published schema: only its Go
types) and the Kueue chart's default Configuration. tests/kubernetes/test_kueue_config.py reads both.

    python tests/data/kueue-config/convert.py GIT_DIR REF

GIT_DIR is a clone (or bare mirror) of kubernetes-sigs/kueue, REF its tag (v0.18.3, the chart
fmcluster.kubernetes.charts.KUEUE installs). Read there, with `git show REF:PATH`:

- apis/config/v1beta2/groupversion_info.go: the group and version (apiVersion);
- apis/config/v1beta2/configuration_types.go: the Configuration's Go structs and their `json`
  tags, with the Kubernetes types they use, from the release's vendor/ folder (VENDORED);
- charts/kueue/values.yaml: managerConfig.controllerManagerConfigYaml, the chart's default.

The schema follows how Kueue reads the file (pkg/config/config.go fromFile: the codec factory with
serializer.EnableStrict, so sigs.k8s.io/json's case-sensitive strict decoding): every struct is
an object whose unknown fields are refused (`additionalProperties: false`); `json:",inline"` and
embedded structs lend their fields; `json:"-"` fields do not exist; a pointer, slice or map may be
null (encoding/json leaves it nil); metav1.Duration is a Go duration string (time.ParseDuration),
time.Duration an integer (nanoseconds), resource.Quantity a quantity string or a number. No field
is required by decoding (encoding/json has no required fields): what Kueue's validation
(pkg/config/validation.go) asks besides is checked by the test itself.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPOSITORY = "kubernetes-sigs/kueue"
TYPES = "apis/config/v1beta2/configuration_types.go"
GROUP_VERSION = "apis/config/v1beta2/groupversion_info.go"
CHART_VALUES = "charts/kueue/values.yaml"
# the import alias of configuration_types.go -> the vendored file that declares its types
VENDORED = {
    "metav1": "vendor/k8s.io/apimachinery/pkg/apis/meta/v1/types.go",
    "corev1": "vendor/k8s.io/api/core/v1/types.go",
    "resourcev1": "vendor/k8s.io/api/resource/v1/types.go",
    "configv1alpha1": "vendor/k8s.io/component-base/config/v1alpha1/types.go",
    "clientcmdapi": "vendor/k8s.io/client-go/tools/clientcmd/api/types.go",
}
SCHEMA_FILE = "config.kueue.x-k8s.io_configuration_v1beta2.json"
CHART_FILE = "chart-default-configuration.json"

# Go duration (time.ParseDuration: a sequence of decimal numbers with units, or 0)
DURATION = r"^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$"
# resource.Quantity's string form (the pattern Kubernetes writes into CRDs for int-or-string quantities)
QUANTITY = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)"
            r"|(\.[0-9]+))))?$")
BASIC = {"string": {"type": "string"}, "bool": {"type": "boolean"},
         **{t: {"type": "integer"} for t in ("int", "int8", "int16", "int32", "int64",
                                              "uint", "uint8", "uint16", "uint32", "uint64")},
         "float32": {"type": "number"}, "float64": {"type": "number"}}
SPECIAL = {  # types with their own JSON form
    "metav1.Duration": {"type": "string", "pattern": DURATION},
    "time.Duration": {"type": "integer"},
    "resource.Quantity": {"anyOf": [{"type": "string", "pattern": QUANTITY}, {"type": "number"}]},
}

_TYPE = re.compile(r"^type (\w+) (.+)$")
_TAG = re.compile(r'json:"([^"]*)"')


class GoTypes:
    """The top-level type declarations of Go files, by package alias ("" for the root package)."""

    def __init__(self, sources: dict[str, str]):
        self.structs: dict[tuple[str, str], list[str]] = {}  # the lines of each struct's body
        self.named: dict[tuple[str, str], str] = {}
        for package, text in sources.items():
            self._read(package, text)

    def _read(self, package: str, text: str) -> None:
        lines = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL).splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            match = _TYPE.match(line)
            i += 1
            if not match:
                continue
            name, rest = match.groups()
            if rest.strip() == "struct {":
                body = []
                while lines[i] != "}":
                    body.append(lines[i])
                    i += 1
                self.structs[(package, name)] = body
            elif rest.strip() != "struct{}" and not rest.startswith("interface"):
                self.named[(package, name)] = rest.split("//")[0].strip()

    def schema(self, package: str, go_type: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
        """The JSON Schema of `go_type` as written in `package`."""
        if go_type.startswith("*"):
            return _nullable(self.schema(package, go_type[1:], seen))
        if go_type.startswith("[]"):
            return _nullable({"type": "array", "items": self.schema(package, go_type[2:], seen)})
        if go_type.startswith("map["):
            value = _map_value(go_type)
            return _nullable({"type": "object", "additionalProperties": self.schema(package, value, seen)})
        if go_type in BASIC:
            return dict(BASIC[go_type])
        qualified, key = self._resolve(package, go_type)
        if qualified in SPECIAL:
            return json.loads(json.dumps(SPECIAL[qualified]))
        if qualified in seen:
            raise ValueError(f"recursive type {qualified}: not supported")
        if key in self.named:
            return self.schema(key[0], self.named[key], (*seen, qualified))
        if key in self.structs:
            return self._struct(key, (*seen, qualified))
        raise KeyError(f"type {qualified} is not declared in the sources read")

    def _resolve(self, package: str, go_type: str) -> tuple[str, tuple[str, str]]:
        alias, _, name = go_type.rpartition(".")
        alias = alias or package
        return (f"{alias}.{name}" if alias else name), (alias, name)

    def _struct(self, key: tuple[str, str], seen: tuple[str, ...]) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        fields = [f for f in map(_field, self.structs[key]) if f is not None]  # only the structs used
        for name, go_type, tag in fields:
            json_name, inline = _json_name(name, tag)
            if json_name == "-":
                continue
            if inline:
                embedded = self.schema(key[0], go_type.lstrip("*"), seen)
                properties.update(embedded["properties"])
            else:
                properties[json_name] = self.schema(key[0], go_type, seen)
        return {"type": "object", "additionalProperties": False, "properties": properties}


def _map_value(go_type: str) -> str:
    """The value type of a Go map type (map[K]V: V), K itself possibly of brackets."""
    depth = 0
    for index, char in enumerate(go_type):
        depth += (char == "[") - (char == "]")
        if depth == 0 and char == "]":
            return go_type[index + 1:]
    raise ValueError(f"not a map type: {go_type}")


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def _field(line: str) -> tuple[str | None, str, str | None] | None:
    """(name or None if embedded, type, json tag or None) of a struct's field line, or None."""
    text = line.strip()
    if not text or text.startswith("//"):
        return None
    tag = None
    if "`" in text:
        before, raw, _ = text.split("`", 2)
        found = _TAG.search(raw)
        tag = found.group(1) if found else None
        text = before
    text = text.split("//")[0].strip()
    parts = text.split()
    if len(parts) == 1:
        return None, parts[0], tag
    if len(parts) == 2 and "," not in parts[0]:
        return parts[0], parts[1], tag
    raise ValueError(f"field not understood: {line!r}")


def _json_name(name: str | None, tag: str | None) -> tuple[str, bool]:
    """(the JSON name, whether its fields are inlined) of a field, as encoding/json sees it."""
    options = (tag or "").split(",")
    if options[0] == "-" and len(options) == 1:
        return "-", False
    if name is None and not options[0]:  # an embedded struct without a name of its own
        return "", True
    if "inline" in options[1:]:  # Kubernetes' convention, with an empty name
        return "", True
    return options[0] or (name or ""), False


def configuration_schema(sources: dict[str, str], group_version: str) -> dict[str, Any]:
    """The strict JSON Schema of the Configuration in `sources` (alias -> Go text; "" the root)."""
    group, version = group_version.split("/")
    schema = GoTypes(sources).schema("", "Configuration")
    schema["properties"]["apiVersion"] = {"const": f"{group}/{version}"}
    schema["properties"]["kind"] = {"const": "Configuration"}
    schema["required"] = ["apiVersion", "kind"]
    return schema


def group_version(go_text: str) -> str:
    found = re.search(r'GroupVersion\{Group: "([^"]+)", Version: "([^"]+)"\}', go_text)
    if not found:
        raise ValueError("no GroupVersion in groupversion_info.go")
    return "/".join(found.groups())


def schema_document(sources: dict[str, str], group_version_text: str, ref: str) -> tuple[str, str]:
    gv = group_version(group_version_text)
    group, version = gv.split("/")
    document = {
        "$comment": f"JSON Schema of {gv} Configuration, from {REPOSITORY} {ref} {TYPES} (and {GROUP_VERSION}; "
                    f"the Kubernetes types it uses from vendor/ at that tag), made by "
                    f"tests/data/kueue-config/convert.py (tests/kubernetes/test_kueue_config.py validates fmcluster's "
                    f"Kueue configuration against it)",
        "group": group, "kind": "Configuration", "schema": configuration_schema(sources, gv), "version": version}
    return SCHEMA_FILE, json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def chart_document(values_text: str, ref: str) -> tuple[str, str]:
    values = yaml.safe_load(values_text)
    configuration = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    document = {"$comment": f"The Kueue chart's default Configuration, from {REPOSITORY} {ref} {CHART_VALUES} "
                            "(managerConfig.controllerManagerConfigYaml, parsed), made by "
                            "tests/data/kueue-config/convert.py",
                "configuration": configuration}
    return CHART_FILE, json.dumps(document, indent=1, sort_keys=True) + "\n"


def _show(git_dir: str, ref: str, path: str) -> str:
    return subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{ref}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    git_dir, ref = argv
    sources = {"": _show(git_dir, ref, TYPES), **{a: _show(git_dir, ref, p) for a, p in VENDORED.items()}}
    for name, text in (schema_document(sources, _show(git_dir, ref, GROUP_VERSION), ref),
                       chart_document(_show(git_dir, ref, CHART_VALUES), ref)):
        (HERE / name).write_text(text, encoding="utf-8")
        print(HERE / name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
