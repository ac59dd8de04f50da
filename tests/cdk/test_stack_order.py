"""The deploy order the plan times is the CDK app's: each stack's dependencies in the synthesized
assembly (what `cdk deploy --all` orders the stacks by, and deploys side by side with
--concurrency) are those fmcluster.model.first_deploy.depends_on predicts, for every example and
for variants whose storage holds nothing in the VPC, or a key, or that have no observability."""

from __future__ import annotations

import json

import pytest
import yaml

from fmcluster.model import cluster
from fmcluster.model.first_deploy import depends_on
from fmcluster.spec import loader
from tests.support.paths import EXAMPLES, ROOT


def _without_lustre(data: dict) -> dict:
    del data["storage"]["lustre"]
    data.pop("teams", None)  # the teams' file-system quotas need the file system
    return data


def _with_kms(data: dict) -> dict:
    data["storage"]["kms"] = True
    return data


def _unobserved(data: dict) -> dict:
    data["observability"] = {"prometheus": False, "grafana": False}
    return data


# name -> (the example it edits, the edits)
VARIANTS = {
    "pcs-buckets-only": ("examples/p5-pcs.yaml", (_without_lustre,)),
    "pcs-buckets-and-key": ("examples/p5-pcs.yaml", (_without_lustre, _with_kms)),
    "pcs-buckets-unobserved": ("examples/p5-pcs.yaml", (_without_lustre, _unobserved)),
    "eks-home-only": ("examples/p5en-eks.yaml", (_without_lustre,)),
}
CASES = [(example, None) for example in EXAMPLES] + [(f"variants/{name}.yaml", name) for name in VARIANTS]


def spec_text(name: str | None) -> str | None:
    """The text of a variant, or None for an example as it is."""
    if name is None:
        return None
    source, edits = VARIANTS[name]
    data = yaml.safe_load((ROOT / source).read_text())
    for edit in edits:
        data = edit(data)
    return yaml.safe_dump(data, sort_keys=False)


@pytest.mark.parametrize("example, variant", CASES, ids=[c[0] for c in CASES])
def test_the_models_dependencies_are_the_assemblys(example, variant, corpus):
    text = spec_text(variant)
    result = loader.load_text(text) if text is not None else loader.load(ROOT / example)
    assert result.ok, [d.format() for d in result.diagnostics]
    m = cluster.resolve(result.spec)
    if text is not None:  # the variants together, in one run of the app (tests/support/corpus.py)
        corpus.assemblies([(f"variants/{name}.yaml", spec_text(name)) for name in VARIANTS])
    manifest = json.loads((corpus.assembly(example, text=text) / "manifest.json").read_text())
    stacks = {name: sorted(d for d in artifact.get("dependencies", ()) if not d.endswith(".assets"))
              for name, artifact in manifest["artifacts"].items() if artifact["type"] == "aws:cloudformation:stack"}
    names = {s.key: s.name for s in m.stacks}
    assert stacks == {names[key]: sorted(names[k] for k in after) for key, after in depends_on(m).items()}
