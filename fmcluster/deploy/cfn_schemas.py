"""CloudFormation resource schemas, as cfn-lint ships them (cfnlint/data/schemas): which properties
of a resource type are create-only (changing them replaces the resource), whether the schema is a
legacy one (no handlers: converted from the old resource specification, without nested
create-only properties), and which types hold users' data.

Read straight from the installed package's data files, without importing cfn-lint.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

DEFAULT_REGION = "us-east-1"
# What holds users' data: the one list that `fmcluster diff`, `fmcluster change-set` and the
# storage stack's policy judge by ("stateful" in their words). The file system, the buckets, the
# keys that encrypt them, and the metrics (Amazon Managed Service for Prometheus) and dashboards
# (Amazon Managed Grafana) workspaces: replacing or deleting one loses what it holds. A key holds
# data where it encrypts one of the others: `fmcluster diff` sees which in the templates (the
# alerts' topic's key holds none); a change set does not say, so `change-set` counts every key. Not
# cfn-lint's wider list of stateful types: a log group (a handler's, the flow logs) holds no data
# of the users, nor does a queue or a nested stack (its resources are judged themselves). Nor a
# data repository association: it links a file-system path to a bucket prefix, the files being in
# the file system and the bucket; deleting it unlinks them (FSx API Reference,
# DeleteDataRepositoryAssociation: the file system's files go only when DeleteDataInFileSystem
# asks), and fmcluster retains the links, so CloudFormation never deletes one. A link is replaced
# when its file system is, whose loss is the one reported; the stack policy still guards the links
# (fmcluster.deploy.stack_policy).
# The Slurm accounting database of a HyperPod Slurm cluster with teams holds the teams' records
# (jobs, usage), and its secret the only credentials to it.
DATA_TYPES = ("AWS::FSx::FileSystem", "AWS::FSx::Volume", "AWS::S3::Bucket", "AWS::KMS::Key", "AWS::APS::Workspace",
              "AWS::Grafana::Workspace", "AWS::RDS::DBInstance", "AWS::SecretsManager::Secret")
Pointer = tuple[str, ...]


@dataclass(frozen=True)
class Schema:
    type: str
    create_only: tuple[Pointer, ...]  # property paths below /properties; "*" stands for any list item
    legacy: bool


@cache
def data_dir() -> Path | None:
    spec = importlib.util.find_spec("cfnlint")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "data"
    return path if (path / "schemas" / "providers").is_dir() else None


def available() -> bool:
    return data_dir() is not None


def _data_dir() -> Path:
    """data_dir(), where the caller has checked that cfn-lint is there (available())."""
    path = data_dir()
    if path is None:
        raise RuntimeError("cfn-lint's CloudFormation resource schemas are not installed (pip install cfn-lint)")
    return path


@cache
def _providers(region: str) -> dict[str, str]:
    providers = _data_dir() / "schemas" / "providers"
    path = providers / f"{region}.json"
    digests: dict[str, str] = json.loads((path if path.is_file() else providers / f"{DEFAULT_REGION}.json").read_text())
    return digests


def document(type_name: str, region: str = DEFAULT_REGION) -> dict[str, Any] | None:
    """The resource schema of a type, as cfn-lint ships it (parsed JSON), or None."""
    digest = _providers(region).get(type_name) or _providers(DEFAULT_REGION).get(type_name)
    if digest is None:
        return None
    data: dict[str, Any] = json.loads((_data_dir() / "schemas" / "resources" / f"{digest}.json").read_text())
    return data


@cache
def schema(type_name: str, region: str = DEFAULT_REGION) -> Schema | None:
    data = document(type_name, region)
    if data is None:
        return None
    pointers = tuple(tuple(p.split("/")[2:]) for p in data.get("createOnlyProperties", [])
                     if p.startswith("/properties/"))
    return Schema(type_name, pointers, legacy="handlers" not in data)


def holds_data(type_name: str) -> bool:
    """Whether a resource of this type holds users' data (DATA_TYPES)."""
    return type_name in DATA_TYPES


def values_at(value: Any, pointer: Pointer) -> list[Any]:
    """Every value at a pointer ("*" matches each list item); [] where there is none."""
    if not pointer:
        return [value]
    head, rest = pointer[0], pointer[1:]
    if head == "*":
        return [v for item in value for v in values_at(item, rest)] if isinstance(value, list) else []
    if isinstance(value, dict) and head in value:
        return values_at(value[head], rest)
    return []


def dotted(pointer: Pointer) -> str:
    return ".".join("[*]" if p == "*" else p for p in pointer).replace(".[*]", "[*]")
