"""Kueue's own configuration, as fmcluster writes it into the Kueue chart (kueue.kueue_values:
managerConfig.controllerManagerConfigYaml), checked against Kueue's Configuration API.

The Configuration is no CRD, and Kueue publishes no schema of it: only its Go types
(apis/config/v1beta2/configuration_types.go) and the API reference made from them. So
tests/data/kueue-config/ holds a JSON Schema made from those types at the pinned release, strict
as Kueue's decoding is (unknown fields refused), and the chart's default Configuration, both by
tests/data/kueue-config/convert.py (their `$comment`s say from where). What Kueue's validation
asks of the DRA mappings besides (pkg/config/validation.go validateDeviceClassMappings) is checked
here by hand. The Kueue objects (ResourceFlavor, ClusterQueue, LocalQueue, Topology) are checked
against Kueue's CRDs in tests/kubernetes/test_crd_schemas.py; the ClusterQueue's DRA-mapped quota here too.
"""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
import yaml

from fmcluster.facts import kubernetes as k8s
from fmcluster.kubernetes import charts, kueue
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from tests.support.crds import KUBERNETES_EXAMPLES
from tests.support.crds import validate as validate_crd
from tests.support.paths import ROOT

FOLDER = ROOT / "tests" / "data" / "kueue-config"
SCHEMA = json.loads((FOLDER / "config.kueue.x-k8s.io_configuration_v1beta2.json").read_text())
CHART = json.loads((FOLDER / "chart-default-configuration.json").read_text())
ULTRASERVER_EXAMPLE = "examples/p6e-gb200-eks.yaml"


