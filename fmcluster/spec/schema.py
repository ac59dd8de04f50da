"""`fmcluster schema`: the JSON Schema of the spec (fmcluster.spec.models), which editors use to
complete and check spec files (docs/cluster-spec.schema.json is its output). `fmcluster plan
--json-schema` renders the plan's schema through the same report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fmcluster.spec.models import json_schema

FORMATS = ("json",)


@dataclass(frozen=True)
class SchemaReport:
    schema: dict[str, Any]


def run() -> SchemaReport:
    return SchemaReport(json_schema())


def render(report: SchemaReport, fmt: str = "json") -> tuple[str, str]:
    """(stdout, stderr): the schema as indented JSON."""
    return json.dumps(report.schema, indent=2) + "\n", ""


def exit_code(report: SchemaReport) -> int:
    return 0
