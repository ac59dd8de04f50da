"""`fmcluster plan`: text, markdown and JSON renderings of a `Plan` (fmcluster.plan.report, whose
`build` is the command's `run`). Deterministic: no dates or times other than the price table's
own date, so the output of a spec never changes between runs. Each format has a module of its
own (fmcluster.plan.text, fmcluster.plan.markdown); the rows and lines both lay out are in
fmcluster.plan.compute_rows and fmcluster.plan.cluster_rows."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from fmcluster.plan.markdown import render_markdown
from fmcluster.plan.report import build
from fmcluster.plan.shape.plan import Plan
from fmcluster.plan.text import render_text
from fmcluster.spec.models import ClusterSpec


def render_json(plan: Plan) -> str:
    return plan.model_dump_json(indent=2) + "\n"


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}
FORMATS = tuple(RENDERERS)


def run(spec: ClusterSpec, raw: dict[str, Any] | None = None, checkpoint_params: float | None = None,
        reservations: Iterable[Mapping[str, Any]] = ()) -> Plan:
    """The plan of a valid spec (fmcluster.plan.report.build): a frozen model, for its JSON Schema."""
    return build(spec, raw, checkpoint_params, reservations)


def render(report: Plan, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr)."""
    return RENDERERS[fmt](report), ""


def exit_code(report: Plan) -> int:
    return 0