def convert_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("kueue_config_convert", FOLDER / "convert.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def validate(configuration: dict) -> None:
    """As Kueue 0.18.3 reads and validates its configuration file (strict decoding, then the DRA
    mappings' rules of pkg/config/validation.go)."""
    jsonschema.Draft7Validator(SCHEMA["schema"]).validate(configuration)
    mappings = (configuration.get("resources") or {}).get("deviceClassMappings") or []
    assert len(mappings) <= 16
    names, classes = set(), {}
    for mapping in mappings:
        name = mapping["name"]
        assert k8s.label_key_problem(name) is None and len(name) <= 253, name
        assert name not in names, f"duplicate {name}"
        names.add(name)
        device_classes = mapping.get("deviceClassNames") or []
        assert 1 <= len(device_classes) <= 8, name
        assert len(set(device_classes)) == len(device_classes), name
        for device_class in device_classes:
            assert k8s.label_key_problem(device_class) is None and len(device_class) <= 253, device_class
            assert classes.setdefault(device_class, name) == name, f"{device_class} already mapped"
        assert not mapping.get("sources"), "sources need KueueDRAIntegrationPartitionableDevices (off by default)"


def written_configuration(model) -> dict | None:
    """The Configuration the chart gets from fmcluster, read back from its YAML string as the chart's
    `fromYaml` reads it."""
    values = kueue.kueue_values(model)
    text = values.get("managerConfig", {}).get("controllerManagerConfigYaml")
    return None if text is None else yaml.safe_load(text)


def test_the_files_are_of_the_pinned_release():
    for document in (SCHEMA, CHART):
        assert f"kubernetes-sigs/kueue v{charts.KUEUE.version} " in document["$comment"]
    assert f"{SCHEMA['group']}/{SCHEMA['version']}" == kueue.KUEUE_CONFIG_API
    assert SCHEMA["schema"]["properties"]["apiVersion"] == {"const": kueue.KUEUE_CONFIG_API}


def test_fmcluster_starts_from_the_charts_own_default():
    assert kueue.kueue_chart_configuration() == CHART["configuration"]
    validate(CHART["configuration"])  # the schema takes what Kueue itself ships


@pytest.mark.parametrize("example", KUBERNETES_EXAMPLES)
def test_every_examples_kueue_configuration_is_valid(example):
    model = resolve(loader.load(ROOT / example).spec)
    configuration = written_configuration(model)
    if not model.ultraserver_groups and not model.teams:
        assert configuration is None  # the chart's default stays
        return
    assert configuration == kueue.kueue_configuration(model)
    validate(configuration)
    assert ("fairSharing" in configuration) == bool(model.teams)
    assert ("resources" in configuration) == bool(model.ultraserver_groups)


# Kueue 0.18.3 pkg/config/validation.go validStrategySets: the preemption strategies fair sharing takes
FAIR_SHARING_STRATEGY_SETS = (["LessThanOrEqualToFinalShare"], ["LessThanInitialShare"],
                              ["LessThanOrEqualToFinalShare", "LessThanInitialShare"])


def fair_sharing_problem(configuration: dict) -> str | None:
    """What Kueue's validateFairSharing says of the configuration's fairSharing, or None."""
    fair = configuration.get("fairSharing")
    if fair is None:
        return None
    strategies = fair.get("preemptionStrategies") or []
    if not strategies:
        return "preemptionStrategies must be specified"
    return None if strategies in FAIR_SHARING_STRATEGY_SETS else f"unsupported {strategies}"


def test_teams_turn_fair_sharing_on_as_kueue_validates_it():
    """A spec with teams: the chart's default with fairSharing, which Kueue 0.18.3 turns on when
    the field is set (cmd/kueue/main.go), with a set of strategies its validation accepts; a v1beta1
    `enable` is refused by strict decoding, an empty or unknown strategy list by the validation."""
    model = resolve(loader.load(ROOT / "examples/p5en-eks.yaml").spec)
    assert model.teams and not model.ultraserver_groups
    configuration = written_configuration(model)
    validate(configuration)
    assert fair_sharing_problem(configuration) is None
    assert {k: v for k, v in configuration.items() if k != "fairSharing"} == kueue.kueue_chart_configuration()
    for broken, problem in (({}, "must be specified"), ({"preemptionStrategies": []}, "must be specified"),
                            ({"preemptionStrategies": ["LessThanInitialShare", "LessThanOrEqualToFinalShare"]},
                             "unsupported")):
        assert problem in fair_sharing_problem({**configuration, "fairSharing": broken})
    with pytest.raises(jsonschema.ValidationError):
        validate({**configuration, "fairSharing": {"enable": True, **configuration["fairSharing"]}})


def test_the_ultraserver_example_maps_the_channel_class_that_its_queue_covers():
    model = resolve(loader.load(ROOT / ULTRASERVER_EXAMPLE).spec)
    configuration = written_configuration(model)
    (mapping,) = configuration["resources"]["deviceClassMappings"]
    assert mapping == {"name": kueue.IMEX_CHANNEL_RESOURCE,
                       "deviceClassNames": [kueue.COMPUTE_DOMAIN_CHANNEL_CLASS]}
    (queue,) = [m for m in kueue.kueue_manifests(model) if m["kind"] == "ClusterQueue"]
    validate_crd(queue)
    (group,) = queue["spec"]["resourceGroups"]
    assert mapping["name"] in group["coveredResources"]
    # the CRD's CEL rule (not evaluated by jsonschema): as many resources in each flavor as covered
    assert all([r["name"] for r in f["resources"]] == group["coveredResources"] for f in group["flavors"])
    quota = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    for node_group in model.ultraserver_groups:
        assert quota[node_group.name][mapping["name"]] == node_group.max_count
    assert "featureGates" not in configuration  # KueueDRAIntegration is on by default in 0.18


@pytest.mark.parametrize("break_it, message", [
    (lambda c: c.__setitem__("deviceClassMappings", []), "Additional properties"),  # at the top, not in resources
    (lambda c: c["resources"]["deviceClassMappings"][0].__setitem__("deviceClasses", ["x"]), "Additional properties"),
    (lambda c: c["resources"].__setitem__("deviceClassMapping", []), "Additional properties"),
    (lambda c: c["integrations"].__setitem__("frameworks", "batch/job"), "is not valid"),
    (lambda c: c["webhook"].__setitem__("port", "9443"), "is not valid"),
    (lambda c: c.__setitem__("apiVersion", "config.kueue.x-k8s.io/v1beta1"), "was expected"),
    (lambda c: c.__setitem__("fairSharing", {"enable": True}), "is not valid"),  # a v1beta1 field
    (lambda c: c.__setitem__("waitForPodsReady", {"timeout": "five minutes"}), "does not match"),
    (lambda c: c["leaderElection"].__setitem__("leaseDuration", 15), "is not of type"),
])
def test_the_schema_refuses_what_strict_decoding_would(break_it, message):
    configuration = kueue.kueue_configuration(resolve(loader.load(ROOT / ULTRASERVER_EXAMPLE).spec))
    broken = copy.deepcopy(configuration)
    break_it(broken)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(SCHEMA["schema"]).validate(broken)
    assert any(message in m for m in error_messages(broken)), error_messages(broken)


def error_messages(instance: dict) -> list[str]:
    """Every message of the validation errors of `instance`, those inside anyOf (a nullable field) too."""
    found, errors = [], list(jsonschema.Draft7Validator(SCHEMA["schema"]).iter_errors(instance))
    while errors:
        error = errors.pop()
        found.append(error.message)
        errors.extend(error.context or ())
    return found


@pytest.mark.parametrize("break_it", [
    lambda m: m.__setitem__("deviceClassNames", []),
    lambda m: m.__setitem__("name", "Not A Resource"),
    lambda m: m["deviceClassNames"].append(m["deviceClassNames"][0]),
])
def test_kueues_validation_of_the_mappings_is_held(break_it):
    configuration = kueue.kueue_configuration(resolve(loader.load(ROOT / ULTRASERVER_EXAMPLE).spec))
    break_it(configuration["resources"]["deviceClassMappings"][0])
    with pytest.raises(AssertionError):
        validate(configuration)


def test_a_class_mapped_twice_is_refused():
    configuration = kueue.kueue_configuration(resolve(loader.load(ROOT / ULTRASERVER_EXAMPLE).spec))
    mapping = configuration["resources"]["deviceClassMappings"][0]
    configuration["resources"]["deviceClassMappings"].append({**mapping, "name": "example.com/other"})
    with pytest.raises(AssertionError, match="already mapped"):
        validate(configuration)


# --- the converter -------------------------------------------------------------------------------

GO = '''package v9

type Configuration struct {
	metav1.TypeMeta `json:",inline"`

	// Doc comments are skipped.
	Name *string `json:"name,omitempty"`
	Inner `json:",inline"`
	Items []Item `json:"items,omitempty"` // a trailing comment
	Labels map[string]int32 `json:"labels"`
	Wait metav1.Duration `json:"wait"`
	Quota map[corev1.ResourceName]resource.Quantity `json:"quota,omitempty"`
	Hidden string `json:"-"`
	Mode Mode `json:"mode,omitempty"`
}

type Inner struct {
	/* a block
	comment */
	Port *int `json:"port,omitempty"`
}

type Item struct {
	Value float32 `json:"value"`
	Plain bool
}

type Mode string
'''
META = '''package v1

type TypeMeta struct {
	Kind string `json:"kind,omitempty" protobuf:"bytes,1,opt,name=kind"`
	APIVersion string `json:"apiVersion,omitempty" protobuf:"bytes,2,opt,name=apiVersion"`
}
'''
CORE = '''package v1

type ResourceName string
'''


def test_the_converter_reads_go_structs_as_encoding_json_does():
    convert = convert_module()
    schema = convert.configuration_schema({"": GO, "metav1": META, "corev1": CORE}, "example.com/v9")
    nullable = convert._nullable
    assert schema["required"] == ["apiVersion", "kind"] and schema["additionalProperties"] is False
    assert schema["properties"] == {
        "kind": {"const": "Configuration"}, "apiVersion": {"const": "example.com/v9"},
        "name": nullable({"type": "string"}),
        "port": nullable({"type": "integer"}),
        "items": nullable({"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "properties": {"value": {"type": "number"}, "Plain": {"type": "boolean"}}}}),
        "labels": nullable({"type": "object", "additionalProperties": {"type": "integer"}}),
        "wait": convert.SPECIAL["metav1.Duration"],
        "quota": nullable({"type": "object", "additionalProperties": convert.SPECIAL["resource.Quantity"]}),
        "mode": {"type": "string"}}
    validator = jsonschema.Draft7Validator(schema)
    assert validator.is_valid({"apiVersion": "example.com/v9", "kind": "Configuration", "wait": "1h30m",
                               "quota": {"cpu": "500m", "memory": 2}, "name": None})
    assert not validator.is_valid({"apiVersion": "example.com/v9", "kind": "Configuration", "Name": "x"})


def test_the_converter_reads_the_group_version_and_the_charts_default():
    convert = convert_module()
    assert convert.group_version('GroupVersion = schema.GroupVersion{Group: "a.example.com", Version: "v2"}') == \
        "a.example.com/v2"
    config = "apiVersion: a/v1\nkind: Configuration\n"
    values = yaml.safe_dump({"managerConfig": {"controllerManagerConfigYaml": config}})
    name, text = convert.chart_document(values, "v0.0.1")
    assert name == convert.CHART_FILE
    assert json.loads(text)["configuration"] == {"apiVersion": "a/v1", "kind": "Configuration"}
    assert "kubernetes-sigs/kueue v0.0.1 charts/kueue/values.yaml" in json.loads(text)["$comment"]
